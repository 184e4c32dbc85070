//! The adapter against itself over real unix sockets: a plugin served with the generated
//! `DevicePlugin` server, the kubelet's two servers called with the generated clients.

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures_util::Stream;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use super::wire::podresources as pr;
use super::*;
use crate::ports::device_plugins::{
    ContainerResources, GetPodResourcesError, PodResources, ResourceDevices,
};

async fn channel(socket: &Path) -> Channel {
    let socket = socket.to_path_buf();
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { UnixStream::connect(socket).await.map(TokioIo::new) }
        }))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

#[derive(Default)]
struct Recorder(Mutex<Vec<RegisterRequest>>);

#[async_trait]
impl RegistrationHandler for Recorder {
    async fn register(&self, request: RegisterRequest) -> Result<(), String> {
        let refused = request.resource_name == "cpu";
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request);
        if refused {
            Err("the ResourceName \"cpu\" is invalid".into())
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn registration_reaches_the_handler_and_a_refusal_reaches_the_plugin() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let socket = dir.path().join("device-plugins/kubelet.sock");
    let recorder = Arc::new(Recorder::default());
    SocketDevicePlugins
        .serve_registration(
            &socket,
            Arc::clone(&recorder) as Arc<dyn RegistrationHandler>,
        )
        .await
        .unwrap_or_else(|e| panic!("serve: {e}"));
    let mut client = api::registration_client::RegistrationClient::new(channel(&socket).await);
    let request = |name: &str| api::RegisterRequest {
        version: "v1beta1".into(),
        endpoint: "p.sock".into(),
        resource_name: name.into(),
        options: Some(api::DevicePluginOptions {
            pre_start_required: true,
            get_preferred_allocation_available: false,
        }),
    };
    assert!(client.register(request("example.com/r")).await.is_ok());
    let refused = client.register(request("cpu")).await.err();
    assert_eq!(
        refused.as_ref().map(tonic::Status::message),
        Some("the ResourceName \"cpu\" is invalid")
    );
    let seen = recorder.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].endpoint, "p.sock");
    assert!(seen[0].options.pre_start_required);
}

struct Plugin;

type Devices = Pin<Box<dyn Stream<Item = Result<api::ListAndWatchResponse, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl api::device_plugin_server::DevicePlugin for Plugin {
    type ListAndWatchStream = Devices;

    async fn get_device_plugin_options(
        &self,
        _: tonic::Request<api::Empty>,
    ) -> Result<tonic::Response<api::DevicePluginOptions>, tonic::Status> {
        Ok(tonic::Response::new(api::DevicePluginOptions {
            pre_start_required: false,
            get_preferred_allocation_available: true,
        }))
    }

    async fn list_and_watch(
        &self,
        _: tonic::Request<api::Empty>,
    ) -> Result<tonic::Response<Devices>, tonic::Status> {
        let devices = api::ListAndWatchResponse {
            devices: vec![
                api::Device {
                    id: "D1".into(),
                    health: "Healthy".into(),
                    topology: Some(api::TopologyInfo {
                        nodes: vec![api::NumaNode { id: 1 }],
                    }),
                },
                api::Device {
                    id: "D2".into(),
                    health: "Unhealthy".into(),
                    topology: None,
                },
            ],
        };
        // One list, then the stream ends (the plugin went away).
        Ok(tonic::Response::new(Box::pin(futures_util::stream::iter(
            vec![Ok(devices)],
        ))))
    }

    async fn get_preferred_allocation(
        &self,
        request: tonic::Request<api::PreferredAllocationRequest>,
    ) -> Result<tonic::Response<api::PreferredAllocationResponse>, tonic::Status> {
        let r = request.into_inner();
        let mut ids = r.container_requests[0].available_device_i_ds.clone();
        ids.reverse();
        Ok(tonic::Response::new(api::PreferredAllocationResponse {
            container_responses: vec![api::ContainerPreferredAllocationResponse {
                device_i_ds: ids,
            }],
        }))
    }

    async fn allocate(
        &self,
        request: tonic::Request<api::AllocateRequest>,
    ) -> Result<tonic::Response<api::AllocateResponse>, tonic::Status> {
        let ids = request.into_inner().container_requests[0]
            .devices_ids
            .clone();
        Ok(tonic::Response::new(api::AllocateResponse {
            container_responses: vec![api::ContainerAllocateResponse {
                envs: [("IDS".to_owned(), ids.join(","))].into(),
                mounts: vec![api::Mount {
                    container_path: "/m".into(),
                    host_path: "/h".into(),
                    read_only: true,
                }],
                devices: vec![api::DeviceSpec {
                    container_path: "/dev/d".into(),
                    host_path: "/dev/null".into(),
                    permissions: "rw".into(),
                }],
                annotations: [("a".to_owned(), "b".to_owned())].into(),
            }],
        }))
    }

    async fn pre_start_container(
        &self,
        _: tonic::Request<api::PreStartContainerRequest>,
    ) -> Result<tonic::Response<api::PreStartContainerResponse>, tonic::Status> {
        Err(tonic::Status::unavailable("not ready"))
    }
}

#[tokio::test]
async fn the_client_speaks_to_a_plugin_and_its_answer_survives_the_checkpoint_bytes() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let socket = dir.path().join("p.sock");
    serve(
        &socket,
        api::device_plugin_server::DevicePluginServer::new(Plugin),
    )
    .unwrap_or_else(|e| panic!("serve: {e}"));
    let plugins = SocketDevicePlugins;
    let client = plugins
        .connect(&socket)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let options = client.options().await.unwrap_or_default();
    assert!(options.get_preferred_allocation_available);
    let mut watch = client
        .list_and_watch()
        .await
        .unwrap_or_else(|e| panic!("ListAndWatch: {e}"));
    let devices = watch.next().await.ok().flatten().unwrap_or_default();
    assert_eq!(
        devices,
        vec![
            Device {
                id: "D1".into(),
                healthy: true,
                numa_nodes: vec![1]
            },
            Device {
                id: "D2".into(),
                healthy: false,
                numa_nodes: Vec::new()
            },
        ]
    );
    assert!(matches!(watch.next().await, Ok(None)), "the stream ended");
    let preferred = client
        .preferred_allocation(vec!["D1".into(), "D2".into()], Vec::new(), 1)
        .await
        .unwrap_or_default();
    assert_eq!(preferred, vec!["D2".to_owned(), "D1".to_owned()]);
    let (response, bytes) = client
        .allocate(vec!["D1".into()])
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    assert_eq!(response.envs["IDS"], "D1");
    assert_eq!(response.mounts[0].container_path, "/m");
    assert!(response.mounts[0].read_only);
    assert_eq!(response.devices[0].permissions, "rw");
    assert_eq!(plugins.decode_response(&bytes), Some(response));
    let failed = client.pre_start_container(vec!["D1".into()]).await;
    assert!(
        failed.as_ref().err().is_some_and(|e| e
            .to_string()
            .contains("rpc error: code = Unavailable desc = not ready")),
        "{failed:?}"
    );
    // A socket no one serves: upstream's dial failure.
    let gone = plugins.connect(&dir.path().join("gone.sock")).await.err();
    assert!(
        gone.is_some_and(|e| e.to_string().contains("failed to dial device plugin")),
        "dial of a missing socket"
    );
}

struct Provider;

impl PodResourcesProvider for Provider {
    fn list(&self) -> Vec<PodResources> {
        vec![PodResources {
            name: "p".into(),
            namespace: "default".into(),
            containers: vec![ContainerResources {
                name: "c".into(),
                devices: vec![ResourceDevices {
                    resource_name: "example.com/r".into(),
                    device_ids: vec!["D1".into()],
                    numa_nodes: vec![0],
                }],
                cpu_ids: Vec::new(),
            }],
        }]
    }

    fn get(&self, namespace: &str, name: &str) -> Result<PodResources, GetPodResourcesError> {
        self.list()
            .into_iter()
            .find(|p| p.namespace == namespace && p.name == name)
            .ok_or_else(|| GetPodResourcesError::NotFound {
                name: name.into(),
                namespace: namespace.into(),
            })
    }

    fn allocatable(&self) -> (Vec<ResourceDevices>, Vec<i64>) {
        (
            vec![ResourceDevices {
                resource_name: "example.com/r".into(),
                device_ids: vec!["D1".into()],
                numa_nodes: Vec::new(),
            }],
            Vec::new(),
        )
    }
}

#[tokio::test]
async fn the_pod_resources_server_answers_list_allocatable_and_get() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let socket = dir.path().join("pod-resources/kubelet.sock");
    SocketDevicePlugins
        .serve_pod_resources(&socket, Arc::new(Provider))
        .await
        .unwrap_or_else(|e| panic!("serve: {e}"));
    let mut client =
        pr::pod_resources_lister_client::PodResourcesListerClient::new(channel(&socket).await);
    let list = client
        .list(pr::ListPodResourcesRequest {})
        .await
        .map(tonic::Response::into_inner)
        .unwrap_or_default();
    let devices = &list.pod_resources[0].containers[0].devices[0];
    assert_eq!(devices.device_ids, vec!["D1".to_owned()]);
    assert_eq!(
        devices.topology.as_ref().map(|t| t.nodes.len()),
        Some(1),
        "NUMA node 0"
    );
    let allocatable = client
        .get_allocatable_resources(pr::AllocatableResourcesRequest {})
        .await
        .map(tonic::Response::into_inner)
        .unwrap_or_default();
    assert_eq!(allocatable.devices.len(), 1);
    assert_eq!(allocatable.devices[0].topology, None);
    let got = client
        .get(pr::GetPodResourcesRequest {
            pod_name: "p".into(),
            pod_namespace: "default".into(),
        })
        .await
        .map(tonic::Response::into_inner)
        .unwrap_or_default();
    assert_eq!(got.pod_resources.as_ref(), list.pod_resources.first());
    // Upstream's plain Go error reaches the client as `Unknown` with its text.
    let missing = client
        .get(pr::GetPodResourcesRequest {
            pod_name: "q".into(),
            pod_namespace: "default".into(),
        })
        .await
        .err();
    assert_eq!(
        missing.map(|s| (s.code(), s.message().to_owned())),
        Some((
            tonic::Code::Unknown,
            "pod q in namespace default not found".to_owned()
        ))
    );
}
