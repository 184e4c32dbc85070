//! The sync's step machine driven by hand: the order upstream's `SyncPod` takes (the
//! cases of `kuberuntime_manager_test.go`'s `TestSyncPod*`: a new pod, an init container
//! held, a failed sandbox, a pull for several containers), the facts asked only once they
//! exist, and what each failure holds a container with.

use super::*;
use crate::domain::kuberuntime::plan::{ImageFacts, ImagePresence};
use crate::domain::kuberuntime::runtime::{
    ContainerState, ContainerStatus, ImageUser, PodRuntimeStatus,
};
use crate::domain::pod::{
    container_hash, EnvVar, EnvVarSource, ObjectFieldSelector, ObjectMeta, PodSpec, PullPolicy,
};
use crate::domain::probe::spec::LifecycleHandler;
use crate::domain::units::duration::GoDuration;

const SEC: i64 = 1_000_000_000;
const NOW: i64 = 1_700_000_000 * SEC;
const IMAGE: &str = "busybox:1.36";

fn ctx() -> RequestContext {
    crate::domain::test_support::request_context()
}

fn container(name: &str, image: &str) -> Container {
    Container {
        name: name.into(),
        image: image.into(),
        termination_message_path: String::new(),
        ..Default::default()
    }
}

fn pod(init: Vec<Container>, containers: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: "web".into(),
            namespace: "default".into(),
            uid: "uid-1".into(),
            ..Default::default()
        },
        spec: PodSpec {
            init_containers: init,
            containers,
            dns_policy: "Default".into(),
            ..Default::default()
        },
    }
}

fn present(image: &str) -> ImagePresence {
    ImagePresence::Present(ImageFacts {
        id: format!("sha256:{image}"),
        user: ImageUser::root(),
    })
}

fn ready_sandbox(ip: &str) -> SandboxStatus {
    SandboxStatus {
        id: "sb-new".into(),
        attempt: 0,
        state: SandboxState::Ready,
        created_at_nanos: NOW,
        host_network: false,
        ip: ip.into(),
    }
}

/// What each step was, in words a test compares.
fn name(step: &Step) -> String {
    match step {
        Step::Need(need) => format!("need {}", need_name(need)),
        Step::Do(effect) => format!("do {}", effect_name(effect)),
        Step::Done(_) => "done".into(),
    }
}

fn need_name(need: &Need) -> String {
    match need {
        Need::Runtime => "runtime".into(),
        Need::Inputs { images } => format!("inputs {}", images.join(",")),
        Need::SandboxStatus { id } => format!("sandbox status {id}"),
        Need::NodeHosts => "node hosts".into(),
        Need::PulledImage { image } => format!("pulled image {image}"),
        Need::RuntimeAfter { created } => format!("runtime after (added: {})", created.is_some()),
    }
}

fn effect_name(effect: &Effect) -> String {
    match effect {
        Effect::SetUpVolumes { all } => format!("set up volumes (all: {all})"),
        Effect::Event { container, event } => format!(
            "event {}{}",
            event.reason,
            container
                .as_deref()
                .map(|c| format!(" on {c}"))
                .unwrap_or_default()
        ),
        Effect::Warn(_) => "warn".into(),
        Effect::StopPod { .. } => "stop pod".into(),
        Effect::StopContainer { name, .. } => format!("stop {name}"),
        Effect::EnsurePodCgroup => "pod cgroup".into(),
        Effect::CreateSandbox { .. } => "create sandbox".into(),
        Effect::WriteHostsFile { .. } => "write hosts".into(),
        Effect::PullImage { image, .. } => format!("pull {image}"),
        Effect::CreateMessageFile { container, .. } => format!("message file {container}"),
        Effect::BindSubPaths { container, .. } => format!("bind subpaths {container}"),
        Effect::CreateContainer { name, .. } => format!("create {name}"),
        Effect::StartContainer { container, .. } => format!("start {container}"),
        Effect::PostStart { index, .. } => format!("postStart {index}"),
        Effect::RemoveDeadContainer { id, .. } => format!("remove dead {id}"),
        Effect::RemoveDeadSandbox { id } => format!("remove dead sandbox {id}"),
    }
}

/// The answers of a world where everything works, except what `special` answers.
fn drive(
    pod: &Pod,
    runtime: PodRuntimeStatus,
    images: BTreeMap<String, ImagePresence>,
    mut special: impl FnMut(&Step) -> Option<Answer>,
) -> (Vec<String>, Vec<Step>, SyncOutcome) {
    let requests = ctx();
    let mut sync = PodSync::new(pod, &requests, NOW);
    let mut names = Vec::new();
    let mut steps = Vec::new();
    for _ in 0..1_000 {
        let step = sync.step();
        names.push(name(&step));
        if let Step::Done(outcome) = step {
            return (names, steps, *outcome);
        }
        let answer = special(&step).unwrap_or_else(|| match &step {
            Step::Need(Need::Runtime) => Answer::Runtime(Ok(RuntimeView {
                status: runtime.clone(),
                sandbox_of: BTreeMap::new(),
            })),
            Step::Need(Need::Inputs { .. }) => Answer::Inputs(Box::new(PlanningFacts {
                images: images.clone(),
                cgroup_parent: "/kubepods/besteffort/poduid-1".into(),
                ..Default::default()
            })),
            Step::Need(Need::SandboxStatus { .. }) => {
                Answer::SandboxStatus(Some(ready_sandbox("10.0.0.7")))
            }
            Step::Need(Need::NodeHosts) => Answer::NodeHosts("127.0.0.1 localhost\n".into()),
            Step::Need(Need::PulledImage { image }) => {
                Answer::PulledImage(PulledImage::Facts(ImageFacts {
                    id: format!("sha256:{image}"),
                    user: ImageUser::root(),
                }))
            }
            Step::Need(Need::RuntimeAfter { .. }) => Answer::RuntimeAfter(None),
            Step::Do(Effect::SetUpVolumes { .. }) => Answer::Volumes {
                failed: Vec::new(),
                refresh_after: None,
            },
            Step::Do(Effect::CreateSandbox { .. }) => Answer::SandboxCreated("sb-new".into()),
            Step::Do(Effect::PullImage { .. }) => Answer::Pulled {
                took: GoDuration::from_nanos(SEC),
            },
            Step::Do(Effect::CreateContainer { name, .. }) => {
                Answer::ContainerCreated(format!("id-{name}"))
            }
            _ => Answer::Done,
        });
        steps.push(step);
        sync.feed(answer);
    }
    panic!("the sync did not end: {names:?}");
}

fn images(list: &[&str]) -> BTreeMap<String, ImagePresence> {
    list.iter().map(|i| (i.to_string(), present(i))).collect()
}

#[test]
fn a_new_pod_creates_its_sandbox_then_its_containers_in_upstreams_order() {
    let p = pod(vec![], vec![container("app", IMAGE)]);
    let (names, _, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |_| None);
    assert_eq!(
        names,
        [
            "need runtime",
            "need inputs busybox:1.36",
            "do set up volumes (all: true)",
            "do pod cgroup",
            "do create sandbox",
            "need sandbox status sb-new",
            "do write hosts",
            "do event Pulled on app",
            "do create app",
            "do event Created on app",
            "do start app",
            "do event Started on app",
            "need runtime after (added: true)",
            "done",
        ]
    );
    assert!(!outcome.failed);
    assert!(outcome.waiting.is_empty());
}

#[test]
fn the_new_sandboxs_ip_reaches_the_containers_environment() {
    let mut app = container("app", IMAGE);
    app.env.push(EnvVar {
        name: "MY_IP".into(),
        value: String::new(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "status.podIP".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    });
    let p = pod(vec![], vec![app]);
    let (_, steps, _) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |_| None);
    let env = steps
        .iter()
        .find_map(|s| match s {
            Step::Do(Effect::CreateContainer { config, .. }) => Some(config.envs.clone()),
            _ => None,
        })
        .expect("the container is created");
    assert!(
        env.iter().any(|(k, v)| k == "MY_IP" && v == "10.0.0.7"),
        "{env:?}"
    );
}

#[test]
fn a_failed_mount_of_a_new_pod_holds_every_container_and_creates_no_sandbox() {
    let p = pod(
        vec![container("init", IMAGE)],
        vec![container("app", IMAGE)],
    );
    let (names, _, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |s| {
        matches!(s, Step::Do(Effect::SetUpVolumes { .. })).then(|| Answer::Volumes {
            failed: vec!["configmap \"cfg\" not found".into()],
            refresh_after: None,
        })
    });
    assert!(!names.iter().any(|n| n == "do create sandbox"), "{names:?}");
    assert!(
        names.iter().any(|n| n == "do event FailedMount"),
        "{names:?}"
    );
    assert!(outcome.failed);
    for c in ["init", "app"] {
        assert_eq!(outcome.waiting[c].reason, "ContainerCreating");
        assert_eq!(outcome.waiting[c].message, "configmap \"cfg\" not found");
    }
}

#[test]
fn an_init_container_that_does_not_start_stops_the_sync() {
    let p = pod(
        vec![container("first", IMAGE), container("second", IMAGE)],
        vec![container("app", IMAGE)],
    );
    let (names, _, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |s| {
        matches!(s, Step::Do(Effect::StartContainer { .. }))
            .then(|| Answer::Failed("exec format error".into()))
    });
    assert!(names.iter().any(|n| n == "do start first"), "{names:?}");
    assert!(!names
        .iter()
        .any(|n| n.contains("second") || n.contains("create app")));
    assert_eq!(outcome.waiting["first"].reason, "RunContainerError");
    assert_eq!(outcome.waiting["first"].message, "exec format error");
    // Held by an error: the worker backs off.
    assert!(outcome.failed);
    assert_eq!(outcome.retry_after, Some(RETRY_AFTER_ERROR));
}

/// Upstream's step 5: ephemeral containers start first, in the running sandbox, while an
/// init container still runs; one that fails to start does not stop the next.
#[test]
fn ephemeral_containers_start_first_and_one_failing_does_not_stop_the_sync() {
    let mut p = pod(
        vec![container("first", IMAGE)],
        vec![container("app", IMAGE)],
    );
    for name in ["broken", "debugger"] {
        p.spec
            .ephemeral_containers
            .push(crate::domain::pod::EphemeralContainer {
                container: container(name, IMAGE),
                target_container_name: String::new(),
            });
    }
    let first = &p.spec.init_containers[0];
    let runtime = PodRuntimeStatus {
        sandboxes: vec![ready_sandbox("10.0.0.9")],
        containers: vec![ContainerStatus {
            hash: container_hash(first),
            ..ContainerStatus::new("first-0", "first", ContainerState::Running)
        }],
        ..PodRuntimeStatus::default()
    };
    let (names, steps, outcome) = drive(&p, runtime, images(&[IMAGE]), |s| match s {
        Step::Do(Effect::StartContainer { container, .. }) if container == "broken" => {
            Some(Answer::Failed("exec format error".into()))
        }
        _ => None,
    });
    let creates: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("do create"))
        .collect();
    assert_eq!(
        creates,
        ["do create broken", "do create debugger"],
        "{names:?}"
    );
    assert!(steps.iter().any(|s| matches!(
        s,
        Step::Do(Effect::CreateContainer { kind: ContainerKind::Ephemeral, sandbox_id, .. })
            if sandbox_id == "sb-new"
    )));
    assert!(names.iter().any(|n| n == "do start debugger"), "{names:?}");
    assert_eq!(outcome.waiting["broken"].reason, "RunContainerError");
    assert_eq!(outcome.holds[0].kind, ContainerKind::Ephemeral);
}

/// "No field silently ignored": an ephemeral container added to a running pod with a
/// field the node cannot honour is held with `CreateContainerConfigError` naming it; the
/// pod and its other ephemeral containers run on.
#[test]
fn an_ephemeral_container_with_a_refused_field_is_held_naming_it() {
    let mut p = pod(vec![], vec![container("app", IMAGE)]);
    for name in ["odd", "debugger"] {
        p.spec
            .ephemeral_containers
            .push(crate::domain::pod::EphemeralContainer {
                container: container(name, IMAGE),
                target_container_name: String::new(),
            });
    }
    p.spec.refused_fields = vec![crate::domain::pod::fields::RefusedField {
        path: "spec.ephemeralContainers[0].securityContext.appArmorProfile".into(),
        why: "AppArmor profiles are not applied".into(),
    }];
    let app = &p.spec.containers[0];
    let runtime = PodRuntimeStatus {
        sandboxes: vec![ready_sandbox("10.0.0.9")],
        containers: vec![ContainerStatus {
            hash: container_hash(app),
            ..ContainerStatus::new("app-0", "app", ContainerState::Running)
        }],
        ..PodRuntimeStatus::default()
    };
    let (names, _, outcome) = drive(&p, runtime, images(&[IMAGE]), |_| None);
    assert!(!names.iter().any(|n| n == "do create odd"), "{names:?}");
    assert!(names.iter().any(|n| n == "do start debugger"), "{names:?}");
    let held = &outcome.waiting["odd"];
    assert_eq!(held.reason, "CreateContainerConfigError");
    assert_eq!(
        held.message,
        "the node cannot honour spec.ephemeralContainers[0].securityContext.appArmorProfile: AppArmor profiles are not applied"
    );
    assert!(outcome.rejected.is_none(), "the running pod runs on");
}

/// Upstream's DNS configurer: a limit the pod's DNS settings exceed is a Warning event
/// on the pod, recorded as its sandbox is made.
#[test]
fn dns_settings_beyond_the_limits_are_evented_with_the_sandbox() {
    let mut p = pod(vec![], vec![container("app", IMAGE)]);
    p.spec.dns_policy = "None".into();
    p.spec.dns_config = Some(crate::domain::pod::PodDnsConfig {
        nameservers: ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
            .map(String::from)
            .to_vec(),
        ..Default::default()
    });
    let (names, steps, _) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |_| None);
    let event = names
        .iter()
        .position(|n| n == "do event DNSConfigForming")
        .expect("the event");
    let create = names.iter().position(|n| n == "do create sandbox");
    assert!(create.is_some_and(|c| event < c), "{names:?}");
    let message = steps.iter().find_map(|s| match s {
        Step::Do(Effect::Event { event, .. }) if event.reason == "DNSConfigForming" => {
            Some(event.message.clone())
        }
        _ => None,
    });
    assert_eq!(
        message.as_deref(),
        Some("Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.0.0.1 10.0.0.2 10.0.0.3")
    );
}

#[test]
fn one_pull_serves_every_container_of_the_image_and_a_failed_pull_holds_them_all() {
    let p = pod(vec![], vec![container("a", IMAGE), container("b", IMAGE)]);
    let mut pulls = 0;
    let (names, steps, outcome) = drive(
        &p,
        PodRuntimeStatus::default(),
        BTreeMap::from([(IMAGE.to_owned(), ImagePresence::Absent)]),
        |s| {
            matches!(s, Step::Do(Effect::PullImage { .. })).then(|| {
                pulls += 1;
                Answer::PullFailed {
                    error: "no registry".into(),
                    retry_after: Duration::from_secs(1),
                }
            })
        },
    );
    assert_eq!(pulls, 1, "{names:?}");
    let pulled_for = steps.iter().find_map(|s| match s {
        Step::Do(Effect::PullImage { containers, .. }) => Some(containers.clone()),
        _ => None,
    });
    assert_eq!(pulled_for, Some(vec!["a".to_owned(), "b".to_owned()]));
    for c in ["a", "b"] {
        assert_eq!(outcome.waiting[c].reason, "ErrImagePull");
        assert_eq!(
            outcome.waiting[c].message,
            "Failed to pull image \"busybox:1.36\": no registry"
        );
    }
    assert!(!names.iter().any(|n| n.starts_with("do create a")));
    assert_eq!(outcome.retry_after, Some(Duration::from_secs(1)));
}

#[test]
fn a_pulled_image_is_inspected_and_its_user_checked_before_the_create() {
    let mut app = container("app", IMAGE);
    app.image_pull_policy = Some(PullPolicy::Always);
    app.security_context = Some(crate::domain::pod::SecurityContext {
        run_as_non_root: Some(true),
        ..Default::default()
    });
    let p = pod(vec![], vec![app]);
    let (names, _, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |_| None);
    let inspected = names
        .iter()
        .position(|n| n == "need pulled image busybox:1.36");
    assert!(inspected.is_some(), "{names:?}");
    assert!(!names.iter().any(|n| n == "do create app"), "{names:?}");
    assert_eq!(outcome.waiting["app"].reason, "CreateContainerConfigError");
}

#[test]
fn a_sandbox_that_cannot_be_created_fails_the_sync_with_upstreams_event() {
    let p = pod(vec![], vec![container("app", IMAGE)]);
    let (names, _, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |s| {
        matches!(s, Step::Do(Effect::CreateSandbox { .. })).then(|| Answer::Failed("no CNI".into()))
    });
    assert!(
        names.iter().any(|n| n == "do event FailedCreatePodSandBox"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n == "do create app"));
    assert!(outcome.failed);
    assert_eq!(outcome.retry_after, Some(RETRY_AFTER_ERROR));
}

/// Upstream's `runtimeclass.go`: a pod of a class that cannot be found is not given a
/// sandbox; one of a found class gets its handler.
#[test]
fn a_runtime_class_gives_the_sandbox_its_handler_or_fails_the_sync() {
    use crate::domain::volumes::{Fetched, RuntimeClassData};
    let mut p = pod(vec![], vec![container("app", IMAGE)]);
    p.spec.runtime_class_name = Some("alt".into());
    let inputs = |class: Fetched<RuntimeClassData>| {
        let mut facts = PlanningFacts {
            images: images(&[IMAGE]),
            cgroup_parent: "/kubepods/besteffort/poduid-1".into(),
            ..Default::default()
        };
        facts
            .pod_inputs
            .objects
            .runtime_classes
            .insert("alt".into(), class);
        Answer::Inputs(Box::new(facts))
    };

    let found = Fetched::Found(RuntimeClassData {
        handler: "runc-alt".into(),
    });
    let (_, steps, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |s| {
        matches!(s, Step::Need(Need::Inputs { .. })).then(|| inputs(found.clone()))
    });
    let handler = steps.iter().find_map(|s| match s {
        Step::Do(Effect::CreateSandbox { config, .. }) => Some(config.runtime_handler.clone()),
        _ => None,
    });
    assert_eq!(handler.as_deref(), Some("runc-alt"));
    assert!(!outcome.failed);

    let (names, steps, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |s| {
        matches!(s, Step::Need(Need::Inputs { .. })).then(|| inputs(Fetched::NotFound))
    });
    assert!(!names.iter().any(|n| n == "do create sandbox"), "{names:?}");
    let event = steps.iter().find_map(|s| match s {
        Step::Do(Effect::Event { event, .. }) => Some(event.clone()),
        _ => None,
    });
    let event = event.expect("an event");
    assert_eq!(event.reason, "FailedCreatePodSandBox");
    assert_eq!(
        event.message,
        "Failed to create pod sandbox: runtimeclass.node.k8s.io \"alt\" not found"
    );
    assert!(outcome.failed);
    assert_eq!(outcome.retry_after, Some(RETRY_AFTER_ERROR));
}

#[test]
fn a_runtime_that_cannot_be_read_fails_the_sync_before_any_effect() {
    let p = pod(vec![], vec![container("app", IMAGE)]);
    let (names, _, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |s| {
        matches!(s, Step::Need(Need::Runtime)).then(|| Answer::Runtime(Err("down".into())))
    });
    assert_eq!(names, ["need runtime", "do warn", "done"]);
    assert!(outcome.failed);
}

#[test]
fn a_changed_container_is_stopped_with_the_pods_grace_and_started_again() {
    let app = container("app", IMAGE);
    let mut old = app.clone();
    old.image = "busybox:1.35".into();
    let running = ContainerStatus {
        hash: container_hash(&old),
        image: old.image.clone(),
        created_at_nanos: NOW - 10 * SEC,
        ..ContainerStatus::new("c-old", "app", ContainerState::Running)
    };
    let status = PodRuntimeStatus {
        uid: "uid-1".into(),
        name: "web".into(),
        namespace: "default".into(),
        sandboxes: vec![SandboxStatus {
            id: "sb1".into(),
            ..ready_sandbox("10.0.0.2")
        }],
        containers: vec![running],
    };
    let mut p = pod(vec![], vec![app]);
    p.spec.termination_grace_period_seconds = Some(5);
    let (names, steps, _) = drive(&p, status, images(&[IMAGE]), |_| None);
    let stop = steps.iter().find_map(|s| match s {
        Step::Do(Effect::StopContainer {
            grace_secs,
            sandbox_ip,
            ..
        }) => Some((*grace_secs, sandbox_ip.clone())),
        _ => None,
    });
    assert_eq!(stop, Some((5, "10.0.0.2".to_owned())), "{names:?}");
    let stop_at = names.iter().position(|n| n == "do stop app");
    let create_at = names.iter().position(|n| n == "do create app");
    assert!(stop_at < create_at, "{names:?}");
    assert!(!names.iter().any(|n| n == "do create sandbox"));
}

#[test]
fn a_failed_post_start_hook_holds_the_container_and_the_next_one_starts() {
    let mut hooked = container("hooked", IMAGE);
    hooked.lifecycle = Some(crate::domain::probe::spec::Lifecycle {
        post_start: Some(LifecycleHandler::default()),
        pre_stop: None,
    });
    let p = pod(vec![], vec![hooked, container("other", IMAGE)]);
    let (names, _, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |s| {
        matches!(s, Step::Do(Effect::PostStart { .. }))
            .then(|| Answer::Failed("Exec lifecycle hook failed".into()))
    });
    assert_eq!(outcome.waiting["hooked"].reason, "PostStartHookError");
    assert!(names.iter().any(|n| n == "do start other"), "{names:?}");
}

#[test]
fn an_answer_out_of_order_ends_the_sync_as_failed() {
    let p = pod(vec![], vec![container("app", IMAGE)]);
    let (names, _, outcome) = drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |s| {
        matches!(s, Step::Need(Need::Inputs { .. })).then(|| Answer::NodeHosts(String::new()))
    });
    assert_eq!(names.last().map(String::as_str), Some("done"));
    assert!(outcome.failed);
}

#[test]
fn the_dry_run_takes_the_same_steps_as_a_sync_where_everything_works() {
    let p = pod(
        vec![container("init", IMAGE)],
        vec![container("app", "nginx:1")],
    );
    let known = BTreeMap::from([
        (IMAGE.to_owned(), present(IMAGE)),
        ("nginx:1".to_owned(), ImagePresence::Absent),
    ]);
    let (_, steps, outcome) = drive(
        &p,
        PodRuntimeStatus::default(),
        known.clone(),
        |s| match s {
            // What the planner cannot know: the IP, a pulled image's user.
            Step::Need(Need::SandboxStatus { .. }) => Some(Answer::SandboxStatus(None)),
            Step::Need(Need::PulledImage { .. }) => {
                Some(Answer::PulledImage(PulledImage::NotKnown))
            }
            Step::Do(Effect::CreateSandbox { .. }) => Some(Answer::SandboxCreated(String::new())),
            Step::Do(Effect::CreateContainer { name, .. }) => {
                Some(Answer::ContainerCreated(format!("(new {name})")))
            }
            Step::Do(Effect::PullImage { .. }) => Some(Answer::Pulled {
                took: GoDuration::from_nanos(0),
            }),
            _ => None,
        },
    );
    let sync_effects: Vec<Effect> = steps
        .into_iter()
        .filter_map(|s| match s {
            Step::Do(effect) => Some(effect),
            _ => None,
        })
        .collect();
    let requests = ctx();
    let run = dry_run(
        &p,
        &requests,
        NOW,
        &RuntimeView::default(),
        &known,
        "/kubepods/besteffort/poduid-1",
    );
    assert_eq!(run.effects, sync_effects);
    assert_eq!(run.outcome.waiting, outcome.waiting);
}

#[test]
fn a_refused_pod_records_upstreams_rejection_event_and_runs_nothing() {
    let mut p = pod(vec![], vec![container("app", IMAGE)]);
    p.spec.refused_fields = vec![crate::domain::pod::fields::RefusedField {
        path: "spec.runtimeClassName".into(),
        why: "not resolved".into(),
    }];
    let (names, steps, outcome) =
        drive(&p, PodRuntimeStatus::default(), images(&[IMAGE]), |_| None);
    assert_eq!(
        names,
        [
            "need runtime",
            "need inputs busybox:1.36",
            "do warn",
            "do event PodFeatureUnsupported",
            "done",
        ]
    );
    let message = steps.iter().find_map(|s| match s {
        Step::Do(Effect::Event { event, .. }) => Some(event.message.clone()),
        _ => None,
    });
    assert_eq!(
        message.as_deref(),
        Some("Pod requires node features that are not available: spec.runtimeClassName: not resolved")
    );
    let rejected = outcome.rejected.expect("rejected");
    assert_eq!(rejected.reason, "PodFeatureUnsupported");
}
