//! The part of the v1 Pod the kubelet acts on, with upstream's defaulting,
//! QoS classification, OOM score policy, container hash and the validation
//! a node needs before it runs a pod.
//!
//! Fields the kubelet does not model (probes, securityContext, ...) are
//! ignored when decoding, so real manifests decode; the static pod source
//! hashes the raw manifest, so edits to those fields still change a pod's UID.

pub mod static_pod;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

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
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpec {
    pub containers: Vec<Container>,
    pub init_containers: Vec<Container>,
    pub restart_policy: RestartPolicy,
    pub host_network: bool,
    /// `None` means the default; read it through
    /// [`PodSpec::termination_grace_period`].
    pub termination_grace_period_seconds: Option<i64>,
    pub volumes: Vec<Volume>,
    pub dns_policy: String,
    pub hostname: String,
    pub subdomain: String,
    pub node_name: String,
    pub priority: Option<i32>,
    /// Needed to tell system-node-critical pods apart (OOM score policy).
    pub priority_class_name: String,
}

impl Default for PodSpec {
    fn default() -> Self {
        PodSpec {
            containers: Vec::new(),
            init_containers: Vec::new(),
            restart_policy: RestartPolicy::Always,
            host_network: false,
            termination_grace_period_seconds: None,
            volumes: Vec::new(),
            dns_policy: "ClusterFirst".to_string(),
            hostname: String::new(),
            subdomain: String::new(),
            node_name: String::new(),
            priority: None,
            priority_class_name: String::new(),
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
    pub name: String,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub env: Vec<EnvVar>,
    pub working_dir: String,
    pub ports: Vec<ContainerPort>,
    pub resources: ResourceRequirements,
    pub volume_mounts: Vec<VolumeMount>,
    /// `None` means the default; read it through [`Container::pull_policy`].
    pub image_pull_policy: Option<PullPolicy>,
    /// Only `Always` is allowed, and only on init containers (sidecars).
    pub restart_policy: Option<RestartPolicy>,
    pub tty: bool,
    pub stdin: bool,
    pub termination_message_path: String,
}

impl Default for Container {
    fn default() -> Self {
        Container {
            name: String::new(),
            image: String::new(),
            command: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            working_dir: String::new(),
            ports: Vec::new(),
            resources: ResourceRequirements::default(),
            volume_mounts: Vec::new(),
            image_pull_policy: None,
            restart_policy: None,
            tty: false,
            stdin: false,
            termination_message_path: DEFAULT_TERMINATION_MESSAGE_PATH.to_string(),
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
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerPort {
    pub name: String,
    pub container_port: i32,
    pub host_port: i32,
    pub protocol: String,
    #[serde(rename = "hostIP")]
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
    pub limits: BTreeMap<String, Quantity>,
    pub requests: BTreeMap<String, Quantity>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
    pub read_only: bool,
    pub sub_path: String,
}

/// A volume. Only the node-local sources a static pod can use are modelled;
/// a volume of another kind decodes with both set to `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Volume {
    pub name: String,
    pub host_path: Option<HostPathVolume>,
    pub empty_dir: Option<EmptyDirVolume>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HostPathVolume {
    pub path: String,
    /// `Directory`, `DirectoryOrCreate`, `File`, ...; empty means no check.
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EmptyDirVolume {
    /// Empty for node disk, `Memory` for tmpfs.
    pub medium: String,
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

/// Pod decoding and validation problems, worded as upstream's field errors
/// (`<path>: <kind>: <detail>`) so operators recognise them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    #[error("{field}: Required value{}", suffix(.detail))]
    Required { field: String, detail: String },
    /// `value` is already rendered as upstream prints it (strings quoted).
    #[error("{field}: Invalid value: {value}: {detail}")]
    Invalid {
        field: String,
        value: String,
        detail: String,
    },
    #[error("{field}: Duplicate value: {value}")]
    Duplicate { field: String, value: String },
    #[error("{field}: Not found: {value}")]
    NotFound { field: String, value: String },
    /// `supported` is the rendered list, e.g. `"Always", "Never"`.
    #[error("{field}: Unsupported value: {value}: supported values: {supported}")]
    Unsupported {
        field: String,
        value: String,
        supported: String,
    },
    #[error("{field}: Forbidden: {detail}")]
    Forbidden { field: String, detail: String },
    /// The document has the shape of a pod but a field has the wrong type.
    #[error("cannot decode pod: {reason}")]
    Decode { reason: String },
    /// Static pods run without the API server, so they may not use objects
    /// from it.
    #[error("static pods may not reference {resource}")]
    ApiReference { resource: String },
}

fn suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

fn quoted(s: &str) -> String {
    format!("{s:?}")
}

fn supported_list(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| quoted(v))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `"<name>_<namespace>"`, the key the kubelet uses for a pod in logs and maps.
pub fn full_name(pod: &Pod) -> String {
    format!("{}_{}", pod.metadata.name, pod.metadata.namespace)
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

fn all_containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.containers.iter().chain(spec.init_containers.iter())
}

/// Fills in what the API server's defaulting would have: requests from
/// limits, pull policies, port protocols, host ports under host networking,
/// the DNS policy and termination message path, and a negative grace period
/// raised to 1 second. Static pods never pass through an API server, so the
/// decoder calls this itself.
pub fn apply_api_defaults(pod: &mut Pod) {
    let spec = &mut pod.spec;
    if spec.dns_policy.is_empty() {
        spec.dns_policy = "ClusterFirst".to_string();
    }
    if let Some(grace) = spec.termination_grace_period_seconds {
        // Zero means "kill now" and is allowed; below that upstream clamps to
        // the shortest real grace period.
        if grace < 0 {
            spec.termination_grace_period_seconds = Some(1);
        }
    }
    let host_network = spec.host_network;
    for container in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut())
    {
        if container.image_pull_policy.is_none() {
            container.image_pull_policy = Some(container.pull_policy());
        }
        if container.termination_message_path.is_empty() {
            container.termination_message_path = DEFAULT_TERMINATION_MESSAGE_PATH.to_string();
        }
        for port in &mut container.ports {
            if port.protocol.is_empty() {
                port.protocol = "TCP".to_string();
            }
            if host_network && port.host_port == 0 {
                port.host_port = port.container_port;
            }
        }
        let resources = &mut container.resources;
        for (name, limit) in &resources.limits {
            resources.requests.entry(name.clone()).or_insert(*limit);
        }
    }
}

/// The pod's QoS class, by upstream's rules: BestEffort when no container
/// (init containers included) requests or limits CPU or memory; Guaranteed
/// when every container limits both and the summed requests equal the summed
/// limits; Burstable otherwise. A missing request counts as equal to its
/// limit, as API defaulting would have made it.
pub fn qos_class(spec: &PodSpec) -> QosClass {
    const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];
    // Fixed slots per resource rather than maps: this runs for every pod on
    // every cgroup and QoS pass, so it stays allocation-free.
    let mut requests: [Option<Quantity>; 2] = [None, None];
    let mut limits: [Option<Quantity>; 2] = [None, None];
    let mut guaranteed = true;
    let zero = Quantity::new(0, Format::DecimalSI);
    let add = |sum: &mut Option<Quantity>, q: &Quantity| {
        *sum = Some(match sum {
            // Overflow needs ~1e29 units; keeping the old sum is harmless.
            Some(old) => old.checked_add(q).unwrap_or(*old),
            None => *q,
        });
    };
    for container in all_containers(spec) {
        let res = &container.resources;
        let mut limited = 0;
        for (i, name) in QOS_RESOURCES.iter().enumerate() {
            let request = res.requests.get(*name).or_else(|| res.limits.get(*name));
            if let Some(q) = request.filter(|q| **q > zero) {
                add(&mut requests[i], q);
            }
            if let Some(q) = res.limits.get(*name).filter(|q| **q > zero) {
                add(&mut limits[i], q);
                limited += 1;
            }
        }
        if limited < QOS_RESOURCES.len() {
            guaranteed = false;
        }
    }
    let count = |slots: &[Option<Quantity>; 2]| slots.iter().filter(|s| s.is_some()).count();
    if count(&requests) == 0 && count(&limits) == 0 {
        return QosClass::BestEffort;
    }
    let requests_match = requests
        .iter()
        .zip(&limits)
        .all(|(req, lim)| req.is_none() || req == lim);
    if guaranteed && requests_match && count(&requests) == count(&limits) {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// The `oom_score_adj` for a container, by upstream's policy: -997 for
/// node-critical and Guaranteed pods, 1000 for BestEffort, and for Burstable
/// `1000 - 1000 * memory request / capacity`, kept within 3..=999 so it
/// stays between the other two classes. A sidecar scores no higher than the
/// regular container with the smallest request, so it outlives them.
///
/// Only the spec is at hand, so "node critical" here means the
/// `system-node-critical` class at critical priority; with the whole pod use
/// [`pod_container_oom_score_adj`], which also knows static and mirror pods
/// are critical. Requests are read as given: pass an API-defaulted pod (the
/// static pod decoder defaults requests from limits).
pub fn container_oom_score_adj(
    spec: &PodSpec,
    container: &Container,
    memory_capacity_bytes: u64,
) -> i64 {
    let node_critical =
        priority_is_critical(spec) && spec.priority_class_name == SYSTEM_NODE_CRITICAL;
    oom_score_adj(spec, container, memory_capacity_bytes, node_critical)
}

/// [`container_oom_score_adj`] with criticality judged from the whole pod.
pub fn pod_container_oom_score_adj(
    pod: &Pod,
    container: &Container,
    memory_capacity_bytes: u64,
) -> i64 {
    oom_score_adj(
        &pod.spec,
        container,
        memory_capacity_bytes,
        is_node_critical_pod(pod),
    )
}

fn oom_score_adj(
    spec: &PodSpec,
    container: &Container,
    memory_capacity_bytes: u64,
    node_critical: bool,
) -> i64 {
    if node_critical {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match qos_class(spec) {
        QosClass::Guaranteed => return GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => return BEST_EFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {}
    }
    // A zero capacity is a caller bug; one byte avoids dividing by zero and
    // yields the most protective Burstable score.
    let capacity = i128::from(memory_capacity_bytes.max(1));
    let score_for = |request: i64| 1000 - (1000 * i128::from(request)) / capacity;

    let mut score = score_for(memory_request(container));
    if is_sidecar(spec, container) {
        if let Some(min_request) = spec.containers.iter().map(memory_request).min() {
            score = score.min(score_for(min_request));
        }
    }
    let floor = i128::from(1000 + GUARANTEED_OOM_SCORE_ADJ);
    if score < floor {
        return 1000 + GUARANTEED_OOM_SCORE_ADJ;
    }
    if score == i128::from(BEST_EFFORT_OOM_SCORE_ADJ) {
        return BEST_EFFORT_OOM_SCORE_ADJ - 1;
    }
    // In range now: floor <= score < 1000.
    i64::try_from(score).unwrap_or(BEST_EFFORT_OOM_SCORE_ADJ - 1)
}

fn memory_request(container: &Container) -> i64 {
    container
        .resources
        .requests
        .get("memory")
        .map_or(0, Quantity::value)
}

/// A sidecar is an init container that restarts always.
fn is_sidecar(spec: &PodSpec, container: &Container) -> bool {
    container.restart_policy == Some(RestartPolicy::Always)
        && spec
            .init_containers
            .iter()
            .any(|init| init.name == container.name)
}

/// A hash of the container fields whose change means "restart it": since
/// Kubernetes 1.31 only the name and the image. FNV-1a 64 is written out
/// here because the value is persisted in container labels and must not
/// change between builds, which std's hasher does not promise.
pub fn container_hash(container: &Container) -> u64 {
    let mut hash = Fnv1a64::new();
    hash.write(container.name.as_bytes());
    // A separator keeps ("ab", "c") and ("a", "bc") apart.
    hash.write(&[0]);
    hash.write(container.image.as_bytes());
    hash.finish()
}

struct Fnv1a64(u64);

impl Fnv1a64 {
    fn new() -> Self {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const PORT_RANGE_ERR: &str = "must be between 1 and 65535, inclusive";

fn label_shape_ok(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// Upstream's `IsDNS1123Label` messages; empty when valid.
pub fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errors.push(format!(
            "must be no more than {DNS1123_LABEL_MAX} characters"
        ));
    }
    if !label_shape_ok(s) {
        errors.push(DNS1123_LABEL_ERR.to_string());
    }
    errors
}

/// Upstream's `IsDNS1123Subdomain` messages; empty when valid.
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errors.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
        ));
    }
    if !s.split('.').all(label_shape_ok) {
        errors.push(DNS1123_SUBDOMAIN_ERR.to_string());
    }
    errors
}

/// Upstream's `IsValidPortName` messages; empty when valid.
fn port_name_errors(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if name.len() > 15 {
        errors.push("must be no more than 15 characters".to_string());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if name.contains("--") {
        errors.push("must not contain consecutive hyphens".to_string());
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)".to_string());
    }
    if name.starts_with('-') || name.ends_with('-') {
        errors.push("must not begin or end with a hyphen".to_string());
    }
    errors
}

fn invalid(field: String, value: String, detail: impl Into<String>) -> PodError {
    PodError::Invalid {
        field,
        value,
        detail: detail.into(),
    }
}

fn required(field: String, detail: &str) -> PodError {
    PodError::Required {
        field,
        detail: detail.to_string(),
    }
}

/// Checks what the kubelet needs to run the pod and reports every problem
/// found, worded as upstream's validation: a valid name, containers with
/// unique valid names and images, sane ports, policies, resources, volumes
/// and mounts. An empty result means valid.
pub fn validate_pod(pod: &Pod) -> Vec<PodError> {
    let mut errors = Vec::new();
    let meta = &pod.metadata;
    if meta.name.is_empty() {
        errors.push(required(
            "metadata.name".into(),
            "name or generateName is required",
        ));
    } else {
        for msg in dns1123_subdomain_errors(&meta.name) {
            errors.push(invalid("metadata.name".into(), quoted(&meta.name), msg));
        }
    }
    // An empty namespace is filled in by the static pod defaults.
    if !meta.namespace.is_empty() {
        for msg in dns1123_label_errors(&meta.namespace) {
            errors.push(invalid(
                "metadata.namespace".into(),
                quoted(&meta.namespace),
                msg,
            ));
        }
    }

    let spec = &pod.spec;
    let volume_names = validate_volumes(&spec.volumes, &mut errors);

    let mut container_names = BTreeSet::new();
    for (i, c) in spec.init_containers.iter().enumerate() {
        let path = format!("spec.initContainers[{i}]");
        validate_container(
            c,
            &path,
            spec,
            &volume_names,
            &mut container_names,
            &mut errors,
        );
        if let Some(policy) = c.restart_policy {
            if policy != RestartPolicy::Always {
                errors.push(PodError::Unsupported {
                    field: format!("{path}.restartPolicy"),
                    value: quoted(policy.as_str()),
                    supported: supported_list(&["Always"]),
                });
            }
        }
    }
    if spec.containers.is_empty() {
        errors.push(required("spec.containers".into(), ""));
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let path = format!("spec.containers[{i}]");
        validate_container(
            c,
            &path,
            spec,
            &volume_names,
            &mut container_names,
            &mut errors,
        );
        if c.restart_policy.is_some() {
            errors.push(PodError::Forbidden {
                field: format!("{path}.restartPolicy"),
                detail: "may not be set for non-init containers".into(),
            });
        }
    }

    const DNS_POLICIES: [&str; 4] = ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
    if !spec.dns_policy.is_empty() && !DNS_POLICIES.contains(&spec.dns_policy.as_str()) {
        errors.push(PodError::Unsupported {
            field: "spec.dnsPolicy".into(),
            value: quoted(&spec.dns_policy),
            supported: supported_list(&DNS_POLICIES),
        });
    }
    if let Some(grace) = spec.termination_grace_period_seconds {
        if grace < 0 {
            errors.push(invalid(
                "spec.terminationGracePeriodSeconds".into(),
                grace.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }
    for (field, value) in [
        ("spec.hostname", &spec.hostname),
        ("spec.subdomain", &spec.subdomain),
    ] {
        if !value.is_empty() {
            for msg in dns1123_label_errors(value) {
                errors.push(invalid(field.into(), quoted(value), msg));
            }
        }
    }
    errors
}

fn validate_volumes(volumes: &[Volume], errors: &mut Vec<PodError>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let field = format!("spec.volumes[{i}].name");
        if v.name.is_empty() {
            errors.push(required(field, ""));
        } else {
            let msgs = dns1123_label_errors(&v.name);
            let ok = msgs.is_empty();
            for msg in msgs {
                errors.push(invalid(field.clone(), quoted(&v.name), msg));
            }
            if ok && !names.insert(v.name.clone()) {
                errors.push(PodError::Duplicate {
                    field,
                    value: quoted(&v.name),
                });
            }
        }
        if let Some(host_path) = &v.host_path {
            if host_path.path.is_empty() {
                errors.push(required(format!("spec.volumes[{i}].hostPath.path"), ""));
            }
        }
    }
    names
}

fn validate_container(
    c: &Container,
    path: &str,
    spec: &PodSpec,
    volume_names: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
    errors: &mut Vec<PodError>,
) {
    if c.name.is_empty() {
        errors.push(required(format!("{path}.name"), ""));
    } else {
        let msgs = dns1123_label_errors(&c.name);
        let ok = msgs.is_empty();
        for msg in msgs {
            errors.push(invalid(format!("{path}.name"), quoted(&c.name), msg));
        }
        if ok && !names.insert(c.name.clone()) {
            errors.push(PodError::Duplicate {
                field: format!("{path}.name"),
                value: quoted(&c.name),
            });
        }
    }
    if c.image.is_empty() {
        errors.push(required(format!("{path}.image"), ""));
    } else if c.image.trim() != c.image {
        errors.push(invalid(
            format!("{path}.image"),
            quoted(&c.image),
            "must not have leading or trailing whitespace",
        ));
    }

    let mut port_names = BTreeSet::new();
    for (i, port) in c.ports.iter().enumerate() {
        let p = format!("{path}.ports[{i}]");
        if !port.name.is_empty() {
            let msgs = port_name_errors(&port.name);
            if msgs.is_empty() {
                if !port_names.insert(port.name.clone()) {
                    errors.push(PodError::Duplicate {
                        field: format!("{p}.name"),
                        value: quoted(&port.name),
                    });
                }
            } else {
                for msg in msgs {
                    errors.push(invalid(format!("{p}.name"), quoted(&port.name), msg));
                }
            }
        }
        if port.container_port == 0 {
            errors.push(required(format!("{p}.containerPort"), ""));
        } else if !(1..=65535).contains(&port.container_port) {
            errors.push(invalid(
                format!("{p}.containerPort"),
                port.container_port.to_string(),
                PORT_RANGE_ERR,
            ));
        }
        if port.host_port != 0 && !(1..=65535).contains(&port.host_port) {
            errors.push(invalid(
                format!("{p}.hostPort"),
                port.host_port.to_string(),
                PORT_RANGE_ERR,
            ));
        }
        if spec.host_network && port.host_port != 0 && port.host_port != port.container_port {
            errors.push(invalid(
                format!("{p}.hostPort"),
                port.host_port.to_string(),
                "must match `containerPort` when `hostNetwork` is true",
            ));
        }
        const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];
        if port.protocol.is_empty() {
            errors.push(required(format!("{p}.protocol"), ""));
        } else if !PROTOCOLS.contains(&port.protocol.as_str()) {
            errors.push(PodError::Unsupported {
                field: format!("{p}.protocol"),
                value: quoted(&port.protocol),
                supported: supported_list(&PROTOCOLS),
            });
        }
    }

    let res = &c.resources;
    for (kind, list) in [("limits", &res.limits), ("requests", &res.requests)] {
        for (name, q) in list {
            if q.is_negative() {
                errors.push(invalid(
                    format!("{path}.resources.{kind}[{name}]"),
                    quoted(&q.to_string()),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    for (name, request) in &res.requests {
        if let Some(limit) = res.limits.get(name) {
            if request > limit {
                errors.push(invalid(
                    format!("{path}.resources.requests[{name}]"),
                    quoted(&request.to_string()),
                    format!("must be less than or equal to {name} limit of {limit}"),
                ));
            }
        }
    }

    let mut mount_paths = BTreeSet::new();
    for (i, m) in c.volume_mounts.iter().enumerate() {
        let p = format!("{path}.volumeMounts[{i}]");
        if m.name.is_empty() {
            errors.push(required(format!("{p}.name"), ""));
        } else if !volume_names.contains(&m.name) {
            errors.push(PodError::NotFound {
                field: format!("{p}.name"),
                value: quoted(&m.name),
            });
        }
        if m.mount_path.is_empty() {
            errors.push(required(format!("{p}.mountPath"), ""));
        } else if !mount_paths.insert(m.mount_path.clone()) {
            errors.push(invalid(
                format!("{p}.mountPath"),
                quoted(&m.mount_path),
                "must be unique",
            ));
        }
    }
}

/// Turns a decoded JSON document into a [`Pod`], first checking the enum
/// fields so a bad value is reported with its path and the allowed values
/// (serde's own message names neither). Nulls count as absent and empty
/// enum strings as unset, as in Go's decoding and defaulting.
pub fn pod_from_value(value: &serde_json::Value) -> Result<Pod, Vec<PodError>> {
    let mut value = value.clone();
    strip_nulls(&mut value);
    let errors = check_enum_fields(&mut value);
    if !errors.is_empty() {
        return Err(errors);
    }
    serde_json::from_value::<Pod>(value).map_err(|e| {
        vec![PodError::Decode {
            reason: e.to_string(),
        }]
    })
}

fn strip_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Checks one enum-valued string field, removing it when empty so the
/// default applies.
fn check_enum(
    obj: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
    path: &str,
    supported: &[&str],
    errors: &mut Vec<PodError>,
) {
    let Some(v) = obj.get(key) else { return };
    match v.as_str() {
        Some("") => {
            obj.remove(key);
        }
        Some(s) if supported.contains(&s) => {}
        _ => {
            let rendered = match v.as_str() {
                Some(s) => quoted(s),
                None => v.to_string(),
            };
            errors.push(PodError::Unsupported {
                field: format!("{path}.{key}"),
                value: rendered,
                supported: supported_list(supported),
            });
        }
    }
}

fn check_enum_fields(value: &mut serde_json::Value) -> Vec<PodError> {
    let mut errors = Vec::new();
    let Some(spec) = value.get_mut("spec").and_then(|s| s.as_object_mut()) else {
        return errors;
    };
    const RESTART: [&str; 3] = ["Always", "OnFailure", "Never"];
    check_enum(spec, "restartPolicy", "spec", &RESTART, &mut errors);
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(|c| c.as_array_mut()) else {
            continue;
        };
        for (i, c) in containers.iter_mut().enumerate() {
            let Some(c) = c.as_object_mut() else { continue };
            let path = format!("spec.{list}[{i}]");
            check_enum(
                c,
                "imagePullPolicy",
                &path,
                &["Always", "IfNotPresent", "Never"],
                &mut errors,
            );
            check_enum(c, "restartPolicy", &path, &RESTART, &mut errors);
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).expect("quantity")
    }

    fn list(cpu: &str, memory: &str) -> BTreeMap<String, Quantity> {
        let mut m = BTreeMap::new();
        if !cpu.is_empty() {
            m.insert("cpu".to_string(), q(cpu));
        }
        if !memory.is_empty() {
            m.insert("memory".to_string(), q(memory));
        }
        m
    }

    fn container(
        name: &str,
        requests: BTreeMap<String, Quantity>,
        limits: BTreeMap<String, Quantity>,
    ) -> Container {
        Container {
            name: name.to_string(),
            resources: ResourceRequirements { limits, requests },
            ..Container::default()
        }
    }

    fn spec_of(containers: Vec<Container>) -> PodSpec {
        PodSpec {
            containers,
            ..PodSpec::default()
        }
    }

    // Cases from upstream pkg/apis/core/v1/helper/qos/qos_test.go
    // (TestComputePodQOS, without the pod-level-resources ones).
    #[test]
    fn qos_class_table() {
        let g = |n| container(n, list("100m", "100Mi"), list("100m", "100Mi"));
        let be = |n| container(n, list("", ""), list("", ""));
        let cases: Vec<(&str, PodSpec, QosClass)> = vec![
            (
                "guaranteed",
                spec_of(vec![g("guaranteed")]),
                QosClass::Guaranteed,
            ),
            (
                "guaranteed-guaranteed",
                spec_of(vec![g("a"), g("b")]),
                QosClass::Guaranteed,
            ),
            (
                "best-effort-best-effort",
                spec_of(vec![be("a"), be("b")]),
                QosClass::BestEffort,
            ),
            ("best-effort", spec_of(vec![be("a")]), QosClass::BestEffort),
            (
                "best-effort-burstable",
                spec_of(vec![be("a"), container("b", list("1", ""), list("2", ""))]),
                QosClass::Burstable,
            ),
            (
                "best-effort-guaranteed",
                spec_of(vec![
                    be("a"),
                    container("b", list("10m", "100Mi"), list("10m", "100Mi")),
                ]),
                QosClass::Burstable,
            ),
            (
                "burstable-cpu-guaranteed-memory",
                spec_of(vec![container("a", list("", "100Mi"), list("", "100Mi"))]),
                QosClass::Burstable,
            ),
            (
                "burstable-no-limits",
                spec_of(vec![container("a", list("100m", "100Mi"), list("", ""))]),
                QosClass::Burstable,
            ),
            (
                "burstable-guaranteed",
                spec_of(vec![
                    container("a", list("1", "100Mi"), list("2", "100Mi")),
                    g("b"),
                ]),
                QosClass::Burstable,
            ),
            (
                "burstable-unbounded-but-requests-match-limits",
                spec_of(vec![
                    container("a", list("100m", "100Mi"), list("200m", "200Mi")),
                    container("b", list("100m", "100Mi"), list("", "")),
                ]),
                QosClass::Burstable,
            ),
            (
                "burstable-1",
                spec_of(vec![container(
                    "a",
                    list("10m", "100Mi"),
                    list("100m", "200Mi"),
                )]),
                QosClass::Burstable,
            ),
            (
                "burstable-2",
                spec_of(vec![container("a", list("0", "0"), list("100m", "200Mi"))]),
                QosClass::Burstable,
            ),
            (
                "best-effort-hugepages",
                {
                    let mut r = list("0", "0");
                    r.insert("hugepages-2Mi".into(), q("1Gi"));
                    spec_of(vec![container("a", r.clone(), r)])
                },
                QosClass::BestEffort,
            ),
            (
                "init-container",
                PodSpec {
                    init_containers: vec![container(
                        "init",
                        list("10m", "100Mi"),
                        list("100m", "200Mi"),
                    )],
                    ..spec_of(vec![be("a")])
                },
                QosClass::Burstable,
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(qos_class(&spec), want, "case {name}");
        }
    }

    #[test]
    fn qos_requests_default_from_limits() {
        // Limits alone: API defaulting copies them to requests, so Guaranteed.
        let spec = spec_of(vec![container("a", list("", ""), list("1", "1Gi"))]);
        assert_eq!(qos_class(&spec), QosClass::Guaranteed);
        // Equal values in different units still match.
        let spec = spec_of(vec![container(
            "a",
            list("1000m", "1024Mi"),
            list("1", "1Gi"),
        )]);
        assert_eq!(qos_class(&spec), QosClass::Guaranteed);
    }

    #[test]
    fn qos_display() {
        assert_eq!(QosClass::Guaranteed.to_string(), "Guaranteed");
        assert_eq!(QosClass::Burstable.to_string(), "Burstable");
        assert_eq!(QosClass::BestEffort.to_string(), "BestEffort");
    }

    const STANDARD_MEMORY: u64 = 8_000_000_000;

    fn mem(bytes: u64) -> BTreeMap<String, Quantity> {
        let mut m = BTreeMap::new();
        m.insert("memory".to_string(), q(&bytes.to_string()));
        m
    }

    /// (case, spec, memory capacity, [(container, lowest, highest score)])
    type OomCase = (&'static str, PodSpec, u64, Vec<(&'static str, i64, i64)>);

    // Cases from upstream pkg/kubelet/qos/policy_test.go
    // (TestGetContainerOOMScoreAdjust, without the pod-level-resources ones).
    #[test]
    fn oom_score_adj_table() {
        let mut cpu_req_zero = BTreeMap::new();
        cpu_req_zero.insert("cpu".to_string(), q("0"));
        let mut cpu_unlimited_req = mem(STANDARD_MEMORY / 2);
        cpu_unlimited_req.insert("cpu".into(), q("5m"));
        let mut request_no_limit = mem(STANDARD_MEMORY - 1);
        request_no_limit.insert("cpu".into(), q("5m"));

        let single = |c: Container| spec_of(vec![c]);
        let critical = |class: &str, priority: i32| PodSpec {
            priority_class_name: class.to_string(),
            priority: Some(priority),
            ..single(container("c", list("", ""), list("", "")))
        };

        let default_req = mem(STANDARD_MEMORY / 8);
        let default_lim = mem(1000 + STANDARD_MEMORY / 8);
        let main = container("main-1", default_req.clone(), default_lim.clone());
        let init = container("init-container", default_req.clone(), default_lim.clone());
        let sidecar = |name: &str, req: BTreeMap<String, Quantity>| Container {
            restart_policy: Some(RestartPolicy::Always),
            ..container(name, req, default_lim.clone())
        };
        let with_inits = |inits: Vec<Container>| PodSpec {
            init_containers: inits,
            ..spec_of(vec![main.clone()])
        };

        // (case, spec, capacity, [(container, low, high)])
        let cases: Vec<OomCase> = vec![
            (
                "cpu-limit",
                single(container("c", list("", ""), list("10", ""))),
                4_000_000_000,
                vec![("c", 999, 999)],
            ),
            (
                "memory-limit-cpu-request",
                single(container("c", cpu_req_zero, list("", "10G"))),
                8_000_000_000,
                vec![("c", 999, 999)],
            ),
            (
                "zero-memory-limit",
                single(container("c", list("", ""), list("", "0"))),
                7_230_457_451,
                vec![("c", 1000, 1000)],
            ),
            (
                "no-request-limit",
                single(container("c", list("", ""), list("", ""))),
                4_000_000_000,
                vec![("c", 1000, 1000)],
            ),
            (
                "equal-request-limit-cpu-memory",
                single(container("c", list("5m", "10G"), list("5m", "10G"))),
                123_456_789,
                vec![("c", -997, -997)],
            ),
            (
                "cpu-unlimited-memory-limited-with-requests",
                single(container("c", cpu_unlimited_req, list("", "10G"))),
                STANDARD_MEMORY,
                vec![("c", 495, 505)],
            ),
            (
                "request-no-limit",
                single(container("c", request_no_limit, list("", ""))),
                STANDARD_MEMORY,
                vec![("c", 3, 3)],
            ),
            (
                "cluster-critical",
                critical("system-cluster-critical", SYSTEM_CRITICAL_PRIORITY),
                4_000_000_000,
                vec![("c", 1000, 1000)],
            ),
            (
                "node-critical",
                critical(SYSTEM_NODE_CRITICAL, SYSTEM_CRITICAL_PRIORITY + 1000),
                4_000_000_000,
                vec![("c", -997, -997)],
            ),
            (
                "burstable-unique-container-pod",
                single(container("c", default_req.clone(), default_lim.clone())),
                STANDARD_MEMORY,
                vec![("c", 875, 880)],
            ),
            (
                "burstable-mixed-unique-main-container-pod",
                with_inits(vec![init.clone()]),
                STANDARD_MEMORY,
                vec![("init-container", 875, 880), ("main-1", 875, 880)],
            ),
            (
                "burstable-mixed-multi-container-small-sidecar-pod",
                with_inits(vec![
                    init.clone(),
                    sidecar("sidecar-small-container", mem(STANDARD_MEMORY / 20)),
                ]),
                STANDARD_MEMORY,
                vec![
                    ("init-container", 875, 880),
                    ("sidecar-small-container", 875, 875),
                    ("main-1", 875, 875),
                ],
            ),
            (
                "burstable-mixed-multi-container-same-request-pod",
                with_inits(vec![
                    init.clone(),
                    sidecar("sidecar-container", default_req.clone()),
                ]),
                STANDARD_MEMORY,
                vec![
                    ("init-container", 875, 880),
                    ("sidecar-container", 875, 875),
                    ("main-1", 875, 875),
                ],
            ),
            (
                "burstable-mixed-multi-container-big-sidecar-container-pod",
                with_inits(vec![
                    init.clone(),
                    sidecar("sidecar-big-container", mem(STANDARD_MEMORY / 2)),
                ]),
                STANDARD_MEMORY,
                vec![
                    ("init-container", 875, 880),
                    ("sidecar-big-container", 500, 500),
                    ("main-1", 875, 875),
                ],
            ),
        ];
        for (name, spec, capacity, expect) in cases {
            for (cname, low, high) in expect {
                let c = all_containers(&spec)
                    .find(|c| c.name == cname)
                    .expect("container in case");
                let got = container_oom_score_adj(&spec, c, capacity);
                assert!(
                    (low..=high).contains(&got),
                    "case {name}, container {cname}: got {got}, want {low}..={high}"
                );
            }
        }
    }

    #[test]
    fn static_node_critical_pod_is_protected_without_priority() {
        let mut pod = Pod {
            spec: PodSpec {
                priority_class_name: SYSTEM_NODE_CRITICAL.into(),
                ..spec_of(vec![container("c", list("", ""), list("", ""))])
            },
            ..Pod::default()
        };
        let c = pod.spec.containers[0].clone();
        // Not static yet, no priority: plain BestEffort.
        assert_eq!(pod_container_oom_score_adj(&pod, &c, 1 << 30), 1000);
        pod.metadata
            .annotations
            .insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
        assert!(is_critical_pod(&pod));
        assert_eq!(pod_container_oom_score_adj(&pod, &c, 1 << 30), -997);
        assert_eq!(container_oom_score_adj(&pod.spec, &c, 1 << 30), 1000);
    }

    #[test]
    fn oom_score_zero_capacity_does_not_panic() {
        let spec = spec_of(vec![container("c", list("", "1"), list("", ""))]);
        assert_eq!(container_oom_score_adj(&spec, &spec.containers[0], 0), 3);
    }

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
    fn container_hash_depends_on_name_and_image_only() {
        let a = Container {
            name: "web".into(),
            image: "nginx:1.25".into(),
            ..Container::default()
        };
        let mut b = a.clone();
        b.command = vec!["sh".into()];
        b.env.push(EnvVar {
            name: "X".into(),
            value: "1".into(),
        });
        assert_eq!(container_hash(&a), container_hash(&b));
        b.image = "nginx:1.26".into();
        assert_ne!(container_hash(&a), container_hash(&b));
        let split1 = Container {
            name: "ab".into(),
            image: "c".into(),
            ..Container::default()
        };
        let split2 = Container {
            name: "a".into(),
            image: "bc".into(),
            ..Container::default()
        };
        assert_ne!(container_hash(&split1), container_hash(&split2));
        // Pinned so a change of algorithm (which would restart every
        // container after an upgrade) cannot slip through.
        let empty = Container {
            name: String::new(),
            image: String::new(),
            ..Container::default()
        };
        // FNV-1a 64 of the single byte 0.
        assert_eq!(container_hash(&empty), 0xaf63_bd4c_8601_b7df);
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
    fn decode_ignores_unknown_fields_and_applies_serde_defaults() {
        let yaml = r#"
metadata:
  name: web
  labels: ~
spec:
  securityContext: {runAsUser: 0}
  containers:
  - name: web
    image: nginx
    livenessProbe: {httpGet: {path: /, port: 80}}
    ports:
    - containerPort: 80
    resources:
      limits: {cpu: 1, memory: 128Mi}
"#;
        let value: serde_json::Value = serde_saphyr::from_str(yaml).expect("yaml");
        let pod = pod_from_value(&value).expect("pod");
        let spec = &pod.spec;
        assert_eq!(spec.restart_policy, RestartPolicy::Always);
        assert_eq!(spec.dns_policy, "ClusterFirst");
        assert_eq!(spec.termination_grace_period(), 30);
        let c = &spec.containers[0];
        assert_eq!(c.ports[0].protocol, "TCP");
        assert_eq!(c.termination_message_path, DEFAULT_TERMINATION_MESSAGE_PATH);
        assert_eq!(c.resources.limits["cpu"], q("1"));
        assert!(pod.metadata.labels.is_empty());
    }

    #[test]
    fn api_defaults() {
        let mut pod = Pod {
            spec: PodSpec {
                host_network: true,
                dns_policy: String::new(),
                termination_grace_period_seconds: Some(-5),
                containers: vec![Container {
                    name: "c".into(),
                    image: "busybox".into(),
                    ports: vec![ContainerPort {
                        container_port: 8080,
                        protocol: String::new(),
                        ..ContainerPort::default()
                    }],
                    termination_message_path: String::new(),
                    ..container("c", list("", ""), list("500m", "1Gi"))
                }],
                ..PodSpec::default()
            },
            ..Pod::default()
        };
        pod.spec.containers[0].image = "busybox".into();
        apply_api_defaults(&mut pod);
        let c = &pod.spec.containers[0];
        assert_eq!(c.resources.requests, list("500m", "1Gi"));
        assert_eq!(c.image_pull_policy, Some(PullPolicy::Always));
        assert_eq!(c.ports[0].host_port, 8080);
        assert_eq!(c.ports[0].protocol, "TCP");
        assert_eq!(c.termination_message_path, DEFAULT_TERMINATION_MESSAGE_PATH);
        assert_eq!(pod.spec.dns_policy, "ClusterFirst");
        // Upstream clamps a negative grace period to 1 while decoding.
        assert_eq!(pod.spec.termination_grace_period_seconds, Some(1));
    }

    fn valid_pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: "web".into(),
                namespace: "default".into(),
                ..ObjectMeta::default()
            },
            spec: spec_of(vec![Container {
                name: "web".into(),
                image: "nginx".into(),
                ..Container::default()
            }]),
        }
    }

    fn messages(pod: &Pod) -> Vec<String> {
        validate_pod(pod).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn valid_pod_has_no_errors() {
        assert!(validate_pod(&valid_pod()).is_empty());
    }

    // Names from upstream's TestStaticPodNameGenerate and the invalid-pod
    // cases of pkg/kubelet/config/http_test.go (TestExtractInvalidPods).
    #[test]
    fn validation_table() {
        type Mutate = fn(&mut Pod);
        let cases: Vec<(&str, Mutate, Vec<&str>)> = vec![
            (
                "missing name",
                |p| p.metadata.name.clear(),
                vec!["metadata.name: Required value: name or generateName is required"],
            ),
            (
                "upper-case name",
                |p| p.metadata.name = "static-pod1-NODE1".into(),
                vec!["metadata.name: Invalid value: \"static-pod1-NODE1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"],
            ),
            (
                "no containers",
                |p| p.spec.containers.clear(),
                vec!["spec.containers: Required value"],
            ),
            (
                "unnamed container",
                |p| p.spec.containers[0].name.clear(),
                vec!["spec.containers[0].name: Required value"],
            ),
            (
                "invalid container name",
                |p| p.spec.containers[0].name = "_INVALID_".into(),
                vec!["spec.containers[0].name: Invalid value: \"_INVALID_\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"],
            ),
            (
                "missing image",
                |p| p.spec.containers[0].image.clear(),
                vec!["spec.containers[0].image: Required value"],
            ),
            (
                "duplicate container across init and regular",
                |p| {
                    let mut init = p.spec.containers[0].clone();
                    init.image = "busybox".into();
                    p.spec.init_containers.push(init);
                },
                vec!["spec.containers[0].name: Duplicate value: \"web\""],
            ),
            (
                "invalid volume name",
                |p| {
                    p.spec.volumes.push(Volume {
                        name: "_INVALID_".into(),
                        empty_dir: Some(EmptyDirVolume::default()),
                        ..Volume::default()
                    })
                },
                vec!["spec.volumes[0].name: Invalid value: \"_INVALID_\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"],
            ),
            (
                "duplicate volume names",
                |p| {
                    for _ in 0..2 {
                        p.spec.volumes.push(Volume {
                            name: "repeated".into(),
                            empty_dir: Some(EmptyDirVolume::default()),
                            ..Volume::default()
                        });
                    }
                },
                vec!["spec.volumes[1].name: Duplicate value: \"repeated\""],
            ),
            (
                "container port out of range and host port too",
                |p| {
                    p.spec.containers[0].ports.push(ContainerPort {
                        container_port: 70000,
                        host_port: -1,
                        ..ContainerPort::default()
                    })
                },
                vec![
                    "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                    "spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                "missing container port and bad protocol",
                |p| {
                    p.spec.containers[0].ports.push(ContainerPort {
                        protocol: "HTTP".into(),
                        ..ContainerPort::default()
                    })
                },
                vec![
                    "spec.containers[0].ports[0].containerPort: Required value",
                    "spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                ],
            ),
            (
                "host network port mismatch",
                |p| {
                    p.spec.host_network = true;
                    p.spec.containers[0].ports.push(ContainerPort {
                        container_port: 80,
                        host_port: 8080,
                        ..ContainerPort::default()
                    })
                },
                vec!["spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true"],
            ),
            (
                "restart policy on a regular container",
                |p| p.spec.containers[0].restart_policy = Some(RestartPolicy::Always),
                vec!["spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"],
            ),
            (
                "init container restart policy other than Always",
                |p| {
                    p.spec.init_containers.push(Container {
                        name: "init".into(),
                        image: "busybox".into(),
                        restart_policy: Some(RestartPolicy::Never),
                        ..Container::default()
                    })
                },
                vec!["spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""],
            ),
            (
                "request above limit",
                |p| {
                    let r = &mut p.spec.containers[0].resources;
                    r.requests.insert("cpu".into(), Quantity::parse("2").expect("q"));
                    r.limits.insert("cpu".into(), Quantity::parse("1").expect("q"));
                },
                vec!["spec.containers[0].resources.requests[cpu]: Invalid value: \"2\": must be less than or equal to cpu limit of 1"],
            ),
            (
                "mount of an undeclared volume",
                |p| {
                    p.spec.containers[0].volume_mounts.push(VolumeMount {
                        name: "data".into(),
                        ..VolumeMount::default()
                    })
                },
                vec![
                    "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
                    "spec.containers[0].volumeMounts[0].mountPath: Required value",
                ],
            ),
            (
                "unknown dns policy",
                |p| p.spec.dns_policy = "Google".into(),
                vec!["spec.dnsPolicy: Unsupported value: \"Google\": supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\""],
            ),
        ];
        for (name, mutate, want) in cases {
            let mut pod = valid_pod();
            mutate(&mut pod);
            assert_eq!(messages(&pod), want, "case {name}");
        }
    }

    #[test]
    fn validation_reports_every_problem() {
        let mut pod = valid_pod();
        pod.metadata.name.clear();
        pod.spec.containers[0].image.clear();
        pod.spec.containers.push(Container {
            name: "web".into(),
            image: "nginx".into(),
            ..Container::default()
        });
        let got = messages(&pod);
        assert_eq!(got.len(), 3, "{got:?}");
    }

    #[test]
    fn bad_enum_values_are_reported_with_their_path() {
        let value = serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "restartPolicy": "Sometimes",
                "containers": [{"name": "c", "image": "i", "imagePullPolicy": "Maybe"}]
            }
        });
        let errors: Vec<String> = pod_from_value(&value)
            .expect_err("must fail")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            vec![
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "spec.containers[0].imagePullPolicy: Unsupported value: \"Maybe\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
            ]
        );
        // An empty string means "use the default", as in upstream.
        let value = serde_json::json!({"spec": {"restartPolicy": ""}});
        let pod = pod_from_value(&value).expect("pod");
        assert_eq!(pod.spec.restart_policy, RestartPolicy::Always);
    }

    #[test]
    fn dns_label_length_limit() {
        let long = "a".repeat(64);
        assert_eq!(
            dns1123_label_errors(&long),
            vec!["must be no more than 63 characters".to_string()]
        );
        assert!(dns1123_label_errors(&"a".repeat(63)).is_empty());
        assert!(dns1123_subdomain_errors("kube-apiserver-node1.example").is_empty());
        assert!(!dns1123_subdomain_errors("a..b").is_empty());
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
}
