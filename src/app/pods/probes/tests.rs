//! The probe manager and the hooks against the in-memory runtime, on tokio's paused
//! clock (no real sleeps: time jumps to the next timer).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::ProbeManager;
use crate::app::pods::runtime_state::pod_runtime_view;
use crate::app::pods::sync::sync_pod;
use crate::app::pods::terminate::terminate_pod;
use crate::app::pods::tests::{pod, world, World, IMAGE};
use crate::domain::kuberuntime::runtime::{ContainerState, PodRuntimeStatus};
use crate::domain::pod::{Pod, RestartPolicy};
use crate::domain::probe::spec::{ExecAction, Lifecycle, LifecycleHandler, Probe, ProbeHandler};
use crate::domain::status::api_pod_status;

fn exec(command: &str) -> ProbeHandler {
    ProbeHandler {
        exec: Some(ExecAction {
            command: vec![command.to_owned()],
        }),
        ..Default::default()
    }
}

fn probe(command: &str, failure_threshold: i32) -> Probe {
    Probe {
        handler: exec(command),
        timeout_seconds: 1,
        period_seconds: 1,
        success_threshold: 1,
        failure_threshold,
        ..Default::default()
    }
}

fn hook(command: &str) -> LifecycleHandler {
    LifecycleHandler {
        exec: Some(ExecAction {
            command: vec![command.to_owned()],
        }),
        ..Default::default()
    }
}

async fn view(w: &World, p: &Pod) -> PodRuntimeStatus {
    pod_runtime_view(w.runtime.as_ref(), &p.metadata.uid)
        .await
        .map(|v| v.status)
        .unwrap_or_default()
}

/// The manager running on the pod `p` (already synced once), with the poke it uses.
async fn manage(w: &World, p: &Pod) -> (Arc<ProbeManager>, Arc<Notify>, watch::Sender<bool>) {
    let manager = ProbeManager::new(Arc::clone(&w.ctx));
    let poke = Arc::new(Notify::new());
    manager.observe(p, &view(w, p).await, &poke);
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(Arc::clone(&manager).run(stopped));
    (manager, poke, stop)
}

fn execs(w: &World, command: &str) -> usize {
    w.runtime
        .journal()
        .iter()
        .filter(|l| l.starts_with("ExecSync ") && l.ends_with(&format!(" {command}")))
        .count()
}

async fn poked(poke: &Notify) -> bool {
    tokio::time::timeout(Duration::from_secs(30), poke.notified())
        .await
        .is_ok()
}

#[tokio::test(start_paused = true)]
async fn a_failing_liveness_probe_kills_with_the_probes_grace_and_the_sync_restarts() {
    let w = world();
    let mut p = pod("live", RestartPolicy::Always, IMAGE);
    p.spec.containers[0].liveness_probe = Some(Probe {
        termination_grace_period_seconds: Some(5),
        ..probe("healthy", 3)
    });
    sync_pod(&w.ctx, &p).await;
    let first = view(&w, &p).await.containers[0].id.clone();
    let (_manager, poke, _stop) = manage(&w, &p).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(execs(&w, "healthy") >= 2, "{:?}", w.runtime.journal());
    assert!(!w
        .runtime
        .journal()
        .iter()
        .any(|l| l.starts_with("StopContainer")));
    w.runtime.set_exec_exit_code("healthy", 1);
    let before = execs(&w, "healthy");
    // Three failures in a row, one a second: killed after the third.
    tokio::time::sleep(Duration::from_millis(2400)).await;
    assert!(!w
        .runtime
        .journal()
        .iter()
        .any(|l| l.starts_with("StopContainer")));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let journal = w.runtime.journal();
    assert!(
        journal.contains(&format!("StopContainer {first} 5")),
        "{journal:?}"
    );
    assert!(poked(&poke).await, "the worker is woken to restart it");
    assert_eq!(execs(&w, "healthy") - before, 3, "on hold after the kill");
    // The worker's next sync restarts it; probing resumes on the new instance.
    w.runtime.set_exec_exit_code("healthy", 0);
    let outcome = sync_pod(&w.ctx, &p).await;
    assert!(outcome.waiting.is_empty(), "{:?}", outcome.waiting);
    let now = view(&w, &p).await;
    let newest = now.find_container("app").expect("restarted");
    assert_eq!((newest.attempt, newest.state), (1, ContainerState::Running));
    assert_ne!(newest.id, first);
}

#[tokio::test(start_paused = true)]
async fn readiness_follows_the_probe_into_ready_and_the_conditions() {
    let w = world();
    let mut p = pod("ready", RestartPolicy::Always, IMAGE);
    p.spec.containers[0].readiness_probe = Some(probe("ready", 1));
    w.runtime.set_exec_exit_code("ready", 1);
    sync_pod(&w.ctx, &p).await;
    let (manager, poke, _stop) = manage(&w, &p).await;
    let status_now = |runtime: &PodRuntimeStatus| {
        let mut status = api_pod_status(&p, runtime, &Default::default(), "fake");
        manager.apply_to_status(&p, &mut status);
        status
    };
    let runtime = view(&w, &p).await;
    let status = status_now(&runtime);
    assert!(!status.container_statuses[0].ready);
    assert!(status.container_statuses[0].started);
    let ready = |s: &crate::domain::status::ApiPodStatus| {
        s.conditions
            .iter()
            .find(|c| c.condition_type == "Ready")
            .map(|c| (c.status.clone(), c.message.clone()))
    };
    assert_eq!(
        ready(&status),
        Some((
            "False".into(),
            "containers with unready status: [app]".into()
        ))
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    w.runtime.set_exec_exit_code("ready", 0);
    assert!(poked(&poke).await);
    let status = status_now(&runtime);
    assert!(status.container_statuses[0].ready);
    assert_eq!(ready(&status), Some(("True".into(), String::new())));
    w.runtime.set_exec_exit_code("ready", 1);
    assert!(poked(&poke).await);
    assert!(!status_now(&runtime).container_statuses[0].ready);
    let metrics = crate::app::metrics::probe_metrics().encode();
    let count = |result: &str| -> u64 {
        let labels = format!(
            "prober_probe_total{{probe_type=\"Readiness\",result=\"{result}\",container=\"app\",pod=\"web-ready\",namespace=\"default\",pod_uid=\"ready\"}} "
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(labels.as_str()))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {result} series in {metrics}"))
    };
    assert!(metrics.contains(
        "prober_probe_duration_seconds_count{probe_type=\"Readiness\",container=\"app\",pod=\"web-ready\",namespace=\"default\"}"
    ), "{metrics}");
    assert!(
        count("failed") >= 2 && count("successful") >= 1,
        "{metrics}"
    );
    // The pod goes: its series go with its probes.
    manager.forget("ready");
    let metrics = crate::app::metrics::probe_metrics().encode();
    assert!(!metrics.contains("pod_uid=\"ready\""), "{metrics}");
}

#[tokio::test(start_paused = true)]
async fn a_startup_probe_holds_liveness_off_until_it_passes() {
    let w = world();
    let mut p = pod("startup", RestartPolicy::Always, IMAGE);
    p.spec.containers[0].startup_probe = Some(probe("started", 30));
    p.spec.containers[0].liveness_probe = Some(probe("live", 1));
    w.runtime.set_exec_exit_code("started", 1);
    w.runtime.set_exec_exit_code("live", 1);
    sync_pod(&w.ctx, &p).await;
    let (manager, _poke, _stop) = manage(&w, &p).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(execs(&w, "started") >= 9);
    assert_eq!(execs(&w, "live"), 0, "liveness waits for startup");
    let runtime = view(&w, &p).await;
    let mut status = api_pod_status(&p, &runtime, &Default::default(), "fake");
    manager.apply_to_status(&p, &mut status);
    assert!(!status.container_statuses[0].started);
    w.runtime.set_exec_exit_code("started", 0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut status = api_pod_status(&p, &runtime, &Default::default(), "fake");
    manager.apply_to_status(&p, &mut status);
    assert!(status.container_statuses[0].started);
    // Now liveness runs, fails (threshold 1) and kills.
    assert!(execs(&w, "live") >= 1);
    assert!(w
        .runtime
        .journal()
        .iter()
        .any(|l| l.starts_with("StopContainer ")));
}

/// Upstream's "should be ready immediately after startupProbe succeeds": readiness
/// (period 60 s) runs as soon as the startup probe passes, not a period later.
#[tokio::test(start_paused = true)]
async fn a_passed_startup_probe_runs_the_readiness_probe_at_once() {
    let w = world();
    let mut p = pod("soon", RestartPolicy::Always, IMAGE);
    p.spec.containers[0].startup_probe = Some(probe("started", 30));
    p.spec.containers[0].readiness_probe = Some(Probe {
        period_seconds: 60,
        ..probe("ready", 1)
    });
    w.runtime.set_exec_exit_code("started", 1);
    w.runtime.set_exec_exit_code("ready", 0);
    sync_pod(&w.ctx, &p).await;
    let (manager, _poke, _stop) = manage(&w, &p).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(execs(&w, "ready"), 0, "readiness waits for startup");
    w.runtime.set_exec_exit_code("started", 0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(execs(&w, "ready"), 1, "readiness ran once startup passed");
    let runtime = view(&w, &p).await;
    let mut status = api_pod_status(&p, &runtime, &Default::default(), "fake");
    manager.apply_to_status(&p, &mut status);
    assert!(status.container_statuses[0].started);
    assert!(status.container_statuses[0].ready);
}

#[tokio::test]
async fn a_failing_post_start_hook_kills_the_container() {
    let w = world();
    let mut p = pod("poststart", RestartPolicy::Always, IMAGE);
    p.spec.containers[0].lifecycle = Some(Lifecycle {
        post_start: Some(hook("setup")),
        pre_stop: None,
    });
    w.runtime.set_exec_exit_code("setup", 1);
    let outcome = sync_pod(&w.ctx, &p).await;
    let waiting = outcome.waiting.get("app").expect("held");
    assert_eq!(waiting.reason, "PostStartHookError");
    assert!(
        waiting
            .message
            .starts_with("Exec lifecycle hook ([\"setup\"]) for Container \"app\" in Pod \"web-poststart_default(poststart)\" failed"),
        "{}",
        waiting.message
    );
    let journal = w.runtime.journal();
    let exec = journal.iter().position(|l| l.ends_with(" setup"));
    let stop = journal.iter().position(|l| l.starts_with("StopContainer "));
    assert!(exec.is_some() && stop > exec, "{journal:?}");
}

#[tokio::test]
async fn pre_stop_runs_before_the_stop_on_termination() {
    let w = world();
    let mut p = pod("prestop", RestartPolicy::Always, IMAGE);
    p.spec.containers[0].lifecycle = Some(Lifecycle {
        post_start: None,
        pre_stop: Some(hook("drain")),
    });
    sync_pod(&w.ctx, &p).await;
    assert!(terminate_pod(&w.ctx, "prestop", Some(&p)).await);
    let journal = w.runtime.journal();
    let exec = journal.iter().position(|l| l.ends_with(" drain"));
    let stop = journal.iter().position(|l| l.starts_with("StopContainer "));
    assert!(exec.is_some() && stop > exec, "{journal:?}");
}
