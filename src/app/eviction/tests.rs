//! The manager's cycle against fake statistics, the in-memory runtime and a fake clock.

use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::adapters::fake::runtime::FakeRuntime;
use crate::adapters::fake::{FakeCgroupManager, FakeClock, FakeMemoryNotifier, FakeNodeStats};
use crate::domain::cgroup::CgroupDriver;
use crate::domain::eviction::parse_threshold_config;
use crate::domain::eviction::signals::FsStats;
use crate::domain::kuberuntime::dns::ResolvConf;
use crate::domain::status::api_pod_status;
use crate::ports::node_stats::{CgroupStats, FilesystemInfo};

const GI: u64 = 1 << 30;
const IMAGE: &str = "docker.io/library/busybox:1.36";
const UNUSED: &str = "docker.io/library/unused:1";
/// A sandbox image the runtime holds, not the runtime's own.
const SANDBOX: &str = "registry.k8s.io/pause:3.6";

struct World {
    manager: EvictionManager,
    stats: Arc<FakeNodeStats>,
    notifier: Arc<FakeMemoryNotifier>,
    runtime: Arc<FakeRuntime>,
    orders: mpsc::Receiver<Eviction>,
    conditions: watch::Receiver<Vec<PressureCondition>>,
    _dir: tempfile::TempDir,
}

fn pod(name: &str, priority: i32) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"priority": priority, "containers": [{"name": "app", "image": IMAGE}]}
    }))
    .unwrap_or_else(|e| panic!("pod: {e}"))
}

fn world(hard: &[(&str, &str)]) -> World {
    world_with(hard, &[])
}

/// [`world`] with rkubelet's `flags`; the runtime also holds [`SANDBOX`].
fn world_with(hard: &[(&str, &str)], flags: &[&str]) -> World {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let clock = Arc::new(FakeClock::new(1_700_000_000_000_000_000));
    let runtime = Arc::new(FakeRuntime::with_clock(clock.clone()));
    runtime.add_image(IMAGE);
    runtime.add_image(UNUSED);
    runtime.add_image(SANDBOX);
    let requests = RequestContext {
        pod_logs_dir: dir.path().join("logs"),
        root_dir: dir.path().join("root"),
        host_dns: ResolvConf::default(),
        cluster_dns: Vec::new(),
        cluster_domain: String::new(),
        cpu_cfs_quota: true,
        cpu_cfs_quota_period_us: 100_000,
        memory_capacity_bytes: 8 * GI,
        hugepage_sizes: Vec::new(),
        security: Default::default(),
    };
    let node = crate::app::test_support::resolved(flags).node;
    let containers = Arc::new(ContainerManager::new(
        Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs)),
        node.cgroup_tree.clone(),
        node.node.clone(),
    ));
    let stats = Arc::new(FakeNodeStats::new());
    let notifier = Arc::new(FakeMemoryNotifier::new());
    let store = PodStatusStore::new();
    for p in [pod("low", 0), pod("high", 1000)] {
        let status = api_pod_status(&p, &Default::default(), &Default::default(), "fake");
        store.set(&p, status);
    }
    let hard: BTreeMap<String, String> = hard
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let thresholds = parse_threshold_config(
        &["pods".to_owned()],
        &hard,
        &BTreeMap::new(),
        &BTreeMap::new(),
        &BTreeMap::new(),
    )
    .unwrap_or_else(|e| panic!("thresholds: {e}"));
    let config = EvictionConfig {
        thresholds,
        pressure_transition_period_nanos: 300_000_000_000,
        max_pod_grace_period_seconds: 0,
        local_storage_capacity_isolation: true,
    };
    let observer = Arc::new(Observer {
        stats: stats.clone(),
        runtime: runtime.clone(),
        tree: containers.tree().cloned(),
        memory_capacity_bytes: requests.memory_capacity_bytes,
        requests,
    });
    let images = Arc::new(ImageGc::new(
        runtime.clone(),
        store.clone(),
        clock.clone(),
        node.eviction.image_gc,
        node.eviction.pod_sandbox_image.clone(),
    ));
    let (orders_tx, orders) = mpsc::channel(4);
    let (conditions_tx, conditions) = watch::channel(Vec::new());
    let manager = EvictionManager::new(
        config,
        node.eviction.clone(),
        observer,
        images,
        runtime.clone(),
        notifier.clone(),
        store,
        clock,
        orders_tx,
        conditions_tx,
    );
    World {
        manager,
        stats,
        notifier,
        runtime,
        orders,
        conditions,
        _dir: dir,
    }
}

fn root_memory(stats: &FakeNodeStats, working_set: u64, inactive_file: u64) {
    stats.set_cgroup(
        &CgroupName::root(),
        CgroupStats {
            memory_usage_bytes: working_set + inactive_file,
            inactive_file_bytes: inactive_file,
            memory_limit_bytes: None,
            tasks: None,
            ..CgroupStats::default()
        },
    );
}

fn fs(available: u64) -> FilesystemInfo {
    FilesystemInfo {
        stats: FsStats {
            capacity_bytes: 100 * GI,
            available_bytes: available,
            inodes: None,
            inodes_free: None,
        },
        device: 1,
        used: crate::domain::eviction::signals::FsUsage::default(),
    }
}

#[tokio::test]
async fn memory_pressure_publishes_the_condition_arms_the_kernel_and_evicts_the_lower_priority_pod()
{
    let mut w = world(&[("memory.available", "1Gi")]);
    w.stats.set_filesystem(Path::new("/"), vec![fs(50 * GI)]);
    // 8Gi capacity, 7.5Gi working set: 512Mi available, under 1Gi. Page cache aside.
    root_memory(&w.stats, 7 * GI + GI / 2, 2 * GI);
    let outcome = w.manager.cycle().await;
    let CycleOutcome::Evicted(evicted) = outcome else {
        panic!("no eviction: {outcome:?}");
    };
    assert_eq!(evicted.len(), 1);
    assert_eq!(evicted[0].pod_uid, "uid-low");
    assert!(
        evicted[0]
            .message
            .starts_with("The node was low on resource: memory. Threshold quantity: 1Gi"),
        "{}",
        evicted[0].message
    );
    let order = w.orders.try_recv().unwrap_or_else(|e| panic!("order: {e}"));
    assert_eq!(order.pod_uid, "uid-low");
    assert_eq!(
        *w.conditions.borrow(),
        vec![PressureCondition::MemoryPressure]
    );
    // The kernel is told the usage at which the root's working set meets the threshold:
    // capacity − 1Gi + the inactive file pages.
    let armed = w.notifier.armed();
    assert_eq!(armed, vec![(CgroupName::root(), 8 * GI - GI + 2 * GI)]);
}

#[tokio::test]
async fn page_cache_is_not_pressure() {
    let mut w = world(&[("memory.available", "1Gi")]);
    w.stats.set_filesystem(Path::new("/"), vec![fs(50 * GI)]);
    // 6Gi of the 8Gi are inactive file pages: 7Gi used by the kernel's count, 1Gi working set.
    root_memory(&w.stats, GI, 6 * GI);
    assert_eq!(w.manager.cycle().await, CycleOutcome::NoEviction);
    assert!(w.conditions.borrow().is_empty());
    assert!(w.orders.try_recv().is_err());
}

#[tokio::test]
async fn disk_pressure_reclaims_unused_images_before_evicting() {
    let mut w = world(&[("nodefs.available", "10Gi")]);
    root_memory(&w.stats, GI, 0);
    // 5Gi free before reclaim, 20Gi after the unused image went.
    w.stats
        .set_filesystem(Path::new("/"), vec![fs(5 * GI), fs(20 * GI)]);
    assert_eq!(w.manager.cycle().await, CycleOutcome::NoEviction);
    assert_eq!(
        *w.conditions.borrow(),
        vec![PressureCondition::DiskPressure]
    );
    let images = w.runtime.image_names();
    assert!(
        images.contains(&IMAGE.to_owned()),
        "a pod's image stays: {images:?}"
    );
    assert!(
        !images.contains(&UNUSED.to_owned()),
        "the unused image went: {images:?}"
    );
    assert!(w.orders.try_recv().is_err(), "reclaim was enough");
}

#[tokio::test]
async fn reclaim_keeps_the_pod_infra_container_image_as_upstream_does() {
    let removed_after = |flags: &[&str]| {
        let mut w = world_with(&[("nodefs.available", "10Gi")], flags);
        root_memory(&w.stats, GI, 0);
        w.stats
            .set_filesystem(Path::new("/"), vec![fs(5 * GI), fs(20 * GI)]);
        let runtime = w.runtime.clone();
        async move {
            assert_eq!(w.manager.cycle().await, CycleOutcome::NoEviction);
            runtime.image_names()
        }
    };
    let images = removed_after(&["--pod-infra-container-image=registry.k8s.io/pause:3.6"]).await;
    assert!(images.contains(&SANDBOX.to_owned()), "{images:?}");
    assert!(!images.contains(&UNUSED.to_owned()), "{images:?}");
    // Without the flag upstream's default, pause:3.9, is the one kept.
    let images = removed_after(&[]).await;
    assert!(!images.contains(&SANDBOX.to_owned()), "{images:?}");
}

#[tokio::test]
async fn disk_pressure_evicts_when_reclaim_is_not_enough() {
    let mut w = world(&[("nodefs.available", "10Gi")]);
    root_memory(&w.stats, GI, 0);
    w.stats.set_filesystem(Path::new("/"), vec![fs(5 * GI)]);
    let CycleOutcome::Evicted(evicted) = w.manager.cycle().await else {
        panic!("no eviction");
    };
    assert!(evicted[0]
        .message
        .starts_with("The node was low on resource: ephemeral-storage."));
    assert!(w.orders.try_recv().is_ok());
}
