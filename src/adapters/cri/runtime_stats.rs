//! What eviction and image GC ask the runtime over the CRI: `ImageFsInfo`,
//! `ListContainerStats`, `ListImages`, `RemoveImage`, and the images in use
//! (`ListContainers`' image references and the sandbox image of `Status`'s verbose
//! configuration).

use std::collections::BTreeSet;
use std::path::PathBuf;

use async_trait::async_trait;

use super::{proto, CriRuntime};
use crate::domain::eviction::image_gc::PresentImage;
use crate::domain::eviction::signals::FsUsage;
use crate::domain::kuberuntime::labels::POD_UID_LABEL;
use crate::domain::stats::RuntimeUsage;
use crate::ports::node_stats::{
    InterfaceStats, RuntimeContainerStats, RuntimeFsUsage, RuntimePodStats, RuntimeStats,
};
use crate::ports::runtime::RuntimeError;

fn value(v: Option<proto::UInt64Value>) -> Option<u64> {
    v.map(|v| v.value)
}

/// The sandbox image the runtime uses, from `Status`'s verbose `config` (containerd:
/// `sandboxImage`).
fn sandbox_image(info: &std::collections::HashMap<String, String>) -> Option<String> {
    let config: serde_json::Value = serde_json::from_str(info.get("config")?).ok()?;
    config
        .get("sandboxImage")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

#[async_trait]
impl RuntimeStats for CriRuntime {
    async fn image_fs_info(&self) -> Result<Vec<RuntimeFsUsage>, RuntimeError> {
        let mut c = self.images.clone();
        let r = self
            .call(
                "ImageFsInfo",
                c.image_fs_info(self.request(proto::ImageFsInfoRequest {})),
            )
            .await?;
        Ok(r.image_filesystems
            .into_iter()
            .map(|fs| RuntimeFsUsage {
                mountpoint: PathBuf::from(fs.fs_id.map(|id| id.mountpoint).unwrap_or_default()),
                used_bytes: value(fs.used_bytes).unwrap_or(0),
                inodes_used: value(fs.inodes_used).unwrap_or(0),
            })
            .collect())
    }

    async fn container_stats(&self) -> Result<Vec<RuntimeContainerStats>, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "ListContainerStats",
                c.list_container_stats(
                    self.request(proto::ListContainerStatsRequest { filter: None }),
                ),
            )
            .await?;
        Ok(r.stats
            .into_iter()
            .map(|s| {
                let attributes = s.attributes.unwrap_or_default();
                RuntimeContainerStats {
                    id: attributes.id,
                    name: attributes.metadata.map(|m| m.name).unwrap_or_default(),
                    pod_uid: attributes
                        .labels
                        .get(POD_UID_LABEL)
                        .cloned()
                        .unwrap_or_default(),
                    timestamp_unix_nanos: s.cpu.as_ref().map_or(0, |c| c.timestamp),
                    cpu_usage_nanos: s.cpu.and_then(|c| value(c.usage_core_nano_seconds)),
                    memory_working_set_bytes: s
                        .memory
                        .as_ref()
                        .and_then(|m| value(m.working_set_bytes)),
                    memory_usage_bytes: s.memory.as_ref().and_then(|m| value(m.usage_bytes)),
                    rss_bytes: s.memory.as_ref().and_then(|m| value(m.rss_bytes)),
                    page_faults: s.memory.as_ref().and_then(|m| value(m.page_faults)),
                    major_page_faults: s.memory.and_then(|m| value(m.major_page_faults)),
                    writable_layer: s.writable_layer.map(|w| FsUsage {
                        used_bytes: value(w.used_bytes).unwrap_or(0),
                        inodes_used: value(w.inodes_used).unwrap_or(0),
                    }),
                    detail: None,
                }
            })
            .collect())
    }

    async fn pod_sandbox_stats(&self) -> Result<Vec<RuntimePodStats>, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "ListPodSandboxStats",
                c.list_pod_sandbox_stats(
                    self.request(proto::ListPodSandboxStatsRequest { filter: None }),
                ),
            )
            .await?;
        Ok(r.stats
            .into_iter()
            .map(|s| {
                let attributes = s.attributes.unwrap_or_default();
                let linux = s.linux.unwrap_or_default();
                let memory = linux.memory.as_ref();
                let usage = RuntimeUsage {
                    cpu_usage_nanos: linux
                        .cpu
                        .as_ref()
                        .and_then(|c| value(c.usage_core_nano_seconds)),
                    memory_working_set_bytes: memory.and_then(|m| value(m.working_set_bytes)),
                    memory_usage_bytes: memory.and_then(|m| value(m.usage_bytes)),
                    memory_available_bytes: memory.and_then(|m| value(m.available_bytes)),
                    rss_bytes: memory.and_then(|m| value(m.rss_bytes)),
                    page_faults: memory.and_then(|m| value(m.page_faults)),
                    major_page_faults: memory.and_then(|m| value(m.major_page_faults)),
                    process_count: linux.process.as_ref().and_then(|p| value(p.process_count)),
                };
                // containerd 1.6 fills the default interface only; later runtimes
                // list every interface too.
                let network = linux.network.map_or_else(Vec::new, |n| {
                    let default = n.default_interface;
                    let default_name = default.as_ref().map(|d| d.name.clone());
                    default
                        .into_iter()
                        .chain(
                            n.interfaces
                                .into_iter()
                                .filter(|i| Some(&i.name) != default_name.as_ref()),
                        )
                        .filter(|i| i.name != "lo")
                        .map(|i| InterfaceStats {
                            name: i.name,
                            rx_bytes: value(i.rx_bytes).unwrap_or(0),
                            rx_errors: value(i.rx_errors).unwrap_or(0),
                            tx_bytes: value(i.tx_bytes).unwrap_or(0),
                            tx_errors: value(i.tx_errors).unwrap_or(0),
                            // The CRI counts no packets.
                            packets: None,
                        })
                        .collect()
                });
                RuntimePodStats {
                    sandbox_id: attributes.id,
                    pod_uid: attributes.metadata.map(|m| m.uid).unwrap_or_default(),
                    network,
                    usage,
                }
            })
            .collect())
    }

    async fn list_images(&self) -> Result<Vec<PresentImage>, RuntimeError> {
        Ok(self
            .all_images()
            .await?
            .into_iter()
            .map(|i| PresentImage {
                id: i.id,
                size_bytes: i.size,
                pinned: i.pinned,
                names: i.repo_tags.into_iter().chain(i.repo_digests).collect(),
            })
            .collect())
    }

    async fn images_in_use(&self) -> Result<BTreeSet<String>, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "ListContainers",
                c.list_containers(self.request(proto::ListContainersRequest { filter: None })),
            )
            .await?;
        let mut in_use: BTreeSet<String> = r
            .containers
            .into_iter()
            .flat_map(|c| [c.image_ref, c.image_id])
            .filter(|id| !id.is_empty())
            .collect();
        // The runtime's own sandbox image is always in use: it may differ from
        // --pod-infra-container-image, which image GC keeps too.
        let mut c = self.runtime.clone();
        let status = self
            .call(
                "Status",
                c.status(self.request(proto::StatusRequest { verbose: true })),
            )
            .await?;
        if let Some(image) = sandbox_image(&status.info) {
            let mut c = self.images.clone();
            let found = self
                .call(
                    "ImageStatus",
                    c.image_status(self.request(proto::ImageStatusRequest {
                        image: Some(proto::ImageSpec {
                            image: image.clone(),
                            ..Default::default()
                        }),
                        verbose: false,
                    })),
                )
                .await?;
            if let Some(found) = found.image {
                in_use.insert(found.id);
            }
        }
        Ok(in_use)
    }

    async fn remove_image(&self, id: &str) -> Result<(), RuntimeError> {
        let mut c = self.images.clone();
        self.call(
            "RemoveImage",
            c.remove_image(self.request(proto::RemoveImageRequest {
                image: Some(proto::ImageSpec {
                    image: id.to_owned(),
                    ..Default::default()
                }),
            })),
        )
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_image_comes_from_the_verbose_config() {
        let info = std::collections::HashMap::from([(
            "config".to_owned(),
            r#"{"sandboxImage":"registry.k8s.io/pause:3.6","other":1}"#.to_owned(),
        )]);
        assert_eq!(
            sandbox_image(&info).as_deref(),
            Some("registry.k8s.io/pause:3.6")
        );
        assert_eq!(sandbox_image(&std::collections::HashMap::new()), None);
        let broken = std::collections::HashMap::from([("config".to_owned(), "{".to_owned())]);
        assert_eq!(sandbox_image(&broken), None);
    }
}
