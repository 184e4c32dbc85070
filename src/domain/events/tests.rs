use std::time::Duration;

use serde_json::json;

use super::simulate::{crash_loop, upstream_allowance};
use super::*;
use crate::domain::node_status::events::{make_event, EventAction, EventCorrelator};
use crate::domain::node_status::model::EventSource;
use crate::domain::pod::{Container, Pod};
use crate::domain::status::Waiting;
use crate::domain::units::duration::GoDuration;

fn pod() -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = "crash-n1".into();
    pod.metadata.namespace = "default".into();
    pod.metadata.uid = "u1".into();
    pod.spec.containers.push(Container {
        name: "main".into(),
        image: "busybox".into(),
        ..Container::default()
    });
    pod.spec.init_containers.push(Container {
        name: "setup".into(),
        image: "busybox".into(),
        ..Container::default()
    });
    pod
}

fn source() -> EventSource {
    EventSource {
        component: "kubelet".into(),
        host: "n1".into(),
    }
}

/// A container's event as the API receives it (upstream's shape: fieldPath, apiVersion).
#[test]
fn golden_started_event() {
    let event = make_event(
        &container_reference(&pod(), "main"),
        &source(),
        &started("main"),
        1_795_232_011_000_000_000,
    );
    assert_eq!(
        serde_json::to_value(&event).expect("json"),
        json!({
            "metadata": {"name": "crash-n1.18e9f200a110ae00", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "crash-n1",
                               "uid": "u1", "apiVersion": "v1",
                               "fieldPath": "spec.containers{main}"},
            "reason": "Started",
            "message": "Started container main",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2026-11-21T03:33:31Z",
            "lastTimestamp": "2026-11-21T03:33:31Z",
            "count": 1,
            "type": "Normal"
        })
    );
}

#[test]
fn references() {
    let p = pod();
    assert_eq!(
        container_reference(&p, "setup").field_path,
        "spec.initContainers{setup}"
    );
    assert_eq!(container_reference(&p, "gone").field_path, "");
    assert_eq!(pod_reference(&p).kind, "Pod");
}

#[test]
fn upstream_messages() {
    assert_eq!(pulling("busybox").message, "Pulling image \"busybox\"");
    assert_eq!(
        already_present("busybox").message,
        "Container image \"busybox\" already present on machine"
    );
    assert_eq!(
        pulled(
            "busybox",
            GoDuration::from_millis(1500),
            GoDuration::from_secs(2)
        )
        .message,
        "Successfully pulled image \"busybox\" in 1.5s (2s including waiting)"
    );
    assert_eq!(created("x").reason, "Created");
    assert_eq!(
        sandbox_changed().message,
        "Pod sandbox changed, it will be killed and re-created."
    );
    let held = |reason: &str, message: &str| Held {
        waiting: Waiting::new(reason, message),
        retry_after: Duration::ZERO,
    };
    let backoff = held_events(&pod(), "main", "busybox", &held("CrashLoopBackOff", "x"));
    assert_eq!(backoff[0].reason, "BackOff");
    assert_eq!(
        backoff[0].message,
        "Back-off restarting failed container main in pod crash-n1_default(u1)"
    );
    let never = held_events(
        &pod(),
        "main",
        "busybox",
        &held(
            "ErrImageNeverPull",
            "Container image \"busybox\" is not present with pull policy of Never",
        ),
    );
    let reasons: Vec<_> = never.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["ErrImageNeverPull", "Failed"]);
    assert_eq!(never[1].message, "Error: ErrImageNeverPull");
    assert!(held_events(
        &pod(),
        "main",
        "busybox",
        &held("CreateContainerError", "x")
    )
    .is_empty());
    let config = held_events(
        &pod(),
        "main",
        "busybox",
        &held("CreateContainerConfigError", "secret \"s\" not found"),
    );
    let words: Vec<_> = config
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(words, [("Failed", "Error: secret \"s\" not found")]);
    let invalid = held_events(&pod(), "main", "Busybox", &held("InvalidImageName", "m"));
    let words: Vec<_> = invalid
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        words,
        [
            ("InspectFailed", "m"),
            ("Failed", "Error: InvalidImageName")
        ]
    );
}

/// Events of one pod's containers are told apart by field path: the same message about
/// two containers is two events, not a repeat.
#[test]
fn field_path_is_part_of_the_event_key() {
    let mut c = EventCorrelator::default();
    let mut p = pod();
    p.spec.containers.push(Container {
        name: "other".into(),
        ..Container::default()
    });
    let e1 = make_event(
        &container_reference(&p, "main"),
        &source(),
        &already_present("busybox"),
        1,
    );
    let e2 = make_event(
        &container_reference(&p, "other"),
        &source(),
        &already_present("busybox"),
        2,
    );
    assert!(matches!(
        c.correlate(e1, 1, Duration::ZERO),
        EventAction::Create(_)
    ));
    assert!(matches!(
        c.correlate(e2, 2, Duration::ZERO),
        EventAction::Create(_)
    ));
}

/// Ten minutes of a crash loop (fake clock): the writes stay within upstream's bound
/// (a burst of 25, then one per five minutes), repeats are count increments, and the
/// loop keeps recording far more than is written.
#[test]
fn a_ten_minute_crash_loop_writes_no_more_than_upstreams_bound() {
    let minutes = crash_loop(&pod(), 10);
    let writes: u64 = minutes.iter().map(|m| u64::from(m.writes())).sum();
    let created: u32 = minutes.iter().map(|m| m.created).sum();
    let recorded: u32 = minutes.iter().map(|m| m.recorded).sum();
    assert!(
        writes <= upstream_allowance(10),
        "{writes} writes in 10 minutes; {minutes:?}"
    );
    assert_eq!(upstream_allowance(10), 27);
    // Four distinct messages (Pulled, Created, Started, BackOff): four objects, the rest
    // are count patches.
    assert_eq!(created, 4, "{minutes:?}");
    assert!(recorded > 50, "{minutes:?}");
    // After the burst, at most one write per five minutes.
    let late: u32 = minutes[5..].iter().map(Minute::writes).sum();
    assert!(late <= 2, "{minutes:?}");
}

use super::simulate::Minute;

#[test]
fn an_event_on_the_simulated_runtime_says_so_once() {
    let pulled = pulled(
        "busybox",
        GoDuration::parse("10µs").expect("a duration"),
        GoDuration::parse("12µs").expect("a duration"),
    );
    let marked = on_simulated_runtime(pulled.clone());
    assert_eq!(marked.reason, pulled.reason);
    assert_eq!(
        marked.message,
        format!("{} (simulated runtime: nothing ran)", pulled.message)
    );
    assert_eq!(on_simulated_runtime(marked.clone()), marked);
}
