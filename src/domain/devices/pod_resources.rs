//! The pod resources API's answers (upstream `podresources/server_v1.go`): one pod's
//! entry (each container's devices and exclusive CPUs), which `List` gives for every
//! active pod and `Get` (v1.27's, behind the `KubeletPodResourcesGet` gate) for the pod
//! asked for, and `Get`'s refusals in upstream's words.

use thiserror::Error;

use super::{DeviceManagerState, NODE_WITHOUT_TOPOLOGY};
use crate::domain::pod::Pod;

/// The feature gate that enables `Get` (alpha, off by default).
pub const GET_FEATURE_GATE: &str = "KubeletPodResourcesGet";

/// A pod the pod loop runs, as the pod resources API sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivePod {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    pub containers: Vec<String>,
}

impl ActivePod {
    pub fn of(pod: &Pod) -> ActivePod {
        ActivePod {
            uid: pod.metadata.uid.clone(),
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            containers: pod
                .spec
                .init_containers
                .iter()
                .chain(&pod.spec.containers)
                .map(|c| c.name.clone())
                .collect(),
        }
    }
}

/// One resource's devices (held by a container, or one allocatable device).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceDevices {
    pub resource_name: String,
    pub device_ids: Vec<String>,
    /// NUMA nodes; empty without topology.
    pub numa_nodes: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerResources {
    pub name: String,
    pub devices: Vec<ResourceDevices>,
    /// Exclusive CPUs (the static CPU manager's; empty without it).
    pub cpu_ids: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodResources {
    pub name: String,
    pub namespace: String,
    pub containers: Vec<ContainerResources>,
}

/// Why `Get` answers with an error, in upstream's words (a gRPC `Unknown` status).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GetPodResourcesError {
    #[error("PodResources API Get method disabled")]
    Disabled,
    #[error("pod {name} in namespace {namespace} not found")]
    NotFound { name: String, namespace: String },
}

/// The NUMA nodes the API reports: the devices' own, without the no-topology marker.
pub fn numa_nodes(nodes: impl Iterator<Item = i64>) -> Vec<i64> {
    nodes.filter(|n| *n != NODE_WITHOUT_TOPOLOGY).collect()
}

/// One pod's entry: each container's devices from `devices`, its exclusive CPUs from
/// `cpus` (pod UID, container name).
pub fn pod_resources(
    pod: &ActivePod,
    devices: &DeviceManagerState,
    cpus: &dyn Fn(&str, &str) -> Vec<i64>,
) -> PodResources {
    PodResources {
        name: pod.name.clone(),
        namespace: pod.namespace.clone(),
        containers: pod
            .containers
            .iter()
            .map(|name| ContainerResources {
                name: name.clone(),
                devices: devices
                    .devices_of(&pod.uid, name)
                    .into_iter()
                    .map(|(resource, held)| ResourceDevices {
                        resource_name: resource,
                        device_ids: held.ids().into_iter().collect(),
                        numa_nodes: numa_nodes(held.devices_per_numa.keys().copied()),
                    })
                    .collect(),
                cpu_ids: cpus(&pod.uid, name),
            })
            .collect(),
    }
}

/// `List`: every active pod's entry.
pub fn list(
    pods: &[ActivePod],
    devices: &DeviceManagerState,
    cpus: &dyn Fn(&str, &str) -> Vec<i64>,
) -> Vec<PodResources> {
    pods.iter()
        .map(|pod| pod_resources(pod, devices, cpus))
        .collect()
}

/// `Get`: the entry of the active pod `namespace`/`name`; refused while the gate is off.
pub fn get(
    enabled: bool,
    pods: &[ActivePod],
    namespace: &str,
    name: &str,
    devices: &DeviceManagerState,
    cpus: &dyn Fn(&str, &str) -> Vec<i64>,
) -> Result<PodResources, GetPodResourcesError> {
    if !enabled {
        return Err(GetPodResourcesError::Disabled);
    }
    pods.iter()
        .find(|p| p.namespace == namespace && p.name == name)
        .map(|pod| pod_resources(pod, devices, cpus))
        .ok_or_else(|| GetPodResourcesError::NotFound {
            name: name.to_string(),
            namespace: namespace.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::devices::{ContainerAllocateResponse, Device, PluginOptions};

    fn pod(uid: &str, namespace: &str, name: &str, containers: &[&str]) -> ActivePod {
        ActivePod {
            uid: uid.into(),
            name: name.into(),
            namespace: namespace.into(),
            containers: containers.iter().map(|c| (*c).to_string()).collect(),
        }
    }

    /// `r` with `Dev0` (NUMA 0) and `Dev1` (no topology), `Dev0` held by u1's `app`.
    fn devices() -> DeviceManagerState {
        let mut s = DeviceManagerState::default();
        s.plugin_connected("r", PluginOptions::default());
        s.update_devices(
            "r",
            vec![
                Device {
                    id: "Dev0".into(),
                    healthy: true,
                    numa_nodes: vec![0],
                },
                Device {
                    id: "Dev1".into(),
                    healthy: true,
                    numa_nodes: vec![],
                },
            ],
        );
        let ids = vec!["Dev0".to_string()];
        s.commit(
            "u1",
            "app",
            "r",
            &ids,
            ContainerAllocateResponse::default(),
            Vec::new(),
        );
        s
    }

    fn cpus(uid: &str, container: &str) -> Vec<i64> {
        if (uid, container) == ("u1", "app") {
            vec![1]
        } else {
            Vec::new()
        }
    }

    // Get answers the pod's entry exactly as List gives it.
    #[test]
    fn get_answers_lists_entry_for_the_pod() {
        let pods = [
            pod("u0", "default", "other", &["c"]),
            pod("u1", "default", "gpu", &["init", "app"]),
        ];
        let state = devices();
        let listed = list(&pods, &state, &cpus);
        let got = get(true, &pods, "default", "gpu", &state, &cpus);
        assert_eq!(got.as_ref(), Ok(&listed[1]));
        let app = &listed[1].containers[1];
        assert_eq!(app.cpu_ids, [1]);
        assert_eq!(
            app.devices,
            [ResourceDevices {
                resource_name: "r".into(),
                device_ids: vec!["Dev0".into()],
                numa_nodes: vec![0],
            }]
        );
        assert!(listed[1].containers[0].devices.is_empty());
    }

    // Upstream's errors: the gate off first, then a pod of another namespace or none.
    #[test]
    fn get_is_refused_when_disabled_or_missing() {
        let pods = [pod("u1", "default", "gpu", &["app"])];
        let state = devices();
        assert_eq!(
            get(false, &pods, "default", "gpu", &state, &cpus).map_err(|e| e.to_string()),
            Err("PodResources API Get method disabled".to_string())
        );
        assert_eq!(
            get(true, &pods, "kube-system", "gpu", &state, &cpus).map_err(|e| e.to_string()),
            Err("pod gpu in namespace kube-system not found".to_string())
        );
    }
}
