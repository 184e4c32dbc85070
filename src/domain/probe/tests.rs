use super::target::{hook_target, probe_target};
use super::*;
use crate::domain::pod::ContainerPort;
use crate::domain::probe::spec::{
    ExecAction, HttpGetAction, HttpHeader, IntOrString, LifecycleHandler, ProbeHandler, SleepAction,
};

const SEC: i64 = 1_000_000_000;

fn exec_probe(failure_threshold: i32, success_threshold: i32, initial_delay: i32) -> Probe {
    Probe {
        handler: ProbeHandler {
            exec: Some(ExecAction {
                command: vec!["true".into()],
            }),
            ..Default::default()
        },
        initial_delay_seconds: initial_delay,
        timeout_seconds: 1,
        period_seconds: 10,
        success_threshold,
        failure_threshold,
        termination_grace_period_seconds: None,
    }
}

fn running(id: &str, started_at_secs: i64) -> ContainerStatus {
    ContainerStatus {
        started_at_nanos: started_at_secs * SEC,
        ..ContainerStatus::new(id, "app", ContainerState::Running)
    }
}

fn view(c: &ContainerStatus, started: bool, now_secs: i64) -> PodView<'_> {
    PodView {
        container: Some(c),
        started,
        restart_policy: RestartPolicy::Always,
        terminating: false,
        now_unix_nanos: now_secs * SEC,
    }
}

fn fail() -> HandlerOutcome {
    HandlerOutcome::Failure("exit 1".into())
}

fn ok() -> HandlerOutcome {
    HandlerOutcome::Success(String::new())
}

#[test]
fn liveness_kills_after_failure_threshold_in_a_row() {
    let c = running("c1", 100);
    let mut w = ProbeWorker::new(ProbeKind::Liveness, exec_probe(3, 1, 0));
    assert_eq!(w.tick(&view(&c, true, 100)), Tick::Probe);
    assert_eq!(
        w.result(),
        Some(ProbeResult::Success),
        "live until shown otherwise"
    );
    let first = w.record("c1", &fail());
    assert_eq!(
        first.event,
        Some(ProbeEvent {
            event_type: "Warning",
            reason: "Unhealthy",
            message: "Liveness probe failed: exit 1".into()
        })
    );
    assert!(!first.kill && !first.changed);
    // A success breaks the run.
    assert!(!w.record("c1", &ok()).kill);
    assert!(!w.record("c1", &fail()).kill);
    assert!(!w.record("c1", &fail()).kill);
    let third = w.record("c1", &fail());
    assert!(third.kill && third.changed);
    assert_eq!(w.result(), Some(ProbeResult::Failure));
    // On hold until a new instance shows up.
    assert_eq!(w.tick(&view(&c, true, 140)), Tick::Skip);
    assert!(!w.record("c1", &fail()).kill);
}

#[test]
fn a_new_instance_resets_the_result_and_the_run() {
    let c1 = running("c1", 100);
    let mut w = ProbeWorker::new(ProbeKind::Liveness, exec_probe(2, 1, 0));
    w.tick(&view(&c1, true, 100));
    w.record("c1", &fail());
    assert!(w.record("c1", &fail()).kill);
    let c2 = running("c2", 130);
    assert_eq!(w.tick(&view(&c2, true, 130)), Tick::Probe);
    assert_eq!(w.result(), Some(ProbeResult::Success));
    assert_eq!(w.container_id(), "c2");
    // One failure on the new instance is below the threshold again.
    assert!(!w.record("c2", &fail()).kill);
    // An answer about the old instance is dropped.
    assert!(!w.record("c1", &fail()).kill);
    assert!(w.record("c2", &fail()).kill);
}

#[test]
fn readiness_starts_unready_and_follows_thresholds_without_killing() {
    let c = running("c1", 0);
    let mut probe = exec_probe(2, 2, 0);
    probe.success_threshold = 2;
    let mut w = ProbeWorker::new(ProbeKind::Readiness, probe);
    assert_eq!(w.tick(&view(&c, true, 1)), Tick::Probe);
    assert_eq!(w.result(), Some(ProbeResult::Failure));
    assert!(!w.record("c1", &ok()).changed, "one success of two");
    let ready = w.record("c1", &ok());
    assert!(ready.changed && !ready.kill);
    assert_eq!(w.result(), Some(ProbeResult::Success));
    w.record("c1", &fail());
    let unready = w.record("c1", &fail());
    assert!(unready.changed && !unready.kill);
    assert_eq!(w.result(), Some(ProbeResult::Failure));
    // Readiness keeps probing after a failure.
    assert_eq!(w.tick(&view(&c, true, 30)), Tick::Probe);
}

#[test]
fn initial_delay_holds_the_first_probe() {
    let c = running("c1", 100);
    let mut w = ProbeWorker::new(ProbeKind::Liveness, exec_probe(3, 1, 15));
    assert_eq!(w.tick(&view(&c, true, 110)), Tick::Skip);
    assert_eq!(w.tick(&view(&c, true, 114)), Tick::Skip);
    assert_eq!(w.tick(&view(&c, true, 115)), Tick::Probe);
}

#[test]
fn startup_gates_liveness_and_readiness_and_stops_once_started() {
    let c = running("c1", 0);
    let mut startup = ProbeWorker::new(ProbeKind::Startup, exec_probe(30, 1, 0));
    let mut liveness = ProbeWorker::new(ProbeKind::Liveness, exec_probe(1, 1, 0));
    let mut readiness = ProbeWorker::new(ProbeKind::Readiness, exec_probe(1, 1, 0));
    assert_eq!(startup.tick(&view(&c, false, 1)), Tick::Probe);
    assert_eq!(liveness.tick(&view(&c, false, 1)), Tick::Skip);
    assert_eq!(readiness.tick(&view(&c, false, 1)), Tick::Skip);
    assert_eq!(startup.result(), Some(ProbeResult::Unknown));
    for _ in 0..29 {
        assert!(!startup.record("c1", &fail()).kill);
    }
    let started = startup.record("c1", &ok());
    assert!(started.changed);
    assert_eq!(startup.result(), Some(ProbeResult::Success));
    let (is_started, _) = started_and_ready(true, Some(startup.result()), None);
    assert!(is_started);
    assert_eq!(startup.tick(&view(&c, true, 40)), Tick::Skip);
    assert_eq!(liveness.tick(&view(&c, true, 40)), Tick::Probe);
    assert_eq!(readiness.tick(&view(&c, true, 40)), Tick::Probe);
}

#[test]
fn startup_failing_past_its_threshold_kills() {
    let c = running("c1", 0);
    let mut startup = ProbeWorker::new(ProbeKind::Startup, exec_probe(2, 1, 0));
    startup.tick(&view(&c, false, 1));
    startup.record("c1", &fail());
    let r = startup.record("c1", &fail());
    assert!(r.kill);
    assert_eq!(
        r.event.map(|e| e.message),
        Some("Startup probe failed: exit 1".into())
    );
}

#[test]
fn errors_are_reported_but_thrown_away_and_warnings_count_as_success() {
    let c = running("c1", 0);
    let mut w = ProbeWorker::new(ProbeKind::Liveness, exec_probe(1, 1, 0));
    w.tick(&view(&c, true, 1));
    let r = w.record("c1", &HandlerOutcome::Error("no such port".into()));
    assert_eq!(
        r.event.map(|e| e.message),
        Some("Liveness probe errored: no such port".into())
    );
    assert!(!r.kill);
    assert_eq!(w.result(), Some(ProbeResult::Success));
    let mut ready = ProbeWorker::new(ProbeKind::Readiness, exec_probe(1, 1, 0));
    ready.tick(&view(&c, true, 1));
    let r = ready.record(
        "c1",
        &HandlerOutcome::Warning("Probe terminated redirects".into()),
    );
    assert_eq!(
        r.event,
        Some(ProbeEvent {
            event_type: "Warning",
            reason: "ProbeWarning",
            message: "Readiness probe warning: Probe terminated redirects".into()
        })
    );
    assert_eq!(ready.result(), Some(ProbeResult::Success));
}

#[test]
fn exited_containers_fail_and_stop_the_worker_when_not_restarted() {
    let exited = ContainerStatus::new("c1", "app", ContainerState::Exited);
    let mut w = ProbeWorker::new(ProbeKind::Readiness, exec_probe(1, 1, 0));
    let mut pod = view(&exited, true, 5);
    assert_eq!(w.tick(&pod), Tick::Skip);
    assert_eq!(w.result(), Some(ProbeResult::Failure));
    pod.restart_policy = RestartPolicy::Never;
    assert_eq!(w.tick(&pod), Tick::Stop);
    let mut none = view(&exited, true, 5);
    none.container = None;
    assert_eq!(w.tick(&none), Tick::Skip);
}

#[test]
fn a_terminating_pod_is_not_killed_by_liveness() {
    let c = running("c1", 0);
    let mut w = ProbeWorker::new(ProbeKind::Liveness, exec_probe(1, 1, 0));
    let mut pod = view(&c, true, 5);
    pod.terminating = true;
    assert_eq!(w.tick(&pod), Tick::Stop);
    assert_eq!(w.result(), Some(ProbeResult::Success));
}

#[test]
fn started_and_ready_as_upstreams_status_update() {
    use ProbeResult::*;
    let cases = [
        // running, startup, readiness => started, ready
        (true, None, None, (true, true)),
        (false, None, None, (false, false)),
        (true, Some(None), None, (false, false)),
        (
            true,
            Some(Some(Unknown)),
            Some(Some(Success)),
            (false, false),
        ),
        (
            true,
            Some(Some(Success)),
            Some(Some(Failure)),
            (true, false),
        ),
        (true, Some(Some(Success)), Some(None), (true, false)),
        (true, None, Some(Some(Success)), (true, true)),
    ];
    for (running, startup, readiness, want) in cases {
        assert_eq!(
            started_and_ready(running, startup, readiness),
            want,
            "{running} {startup:?} {readiness:?}"
        );
    }
}

#[test]
fn kills_carry_upstreams_message_and_the_probes_grace() {
    let mut pod = Pod::default();
    pod.spec.restart_policy = RestartPolicy::Always;
    pod.spec.termination_grace_period_seconds = Some(20);
    let mut container = Container {
        name: "app".into(),
        liveness_probe: Some(exec_probe(1, 1, 0)),
        startup_probe: Some(Probe {
            termination_grace_period_seconds: Some(3),
            ..exec_probe(1, 1, 0)
        }),
        ..Default::default()
    };
    let kill = probe_kill(&pod, &container, "c1", ProbeKind::Liveness);
    assert_eq!(
        kill.message,
        "Container app failed liveness probe, will be restarted"
    );
    assert_eq!(kill.grace_period_secs, 20);
    let kill = probe_kill(&pod, &container, "c1", ProbeKind::Startup);
    assert_eq!(
        kill.message,
        "Container app failed startup probe, will be restarted"
    );
    assert_eq!(kill.grace_period_secs, 3);
    assert_eq!(killing_event(&kill).reason, "Killing");
    pod.spec.restart_policy = RestartPolicy::Never;
    container.startup_probe = None;
    let kill = probe_kill(&pod, &container, "c1", ProbeKind::Liveness);
    assert_eq!(kill.message, "Container app failed liveness probe");
    let kill = post_start_kill(&pod, &container, "c1");
    assert_eq!(
        (kill.message.as_str(), kill.grace_period_secs),
        ("FailedPostStartHook", 20)
    );
    assert_eq!(hook_failed_event(true).message, "PostStartHook failed");
    assert_eq!(hook_failed_event(false).reason, "FailedPreStopHook");
}

#[test]
fn pre_stop_time_comes_off_the_grace_with_a_minimum() {
    assert_eq!(grace_after_pre_stop(30, 5), 25);
    assert_eq!(grace_after_pre_stop(30, 29), 2);
    assert_eq!(grace_after_pre_stop(3, 10), 2);
}

#[test]
fn targets_resolve_ports_hosts_and_headers_as_upstream() {
    let container = Container {
        name: "app".into(),
        ports: vec![ContainerPort {
            name: "http".into(),
            container_port: 8080,
            ..Default::default()
        }],
        ..Default::default()
    };
    let http = ProbeHandler {
        http_get: Some(HttpGetAction {
            path: "healthz?x=1".into(),
            port: IntOrString::String("http".into()),
            http_headers: vec![
                HttpHeader {
                    name: "Accept".into(),
                    value: String::new(),
                },
                HttpHeader {
                    name: "X-Probe".into(),
                    value: "1".into(),
                },
            ],
            ..Default::default()
        }),
        ..Default::default()
    };
    let Ok(HandlerTarget::Http(t)) = probe_target(&http, &container, "10.0.0.5") else {
        panic!("an HTTP target");
    };
    assert_eq!(t.url(), "http://10.0.0.5:8080/healthz?x=1");
    assert_eq!(
        t.headers,
        vec![
            ("X-Probe".to_owned(), "1".to_owned()),
            ("User-Agent".to_owned(), "kube-probe/1.26".to_owned())
        ]
    );
    let tcp = ProbeHandler {
        tcp_socket: Some(crate::domain::probe::spec::TcpSocketAction {
            port: IntOrString::String("9000".into()),
            host: String::new(),
        }),
        ..Default::default()
    };
    assert_eq!(
        probe_target(&tcp, &container, "fd00::5"),
        Ok(HandlerTarget::Tcp {
            host: "fd00::5".into(),
            port: 9000
        })
    );
    let missing = ProbeHandler {
        tcp_socket: Some(crate::domain::probe::spec::TcpSocketAction {
            port: IntOrString::String("grpc".into()),
            host: String::new(),
        }),
        ..Default::default()
    };
    assert_eq!(
        probe_target(&missing, &container, "10.0.0.5").map_err(|e| e.to_string()),
        Err("couldn't find port: grpc in container app".to_owned())
    );
    assert_eq!(
        probe_target(&tcp, &container, ""),
        Err(TargetError::NoPodIp)
    );
    let sleep = LifecycleHandler {
        sleep: Some(SleepAction { seconds: 3 }),
        ..Default::default()
    };
    assert_eq!(
        hook_target(&sleep, &container, ""),
        Ok(HandlerTarget::Sleep(3))
    );
    assert_eq!(super::target::join_host_port("fd00::5", 80), "[fd00::5]:80");
}

#[test]
fn host_network_pods_are_probed_at_the_nodes_ip() {
    use crate::domain::probe::target::handler_pod_ip;
    assert_eq!(handler_pod_ip(false, "10.1.0.2", "192.168.1.7"), "10.1.0.2");
    assert_eq!(handler_pod_ip(false, "", "192.168.1.7"), "");
    assert_eq!(handler_pod_ip(true, "", "192.168.1.7"), "192.168.1.7");
    assert_eq!(handler_pod_ip(true, "", ""), "127.0.0.1");
}

#[test]
fn metrics_name_a_workloads_pods_by_their_workload() {
    use crate::domain::pod::Pod;
    use crate::domain::probe::metrics_pod_name;
    let mut pod = Pod::default();
    pod.metadata.name = "web".into();
    assert_eq!(metrics_pod_name(&pod), "web");
    pod.metadata.name = "web-7d9f8c6b5-x2x4q".into();
    pod.metadata.generate_name = "web-7d9f8c6b5-".into();
    pod.metadata
        .labels
        .insert("pod-template-hash".into(), "7d9f8c6b5".into());
    assert_eq!(metrics_pod_name(&pod), "web");
    pod.metadata.labels.clear();
    assert_eq!(metrics_pod_name(&pod), "web-7d9f8c6b5");
}

#[test]
fn probes_seen_soon_after_start_are_spread_over_their_period() {
    use crate::domain::probe::first_probe_delay;
    use std::time::Duration;
    let period = Duration::from_secs(10);
    let delays: Vec<Duration> = (0..50)
        .map(|i| first_probe_delay(Duration::from_secs(1), period, &("uid", format!("c{i}"))))
        .collect();
    assert!(delays.iter().all(|d| *d < period));
    let distinct: std::collections::BTreeSet<_> = delays.iter().collect();
    assert!(distinct.len() > 25, "{delays:?}");
    assert_eq!(
        first_probe_delay(Duration::from_secs(1), period, &("uid", "c1")),
        first_probe_delay(Duration::from_secs(1), period, &("uid", "c1")),
        "the same probe always gets the same part"
    );
    assert_eq!(
        first_probe_delay(period, period, &("uid", "c1")),
        Duration::ZERO,
        "a kubelet running for a period probes at once"
    );
}

#[test]
fn only_readiness_looks_at_a_new_container_at_once() {
    assert!(ProbeKind::Readiness.probes_a_new_container_at_once());
    assert!(!ProbeKind::Liveness.probes_a_new_container_at_once());
    assert!(!ProbeKind::Startup.probes_a_new_container_at_once());
}
