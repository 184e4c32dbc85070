//! The container runtime (CRI) in the project's own types: the runtime service
//! (sandboxes and containers) and the image service. The values they carry are domain
//! types (`domain::kuberuntime::{requests, runtime}`); adapters map their wire types
//! into these, so callers never see protobuf or transport details.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::cgroup::CgroupDriver;
use crate::domain::kuberuntime::credentials::AuthConfig;
use crate::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};
use crate::domain::kuberuntime::runtime::{
    ContainerEntry, ContainerEvent, ContainerFilter, ContainerStatus, ExecResult, ImageInfo,
    RuntimeVersion, SandboxEntry, SandboxFilter, SandboxStatus,
};

/// The cause of a runtime error as the transport or the runtime gave it; shared, so an
/// error can be cloned into every status it explains.
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// A cause that is only a message (a runtime's own refusal, an unusable endpoint).
pub fn cause(message: impl Into<String>) -> Cause {
    Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(
        message.into(),
    ))
}

/// Errors of every runtime call, mapped from the transport's codes.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("the runtime does not implement {0}")]
    Unimplemented(String),
    #[error("runtime unavailable at {endpoint}")]
    Unavailable {
        endpoint: String,
        #[source]
        source: Cause,
    },
    #[error("runtime call {call} timed out after {timeout_ms} ms")]
    DeadlineExceeded { call: String, timeout_ms: u64 },
    #[error("runtime call {call} failed")]
    Failed {
        call: String,
        #[source]
        source: Cause,
    },
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
    /// The runtime's handlers and what each supports, from CRI `Status`; empty when the
    /// runtime lists none (containerd 1.6).
    async fn runtime_handlers(
        &self,
    ) -> Result<Vec<crate::domain::kuberuntime::userns::RuntimeHandler>, RuntimeError>;

    /// Runs `cmd` in a running container and waits for it to end, at most `timeout`
    /// (zero: no limit of its own; the call's timeout is then the request timeout).
    /// Errors: `NotFound` for an unknown container, `DeadlineExceeded` when the command
    /// outlives the timeout. The default answers `Unimplemented`.
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, RuntimeError> {
        let _ = (container_id, cmd, timeout);
        Err(RuntimeError::Unimplemented("ExecSync".into()))
    }

    /// The URL of the runtime's streaming server for an exec, attach or port-forward
    /// (the CRI's `Exec`, `Attach`, `PortForward`); the kubelet API proxies the client's
    /// upgraded connection to it. The default answers `Unimplemented`.
    async fn streaming_url(&self, request: &StreamRequest) -> Result<String, RuntimeError> {
        let _ = request;
        Err(RuntimeError::Unimplemented(
            "Exec/Attach/PortForward".into(),
        ))
    }

    /// Asks the runtime to reopen the container's log file (the CRI's
    /// `ReopenContainerLog`) after the kubelet renamed it: the runtime creates the file
    /// afresh at its path and writes there. Errors when the container is not running. The
    /// default answers `Unimplemented`.
    async fn reopen_container_log(&self, container_id: &str) -> Result<(), RuntimeError> {
        let _ = container_id;
        Err(RuntimeError::Unimplemented("ReopenContainerLog".into()))
    }

    /// Changes a running container's exclusive or shared CPUs (the CRI's
    /// `UpdateContainerResources` with only `cpuset_cpus`, as upstream's CPU manager sends
    /// it). Errors: `NotFound` for an unknown container. The default answers
    /// `Unimplemented`.
    async fn update_container_cpuset(
        &self,
        container_id: &str,
        cpuset_cpus: &str,
    ) -> Result<(), RuntimeError> {
        let _ = (container_id, cpuset_cpus);
        Err(RuntimeError::Unimplemented(
            "UpdateContainerResources".into(),
        ))
    }

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
    /// Pulls the image, with the registry credentials `auth` when given (the CRI's
    /// `AuthConfig`); returns its reference (digest or id).
    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&AuthConfig>,
    ) -> Result<String, RuntimeError>;
}

/// What a streaming session asks of the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamRequest {
    Exec {
        container_id: String,
        cmd: Vec<String>,
        tty: bool,
        stdin: bool,
        stdout: bool,
        stderr: bool,
    },
    Attach {
        container_id: String,
        tty: bool,
        stdin: bool,
        stdout: bool,
        stderr: bool,
    },
    PortForward {
        sandbox_id: String,
        ports: Vec<i32>,
    },
}
