//! What the eviction manager and image GC observe of the node: cgroup memory and tasks,
//! filesystems, directory usage and process ids ([`NodeStats`]); kernel notifications of
//! a cgroup's memory usage crossing a threshold ([`MemoryThresholdNotifier`]); and what
//! the container runtime knows of its images and containers' usage ([`RuntimeStats`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::domain::cgroup::CgroupName;
use crate::domain::eviction::image_gc::PresentImage;
use crate::domain::eviction::signals::{FsStats, FsUsage, PidStats};
use crate::ports::runtime::RuntimeError;

/// Why node statistics could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// A kernel file could not be read.
    #[error("failed to read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A kernel file held what the kernel does not write.
    #[error("failed to parse {}: {detail}", path.display())]
    Parse { path: PathBuf, detail: String },
    /// A filesystem could not be measured.
    #[error("failed to statfs {}", path.display())]
    Statfs {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A needed cgroup controller is not mounted.
    #[error("no cgroup hierarchy with the {controller} controller is mounted")]
    NoController { controller: &'static str },
    /// Setting up or waiting for a kernel notification failed.
    #[error("memory threshold notification on {}: {step}", path.display())]
    Notification {
        path: PathBuf,
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The kernel offers no memory threshold notification here (cgroup v2).
    #[error("memory threshold notifications are not available: {0}")]
    Unsupported(String),
}

pub use crate::domain::stats::{
    CgroupStats, InterfaceStats, RuntimeContainerStats, RuntimePodStats,
};

/// A filesystem's size and use, and the device it is on (to tell whether two paths
/// share one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilesystemInfo {
    pub stats: FsStats,
    pub device: u64,
    /// What the filesystem holds as upstream's `fs.Info` counts it: bytes in blocks not
    /// free (`f_blocks - f_bfree`), inodes not free.
    pub used: FsUsage,
}

/// The node's kernel statistics.
#[async_trait]
pub trait NodeStats: Send + Sync {
    /// The memory and tasks of `cgroup` (the root cgroup for the node); `None` when the
    /// cgroup does not exist.
    /// # Errors
    /// [`StatsError::NoController`] when no memory hierarchy is mounted,
    /// [`StatsError::Read`]/[`StatsError::Parse`] for an unreadable or malformed file.
    async fn cgroup(&self, cgroup: &CgroupName) -> Result<Option<CgroupStats>, StatsError>;

    /// The cgroups directly below `cgroup` of the containers with these runtime `ids` (a
    /// pod's, its sandbox's left unread), by directory name in any runtime's spelling
    /// (`<id>`, `cri-containerd-<id>.scope`); empty when `cgroup` does not exist.
    /// # Errors
    /// As [`NodeStats::cgroup`], and [`StatsError::Read`] when the directory cannot be
    /// listed.
    async fn child_cgroups(
        &self,
        cgroup: &CgroupName,
        ids: &[&str],
    ) -> Result<Vec<(String, CgroupStats)>, StatsError>;

    /// The filesystem holding `path`.
    /// # Errors
    /// [`StatsError::Statfs`] when `path` cannot be measured.
    async fn filesystem(&self, path: &Path) -> Result<FilesystemInfo, StatsError>;

    /// Bytes on disk and inodes used below `path` on its own filesystem (as `du -x`);
    /// `None` when `path` does not exist.
    /// # Errors
    /// [`StatsError::Read`] when a directory cannot be listed.
    async fn directory_usage(&self, path: &Path) -> Result<Option<FsUsage>, StatsError>;

    /// The node's process ids: how many may exist, how many do.
    /// # Errors
    /// [`StatsError::Read`]/[`StatsError::Parse`] for the kernel files.
    async fn pids(&self) -> Result<PidStats, StatsError>;

    /// This process's resident memory, CPU time and start time (for `/metrics`);
    /// `None` where the system does not say.
    /// # Errors
    /// [`StatsError::Read`]/[`StatsError::Parse`] for the kernel files.
    async fn own_process(&self) -> Result<Option<OwnProcess>, StatsError> {
        Ok(None)
    }

    /// The interfaces of the network namespace of `cgroup`'s processes (the host's for
    /// the root cgroup); empty where unknown (no process, no such cgroup).
    /// # Errors
    /// [`StatsError::Read`] for an unreadable kernel file.
    async fn network(&self, cgroup: &CgroupName) -> Result<Vec<InterfaceStats>, StatsError> {
        let _ = cgroup;
        Ok(Vec::new())
    }

    /// The node's boot time in unix seconds; `None` where the system does not say.
    /// # Errors
    /// [`StatsError::Read`]/[`StatsError::Parse`] for the kernel files.
    async fn boot_time(&self) -> Result<Option<i64>, StatsError> {
        Ok(None)
    }
}

/// The kubelet process's own usage (Prometheus' process collector).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OwnProcess {
    pub resident_memory_bytes: u64,
    pub cpu_seconds: f64,
    pub start_time_unix_seconds: f64,
}

/// One armed kernel notification: resolves each time the usage crosses the threshold
/// (in either direction).
#[async_trait]
pub trait ThresholdCrossings: Send {
    /// Waits for the next crossing.
    /// # Errors
    /// [`StatsError::Notification`] when the kernel's event cannot be read.
    async fn crossed(&mut self) -> Result<(), StatsError>;
}

/// Kernel notifications of a cgroup's memory usage crossing a threshold (cgroup v1
/// `cgroup.event_control` with an eventfd).
#[async_trait]
pub trait MemoryThresholdNotifier: Send + Sync {
    /// Arms a notification for `cgroup`'s memory usage crossing `usage_bytes`.
    /// # Errors
    /// [`StatsError::Unsupported`] on cgroup v2; [`StatsError::Notification`] when the
    /// kernel refuses.
    async fn arm(
        &self,
        cgroup: &CgroupName,
        usage_bytes: u64,
    ) -> Result<Box<dyn ThresholdCrossings>, StatsError>;
}

/// The runtime's filesystem usage of one filesystem (CRI `FilesystemUsage`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeFsUsage {
    pub mountpoint: PathBuf,
    pub used_bytes: u64,
    pub inodes_used: u64,
}

/// What the runtime knows of its images and its containers' usage.
#[async_trait]
pub trait RuntimeStats: Send + Sync {
    /// The filesystems the runtime keeps images on (CRI `ImageFsInfo`).
    async fn image_fs_info(&self) -> Result<Vec<RuntimeFsUsage>, RuntimeError>;
    /// Every container's usage (CRI `ListContainerStats`).
    async fn container_stats(&self) -> Result<Vec<RuntimeContainerStats>, RuntimeError>;
    /// Every ready pod's usage (CRI `ListPodSandboxStats`); `Unimplemented` where the
    /// runtime does not have it.
    async fn pod_sandbox_stats(&self) -> Result<Vec<RuntimePodStats>, RuntimeError> {
        Err(RuntimeError::Unimplemented("ListPodSandboxStats".into()))
    }
    /// Every image (CRI `ListImages`).
    async fn list_images(&self) -> Result<Vec<PresentImage>, RuntimeError>;
    /// The ids of the images in use: those of every container (running or not) and the
    /// runtime's own sandbox image.
    async fn images_in_use(&self) -> Result<BTreeSet<String>, RuntimeError>;
    /// Removes an image by id (CRI `RemoveImage`); an absent one is not an error.
    async fn remove_image(&self, id: &str) -> Result<(), RuntimeError>;
}
