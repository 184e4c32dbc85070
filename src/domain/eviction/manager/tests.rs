//! Upstream's `eviction_manager_test.go`, ported: each test drives the three steps of a
//! cycle the way the app does, with a fake clock, fake stats and a fake node reclaim.

use super::super::admission::admit;
use super::super::rank::tests::{
    bytes, container, disk_stats, memory_stats, pod, resources, DEFAULT, HIGH, LOW,
};
use super::super::signals::{FsStats, FsUsage, MemoryStats, PodStats};
use super::super::{Operator, ThresholdValue};
use super::*;
use crate::domain::pod::{
    EmptyDirVolume, Volume, CONFIG_SOURCE_ANNOTATION, SYSTEM_CRITICAL_PRIORITY,
};
use crate::domain::units::duration::GoDuration;
use std::collections::BTreeMap as Map;

const MINUTE: i64 = 60_000_000_000;

fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn threshold(
    signal: Signal,
    value: &str,
    grace_minutes: i64,
    min_reclaim: Option<&str>,
) -> Threshold {
    Threshold {
        signal,
        operator: Operator::LessThan,
        value: ThresholdValue::Quantity(q(value)),
        grace_period: GoDuration::from_secs(grace_minutes * 60),
        min_reclaim: min_reclaim.map(|r| ThresholdValue::Quantity(q(r))),
    }
}

fn config(thresholds: Vec<Threshold>) -> EvictionConfig {
    EvictionConfig {
        thresholds,
        pressure_transition_period_nanos: 5 * MINUTE,
        max_pod_grace_period_seconds: 5,
        local_storage_capacity_isolation: false,
    }
}

/// Upstream's `makeMemoryStats`: available X and working set X, node and pods alike.
fn memory_summary(available: &str, pods: &[PodStats]) -> NodeSummary {
    let x = bytes(available);
    let m = MemoryStats {
        usage_bytes: x,
        working_set_bytes: x,
        available_bytes: Some(x),
    };
    NodeSummary {
        memory: Some(m),
        allocatable_memory: Some(m),
        pods: pods.to_vec(),
        ..NodeSummary::default()
    }
}

/// Upstream's `makeDiskStats`: each filesystem with X available of 2X.
fn disk_summary(rootfs: &str, imagefs: &str, pods: &[PodStats]) -> NodeSummary {
    let fs = |s: &str| FsStats {
        capacity_bytes: bytes(s) * 2,
        available_bytes: bytes(s),
        inodes: None,
        inodes_free: None,
    };
    NodeSummary {
        node_fs: Some(fs(rootfs)),
        image_fs: Some(fs(imagefs)),
        pods: pods.to_vec(),
        ..NodeSummary::default()
    }
}

/// One row of upstream's `podToMake`.
struct Make {
    name: &'static str,
    priority: i32,
    requests: (&'static str, &'static str, &'static str),
    limits: (&'static str, &'static str, &'static str),
    usage: &'static str,
}

fn make(
    name: &'static str,
    priority: i32,
    requests: (&'static str, &'static str, &'static str),
    limits: (&'static str, &'static str, &'static str),
    usage: &'static str,
) -> Make {
    Make {
        name,
        priority,
        requests,
        limits,
        usage,
    }
}

fn build(m: &Make) -> Pod {
    let r = m.requests;
    let l = m.limits;
    pod(
        m.name,
        m.priority,
        vec![container(
            m.name,
            resources(r.0, r.1, r.2),
            resources(l.0, l.1, l.2),
        )],
        vec![],
    )
}

fn memory_pods(rows: &[Make]) -> (Vec<Pod>, Vec<PodStats>) {
    let pods: Vec<Pod> = rows.iter().map(build).collect();
    let stats = pods
        .iter()
        .zip(rows)
        .map(|(p, m)| memory_stats(p, m.usage))
        .collect();
    (pods, stats)
}

/// Rows whose usage is the writable layer's.
fn disk_pods(rows: &[Make]) -> (Vec<Pod>, Vec<PodStats>) {
    let pods: Vec<Pod> = rows.iter().map(build).collect();
    let stats = pods
        .iter()
        .zip(rows)
        .map(|(p, m)| disk_stats(p, m.usage, "", ""))
        .collect();
    (pods, stats)
}

/// The manager around the pure steps, with upstream's mocks: a pod killer that records,
/// a disk GC that records and may change the stats.
struct Manager {
    config: EvictionConfig,
    state: EvictionState,
    now: i64,
    summary: NodeSummary,
    summary_after_gc: Option<NodeSummary>,
    dedicated_image_fs: bool,
    gc_invoked: Vec<NodeReclaim>,
    killed: Option<Eviction>,
}

impl Manager {
    fn new(config: EvictionConfig, summary: NodeSummary) -> Manager {
        Manager {
            config,
            state: EvictionState::default(),
            now: 1_000 * MINUTE,
            summary,
            summary_after_gc: None,
            dedicated_image_fs: false,
            gc_invoked: Vec::new(),
            killed: None,
        }
    }

    fn step(&mut self, minutes: i64) {
        self.now += minutes * MINUTE;
    }

    fn synchronize(&mut self, pods: &[Pod]) {
        let Some(sync) = synchronize(
            &self.config,
            &self.state,
            &self.summary,
            pods,
            self.dedicated_image_fs,
            self.now,
        ) else {
            return;
        };
        self.state = sync.state.clone();
        if let Some(first) = sync.local_storage.first() {
            self.killed = Some(first.clone());
            return;
        }
        let Some(starved) = &sync.starved else {
            return;
        };
        let ranked_on = self.summary.clone();
        if !starved.reclaim.is_empty() {
            for step in starved.reclaim {
                self.gc_invoked.push(*step);
                if let Some(after) = &self.summary_after_gc {
                    self.summary = after.clone();
                }
            }
            if reclaim_sufficient(&self.config, &self.summary) {
                return;
            }
        }
        let choice = choose_pod(
            &self.config,
            &sync,
            starved,
            pods,
            &ranked_on,
            self.dedicated_image_fs,
        );
        if let Some(e) = choice.eviction {
            self.killed = Some(e);
        }
    }

    fn memory_pressure(&self) -> bool {
        self.state.has(PressureCondition::MemoryPressure)
    }

    fn disk_pressure(&self) -> bool {
        self.state.has(PressureCondition::DiskPressure)
    }

    fn killed_name(&self) -> Option<String> {
        self.killed.as_ref().map(|e| e.pod_uid.clone())
    }

    fn take_killed(&mut self) -> Option<Eviction> {
        self.killed.take()
    }

    fn admits(&self, pod: &Pod) -> bool {
        admit(pod, &self.state.node_conditions).is_ok()
    }
}

#[test]
fn memory_pressure_verify_pod_status() {
    let (pods, stats) = memory_pods(&[
        make(
            "below-requests",
            0,
            ("", "1Gi", ""),
            ("", "1Gi", ""),
            "900Mi",
        ),
        make(
            "above-requests",
            0,
            ("", "100Mi", ""),
            ("", "1Gi", ""),
            "700Mi",
        ),
    ]);
    let mut m = Manager::new(
        config(vec![threshold(Signal::MemoryAvailable, "2Gi", 0, None)]),
        memory_summary("1500Mi", &stats),
    );
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    let e = m.take_killed().expect("a pod is evicted");
    let message =
        "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. ";
    assert_eq!((e.reason, e.message.as_str()), ("Evicted", message));
    assert_eq!(
        e.condition,
        Some(EvictionCondition {
            type_: "DisruptionTarget",
            status: "True",
            reason: "TerminationByKubelet",
            message: message.into()
        })
    );
}

#[test]
fn disk_pressure_nodefs_verify_pod_status() {
    let (pods, stats) = disk_pods(&[
        make(
            "below-requests",
            0,
            ("", "", "1Gi"),
            ("", "", "1Gi"),
            "900Mi",
        ),
        make(
            "above-requests",
            0,
            ("", "", "100Mi"),
            ("", "", "1Gi"),
            "700Mi",
        ),
    ]);
    let mut m = Manager::new(
        config(vec![threshold(Signal::NodeFsAvailable, "2Gi", 0, None)]),
        disk_summary("1.5Gi", "200Gi", &stats),
    );
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    let e = m.take_killed().expect("a pod is evicted");
    assert_eq!(e.message, "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, available: 1536Mi. ");
    assert_eq!(e.condition.map(|c| c.reason), Some("TerminationByKubelet"));
}

fn memory_rows() -> Vec<Make> {
    vec![
        make(
            "guaranteed-low-priority-high-usage",
            LOW,
            ("100m", "1Gi", ""),
            ("100m", "1Gi", ""),
            "900Mi",
        ),
        make(
            "burstable-below-requests",
            DEFAULT,
            ("100m", "100Mi", ""),
            ("200m", "1Gi", ""),
            "50Mi",
        ),
        make(
            "burstable-above-requests",
            DEFAULT,
            ("100m", "100Mi", ""),
            ("200m", "1Gi", ""),
            "400Mi",
        ),
        make(
            "best-effort-high-priority-high-usage",
            HIGH,
            ("", "", ""),
            ("", "", ""),
            "400Mi",
        ),
        make(
            "best-effort-low-priority-low-usage",
            LOW,
            ("", "", ""),
            ("", "", ""),
            "100Mi",
        ),
    ]
}

#[test]
fn memory_pressure() {
    let (pods, stats) = memory_pods(&memory_rows());
    let evict = "best-effort-low-priority-low-usage";
    let mut m = Manager::new(
        config(vec![
            threshold(Signal::MemoryAvailable, "1Gi", 0, None),
            threshold(Signal::MemoryAvailable, "2Gi", 2, None),
        ]),
        memory_summary("2Gi", &stats),
    );
    let best_effort = build(&make(
        "best-admit",
        DEFAULT,
        ("", "", ""),
        ("", "", ""),
        "0Gi",
    ));
    let burstable = build(&make(
        "burst-admit",
        DEFAULT,
        ("100m", "100Mi", ""),
        ("200m", "200Mi", ""),
        "0Gi",
    ));
    let admits = |m: &Manager| [m.admits(&best_effort), m.admits(&burstable)];

    m.synchronize(&pods);
    assert!(!m.memory_pressure());
    assert_eq!(admits(&m), [true, true]);

    // The soft threshold is met; its grace period has not passed.
    m.step(1);
    m.summary = memory_summary("1500Mi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(m.killed_name(), None);

    // Past the grace period: evicted with evictionMaxPodGracePeriod.
    m.step(3);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    let e = m.take_killed().expect("evicted");
    assert_eq!((e.pod_uid.as_str(), e.grace_period_override), (evict, 5));

    m.step(20);
    m.summary = memory_summary("3Gi", &stats);
    m.synchronize(&pods);
    assert!(!m.memory_pressure());

    // The hard threshold: at once, no grace.
    m.step(1);
    m.summary = memory_summary("500Mi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    let e = m.take_killed().expect("evicted");
    assert_eq!((e.pod_uid.as_str(), e.grace_period_override), (evict, 0));
    assert_eq!(admits(&m), [false, true]);

    // Relief, but the transition period holds the condition.
    m.step(1);
    m.summary = memory_summary("2Gi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(m.killed_name(), None);
    assert_eq!(admits(&m), [false, true]);

    m.step(5);
    m.synchronize(&pods);
    assert!(!m.memory_pressure());
    assert_eq!(m.killed_name(), None);
    assert_eq!(admits(&m), [true, true]);
}

fn disk_rows() -> Vec<(Make, &'static str, &'static str)> {
    // (row, logs, volume): the row's usage is the writable layer.
    vec![
        (
            make(
                "low-priority-high-usage",
                LOW,
                ("100m", "1Gi", ""),
                ("100m", "1Gi", ""),
                "900Mi",
            ),
            "",
            "",
        ),
        (
            make(
                "below-requests",
                DEFAULT,
                ("100m", "100Mi", ""),
                ("200m", "1Gi", ""),
                "",
            ),
            "50Mi",
            "",
        ),
        (
            make(
                "above-requests",
                DEFAULT,
                ("100m", "100Mi", ""),
                ("200m", "1Gi", ""),
                "400Mi",
            ),
            "",
            "",
        ),
        (
            make(
                "high-priority-high-usage",
                HIGH,
                ("", "", ""),
                ("", "", ""),
                "",
            ),
            "",
            "400Mi",
        ),
        (
            make(
                "low-priority-low-usage",
                LOW,
                ("", "", ""),
                ("", "", ""),
                "100Mi",
            ),
            "",
            "",
        ),
    ]
}

fn disk_rows_pods() -> (Vec<Pod>, Vec<PodStats>) {
    let rows = disk_rows();
    let pods: Vec<Pod> = rows.iter().map(|(m, _, _)| build(m)).collect();
    let stats = pods
        .iter()
        .zip(&rows)
        .map(|(p, (m, logs, vol))| disk_stats(p, m.usage, logs, vol))
        .collect();
    (pods, stats)
}

#[test]
fn disk_pressure_nodefs() {
    let (pods, stats) = disk_rows_pods();
    let evict = "low-priority-high-usage";
    let mut m = Manager::new(
        config(vec![
            threshold(Signal::NodeFsAvailable, "1Gi", 0, None),
            threshold(Signal::NodeFsAvailable, "2Gi", 2, None),
        ]),
        disk_summary("16Gi", "200Gi", &stats),
    );
    let to_admit = build(&make(
        "pod-to-admit",
        DEFAULT,
        ("", "", ""),
        ("", "", ""),
        "",
    ));
    m.synchronize(&pods);
    assert!(!m.disk_pressure());
    assert!(m.admits(&to_admit));

    m.step(1);
    m.summary = disk_summary("1.5Gi", "200Gi", &stats);
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    assert_eq!(m.killed_name(), None);

    m.step(3);
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    let e = m.take_killed().expect("evicted");
    assert_eq!((e.pod_uid.as_str(), e.grace_period_override), (evict, 5));

    m.step(20);
    m.summary = disk_summary("16Gi", "200Gi", &stats);
    m.synchronize(&pods);
    assert!(!m.disk_pressure());

    m.step(1);
    m.summary = disk_summary("500Mi", "200Gi", &stats);
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    let e = m.take_killed().expect("evicted");
    assert_eq!((e.pod_uid.as_str(), e.grace_period_override), (evict, 0));
    assert!(!m.admits(&to_admit));

    m.step(1);
    m.summary = disk_summary("16Gi", "200Gi", &stats);
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    assert_eq!(m.killed_name(), None);
    assert!(!m.admits(&to_admit));

    m.step(5);
    m.synchronize(&pods);
    assert!(!m.disk_pressure());
    assert_eq!(m.killed_name(), None);
    assert!(m.admits(&to_admit));
}

#[test]
fn min_reclaim() {
    let (pods, stats) = memory_pods(&memory_rows());
    let evict = "best-effort-low-priority-low-usage";
    let mut m = Manager::new(
        config(vec![threshold(
            Signal::MemoryAvailable,
            "1Gi",
            0,
            Some("500Mi"),
        )]),
        memory_summary("2Gi", &stats),
    );
    m.synchronize(&pods);
    assert!(!m.memory_pressure());

    m.step(1);
    m.summary = memory_summary("500Mi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(
        m.take_killed()
            .map(|e| (e.pod_uid, e.grace_period_override)),
        Some((evict.into(), 0))
    );

    // Above the threshold but not by the minimum reclaim: still evicting.
    m.step(1);
    m.summary = memory_summary("1.2Gi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(
        m.take_killed()
            .map(|e| (e.pod_uid, e.grace_period_override)),
        Some((evict.into(), 0))
    );

    m.step(1);
    m.summary = memory_summary("2Gi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(m.killed_name(), None);

    m.step(5);
    m.synchronize(&pods);
    assert!(!m.memory_pressure());
    assert_eq!(m.killed_name(), None);
}

#[test]
fn node_reclaim_funcs() {
    let (pods, stats) = disk_rows_pods();
    let evict = "low-priority-high-usage";
    let mut m = Manager::new(
        config(vec![threshold(
            Signal::NodeFsAvailable,
            "1Gi",
            0,
            Some("500Mi"),
        )]),
        disk_summary("16Gi", "200Gi", &stats),
    );
    let both = [NodeReclaim::DeadContainers, NodeReclaim::UnusedImages];
    m.synchronize(&pods);
    assert!(!m.disk_pressure());

    // Reclaim frees enough: no eviction.
    m.step(1);
    m.summary = disk_summary(".9Gi", "200Gi", &stats);
    m.summary_after_gc = Some(disk_summary("16Gi", "200Gi", &stats));
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    assert_eq!(m.gc_invoked, both);
    assert_eq!(m.killed_name(), None);
    m.gc_invoked.clear();

    m.step(20);
    m.summary = disk_summary("16Gi", "200Gi", &stats);
    m.synchronize(&pods);
    assert!(!m.disk_pressure());
    m.synchronize(&pods);
    assert!(!m.disk_pressure());

    // Reclaim gets below the threshold but not by the minimum reclaim: evict.
    m.step(1);
    m.summary = disk_summary(".9Gi", "200Gi", &stats);
    m.summary_after_gc = Some(disk_summary("1.1Gi", "200Gi", &stats));
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    assert_eq!(m.gc_invoked, both);
    assert!(m.take_killed().is_some());
    m.gc_invoked.clear();

    m.step(20);
    m.summary = disk_summary("16Gi", "200Gi", &stats);
    m.synchronize(&pods);
    assert!(!m.disk_pressure());

    // Reclaim frees nothing.
    m.step(1);
    m.summary = disk_summary("400Mi", "200Gi", &stats);
    m.summary_after_gc = Some(disk_summary("400Mi", "200Gi", &stats));
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    assert_eq!(m.gc_invoked, both);
    assert_eq!(
        m.take_killed()
            .map(|e| (e.pod_uid, e.grace_period_override)),
        Some((evict.into(), 0))
    );

    m.step(1);
    m.summary = disk_summary("16Gi", "200Gi", &stats);
    m.summary_after_gc = None;
    m.gc_invoked.clear();
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    assert!(m.gc_invoked.is_empty());
    assert_eq!(m.killed_name(), None);

    m.step(5);
    m.synchronize(&pods);
    assert!(!m.disk_pressure());
    assert!(m.gc_invoked.is_empty());
    assert_eq!(m.killed_name(), None);
}

#[test]
fn inode_pressure_nodefs_inodes() {
    let rows = [
        make(
            "low-priority-high-usage",
            LOW,
            ("100m", "1Gi", ""),
            ("100m", "1Gi", ""),
            "900Mi",
        ),
        make(
            "below-requests",
            DEFAULT,
            ("100m", "100Mi", ""),
            ("200m", "1Gi", ""),
            "50Mi",
        ),
        make(
            "above-requests",
            DEFAULT,
            ("100m", "100Mi", ""),
            ("200m", "1Gi", ""),
            "400Mi",
        ),
        make(
            "high-priority-high-usage",
            HIGH,
            ("", "", ""),
            ("", "", ""),
            "400Mi",
        ),
        make(
            "low-priority-low-usage",
            LOW,
            ("", "", ""),
            ("", "", ""),
            "100Mi",
        ),
    ];
    let pods: Vec<Pod> = rows.iter().map(build).collect();
    let stats: Vec<PodStats> = pods
        .iter()
        .zip(&rows)
        .map(|(p, m)| super::super::rank::tests::inode_stats(p, bytes(m.usage), 0, 0))
        .collect();
    let summary = |free: &str, total: &str| NodeSummary {
        node_fs: Some(FsStats {
            capacity_bytes: 0,
            available_bytes: 0,
            inodes: Some(bytes(total)),
            inodes_free: Some(bytes(free)),
        }),
        pods: stats.clone(),
        ..NodeSummary::default()
    };
    let evict = "low-priority-high-usage";
    let mut m = Manager::new(
        config(vec![
            threshold(Signal::NodeFsInodesFree, "1Mi", 0, None),
            threshold(Signal::NodeFsInodesFree, "2Mi", 2, None),
        ]),
        summary("3Mi", "4Mi"),
    );
    let to_admit = build(&make(
        "pod-to-admit",
        DEFAULT,
        ("", "", ""),
        ("", "", ""),
        "",
    ));
    m.synchronize(&pods);
    assert!(!m.disk_pressure());
    assert!(m.admits(&to_admit));

    m.step(1);
    m.summary = summary("1.5Mi", "4Mi");
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    assert_eq!(m.killed_name(), None);

    m.step(3);
    m.synchronize(&pods);
    let e = m.take_killed().expect("evicted");
    assert_eq!((e.pod_uid.as_str(), e.grace_period_override), (evict, 5));
    assert!(
        e.message.starts_with(
            "The node was low on resource: inodes. Threshold quantity: 2Mi, available: 1572864. "
        ),
        "{}",
        e.message
    );

    m.step(20);
    m.summary = summary("3Mi", "4Mi");
    m.synchronize(&pods);
    assert!(!m.disk_pressure());

    m.step(1);
    m.summary = summary("0.5Mi", "4Mi");
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    assert_eq!(
        m.take_killed()
            .map(|e| (e.pod_uid, e.grace_period_override)),
        Some((evict.into(), 0))
    );
    assert!(!m.admits(&to_admit));

    m.step(1);
    m.summary = summary("3Mi", "4Mi");
    m.synchronize(&pods);
    assert!(m.disk_pressure());
    assert_eq!(m.killed_name(), None);
    assert!(!m.admits(&to_admit));

    m.step(5);
    m.synchronize(&pods);
    assert!(!m.disk_pressure());
    assert!(m.admits(&to_admit));
}

#[test]
fn static_critical_pods_are_not_evicted() {
    let (mut pods, stats) = memory_pods(&[make(
        "critical",
        SYSTEM_CRITICAL_PRIORITY,
        ("100m", "1Gi", ""),
        ("100m", "1Gi", ""),
        "800Mi",
    )]);
    pods[0]
        .metadata
        .annotations
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
    pods[0].metadata.namespace = "kube-system".into();
    let mut m = Manager::new(
        config(vec![
            threshold(Signal::MemoryAvailable, "1Gi", 0, None),
            threshold(Signal::MemoryAvailable, "2Gi", 2, None),
        ]),
        memory_summary("2Gi", &stats),
    );
    m.step(1);
    m.summary = memory_summary("1500Mi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(m.killed_name(), None);

    m.step(3);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(
        m.killed_name(),
        None,
        "a static, critical pod is never evicted"
    );

    m.step(20);
    m.summary = memory_summary("3Gi", &stats);
    m.synchronize(&pods);
    assert!(!m.memory_pressure());

    // Static alone protects it, as upstream (a static pod is never re-admitted); from
    // the API server at ordinary priority, the same pod goes.
    pods[0].spec.priority = None;
    m.step(1);
    m.summary = memory_summary("500Mi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(m.killed_name(), None);
    pods[0]
        .metadata
        .annotations
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "api".into());
    m.step(1);
    m.synchronize(&pods);
    assert_eq!(m.killed_name(), Some("critical".into()));
}

#[test]
fn allocatable_memory_pressure() {
    let (pods, mut stats) = memory_pods(&memory_rows());
    let evict = "best-effort-low-priority-low-usage";
    let mut m = Manager::new(
        config(vec![threshold(
            Signal::AllocatableMemoryAvailable,
            "1Gi",
            0,
            None,
        )]),
        memory_summary("4Gi", &stats),
    );
    let best_effort = build(&make(
        "best-admit",
        DEFAULT,
        ("", "", ""),
        ("", "", ""),
        "0Gi",
    ));
    let burstable = build(&make(
        "burst-admit",
        DEFAULT,
        ("100m", "100Mi", ""),
        ("200m", "200Mi", ""),
        "0Gi",
    ));
    let admits = |m: &Manager| [m.admits(&best_effort), m.admits(&burstable)];
    m.synchronize(&pods);
    assert!(!m.memory_pressure());
    assert_eq!(admits(&m), [true, true]);

    // A pod the manager does not list as active uses memory too.
    m.step(1);
    let extra = build(&make(
        "guaranteed-high-2",
        DEFAULT,
        ("100m", "1Gi", ""),
        ("100m", "1Gi", ""),
        "1Gi",
    ));
    stats.push(memory_stats(&extra, "1Gi"));
    m.summary = memory_summary("500Mi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(
        m.take_killed()
            .map(|e| (e.pod_uid, e.grace_period_override)),
        Some((evict.into(), 0))
    );
    assert_eq!(admits(&m), [false, true]);

    m.step(1);
    stats.pop();
    m.summary = memory_summary("2Gi", &stats);
    m.synchronize(&pods);
    assert!(m.memory_pressure());
    assert_eq!(m.killed_name(), None);
    assert_eq!(admits(&m), [false, true]);

    m.step(5);
    m.synchronize(&pods);
    assert!(!m.memory_pressure());
    assert_eq!(admits(&m), [true, true]);
}

#[test]
fn nothing_configured_is_idle() {
    let c = EvictionConfig {
        thresholds: vec![],
        pressure_transition_period_nanos: 0,
        max_pod_grace_period_seconds: 0,
        local_storage_capacity_isolation: false,
    };
    assert!(synchronize(
        &c,
        &EvictionState::default(),
        &NodeSummary::default(),
        &[],
        false,
        0
    )
    .is_none());
}

#[test]
fn the_message_names_containers_over_their_request() {
    let p = pod(
        "hog",
        0,
        vec![
            container("hog", resources("", "100Mi", ""), resources("", "", "")),
            container("quiet", resources("", "100Mi", ""), resources("", "", "")),
        ],
        vec![],
    );
    let stats = PodStats {
        uid: "hog".into(),
        memory_working_set_bytes: Some(bytes("600Mi")),
        containers: vec![
            super::super::signals::ContainerStats {
                name: "hog".into(),
                memory_working_set_bytes: Some(bytes("500Mi")),
                ..Default::default()
            },
            super::super::signals::ContainerStats {
                name: "quiet".into(),
                memory_working_set_bytes: Some(bytes("50Mi")),
                ..Default::default()
            },
        ],
        ..PodStats::default()
    };
    let t = threshold(Signal::MemoryAvailable, "1Gi", 0, None);
    let mut m = Manager::new(config(vec![t]), memory_summary("500Mi", &[stats]));
    m.synchronize(std::slice::from_ref(&p));
    let e = m.take_killed().expect("evicted");
    assert_eq!(e.message, "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. Container hog was using 500Mi, request is 100Mi, has larger consumption of memory. ");
    assert_eq!(
        e.annotations,
        Map::from([
            ("offending_containers".to_owned(), "hog".to_owned()),
            ("offending_containers_usage".to_owned(), "500Mi".to_owned()),
            ("starved_resource".to_owned(), "memory".to_owned()),
        ])
    );
}

fn usage(used: &str) -> FsUsage {
    FsUsage {
        used_bytes: bytes(used),
        inodes_used: 0,
    }
}

/// CVE-2020-8557: the pod's managed `/etc/hosts` counts in its ephemeral storage, so a
/// pod that fills it past its `ephemeral-storage` limit is evicted (the container's own
/// limit, writable layer and logs only, is not what catches it).
#[test]
fn writes_to_etc_hosts_count_against_the_pods_ephemeral_storage_limit() {
    let hosts = pod(
        "hosts",
        0,
        vec![container(
            "main",
            resources("", "", ""),
            resources("", "", "1Mi"),
        )],
        vec![],
    );
    let stats = |etc_hosts: Option<FsUsage>| NodeSummary {
        pods: vec![PodStats {
            uid: "hosts".into(),
            containers: vec![super::super::signals::ContainerStats {
                name: "main".into(),
                rootfs: Some(usage("4Ki")),
                logs: Some(usage("4Ki")),
                ..Default::default()
            }],
            etc_hosts,
            ..PodStats::default()
        }],
        ..NodeSummary::default()
    };
    let pods = [hosts];
    let (evicted, _) = local_storage_evictions(&pods, &stats(Some(usage("4Ki"))), false);
    assert!(evicted.is_empty(), "{evicted:?}");
    let (evicted, _) = local_storage_evictions(&pods, &stats(Some(usage("5Mi"))), false);
    let got: Vec<(&str, &str)> = evicted
        .iter()
        .map(|e| (e.pod_uid.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [(
            "hosts",
            "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. "
        )]
    );
}

#[test]
fn local_storage_limits() {
    let mut c = config(vec![]);
    c.local_storage_capacity_isolation = true;
    let mut scratch = pod(
        "scratch",
        0,
        vec![container(
            "writer",
            resources("", "", ""),
            resources("", "", ""),
        )],
        vec![],
    );
    scratch.spec.volumes.push(Volume {
        name: "cache".into(),
        empty_dir: Some(EmptyDirVolume {
            medium: String::new(),
            size_limit: Some(q("10Mi")),
        }),
        ..Volume::default()
    });
    let writer = pod(
        "writer",
        0,
        vec![container(
            "app",
            resources("", "", ""),
            resources("", "", "50Mi"),
        )],
        vec![],
    );
    let mut multi = pod(
        "multi",
        0,
        vec![container(
            "a",
            resources("", "", ""),
            resources("", "", "30Mi"),
        )],
        vec![],
    );
    multi.spec.containers.push(container(
        "b",
        resources("", "", ""),
        resources("", "", "30Mi"),
    ));
    let mut critical = writer.clone();
    critical.metadata.uid = "critical".into();
    critical.metadata.name = "critical".into();
    critical.spec.priority = Some(SYSTEM_CRITICAL_PRIORITY);
    let cs = |name: &str, root: &str, logs: &str| super::super::signals::ContainerStats {
        name: name.into(),
        rootfs: Some(usage(root)),
        logs: Some(usage(logs)),
        ..Default::default()
    };
    let stats = vec![
        PodStats {
            uid: "scratch".into(),
            containers: vec![cs("writer", "1Mi", "1Mi")],
            volumes: vec![super::super::signals::VolumeStats {
                name: "cache".into(),
                usage: usage("11Mi"),
            }],
            ..PodStats::default()
        },
        PodStats {
            uid: "writer".into(),
            containers: vec![cs("app", "45Mi", "6Mi")],
            ..PodStats::default()
        },
        PodStats {
            uid: "multi".into(),
            containers: vec![cs("a", "20Mi", "1Mi"), cs("b", "30Mi", "1Mi")],
            ..PodStats::default()
        },
        PodStats {
            uid: "critical".into(),
            containers: vec![cs("app", "45Mi", "6Mi")],
            ..PodStats::default()
        },
    ];
    let summary = NodeSummary {
        pods: stats,
        ..NodeSummary::default()
    };
    let pods = [scratch, writer, multi, critical];
    let sync =
        synchronize(&c, &EvictionState::default(), &summary, &pods, false, 0).expect("active");
    let got: Vec<(&str, &str, i64)> = sync
        .local_storage
        .iter()
        .map(|e| {
            (
                e.pod_uid.as_str(),
                e.message.as_str(),
                e.grace_period_override,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "scratch",
                "Usage of EmptyDir volume \"cache\" exceeds the limit \"10Mi\". ",
                0
            ),
            (
                "writer",
                "Pod ephemeral local storage usage exceeds the total limit of containers 50Mi. ",
                0
            ),
            (
                "multi",
                "Container b exceeded its local ephemeral storage limit \"30Mi\". ",
                0
            ),
        ]
    );
    assert_eq!(sync.protected, ["critical_(critical)"]);
    assert!(sync.starved.is_none());
    assert!(sync
        .local_storage
        .iter()
        .all(|e| e.reason == "Evicted" && e.condition.is_none()));
    // With images on their own filesystem the writable layer does not count for the
    // container's limit.
    let (evicted, _) = local_storage_evictions(&pods[2..3], &summary, true);
    assert!(evicted.is_empty());
    // Without localStorageCapacityIsolation nothing is enforced.
    c.local_storage_capacity_isolation = false;
    assert!(synchronize(&c, &EvictionState::default(), &summary, &pods, false, 0).is_none());
}

#[test]
fn reclaim_depends_on_the_image_filesystem() {
    use NodeReclaim::*;
    assert_eq!(
        node_reclaims(Signal::NodeFsAvailable, false),
        [DeadContainers, UnusedImages]
    );
    assert!(node_reclaims(Signal::NodeFsAvailable, true).is_empty());
    assert_eq!(
        node_reclaims(Signal::ImageFsInodesFree, true),
        [DeadContainers, UnusedImages]
    );
    assert!(node_reclaims(Signal::MemoryAvailable, false).is_empty());
    assert!(node_reclaims(Signal::PidAvailable, false).is_empty());
}

/// Upstream's `makePIDStats`: `max` pids of which `running` run.
fn pid_summary(max: u64, running: u64, pods: &[PodStats]) -> NodeSummary {
    NodeSummary {
        pids: Some(super::super::signals::PidStats { max, running }),
        pods: pods.to_vec(),
        ..NodeSummary::default()
    }
}

/// Upstream's PID `podToMake` rows: name, priority, processes.
fn pid_pods() -> (Vec<Pod>, Vec<PodStats>) {
    let rows = [
        ("high-priority-high-usage", HIGH, 900),
        ("default-priority-low-usage", DEFAULT, 100),
        ("default-priority-medium-usage", DEFAULT, 400),
        ("low-priority-high-usage", LOW, 600),
        ("low-priority-low-usage", LOW, 50),
    ];
    let pods: Vec<Pod> = rows
        .iter()
        .map(|(name, priority, _)| build(&make(name, *priority, ("", "", ""), ("", "", ""), "")))
        .collect();
    let stats = pods
        .iter()
        .zip(rows)
        .map(|(p, (_, _, processes))| PodStats {
            uid: p.metadata.uid.clone(),
            process_count: Some(processes),
            ..PodStats::default()
        })
        .collect();
    (pods, stats)
}

impl Manager {
    fn pid_pressure(&self) -> bool {
        self.state.has(PressureCondition::PidPressure)
    }
}

/// Ported from upstream TestPIDPressure.
#[test]
fn pid_pressure() {
    let (pods, stats) = pid_pods();
    let evict = "low-priority-high-usage";
    let mut m = Manager::new(
        config(vec![
            threshold(Signal::PidAvailable, "1200", 0, None),
            threshold(Signal::PidAvailable, "1500", 2, None),
        ]),
        pid_summary(2000, 300, &stats),
    );
    let burstable = build(&make(
        "burst-admit",
        DEFAULT,
        ("100m", "100Mi", ""),
        ("200m", "200Mi", ""),
        "0Gi",
    ));

    m.synchronize(&pods);
    assert!(!m.pid_pressure());
    assert!(m.admits(&burstable));

    // The soft threshold (1300 available < 1500) before its grace period: pressure only.
    m.step(1);
    m.summary = pid_summary(2000, 700, &stats);
    m.synchronize(&pods);
    assert!(m.pid_pressure());
    assert_eq!(m.killed_name(), None);
    // Under PID pressure no pod but a critical one is admitted.
    assert!(!m.admits(&burstable));

    // Past the grace period: the lowest priority, then the most processes.
    m.step(3);
    m.synchronize(&pods);
    let e = m.take_killed().expect("evicted");
    assert_eq!((e.pod_uid.as_str(), e.grace_period_override), (evict, 5));

    m.step(20);
    m.summary = pid_summary(2000, 300, &stats);
    m.synchronize(&pods);
    assert!(!m.pid_pressure());

    // The hard threshold (300 available < 1200): at once, no grace.
    m.step(1);
    m.summary = pid_summary(2000, 1700, &stats);
    m.synchronize(&pods);
    assert!(m.pid_pressure());
    let e = m.take_killed().expect("evicted");
    assert_eq!((e.pod_uid.as_str(), e.grace_period_override), (evict, 0));

    // Relief, held by the transition period, then cleared.
    m.step(1);
    m.summary = pid_summary(2000, 300, &stats);
    m.synchronize(&pods);
    assert!(m.pid_pressure());
    assert_eq!(m.killed_name(), None);
    m.step(5);
    m.synchronize(&pods);
    assert!(!m.pid_pressure());
    assert!(m.admits(&burstable));
}

/// Ported from upstream TestPIDPressure_VerifyPodStatus.
#[test]
fn pid_pressure_verify_pod_status() {
    let (pods, stats) = pid_pods();
    let mut m = Manager::new(
        config(vec![threshold(Signal::PidAvailable, "1200", 0, None)]),
        pid_summary(2000, 1500, &stats),
    );
    m.synchronize(&pods);
    assert!(m.pid_pressure());
    let e = m.take_killed().expect("a pod is evicted");
    let message = "The node was low on resource: pids. Threshold quantity: 1200, available: 500. ";
    assert_eq!((e.reason, e.message.as_str()), ("Evicted", message));
    assert_eq!(
        e.condition.as_ref().map(|c| c.type_),
        Some("DisruptionTarget")
    );
}
