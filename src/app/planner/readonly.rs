//! The runtime as the planner sees it: reads pass through, writes are recorded and
//! refused. Read-only by construction: the planner is only ever given this wrapper,
//! so even a planner bug cannot create, stop or remove anything.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::domain::cgroup::CgroupDriver;
use crate::domain::eviction::image_gc::PresentImage;
use crate::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};
use crate::domain::kuberuntime::runtime::{
    ContainerEntry, ContainerFilter, ContainerStatus, ImageInfo, RuntimeVersion, SandboxEntry,
    SandboxFilter, SandboxStatus,
};
use crate::ports::node_stats::{RuntimeContainerStats, RuntimeFsUsage, RuntimeStats};
use crate::ports::runtime::{cause, ImageService, RuntimeError, RuntimeService};

/// Wraps a runtime (and optionally an image service); see the module documentation.
pub struct ReadOnlyRuntime {
    inner: Arc<dyn RuntimeService>,
    images: Option<Arc<dyn ImageService>>,
    attempted: Mutex<Vec<String>>,
}

impl ReadOnlyRuntime {
    pub fn new(inner: Arc<dyn RuntimeService>) -> Self {
        Self {
            inner,
            images: None,
            attempted: Mutex::new(Vec::new()),
        }
    }

    #[must_use]
    pub fn with_images(mut self, images: Arc<dyn ImageService>) -> Self {
        self.images = Some(images);
        self
    }

    /// The write calls that were refused, in order (`RunPodSandbox web`, ...).
    pub fn attempted_writes(&self) -> Vec<String> {
        self.attempted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn refuse<T>(&self, call: &str, subject: &str) -> Result<T, RuntimeError> {
        self.attempted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("{call} {subject}"));
        Err(RuntimeError::Failed {
            call: call.to_string(),
            source: cause(format!(
                "refused for {subject:?}: the dry-run planner is read-only"
            )),
        })
    }
}

#[async_trait]
impl RuntimeService for ReadOnlyRuntime {
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError> {
        self.inner.version().await
    }
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, RuntimeError> {
        self.refuse("RunPodSandbox", &config.name)
    }
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        self.refuse("StopPodSandbox", sandbox_id)
    }
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        self.refuse("RemovePodSandbox", sandbox_id)
    }
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> Result<SandboxStatus, RuntimeError> {
        self.inner.pod_sandbox_status(sandbox_id).await
    }
    async fn list_pod_sandboxes(
        &self,
        filter: &SandboxFilter,
    ) -> Result<Vec<SandboxEntry>, RuntimeError> {
        self.inner.list_pod_sandboxes(filter).await
    }
    async fn create_container(
        &self,
        _sandbox_id: &str,
        config: &ContainerConfig,
        _sandbox: &SandboxConfig,
    ) -> Result<String, RuntimeError> {
        self.refuse("CreateContainer", &config.name)
    }
    async fn start_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        self.refuse("StartContainer", container_id)
    }
    async fn stop_container(
        &self,
        container_id: &str,
        _timeout_secs: i64,
    ) -> Result<(), RuntimeError> {
        self.refuse("StopContainer", container_id)
    }
    async fn remove_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        self.refuse("RemoveContainer", container_id)
    }
    async fn reopen_container_log(&self, container_id: &str) -> Result<(), RuntimeError> {
        self.refuse("ReopenContainerLog", container_id)
    }
    async fn update_container_cpuset(
        &self,
        container_id: &str,
        _cpuset_cpus: &str,
    ) -> Result<(), RuntimeError> {
        self.refuse("UpdateContainerResources", container_id)
    }
    async fn container_status(&self, container_id: &str) -> Result<ContainerStatus, RuntimeError> {
        self.inner.container_status(container_id).await
    }
    async fn list_containers(
        &self,
        filter: &ContainerFilter,
    ) -> Result<Vec<ContainerEntry>, RuntimeError> {
        self.inner.list_containers(filter).await
    }
    async fn cgroup_driver(&self) -> Result<Option<CgroupDriver>, RuntimeError> {
        self.inner.cgroup_driver().await
    }
    async fn runtime_handlers(
        &self,
    ) -> Result<Vec<crate::domain::kuberuntime::userns::RuntimeHandler>, RuntimeError> {
        self.inner.runtime_handlers().await
    }
}

#[async_trait]
impl ImageService for ReadOnlyRuntime {
    async fn image_status(&self, image: &str) -> Result<Option<ImageInfo>, RuntimeError> {
        match &self.images {
            Some(images) => images.image_status(image).await,
            None => Err(RuntimeError::Unimplemented("ImageStatus".into())),
        }
    }
    async fn pull_image(
        &self,
        image: &str,
        _auth: Option<&crate::domain::kuberuntime::credentials::AuthConfig>,
    ) -> Result<String, RuntimeError> {
        self.refuse("PullImage", image)
    }
}

/// The runtime's statistics as the planner sees them: reads pass through, image
/// removal is refused, as [`ReadOnlyRuntime`] refuses writes.
pub struct ReadOnlyStats {
    inner: Arc<dyn RuntimeStats>,
}

impl ReadOnlyStats {
    pub fn new(inner: Arc<dyn RuntimeStats>) -> Self {
        Self { inner }
    }
}

#[async_trait]
impl RuntimeStats for ReadOnlyStats {
    async fn image_fs_info(&self) -> Result<Vec<RuntimeFsUsage>, RuntimeError> {
        self.inner.image_fs_info().await
    }
    async fn container_stats(&self) -> Result<Vec<RuntimeContainerStats>, RuntimeError> {
        self.inner.container_stats().await
    }
    async fn list_images(&self) -> Result<Vec<PresentImage>, RuntimeError> {
        self.inner.list_images().await
    }
    async fn images_in_use(&self) -> Result<BTreeSet<String>, RuntimeError> {
        self.inner.images_in_use().await
    }
    async fn remove_image(&self, id: &str) -> Result<(), RuntimeError> {
        Err(RuntimeError::Failed {
            call: "RemoveImage".into(),
            source: cause(format!(
                "refused for {id:?}: the dry-run planner is read-only"
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::runtime::FakeRuntime;

    /// Every write of both ports, through the wrapper, against a journaling runtime:
    /// each one is refused and recorded, and the inner journal stays empty.
    #[tokio::test]
    async fn no_write_reaches_the_inner_runtime() {
        let fake = Arc::new(FakeRuntime::new());
        fake.add_image("busybox");
        let ro = ReadOnlyRuntime::new(fake.clone()).with_images(fake.clone());
        let sandbox = SandboxConfig {
            name: "web".into(),
            ..Default::default()
        };
        let container = ContainerConfig {
            name: "app".into(),
            ..Default::default()
        };
        assert!(ro.run_pod_sandbox(&sandbox).await.is_err());
        assert!(ro.stop_pod_sandbox("sb1").await.is_err());
        assert!(ro.remove_pod_sandbox("sb1").await.is_err());
        assert!(ro
            .create_container("sb1", &container, &sandbox)
            .await
            .is_err());
        assert!(ro.start_container("c1").await.is_err());
        assert!(ro.stop_container("c1", 30).await.is_err());
        assert!(ro.remove_container("c1").await.is_err());
        assert!(ro.pull_image("busybox", None).await.is_err());
        // Reads still answer.
        assert!(ro.version().await.is_ok());
        assert!(ro
            .list_pod_sandboxes(&SandboxFilter::default())
            .await
            .is_ok_and(|l| l.is_empty()));
        assert!(ro.image_status("busybox").await.is_ok_and(|i| i.is_some()));
        assert_eq!(fake.journal(), Vec::<String>::new());
        assert_eq!(
            ro.attempted_writes(),
            [
                "RunPodSandbox web",
                "StopPodSandbox sb1",
                "RemovePodSandbox sb1",
                "CreateContainer app",
                "StartContainer c1",
                "StopContainer c1",
                "RemoveContainer c1",
                "PullImage busybox"
            ]
        );
    }

    /// The eviction observer's statistics port: reads pass, image removal never
    /// reaches the runtime.
    #[tokio::test]
    async fn the_stats_wrapper_refuses_to_remove_an_image() {
        let fake = Arc::new(FakeRuntime::new());
        fake.add_image("busybox");
        let ro = ReadOnlyStats::new(fake.clone());
        let before = ro.list_images().await.expect("images listed");
        assert_eq!(before.len(), 1);
        assert!(ro.remove_image(&before[0].id).await.is_err());
        assert_eq!(ro.list_images().await.expect("images listed"), before);
    }
}
