//! The order pods are evicted in (upstream's rank functions): for memory, pods using
//! more than they request first, then by priority, then by usage above the request; for
//! disk the same with ephemeral storage (or inodes); for pids by priority then process
//! count. A pod without stats goes first, as upstream.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;

use super::signals::{FsUsage, PodStats};
use super::thresholds::Resource;
use super::Signal;
use crate::domain::pod::{Pod, Volume};

/// Which of a pod's disk usages a ranking counts (upstream `fsStatsType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsStatsType {
    /// The containers' writable layers.
    Root,
    Logs,
    /// Volumes on the node's disk (emptyDir, hostPath).
    LocalVolumeSource,
}

const ALL_FS: &[FsStatsType] = &[
    FsStatsType::Root,
    FsStatsType::Logs,
    FsStatsType::LocalVolumeSource,
];
const LOGS_AND_VOLUMES: &[FsStatsType] = &[FsStatsType::Logs, FsStatsType::LocalVolumeSource];
const ROOT: &[FsStatsType] = &[FsStatsType::Root];

/// How pods are ranked for one signal (upstream `buildSignalToRankFunc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranking {
    Memory,
    Pids,
    Disk {
        measure: &'static [FsStatsType],
        resource: Resource,
    },
}

impl Ranking {
    /// With a dedicated image filesystem, nodefs pressure counts logs and volumes and
    /// imagefs pressure the writable layers; on one filesystem every usage counts.
    pub fn for_signal(signal: Signal, dedicated_image_fs: bool) -> Ranking {
        let disk = |measure, resource| Ranking::Disk { measure, resource };
        let resource = signal.resource();
        match signal {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => Ranking::Memory,
            Signal::PidAvailable => Ranking::Pids,
            _ if !dedicated_image_fs => disk(ALL_FS, resource),
            Signal::NodeFsAvailable | Signal::NodeFsInodesFree => disk(LOGS_AND_VOLUMES, resource),
            _ => disk(ROOT, resource),
        }
    }
}

/// The pod's priority, 0 when it has none (upstream `PodPriority`).
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.priority.unwrap_or(0)
}

pub use crate::domain::pod::resources::{pod_limit, pod_request};

/// Volumes of the pod on the node's disk (upstream `localVolumeNames`: hostPath and
/// local ephemeral volumes; a memory-backed emptyDir is not on disk).
pub fn local_volume_names(pod: &Pod) -> Vec<&str> {
    pod.spec
        .volumes
        .iter()
        .filter(|v| v.host_path.is_some() || is_local_ephemeral(v))
        .map(|v| v.name.as_str())
        .collect()
}

/// An emptyDir on the node's disk (upstream `IsLocalEphemeralVolume` for the volume kinds
/// a pod here can have).
pub fn is_local_ephemeral(volume: &Volume) -> bool {
    volume
        .empty_dir
        .as_ref()
        .is_some_and(|e| e.medium.is_empty())
}

/// The disk usage the ranking measures, in bytes or inodes (upstream `podDiskUsage`).
pub fn pod_disk_usage(
    stats: &PodStats,
    pod: &Pod,
    measure: &[FsStatsType],
    resource: Resource,
) -> i128 {
    let pick = |u: &FsUsage| match resource {
        Resource::Inodes => i128::from(u.inodes_used),
        _ => i128::from(u.used_bytes),
    };
    let mut total = 0i128;
    for c in &stats.containers {
        if measure.contains(&FsStatsType::Root) {
            total += c.rootfs.as_ref().map_or(0, pick);
        }
        if measure.contains(&FsStatsType::Logs) {
            total += c.logs.as_ref().map_or(0, pick);
        }
    }
    if measure.contains(&FsStatsType::LocalVolumeSource) {
        for name in local_volume_names(pod) {
            if let Some(v) = stats.volumes.iter().find(|v| v.name == name) {
                total += pick(&v.usage);
            }
        }
    }
    total
}

/// One pod's sort key: pods without stats first, then (memory, disk) those over their
/// request, then lower priority, then larger usage above the request.
type Key = (bool, Reverse<bool>, i32, Reverse<i128>);

fn key(pod: &Pod, stats: Option<&PodStats>, ranking: Ranking) -> Key {
    let priority = priority(pod);
    let Some(stats) = stats else {
        return (false, Reverse(false), priority, Reverse(0));
    };
    const NANOS: i128 = 1_000_000_000;
    let (exceeds, over) = match ranking {
        Ranking::Memory => {
            let usage = i128::from(stats.memory_working_set_bytes.unwrap_or(0)) * NANOS;
            let request = pod_request(pod, "memory");
            (usage > request, usage - request)
        }
        Ranking::Disk { measure, resource } => {
            let usage = pod_disk_usage(stats, pod, measure, resource) * NANOS;
            let request = match resource {
                // No pod requests inodes: nothing exceeds a request of them.
                Resource::Inodes => 0,
                _ => pod_request(pod, "ephemeral-storage"),
            };
            // Upstream subtracts the ephemeral-storage request from the inode count
            // too; kept, so the order is upstream's.
            (
                usage > request,
                usage - pod_request(pod, "ephemeral-storage"),
            )
        }
        Ranking::Pids => (false, i128::from(stats.process_count.unwrap_or(0)) * NANOS),
    };
    (true, Reverse(exceeds), priority, Reverse(over))
}

/// `pods` in eviction order for `ranking` (stable: equal pods keep their order).
pub fn rank<'a>(
    pods: &[&'a Pod],
    stats: &BTreeMap<&str, &PodStats>,
    ranking: Ranking,
) -> Vec<&'a Pod> {
    let mut keyed: Vec<(Key, &Pod)> = pods
        .iter()
        .map(|p| {
            let s = stats.get(p.metadata.uid.as_str()).copied();
            (key(p, s, ranking), *p)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then(Ordering::Equal));
    keyed.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::signals::{ContainerStats, VolumeStats};
    use super::*;
    use crate::domain::pod::{Container, EmptyDirVolume, ResourceRequirements};
    use crate::domain::units::quantity::Quantity;

    pub(crate) const LOW: i32 = -1;
    pub(crate) const DEFAULT: i32 = 0;
    pub(crate) const HIGH: i32 = 1;

    pub(crate) fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    pub(crate) fn bytes(s: &str) -> u64 {
        u64::try_from(q(s).value()).unwrap_or_default()
    }

    /// Upstream's `newResourceList(cpu, memory, disk)`.
    pub(crate) fn resources(cpu: &str, memory: &str, disk: &str) -> BTreeMap<String, Quantity> {
        [
            ("cpu", cpu),
            ("memory", memory),
            ("ephemeral-storage", disk),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_owned(), q(v)))
        .collect()
    }

    pub(crate) fn container(
        name: &str,
        requests: BTreeMap<String, Quantity>,
        limits: BTreeMap<String, Quantity>,
    ) -> Container {
        Container {
            name: name.into(),
            resources: ResourceRequirements { limits, requests },
            ..Container::default()
        }
    }

    /// Upstream's `newPod`: the name is the uid.
    pub(crate) fn pod(
        name: &str,
        priority: i32,
        containers: Vec<Container>,
        volumes: Vec<Volume>,
    ) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = name.into();
        pod.metadata.uid = name.into();
        pod.spec.containers = containers;
        pod.spec.volumes = volumes;
        pod.spec.priority = Some(priority);
        pod
    }

    pub(crate) fn empty_dir(name: &str) -> Volume {
        Volume {
            name: name.into(),
            empty_dir: Some(EmptyDirVolume::default()),
            ..Volume::default()
        }
    }

    pub(crate) fn memory_stats(pod: &Pod, working_set: &str) -> PodStats {
        PodStats {
            uid: pod.metadata.uid.clone(),
            memory_working_set_bytes: Some(bytes(working_set)),
            ..PodStats::default()
        }
    }

    fn usage(used_bytes: u64, inodes_used: u64) -> FsUsage {
        FsUsage {
            used_bytes,
            inodes_used,
        }
    }

    /// Upstream's `newPodDiskStats`: each container with the rootfs and logs usage, each
    /// local volume with the volume usage.
    pub(crate) fn disk_stats(pod: &Pod, rootfs: &str, logs: &str, volume: &str) -> PodStats {
        let b = |s: &str| if s.is_empty() { 0 } else { bytes(s) };
        PodStats {
            uid: pod.metadata.uid.clone(),
            containers: pod
                .spec
                .containers
                .iter()
                // Upstream's helper leaves the container name out: the eviction
                // message then names no container.
                .map(|_| ContainerStats {
                    rootfs: Some(usage(b(rootfs), 0)),
                    logs: Some(usage(b(logs), 0)),
                    ..ContainerStats::default()
                })
                .collect(),
            volumes: local_volume_names(pod)
                .into_iter()
                .map(|name| VolumeStats {
                    name: name.into(),
                    usage: usage(b(volume), 0),
                })
                .collect(),
            ..PodStats::default()
        }
    }

    /// Upstream's `newPodInodeStats`.
    pub(crate) fn inode_stats(pod: &Pod, rootfs: u64, logs: u64, volume: u64) -> PodStats {
        PodStats {
            uid: pod.metadata.uid.clone(),
            containers: pod
                .spec
                .containers
                .iter()
                .map(|_| ContainerStats {
                    rootfs: Some(usage(0, rootfs)),
                    logs: Some(usage(0, logs)),
                    ..ContainerStats::default()
                })
                .collect(),
            volumes: local_volume_names(pod)
                .into_iter()
                .map(|name| VolumeStats {
                    name: name.into(),
                    usage: usage(0, volume),
                })
                .collect(),
            ..PodStats::default()
        }
    }

    fn ranked(pods: &[Pod], stats: &[PodStats], ranking: Ranking) -> Vec<String> {
        let refs: Vec<&Pod> = pods.iter().collect();
        let by_uid = stats.iter().map(|s| (s.uid.as_str(), s)).collect();
        rank(&refs, &by_uid, ranking)
            .into_iter()
            .map(|p| p.metadata.name.clone())
            .collect()
    }

    fn names(pods: &[&Pod]) -> Vec<String> {
        pods.iter().map(|p| p.metadata.name.clone()).collect()
    }

    const DISK_ALL: Ranking = Ranking::Disk {
        measure: ALL_FS,
        resource: Resource::EphemeralStorage,
    };

    fn simple(
        name: &str,
        priority: i32,
        requests: BTreeMap<String, Quantity>,
        limits: BTreeMap<String, Quantity>,
        volumes: Vec<Volume>,
    ) -> Pod {
        pod(
            name,
            priority,
            vec![container(name, requests, limits)],
            volumes,
        )
    }

    /// Ported from upstream TestOrderedByExceedsRequestMemory and
    /// TestOrderedByExceedsRequestDisk (one comparator decides).
    #[test]
    fn pods_over_their_request_go_first() {
        let below = simple(
            "below-requests",
            LOW,
            resources("", "200Mi", ""),
            resources("", "", ""),
            vec![],
        );
        let exceeds = simple(
            "exceeds-requests",
            HIGH,
            resources("", "100Mi", ""),
            resources("", "", ""),
            vec![],
        );
        let stats = [
            memory_stats(&below, "199Mi"),
            memory_stats(&exceeds, "101Mi"),
        ];
        let pods = [below.clone(), exceeds.clone()];
        // Priority alone would put `below` first: exceeding decides before it.
        assert_eq!(
            ranked(&pods, &stats, Ranking::Memory),
            ["exceeds-requests", "below-requests"]
        );

        let disk = |name, prio, req| {
            simple(
                name,
                prio,
                resources("", "", req),
                resources("", "", ""),
                vec![],
            )
        };
        let below = disk("below-requests", LOW, "200Mi");
        let exceeds = disk("exceeds-requests", HIGH, "100Mi");
        let stats = [
            disk_stats(&below, "100Mi", "99Mi", "0"),
            disk_stats(&exceeds, "90Mi", "11Mi", "0"),
        ];
        assert_eq!(
            ranked(&[below, exceeds], &stats, DISK_ALL),
            ["exceeds-requests", "below-requests"]
        );
    }

    /// Ported from upstream TestOrderedByPriority.
    #[test]
    fn lower_priority_first() {
        let low = simple(
            "low-priority",
            -134,
            resources("", "", ""),
            resources("", "", ""),
            vec![],
        );
        let medium = simple(
            "medium-priority",
            1,
            resources("100m", "100Mi", ""),
            resources("200m", "200Mi", ""),
            vec![],
        );
        let high = simple(
            "high-priority",
            12534,
            resources("200m", "200Mi", ""),
            resources("200m", "200Mi", ""),
            vec![],
        );
        let mut pods = vec![&high, &medium, &low];
        pods.sort_by_key(|p| priority(p));
        assert_eq!(
            names(&pods),
            ["low-priority", "medium-priority", "high-priority"]
        );
    }

    /// Ported from upstream TestOrderedbyDisk (usage above request only).
    #[test]
    fn disk_usage_above_request() {
        let p = |name, req: &str, lim: &str| {
            simple(
                name,
                DEFAULT,
                resources("", "", req),
                resources("", "", lim),
                vec![empty_dir("local-volume")],
            )
        };
        let pods = [
            p("best-effort-high", "", ""),
            p("best-effort-low", "", ""),
            p("burstable-high", "100Mi", "400Mi"),
            p("burstable-low", "100Mi", "400Mi"),
            p("guaranteed-high", "400Mi", "400Mi"),
            p("guaranteed-low", "400Mi", "400Mi"),
        ];
        let stats = [
            disk_stats(&pods[0], "50Mi", "100Mi", "150Mi"),
            disk_stats(&pods[1], "25Mi", "25Mi", "50Mi"),
            disk_stats(&pods[2], "150Mi", "150Mi", "50Mi"),
            disk_stats(&pods[3], "25Mi", "35Mi", "50Mi"),
            disk_stats(&pods[4], "225Mi", "100Mi", "50Mi"),
            disk_stats(&pods[5], "25Mi", "45Mi", "50Mi"),
        ];
        // Only the last comparator: every pod here is treated alike by the others once
        // over-request is equal; check the usage order directly.
        let refs: Vec<&Pod> = pods.iter().collect();
        let by_uid: BTreeMap<&str, &PodStats> = stats.iter().map(|s| (s.uid.as_str(), s)).collect();
        let mut order = refs.clone();
        order.sort_by_key(|p| {
            let s = by_uid[p.metadata.uid.as_str()];
            Reverse(
                pod_disk_usage(s, p, ALL_FS, Resource::EphemeralStorage) * 1_000_000_000
                    - pod_request(p, "ephemeral-storage"),
            )
        });
        assert_eq!(
            names(&order),
            [
                "best-effort-high",
                "burstable-high",
                "best-effort-low",
                "burstable-low",
                "guaranteed-high",
                "guaranteed-low"
            ]
        );
    }

    /// Ported from upstream TestOrderedbyInodes.
    #[test]
    fn inode_usage() {
        let p = |name| {
            simple(
                name,
                DEFAULT,
                resources("", "", ""),
                resources("", "", ""),
                vec![empty_dir("local-volume")],
            )
        };
        let pods = [p("low"), p("medium"), p("high")];
        let stats = [
            inode_stats(&pods[0], 50_000, 100_000, 50_000),
            inode_stats(&pods[1], 100_000, 150_000, 50_000),
            inode_stats(&pods[2], 200_000, 150_000, 50_000),
        ];
        let ranking = Ranking::Disk {
            measure: ALL_FS,
            resource: Resource::Inodes,
        };
        assert_eq!(ranked(&pods, &stats, ranking), ["high", "medium", "low"]);
    }

    /// Ported from upstream TestOrderedByPriorityDisk.
    #[test]
    fn disk_exceeds_then_priority_then_usage() {
        let p = |name, prio, req: &str| {
            simple(
                name,
                prio,
                resources("", "", req),
                resources("", "", ""),
                vec![empty_dir("local-volume")],
            )
        };
        let pods = [
            p("above-requests-low-priority-high-usage", LOW, ""),
            p("above-requests-low-priority-low-usage", LOW, ""),
            p("above-requests-high-priority-high-usage", HIGH, "100Mi"),
            p("above-requests-high-priority-low-usage", HIGH, "100Mi"),
            p("below-requests-low-priority-high-usage", LOW, "1Gi"),
            p("below-requests-low-priority-low-usage", LOW, "1Gi"),
            p("below-requests-high-priority-high-usage", HIGH, "1Gi"),
            p("below-requests-high-priority-low-usage", HIGH, "1Gi"),
        ];
        let usage = [
            ("200Mi", "100Mi", "200Mi"),
            ("10Mi", "10Mi", "30Mi"),
            ("200Mi", "150Mi", "250Mi"),
            ("90Mi", "50Mi", "10Mi"),
            ("500Mi", "200Mi", "100Mi"),
            ("50Mi", "100Mi", "50Mi"),
            ("250Mi", "500Mi", "50Mi"),
            ("100Mi", "60Mi", "40Mi"),
        ];
        let stats: Vec<PodStats> = pods
            .iter()
            .zip(usage)
            .map(|(p, (r, l, v))| disk_stats(p, r, l, v))
            .collect();
        let want: Vec<String> = pods.iter().map(|p| p.metadata.name.clone()).collect();
        let mut reversed = pods.to_vec();
        reversed.reverse();
        assert_eq!(ranked(&reversed, &stats, DISK_ALL), want);
    }

    /// Ported from upstream TestOrderedByPriorityInodes.
    #[test]
    fn inodes_priority_then_usage() {
        let p = |name, prio| {
            simple(
                name,
                prio,
                resources("", "", ""),
                resources("", "", ""),
                vec![empty_dir("local-volume")],
            )
        };
        let pods = [
            p("low-priority-high-usage", LOW),
            p("low-priority-low-usage", LOW),
            p("high-priority-high-usage", HIGH),
            p("high-priority-low-usage", HIGH),
        ];
        let stats = [
            inode_stats(&pods[0], 200_000, 100_000, 200_000),
            inode_stats(&pods[1], 10_000, 10_000, 30_000),
            inode_stats(&pods[2], 200_000, 150_000, 250_000),
            inode_stats(&pods[3], 90_000, 50_000, 10_000),
        ];
        let want: Vec<String> = pods.iter().map(|p| p.metadata.name.clone()).collect();
        let mut reversed = pods.to_vec();
        reversed.reverse();
        let ranking = Ranking::Disk {
            measure: ALL_FS,
            resource: Resource::Inodes,
        };
        assert_eq!(ranked(&reversed, &stats, ranking), want);
    }

    /// Ported from upstream TestOrderedByMemory (usage above request only).
    #[test]
    fn memory_usage_above_request() {
        let p = |name, req: &str, lim: &str| {
            simple(
                name,
                DEFAULT,
                resources("", req, ""),
                resources("", lim, ""),
                vec![],
            )
        };
        let pods = [
            p("best-effort-high", "", ""),
            p("best-effort-low", "", ""),
            p("burstable-high", "100Mi", "1Gi"),
            p("burstable-low", "100Mi", "1Gi"),
            p("guaranteed-high", "1Gi", "1Gi"),
            p("guaranteed-low", "1Gi", "1Gi"),
        ];
        let ws = ["500Mi", "300Mi", "800Mi", "300Mi", "800Mi", "200Mi"];
        let mut order: Vec<&Pod> = pods.iter().collect();
        order.sort_by_key(|p| {
            let i = pods
                .iter()
                .position(|x| x.metadata.uid == p.metadata.uid)
                .unwrap_or(0);
            Reverse(i128::from(bytes(ws[i])) * 1_000_000_000 - pod_request(p, "memory"))
        });
        assert_eq!(
            names(&order),
            [
                "burstable-high",
                "best-effort-high",
                "best-effort-low",
                "burstable-low",
                "guaranteed-high",
                "guaranteed-low"
            ]
        );
    }

    /// Ported from upstream TestOrderedByPriorityMemory.
    #[test]
    fn memory_exceeds_then_priority_then_usage() {
        let p = |name, prio, req: &str| {
            simple(
                name,
                prio,
                resources("", req, ""),
                resources("", "", ""),
                vec![],
            )
        };
        let pods = [
            p("above-requests-low-priority-high-usage", LOW, ""),
            p("above-requests-low-priority-low-usage", LOW, ""),
            p("above-requests-high-priority-high-usage", HIGH, "100Mi"),
            p("above-requests-high-priority-low-usage", HIGH, "100Mi"),
            p("below-requests-low-priority-high-usage", LOW, "1Gi"),
            p("below-requests-low-priority-low-usage", LOW, "1Gi"),
            p("below-requests-high-priority-high-usage", HIGH, "1Gi"),
            p("below-requests-high-priority-low-usage", HIGH, "1Gi"),
        ];
        let ws = [
            "500Mi", "50Mi", "600Mi", "150Mi", "800Mi", "200Mi", "800Mi", "200Mi",
        ];
        let stats: Vec<PodStats> = pods
            .iter()
            .zip(ws)
            .map(|(p, w)| memory_stats(p, w))
            .collect();
        let want: Vec<String> = pods.iter().map(|p| p.metadata.name.clone()).collect();
        let mut reversed = pods.to_vec();
        reversed.reverse();
        assert_eq!(ranked(&reversed, &stats, Ranking::Memory), want);
    }

    /// Ported from upstream TestOrderedByPriorityProcess.
    #[test]
    fn pids_priority_then_processes() {
        let p = |name, prio| pod(name, prio, vec![], vec![]);
        let pods = [
            p("low-priority-high-usage", LOW),
            p("low-priority-low-usage", LOW),
            p("high-priority-high-usage", HIGH),
            p("high-priority-low-usage", HIGH),
        ];
        let stats: Vec<PodStats> = pods
            .iter()
            .zip([20, 6, 20, 5])
            .map(|(p, n)| PodStats {
                uid: p.metadata.uid.clone(),
                process_count: Some(n),
                ..PodStats::default()
            })
            .collect();
        let want: Vec<String> = pods.iter().map(|p| p.metadata.name.clone()).collect();
        let mut reversed = pods.to_vec();
        reversed.reverse();
        assert_eq!(ranked(&reversed, &stats, Ranking::Pids), want);
    }

    #[test]
    fn a_pod_without_stats_goes_first() {
        let a = simple(
            "with-stats",
            LOW,
            resources("", "", ""),
            resources("", "", ""),
            vec![],
        );
        let b = simple(
            "without-stats",
            HIGH,
            resources("", "1Gi", ""),
            resources("", "", ""),
            vec![],
        );
        let stats = [memory_stats(&a, "1Gi")];
        assert_eq!(
            ranked(&[a, b], &stats, Ranking::Memory),
            ["without-stats", "with-stats"]
        );
    }

    #[test]
    fn requests_and_limits_follow_upstream_v1_26() {
        let mut p = simple(
            "p",
            0,
            resources("", "100Mi", "1Gi"),
            resources("", "", "2Gi"),
            vec![],
        );
        p.spec.containers.push(container(
            "b",
            resources("", "50Mi", ""),
            resources("", "", ""),
        ));
        p.spec.init_containers.push(container(
            "init",
            resources("", "120Mi", ""),
            resources("", "", "3Gi"),
        ));
        assert_eq!(
            pod_request(&p, "memory"),
            i128::from(bytes("150Mi")) * 1_000_000_000
        );
        assert_eq!(
            pod_limit(&p, "ephemeral-storage").map(|q| q.to_string()),
            Some("3Gi".into())
        );
        assert_eq!(pod_limit(&p, "memory"), None);
        assert_eq!(
            pod_request(&p, "ephemeral-storage"),
            i128::from(bytes("1Gi")) * 1_000_000_000
        );
    }

    #[test]
    fn rankings_follow_the_image_filesystem() {
        assert_eq!(
            Ranking::for_signal(Signal::NodeFsAvailable, true),
            Ranking::Disk {
                measure: LOGS_AND_VOLUMES,
                resource: Resource::EphemeralStorage
            }
        );
        assert_eq!(
            Ranking::for_signal(Signal::ImageFsInodesFree, true),
            Ranking::Disk {
                measure: ROOT,
                resource: Resource::Inodes
            }
        );
        assert_eq!(
            Ranking::for_signal(Signal::ImageFsAvailable, false),
            DISK_ALL
        );
        assert_eq!(
            Ranking::for_signal(Signal::AllocatableMemoryAvailable, false),
            Ranking::Memory
        );
        assert_eq!(
            Ranking::for_signal(Signal::PidAvailable, true),
            Ranking::Pids
        );
    }
}
