//! The simulated runtime's answers to eviction and image GC: usage set by tests, the
//! images it holds, and which of them its containers use.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;

use super::FakeRuntime;
use crate::domain::eviction::image_gc::PresentImage;
use crate::domain::eviction::signals::FsUsage;
use crate::domain::kuberuntime::labels::POD_UID_LABEL;
use crate::domain::stats::RuntimeUsage;
use crate::ports::node_stats::{
    InterfaceStats, RuntimeContainerStats, RuntimeFsUsage, RuntimePodStats, RuntimeStats,
};
use crate::ports::runtime::RuntimeError;

/// What tests set: per container its memory working set and writable layer; the image
/// filesystem; image sizes and pins by image name.
#[derive(Debug, Default)]
pub(super) struct Usage {
    containers: BTreeMap<String, (Option<u64>, Option<FsUsage>)>,
    image_fs: Vec<RuntimeFsUsage>,
    sizes: BTreeMap<String, u64>,
    pinned: BTreeSet<String>,
    /// Pod uid to the interfaces and the usage `pod_sandbox_stats` reports.
    pods: BTreeMap<String, (Vec<InterfaceStats>, RuntimeUsage)>,
}

impl FakeRuntime {
    /// The usage `container_stats` reports for a container.
    pub fn set_container_usage(
        &self,
        id: &str,
        memory: Option<u64>,
        writable_layer: Option<FsUsage>,
    ) {
        self.state()
            .usage
            .containers
            .insert(id.to_owned(), (memory, writable_layer));
    }

    /// The interfaces `pod_sandbox_stats` reports for the pod `uid`.
    pub fn set_pod_network(&self, uid: &str, interfaces: Vec<InterfaceStats>) {
        self.state().usage.pods.entry(uid.to_owned()).or_default().0 = interfaces;
    }

    /// The CPU, memory and processes `pod_sandbox_stats` reports for the pod `uid`.
    pub fn set_pod_usage(&self, uid: &str, usage: RuntimeUsage) {
        self.state().usage.pods.entry(uid.to_owned()).or_default().1 = usage;
    }

    /// What `image_fs_info` reports.
    pub fn set_image_fs(&self, filesystems: Vec<RuntimeFsUsage>) {
        self.state().usage.image_fs = filesystems;
    }

    /// An image's size (by name) and whether the runtime pins it.
    pub fn set_image_size(&self, image: &str, size: u64, pinned: bool) {
        let mut s = self.state();
        if let Some(info) = s.images.get_mut(image) {
            info.size_bytes = size;
        }
        s.usage.sizes.insert(image.to_owned(), size);
        if pinned {
            s.usage.pinned.insert(image.to_owned());
        }
    }

    /// The names of the images present.
    pub fn image_names(&self) -> Vec<String> {
        self.state().images.keys().cloned().collect()
    }
}

#[async_trait]
impl RuntimeStats for FakeRuntime {
    async fn image_fs_info(&self) -> Result<Vec<RuntimeFsUsage>, RuntimeError> {
        Ok(self.state().usage.image_fs.clone())
    }

    async fn container_stats(&self) -> Result<Vec<RuntimeContainerStats>, RuntimeError> {
        let s = self.state();
        Ok(s.containers
            .values()
            .map(|c| {
                let (memory, layer) = s
                    .usage
                    .containers
                    .get(&c.status.id)
                    .copied()
                    .unwrap_or_default();
                RuntimeContainerStats {
                    id: c.status.id.clone(),
                    name: c.status.name.clone(),
                    pod_uid: c.labels.get(POD_UID_LABEL).cloned().unwrap_or_default(),
                    memory_working_set_bytes: memory,
                    writable_layer: layer,
                    ..RuntimeContainerStats::default()
                }
            })
            .collect())
    }

    async fn pod_sandbox_stats(&self) -> Result<Vec<RuntimePodStats>, RuntimeError> {
        self.record("ListPodSandboxStats".to_owned());
        Ok(self
            .state()
            .usage
            .pods
            .iter()
            .map(|(uid, (network, usage))| RuntimePodStats {
                sandbox_id: format!("sandbox-{uid}"),
                pod_uid: uid.clone(),
                network: network.clone(),
                usage: usage.clone(),
            })
            .collect())
    }

    async fn list_images(&self) -> Result<Vec<PresentImage>, RuntimeError> {
        let s = self.state();
        Ok(s.images
            .iter()
            .map(|(name, info)| PresentImage {
                id: info.id.clone(),
                size_bytes: s.usage.sizes.get(name).copied().unwrap_or(info.size_bytes),
                pinned: s.usage.pinned.contains(name),
                names: vec![name.clone()],
            })
            .collect())
    }

    async fn images_in_use(&self) -> Result<BTreeSet<String>, RuntimeError> {
        let s = self.state();
        Ok(s.containers
            .values()
            .filter_map(|c| s.images.get(&c.status.image).map(|i| i.id.clone()))
            .collect())
    }

    async fn remove_image(&self, id: &str) -> Result<(), RuntimeError> {
        self.record(format!("RemoveImage {id}"));
        self.state().images.retain(|_, info| info.id != id);
        Ok(())
    }
}
