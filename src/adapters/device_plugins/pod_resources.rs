//! The pod resources API v1 server (`PodResourcesLister`): `List` and
//! `GetAllocatableResources` from the app's provider. (`Get` is v1.27's, alpha.)

use std::sync::Arc;

use super::wire::podresources as api;
use crate::ports::device_plugins::{PodResourcesProvider, ResourceDevices};

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

#[tonic::async_trait]
impl api::pod_resources_lister_server::PodResourcesLister for Lister {
    async fn list(
        &self,
        _request: tonic::Request<api::ListPodResourcesRequest>,
    ) -> Result<tonic::Response<api::ListPodResourcesResponse>, tonic::Status> {
        let pod_resources = self
            .provider
            .list()
            .into_iter()
            .map(|p| api::PodResources {
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
            })
            .collect();
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
}

pub(super) fn server(
    provider: Arc<dyn PodResourcesProvider>,
) -> api::pod_resources_lister_server::PodResourcesListerServer<
    impl api::pod_resources_lister_server::PodResourcesLister,
> {
    api::pod_resources_lister_server::PodResourcesListerServer::new(Lister { provider })
}
