//! The runtime wrapper that counts and times every CRI call at one place.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::registries::kubelet_metrics;
use super::Labels;
use crate::domain::cgroup::CgroupDriver;
use crate::domain::eviction::image_gc::PresentImage;
use crate::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};
use crate::domain::kuberuntime::runtime::{
    ContainerEntry, ContainerFilter, ContainerStatus, ExecResult, RuntimeVersion, SandboxEntry,
    SandboxFilter, SandboxStatus,
};
use crate::ports::node_stats::{
    RuntimeContainerStats, RuntimeFsUsage, RuntimePodStats, RuntimeStats,
};
use crate::ports::runtime::{ContainerEventStream, RuntimeError, RuntimeService, StreamRequest};

/// A runtime whose every call is counted and timed in `kubelet_runtime_operations*`
/// under upstream's `operation_type` names.
pub struct InstrumentedRuntime {
    inner: Arc<dyn RuntimeService>,
}

impl InstrumentedRuntime {
    pub fn wrap(inner: Arc<dyn RuntimeService>) -> Arc<dyn RuntimeService> {
        Arc::new(InstrumentedRuntime { inner })
    }
}

async fn recorded<T>(
    operation: &'static str,
    call: impl std::future::Future<Output = Result<T, RuntimeError>>,
) -> Result<T, RuntimeError> {
    let m = kubelet_metrics();
    let labels: Labels = vec![("operation_type", operation.to_owned())];
    let started = Instant::now();
    let result = call.await;
    m.runtime_operations.get_or_create(&labels).inc();
    m.runtime_operations_duration
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    if result.is_err() {
        m.runtime_operations_errors.get_or_create(&labels).inc();
    }
    result
}

#[async_trait]
impl RuntimeService for InstrumentedRuntime {
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError> {
        recorded("version", self.inner.version()).await
    }
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, RuntimeError> {
        recorded("run_podsandbox", self.inner.run_pod_sandbox(config)).await
    }
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        recorded("stop_podsandbox", self.inner.stop_pod_sandbox(sandbox_id)).await
    }
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        recorded(
            "remove_podsandbox",
            self.inner.remove_pod_sandbox(sandbox_id),
        )
        .await
    }
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> Result<SandboxStatus, RuntimeError> {
        recorded(
            "podsandbox_status",
            self.inner.pod_sandbox_status(sandbox_id),
        )
        .await
    }
    async fn list_pod_sandboxes(
        &self,
        filter: &SandboxFilter,
    ) -> Result<Vec<SandboxEntry>, RuntimeError> {
        recorded("list_podsandbox", self.inner.list_pod_sandboxes(filter)).await
    }
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> Result<String, RuntimeError> {
        recorded(
            "create_container",
            self.inner.create_container(sandbox_id, config, sandbox),
        )
        .await
    }
    async fn start_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        recorded("start_container", self.inner.start_container(container_id)).await
    }
    async fn stop_container(
        &self,
        container_id: &str,
        timeout_secs: i64,
    ) -> Result<(), RuntimeError> {
        recorded(
            "stop_container",
            self.inner.stop_container(container_id, timeout_secs),
        )
        .await
    }
    async fn remove_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        recorded(
            "remove_container",
            self.inner.remove_container(container_id),
        )
        .await
    }
    async fn container_status(&self, container_id: &str) -> Result<ContainerStatus, RuntimeError> {
        recorded(
            "container_status",
            self.inner.container_status(container_id),
        )
        .await
    }
    async fn list_containers(
        &self,
        filter: &ContainerFilter,
    ) -> Result<Vec<ContainerEntry>, RuntimeError> {
        recorded("list_containers", self.inner.list_containers(filter)).await
    }
    async fn cgroup_driver(&self) -> Result<Option<CgroupDriver>, RuntimeError> {
        recorded("runtime_config", self.inner.cgroup_driver()).await
    }
    async fn runtime_handlers(
        &self,
    ) -> Result<Vec<crate::domain::kuberuntime::userns::RuntimeHandler>, RuntimeError> {
        recorded("status", self.inner.runtime_handlers()).await
    }
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, RuntimeError> {
        recorded(
            "exec_sync",
            self.inner.exec_sync(container_id, cmd, timeout),
        )
        .await
    }
    async fn streaming_url(&self, request: &StreamRequest) -> Result<String, RuntimeError> {
        let operation = match request {
            StreamRequest::Exec { .. } => "exec",
            StreamRequest::Attach { .. } => "attach",
            StreamRequest::PortForward { .. } => "port_forward",
        };
        recorded(operation, self.inner.streaming_url(request)).await
    }
    async fn container_events(&self) -> Result<Box<dyn ContainerEventStream>, RuntimeError> {
        recorded("get_container_events", self.inner.container_events()).await
    }
    async fn update_container_cpuset(
        &self,
        container_id: &str,
        cpuset_cpus: &str,
    ) -> Result<(), RuntimeError> {
        recorded(
            "update_container_resources",
            self.inner
                .update_container_cpuset(container_id, cpuset_cpus),
        )
        .await
    }

    async fn reopen_container_log(&self, container_id: &str) -> Result<(), RuntimeError> {
        recorded(
            "reopen_container_log",
            self.inner.reopen_container_log(container_id),
        )
        .await
    }
}

/// The runtime's stats and image calls, counted and timed like the others.
pub struct InstrumentedRuntimeStats {
    inner: Arc<dyn RuntimeStats>,
}

impl InstrumentedRuntimeStats {
    pub fn wrap(inner: Arc<dyn RuntimeStats>) -> Arc<dyn RuntimeStats> {
        Arc::new(InstrumentedRuntimeStats { inner })
    }
}

#[async_trait]
impl RuntimeStats for InstrumentedRuntimeStats {
    async fn image_fs_info(&self) -> Result<Vec<RuntimeFsUsage>, RuntimeError> {
        recorded("image_fs_info", self.inner.image_fs_info()).await
    }
    async fn container_stats(&self) -> Result<Vec<RuntimeContainerStats>, RuntimeError> {
        recorded("list_container_stats", self.inner.container_stats()).await
    }
    async fn pod_sandbox_stats(&self) -> Result<Vec<RuntimePodStats>, RuntimeError> {
        recorded("list_podsandbox_stats", self.inner.pod_sandbox_stats()).await
    }
    async fn list_images(&self) -> Result<Vec<PresentImage>, RuntimeError> {
        recorded("list_images", self.inner.list_images()).await
    }
    // Several CRI calls (containers, status, image status) behind one answer: no one
    // operation of upstream's names it.
    async fn images_in_use(&self) -> Result<BTreeSet<String>, RuntimeError> {
        self.inner.images_in_use().await
    }
    async fn remove_image(&self, id: &str) -> Result<(), RuntimeError> {
        recorded("remove_image", self.inner.remove_image(id)).await
    }
}
