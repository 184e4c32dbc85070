//! The node status the kubelet reports (upstream's `nodestatus` setters): addresses,
//! capacity and allocatable, nodeInfo, the kubelet endpoint, images, and the conditions
//! with their transitions and the events those transitions record.

// `core::net`: the address types only (no sockets).
use core::net::IpAddr;

use thiserror::Error;

use super::model::{
    ConditionStatus, ContainerImage, NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo,
    ResourceList, Time,
};
use super::readiness::aggregate_message;

pub const CONDITION_READY: &str = "Ready";
pub const CONDITION_MEMORY_PRESSURE: &str = "MemoryPressure";
pub const CONDITION_DISK_PRESSURE: &str = "DiskPressure";
pub const CONDITION_PID_PRESSURE: &str = "PIDPressure";
pub const ADDRESS_INTERNAL_IP: &str = "InternalIP";
pub const ADDRESS_HOSTNAME: &str = "Hostname";
/// Upstream's `MaxNamesPerImageInNodeStatus`.
pub const MAX_NAMES_PER_IMAGE: usize = 5;
/// Upstream's default `nodeStatusMaxImages`.
pub const DEFAULT_MAX_IMAGES: i32 = 50;

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event about the node, to be recorded by the event recorder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEvent {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
}

impl NodeEvent {
    /// Upstream's `recordNodeStatusEvent`: "Node NAME status is now: REASON".
    pub fn status(node_name: &str, reason: &str) -> NodeEvent {
        NodeEvent {
            type_: EventType::Normal,
            reason: reason.to_string(),
            message: format!("Node {node_name} status is now: {reason}"),
        }
    }

    /// Upstream's `BirthCry`.
    pub fn starting() -> NodeEvent {
        NodeEvent {
            type_: EventType::Normal,
            reason: "Starting".into(),
            message: "Starting kubelet.".into(),
        }
    }

    /// Upstream's container manager event once node allocatable is enforced on `kubepods`.
    pub fn allocatable_enforced() -> NodeEvent {
        NodeEvent {
            type_: EventType::Normal,
            reason: "NodeAllocatableEnforced".into(),
            message: "Updated Node Allocatable limit across pods".into(),
        }
    }
}

/// An image the runtime holds (`kubecontainer.Image`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageSummary {
    pub repo_digests: Vec<String>,
    pub repo_tags: Vec<String>,
    pub size_bytes: i64,
}

/// Versions for `nodeInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Versions {
    pub kernel_version: String,
    pub os_image: String,
    /// `<runtime name>://<runtime version>`, such as `containerd://1.6.20`; `Unknown`
    /// replaces the version when the runtime did not answer.
    pub container_runtime_version: String,
    pub kubelet_version: String,
}

/// Everything the status is computed from, gathered by the app.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatusInputs {
    pub node_name: String,
    pub now: Time,
    pub addresses: Vec<NodeAddress>,
    pub capacity: ResourceList,
    pub allocatable: ResourceList,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    pub versions: Versions,
    pub operating_system: String,
    pub architecture: String,
    pub kubelet_port: i32,
    /// The runtime's images, `None` when listing them failed (the status then has none).
    pub images: Option<Vec<ImageSummary>>,
    /// `nodeStatusMaxImages`; -1 means no limit.
    pub max_images: i32,
    /// Why the node is not ready ([`super::readiness::RuntimeState::errors`]); empty when
    /// it is.
    pub not_ready: Vec<String>,
    pub memory_pressure: bool,
    pub disk_pressure: bool,
    pub pid_pressure: bool,
    /// The attached volumes the pods use (unique names, sorted).
    pub volumes_in_use: Vec<String>,
}

/// The status to report and the events its transitions record.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    pub status: NodeStatus,
    pub events: Vec<NodeEvent>,
}

/// Why the node has no address to report.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AddressError {
    #[error("can't get ip address of node {node}: no --node-ip, the hostname is not an IP and the host has no default-route address")]
    NoAddress { node: String },
    #[error("failed to validate nodeIP: nodeIP can't be {what}: {ip}")]
    InvalidNodeIp { ip: IpAddr, what: &'static str },
}

/// Upstream's checks of `--node-ip` that need no look at the host's interfaces.
pub fn validate_node_ip(ip: IpAddr) -> Result<(), AddressError> {
    let what = if ip.is_loopback() {
        Some("loopback address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if ip.is_unspecified() {
        Some("an all zeros address")
    } else if match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    } {
        Some("a link-local unicast address")
    } else {
        None
    };
    match what {
        Some(what) => Err(AddressError::InvalidNodeIp { ip, what }),
        None => Ok(()),
    }
}

/// The node's primary IP, its first `InternalIP` as [`node_addresses`] finds it: a pod's
/// `status.hostIP` and what the downward API and a host-network pod's env see, in
/// standalone and connected mode alike (upstream's `getHostIPsAnyWay`).
pub fn primary_node_ip(
    node_ips: &[IpAddr],
    hostname: &str,
    default_route_ip: Option<IpAddr>,
) -> Option<IpAddr> {
    node_addresses("", node_ips, hostname, default_route_ip)
        .ok()?
        .into_iter()
        .find(|a| a.type_ == ADDRESS_INTERNAL_IP)
        .and_then(|a| a.address.parse().ok())
}

/// The node's addresses (upstream's `NodeAddress` setter without a cloud provider):
/// `InternalIP` from `--node-ip` (two of different families give two), else the hostname
/// when it is an IP, else the host's default-route address; then `Hostname`.
pub fn node_addresses(
    node_name: &str,
    node_ips: &[IpAddr],
    hostname: &str,
    default_route_ip: Option<IpAddr>,
) -> Result<Vec<NodeAddress>, AddressError> {
    let specified: Vec<IpAddr> = node_ips
        .iter()
        .copied()
        .filter(|ip| !ip.is_unspecified())
        .collect();
    for ip in &specified {
        validate_node_ip(*ip)?;
    }
    let mut addresses: Vec<NodeAddress> = if specified.len() > 1 {
        specified
            .iter()
            .take(2)
            .map(|ip| NodeAddress::new(ADDRESS_INTERNAL_IP, ip.to_string()))
            .collect()
    } else {
        let ip = specified
            .first()
            .copied()
            .or_else(|| hostname.parse().ok())
            .or(default_route_ip)
            .ok_or_else(|| AddressError::NoAddress {
                node: node_name.to_string(),
            })?;
        vec![NodeAddress::new(ADDRESS_INTERNAL_IP, ip.to_string())]
    };
    addresses.push(NodeAddress::new(ADDRESS_HOSTNAME, hostname));
    Ok(addresses)
}

/// The images for the status (upstream's `Images` setter): largest first, at most
/// `max_images` (-1: all), at most five names each (digests first).
pub fn status_images(images: &[ImageSummary], max_images: i32) -> Vec<ContainerImage> {
    let mut sorted: Vec<&ImageSummary> = images.iter().collect();
    // Upstream's image manager keeps the list sorted by size, largest first.
    sorted.sort_by_key(|image| std::cmp::Reverse(image.size_bytes));
    if let Ok(max) = usize::try_from(max_images) {
        sorted.truncate(max);
    }
    sorted
        .into_iter()
        .map(|image| ContainerImage {
            names: image
                .repo_digests
                .iter()
                .chain(&image.repo_tags)
                .take(MAX_NAMES_PER_IMAGE)
                .cloned()
                .collect(),
            size_bytes: image.size_bytes,
        })
        .collect()
}

/// The status computed from `inputs`, keeping the transition times of `previous`'s
/// conditions where their status did not change.
pub fn compute_status(previous: &NodeStatus, inputs: &StatusInputs) -> StatusUpdate {
    let mut events = Vec::new();
    let mut status = NodeStatus {
        capacity: inputs.capacity.clone(),
        allocatable: inputs.allocatable.clone(),
        conditions: previous.conditions.clone(),
        addresses: inputs.addresses.clone(),
        daemon_endpoints: Default::default(),
        node_info: NodeSystemInfo {
            machine_id: inputs.machine_id.clone(),
            system_uuid: inputs.system_uuid.clone(),
            boot_id: inputs.boot_id.clone(),
            kernel_version: inputs.versions.kernel_version.clone(),
            os_image: inputs.versions.os_image.clone(),
            container_runtime_version: inputs.versions.container_runtime_version.clone(),
            kubelet_version: inputs.versions.kubelet_version.clone(),
            kube_proxy_version: inputs.versions.kubelet_version.clone(),
            operating_system: inputs.operating_system.clone(),
            architecture: inputs.architecture.clone(),
        },
        images: inputs
            .images
            .as_deref()
            .map(|i| status_images(i, inputs.max_images))
            .unwrap_or_default(),
        volumes_in_use: inputs.volumes_in_use.clone(),
        volumes_attached: previous.volumes_attached.clone(),
    };
    status.daemon_endpoints.kubelet_endpoint.port = inputs.kubelet_port;
    if !previous.node_info.boot_id.is_empty() && previous.node_info.boot_id != inputs.boot_id {
        events.push(NodeEvent {
            type_: EventType::Warning,
            reason: "Rebooted".into(),
            message: format!(
                "Node {} has been rebooted, boot id: {}",
                inputs.node_name, inputs.boot_id
            ),
        });
    }
    let now = inputs.now;
    let pressure = [
        (
            CONDITION_MEMORY_PRESSURE,
            inputs.memory_pressure,
            (
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available",
                "NodeHasInsufficientMemory",
            ),
            (
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
                "NodeHasSufficientMemory",
            ),
        ),
        (
            CONDITION_DISK_PRESSURE,
            inputs.disk_pressure,
            (
                "KubeletHasDiskPressure",
                "kubelet has disk pressure",
                "NodeHasDiskPressure",
            ),
            (
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
                "NodeHasNoDiskPressure",
            ),
        ),
        (
            CONDITION_PID_PRESSURE,
            inputs.pid_pressure,
            (
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available",
                "NodeHasInsufficientPID",
            ),
            (
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
                "NodeHasSufficientPID",
            ),
        ),
    ];
    for (type_, under_pressure, on, off) in pressure {
        let (wanted, (reason, message, event)) = if under_pressure {
            (ConditionStatus::True, on)
        } else {
            (ConditionStatus::False, off)
        };
        let condition = condition_mut(&mut status.conditions, type_);
        condition.last_heartbeat_time = Some(now);
        if condition.status != wanted {
            condition.status = wanted;
            condition.reason = reason.into();
            condition.message = message.into();
            condition.last_transition_time = Some(now);
            events.push(NodeEvent::status(&inputs.node_name, event));
        }
    }
    let mut not_ready = inputs.not_ready.clone();
    let missing: Vec<&str> = ["cpu", "memory", "pods"]
        .into_iter()
        .filter(|r| !status.capacity.contains_key(*r))
        .collect();
    if !missing.is_empty() {
        not_ready.push(format!(
            "missing node capacity for resources: {}",
            missing.join(", ")
        ));
    }
    let (wanted, reason, message) = if not_ready.is_empty() {
        (
            ConditionStatus::True,
            "KubeletReady",
            "kubelet is posting ready status".to_string(),
        )
    } else {
        (
            ConditionStatus::False,
            "KubeletNotReady",
            aggregate_message(&not_ready),
        )
    };
    let existed = status.conditions.iter().any(|c| c.type_ == CONDITION_READY);
    let ready = condition_mut(&mut status.conditions, CONDITION_READY);
    let changed = ready.status != wanted;
    if changed || ready.last_transition_time.is_none() {
        ready.last_transition_time = Some(now);
    }
    ready.status = wanted;
    ready.reason = reason.into();
    ready.message = message;
    ready.last_heartbeat_time = Some(now);
    // Upstream records NodeReady/NodeNotReady only when an existing Ready condition flips.
    if existed && changed {
        let event = if wanted == ConditionStatus::True {
            "NodeReady"
        } else {
            "NodeNotReady"
        };
        events.push(NodeEvent::status(&inputs.node_name, event));
    }
    StatusUpdate { status, events }
}

/// The condition of `type_`, appended (status Unknown) when missing.
fn condition_mut<'a>(conditions: &'a mut Vec<NodeCondition>, type_: &str) -> &'a mut NodeCondition {
    let at = match conditions.iter().position(|c| c.type_ == type_) {
        Some(at) => at,
        None => {
            conditions.push(NodeCondition {
                type_: type_.to_string(),
                ..NodeCondition::default()
            });
            conditions.len() - 1
        }
    };
    &mut conditions[at]
}

/// Whether `status` differs from `original` other than in heartbeat times (upstream's
/// `nodeStatusHasChanged`).
pub fn status_changed(original: &NodeStatus, status: &NodeStatus) -> bool {
    let strip = |s: &NodeStatus| {
        let mut conditions: Vec<NodeCondition> = s
            .conditions
            .iter()
            .map(|c| NodeCondition {
                last_heartbeat_time: None,
                ..c.clone()
            })
            .collect();
        conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
        NodeStatus {
            conditions,
            ..s.clone()
        }
    };
    strip(original) != strip(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::units::quantity::Quantity;
    use serde_json::json;

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).expect("quantity")
    }

    fn inputs(now: i64) -> StatusInputs {
        StatusInputs {
            node_name: "n1".into(),
            now: Time(now),
            addresses: vec![
                NodeAddress::new(ADDRESS_INTERNAL_IP, "10.0.0.5"),
                NodeAddress::new(ADDRESS_HOSTNAME, "n1"),
            ],
            capacity: [("cpu", "2"), ("memory", "4Gi"), ("pods", "110")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), q(v)))
                .collect(),
            allocatable: [("cpu", "2"), ("memory", "3996Mi"), ("pods", "110")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), q(v)))
                .collect(),
            machine_id: "m".into(),
            system_uuid: "s".into(),
            boot_id: "b".into(),
            versions: Versions {
                kernel_version: "6.1.0".into(),
                os_image: "Debian GNU/Linux 12 (bookworm)".into(),
                container_runtime_version: "containerd://1.6.20".into(),
                kubelet_version: "v1.26.1".into(),
            },
            operating_system: "linux".into(),
            architecture: "amd64".into(),
            kubelet_port: 10250,
            images: Some(vec![]),
            max_images: DEFAULT_MAX_IMAGES,
            not_ready: vec![],
            memory_pressure: false,
            disk_pressure: false,
            pid_pressure: false,
            volumes_in_use: vec![],
        }
    }

    /// The first status of a fresh node, whole, as the API would receive it.
    #[test]
    fn golden_first_status() {
        let update = compute_status(&NodeStatus::default(), &inputs(1_795_232_011));
        assert_eq!(
            serde_json::to_value(&update.status).expect("json"),
            json!({
                "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                "allocatable": {"cpu": "2", "memory": "3996Mi", "pods": "110"},
                "conditions": [
                    {"type": "MemoryPressure", "status": "False",
                     "lastHeartbeatTime": "2026-11-21T03:33:31Z", "lastTransitionTime": "2026-11-21T03:33:31Z",
                     "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available"},
                    {"type": "DiskPressure", "status": "False",
                     "lastHeartbeatTime": "2026-11-21T03:33:31Z", "lastTransitionTime": "2026-11-21T03:33:31Z",
                     "reason": "KubeletHasNoDiskPressure", "message": "kubelet has no disk pressure"},
                    {"type": "PIDPressure", "status": "False",
                     "lastHeartbeatTime": "2026-11-21T03:33:31Z", "lastTransitionTime": "2026-11-21T03:33:31Z",
                     "reason": "KubeletHasSufficientPID", "message": "kubelet has sufficient PID available"},
                    {"type": "Ready", "status": "True",
                     "lastHeartbeatTime": "2026-11-21T03:33:31Z", "lastTransitionTime": "2026-11-21T03:33:31Z",
                     "reason": "KubeletReady", "message": "kubelet is posting ready status"}
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "10.0.0.5"},
                    {"type": "Hostname", "address": "n1"}
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": "m", "systemUUID": "s", "bootID": "b",
                    "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "containerRuntimeVersion": "containerd://1.6.20",
                    "kubeletVersion": "v1.26.1", "kubeProxyVersion": "v1.26.1",
                    "operatingSystem": "linux", "architecture": "amd64"
                }
            })
        );
        let reasons: Vec<&str> = update.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "NodeHasSufficientMemory",
                "NodeHasNoDiskPressure",
                "NodeHasSufficientPID"
            ]
        );
        assert_eq!(
            update.events[0].message,
            "Node n1 status is now: NodeHasSufficientMemory"
        );
    }

    #[test]
    fn a_heartbeat_keeps_transition_times_and_is_no_change() {
        let first = compute_status(&NodeStatus::default(), &inputs(100)).status;
        let second = compute_status(&first, &inputs(110));
        assert!(second.events.is_empty());
        assert!(!status_changed(&first, &second.status));
        let ready = second
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_READY)
            .expect("ready");
        assert_eq!(ready.last_heartbeat_time, Some(Time(110)));
        assert_eq!(ready.last_transition_time, Some(Time(100)));
    }

    #[test]
    fn runtime_down_flips_ready_with_upstreams_message_and_events() {
        let first = compute_status(&NodeStatus::default(), &inputs(100)).status;
        let mut down = inputs(140);
        down.not_ready = vec!["container runtime is down".into()];
        let update = compute_status(&first, &down);
        assert!(status_changed(&first, &update.status));
        let ready = update
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_READY)
            .expect("ready");
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.reason, "KubeletNotReady");
        assert_eq!(ready.message, "container runtime is down");
        assert_eq!(ready.last_transition_time, Some(Time(140)));
        assert_eq!(update.events, [NodeEvent::status("n1", "NodeNotReady")]);
        let back = compute_status(&update.status, &inputs(150));
        assert_eq!(back.events, [NodeEvent::status("n1", "NodeReady")]);
    }

    #[test]
    fn missing_capacity_makes_the_node_not_ready() {
        let mut i = inputs(1);
        i.capacity.remove("pods");
        i.capacity.remove("memory");
        let update = compute_status(&NodeStatus::default(), &i);
        let ready = &update.status.conditions[3];
        assert_eq!(
            ready.message,
            "missing node capacity for resources: memory, pods"
        );
        // A node registered not ready records no NodeNotReady: nothing flipped.
        assert!(!update.events.iter().any(|e| e.reason == "NodeNotReady"));
    }

    #[test]
    fn a_new_boot_id_records_rebooted() {
        let first = compute_status(&NodeStatus::default(), &inputs(1)).status;
        let mut i = inputs(2);
        i.boot_id = "b2".into();
        let update = compute_status(&first, &i);
        assert_eq!(update.events[0].reason, "Rebooted");
        assert_eq!(
            update.events[0].message,
            "Node n1 has been rebooted, boot id: b2"
        );
    }

    #[test]
    fn images_largest_first_at_most_max_and_five_names() {
        let image = |size: i64, names: usize| ImageSummary {
            repo_digests: vec![format!("d@{size}")],
            repo_tags: (0..names).map(|i| format!("t{i}:{size}")).collect(),
            size_bytes: size,
        };
        let images: Vec<ImageSummary> = (1..=60).map(|s| image(s, 6)).collect();
        let listed = status_images(&images, 50);
        assert_eq!(listed.len(), 50);
        assert_eq!(listed[0].size_bytes, 60);
        assert_eq!(listed[49].size_bytes, 11);
        assert_eq!(listed[0].names.len(), 5);
        assert_eq!(listed[0].names[0], "d@60");
        assert_eq!(status_images(&images, -1).len(), 60);
        assert!(status_images(&images, 0).is_empty());
    }

    #[test]
    fn addresses_follow_upstreams_order_of_preference() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let route = Some(ip("192.168.1.9"));
        assert_eq!(
            node_addresses("n1", &[ip("10.1.2.3")], "n1", route).expect("ok"),
            [
                NodeAddress::new("InternalIP", "10.1.2.3"),
                NodeAddress::new("Hostname", "n1")
            ]
        );
        assert_eq!(
            node_addresses("n1", &[], "10.9.9.9", route).expect("ok")[0].address,
            "10.9.9.9"
        );
        assert_eq!(
            node_addresses("n1", &[], "n1", route).expect("ok")[0].address,
            "192.168.1.9"
        );
        assert_eq!(
            node_addresses("n1", &[ip("10.1.2.3"), ip("fd00::3")], "n1", None)
                .expect("ok")
                .len(),
            3
        );
        assert_eq!(
            node_addresses("n1", &[], "n1", None),
            Err(AddressError::NoAddress { node: "n1".into() })
        );
        // The primary IP pods see: the same choice, the first InternalIP.
        assert_eq!(primary_node_ip(&[], "n1", route), Some(ip("192.168.1.9")));
        assert_eq!(
            primary_node_ip(&[ip("10.1.2.3")], "n1", route),
            Some(ip("10.1.2.3"))
        );
        assert_eq!(primary_node_ip(&[], "n1", None), None);
        let err = node_addresses("n1", &[ip("127.0.0.1")], "n1", route).expect_err("loopback");
        assert_eq!(
            err.to_string(),
            "failed to validate nodeIP: nodeIP can't be loopback address: 127.0.0.1"
        );
    }
}
