//! The part of the v1 Pod the kubelet acts on (this module: the model), with upstream's
//! defaulting (`defaults`), QoS classification and OOM score policy (`qos`), container
//! hash (`hash`), the validation a node needs before it runs a pod (`validate`), decoding
//! (`decode`) and static pod manifests with their identity (`static_pod`).
//!
//! Probes and lifecycle hooks are in `domain::probe::spec`. Fields the kubelet does not model are
//! dropped when decoding, so real manifests decode; those the node cannot honour are
//! recorded (`fields`: the pod-field table) and refuse the pod. The static pod source
//! hashes the raw manifest, so edits to those fields still change a pod's UID.

pub mod active_deadline;
pub mod api;
pub mod decode;
pub mod defaults;
pub mod fields;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod hash;
pub mod mirror;
pub mod qos;
pub mod resources;
pub mod security;
pub mod static_pod;
pub mod validate;

pub use decode::{decode_pod, pod_from_value, DecodedPod};
pub use defaults::apply_api_defaults;
pub use hash::{container_hash, container_hash_matches};
pub use qos::{container_oom_score_adj, pod_container_oom_score_adj, qos_class};
pub use security::{PodSecurityContext, SecurityContext};
pub use validate::{dns1123_label_errors, dns1123_subdomain_errors, validate_pod, PodError};

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::domain::probe::spec::{Lifecycle, Probe};
use crate::domain::units::quantity::{Format, Quantity};

/// Upstream's `SystemCriticalPriority`: the lowest priority of a critical pod.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// The priority class the kubelet protects the most from the OOM killer.
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";
/// Grace period when a pod does not state one.
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// Where a container writes its termination message unless told otherwise.
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// Annotation holding the pod's source: `file`, `http` or `api`.
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// Annotation holding the hash of a static pod's manifest (its UID).
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// Annotation holding when the kubelet first saw the pod.
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";
/// Annotation marking a mirror pod (the API copy of a static pod).
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;

/// A pod as the kubelet sees it. `apiVersion` and `kind` are checked by
/// the manifest decoder, not stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Pod {
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The prefix the API server made `name` from, when it made it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub generate_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// RFC 3339; API pods are admitted in this order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Set once the pod is being deleted in the API (graceful deletion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// The grace period the deletion asked for; it replaces the spec's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
}

/// `metadata.ownerReferences[]`: what a mirror pod (and a controller's pod) points to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

/// One `hostAliases` entry: an IP and the names it gets in `/etc/hosts`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HostAlias {
    pub ip: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpec {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<Container>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    /// Added to a running pod through the `ephemeralcontainers` subresource (`kubectl
    /// debug`): started once, never restarted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ephemeral_containers: Vec<EphemeralContainer>,
    pub restart_policy: RestartPolicy,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub host_network: bool,
    /// `None` means the default; read it through
    /// [`PodSpec::termination_grace_period`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub dns_policy: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subdomain: String,
    /// Entries added to the pod's managed `/etc/hosts`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub host_aliases: Vec<HostAlias>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Needed to tell system-node-critical pods apart (OOM score policy).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub priority_class_name: String,
    #[serde(rename = "hostPID", skip_serializing_if = "std::ops::Not::not")]
    pub host_pid: bool,
    #[serde(rename = "hostIPC", skip_serializing_if = "std::ops::Not::not")]
    pub host_ipc: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_process_namespace: Option<bool>,
    /// `Some(false)`: the pod runs in its own user namespace (`kuberuntime::userns`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_users: Option<bool>,
    /// `None` reads as an empty one (API defaulting sets `{}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    /// What the pod's runtime class adds to its resources (`spec.overhead`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub overhead: BTreeMap<String, Quantity>,
    /// The `node.k8s.io/v1` RuntimeClass whose handler runs the pod; `None` or empty:
    /// the runtime's default handler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
    /// The sandbox's hostname is the pod's FQDN (with a subdomain) rather than its name.
    #[serde(rename = "setHostnameAsFQDN", skip_serializing_if = "Option::is_none")]
    pub set_hostname_as_fqdn: Option<bool>,
    // Identity and credentials from API objects (issue 13).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub service_account_name: String,
    /// `None`: mount the service account token (the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// `None` means true (service links in the environment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_service_links: Option<bool>,
    // Where the pod may run: read by node admission (domain::admission).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<PodOs>,
    /// Conditions, besides the containers' readiness, a pod needs to be `Ready`
    /// (`domain::status::apply_readiness_gates`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readiness_gates: Vec<PodReadinessGate>,
    /// How long the pod may be active on the node (`active_deadline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Resolver settings merged into what `dnsPolicy` gives (`kuberuntime::dns`).
    #[serde(rename = "dnsConfig", skip_serializing_if = "Option::is_none")]
    pub dns_config: Option<PodDnsConfig>,
    /// The fields of the decoded document that make the node refuse the pod
    /// (`fields::refused_fields`); the model above drops most of them, so the decoder
    /// records them here.
    #[serde(skip)]
    pub refused_fields: Vec<fields::RefusedField>,
}

/// `v1.PodDNSConfig`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodDnsConfig {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<PodDnsConfigOption>,
}

/// `v1.PodDNSConfigOption`: `name`, or `name:value` in resolv.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PodDnsConfigOption {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `v1.PodReadinessGate`: a condition type in the pod's status, set by a controller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodReadinessGate {
    pub condition_type: String,
}

/// `spec.affinity`; only the node affinity's required part matters to a kubelet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Affinity {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeAffinity>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeAffinity {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
}

/// Terms ORed; within a term, every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelector {
    pub node_selector_terms: Vec<NodeSelectorTerm>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelectorTerm {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelectorRequirement {
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`.
    pub operator: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Toleration {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `Exists` or `Equal` (the default when empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub operator: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Empty matches every effect.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub effect: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// `spec.os`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodOs {
    pub name: String,
}

impl Default for PodSpec {
    fn default() -> Self {
        PodSpec {
            containers: Vec::new(),
            init_containers: Vec::new(),
            ephemeral_containers: Vec::new(),
            restart_policy: RestartPolicy::Always,
            host_network: false,
            termination_grace_period_seconds: None,
            volumes: Vec::new(),
            dns_policy: "ClusterFirst".to_string(),
            hostname: String::new(),
            subdomain: String::new(),
            host_aliases: Vec::new(),
            node_name: String::new(),
            priority: None,
            priority_class_name: String::new(),
            host_pid: false,
            host_ipc: false,
            share_process_namespace: None,
            host_users: None,
            security_context: None,
            overhead: BTreeMap::new(),
            runtime_class_name: None,
            set_hostname_as_fqdn: None,
            service_account_name: String::new(),
            automount_service_account_token: None,
            image_pull_secrets: Vec::new(),
            enable_service_links: None,
            node_selector: BTreeMap::new(),
            affinity: None,
            tolerations: Vec::new(),
            os: None,
            readiness_gates: Vec::new(),
            active_deadline_seconds: None,
            dns_config: None,
            refused_fields: Vec::new(),
        }
    }
}

impl PodSpec {
    /// The grace period in seconds, 30 when the pod does not say.
    pub fn termination_grace_period(&self) -> i64 {
        self.termination_grace_period_seconds
            .unwrap_or(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RestartPolicy {
    #[default]
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Always => "Always",
            RestartPolicy::OnFailure => "OnFailure",
            RestartPolicy::Never => "Never",
        }
    }
}

impl fmt::Display for RestartPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Container {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub image: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Variables from every key of a ConfigMap or Secret (issue 13).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub working_dir: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    pub resources: ResourceRequirements,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// Raw block devices from claims of `volumeMode: Block`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volume_devices: Vec<VolumeDevice>,
    /// `None` means the default; read it through [`Container::pull_policy`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<PullPolicy>,
    /// Only `Always` is allowed, and only on init containers (sidecars).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tty: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stdin: bool,
    /// The runtime closes stdin once the first attach ends.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stdin_once: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub termination_message_path: String,
    /// `File` (empty reads as `File`) or `FallbackToLogsOnError`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub termination_message_policy: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// Upstream v1.26's hash of the container's whole spec as the manifest
    /// decoder read it (every field upstream decodes, defaulted), which
    /// the modelled fields above cannot give; `None` for a container built
    /// otherwise. Read it through [`container_hash`].
    #[serde(skip)]
    pub upstream_hash: Option<u32>,
}

/// `v1.EphemeralContainer`: a container's fields (the API server refuses the ones an
/// ephemeral container may not have) and the container whose namespaces it joins.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralContainer {
    #[serde(flatten)]
    pub container: Container,
    /// The container whose process namespace it shares (`kubectl debug --target`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_container_name: String,
}

/// Which of a pod's container lists a container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ContainerKind {
    Init,
    Regular,
    Ephemeral,
}

impl ContainerKind {
    /// Upstream's word for it in logs (`containerType`) and the planner.
    pub fn describe(self) -> &'static str {
        match self {
            ContainerKind::Init => "init container",
            ContainerKind::Regular => "container",
            ContainerKind::Ephemeral => "ephemeral container",
        }
    }
}

impl PodSpec {
    /// Every container of the pod: init, regular, then ephemeral ones.
    pub fn all_containers(&self) -> impl Iterator<Item = &Container> {
        self.init_containers
            .iter()
            .chain(&self.containers)
            .chain(self.ephemeral_containers.iter().map(|e| &e.container))
    }

    /// Whether the pod has a container of any kind called `name`.
    pub fn has_container(&self, name: &str) -> bool {
        self.all_containers().any(|c| c.name == name)
    }

    /// The container at `index` of the list `kind` names.
    pub fn container(&self, kind: ContainerKind, index: usize) -> Option<&Container> {
        match kind {
            ContainerKind::Init => self.init_containers.get(index),
            ContainerKind::Regular => self.containers.get(index),
            ContainerKind::Ephemeral => self.ephemeral_containers.get(index).map(|e| &e.container),
        }
    }
}

impl Default for Container {
    fn default() -> Self {
        Container {
            name: String::new(),
            image: String::new(),
            command: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            env_from: Vec::new(),
            working_dir: String::new(),
            ports: Vec::new(),
            resources: ResourceRequirements::default(),
            volume_mounts: Vec::new(),
            volume_devices: Vec::new(),
            image_pull_policy: None,
            restart_policy: None,
            tty: false,
            stdin: false,
            stdin_once: false,
            termination_message_path: DEFAULT_TERMINATION_MESSAGE_PATH.to_string(),
            termination_message_policy: String::new(),
            security_context: None,
            liveness_probe: None,
            readiness_probe: None,
            startup_probe: None,
            lifecycle: None,
            upstream_hash: None,
        }
    }
}

impl Container {
    /// The pull policy in force: the stated one, else `Always` for an image
    /// without a tag or tagged `latest` (it may move), else `IfNotPresent`.
    pub fn pull_policy(&self) -> PullPolicy {
        if let Some(policy) = self.image_pull_policy {
            return policy;
        }
        if image_tag_is_latest(&self.image) {
            PullPolicy::Always
        } else {
            PullPolicy::IfNotPresent
        }
    }
}

/// True when the reference names no tag and no digest, or the tag `latest`.
/// An unusable reference counts as pinned, as upstream ignores the parse
/// error and then sees no tag.
fn image_tag_is_latest(image: &str) -> bool {
    if image.trim().is_empty() || image.chars().any(|c| c.is_ascii_whitespace()) {
        return false;
    }
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    // A colon before the last slash is a registry port, not a tag.
    let last_component = name.rsplit('/').next().unwrap_or(name);
    match last_component.split_once(':') {
        Some((_, tag)) => tag == "latest",
        None => digest.is_none(),
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvVar {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Where the value comes from when `value` is empty (issue 13).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvVarSource>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerPort {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub container_port: i32,
    pub host_port: i32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    #[serde(rename = "hostIP", skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
}

impl Default for ContainerPort {
    fn default() -> Self {
        ContainerPort {
            name: String::new(),
            container_port: 0,
            host_port: 0,
            protocol: "TCP".to_string(),
            host_ip: String::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceRequirements {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

/// A claim's block volume given to a container as a device node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeDevice {
    pub name: String,
    pub device_path: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeMount {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mount_path: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sub_path: String,
    /// `subPath` with `$(VAR)` from the container's environment.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sub_path_expr: String,
    /// `None`, `HostToContainer` or `Bidirectional` (privileged containers only); unset
    /// is `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_propagation: Option<String>,
}

/// A volume. The sources the kubelet sets up itself are modelled; a volume of another
/// kind (CSI, NFS ...) keeps its source in `unsupported`, so the kubelet can name it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Volume {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_path: Option<HostPathVolume>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirVolume>,
    // Sources from API objects (issue 13).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolumeSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolumeSource>,
    #[serde(rename = "downwardAPI", skip_serializing_if = "Option::is_none")]
    pub downward_api: Option<DownwardApiVolumeSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projected: Option<ProjectedVolumeSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
    /// A CSI ephemeral inline volume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csi: Option<CsiVolumeSource>,
    /// A generic ephemeral volume: the claim `<pod>-<volume>` the ephemeral volume
    /// controller makes from `volumeClaimTemplate` (the kubelet reads the claim only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<serde_json::Value>,
    /// Any other source, by its field name (`csi`, `nfs` ...).
    #[serde(flatten, skip_serializing_if = "BTreeMap::is_empty")]
    pub unsupported: BTreeMap<String, serde_json::Value>,
}

/// A CSI ephemeral inline volume: the driver publishes it for the pod alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CsiVolumeSource {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub driver: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_type: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub volume_attributes: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_publish_secret_ref: Option<LocalObjectReference>,
}

/// A claim in the pod's namespace; `readOnly` makes every mount of it read-only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PersistentVolumeClaimVolumeSource {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub claim_name: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

/// `{name}`: an object in the pod's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalObjectReference {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// A key of a ConfigMap or Secret written to a file `path` (relative), with its mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyToPath {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConfigMapVolumeSource {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecretVolumeSource {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub secret_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// `fieldRef`: a field of the pod (`metadata.name`, `status.podIP` ...).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectFieldSelector {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

/// `resourceFieldRef`: a container's request or limit, divided by `divisor` (default 1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceFieldSelector {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub container_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub divisor: Option<Quantity>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DownwardApiVolumeFile {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<ObjectFieldSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_field_ref: Option<ResourceFieldSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DownwardApiVolumeSource {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<DownwardApiVolumeFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProjectedVolumeSource {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<VolumeProjection>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
}

/// One source of a projected volume; exactly one field is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeProjection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapProjection>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretProjection>,
    #[serde(rename = "downwardAPI", skip_serializing_if = "Option::is_none")]
    pub downward_api: Option<DownwardApiProjection>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_token: Option<ServiceAccountTokenProjection>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConfigMapProjection {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecretProjection {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DownwardApiProjection {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<DownwardApiVolumeFile>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceAccountTokenProjection {
    /// Empty: the API server's own audience.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub audience: String,
    /// `None`: an hour, as API defaulting sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiration_seconds: Option<i64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
}

/// `valueFrom` of an environment variable: exactly one field is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvVarSource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<ObjectFieldSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_field_ref: Option<ResourceFieldSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<KeySelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<KeySelector>,
}

/// A key of a ConfigMap or Secret (`configMapKeyRef`, `secretKeyRef`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeySelector {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// `envFrom`: every key of a ConfigMap or a Secret, with an optional prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvFromSource {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<OptionalReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<OptionalReference>,
}

/// `{name, optional}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OptionalReference {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HostPathVolume {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// `Directory`, `DirectoryOrCreate`, `File`, ...; empty means no check.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EmptyDirVolume {
    /// Empty for node disk, `Memory` for tmpfs.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub medium: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_limit: Option<Quantity>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// What to do about a container's image (upstream `EnsureImageExists`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageAction {
    /// The image is there and the policy does not ask for a pull.
    UsePresent,
    Pull,
    /// Absent, and the policy is `Never`: the container cannot start (`ErrImageNeverPull`).
    NeverPullMissing,
}

impl PullPolicy {
    /// The action for an image that is `present` or not on the node.
    pub fn image_action(self, present: bool) -> ImageAction {
        match (self, present) {
            (PullPolicy::IfNotPresent | PullPolicy::Never, true) => ImageAction::UsePresent,
            (PullPolicy::Never, false) => ImageAction::NeverPullMissing,
            (PullPolicy::Always, _) | (PullPolicy::IfNotPresent, false) => ImageAction::Pull,
        }
    }
}

impl fmt::Display for PullPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        })
    }
}

impl Pod {
    /// The grace period a termination uses: the deletion's when the pod is being deleted
    /// in the API, the spec's otherwise (upstream's `killPod` grace selection).
    pub fn termination_grace_period(&self) -> i64 {
        self.metadata
            .deletion_grace_period_seconds
            .unwrap_or_else(|| self.spec.termination_grace_period())
    }

    /// Whether the pod is being deleted in the API.
    pub fn is_being_deleted(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// Whether the pod is the API copy of a static pod (never run).
    pub fn is_mirror(&self) -> bool {
        self.metadata
            .annotations
            .contains_key(CONFIG_MIRROR_ANNOTATION)
    }
}

/// `"<name>_<namespace>"`, the key the kubelet uses for a pod in maps.
pub fn full_name(pod: &Pod) -> String {
    format!("{}_{}", pod.metadata.name, pod.metadata.namespace)
}

/// `"<namespace>/<name>"`: a pod as upstream's logs name it (`klog.KObj`).
pub fn log_ref(pod: &Pod) -> String {
    format!("{}/{}", pod.metadata.namespace, pod.metadata.name)
}

/// Whether the pod came from a manifest (file or URL) rather than the API server
/// (upstream `IsStaticPod`: its source annotation says so).
pub fn is_static_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .get(CONFIG_SOURCE_ANNOTATION)
        .is_some_and(|source| source != "api")
}

/// `"<name>_<namespace>(<uid>)"`: how upstream names a pod in messages (`format.Pod`).
pub fn format_pod(pod: &Pod) -> String {
    format!("{}({})", full_name(pod), pod.metadata.uid)
}

/// True for pods the kubelet must never evict or starve: static pods,
/// mirror pods and pods at system-critical priority or above.
pub fn is_critical_pod(pod: &Pod) -> bool {
    let annotations = &pod.metadata.annotations;
    let is_static = annotations
        .get(CONFIG_SOURCE_ANNOTATION)
        .is_some_and(|source| source != "api");
    let is_mirror = annotations.contains_key(CONFIG_MIRROR_ANNOTATION);
    is_static || is_mirror || priority_is_critical(&pod.spec)
}

fn priority_is_critical(spec: &PodSpec) -> bool {
    spec.priority.is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

/// True for a critical pod in the `system-node-critical` class.
pub fn is_node_critical_pod(pod: &Pod) -> bool {
    is_critical_pod(pod) && pod.spec.priority_class_name == SYSTEM_NODE_CRITICAL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_defaults() {
        let cases = [
            ("busybox", PullPolicy::Always),
            ("busybox:latest", PullPolicy::Always),
            ("busybox:1.36", PullPolicy::IfNotPresent),
            ("docker.io/library/busybox", PullPolicy::Always),
            ("localhost:5000/busybox", PullPolicy::Always),
            ("localhost:5000/busybox:1", PullPolicy::IfNotPresent),
            ("localhost:5000/busybox:latest", PullPolicy::Always),
            (
                "busybox@sha256:2c4c3ea1b2e2f4e6a5b1b4c2f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4",
                PullPolicy::IfNotPresent,
            ),
            (
                "busybox:latest@sha256:2c4c3ea1b2e2f4e6a5b1b4c2f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4",
                PullPolicy::Always,
            ),
            ("", PullPolicy::IfNotPresent),
        ];
        for (image, want) in cases {
            let c = Container {
                image: image.into(),
                ..Container::default()
            };
            assert_eq!(c.pull_policy(), want, "image {image:?}");
        }
        let explicit = Container {
            image: "busybox".into(),
            image_pull_policy: Some(PullPolicy::Never),
            ..Container::default()
        };
        assert_eq!(explicit.pull_policy(), PullPolicy::Never);
    }

    #[test]
    fn full_name_is_name_underscore_namespace() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: "etcd-node1".into(),
                namespace: "kube-system".into(),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        assert_eq!(full_name(&pod), "etcd-node1_kube-system");
    }

    #[test]
    fn format_pod_adds_the_uid_as_upstream_does() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: "web".into(),
                namespace: "default".into(),
                uid: "1234".into(),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        assert_eq!(format_pod(&pod), "web_default(1234)");
    }

    #[test]
    fn the_pull_policy_decides_whether_to_pull() {
        use PullPolicy::*;
        let cases = [
            (Always, true, ImageAction::Pull),
            (Always, false, ImageAction::Pull),
            (IfNotPresent, true, ImageAction::UsePresent),
            (IfNotPresent, false, ImageAction::Pull),
            (Never, true, ImageAction::UsePresent),
            (Never, false, ImageAction::NeverPullMissing),
        ];
        for (policy, present, want) in cases {
            assert_eq!(
                policy.image_action(present),
                want,
                "{policy} present={present}"
            );
        }
    }

    #[test]
    fn a_pod_serializes_without_nulls_or_empty_fields_as_the_api_omits_them() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: "web".into(),
                ..ObjectMeta::default()
            },
            spec: PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: "busybox".into(),
                    ..Container::default()
                }],
                ..PodSpec::default()
            },
        };
        let text = serde_json::to_string(&pod).unwrap_or_default();
        assert!(!text.contains("null"), "{text}");
        // As upstream's encoding/json, an empty struct stays: `"resources": {}`.
        let without_resources = text.replace("\"resources\":{}", "");
        assert!(
            !without_resources.contains("{}") && !text.contains("[]"),
            "{text}"
        );
        assert!(!text.contains("\"\""), "{text}");
    }
}
