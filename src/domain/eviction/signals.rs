//! What the eviction manager observes: the node's and the pods' usage (upstream's stats
//! summary, trimmed to what eviction reads) and the signal observations made from it
//! (upstream's `makeSignalObservations`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Signal;
use crate::domain::units::quantity::{Format, Quantity};

/// A cgroup's memory as the kernel counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub usage_bytes: u64,
    /// Usage less the inactive file cache: what the kernel cannot drop first.
    pub working_set_bytes: u64,
    /// The limit less the working set; `None` when the cgroup is not limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
}

impl MemoryStats {
    /// cAdvisor's working set (usage − inactive file, never below zero) and, under a
    /// limit, what is left of it.
    pub fn new(usage_bytes: u64, inactive_file_bytes: u64, limit_bytes: Option<u64>) -> Self {
        let working_set_bytes = usage_bytes.saturating_sub(inactive_file_bytes);
        MemoryStats {
            usage_bytes,
            working_set_bytes,
            available_bytes: limit_bytes.map(|l| l.saturating_sub(working_set_bytes)),
        }
    }
}

/// A filesystem's size and what is free on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    pub capacity_bytes: u64,
    /// Free to unprivileged users (statfs `f_bavail`), as upstream counts it.
    pub available_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
}

/// The node's process ids: how many may exist and how many do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PidStats {
    pub max: u64,
    pub running: u64,
}

/// Space and inodes something uses on a filesystem.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsUsage {
    pub used_bytes: u64,
    pub inodes_used: u64,
}

impl FsUsage {
    pub fn plus(self, other: FsUsage) -> FsUsage {
        FsUsage {
            used_bytes: self.used_bytes.saturating_add(other.used_bytes),
            inodes_used: self.inodes_used.saturating_add(other.inodes_used),
        }
    }
}

/// One container's usage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_working_set_bytes: Option<u64>,
    /// Its writable layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsUsage>,
    /// Its log files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsUsage>,
}

/// A pod volume's usage (emptyDirs on the node's disk).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStats {
    pub name: String,
    pub usage: FsUsage,
}

/// One pod's usage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub uid: String,
    /// Working set of the pod's cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_working_set_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<ContainerStats>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeStats>,
    /// The kubelet-managed `/etc/hosts` of the pod (`<pod-dir>/etc-hosts`), which its
    /// containers may write (CVE-2020-8557).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etc_hosts: Option<FsUsage>,
}

impl PodStats {
    /// The pod's ephemeral storage (upstream's `calcEphemeralStorage`): its containers'
    /// writable layers and logs, its volumes on the node's disk, and its managed
    /// `/etc/hosts` (upstream's fix of CVE-2020-8557: writes there count, so a pod cannot
    /// fill the node's disk through it past its `ephemeral-storage` limit).
    pub fn ephemeral_storage(&self) -> FsUsage {
        let containers = self
            .containers
            .iter()
            .flat_map(|c| [c.rootfs, c.logs])
            .flatten();
        let volumes = self.volumes.iter().map(|v| v.usage);
        containers
            .chain(volumes)
            .chain(self.etc_hosts)
            .fold(FsUsage::default(), FsUsage::plus)
    }
}

/// The node's usage at one moment (upstream's stats summary, as eviction reads it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    /// When it was observed (wall clock, Unix nanoseconds).
    pub time_unix_nanos: i64,
    /// The node: its memory capacity less the root cgroup's working set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The pods' cgroup (`kubepods`), against its limit (node allocatable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocatable_memory: Option<MemoryStats>,
    /// The filesystem of the kubelet's root directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_fs: Option<FsStats>,
    /// The filesystem the runtime keeps images on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<PidStats>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodStats>,
}

impl NodeSummary {
    /// The pods' stats by uid (upstream's `cachedStatsFunc`).
    pub fn pod_stats(&self) -> BTreeMap<&str, &PodStats> {
        self.pods.iter().map(|p| (p.uid.as_str(), p)).collect()
    }
}

/// What one signal measured: how much is available of how much.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignalObservation {
    pub available: Quantity,
    pub capacity: Quantity,
    /// When the stats behind it were taken; 0 when unknown.
    pub time_unix_nanos: i64,
}

/// The observation of each signal that could be measured.
pub type Observations = BTreeMap<Signal, SignalObservation>;

fn quantity(value: u64, format: Format) -> Quantity {
    Quantity::new(i64::try_from(value).unwrap_or(i64::MAX), format)
}

fn memory_observation(memory: &MemoryStats, time: i64) -> Option<SignalObservation> {
    let available = memory.available_bytes?;
    Some(SignalObservation {
        available: quantity(available, Format::BinarySI),
        capacity: quantity(
            available.saturating_add(memory.working_set_bytes),
            Format::BinarySI,
        ),
        time_unix_nanos: time,
    })
}

fn fs_observations(
    fs: &FsStats,
    available: Signal,
    inodes_free: Signal,
    time: i64,
    out: &mut Observations,
) {
    out.insert(
        available,
        SignalObservation {
            available: quantity(fs.available_bytes, Format::BinarySI),
            capacity: quantity(fs.capacity_bytes, Format::BinarySI),
            time_unix_nanos: time,
        },
    );
    if let (Some(free), Some(total)) = (fs.inodes_free, fs.inodes) {
        out.insert(
            inodes_free,
            SignalObservation {
                available: quantity(free, Format::DecimalSI),
                capacity: quantity(total, Format::DecimalSI),
                time_unix_nanos: time,
            },
        );
    }
}

/// The observation of each signal the summary can give (upstream
/// `makeSignalObservations`): memory as available and available + working set, the
/// filesystems' free bytes and inodes, the pids left.
pub fn make_signal_observations(summary: &NodeSummary) -> Observations {
    let time = summary.time_unix_nanos;
    let mut out = Observations::new();
    if let Some(o) = summary
        .memory
        .as_ref()
        .and_then(|m| memory_observation(m, time))
    {
        out.insert(Signal::MemoryAvailable, o);
    }
    if let Some(o) = summary
        .allocatable_memory
        .as_ref()
        .and_then(|m| memory_observation(m, time))
    {
        out.insert(Signal::AllocatableMemoryAvailable, o);
    }
    if let Some(fs) = &summary.node_fs {
        fs_observations(
            fs,
            Signal::NodeFsAvailable,
            Signal::NodeFsInodesFree,
            time,
            &mut out,
        );
    }
    if let Some(fs) = &summary.image_fs {
        fs_observations(
            fs,
            Signal::ImageFsAvailable,
            Signal::ImageFsInodesFree,
            time,
            &mut out,
        );
    }
    if let Some(pids) = &summary.pids {
        let max = i64::try_from(pids.max).unwrap_or(i64::MAX);
        let running = i64::try_from(pids.running).unwrap_or(i64::MAX);
        out.insert(
            Signal::PidAvailable,
            SignalObservation {
                available: Quantity::new(max.saturating_sub(running), Format::DecimalSI),
                capacity: Quantity::new(max, Format::DecimalSI),
                time_unix_nanos: time,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ported from upstream TestMakeSignalObservations.
    #[test]
    fn observations_from_a_summary() {
        let gi = 1u64 << 30;
        let memory = MemoryStats {
            usage_bytes: gi,
            working_set_bytes: gi,
            available_bytes: Some(gi),
        };
        let summary = NodeSummary {
            time_unix_nanos: 7,
            memory: Some(memory),
            allocatable_memory: Some(memory),
            node_fs: Some(FsStats {
                capacity_bytes: 2048,
                available_bytes: 1024,
                inodes: Some(1 << 20),
                inodes_free: Some(1024),
            }),
            image_fs: Some(FsStats {
                capacity_bytes: 2 << 20,
                available_bytes: 1 << 20,
                inodes: Some(1 << 20),
                inodes_free: Some(1024),
            }),
            pids: None,
            pods: ["uuid1", "uuid2", "uuid3"]
                .iter()
                .map(|uid| PodStats {
                    uid: (*uid).into(),
                    memory_working_set_bytes: Some(gi),
                    ..PodStats::default()
                })
                .collect(),
        };
        let obs = make_signal_observations(&summary);
        let v = |s: Signal| (obs[&s].available.value(), obs[&s].capacity.value());
        let gi = 1i64 << 30;
        assert_eq!(v(Signal::AllocatableMemoryAvailable), (gi, 2 * gi));
        assert_eq!(v(Signal::MemoryAvailable), (gi, 2 * gi));
        assert_eq!(v(Signal::NodeFsAvailable), (1024, 2048));
        assert_eq!(v(Signal::NodeFsInodesFree), (1024, 1 << 20));
        assert_eq!(v(Signal::ImageFsAvailable), (1 << 20, 2 << 20));
        assert_eq!(v(Signal::ImageFsInodesFree), (1024, 1 << 20));
        assert!(!obs.contains_key(&Signal::PidAvailable));
        let stats = summary.pod_stats();
        for uid in ["uuid1", "uuid2", "uuid3"] {
            assert_eq!(
                stats.get(uid).and_then(|p| p.memory_working_set_bytes),
                Some(1 << 30)
            );
        }
    }

    #[test]
    fn an_unlimited_cgroup_gives_no_memory_observation() {
        let summary = NodeSummary {
            allocatable_memory: Some(MemoryStats::new(100, 10, None)),
            pids: Some(PidStats {
                max: 4_194_304,
                running: 300,
            }),
            ..NodeSummary::default()
        };
        let obs = make_signal_observations(&summary);
        assert!(!obs.contains_key(&Signal::AllocatableMemoryAvailable));
        assert_eq!(obs[&Signal::PidAvailable].available.value(), 4_194_004);
    }

    #[test]
    fn working_set_leaves_out_inactive_file_cache() {
        let m = MemoryStats::new(1000, 300, Some(2000));
        assert_eq!((m.working_set_bytes, m.available_bytes), (700, Some(1300)));
        // More inactive file than usage (racy reads): zero, never an underflow.
        assert_eq!(MemoryStats::new(10, 30, Some(5)).working_set_bytes, 0);
        assert_eq!(MemoryStats::new(10, 0, Some(5)).available_bytes, Some(0));
    }

    #[test]
    fn ephemeral_storage_sums_layers_logs_volumes_and_etc_hosts() {
        let u = |b| FsUsage {
            used_bytes: b,
            inodes_used: 1,
        };
        let pod = PodStats {
            uid: "p".into(),
            containers: vec![
                ContainerStats {
                    name: "a".into(),
                    rootfs: Some(u(10)),
                    logs: Some(u(5)),
                    ..ContainerStats::default()
                },
                ContainerStats {
                    name: "b".into(),
                    logs: Some(u(1)),
                    ..ContainerStats::default()
                },
            ],
            volumes: vec![VolumeStats {
                name: "scratch".into(),
                usage: u(100),
            }],
            etc_hosts: Some(u(1000)),
            ..PodStats::default()
        };
        assert_eq!(
            pod.ephemeral_storage(),
            FsUsage {
                used_bytes: 1116,
                inodes_used: 5
            }
        );
    }
}
