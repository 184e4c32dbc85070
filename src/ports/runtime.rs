//! The container runtime (CRI) in the project's own types: the runtime service
//! (sandboxes and containers) and the image service. Adapters map their wire types
//! into these; callers never see protobuf or transport details.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::domain::kuberuntime::runtime::{
    ContainerState, ContainerStatus, SandboxState, SandboxStatus,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeVersion {
    pub runtime_name: String,
    pub runtime_version: String,
    pub runtime_api_version: String,
}

/// Errors of every runtime call, mapped from the transport's codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("the runtime does not implement {0}")]
    Unimplemented(String),
    #[error("runtime unavailable at {endpoint}: {reason}")]
    Unavailable { endpoint: String, reason: String },
    #[error("runtime call {call} timed out after {timeout_ms} ms")]
    DeadlineExceeded { call: String, timeout_ms: u64 },
    #[error("runtime call {call} failed: {reason}")]
    Failed { call: String, reason: String },
}

/// What a pod sandbox is created from (the pod-level part of the spec).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxConfig {
    pub name: String,
    pub uid: String,
    pub namespace: String,
    pub attempt: u32,
    pub hostname: String,
    /// Directory the container log paths are relative to (`/var/log/pods/<ns>_<name>_<uid>`).
    pub log_directory: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Empty: the runtime's default.
    pub cgroup_parent: String,
    pub host_network: bool,
    pub host_pid: bool,
    pub host_ipc: bool,
    /// Empty: the runtime's default handler.
    pub runtime_handler: String,
    /// `None`: the runtime's default (usually the node's resolv.conf).
    pub dns: Option<DnsConfig>,
    pub port_mappings: Vec<PortMapping>,
}

/// The resolver configuration written into the sandbox's `/etc/resolv.conf`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DnsConfig {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    /// `ndots:5`-style resolver options.
    pub options: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
    Sctp,
}

/// A container port the sandbox exposes; `host_port` 0 means none on the host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortMapping {
    pub protocol: Protocol,
    pub container_port: i32,
    pub host_port: i32,
    /// Empty: every host address.
    pub host_ip: String,
}

/// A host path bind-mounted into a container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mount {
    pub container_path: String,
    pub host_path: String,
    pub readonly: bool,
}

/// The Linux resource settings of one container (cgroup values as the
/// kernel takes them: CFS period and quota in microseconds, 0 meaning unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinuxResources {
    pub cpu_period: i64,
    pub cpu_quota: i64,
    pub cpu_shares: i64,
    pub memory_limit_in_bytes: i64,
    pub oom_score_adj: i64,
}

/// What one container instance is created from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerConfig {
    pub name: String,
    pub attempt: u32,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub envs: Vec<(String, String)>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Relative to the sandbox's `log_directory`.
    pub log_path: String,
    pub mounts: Vec<Mount>,
    pub linux: LinuxResources,
    pub stdin: bool,
    pub tty: bool,
}

/// One sandbox in a listing, with the pod it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxEntry {
    pub status: SandboxStatus,
    pub name: String,
    pub uid: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
}

/// Which sandboxes to list; empty fields match everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxFilter {
    pub id: String,
    pub state: Option<SandboxState>,
    pub labels: BTreeMap<String, String>,
}

/// One container in a listing, with its sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEntry {
    pub status: ContainerStatus,
    pub sandbox_id: String,
    pub labels: BTreeMap<String, String>,
}

/// Which containers to list; empty fields match everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerFilter {
    pub id: String,
    pub sandbox_id: String,
    pub state: Option<ContainerState>,
    pub labels: BTreeMap<String, String>,
}

pub use crate::domain::cgroup::CgroupDriver;

/// The labels and annotations the kubelet puts on what it creates, as upstream names
/// them: how pods are found again in the runtime (after a restart too), and what
/// crictl shows.
pub mod labels {
    pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
    pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
    pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
    pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
    /// The container spec hash, as hex; read back by the CRI adapter.
    pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
    pub const CONTAINER_RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
    pub const CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
        "io.kubernetes.container.terminationMessagePath";
    pub const CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
        "io.kubernetes.container.terminationMessagePolicy";
    pub const POD_TERMINATION_GRACE_PERIOD_ANNOTATION: &str =
        "io.kubernetes.pod.terminationGracePeriod";
}

/// An image present on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size_bytes: u64,
}

/// What happened to a container, as the runtime streams it (CRI `GetContainerEvents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerEventKind {
    Created,
    Started,
    Stopped,
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEvent {
    pub container_id: String,
    pub kind: ContainerEventKind,
    /// The uid of the pod the container belongs to; empty when the runtime did not say.
    pub pod_uid: String,
}

/// A stream of container events; `None` once it has ended.
#[async_trait]
pub trait ContainerEventStream: Send {
    async fn next(&mut self) -> Option<Result<ContainerEvent, RuntimeError>>;
}

/// The runtime's sandbox and container calls. Removal and stop calls are
/// idempotent (an absent id is not an error); status calls answer `NotFound`.
#[async_trait]
pub trait RuntimeService: Send + Sync {
    /// The runtime's name and versions. Errors: `Unavailable` when it cannot be reached.
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError>;
    /// Creates and starts a sandbox; returns its id.
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, RuntimeError>;
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError>;
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError>;
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> Result<SandboxStatus, RuntimeError>;
    async fn list_pod_sandboxes(
        &self,
        filter: &SandboxFilter,
    ) -> Result<Vec<SandboxEntry>, RuntimeError>;
    /// Creates a container in a sandbox (made from `sandbox`); returns its id.
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> Result<String, RuntimeError>;
    async fn start_container(&self, container_id: &str) -> Result<(), RuntimeError>;
    /// Stops a container, killing it after `timeout_secs` of grace.
    async fn stop_container(
        &self,
        container_id: &str,
        timeout_secs: i64,
    ) -> Result<(), RuntimeError>;
    async fn remove_container(&self, container_id: &str) -> Result<(), RuntimeError>;
    async fn container_status(&self, container_id: &str) -> Result<ContainerStatus, RuntimeError>;
    async fn list_containers(
        &self,
        filter: &ContainerFilter,
    ) -> Result<Vec<ContainerEntry>, RuntimeError>;
    /// The runtime's cgroup driver; `None` when the runtime does not report it
    /// (containerd 1.6 answers UNIMPLEMENTED, which is tolerated here).
    async fn cgroup_driver(&self) -> Result<Option<CgroupDriver>, RuntimeError>;

    /// Container events as they happen. Runtimes without the call (containerd 1.6)
    /// answer `Unimplemented`, which is the default here.
    async fn container_events(&self) -> Result<Box<dyn ContainerEventStream>, RuntimeError> {
        Err(RuntimeError::Unimplemented("GetContainerEvents".into()))
    }
}

/// The runtime's image calls.
#[async_trait]
pub trait ImageService: Send + Sync {
    /// The image if present on the node; `None` when absent.
    async fn image_status(&self, image: &str) -> Result<Option<ImageInfo>, RuntimeError>;
    /// Pulls the image; returns its reference (digest or id).
    async fn pull_image(&self, image: &str) -> Result<String, RuntimeError>;
}
