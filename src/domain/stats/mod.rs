//! The kubelet's stats summary (`/stats/summary`, upstream's `stats/v1alpha1.Summary`):
//! the raw values one sampling gathered ([`StatsSample`]: cgroup counters, the runtime's
//! container stats, filesystems) turned into the summary, with CPU rates from two samples
//! as cAdvisor computes them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::eviction::signals::{FsStats, FsUsage, PidStats};
use crate::domain::status::{ApiContainerState, ApiPodStatus};
use crate::domain::units::time::rfc3339_seconds;

pub mod source;
pub use source::{container_reading, RuntimeUsage, UsageSource, STATS_FROM_CRI_GATE};

/// A cgroup's CPU, memory and tasks as the kernel counts them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupStats {
    pub memory_usage_bytes: u64,
    /// The inactive file cache counted in the usage (cgroup v1 `total_inactive_file`,
    /// v2 `inactive_file`).
    pub inactive_file_bytes: u64,
    /// `None` when the cgroup has no memory limit.
    pub memory_limit_bytes: Option<u64>,
    /// Tasks (`pids.current`), when the pids controller counts them.
    pub tasks: Option<u64>,
    /// Cumulative CPU time in nanoseconds (v1 `cpuacct.usage`, v2 `cpu.stat` `usage_usec`).
    pub cpu_usage_nanos: Option<u64>,
    /// Anonymous memory (v1 `total_rss`, v2 `anon`).
    pub rss_bytes: Option<u64>,
    /// `memory.stat` `total_pgfault`/`pgfault`.
    pub page_faults: Option<u64>,
    /// `memory.stat` `total_pgmajfault`/`pgmajfault`.
    pub major_page_faults: Option<u64>,
    /// What cAdvisor's finer series show (`/metrics/cadvisor`).
    #[serde(default)]
    pub detail: CgroupDetail,
}

/// The counters behind cAdvisor's finer `container_*` series, each `None` where the
/// kernel's files do not have it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupDetail {
    /// CPU time in user and in kernel mode (v1 `cpuacct.stat` in clock ticks, v2
    /// `cpu.stat` `user_usec`/`system_usec`), in nanoseconds.
    pub cpu_user_nanos: Option<u64>,
    pub cpu_system_nanos: Option<u64>,
    /// CFS bandwidth: periods elapsed, periods throttled, time throttled (`cpu.stat`).
    pub cfs_periods: Option<u64>,
    pub cfs_throttled_periods: Option<u64>,
    pub cfs_throttled_nanos: Option<u64>,
    /// Page cache (v1 `total_cache`, v2 `file`).
    pub cache_bytes: Option<u64>,
    /// Mapped files (v1 `total_mapped_file`, v2 `file_mapped`).
    pub mapped_file_bytes: Option<u64>,
    /// Swap in use (v1 `total_swap`, v2 `memory.swap.current`).
    pub swap_bytes: Option<u64>,
    /// Times the limit was hit (v1 `memory.failcnt`, v2 `memory.events` `max`).
    pub memory_failcnt: Option<u64>,
    /// Block IO by device (v1 `blkio.throttle.io_service*_recursive`, v2 `io.stat`).
    pub io: Vec<DeviceIo>,
}

/// One block device's IO of a cgroup: bytes and operations, read and written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceIo {
    /// `major:minor`, the key of the kernel's files.
    pub major_minor: String,
    /// Its node (`/dev/vda`), as cAdvisor's `device` label, when known.
    pub device: Option<String>,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub writes: u64,
}

/// The devices of a v2 `io.stat` text (`8:0 rbytes=1 wbytes=2 rios=3 wios=4 …`).
pub fn parse_io_stat(text: &str) -> Vec<DeviceIo> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let major_minor = fields.next()?.to_owned();
            let mut io = DeviceIo {
                major_minor,
                ..DeviceIo::default()
            };
            for field in fields {
                let Some((key, value)) = field.split_once('=') else {
                    continue;
                };
                let Ok(value) = value.parse() else {
                    continue;
                };
                match key {
                    "rbytes" => io.read_bytes = value,
                    "wbytes" => io.write_bytes = value,
                    "rios" => io.reads = value,
                    "wios" => io.writes = value,
                    _ => {}
                }
            }
            Some(io)
        })
        .collect()
}

/// The devices of v1's `blkio.throttle.io_service_bytes_recursive` (`bytes`) and
/// `blkio.throttle.io_serviced_recursive` (`ops`) texts (`8:0 Read 4096` lines, a
/// `Total` line at the end).
pub fn parse_blkio(bytes: &str, ops: &str) -> Vec<DeviceIo> {
    let mut devices: BTreeMap<String, DeviceIo> = BTreeMap::new();
    for (text, counts_bytes) in [(bytes, true), (ops, false)] {
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let (Some(major_minor), Some(op), Some(value)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let Ok(value) = value.parse::<u64>() else {
                continue;
            };
            let io = devices
                .entry(major_minor.to_owned())
                .or_insert_with(|| DeviceIo {
                    major_minor: major_minor.to_owned(),
                    ..DeviceIo::default()
                });
            match (op, counts_bytes) {
                ("Read", true) => io.read_bytes = value,
                ("Write", true) => io.write_bytes = value,
                ("Read", false) => io.reads = value,
                ("Write", false) => io.writes = value,
                _ => {}
            }
        }
    }
    devices.into_values().collect()
}

impl CgroupStats {
    /// cAdvisor's working set: usage less the inactive file cache, never below zero.
    pub fn working_set_bytes(&self) -> u64 {
        self.memory_usage_bytes
            .saturating_sub(self.inactive_file_bytes)
    }
}

/// One container's usage as the runtime reports it (CRI `ContainerStats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainerStats {
    pub id: String,
    pub name: String,
    /// The pod's uid (its `io.kubernetes.pod.uid` label).
    pub pod_uid: String,
    pub memory_working_set_bytes: Option<u64>,
    /// Its writable layer.
    pub writable_layer: Option<FsUsage>,
    /// When the runtime measured it (unix nanoseconds; 0 when it does not say).
    pub timestamp_unix_nanos: i64,
    pub cpu_usage_nanos: Option<u64>,
    pub memory_usage_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
    /// cAdvisor's finer counters, when read from the container's cgroup.
    #[serde(skip)]
    pub detail: Option<CgroupDetail>,
}

/// One pod's usage as the runtime measures it (CRI `ListPodSandboxStats`): its network
/// interfaces, read by the runtime in the pod's network namespace, and its CPU, memory
/// and processes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimePodStats {
    pub sandbox_id: String,
    /// The pod's uid (the sandbox's metadata).
    pub pod_uid: String,
    /// Every interface but the loopback; empty when the runtime does not say.
    pub network: Vec<InterfaceStats>,
    pub usage: RuntimeUsage,
}

/// The id of the container a runtime's cgroup is named after: the name itself (cgroupfs:
/// `<id>`) or its last part (systemd: `cri-containerd-<id>.scope`, `crio-<id>.scope`).
pub fn container_id_of_cgroup(dir: &str) -> &str {
    let name = dir.strip_suffix(".scope").unwrap_or(dir);
    name.rsplit('-').next().unwrap_or(name)
}

/// The writable layer of each container the runtime last listed, by id (`None` when the
/// runtime did not say).
pub type WritableLayers = BTreeMap<String, Option<FsUsage>>;

/// The runtime's id in a status's `containerID` (`containerd://<id>`).
pub fn runtime_id(container_id: &str) -> &str {
    container_id.rsplit("://").next().unwrap_or_default()
}

/// The runtime ids of the containers (init ones too) `status` says are running.
pub fn running_container_ids(status: &ApiPodStatus) -> impl Iterator<Item = &str> {
    status
        .all_container_statuses()
        .filter(|s| matches!(s.state, ApiContainerState::Running(_)))
        .map(|s| runtime_id(&s.container_id))
}

/// Whether a sample must ask the runtime for its container stats (`ListContainerStats`)
/// rather than read the containers' cgroups: when asked to (housekeeping), when the
/// containers are not taken from cgroups (none to read, or the usage comes from the
/// runtime), before any list, or when a running container is missing from the last list
/// (its writable layer is not known yet).
pub fn sample_lists_the_runtime<'a>(
    asked: bool,
    containers_from_cgroups: bool,
    last_listed: Option<&WritableLayers>,
    mut running: impl Iterator<Item = &'a str>,
) -> bool {
    match last_listed {
        Some(listed) if !asked && containers_from_cgroups => {
            !running.all(|id| listed.contains_key(id))
        }
        _ => true,
    }
}

/// Whether a scrape may serve the pods of the last full reading, taken at `read_at`,
/// rather than read their cgroups anew (as upstream's summary serves the stats cAdvisor's
/// housekeeping keeps): when that reading is younger than `max_age_nanos` and holds
/// exactly the `active` pods (uid and status), each with every container its status says
/// is running.
pub fn pods_reading_serves(
    now: i64,
    read_at: i64,
    max_age_nanos: i64,
    reading: &[PodSample],
    active: &[(&str, &ApiPodStatus)],
) -> bool {
    now.saturating_sub(read_at) < max_age_nanos
        && reading.len() == active.len()
        && active.iter().all(|(uid, status)| {
            reading.iter().find(|p| p.uid == *uid).is_some_and(|read| {
                running_container_ids(status)
                    .all(|id| read.containers.iter().any(|c| c.stats.id == id))
            })
        })
}

/// The runtime ids of the containers `status` names (init containers too), each with its
/// name: the containers whose cgroups a reading takes.
pub fn named_containers(status: &ApiPodStatus) -> impl Iterator<Item = (&str, &str)> {
    status
        .all_container_statuses()
        .map(|s| (runtime_id(&s.container_id), s.name.as_str()))
        .filter(|(id, _)| !id.is_empty())
}

/// A pod's containers measured from their own cgroups (`(directory name, usage)` under the
/// pod's cgroup), each named from the pod's `status`; a cgroup of no known container (the
/// sandbox's) is left out. `layers` holds the writable layers the runtime last listed.
pub fn containers_from_cgroups(
    pod_uid: &str,
    status: &ApiPodStatus,
    cgroups: &[(String, CgroupStats)],
    time_unix_nanos: i64,
    layers: &WritableLayers,
) -> Vec<RuntimeContainerStats> {
    cgroups
        .iter()
        .filter_map(|(dir, stats)| {
            let id = container_id_of_cgroup(dir);
            let (_, name) = named_containers(status).find(|(known, _)| *known == id)?;
            Some(RuntimeContainerStats::from_cgroup(
                id,
                name,
                pod_uid,
                stats,
                time_unix_nanos,
                layers.get(id).copied().flatten(),
            ))
        })
        .collect()
}

impl RuntimeContainerStats {
    /// A container's usage read from its own cgroup at `time_unix_nanos` (as cAdvisor
    /// reads it), with the writable layer the runtime last reported.
    pub fn from_cgroup(
        id: &str,
        name: &str,
        pod_uid: &str,
        cgroup: &CgroupStats,
        time_unix_nanos: i64,
        writable_layer: Option<FsUsage>,
    ) -> Self {
        RuntimeContainerStats {
            id: id.to_owned(),
            name: name.to_owned(),
            pod_uid: pod_uid.to_owned(),
            memory_working_set_bytes: Some(cgroup.working_set_bytes()),
            writable_layer,
            timestamp_unix_nanos: time_unix_nanos,
            cpu_usage_nanos: cgroup.cpu_usage_nanos,
            memory_usage_bytes: Some(cgroup.memory_usage_bytes),
            rss_bytes: cgroup.rss_bytes,
            page_faults: cgroup.page_faults,
            major_page_faults: cgroup.major_page_faults,
            detail: Some(cgroup.detail.clone()),
        }
    }
}

/// One network interface's counters (`/proc/<pid>/net/dev`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_errors: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    /// Packets and drops: `/proc/<pid>/net/dev` has them, the CRI's stats do not.
    #[serde(default)]
    pub packets: Option<PacketCounts>,
}

/// An interface's packets and drops, received and transmitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PacketCounts {
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

/// Whether a pod's network is asked of the runtime (`ListPodSandboxStats`): it runs, and
/// its network namespace, read through its processes, gave no interface (they are not
/// visible here, or not started yet). Pods that are done have no network to report.
pub fn wants_runtime_network(phase: &str, from_namespace: &[InterfaceStats]) -> bool {
    phase == "Running" && from_namespace.is_empty()
}

/// The interfaces the runtime measured for the pod `uid`.
pub fn runtime_network_of(uid: &str, measured: &[RuntimePodStats]) -> Vec<InterfaceStats> {
    measured
        .iter()
        .find(|p| p.pod_uid == uid)
        .map(|p| p.network.clone())
        .unwrap_or_default()
}

/// The interfaces of a `/proc/<pid>/net/dev` text, the loopback left out (as cAdvisor).
pub fn parse_net_dev(text: &str) -> Vec<InterfaceStats> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, counters) = line.split_once(':')?;
            let name = name.trim();
            if name == "lo" {
                return None;
            }
            let f: Vec<u64> = counters
                .split_whitespace()
                .map(|v| v.parse().ok())
                .collect::<Option<Vec<u64>>>()?;
            // Receive: bytes packets errs ...(8 fields); transmit: bytes packets errs ...
            Some(InterfaceStats {
                name: name.to_owned(),
                rx_bytes: *f.first()?,
                rx_errors: *f.get(2)?,
                tx_bytes: *f.get(8)?,
                tx_errors: *f.get(10)?,
                packets: Some(PacketCounts {
                    rx_packets: *f.get(1)?,
                    rx_dropped: *f.get(3)?,
                    tx_packets: *f.get(9)?,
                    tx_dropped: *f.get(11)?,
                }),
            })
        })
        .collect()
}

/// One container of a pod in a sample.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSample {
    pub name: String,
    /// The image the spec names.
    pub image: String,
    /// When it started (RFC 3339, from the pod's status), if running.
    pub start_time: Option<String>,
    pub stats: RuntimeContainerStats,
    /// Its log folder's usage (on the node filesystem), when measured.
    pub logs: Option<FsUsage>,
}

/// One pod in a sample.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSample {
    /// When its cgroups were read (a scrape may serve an earlier reading's pods); 0 for
    /// the sample's own time.
    pub time_unix_nanos: i64,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub start_time: Option<String>,
    /// Its cgroup's path in the driver's spelling (`/kubepods/burstable/pod<uid>`).
    pub cgroup_path: Option<String>,
    pub cgroup: Option<CgroupStats>,
    pub containers: Vec<ContainerSample>,
    /// The interfaces of its network namespace.
    pub network: Vec<InterfaceStats>,
    /// Its volumes kept under the root directory.
    pub volumes: Vec<VolumeSample>,
    /// Its kubelet-managed `/etc/hosts` (`<pod-dir>/etc-hosts`), which its containers may
    /// write (CVE-2020-8557).
    pub etc_hosts: Option<FsUsage>,
}

/// One volume's usage (`du` of its folder) and the filesystem it is on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeSample {
    pub name: String,
    pub usage: FsUsage,
    pub fs: Option<FsStats>,
    /// Whether it counts in the pod's ephemeral storage (a disk-backed emptyDir).
    pub local_ephemeral: bool,
    /// The claim it comes from.
    pub pvc_ref: Option<PvcReference>,
}

/// `PVCReference`: the claim a volume comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PvcReference {
    pub name: String,
    pub namespace: String,
}

/// `VolumeStats`: the volume's `FsStats` inline, and its name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSummary {
    #[serde(flatten)]
    pub fs: FsSummary,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc_ref: Option<PvcReference>,
}

/// Everything one sampling read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsSample {
    pub time_unix_nanos: i64,
    /// The root cgroup.
    pub node: Option<CgroupStats>,
    /// The node's memory: the root cgroup's usage is measured against it.
    pub memory_capacity_bytes: u64,
    /// The `kubepods` cgroup (upstream's `pods` system container), and its path.
    pub kubepods: Option<(String, CgroupStats)>,
    /// The filesystem of the kubelet's root directory.
    pub node_fs: Option<FsStats>,
    /// The image filesystem, and what the runtime's images use of it (`ImageFsInfo`).
    pub image_fs: Option<(FsStats, FsUsage)>,
    pub pids: Option<PidStats>,
    pub pods: Vec<PodSample>,
    /// The interfaces of the host's network namespace.
    pub node_network: Vec<InterfaceStats>,
}

/// `CPUStats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
}

/// `MemoryStats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
}

/// `FsStats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsSummary {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

/// `NetworkStats`: the default interface's counters inline, and every interface.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSummary {
    pub time: String,
    #[serde(flatten)]
    pub default: InterfaceStats,
    pub interfaces: Vec<InterfaceStats>,
}

/// The default interface upstream reports inline (`network.DefaultInterfaceName`).
pub const DEFAULT_INTERFACE: &str = "eth0";

fn network(time: &str, interfaces: &[InterfaceStats]) -> Option<NetworkSummary> {
    let first = interfaces.first()?;
    let default = interfaces
        .iter()
        .find(|i| i.name == DEFAULT_INTERFACE)
        .unwrap_or(first);
    Some(NetworkSummary {
        time: time.to_owned(),
        default: default.clone(),
        interfaces: interfaces.to_vec(),
    })
}

/// `RuntimeStats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsSummary>,
}

/// `RlimitStats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RlimitStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maxpid: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curproc: Option<u64>,
}

/// `ContainerStats` (also the node's system containers).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSummary {
    pub name: String,
    pub start_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsSummary>,
}

/// `NodeStats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    pub node_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system_containers: Vec<ContainerSummary>,
    pub start_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
}

/// `PodReference`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodReference {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

/// `ProcessStats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
}

/// `PodStats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSummary {
    pub pod_ref: PodReference,
    pub start_time: String,
    pub containers: Vec<ContainerSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volume: Vec<VolumeSummary>,
    #[serde(rename = "ephemeral-storage", skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<FsSummary>,
    #[serde(rename = "process_stats", skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
}

/// `Summary`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub node: NodeSummary,
    pub pods: Vec<PodSummary>,
}

/// CPU rate in nanocores between two cumulative readings (cAdvisor's
/// `usageNanoCores`); `None` without an earlier reading, when time did not advance or
/// the counter went back (a restarted container).
pub fn nano_cores(now: (i64, u64), before: Option<(i64, u64)>) -> Option<u64> {
    let (t1, c1) = now;
    let (t0, c0) = before?;
    let elapsed = u128::try_from(t1.checked_sub(t0)?)
        .ok()
        .filter(|e| *e > 0)?;
    let used = u128::from(c1.checked_sub(c0)?);
    u64::try_from(used * 1_000_000_000 / elapsed).ok()
}

fn cpu(
    time: &str,
    now: (i64, Option<u64>),
    before: Option<(i64, Option<u64>)>,
) -> Option<CpuStats> {
    let usage = now.1?;
    let earlier = before.and_then(|(t, c)| Some((t, c?)));
    Some(CpuStats {
        time: time.to_owned(),
        usage_nano_cores: nano_cores((now.0, usage), earlier),
        usage_core_nano_seconds: Some(usage),
    })
}

fn cgroup_memory(time: &str, c: &CgroupStats, limit: Option<u64>) -> MemoryStats {
    let working_set = c.working_set_bytes();
    MemoryStats {
        time: time.to_owned(),
        available_bytes: limit
            .or(c.memory_limit_bytes)
            .map(|l| l.saturating_sub(working_set)),
        usage_bytes: Some(c.memory_usage_bytes),
        working_set_bytes: Some(working_set),
        rss_bytes: c.rss_bytes,
        page_faults: c.page_faults,
        major_page_faults: c.major_page_faults,
    }
}

fn fs_summary(time: &str, fs: &FsStats, used: Option<FsUsage>) -> FsSummary {
    FsSummary {
        time: time.to_owned(),
        available_bytes: Some(fs.available_bytes),
        capacity_bytes: Some(fs.capacity_bytes),
        used_bytes: Some(used.map_or_else(
            || fs.capacity_bytes.saturating_sub(fs.available_bytes),
            |u| u.used_bytes,
        )),
        inodes_free: fs.inodes_free,
        inodes: fs.inodes,
        inodes_used: used
            .map(|u| u.inodes_used)
            .or_else(|| Some(fs.inodes?.saturating_sub(fs.inodes_free?))),
    }
}

fn usage_summary(time: &str, usage: FsUsage, fs: Option<&FsStats>) -> FsSummary {
    FsSummary {
        time: time.to_owned(),
        available_bytes: fs.map(|f| f.available_bytes),
        capacity_bytes: fs.map(|f| f.capacity_bytes),
        used_bytes: Some(usage.used_bytes),
        inodes_free: fs.and_then(|f| f.inodes_free),
        inodes: fs.and_then(|f| f.inodes),
        inodes_used: Some(usage.inodes_used),
    }
}

fn container(
    (time, t): (&str, i64),
    c: &ContainerSample,
    before: Option<(i64, &ContainerSample)>,
    (image_fs, node_fs): (Option<&FsStats>, Option<&FsStats>),
) -> ContainerSummary {
    let s = &c.stats;
    // The runtime's own timestamp when it gives one; the sample's otherwise.
    let at = |stats: &RuntimeContainerStats, fallback: i64| {
        if stats.timestamp_unix_nanos > 0 {
            stats.timestamp_unix_nanos
        } else {
            fallback
        }
    };
    ContainerSummary {
        name: c.name.clone(),
        start_time: c.start_time.clone().unwrap_or_default(),
        cpu: cpu(
            time,
            (at(s, t), s.cpu_usage_nanos),
            before
                .filter(|(_, b)| b.stats.id == s.id)
                .map(|(bt, b)| (at(&b.stats, bt), b.stats.cpu_usage_nanos)),
        ),
        memory: s.memory_working_set_bytes.map(|ws| MemoryStats {
            time: time.to_owned(),
            available_bytes: None,
            usage_bytes: s.memory_usage_bytes,
            working_set_bytes: Some(ws),
            rss_bytes: s.rss_bytes,
            page_faults: s.page_faults,
            major_page_faults: s.major_page_faults,
        }),
        rootfs: s.writable_layer.map(|u| usage_summary(time, u, image_fs)),
        logs: c.logs.map(|u| usage_summary(time, u, node_fs)),
    }
}

/// The summary of `current`, with CPU rates against `previous` (the sample before it).
/// `node_start_time` is the node's boot time (RFC 3339).
pub fn summary(
    node_name: &str,
    node_start_time: &str,
    current: &StatsSample,
    previous: Option<&StatsSample>,
) -> Summary {
    Summary {
        node: node_summary(node_name, node_start_time, current, previous),
        pods: pod_summaries(current, previous),
    }
}

/// The node's part of [`summary`].
pub fn node_summary(
    node_name: &str,
    node_start_time: &str,
    current: &StatsSample,
    previous: Option<&StatsSample>,
) -> NodeSummary {
    let t = current.time_unix_nanos;
    let time = rfc3339_seconds(t);
    let before_t = previous.map(|p| p.time_unix_nanos);
    let node_fs = current.node_fs.as_ref();
    let mut system_containers = Vec::new();
    if let Some((_, pods)) = &current.kubepods {
        let before = previous.and_then(|p| p.kubepods.as_ref());
        system_containers.push(ContainerSummary {
            name: "pods".into(),
            start_time: node_start_time.to_owned(),
            cpu: cpu(
                &time,
                (t, pods.cpu_usage_nanos),
                before_t.zip(before.map(|(_, b)| b.cpu_usage_nanos)),
            ),
            memory: Some(cgroup_memory(&time, pods, None)),
            rootfs: None,
            logs: None,
        });
    }
    NodeSummary {
        node_name: node_name.to_owned(),
        system_containers,
        start_time: node_start_time.to_owned(),
        cpu: current.node.as_ref().and_then(|n| {
            cpu(
                &time,
                (t, n.cpu_usage_nanos),
                before_t.zip(
                    previous
                        .and_then(|p| p.node.as_ref())
                        .map(|b| b.cpu_usage_nanos),
                ),
            )
        }),
        memory: current.node.as_ref().map(|n| {
            cgroup_memory(
                &time,
                n,
                Some(current.memory_capacity_bytes).filter(|c| *c > 0),
            )
        }),
        network: network(&time, &current.node_network),
        fs: node_fs.map(|fs| fs_summary(&time, fs, None)),
        runtime: Some(RuntimeSummary {
            image_fs: current
                .image_fs
                .as_ref()
                .map(|(fs, used)| fs_summary(&time, fs, Some(*used))),
        }),
        rlimit: current.pids.map(|p| RlimitStats {
            time: time.clone(),
            maxpid: Some(p.max),
            curproc: Some(p.running),
        }),
    }
}

/// The pods' part of [`summary`], each at the time its cgroups were read, with CPU rates
/// against its reading in `previous`.
pub fn pod_summaries(current: &StatsSample, previous: Option<&StatsSample>) -> Vec<PodSummary> {
    let node_fs = current.node_fs.as_ref();
    let image_fs = current.image_fs.as_ref().map(|(fs, _)| fs);
    let read_at = |pod: &PodSample, sample: &StatsSample| match pod.time_unix_nanos {
        0 => sample.time_unix_nanos,
        t => t,
    };
    current
        .pods
        .iter()
        .map(|pod| {
            let t = read_at(pod, current);
            let time = rfc3339_seconds(t);
            let (before, before_t) =
                match previous.and_then(|p| Some((p.pods.iter().find(|b| b.uid == pod.uid)?, p))) {
                    Some((b, p)) => (Some(b), Some(read_at(b, p))),
                    None => (None, None),
                };
            let containers: Vec<ContainerSummary> = pod
                .containers
                .iter()
                .map(|c| {
                    let b = before
                        .and_then(|b| b.containers.iter().find(|x| x.name == c.name))
                        .zip(before_t)
                        .map(|(b, bt)| (bt, b));
                    container((&time, t), c, b, (image_fs, node_fs))
                })
                .collect();
            // Upstream's `calcEphemeralStorage`: the writable layers, the logs, the
            // local ephemeral volumes and the managed `/etc/hosts`.
            let parts: Vec<FsUsage> = pod
                .containers
                .iter()
                .flat_map(|c| [c.stats.writable_layer, c.logs])
                .flatten()
                .chain(
                    pod.volumes
                        .iter()
                        .filter(|v| v.local_ephemeral)
                        .map(|v| v.usage),
                )
                .chain(pod.etc_hosts)
                .collect();
            let ephemeral = (!parts.is_empty()).then(|| {
                let total = parts.iter().fold(FsUsage::default(), |a, u| FsUsage {
                    used_bytes: a.used_bytes.saturating_add(u.used_bytes),
                    inodes_used: a.inodes_used.saturating_add(u.inodes_used),
                });
                usage_summary(&time, total, node_fs)
            });
            PodSummary {
                pod_ref: PodReference {
                    name: pod.name.clone(),
                    namespace: pod.namespace.clone(),
                    uid: pod.uid.clone(),
                },
                start_time: pod.start_time.clone().unwrap_or_default(),
                containers,
                cpu: pod.cgroup.as_ref().and_then(|c| {
                    cpu(
                        &time,
                        (t, c.cpu_usage_nanos),
                        before_t.zip(
                            before
                                .and_then(|b| b.cgroup.as_ref())
                                .map(|b| b.cpu_usage_nanos),
                        ),
                    )
                }),
                memory: pod.cgroup.as_ref().map(|c| cgroup_memory(&time, c, None)),
                network: network(&time, &pod.network),
                volume: pod
                    .volumes
                    .iter()
                    .map(|v| VolumeSummary {
                        fs: usage_summary(&time, v.usage, v.fs.as_ref()),
                        name: v.name.clone(),
                        pvc_ref: v.pvc_ref.clone(),
                    })
                    .collect(),
                ephemeral_storage: ephemeral,
                process_stats: pod.cgroup.as_ref().and_then(|c| {
                    c.tasks.map(|n| ProcessStats {
                        process_count: Some(n),
                    })
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
