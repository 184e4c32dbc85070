//! In-memory node statistics and memory threshold notifications, set by tests: the
//! cgroups' memory, the filesystems (a sequence of answers per path, the last one
//! sticking), directory usage, pids; armed notifications fire when told.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::domain::cgroup::CgroupName;
use crate::domain::eviction::signals::{FsUsage, PidStats};
use crate::domain::stats::container_id_of_cgroup;
use crate::ports::node_stats::{
    CgroupStats, FilesystemInfo, InterfaceStats, MemoryThresholdNotifier, NodeStats, StatsError,
    ThresholdCrossings,
};

#[derive(Debug, Default)]
struct State {
    cgroups: BTreeMap<CgroupName, CgroupStats>,
    filesystems: BTreeMap<PathBuf, Vec<FilesystemInfo>>,
    directories: BTreeMap<PathBuf, FsUsage>,
    pids: PidStats,
    filesystem_reads: usize,
    networks: BTreeMap<CgroupName, Vec<InterfaceStats>>,
}

/// Node statistics that say what they are told.
#[derive(Debug, Default)]
pub struct FakeNodeStats {
    state: Mutex<State>,
}

impl FakeNodeStats {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn set_cgroup(&self, name: &CgroupName, stats: CgroupStats) {
        self.state().cgroups.insert(name.clone(), stats);
    }

    /// The answers for the filesystem holding `path` (and everything below it), in turn;
    /// the last one keeps being given.
    pub fn set_filesystem(&self, path: &Path, answers: Vec<FilesystemInfo>) {
        self.state().filesystems.insert(path.to_path_buf(), answers);
    }

    pub fn set_directory(&self, path: &Path, usage: FsUsage) {
        self.state().directories.insert(path.to_path_buf(), usage);
    }

    /// The interfaces seen through `cgroup`'s processes.
    pub fn set_network(&self, cgroup: &CgroupName, interfaces: Vec<InterfaceStats>) {
        self.state().networks.insert(cgroup.clone(), interfaces);
    }

    pub fn set_pids(&self, pids: PidStats) {
        self.state().pids = pids;
    }

    /// How many filesystem reads were answered.
    pub fn filesystem_reads(&self) -> usize {
        self.state().filesystem_reads
    }
}

#[async_trait]
impl NodeStats for FakeNodeStats {
    async fn cgroup(&self, cgroup: &CgroupName) -> Result<Option<CgroupStats>, StatsError> {
        Ok(self.state().cgroups.get(cgroup).cloned())
    }

    async fn network(&self, cgroup: &CgroupName) -> Result<Vec<InterfaceStats>, StatsError> {
        Ok(self
            .state()
            .networks
            .get(cgroup)
            .cloned()
            .unwrap_or_default())
    }

    async fn child_cgroups(
        &self,
        cgroup: &CgroupName,
        ids: &[&str],
    ) -> Result<Vec<(String, CgroupStats)>, StatsError> {
        Ok(self
            .state()
            .cgroups
            .iter()
            .filter(|(name, _)| !name.is_root() && name.parent() == *cgroup)
            .filter_map(|(name, stats)| Some((name.components().last()?.clone(), stats.clone())))
            .filter(|(dir, _)| ids.contains(&container_id_of_cgroup(dir)))
            .collect())
    }

    async fn filesystem(&self, path: &Path) -> Result<FilesystemInfo, StatsError> {
        let mut s = self.state();
        s.filesystem_reads += 1;
        let key = s
            .filesystems
            .keys()
            .filter(|k| path.starts_with(k))
            .max_by_key(|k| k.as_os_str().len())
            .cloned();
        let Some(answers) = key.and_then(|k| s.filesystems.get_mut(&k)) else {
            return Err(StatsError::Statfs {
                path: path.to_path_buf(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        };
        let answer = answers.first().copied().unwrap_or_default();
        if answers.len() > 1 {
            answers.remove(0);
        }
        Ok(answer)
    }

    async fn directory_usage(&self, path: &Path) -> Result<Option<FsUsage>, StatsError> {
        Ok(self.state().directories.get(path).copied())
    }

    async fn pids(&self) -> Result<PidStats, StatsError> {
        Ok(self.state().pids)
    }
}

/// Memory notifications armed in memory; [`FakeMemoryNotifier::cross`] fires them.
#[derive(Debug)]
pub struct FakeMemoryNotifier {
    armed: Mutex<Vec<(CgroupName, u64)>>,
    fire: broadcast::Sender<()>,
    unsupported: bool,
}

impl Default for FakeMemoryNotifier {
    fn default() -> Self {
        FakeMemoryNotifier {
            armed: Mutex::new(Vec::new()),
            fire: broadcast::channel(16).0,
            unsupported: false,
        }
    }
}

impl FakeMemoryNotifier {
    pub fn new() -> Self {
        Self::default()
    }

    /// A notifier on a host without them (cgroup v2).
    pub fn unsupported() -> Self {
        FakeMemoryNotifier {
            unsupported: true,
            ..Self::default()
        }
    }

    /// Every arming so far: the cgroup and the usage threshold.
    pub fn armed(&self) -> Vec<(CgroupName, u64)> {
        self.armed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Fires every armed notification.
    pub fn cross(&self) {
        let _ = self.fire.send(());
    }
}

struct FakeCrossings(broadcast::Receiver<()>);

#[async_trait]
impl ThresholdCrossings for FakeCrossings {
    async fn crossed(&mut self) -> Result<(), StatsError> {
        self.0
            .recv()
            .await
            .map_err(|_| StatsError::Unsupported("the fake notifier is gone".into()))
    }
}

#[async_trait]
impl MemoryThresholdNotifier for FakeMemoryNotifier {
    async fn arm(
        &self,
        cgroup: &CgroupName,
        usage_bytes: u64,
    ) -> Result<Box<dyn ThresholdCrossings>, StatsError> {
        if self.unsupported {
            return Err(StatsError::Unsupported("cgroup v2".into()));
        }
        self.armed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((cgroup.clone(), usage_bytes));
        Ok(Box::new(FakeCrossings(self.fire.subscribe())))
    }
}
