//! One observation of the node for the eviction manager (what upstream's stats summary
//! gives it): the root and `kubepods` cgroups' memory, the node and image filesystems,
//! the pids, and per pod its cgroup's working set and tasks, its containers' working
//! sets and writable layers (from the runtime), their logs and its emptyDirs (`du`).
//! A part that cannot be read is left out and logged; the rest still counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use tracing::debug;

use crate::domain::cgroup::tree::CgroupTree;
use crate::domain::cgroup::CgroupName;
use crate::domain::eviction::rank::is_local_ephemeral;
use crate::domain::eviction::signals::{
    ContainerStats, FsStats, MemoryStats, NodeSummary, PodStats, VolumeStats,
};
use crate::domain::kuberuntime::hosts::etc_hosts_file;
use crate::domain::kuberuntime::requests::{empty_dir_path, pod_log_dir, RequestContext};
use crate::domain::pod::Pod;
use crate::ports::error::Chain;
use crate::ports::node_stats::{FilesystemInfo, NodeStats, RuntimeContainerStats, RuntimeStats};

/// What an observation reads through.
pub struct Observer {
    pub stats: Arc<dyn NodeStats>,
    pub runtime: Arc<dyn RuntimeStats>,
    /// The pods' cgroup tree (`None` without `--cgroups-per-qos`): names only, nothing
    /// is created, so the dry run observes through the same code.
    pub tree: Option<CgroupTree>,
    pub requests: RequestContext,
    /// The node's memory capacity: the root cgroup's memory is measured against it.
    pub memory_capacity_bytes: u64,
}

/// The summary, and whether images live on a filesystem of their own.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    pub summary: NodeSummary,
    pub dedicated_image_fs: bool,
}

fn logged<T, E: std::error::Error>(what: &str, result: Result<T, E>) -> Option<T> {
    match result {
        Ok(v) => Some(v),
        Err(error) => {
            debug!(error = %Chain(&error), "eviction manager: cannot observe {what}");
            None
        }
    }
}

impl Observer {
    /// The `kubepods` cgroup, when there is a tree.
    pub fn kubepods(&self) -> Option<CgroupName> {
        self.tree.as_ref().map(|tree| tree.kubepods.clone())
    }

    async fn memory(&self, name: &CgroupName, limit_override: Option<u64>) -> Option<MemoryStats> {
        let stats = logged("cgroup memory", self.stats.cgroup(name).await)??;
        let limit = limit_override.or(stats.memory_limit_bytes);
        Some(MemoryStats::new(
            stats.memory_usage_bytes,
            stats.inactive_file_bytes,
            limit,
        ))
    }

    /// The filesystem the runtime keeps images on (the first `ImageFsInfo` names).
    pub async fn image_fs(&self) -> Option<FilesystemInfo> {
        let filesystems = logged("the image filesystem", self.runtime.image_fs_info().await)?;
        let mountpoint = filesystems.into_iter().next()?.mountpoint;
        logged(
            "the image filesystem",
            self.stats.filesystem(&mountpoint).await,
        )
    }

    /// Observes the node and `pods`; `now` stamps it.
    pub async fn observe(&self, pods: &[Pod], now: i64) -> Observation {
        let memory = self
            .memory(&CgroupName::root(), Some(self.memory_capacity_bytes))
            .await;
        let allocatable_memory = match self.kubepods() {
            Some(kubepods) => self.memory(&kubepods, None).await,
            None => None,
        };
        let node_fs = logged(
            "the node filesystem",
            self.stats.filesystem(&self.requests.root_dir).await,
        );
        let image_fs = self.image_fs().await;
        let dedicated_image_fs = match (&node_fs, &image_fs) {
            (Some(node), Some(image)) => node.device != image.device,
            _ => false,
        };
        let pids = logged("the pids", self.stats.pids().await);
        let running =
            logged("container stats", self.runtime.container_stats().await).unwrap_or_default();
        let mut by_pod: BTreeMap<&str, Vec<&RuntimeContainerStats>> = BTreeMap::new();
        for c in &running {
            by_pod.entry(c.pod_uid.as_str()).or_default().push(c);
        }
        let mut pod_stats = Vec::with_capacity(pods.len());
        for pod in pods {
            let containers = by_pod
                .get(pod.metadata.uid.as_str())
                .map(Vec::as_slice)
                .unwrap_or_default();
            pod_stats.push(self.pod(pod, containers).await);
        }
        let fs = |info: Option<FilesystemInfo>| info.map(|i| i.stats);
        Observation {
            summary: NodeSummary {
                time_unix_nanos: now,
                memory,
                allocatable_memory,
                node_fs: fs(node_fs),
                image_fs: fs(image_fs).or(fs(node_fs)),
                pids,
                pods: pod_stats,
            },
            dedicated_image_fs,
        }
    }

    async fn pod(&self, pod: &Pod, runtime: &[&RuntimeContainerStats]) -> PodStats {
        let cgroup = match self.tree.as_ref().map(|tree| tree.pod(pod)) {
            Some(planned) => {
                logged("a pod cgroup", self.stats.cgroup(&planned.name).await).flatten()
            }
            None => None,
        };
        let logs = pod_log_dir(&self.requests, pod);
        let mut containers = Vec::new();
        for spec in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
            // The instance the runtime measures (a restarted container has one running).
            let measured = runtime
                .iter()
                .filter(|c| c.name == spec.name)
                .max_by_key(|c| c.memory_working_set_bytes.is_some());
            let Some(measured) = measured else {
                continue;
            };
            let log_usage = logged(
                "container logs",
                self.stats.directory_usage(&logs.join(&spec.name)).await,
            )
            .flatten();
            containers.push(ContainerStats {
                name: spec.name.clone(),
                memory_working_set_bytes: measured.memory_working_set_bytes,
                rootfs: measured.writable_layer,
                logs: Some(log_usage.unwrap_or_default()),
            });
        }
        let mut volumes = Vec::new();
        for volume in pod.spec.volumes.iter().filter(|v| is_local_ephemeral(v)) {
            let path = empty_dir_path(&self.requests, &pod.metadata.uid, &volume.name);
            if let Some(usage) =
                logged("an emptyDir", self.stats.directory_usage(&path).await).flatten()
            {
                volumes.push(VolumeStats {
                    name: volume.name.clone(),
                    usage,
                });
            }
        }
        // Written by the containers too: counted in the pod's ephemeral storage.
        let etc_hosts = logged(
            "the pod's /etc/hosts",
            self.stats
                .directory_usage(&etc_hosts_file(&self.requests, &pod.metadata.uid))
                .await,
        )
        .flatten();
        PodStats {
            uid: pod.metadata.uid.clone(),
            memory_working_set_bytes: cgroup.as_ref().map(|c| {
                MemoryStats::new(c.memory_usage_bytes, c.inactive_file_bytes, None)
                    .working_set_bytes
            }),
            process_count: cgroup.and_then(|c| c.tasks),
            containers,
            volumes,
            etc_hosts,
        }
    }
}

/// A filesystem's free share in whole percent, for logs.
pub fn used_percent(fs: &FsStats) -> u64 {
    if fs.capacity_bytes == 0 {
        return 0;
    }
    100 - fs.available_bytes.min(fs.capacity_bytes) * 100 / fs.capacity_bytes
}
