//! The API objects a cluster node writes, as the project's own types: Node, Lease, core v1
//! Event. They serialize to (and deserialize from) the API's JSON shape, so the kube adapter
//! maps them to k8s-openapi's types through serde and nothing here names a backend crate.
//! Fields the kubelet never writes are left out; reading ignores them.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::domain::config::model::Taint;
use crate::domain::units::quantity::Quantity;
use crate::domain::units::time::{parse_rfc3339, rfc3339_micros, rfc3339_seconds};

/// Resource name to quantity (`v1.ResourceList`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// `metav1.Time`: whole seconds since the Unix epoch on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub i64);

impl Time {
    pub fn from_unix_nanos(nanos: i64) -> Time {
        Time(nanos.div_euclid(1_000_000_000))
    }

    pub fn unix_nanos(self) -> i64 {
        self.0.saturating_mul(1_000_000_000)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&rfc3339_seconds(self.unix_nanos()))
    }
}

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_rfc3339(&text)
            .map(Time::from_unix_nanos)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC3339 time: {text:?}")))
    }
}

/// `metav1.MicroTime`: microseconds since the Unix epoch, six fraction digits on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MicroTime(pub i64);

impl MicroTime {
    pub fn from_unix_nanos(nanos: i64) -> MicroTime {
        MicroTime(nanos.div_euclid(1_000))
    }

    pub fn unix_nanos(self) -> i64 {
        self.0.saturating_mul(1_000)
    }
}

impl Serialize for MicroTime {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&rfc3339_micros(self.unix_nanos()))
    }
}

impl<'de> Deserialize<'de> for MicroTime {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_rfc3339(&text)
            .map(MicroTime::from_unix_nanos)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC3339 time: {text:?}")))
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `metav1.OwnerReference`, as the Lease points at its Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// The part of `metav1.ObjectMeta` the kubelet reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
}

/// `v1.Node`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct NodeObject {
    pub metadata: ObjectMeta,
    pub spec: NodeSpec,
    pub status: NodeStatus,
}

/// `v1.NodeSpec`, the fields the kubelet sets at registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSpec {
    #[serde(rename = "providerID", skip_serializing_if = "String::is_empty")]
    pub provider_id: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(skip_serializing_if = "is_false")]
    pub unschedulable: bool,
}

/// `v1.NodeStatus`, the fields the kubelet owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeStatus {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: ResourceList,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: ResourceList,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<NodeCondition>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<NodeAddress>,
    pub daemon_endpoints: DaemonEndpoints,
    pub node_info: NodeSystemInfo,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ContainerImage>,
    /// The attached volumes the kubelet has mounted or is about to mount (their unique
    /// names, sorted): the attach-detach controller detaches none of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes_in_use: Vec<String>,
    /// The attach-detach controller's: the volumes attached to the node. Read, never
    /// written by the kubelet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes_attached: Vec<AttachedVolume>,
}

/// `v1.AttachedVolume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct AttachedVolume {
    pub name: String,
    pub device_path: String,
}

/// `v1.ConditionStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ConditionStatus {
    True,
    False,
    #[default]
    Unknown,
}

/// `v1.NodeCondition`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// `v1.NodeAddress`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    #[serde(rename = "type")]
    pub type_: String,
    pub address: String,
}

impl NodeAddress {
    pub fn new(type_: &str, address: impl Into<String>) -> NodeAddress {
        NodeAddress {
            type_: type_.to_string(),
            address: address.into(),
        }
    }
}

/// `v1.NodeDaemonEndpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct DaemonEndpoints {
    pub kubelet_endpoint: DaemonEndpoint,
}

/// `v1.DaemonEndpoint`: the API spells its one field `Port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct DaemonEndpoint {
    #[serde(rename = "Port")]
    pub port: i32,
}

/// `v1.NodeSystemInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSystemInfo {
    #[serde(rename = "machineID")]
    pub machine_id: String,
    #[serde(rename = "systemUUID")]
    pub system_uuid: String,
    #[serde(rename = "bootID")]
    pub boot_id: String,
    pub kernel_version: String,
    pub os_image: String,
    pub container_runtime_version: String,
    pub kubelet_version: String,
    pub kube_proxy_version: String,
    pub operating_system: String,
    pub architecture: String,
}

/// `v1.ContainerImage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerImage {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    pub size_bytes: i64,
}

/// `coordination.k8s.io/v1` Lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Lease {
    pub metadata: ObjectMeta,
    pub spec: LeaseSpec,
}

/// `v1.LeaseSpec`, the fields a node lease uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct LeaseSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder_identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<MicroTime>,
}

/// `v1.ObjectReference`, the object an event is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectReference {
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The part of the object: `spec.containers{name}` for a container's events.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

/// `v1.EventSource`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EventSource {
    pub component: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
}

/// Core v1 `Event`, as the kubelet's (legacy) event recorder writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Event {
    pub metadata: ObjectMeta,
    pub involved_object: ObjectReference,
    pub reason: String,
    pub message: String,
    pub source: EventSource,
    pub first_timestamp: Option<Time>,
    pub last_timestamp: Option<Time>,
    pub count: i32,
    #[serde(rename = "type")]
    pub type_: String,
}

/// The JSON of an object with its `apiVersion` and `kind`, as sent to the API server.
pub fn with_type_meta<T: Serialize>(
    object: &T,
    api_version: &str,
    kind: &str,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut value = serde_json::to_value(object)?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), kind.into());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_use_the_api_wire_formats() {
        let t = Time(1_795_232_011);
        assert_eq!(json!(t), json!("2026-11-21T03:33:31Z"));
        let m = MicroTime(1_795_232_011_123_456);
        assert_eq!(json!(m), json!("2026-11-21T03:33:31.123456Z"));
        let back: MicroTime =
            serde_json::from_value(json!("2026-11-21T03:33:31.123456Z")).expect("parses");
        assert_eq!(back, m);
        assert!(serde_json::from_value::<Time>(json!("yesterday")).is_err());
    }

    #[test]
    fn a_node_reads_back_what_it_writes_and_ignores_unknown_fields() {
        let mut node = NodeObject::default();
        node.metadata.name = "n1".into();
        node.metadata
            .labels
            .insert("kubernetes.io/os".into(), "linux".into());
        node.spec.provider_id = "fake://n1".into();
        node.status.daemon_endpoints.kubelet_endpoint.port = 10250;
        node.status.node_info.machine_id = "abc".into();
        node.status.conditions.push(NodeCondition {
            type_: "Ready".into(),
            status: ConditionStatus::True,
            last_heartbeat_time: Some(Time(10)),
            last_transition_time: Some(Time(5)),
            reason: "KubeletReady".into(),
            message: "kubelet is posting ready status".into(),
        });
        let value = with_type_meta(&node, "v1", "Node").expect("serializes");
        assert_eq!(value["kind"], "Node");
        assert_eq!(value["spec"]["providerID"], "fake://n1");
        assert_eq!(
            value["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
            10250
        );
        assert_eq!(value["status"]["nodeInfo"]["machineID"], "abc");
        assert_eq!(value["status"]["conditions"][0]["type"], "Ready");
        let mut with_extra = value.clone();
        with_extra["spec"]["podCIDR"] = json!("10.0.0.0/24");
        with_extra["status"]["phase"] = json!("Running");
        let back: NodeObject = serde_json::from_value(with_extra).expect("deserializes");
        assert_eq!(back, node);
    }
}
