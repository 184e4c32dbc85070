//! Device plugins over their unix sockets (tonic): the `Registration` server the kubelet
//! serves, the `DevicePlugin` client of each plugin, the pod resources API v1 server,
//! and the device plugins folder with its checkpoint. The generated wire types stay
//! here; `wire` is public only so tests can call the kubelet as a plugin or a monitoring
//! agent does.

use std::os::unix::fs::{DirBuilderExt, FileTypeExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message as _;
use tokio::net::{UnixListener, UnixStream};
use tonic::transport::{Channel, Endpoint, Uri};
use tower::service_fn;
use tracing::{debug, warn};

use crate::domain::devices::{
    ContainerAllocateResponse, Device, DeviceMount, DeviceSpec, PluginOptions, HEALTHY,
};
use crate::ports::device_plugins::{
    DevicePluginClient, DevicePluginError, DevicePlugins, DeviceWatch, PodResourcesProvider,
    RegisterRequest, RegistrationHandler,
};

mod authority;
mod pod_resources;

/// The generated types and services.
#[doc(hidden)]
pub mod wire {
    #[allow(clippy::all, clippy::pedantic, clippy::unwrap_used, missing_docs)]
    pub mod deviceplugin {
        tonic::include_proto!("v1beta1");
    }
    #[allow(clippy::all, clippy::pedantic, clippy::unwrap_used, missing_docs)]
    pub mod podresources {
        tonic::include_proto!("v1");
    }
}

use wire::deviceplugin as api;

/// Upstream's dial timeout, and this adapter's bound on each unary call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

fn io_error<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> DevicePluginError + 'a {
    move |source| DevicePluginError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn call_error(socket: &Path, call: &'static str, status: &tonic::Status) -> DevicePluginError {
    DevicePluginError::Call {
        socket: socket.display().to_string(),
        call,
        message: format!(
            "rpc error: code = {:?} desc = {}",
            status.code(),
            status.message()
        ),
    }
}

fn timed_out(socket: &Path, call: &'static str) -> DevicePluginError {
    DevicePluginError::Call {
        socket: socket.display().to_string(),
        call,
        message: "context deadline exceeded".into(),
    }
}

/// Listens on `socket` (its folder made, a stale file removed), serving `service` over
/// HTTP/2 on each connection: one gRPC service per socket, so no router.
fn serve<S>(socket: &Path, service: S) -> Result<(), DevicePluginError>
where
    S: tower::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = hyper::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    if let Some(dir) = socket.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(dir)
            .map_err(io_error("create", dir))?;
    }
    match std::fs::remove_file(socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error("remove", socket)(e)),
    }
    let listener = UnixListener::bind(socket).map_err(io_error("listen on", socket))?;
    let path = socket.to_path_buf();
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    warn!(socket = %path.display(), error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let service = service.clone();
            let stream = rewrite_authority(stream);
            tokio::spawn(async move {
                let hyper_service = hyper::service::service_fn(move |req| {
                    let mut service = service.clone();
                    tower::Service::call(&mut service, req)
                });
                if let Err(e) = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), hyper_service)
                    .await
                {
                    debug!(error = %e, "gRPC connection ended");
                }
            });
        }
    });
    Ok(())
}

/// The connection as the server reads it: the client's bytes through
/// [`authority::AuthorityRewriter`] (grpc-go clients send the socket's path as
/// `:authority`), the server's bytes back unchanged.
fn rewrite_authority(stream: UnixStream) -> tokio::io::DuplexStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const BUFFER: usize = 64 * 1024;
    let (server_side, proxy) = tokio::io::duplex(BUFFER);
    let (mut client_read, mut client_write) = stream.into_split();
    let (mut proxy_read, mut proxy_write) = tokio::io::split(proxy);
    tokio::spawn(async move {
        let mut rewriter = authority::AuthorityRewriter::default();
        let mut buf = vec![0u8; BUFFER];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let out = rewriter.feed(&buf[..n]);
            if proxy_write.write_all(&out).await.is_err() {
                break;
            }
        }
        let _ = proxy_write.shutdown().await;
    });
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut proxy_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    server_side
}

struct RegistrationServer {
    handler: Arc<dyn RegistrationHandler>,
}

#[tonic::async_trait]
impl api::registration_server::Registration for RegistrationServer {
    async fn register(
        &self,
        request: tonic::Request<api::RegisterRequest>,
    ) -> Result<tonic::Response<api::Empty>, tonic::Status> {
        let r = request.into_inner();
        let options = r.options.unwrap_or_default();
        self.handler
            .register(RegisterRequest {
                version: r.version,
                endpoint: r.endpoint,
                resource_name: r.resource_name,
                options: PluginOptions {
                    pre_start_required: options.pre_start_required,
                    get_preferred_allocation_available: options.get_preferred_allocation_available,
                },
            })
            .await
            .map(|()| tonic::Response::new(api::Empty {}))
            .map_err(tonic::Status::unknown)
    }
}

fn options_from_wire(o: api::DevicePluginOptions) -> PluginOptions {
    PluginOptions {
        pre_start_required: o.pre_start_required,
        get_preferred_allocation_available: o.get_preferred_allocation_available,
    }
}

fn device_from_wire(d: api::Device) -> Device {
    Device {
        healthy: d.health == HEALTHY,
        numa_nodes: d
            .topology
            .map(|t| t.nodes.iter().map(|n| n.id).collect())
            .unwrap_or_default(),
        id: d.id,
    }
}

fn response_from_wire(r: api::ContainerAllocateResponse) -> ContainerAllocateResponse {
    ContainerAllocateResponse {
        envs: r.envs,
        mounts: r
            .mounts
            .into_iter()
            .map(|m| DeviceMount {
                container_path: m.container_path,
                host_path: m.host_path,
                read_only: m.read_only,
            })
            .collect(),
        devices: r
            .devices
            .into_iter()
            .map(|d| DeviceSpec {
                container_path: d.container_path,
                host_path: d.host_path,
                permissions: d.permissions,
            })
            .collect(),
        annotations: r.annotations,
    }
}

struct Client {
    socket: std::path::PathBuf,
    channel: Channel,
}

impl Client {
    fn api(&self) -> api::device_plugin_client::DevicePluginClient<Channel> {
        api::device_plugin_client::DevicePluginClient::new(self.channel.clone())
    }

    async fn unary<T>(
        &self,
        call: &'static str,
        f: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, DevicePluginError> {
        match tokio::time::timeout(CALL_TIMEOUT, f).await {
            Err(_) => Err(timed_out(&self.socket, call)),
            Ok(Err(status)) => Err(call_error(&self.socket, call, &status)),
            Ok(Ok(r)) => Ok(r.into_inner()),
        }
    }
}

#[async_trait]
impl DevicePluginClient for Client {
    async fn options(&self) -> Result<PluginOptions, DevicePluginError> {
        let mut api = self.api();
        self.unary(
            "GetDevicePluginOptions",
            api.get_device_plugin_options(api::Empty {}),
        )
        .await
        .map(options_from_wire)
    }

    async fn list_and_watch(&self) -> Result<Box<dyn DeviceWatch>, DevicePluginError> {
        let mut api = self.api();
        let stream = self
            .unary("ListAndWatch", api.list_and_watch(api::Empty {}))
            .await?;
        Ok(Box::new(Watch {
            socket: self.socket.clone(),
            stream,
        }))
    }

    async fn preferred_allocation(
        &self,
        available: Vec<String>,
        must_include: Vec<String>,
        size: usize,
    ) -> Result<Vec<String>, DevicePluginError> {
        let mut api = self.api();
        let request = api::PreferredAllocationRequest {
            container_requests: vec![api::ContainerPreferredAllocationRequest {
                available_device_i_ds: available,
                must_include_device_i_ds: must_include,
                allocation_size: i32::try_from(size).unwrap_or(i32::MAX),
            }],
        };
        let answer = self
            .unary(
                "GetPreferredAllocation",
                api.get_preferred_allocation(request),
            )
            .await?;
        Ok(answer
            .container_responses
            .into_iter()
            .next()
            .map(|r| r.device_i_ds)
            .unwrap_or_default())
    }

    async fn allocate(
        &self,
        device_ids: Vec<String>,
    ) -> Result<Option<(ContainerAllocateResponse, Vec<u8>)>, DevicePluginError> {
        let mut api = self.api();
        let request = api::AllocateRequest {
            container_requests: vec![api::ContainerAllocateRequest {
                devices_ids: device_ids,
            }],
        };
        let answer = self.unary("Allocate", api.allocate(request)).await?;
        Ok(answer.container_responses.into_iter().next().map(|r| {
            let bytes = r.encode_to_vec();
            (response_from_wire(r), bytes)
        }))
    }

    async fn pre_start_container(&self, device_ids: Vec<String>) -> Result<(), DevicePluginError> {
        let mut api = self.api();
        self.unary(
            "PreStartContainer",
            api.pre_start_container(api::PreStartContainerRequest {
                devices_ids: device_ids,
            }),
        )
        .await
        .map(|_| ())
    }
}

struct Watch {
    socket: std::path::PathBuf,
    stream: tonic::Streaming<api::ListAndWatchResponse>,
}

#[async_trait]
impl DeviceWatch for Watch {
    async fn next(&mut self) -> Result<Option<Vec<Device>>, DevicePluginError> {
        match self.stream.message().await {
            Ok(Some(answer)) => Ok(Some(
                answer.devices.into_iter().map(device_from_wire).collect(),
            )),
            Ok(None) => Ok(None),
            Err(status) => Err(call_error(&self.socket, "ListAndWatch", &status)),
        }
    }
}

/// The device plugins of this host.
#[derive(Debug, Clone, Default)]
pub struct SocketDevicePlugins;

#[async_trait]
impl DevicePlugins for SocketDevicePlugins {
    fn prepare_dir(&self, dir: &Path, keep: &Path) -> Result<(), DevicePluginError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(dir)
            .map_err(io_error("create", dir))?;
        for entry in std::fs::read_dir(dir).map_err(io_error("read", dir))? {
            let entry = entry.map_err(io_error("read", dir))?;
            let path = entry.path();
            // The entry's own type: a link is removed, not followed.
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if path == keep || is_dir {
                continue;
            }
            if let Err(e) = std::fs::remove_file(&path) {
                warn!(path = %path.display(), error = %e, "Failed to remove file");
            }
        }
        Ok(())
    }

    fn read_checkpoint(&self, path: &Path) -> Result<Option<String>, DevicePluginError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("read", path)(e)),
        }
    }

    fn write_checkpoint(&self, path: &Path, contents: &str) -> Result<(), DevicePluginError> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::write(&tmp, contents).map_err(io_error("write", &tmp))?;
        std::fs::rename(&tmp, path).map_err(io_error("rename", path))
    }

    async fn serve_registration(
        &self,
        socket: &Path,
        handler: Arc<dyn RegistrationHandler>,
    ) -> Result<(), DevicePluginError> {
        serve(
            socket,
            api::registration_server::RegistrationServer::new(RegistrationServer { handler }),
        )
    }

    async fn serve_pod_resources(
        &self,
        socket: &Path,
        provider: Arc<dyn PodResourcesProvider>,
    ) -> Result<(), DevicePluginError> {
        serve(socket, pod_resources::server(provider))
    }

    async fn connect(
        &self,
        endpoint: &Path,
    ) -> Result<Arc<dyn DevicePluginClient>, DevicePluginError> {
        let path = endpoint.to_path_buf();
        let endpoint_config =
            Endpoint::from_static("http://localhost").connect_timeout(CALL_TIMEOUT);
        let dial = endpoint_config.connect_with_connector(service_fn(move |_: Uri| {
            let path = path.clone();
            async move { UnixStream::connect(path).await.map(TokioIo::new) }
        }));
        let channel = match tokio::time::timeout(CALL_TIMEOUT, dial).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(e)) => {
                return Err(DevicePluginError::Call {
                    socket: endpoint.display().to_string(),
                    call: "dial",
                    message: format!("failed to dial device plugin: {e}"),
                })
            }
            Err(_) => return Err(timed_out(endpoint, "dial")),
        };
        Ok(Arc::new(Client {
            socket: endpoint.to_path_buf(),
            channel,
        }))
    }

    fn decode_response(&self, bytes: &[u8]) -> Option<ContainerAllocateResponse> {
        api::ContainerAllocateResponse::decode(bytes)
            .ok()
            .map(response_from_wire)
    }
}

/// Whether `path` is a socket (tests wait for the kubelet's).
pub fn is_socket(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests;
