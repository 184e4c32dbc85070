//! The pod resources API v1 server (`PodResourcesLister`): `List`,
//! `GetAllocatableResources` and `Get` (v1.27's, behind `KubeletPodResourcesGet`) from the
//! app's provider.

use std::sync::Arc;

use super::wire::podresources as api;
use crate::ports::device_plugins::{PodResources, PodResourcesProvider, ResourceDevices};

struct Lister {
    provider: Arc<dyn PodResourcesProvider>,
}

fn devices_to_wire(d: ResourceDevices) -> api::ContainerDevices {
    api::ContainerDevices {
        resource_name: d.resource_name,
        device_ids: d.device_ids,
        topology: (!d.numa_nodes.is_empty()).then(|| api::TopologyInfo {
            nodes: d
                .numa_nodes
                .into_iter()
                .map(|id| api::NumaNode { id })
                .collect(),
        }),
    }
}

fn pod_to_wire(p: PodResources) -> api::PodResources {
    api::PodResources {
        name: p.name,
        namespace: p.namespace,
        containers: p
            .containers
            .into_iter()
            .map(|c| api::ContainerResources {
                name: c.name,
                devices: c.devices.into_iter().map(devices_to_wire).collect(),
                cpu_ids: c.cpu_ids,
                memory: Vec::new(),
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl api::pod_resources_lister_server::PodResourcesLister for Lister {
    async fn list(
        &self,
        _request: tonic::Request<api::ListPodResourcesRequest>,
    ) -> Result<tonic::Response<api::ListPodResourcesResponse>, tonic::Status> {
        let pod_resources = self.provider.list().into_iter().map(pod_to_wire).collect();
        Ok(tonic::Response::new(api::ListPodResourcesResponse {
            pod_resources,
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _request: tonic::Request<api::AllocatableResourcesRequest>,
    ) -> Result<tonic::Response<api::AllocatableResourcesResponse>, tonic::Status> {
        let (devices, cpu_ids) = self.provider.allocatable();
        Ok(tonic::Response::new(api::AllocatableResourcesResponse {
            devices: devices.into_iter().map(devices_to_wire).collect(),
            cpu_ids,
            memory: Vec::new(),
        }))
    }

    async fn get(
        &self,
        request: tonic::Request<api::GetPodResourcesRequest>,
    ) -> Result<tonic::Response<api::GetPodResourcesResponse>, tonic::Status> {
        let request = request.into_inner();
        // Upstream returns a plain Go error, which gRPC sends as `Unknown`.
        let pod = self
            .provider
            .get(&request.pod_namespace, &request.pod_name)
            .map_err(|e| tonic::Status::unknown(e.to_string()))?;
        Ok(tonic::Response::new(api::GetPodResourcesResponse {
            pod_resources: Some(pod_to_wire(pod)),
        }))
    }
}

pub(super) fn server(
    provider: Arc<dyn PodResourcesProvider>,
) -> api::pod_resources_lister_server::PodResourcesListerServer<
    impl api::pod_resources_lister_server::PodResourcesLister,
> {
    api::pod_resources_lister_server::PodResourcesListerServer::new(Lister { provider })
}
