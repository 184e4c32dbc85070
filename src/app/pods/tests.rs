//! The sync and the loop against the in-memory runtime and a fake clock.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::sync::{sync_pod, SyncContext};
use super::terminate::terminate_pod;
use super::*;
use crate::adapters::fake::runtime::FakeRuntime;
use crate::adapters::fake::{FakeCgroupManager, FakeClock};
use crate::app::container_manager::ContainerManager;
use crate::domain::cgroup::CgroupDriver;
use crate::domain::kuberuntime::dns::ResolvConf;
use crate::domain::kuberuntime::requests::RequestContext;
use crate::domain::kuberuntime::runtime::ContainerState;
use crate::domain::kuberuntime::runtime::{ContainerFilter, SandboxFilter};
use crate::domain::pod::{Container, Pod, RestartPolicy};
use crate::domain::status::{api_pod_status, ApiContainerState};
use crate::ports::pod_source::PodSourceError;
use crate::ports::runtime::RuntimeService;

pub(super) const IMAGE: &str = "docker.io/library/busybox:1.36";

pub(super) struct World {
    pub(super) runtime: Arc<FakeRuntime>,
    pub(super) cgroups: Arc<FakeCgroupManager>,
    pub(super) clock: Arc<FakeClock>,
    pub(super) ctx: Arc<SyncContext>,
    /// The pod folders, logs and volumes, in memory (under `/node`).
    pub(super) files: crate::adapters::fake::FakePodFiles,
}

pub(super) fn world() -> World {
    let dir = std::path::Path::new("/node");
    let clock = Arc::new(FakeClock::new(1_700_000_000_000_000_000));
    // The runtime records exit times from the fake clock: crash-loop back-off counts
    // from them.
    let runtime = Arc::new(FakeRuntime::with_clock(clock.clone()));
    runtime.add_image(IMAGE);
    let requests = RequestContext {
        pod_logs_dir: dir.join("logs"),
        root_dir: dir.join("root"),
        host_dns: ResolvConf::default(),
        cluster_dns: Vec::new(),
        cluster_domain: String::new(),
        cpu_cfs_quota: true,
        cpu_cfs_quota_period_us: 100_000,
        memory_capacity_bytes: 1 << 30,
        hugepage_sizes: Vec::new(),
        security: Default::default(),
    };
    let cgroups = Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs));
    let files = crate::adapters::fake::FakePodFiles::default();
    let node = crate::app::test_support::resolved(&[]).node;
    let containers = Arc::new(ContainerManager::new(
        cgroups.clone(),
        node.cgroup_tree,
        node.node,
    ));
    let ctx = Arc::new(
        SyncContext::new(
            runtime.clone(),
            runtime.clone(),
            clock.clone(),
            requests,
            "fake".into(),
            containers,
        )
        .with_volumes(Arc::new(
            crate::app::pods::volume_manager::VolumeManager::standalone(
                clock.clone(),
                Arc::new(files.clone()),
            ),
        )),
    );
    World {
        runtime,
        cgroups,
        clock,
        ctx,
        files,
    }
}

pub(super) fn pod(uid: &str, policy: RestartPolicy, image: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = format!("web-{uid}");
    pod.metadata.namespace = "default".into();
    pod.metadata.uid = uid.into();
    pod.spec.restart_policy = policy;
    pod.spec.termination_grace_period_seconds = Some(3);
    pod.spec.dns_policy = "Default".into();
    let mut app: Container = serde_json::from_value(serde_json::json!({"name": "app"}))
        .unwrap_or_else(|e| panic!("container: {e}"));
    app.image = image.into();
    pod.spec.containers = vec![app];
    pod
}

async fn containers(
    runtime: &FakeRuntime,
) -> Vec<crate::domain::kuberuntime::runtime::ContainerStatus> {
    let mut list: Vec<_> = runtime
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.status)
        .collect();
    list.sort_by_key(|c| c.created_at_nanos);
    list
}

fn newest_running(list: &[crate::domain::kuberuntime::runtime::ContainerStatus]) -> Option<String> {
    list.iter()
        .rev()
        .find(|c| c.state == ContainerState::Running)
        .map(|c| c.id.clone())
}

#[tokio::test]
async fn a_new_pod_gets_a_sandbox_then_its_container_and_a_second_sync_does_nothing() {
    let w = world();
    let p = pod("u1", RestartPolicy::Always, IMAGE);
    let first = sync_pod(&w.ctx, &p).await;
    assert!(first.waiting.is_empty(), "{:?}", first.waiting);
    let journal = w.runtime.journal();
    assert_eq!(journal[0], "RunPodSandbox web-u1");
    assert_eq!(journal[1], "CreateContainer app");
    assert!(journal[2].starts_with("StartContainer "));
    // The first sync's status already shows what it started: one write, not two.
    let status = api_pod_status(&p, &first.runtime, &first.waiting, "fake");
    assert_eq!(status.phase, "Running");
    assert!(status.container_statuses[0]
        .container_id
        .starts_with("fake://"));
    assert!(matches!(
        status.container_statuses[0].state,
        ApiContainerState::Running(_)
    ));

    let second = sync_pod(&w.ctx, &p).await;
    assert_eq!(w.runtime.journal().len(), 3, "nothing more to do");
    let status = api_pod_status(&p, &second.runtime, &second.waiting, "fake");
    assert_eq!(status.phase, "Running");
    assert!(matches!(
        status.container_statuses[0].state,
        ApiContainerState::Running(_)
    ));
}

#[tokio::test]
async fn a_crashing_container_restarts_with_growing_back_off() {
    let w = world();
    let p = pod("u2", RestartPolicy::Always, IMAGE);
    sync_pod(&w.ctx, &p).await;
    let first = newest_running(&containers(&w.runtime).await).unwrap_or_default();
    // What the runtime would have written: a log per instance, the first one rotated.
    let logs = w.ctx.requests.pod_logs_dir.join("default_web-u2_u2/app");
    for name in ["0.log", "0.log.20261124-170000.gz", "1.log", "2.log"] {
        w.files.put_file(logs.join(name), "x");
    }

    // First failure: restarted at once (restart count 1).
    w.runtime.exit_container(&first, 1);
    let outcome = sync_pod(&w.ctx, &p).await;
    assert!(outcome.waiting.is_empty());
    let list = containers(&w.runtime).await;
    let second = newest_running(&list).unwrap_or_default();
    assert_eq!(list.last().map(|c| c.attempt), Some(1));

    // Second failure: held back for 10 s.
    w.runtime.exit_container(&second, 1);
    let held = sync_pod(&w.ctx, &p).await;
    assert_eq!(held.waiting["app"].reason, "CrashLoopBackOff");
    assert!(held.waiting["app"].message.contains("back-off 10s"));
    assert_eq!(held.retry_after, Some(Duration::from_secs(10)));
    w.clock.advance(Duration::from_secs(10));
    assert!(sync_pod(&w.ctx, &p).await.waiting.is_empty());
    let list = containers(&w.runtime).await;
    assert_eq!(list.last().map(|c| c.attempt), Some(2));

    // Third failure: 20 s now.
    let third = newest_running(&list).unwrap_or_default();
    w.runtime.exit_container(&third, 1);
    let held = sync_pod(&w.ctx, &p).await;
    assert_eq!(held.retry_after, Some(Duration::from_secs(20)));
    // Dead instances beyond the newest one are removed.
    let exited = containers(&w.runtime)
        .await
        .into_iter()
        .filter(|c| c.state == ContainerState::Exited)
        .count();
    assert_eq!(exited, 1);
    // Their logs go with them; the newest dead one's stays for `kubectl logs -p`.
    assert_eq!(w.files.names(&logs), ["2.log"]);
}

/// The back-off is derived from the runtime's record: a kubelet started afresh (no
/// memory) holds the crash-looping container just as long as the one that ran it.
#[tokio::test]
async fn a_restarted_kubelet_keeps_the_crash_loop_back_off() {
    let w = world();
    let p = pod("u7", RestartPolicy::Always, IMAGE);
    sync_pod(&w.ctx, &p).await;
    for _ in 0..3 {
        let id = newest_running(&containers(&w.runtime).await).unwrap_or_default();
        w.runtime.exit_container(&id, 1);
        w.clock.advance(Duration::from_secs(60));
        assert!(sync_pod(&w.ctx, &p).await.waiting.is_empty());
    }
    // The fourth instance (step 3) fails now: 40 s.
    let id = newest_running(&containers(&w.runtime).await).unwrap_or_default();
    w.runtime.exit_container(&id, 1);
    w.clock.advance(Duration::from_secs(15));
    let running = sync_pod(&w.ctx, &p).await;
    assert_eq!(running.retry_after, Some(Duration::from_secs(25)));

    let fresh = SyncContext::new(
        w.runtime.clone(),
        w.runtime.clone(),
        w.clock.clone(),
        w.ctx.requests.clone(),
        "fake".into(),
        w.ctx.containers.clone(),
    )
    .with_volumes(w.ctx.volumes.clone());
    let restarted = sync_pod(&fresh, &p).await;
    assert_eq!(restarted.waiting["app"].reason, "CrashLoopBackOff");
    assert_eq!(
        restarted.waiting["app"].message,
        "back-off 40s restarting failed container=app pod=web-u7_default(u7)"
    );
    assert_eq!(restarted.retry_after, Some(Duration::from_secs(25)));
    assert_eq!(creates(&w), 4, "neither kubelet restarted it early");
}

#[tokio::test]
async fn restart_policies_never_and_on_failure_are_honoured() {
    let w = world();
    let never = pod("u3", RestartPolicy::Never, IMAGE);
    sync_pod(&w.ctx, &never).await;
    let id = newest_running(&containers(&w.runtime).await).unwrap_or_default();
    w.runtime.exit_container(&id, 1);
    let outcome = sync_pod(&w.ctx, &never).await;
    assert_eq!(creates(&w), 1);
    assert_eq!(
        api_pod_status(&never, &outcome.runtime, &outcome.waiting, "fake").phase,
        "Failed"
    );

    let w = world();
    let on_failure = pod("u4", RestartPolicy::OnFailure, IMAGE);
    sync_pod(&w.ctx, &on_failure).await;
    let id = newest_running(&containers(&w.runtime).await).unwrap_or_default();
    w.runtime.exit_container(&id, 0);
    sync_pod(&w.ctx, &on_failure).await;
    let outcome = sync_pod(&w.ctx, &on_failure).await;
    assert_eq!(creates(&w), 1);
    assert_eq!(
        api_pod_status(&on_failure, &outcome.runtime, &outcome.waiting, "fake").phase,
        "Succeeded"
    );
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_waits_with_upstreams_reasons() {
    let w = world();
    w.runtime.fail_pulls(Some("no registry"));
    let p = pod("u5", RestartPolicy::Always, "example.com/missing:1");
    let first = sync_pod(&w.ctx, &p).await;
    assert_eq!(first.waiting["app"].reason, "ErrImagePull");
    assert!(first.waiting["app"].message.contains("no registry"));
    let again = sync_pod(&w.ctx, &p).await;
    assert_eq!(again.waiting["app"].reason, "ImagePullBackOff");
    assert!(containers(&w.runtime).await.is_empty());
    let pulls = |w: &World| {
        w.runtime
            .journal()
            .iter()
            .filter(|c| c.starts_with("PullImage"))
            .count()
    };
    assert_eq!(pulls(&w), 1, "no pull while backing off");

    w.runtime.fail_pulls(None);
    w.clock.advance(Duration::from_secs(10));
    assert!(sync_pod(&w.ctx, &p).await.waiting.is_empty());
    assert_eq!(pulls(&w), 2);
    assert!(newest_running(&containers(&w.runtime).await).is_some());
}

#[tokio::test]
async fn termination_stops_with_the_grace_period_then_removes_everything() {
    let w = world();
    let p = pod("u6", RestartPolicy::Always, IMAGE);
    sync_pod(&w.ctx, &p).await;
    assert!(terminate_pod(&w.ctx, "u6", Some(&p)).await);
    let journal = w.runtime.journal();
    let stop = journal.iter().position(|c| c.starts_with("StopContainer"));
    let remove = journal
        .iter()
        .position(|c| c.starts_with("RemovePodSandbox"));
    assert!(journal
        .iter()
        .any(|c| c.starts_with("StopContainer") && c.ends_with(" 3")));
    assert!(stop < remove);
    assert!(containers(&w.runtime).await.is_empty());
    let sandboxes = w
        .runtime
        .list_pod_sandboxes(&SandboxFilter::default())
        .await
        .unwrap_or_default();
    assert!(sandboxes.is_empty());
}

/// A pod whose spec is gone (deleted while rkubelet was down) still runs its preStop
/// hook and stops with its own grace period: both come back from the container's
/// annotations, as upstream's `restoreSpecsFromContainerLabels`.
#[tokio::test]
async fn a_pod_without_its_spec_stops_with_the_hook_and_grace_its_containers_recorded() {
    use crate::domain::probe::spec::{ExecAction, Lifecycle, LifecycleHandler};
    let w = world();
    let mut p = pod("u7", RestartPolicy::Always, IMAGE);
    p.spec.termination_grace_period_seconds = Some(7);
    p.spec.containers[0].lifecycle = Some(Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: vec!["sh".into(), "-c".into(), "echo bye".into()],
            }),
            ..LifecycleHandler::default()
        }),
        ..Lifecycle::default()
    });
    sync_pod(&w.ctx, &p).await;
    assert!(terminate_pod(&w.ctx, "u7", None).await);
    let journal = w.runtime.journal();
    let hook = journal
        .iter()
        .position(|c| c.starts_with("ExecSync") && c.ends_with("echo bye"));
    let stop = journal
        .iter()
        .position(|c| c.starts_with("StopContainer") && c.ends_with(" 7"));
    assert!(
        hook.is_some() && stop.is_some() && hook < stop,
        "{journal:?}"
    );
}

/// A source fed by the test.
struct ChannelSource(mpsc::Receiver<PodSetUpdate>);

#[async_trait]
impl PodSource for ChannelSource {
    async fn next(&mut self) -> Option<PodSetUpdate> {
        self.0.recv().await
    }

    async fn read_once(&self) -> Result<PodSetUpdate, PodSourceError> {
        Err(PodSourceError::Read {
            origin: "the test's channel".into(),
            source: "a channel is only read in order".into(),
        })
    }
}

fn set(pods: Vec<Pod>) -> PodSetUpdate {
    PodSetUpdate {
        source: "file".into(),
        pods,
        errors: Vec::new(),
    }
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting until {what}");
}

/// The `CreateContainer` calls the runtime has seen.
fn creates(w: &World) -> usize {
    w.runtime
        .journal()
        .iter()
        .filter(|c| c.starts_with("CreateContainer"))
        .count()
}

fn phase_of(store: &PodStatusStore, name: &str) -> Option<String> {
    store.pod_list()["items"]
        .as_array()?
        .iter()
        .find(|p| p["metadata"]["name"] == name)
        .and_then(|p| p["status"]["phase"].as_str().map(str::to_owned))
}

#[tokio::test(start_paused = true)]
async fn the_loop_runs_added_pods_terminates_removed_ones_and_cleans_up_orphans() {
    let w = world();
    // A pod left in the runtime by an earlier run that no source wants any more.
    let orphan = pod("orphan", RestartPolicy::Always, IMAGE);
    sync_pod(&w.ctx, &orphan).await;
    // A folder left by a kubelet killed before the sandbox of its pod was made.
    let left =
        std::path::Path::new("/node/root/pods/left-behind/volumes/kubernetes.io~empty-dir/m");
    crate::ports::pod_files::PodFiles::mount_tmpfs(&w.files, left, None, 0o777)
        .unwrap_or_else(|e| panic!("mount: {e}"));

    let store = PodStatusStore::new();
    let (tx, rx) = mpsc::channel(4);
    let (stop_tx, stop_rx) = watch::channel(false);
    let pod_loop = PodLoop::new(w.ctx.clone(), store.clone(), LoopSettings::default());
    let task = tokio::spawn(pod_loop.run(vec![Box::new(ChannelSource(rx))], stop_rx));

    tx.send(set(vec![pod("a", RestartPolicy::Always, IMAGE)]))
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    wait_until("pod a runs", || {
        phase_of(&store, "web-a").as_deref() == Some("Running")
    })
    .await;

    let runtime = w.runtime.clone();
    let sandbox_names = move || {
        let runtime = runtime.clone();
        async move {
            let mut names: Vec<String> = runtime
                .list_pod_sandboxes(&SandboxFilter::default())
                .await
                .unwrap_or_default()
                .into_iter()
                .map(|s| s.name)
                .collect();
            names.sort();
            names
        }
    };
    for _ in 0..50 {
        if sandbox_names().await == ["web-a"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(sandbox_names().await, ["web-a"], "the orphan is removed");
    // The folder of a pod neither wanted nor in the runtime went, its mount first.
    assert_eq!(w.files.entry("/node/root/pods/left-behind"), None);
    assert!(w.files.mounts().is_empty(), "{:?}", w.files.mounts());
    let pod_cgroups = |w: &World| {
        w.cgroups
            .names()
            .iter()
            .map(|n| n.to_cgroupfs())
            .filter(|n| n.contains("/pod"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        pod_cgroups(&w),
        ["/kubepods/besteffort/poda"],
        "the orphan's cgroup went with it"
    );

    tx.send(set(vec![]))
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    for _ in 0..50 {
        if sandbox_names().await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(sandbox_names().await.is_empty(), "the removed pod is gone");
    wait_until("status forgotten", || phase_of(&store, "web-a").is_none()).await;
    assert!(
        pod_cgroups(&w).is_empty(),
        "the removed pod's cgroup is gone"
    );

    let _ = stop_tx.send(true);
    task.await.unwrap_or_else(|e| panic!("loop task: {e}"));
}

#[tokio::test(start_paused = true)]
async fn a_relist_that_sees_only_the_pods_own_start_does_not_sync_it_again() {
    let w = world();
    let store = PodStatusStore::new();
    let (tx, rx) = mpsc::channel(4);
    let (stop_tx, stop_rx) = watch::channel(false);
    let task = tokio::spawn(
        PodLoop::new(w.ctx.clone(), store.clone(), LoopSettings::default())
            .run(vec![Box::new(ChannelSource(rx))], stop_rx),
    );
    tx.send(set(vec![pod("own", RestartPolicy::Always, IMAGE)]))
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    wait_until("the container is running", || {
        phase_of(&store, "web-own").as_deref() == Some("Running")
    })
    .await;
    // Relists (every second) see the new sandbox and container: the sync that made them
    // saw them too, so the pod is read once (by that sync), not again.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(w.runtime.pod_reads("own"), 1);

    // A change the pod's sync did not make (its container exits) is synced.
    let first = newest_running(&containers(&w.runtime).await).unwrap_or_default();
    w.runtime.exit_container(&first, 1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(w.runtime.pod_reads("own") > 1, "the exit is synced");
    let _ = stop_tx.send(true);
    task.await.unwrap_or_else(|e| panic!("loop task: {e}"));
}

#[tokio::test(start_paused = true)]
async fn container_events_wake_the_pod_without_waiting_for_a_relist() {
    let w = world();
    w.runtime.stream_events();
    let store = PodStatusStore::new();
    let (tx, rx) = mpsc::channel(4);
    let (stop_tx, stop_rx) = watch::channel(false);
    // A relist period far beyond the test: only events can wake the worker.
    let settings = LoopSettings {
        relist_period: Duration::from_secs(3600),
        ..LoopSettings::default()
    };
    let task = tokio::spawn(
        PodLoop::new(w.ctx.clone(), store.clone(), settings)
            .run(vec![Box::new(ChannelSource(rx))], stop_rx),
    );
    tx.send(set(vec![pod("ev", RestartPolicy::Always, IMAGE)]))
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    wait_until("the container is running", || {
        phase_of(&store, "web-ev").as_deref() == Some("Running")
    })
    .await;

    let first = newest_running(&containers(&w.runtime).await).unwrap_or_default();
    w.runtime.exit_container(&first, 1);
    let runtime = w.runtime.clone();
    let mut restarted = false;
    for _ in 0..50 {
        let list = containers(&runtime).await;
        if list
            .iter()
            .any(|c| c.attempt == 1 && c.state == ContainerState::Running)
        {
            restarted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        restarted,
        "the exit event led to a restart within 5 s, long before any relist"
    );
    let _ = stop_tx.send(true);
    task.await.unwrap_or_else(|e| panic!("loop task: {e}"));
}

/// With `EventedPLEG` and a live event stream the relist is upstream's evented one: its
/// health threshold ten minutes, so five without a relist are healthy; without the gate,
/// the generic three minutes apply.
#[tokio::test(start_paused = true)]
async fn the_evented_pleg_relists_rarely_while_events_stream() {
    for (gate, healthy) in [(true, true), (false, false)] {
        let w = world();
        w.runtime.stream_events();
        let store = PodStatusStore::new();
        let (tx, rx) = mpsc::channel(4);
        let (stop_tx, stop_rx) = watch::channel(false);
        let settings = LoopSettings {
            evented_pleg: gate,
            ..LoopSettings::default()
        };
        let pod_loop = PodLoop::new(w.ctx.clone(), store.clone(), settings);
        let health = pod_loop.pleg_health();
        let task = tokio::spawn(pod_loop.run(vec![Box::new(ChannelSource(rx))], stop_rx));
        tx.send(set(vec![pod("ev", RestartPolicy::Always, IMAGE)]))
            .await
            .unwrap_or_else(|e| panic!("send: {e}"));
        wait_until("the container is running", || {
            phase_of(&store, "web-ev").as_deref() == Some("Running")
        })
        .await;
        // The relists so far were within the first seconds; none for five minutes now.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let _ = stop_tx.send(true);
        task.await.unwrap_or_else(|e| panic!("loop task: {e}"));
        w.clock.advance(Duration::from_secs(5 * 60));
        assert_eq!(
            health.check().is_ok(),
            healthy,
            "gate {gate}: {:?}",
            health.check()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn run_once_starts_the_first_set_and_reports_pods_that_never_run() {
    let w = world();
    w.runtime.fail_pulls(Some("no registry"));
    let (tx, rx) = mpsc::channel(4);
    tx.send(set(vec![
        pod("good", RestartPolicy::Always, IMAGE),
        pod("bad", RestartPolicy::Always, "example.com/missing:1"),
    ]))
    .await
    .unwrap_or_else(|e| panic!("send: {e}"));
    let results = run_once::run_once(w.ctx.clone(), vec![Box::new(ChannelSource(rx))]).await;
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].pod, "web-bad_default");
    let why = results[0].failure.clone().unwrap_or_default();
    assert!(
        why.contains("app: ImagePullBackOff") || why.contains("app: ErrImagePull"),
        "{why}"
    );
    assert_eq!(results[1].pod, "web-good_default");
    assert_eq!(results[1].failure, None);
}

#[tokio::test]
async fn a_pods_cgroup_exists_before_its_sandbox_and_goes_only_after_its_containers() {
    let w = world();
    let mut cgroups = crate::ports::cgroup::MockCgroupManager::new();
    let runtime = w.runtime.clone();
    cgroups.expect_driver().return_const(CgroupDriver::Cgroupfs);
    cgroups
        .expect_driver_name()
        .returning(|name| name.to_cgroupfs());
    cgroups.expect_exists().returning(|_| Ok(false));
    let seen = runtime.clone();
    cgroups
        .expect_create()
        .times(1)
        .returning(move |name, resources| {
            // The sandbox has not been asked for yet.
            assert!(seen.journal().is_empty(), "{:?}", seen.journal());
            assert_eq!(name.to_cgroupfs(), "/kubepods/besteffort/podorder");
            assert_eq!(resources.cpu_shares, Some(2));
            Ok(())
        });
    let seen = runtime.clone();
    cgroups.expect_destroy().returning(move |_| {
        let journal = seen.journal();
        let removed_all = journal
            .iter()
            .filter(|c| c.starts_with("RemoveContainer"))
            .count()
            == 1
            && journal.iter().any(|c| c.starts_with("RemovePodSandbox"));
        assert!(removed_all, "containers still there: {journal:?}");
        Ok(())
    });
    let resolved = crate::app::test_support::resolved(&[]);
    let containers = Arc::new(ContainerManager::new(
        Arc::new(cgroups),
        resolved.node.cgroup_tree.clone(),
        resolved.node.node.clone(),
    ));
    let ctx = SyncContext::new(
        w.runtime.clone(),
        w.runtime.clone(),
        w.clock.clone(),
        RequestContext::from_config(&resolved, ResolvConf::default()),
        "fake".into(),
        containers,
    )
    .with_volumes(w.ctx.volumes.clone());
    let p = pod("order", RestartPolicy::Always, IMAGE);
    sync_pod(&ctx, &p).await;
    assert_eq!(w.runtime.journal()[0], "RunPodSandbox web-order");
    // The sandbox was created under the pod's cgroup.
    assert!(terminate_pod(&ctx, "order", Some(&p)).await);
}

/// A pod that ran to completion stays done: once its dead container is garbage
/// collected (disk-pressure reclaim), the loop does not start it again.
#[tokio::test(start_paused = true)]
async fn a_finished_pod_is_not_started_again_when_its_dead_container_is_removed() {
    let w = world();
    let store = PodStatusStore::new();
    let (tx, rx) = mpsc::channel(4);
    let (stop_tx, stop_rx) = watch::channel(false);
    let pod_loop = PodLoop::new(w.ctx.clone(), store.clone(), LoopSettings::default());
    let task = tokio::spawn(pod_loop.run(vec![Box::new(ChannelSource(rx))], stop_rx));
    tx.send(set(vec![pod("done", RestartPolicy::Never, IMAGE)]))
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    wait_until("the pod runs", || {
        phase_of(&store, "web-done").as_deref() == Some("Running")
    })
    .await;
    let id = newest_running(&containers(&w.runtime).await).unwrap_or_default();
    w.runtime.exit_container(&id, 0);
    wait_until("the pod succeeds", || {
        phase_of(&store, "web-done").as_deref() == Some("Succeeded")
    })
    .await;
    w.runtime
        .remove_container(&id)
        .await
        .unwrap_or_else(|e| panic!("remove: {e}"));
    // Relists and resyncs go by (the clock is paused: this advances it).
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(creates(&w), 1, "the finished pod was started again");
    assert_eq!(phase_of(&store, "web-done").as_deref(), Some("Succeeded"));
    let _ = stop_tx.send(true);
    task.await.unwrap_or_else(|e| panic!("loop task: {e}"));
}

/// `activeDeadlineSeconds` (upstream's `TestActiveDeadlineHandler` through the sync): the
/// pod runs until its deadline, then is killed and ends `Failed` with `DeadlineExceeded`,
/// and is not started again.
#[tokio::test(start_paused = true)]
async fn a_pod_past_its_active_deadline_is_killed_and_failed() {
    let w = world();
    let store = PodStatusStore::new().with_clock(w.clock.clone());
    let (tx, rx) = mpsc::channel(4);
    let (stop_tx, stop_rx) = watch::channel(false);
    let pod_loop = PodLoop::new(w.ctx.clone(), store.clone(), LoopSettings::default());
    let task = tokio::spawn(pod_loop.run(vec![Box::new(ChannelSource(rx))], stop_rx));
    let mut bounded = pod("bounded", RestartPolicy::Always, IMAGE);
    bounded.spec.active_deadline_seconds = Some(30);
    tx.send(set(vec![bounded]))
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    wait_until("the pod runs", || {
        phase_of(&store, "web-bounded").as_deref() == Some("Running")
    })
    .await;
    // Resyncs go by within the deadline: the pod runs on.
    w.clock.advance(Duration::from_secs(29));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(phase_of(&store, "web-bounded").as_deref(), Some("Running"));
    w.clock.advance(Duration::from_secs(2));
    wait_until("the pod is failed past its deadline", || {
        phase_of(&store, "web-bounded").as_deref() == Some("Failed")
    })
    .await;
    let status = store.status_of("bounded").unwrap_or_default();
    assert_eq!(status.reason, "DeadlineExceeded");
    assert_eq!(
        status.message,
        "Pod was active on the node longer than the specified deadline"
    );
    assert_eq!(newest_running(&containers(&w.runtime).await), None);
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(creates(&w), 1, "the pod was started again");
    assert_eq!(phase_of(&store, "web-bounded").as_deref(), Some("Failed"));
    let _ = stop_tx.send(true);
    task.await.unwrap_or_else(|e| panic!("loop task: {e}"));
}

/// Must-show 8 at the CRI boundary: the pod's pull secrets reach `PullImage` as the
/// `AuthConfig` of the image's registry, each matching credential tried in turn (the
/// most specific first); an image of another registry is pulled anonymously.
#[tokio::test]
async fn pull_secrets_reach_pull_image_as_the_registrys_auth_config() {
    use crate::adapters::fake::{FakeObjects, FakePodFiles};
    use crate::app::pods::volume_manager::VolumeManager;
    use crate::domain::pod::LocalObjectReference;
    let clock = Arc::new(FakeClock::new(1_700_000_000_000_000_000));
    let runtime = Arc::new(FakeRuntime::with_clock(clock.clone()));
    let objects = FakeObjects::default();
    let config = r#"{"auths": {
        "registry.example.com": {"username": "bob", "password": "b"},
        "https://registry.example.com/v2/team": {"auth": "YWxpY2U6czNjcmV0"}}}"#;
    objects.put_secret(
        "default",
        "regcred",
        &[(".dockerconfigjson", config.as_bytes())],
    );
    objects.set_secret_type("default", "regcred", "kubernetes.io/dockerconfigjson");
    let node = crate::app::test_support::resolved(&[]).node;
    let manager = Arc::new(ContainerManager::new(
        Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs)),
        node.cgroup_tree,
        node.node,
    ));
    let volumes = VolumeManager::standalone(clock.clone(), Arc::new(FakePodFiles::default()))
        .with_api(Arc::new(objects));
    let ctx = SyncContext::new(
        runtime.clone(),
        runtime.clone(),
        clock.clone(),
        RequestContext::under_root(std::path::Path::new("/node")),
        "fake".into(),
        manager,
    )
    .with_volumes(Arc::new(volumes));
    runtime.pull_only_as(Some("bob"));
    let mut private = pod(
        "p1",
        RestartPolicy::Always,
        "registry.example.com/team/app:1",
    );
    private.spec.image_pull_secrets = vec![
        LocalObjectReference {
            name: "regcred".into(),
        },
        LocalObjectReference {
            name: "missing".into(),
        },
    ];
    sync_pod(&ctx, &private).await;
    let pulls = runtime.pull_auths();
    let users: Vec<(&str, &str)> = pulls
        .iter()
        .map(|(image, auth)| {
            let a = auth
                .as_ref()
                .unwrap_or_else(|| panic!("anonymous pull of {image}"));
            (a.username.as_str(), a.password.as_str())
        })
        .collect();
    assert_eq!(users, [("alice", "s3cret"), ("bob", "b")]);
    assert_eq!(
        containers(&runtime).await.len(),
        1,
        "started after bob's pull"
    );

    runtime.pull_only_as(None);
    let mut public = pod("p2", RestartPolicy::Always, "quay.io/org/tool:2");
    public.spec.image_pull_secrets = private.spec.image_pull_secrets.clone();
    sync_pod(&ctx, &public).await;
    let pulls = runtime.pull_auths();
    assert_eq!(pulls.last(), Some(&("quay.io/org/tool:2".to_owned(), None)));
}

/// A volume that cannot be set up holds the pod without a sandbox, and the sync counts
/// as failed: the worker backs off while it repeats (upstream's `FailedMount` retries).
#[tokio::test]
async fn a_failed_mount_holds_the_pod_and_fails_the_sync() {
    use crate::domain::pod::{HostPathVolume, Volume};
    let w = world();
    let mut held = pod("nofile", RestartPolicy::Always, IMAGE);
    held.spec.volumes = vec![Volume {
        name: "h".into(),
        host_path: Some(HostPathVolume {
            path: "/node/absent".into(),
            kind: "File".into(),
        }),
        ..Volume::default()
    }];
    let outcome = sync_pod(&w.ctx, &held).await;
    assert!(outcome.failed, "{outcome:?}");
    assert_eq!(
        outcome
            .waiting
            .values()
            .map(|w| w.reason.as_str())
            .collect::<Vec<_>>(),
        ["ContainerCreating"]
    );
    assert!(containers(&w.runtime).await.is_empty());
}

#[tokio::test]
async fn a_container_that_exits_at_once_reports_its_termination_message_in_the_first_status() {
    let w = world();
    let mut p = pod("u-msg", RestartPolicy::Never, IMAGE);
    p.spec.containers[0].termination_message_path = "/dev/termination-log".into();
    w.runtime.exit_at_start("app", 3);
    // What the process wrote before it ended, in its instance's message file.
    let file =
        crate::domain::kuberuntime::termination::message_file(&w.ctx.requests, "u-msg", "app", 0);
    w.files.put_file(&file, "gone fishing");

    let first = sync_pod(&w.ctx, &p).await;
    // The pod is terminal at once: this status is the one the API keeps.
    let status = api_pod_status(&p, &first.runtime, &first.waiting, "fake");
    assert_eq!(status.phase, "Failed");
    match &status.container_statuses[0].state {
        ApiContainerState::Terminated(t) => {
            assert_eq!(t.exit_code, 3);
            assert_eq!(t.message, "gone fishing");
        }
        other => panic!("not terminated: {other:?}"),
    }
}

/// A subpath is bound through the pod files port before its container is created, and
/// the runtime is given the bind, never `<volume>/<subPath>`; a bind refused (a link out
/// of the volume) holds the container with upstream's reason and message, and nothing
/// is created.
#[tokio::test]
async fn a_sub_path_is_bound_before_the_container_and_a_refused_one_holds_it() {
    use crate::domain::pod::{EmptyDirVolume, Volume, VolumeMount};
    let w = world();
    w.runtime.add_image(IMAGE);
    let mut p = pod("sub", RestartPolicy::Always, IMAGE);
    p.spec.volumes = vec![Volume {
        name: "v".into(),
        empty_dir: Some(EmptyDirVolume::default()),
        ..Volume::default()
    }];
    p.spec.containers[0].volume_mounts = vec![VolumeMount {
        name: "v".into(),
        mount_path: "/data".into(),
        sub_path: "evil".into(),
        ..VolumeMount::default()
    }];
    w.files.refuse_sub_paths();
    let outcome = sync_pod(&w.ctx, &p).await;
    let waiting = outcome
        .waiting
        .get("app")
        .map(|w| (w.reason.clone(), w.message.clone()));
    assert_eq!(
        waiting,
        Some((
            "CreateContainerConfigError".into(),
            "failed to prepare subPath for volumeMount \"v\" of container \"app\"".into()
        ))
    );
    assert!(containers(&w.runtime).await.is_empty());

    let w = world();
    w.runtime.add_image(IMAGE);
    sync_pod(&w.ctx, &p).await;
    let bound = w.files.bound();
    assert_eq!(bound.len(), 1);
    assert_eq!(bound[0].path, "evil");
    let created = containers(&w.runtime).await;
    assert_eq!(created.len(), 1);
    let host_paths = w.runtime.container_mounts(&created[0].id);
    assert!(
        host_paths.contains(&bound[0].target.display().to_string()),
        "{host_paths:?}"
    );
}

/// A container held by an error (here `InvalidImageName`) fails the sync, so the worker
/// backs off to upstream's 10 s instead of logging and eventing it every 2 s; a
/// back-off hold (crash loop, image pull) keeps its own wait.
#[tokio::test]
async fn a_container_held_by_an_error_fails_the_sync_so_the_worker_backs_off() {
    let w = world();
    let p = pod("bad-image", RestartPolicy::Always, "Not A Valid Image!");
    let outcome = sync_pod(&w.ctx, &p).await;
    assert_eq!(
        outcome.waiting.get("app").map(|w| w.reason.as_str()),
        Some("InvalidImageName")
    );
    assert!(outcome.failed, "{outcome:?}");
}

/// The pod's folders, its emptyDir (given to its `fsGroup`) and its `/etc/hosts` are
/// made through the pod files port before its containers; a host-network pod's hosts
/// file holds the node's.
#[tokio::test]
async fn a_pods_folders_volumes_and_hosts_file_are_made_through_the_port() {
    use crate::adapters::fake::FakeEntry;
    use crate::domain::pod::{EmptyDirVolume, PodSecurityContext, Volume};
    let w = world();
    let mut p = pod("files", RestartPolicy::Always, IMAGE);
    p.spec.volumes = vec![Volume {
        name: "cache".into(),
        empty_dir: Some(EmptyDirVolume::default()),
        ..Volume::default()
    }];
    p.spec.security_context = Some(PodSecurityContext {
        fs_group: Some(2000),
        ..PodSecurityContext::default()
    });
    w.files.put_file(
        "/node/root/pods/files/volumes/kubernetes.io~empty-dir/cache/old",
        "x",
    );
    sync_pod(&w.ctx, &p).await;
    assert_eq!(containers(&w.runtime).await.len(), 1);
    let pod_dir = std::path::Path::new("/node/root/pods/files");
    let cache = pod_dir.join("volumes/kubernetes.io~empty-dir/cache");
    assert_eq!(w.files.entry(&cache), Some(FakeEntry::Directory));
    assert_eq!(w.files.group(cache.join("old")), Some(2000));
    assert_eq!(w.files.mode(cache.join("old")), Some(0o664));
    let hosts = w
        .files
        .file(pod_dir.join("etc-hosts"))
        .map(|h| String::from_utf8_lossy(&h).into_owned())
        .unwrap_or_default();
    assert!(hosts.contains("10.88.0."), "{hosts}");
    assert!(hosts.contains("web-files"), "{hosts}");

    w.files.put_file("/etc/hosts", "127.0.0.1 the-node\n");
    w.ctx
        .volumes
        .set_node_facts(crate::domain::volumes::PodFacts {
            host_ip: "192.168.0.9".into(),
            ..Default::default()
        });
    let mut host = pod("host", RestartPolicy::Always, IMAGE);
    host.spec.host_network = true;
    sync_pod(&w.ctx, &host).await;
    let hosts = w
        .files
        .file("/node/root/pods/host/etc-hosts")
        .map(|h| String::from_utf8_lossy(&h).into_owned())
        .unwrap_or_default();
    assert!(hosts.contains("\n127.0.0.1 the-node\n"), "{hosts}");
}

/// Terminating a pod unmounts and removes its folder and removes its logs; a mount that
/// will not go keeps the folder (it may show the host's own), and the pod is not
/// clean.
#[tokio::test]
async fn termination_removes_the_pods_folder_and_logs_unless_a_mount_stays() {
    use crate::domain::pod::{EmptyDirVolume, Volume};
    let w = world();
    let mut p = pod("gone", RestartPolicy::Always, IMAGE);
    p.spec.volumes = vec![Volume {
        name: "mem".into(),
        empty_dir: Some(EmptyDirVolume {
            medium: "Memory".into(),
            size_limit: None,
        }),
        ..Volume::default()
    }];
    sync_pod(&w.ctx, &p).await;
    let pod_dir = std::path::Path::new("/node/root/pods/gone");
    let mem = pod_dir.join("volumes/kubernetes.io~empty-dir/mem");
    assert!(
        w.files.mounts().contains_key(&mem),
        "{:?}",
        w.files.mounts()
    );
    let logs = w.ctx.requests.pod_logs_dir.join("default_web-gone_gone");
    w.files.put_file(logs.join("app/0.log"), "x");
    assert!(terminate_pod(&w.ctx, "gone", Some(&p)).await);
    assert_eq!(w.files.entry(pod_dir), None);
    assert_eq!(w.files.entry(&logs), None);
    assert!(w.files.mounts().is_empty());

    let q = pod("stuck", RestartPolicy::Always, IMAGE);
    sync_pod(&w.ctx, &q).await;
    let stuck_dir = std::path::Path::new("/node/root/pods/stuck");
    w.files
        .put_stuck_mount(stuck_dir.join("volume-subpaths/v/app/0"));
    assert!(!terminate_pod(&w.ctx, "stuck", Some(&q)).await);
    assert!(w.files.entry(stuck_dir).is_some());
}

/// The termination plan's order: the app's containers stop before the sidecar that
/// serves them, and the sandbox after both.
#[tokio::test]
async fn a_terminated_pod_stops_its_sidecar_after_its_containers_and_the_sandbox_last() {
    let w = world();
    w.runtime.add_image(IMAGE);
    let mut p = pod("side", RestartPolicy::Always, IMAGE);
    let mut proxy = p.spec.containers[0].clone();
    proxy.name = "proxy".into();
    proxy.restart_policy = Some(RestartPolicy::Always);
    p.spec.init_containers = vec![proxy];
    sync_pod(&w.ctx, &p).await;
    sync_pod(&w.ctx, &p).await;
    let running = containers(&w.runtime).await;
    let id_of = |name: &str| {
        running
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.id.clone())
            .unwrap_or_else(|| panic!("{name} not started: {running:?}"))
    };
    let (app, proxy) = (id_of("app"), id_of("proxy"));
    assert!(terminate_pod(&w.ctx, "side", Some(&p)).await);
    let journal = w.runtime.journal();
    let at = |prefix: &str| {
        journal
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix}: {journal:?}"))
    };
    assert!(at(&format!("StopContainer {app}")) < at(&format!("StopContainer {proxy}")));
    assert!(at(&format!("StopContainer {proxy}")) < at("StopPodSandbox"));
}

/// The dry-run planner and the sync drive the same step machine: over generated pods and
/// runtime states (made by syncing an earlier spec, then containers exiting, images
/// changing and time passing), what the planner says the sync would do is what the sync
/// then does to the runtime, the termination plan included.
mod planner_agreement {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::app::pods::runtime_state::{image_presence, pod_runtime_view};
    use crate::domain::kuberuntime::plan::images_to_inspect;
    use crate::domain::kuberuntime::pod_sync::{dry_run, Effect};

    const ABSENT: &str = "docker.io/library/nginx:1.25";
    const OTHER: &str = "docker.io/library/alpine:3.19";

    #[derive(Debug, Clone)]
    enum Event {
        Sync,
        Exit { container: usize, code: i32 },
        ChangeImage { container: usize },
        Wait { secs: u64 },
    }

    #[derive(Debug, Clone)]
    struct Scenario {
        policy: RestartPolicy,
        images: Vec<&'static str>,
        with_init: bool,
        history: Vec<Event>,
    }

    fn scenarios() -> impl Strategy<Value = Scenario> {
        let policy = prop_oneof![
            Just(RestartPolicy::Always),
            Just(RestartPolicy::OnFailure),
            Just(RestartPolicy::Never)
        ];
        let image = prop_oneof![Just(IMAGE), Just(ABSENT), Just(OTHER)];
        let event = prop_oneof![
            Just(Event::Sync),
            (0usize..3, prop_oneof![Just(0), Just(1), Just(137)])
                .prop_map(|(container, code)| Event::Exit { container, code }),
            (0usize..3).prop_map(|container| Event::ChangeImage { container }),
            (1u64..400).prop_map(|secs| Event::Wait { secs }),
        ];
        (
            policy,
            prop::collection::vec(image, 1..=3),
            any::<bool>(),
            prop::collection::vec(event, 0..8),
        )
            .prop_map(|(policy, images, with_init, history)| Scenario {
                policy,
                images,
                with_init,
                history,
            })
    }

    fn spec(s: &Scenario, changed: &[bool]) -> Pod {
        let mut p = pod("agree", s.policy, IMAGE);
        let template = p.spec.containers[0].clone();
        p.spec.containers = s
            .images
            .iter()
            .enumerate()
            .map(|(i, image)| {
                let mut c = template.clone();
                c.name = format!("c{i}");
                c.image = if changed.get(i).copied().unwrap_or(false) {
                    OTHER.to_owned()
                } else {
                    (*image).to_owned()
                };
                c
            })
            .collect();
        if s.with_init {
            let mut init = template;
            init.name = "init".into();
            p.spec.init_containers = vec![init];
        }
        p
    }

    /// What the planner says the sync does to the runtime, in the journal's words.
    fn planned(effects: &[Effect]) -> Vec<String> {
        let mut calls = Vec::new();
        for effect in effects {
            match effect {
                Effect::StopPod { plan, .. } => {
                    calls.extend(plan.stopped().map(|c| format!("StopContainer {}", c.id)));
                    calls.extend(
                        plan.stop_sandboxes
                            .iter()
                            .map(|id| format!("StopPodSandbox {id}")),
                    );
                }
                Effect::StopContainer { id, .. } => calls.push(format!("StopContainer {id}")),
                Effect::CreateSandbox { .. } => calls.push("RunPodSandbox".into()),
                Effect::PullImage { image, .. } => calls.push(format!("PullImage {image}")),
                Effect::CreateContainer { config, .. } => {
                    calls.push(format!("CreateContainer {}", config.name))
                }
                Effect::StartContainer { .. } => calls.push("StartContainer".into()),
                Effect::RemoveDeadContainer { id, .. } => {
                    calls.push(format!("RemoveContainer {id}"))
                }
                _ => {}
            }
        }
        calls.sort();
        calls
    }

    /// The journal's calls in the same words (ids of new instances and timeouts left out;
    /// dead sandboxes, which the planner's snapshot cannot tie to containers, too).
    fn done(journal: &[String]) -> Vec<String> {
        let mut calls: Vec<String> = journal
            .iter()
            .filter_map(|call| {
                let mut words = call.split(' ');
                let verb = words.next()?;
                let arg = words.next().unwrap_or_default();
                match verb {
                    "RunPodSandbox" | "StartContainer" => Some(verb.to_owned()),
                    "StopContainer" | "StopPodSandbox" | "PullImage" | "CreateContainer"
                    | "RemoveContainer" => Some(format!("{verb} {arg}")),
                    _ => None,
                }
            })
            .collect();
        calls.sort();
        calls
    }

    async fn agree(s: Scenario) -> Result<(), TestCaseError> {
        let w = world();
        let mut changed = vec![false; s.images.len()];
        for event in &s.history {
            let p = spec(&s, &changed);
            match event {
                Event::Sync => {
                    sync_pod(&w.ctx, &p).await;
                }
                Event::Exit { container, code } => {
                    let list = super::containers(&w.runtime).await;
                    if let Some(c) = list
                        .iter()
                        .filter(|c| c.state == ContainerState::Running)
                        .nth(*container)
                    {
                        w.runtime.exit_container(&c.id, *code);
                    }
                }
                Event::ChangeImage { container } => {
                    if let Some(flag) = changed.get_mut(*container) {
                        *flag = !*flag;
                    }
                }
                Event::Wait { secs } => w.clock.advance(Duration::from_secs(*secs)),
            }
        }
        let p = spec(&s, &changed);

        // The planner: the runtime's view and the images as `--dry-run` reads them.
        let view = pod_runtime_view(w.runtime.as_ref(), &p.metadata.uid)
            .await
            .map_err(|e| TestCaseError::fail(format!("view: {e}")))?;
        let now = w.ctx.clock.now_unix_nanos();
        let wanted = images_to_inspect(&p, &view.status, now);
        let images: BTreeMap<_, _> = image_presence(w.runtime.as_ref(), &wanted).await;
        let cgroup = w.ctx.containers.cgroup_parent(&p);
        let run = dry_run(&p, &w.ctx.requests, now, &view, &images, &cgroup);

        let before = w.runtime.journal().len();
        let outcome = sync_pod(&w.ctx, &p).await;
        let journal = w.runtime.journal();
        let did = done(&journal[before..]);
        prop_assert_eq!(planned(&run.effects), did, "scenario {:?}", s);
        let holds = |h: &[crate::domain::kuberuntime::pod_sync::ContainerHold]| {
            h.iter()
                .map(|h| (h.name.clone(), h.held.waiting.reason.clone()))
                .collect::<Vec<_>>()
        };
        prop_assert_eq!(holds(&run.outcome.holds), holds(&outcome.holds));
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn the_planner_and_the_sync_take_the_same_actions(s in scenarios()) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .map_err(|e| TestCaseError::fail(format!("runtime: {e}")))?;
            rt.block_on(agree(s))?;
        }
    }
}

#[tokio::test]
async fn a_pod_without_host_users_gets_its_own_ids_kept_in_its_folder_and_freed_with_it() {
    use crate::domain::kuberuntime::userns::RuntimeHandler;
    let w = world();
    let mut p = pod("u-ns", RestartPolicy::Always, IMAGE);
    p.spec.host_users = Some(false);
    // The default handler does not support user namespaces: no sandbox, the sync fails
    // (FailedCreatePodSandBox) and nothing is allocated.
    w.runtime.set_runtime_handlers(vec![RuntimeHandler {
        name: String::new(),
        user_namespaces: false,
    }]);
    let refused = sync_pod(&w.ctx, &p).await;
    assert!(refused.failed);
    assert!(!w
        .runtime
        .journal()
        .iter()
        .any(|c| c.starts_with("RunPodSandbox")));
    let kept = "/node/root/pods/u-ns/userns";
    assert_eq!(w.files.file(kept), None);

    w.runtime.set_runtime_handlers(vec![RuntimeHandler {
        name: String::new(),
        user_namespaces: true,
    }]);
    let first = sync_pod(&w.ctx, &p).await;
    assert!(
        !first.failed && first.waiting.is_empty(),
        "{:?}",
        first.waiting
    );
    let sandbox = first.runtime.sandboxes[0].id.clone();
    let userns = w
        .runtime
        .sandbox_userns(&sandbox)
        .expect("own user namespace");
    assert_eq!(
        (
            userns.uids[0].host_id,
            userns.uids[0].container_id,
            userns.uids[0].length
        ),
        (65536, 0, 65536)
    );
    assert_eq!(userns.uids, userns.gids);
    let file = String::from_utf8(w.files.file(kept).expect("kept in the pod's folder"))
        .unwrap_or_default();
    assert!(file.contains(r#""hostId":65536"#), "{file}");

    // A restarted kubelet reads the block back: a second pod gets the next one.
    let restarted = Arc::new(
        SyncContext::new(
            w.runtime.clone(),
            w.runtime.clone(),
            w.clock.clone(),
            w.ctx.requests.clone(),
            "fake".into(),
            Arc::clone(&w.ctx.containers),
        )
        .with_volumes(Arc::clone(&w.ctx.volumes)),
    );
    let mut other = pod("u-ns2", RestartPolicy::Always, IMAGE);
    other.spec.host_users = Some(false);
    let second = sync_pod(&restarted, &other).await;
    let other_ns = w
        .runtime
        .sandbox_userns(&second.runtime.sandboxes[0].id)
        .expect("own user namespace");
    assert_eq!(other_ns.uids[0].host_id, 131072);

    // The first pod's folder goes with it: its block is handed out again.
    assert!(terminate_pod(&restarted, "u-ns", Some(&p)).await);
    assert_eq!(w.files.file(kept), None);
    let mut third = pod("u-ns3", RestartPolicy::Always, IMAGE);
    third.spec.host_users = Some(false);
    let third = sync_pod(&restarted, &third).await;
    let third_ns = w
        .runtime
        .sandbox_userns(&third.runtime.sandboxes[0].id)
        .expect("own user namespace");
    assert_eq!(third_ns.uids[0].host_id, 65536);
}
