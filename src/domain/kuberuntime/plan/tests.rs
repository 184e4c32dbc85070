//! The sync plan over hand-made runtime states: kills only when something is left,
//! the sandbox with its cgroup parent, crash-loop holds with upstream's message,
//! image decisions, config errors, and when to sync again.

use super::*;
use crate::domain::kuberuntime::labels::CONTAINER_BACKOFF_STEP_ANNOTATION;
use crate::domain::kuberuntime::runtime::{ContainerStatus, ImageUser, SandboxStatus};
use crate::domain::pod::{ObjectMeta, PodSpec, PullPolicy, RestartPolicy, VolumeMount};

const SEC: i64 = 1_000_000_000;
const NOW: i64 = 1_700_000_000 * SEC;
const IMAGE: &str = "busybox:1.36";
const PARENT: &str = "/kubepods/besteffort/poduid-1";

fn ctx() -> RequestContext {
    crate::domain::test_support::request_context()
}

fn container(name: &str, image: &str) -> Container {
    Container {
        name: name.into(),
        image: image.into(),
        ..Default::default()
    }
}

fn pod(containers: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: "web".into(),
            namespace: "default".into(),
            uid: "uid-1".into(),
            ..Default::default()
        },
        spec: PodSpec {
            containers,
            dns_policy: "Default".into(),
            ..Default::default()
        },
    }
}

fn sandbox(state: SandboxState) -> SandboxStatus {
    SandboxStatus {
        id: "sb1".into(),
        attempt: 0,
        state,
        created_at_nanos: 1,
        host_network: false,
        ip: "10.0.0.2".into(),
    }
}

/// An instance of `c` with restart count `attempt` in `state`.
fn instance(c: &Container, attempt: u32, state: ContainerState) -> ContainerStatus {
    ContainerStatus {
        attempt,
        hash: container_hash(c),
        image: c.image.clone(),
        created_at_nanos: i64::from(attempt) + 10,
        ..ContainerStatus::new(&format!("{}-{attempt}", c.name), &c.name, state)
    }
}

/// An instance that ran from `started` to `finished` seconds before NOW and exited 1.
fn crashed(c: &Container, attempt: u32, step: u32, started: i64, finished: i64) -> ContainerStatus {
    ContainerStatus {
        exit_code: 1,
        backoff_step: Some(step),
        started_at_nanos: NOW - started * SEC,
        finished_at_nanos: NOW - finished * SEC,
        ..instance(c, attempt, ContainerState::Exited)
    }
}

fn status(sandboxes: Vec<SandboxStatus>, containers: Vec<ContainerStatus>) -> PodRuntimeStatus {
    PodRuntimeStatus {
        uid: "uid-1".into(),
        name: "web".into(),
        namespace: "default".into(),
        sandboxes,
        containers,
    }
}

/// An image as the image service reports one: an id, no user (root).
fn image_present(image: &str) -> ImagePresence {
    ImagePresence::Present(ImageFacts {
        id: format!("sha256:id-of-{image}"),
        user: ImageUser::root(),
    })
}

fn present(images: &[&str]) -> BTreeMap<String, ImagePresence> {
    images
        .iter()
        .map(|i| ((*i).to_owned(), image_present(i)))
        .collect()
}

fn plan_with(
    pod: &Pod,
    runtime: &PodRuntimeStatus,
    images: &BTreeMap<String, ImagePresence>,
    image_backoff: &BTreeMap<String, Duration>,
) -> SyncPlan {
    plan_pod_sync(&SyncInputs {
        pod,
        runtime,
        images,
        image_backoff,
        now_unix_nanos: NOW,
        requests: &ctx(),
        cgroup_parent: PARENT,
        pod_inputs: &crate::domain::volumes::PodInputs::default(),
    })
}

fn plan(
    pod: &Pod,
    runtime: &PodRuntimeStatus,
    images: &BTreeMap<String, ImagePresence>,
) -> SyncPlan {
    plan_with(pod, runtime, images, &BTreeMap::new())
}

fn started(step: &ContainerPlan) -> &StartContainer {
    match &step.action {
        ContainerAction::Start(start) => start,
        ContainerAction::Held(held) => panic!("{} held: {held:?}", step.name),
    }
}

fn waiting(step: &ContainerPlan) -> (&str, &str, Duration) {
    let held = step
        .held()
        .unwrap_or_else(|| panic!("{} is not held", step.name));
    (
        held.waiting.reason.as_str(),
        held.waiting.message.as_str(),
        held.retry_after,
    )
}

#[test]
fn a_new_pod_gets_its_sandbox_under_its_cgroup_and_its_container_configs() {
    let p = pod(vec![container("app", IMAGE)]);
    let runtime = status(vec![], vec![]);
    let plan = plan(&p, &runtime, &present(&[IMAGE]));
    assert_eq!(plan.kill_pod, None, "nothing to kill in an empty runtime");
    assert!(plan.actions.kill_pod, "compute_pod_actions still says kill");
    let create = plan.create_sandbox.as_ref().expect("creates a sandbox");
    assert_eq!(create.attempt, 0);
    assert_eq!(
        create.directories,
        [
            PathBuf::from("/var/log/pods/default_web_uid-1"),
            PathBuf::from("/var/lib/kubelet/pods/uid-1")
        ]
    );
    assert_eq!(plan.sandbox.cgroup_parent, PARENT);
    assert_eq!(plan.sandbox.name, "web");
    assert_eq!(plan.sandbox_id, "");
    assert_eq!(plan.containers.len(), 1);
    let start = started(&plan.containers[0]);
    assert!(!start.pull_image);
    assert_eq!(start.config.name, "app");
    assert_eq!(start.config.attempt, 0);
    assert_eq!(
        start.config.annotations[CONTAINER_BACKOFF_STEP_ANNOTATION],
        "0"
    );
    assert_eq!(plan.resync_after, None);
    assert!(!plan.is_empty());
}

#[test]
fn a_running_pod_plans_nothing() {
    let app = container("app", IMAGE);
    let p = pod(vec![app.clone()]);
    let runtime = status(
        vec![sandbox(SandboxState::Ready)],
        vec![instance(&app, 0, ContainerState::Running)],
    );
    let plan = plan(&p, &runtime, &BTreeMap::new());
    assert!(plan.is_empty(), "{plan:?}");
    assert_eq!(
        plan.sandbox,
        SandboxConfig::default(),
        "no config built for nothing"
    );
    assert!(images_to_inspect(&p, &runtime, NOW).is_empty());
}

#[test]
fn a_pod_kill_is_planned_only_when_something_is_left_to_stop() {
    let app = container("app", IMAGE);
    let mut p = pod(vec![app.clone()]);
    p.spec.restart_policy = RestartPolicy::Never;
    // Finished, sandbox still ready: the sandbox is stopped.
    let mut runtime = status(
        vec![sandbox(SandboxState::Ready)],
        vec![crashed(&app, 0, 0, 30, 20)],
    );
    let plan_ready = plan(&p, &runtime, &BTreeMap::new());
    assert_eq!(plan_ready.kill_pod, Some(KillReason::NothingToKeep));
    assert!(plan_ready.kill_only);
    assert!(plan_ready.containers.is_empty());
    // Once stopped, a finished pod has nothing left to do (before, the rule was "the
    // runtime holds anything", so the planner listed a kill forever).
    runtime.sandboxes[0].state = SandboxState::NotReady;
    let plan_done = plan(&p, &runtime, &BTreeMap::new());
    assert_eq!(plan_done.kill_pod, None);
    assert!(plan_done.kill_only);
    assert!(plan_done.create_sandbox.is_none());
    assert!(plan_done.is_empty(), "{plan_done:?}");
    assert!(
        something_left_to_kill(&status(
            vec![sandbox(SandboxState::NotReady)],
            vec![instance(&app, 0, ContainerState::Created)],
        )),
        "a created container is stopped too"
    );
}

#[test]
fn a_changed_spec_kills_that_container_alone_and_starts_its_replacement() {
    let before = container("app", "busybox:1.35");
    let after = container("app", IMAGE);
    let p = pod(vec![after]);
    let runtime = status(
        vec![sandbox(SandboxState::Ready)],
        vec![instance(&before, 0, ContainerState::Running)],
    );
    let plan = plan(&p, &runtime, &present(&[IMAGE]));
    assert_eq!(plan.kill_pod, None);
    assert_eq!(plan.kill_containers.len(), 1);
    assert_eq!(plan.kill_containers[0].id, "app-0");
    assert_eq!(plan.sandbox_id, "sb1");
    let start = started(&plan.containers[0]);
    assert_eq!(start.config.attempt, 1, "the restart count goes on");
    assert_eq!(
        start.config.annotations[CONTAINER_BACKOFF_STEP_ANNOTATION], "0",
        "another spec starts its streak afresh"
    );
}

#[test]
fn a_first_crash_restarts_at_once_and_records_step_one() {
    let app = container("app", IMAGE);
    let p = pod(vec![app.clone()]);
    let runtime = status(
        vec![sandbox(SandboxState::Ready)],
        vec![crashed(&app, 0, 0, 5, 1)],
    );
    assert_eq!(images_to_inspect(&p, &runtime, NOW), [IMAGE]);
    let plan = plan(&p, &runtime, &present(&[IMAGE]));
    let start = started(&plan.containers[0]);
    assert_eq!(start.config.attempt, 1);
    assert_eq!(
        start.config.annotations[CONTAINER_BACKOFF_STEP_ANNOTATION],
        "1"
    );
    assert_eq!(plan.resync_after, None);
}

#[test]
fn a_crash_looping_container_is_held_with_upstreams_message_until_its_time() {
    let app = container("app", IMAGE);
    let p = pod(vec![app.clone()]);
    // Step 2 (third run) exited 4 s ago: 20 s back-off, 16 s left.
    let runtime = status(
        vec![sandbox(SandboxState::Ready)],
        vec![crashed(&app, 2, 2, 10, 4)],
    );
    assert!(
        images_to_inspect(&p, &runtime, NOW).is_empty(),
        "a held container needs no image"
    );
    let plan = plan(&p, &runtime, &BTreeMap::new());
    let (reason, message, retry) = waiting(&plan.containers[0]);
    assert_eq!(reason, "CrashLoopBackOff");
    assert_eq!(
        message,
        "back-off 20s restarting failed container=app pod=web_default(uid-1)"
    );
    assert_eq!(retry, Duration::from_secs(16));
    assert_eq!(plan.resync_after, Some(Duration::from_secs(16)));
    assert!(plan.image_pulls().is_empty());

    // Due: started, recording step 3.
    let later = plan_pod_sync(&SyncInputs {
        pod: &p,
        runtime: &runtime,
        images: &present(&[IMAGE]),
        image_backoff: &BTreeMap::new(),
        now_unix_nanos: NOW + 16 * SEC,
        requests: &ctx(),
        cgroup_parent: PARENT,
        pod_inputs: &crate::domain::volumes::PodInputs::default(),
    });
    let start = started(&later.containers[0]);
    assert_eq!(start.config.attempt, 3);
    assert_eq!(
        start.config.annotations[CONTAINER_BACKOFF_STEP_ANNOTATION],
        "3"
    );
}

#[test]
fn the_five_minute_cap_reads_as_go_prints_it() {
    let app = container("app", IMAGE);
    let p = pod(vec![app.clone()]);
    let runtime = status(
        vec![sandbox(SandboxState::Ready)],
        vec![crashed(&app, 12, 12, 2, 1)],
    );
    let plan = plan(&p, &runtime, &BTreeMap::new());
    let (_, message, retry) = waiting(&plan.containers[0]);
    assert_eq!(
        message,
        "back-off 5m0s restarting failed container=app pod=web_default(uid-1)"
    );
    assert_eq!(retry, Duration::from_secs(299));
}

#[test]
fn absent_images_are_pulled_once_for_every_container_that_needs_them() {
    let p = pod(vec![
        container("one", IMAGE),
        container("two", IMAGE),
        container("three", "nginx:1.27"),
    ]);
    let runtime = status(vec![], vec![]);
    assert_eq!(
        images_to_inspect(&p, &runtime, NOW),
        [IMAGE, "nginx:1.27"],
        "each image once"
    );
    let images = BTreeMap::from([
        (IMAGE.to_owned(), ImagePresence::Absent),
        ("nginx:1.27".to_owned(), image_present("nginx:1.27")),
    ]);
    let plan = plan(&p, &runtime, &images);
    assert_eq!(
        plan.image_pulls(),
        [(IMAGE.to_owned(), vec!["one".to_owned(), "two".to_owned()])]
    );
    assert!(started(&plan.containers[0]).pull_image);
    assert!(!started(&plan.containers[2]).pull_image);
}

#[test]
fn an_image_that_cannot_be_had_holds_the_container_with_upstreams_reason() {
    let mut never = container("app", IMAGE);
    never.image_pull_policy = Some(PullPolicy::Never);
    let runtime = status(vec![], vec![]);
    let absent = BTreeMap::from([(IMAGE.to_owned(), ImagePresence::Absent)]);

    let plan_never = plan(&pod(vec![never]), &runtime, &absent);
    assert_eq!(
        waiting(&plan_never.containers[0]),
        (
            "ErrImageNeverPull",
            "Container image \"busybox:1.36\" is not present with pull policy of Never",
            RETRY_AFTER_ERROR
        )
    );
    assert_eq!(plan_never.resync_after, Some(RETRY_AFTER_ERROR));

    let p = pod(vec![container("app", IMAGE)]);
    let backoff = BTreeMap::from([(IMAGE.to_owned(), Duration::from_secs(7))]);
    let plan_backoff = plan_with(&p, &runtime, &absent, &backoff);
    assert_eq!(
        waiting(&plan_backoff.containers[0]),
        (
            "ImagePullBackOff",
            "Back-off pulling image \"busybox:1.36\"",
            Duration::from_secs(7)
        )
    );
    assert!(plan_backoff.image_pulls().is_empty());
    // A present image needs no pull, so a pull back-off does not matter.
    let plan_present = plan_with(&p, &runtime, &present(&[IMAGE]), &backoff);
    assert!(!started(&plan_present.containers[0]).pull_image);

    let unknown = BTreeMap::from([(
        IMAGE.to_owned(),
        ImagePresence::Unknown("connection refused".into()),
    )]);
    let plan_unknown = plan(&p, &runtime, &unknown);
    assert_eq!(waiting(&plan_unknown.containers[0]).0, "ErrImageInspect");
    assert!(waiting(&plan_unknown.containers[0])
        .1
        .contains("connection refused"));
    let plan_unread = plan(&p, &runtime, &BTreeMap::new());
    assert_eq!(waiting(&plan_unread.containers[0]).0, "ErrImageInspect");

    // A name that is no reference: held before any inspection, pull or back-off.
    let invalid = pod(vec![container("app", "Busybox:UPPER")]);
    let plan_invalid = plan(&invalid, &runtime, &BTreeMap::new());
    assert_eq!(
        waiting(&plan_invalid.containers[0]),
        (
            "InvalidImageName",
            "Failed to apply default image tag \"Busybox:UPPER\": couldn't parse image reference \"Busybox:UPPER\": invalid reference format: repository name must be lowercase",
            RETRY_AFTER_ERROR
        )
    );
    assert!(plan_invalid.image_pulls().is_empty());
}

#[test]
fn a_config_that_cannot_be_built_holds_the_container_without_a_pull() {
    let mut app = container("app", IMAGE);
    app.volume_mounts = vec![VolumeMount {
        name: "nope".into(),
        mount_path: "/x".into(),
        read_only: false,
        sub_path: String::new(),
        sub_path_expr: String::new(),
        mount_propagation: None,
    }];
    let runtime = status(vec![], vec![]);
    let absent = BTreeMap::from([(IMAGE.to_owned(), ImagePresence::Absent)]);
    let plan = plan(&pod(vec![app]), &runtime, &absent);
    let (reason, message, retry) = waiting(&plan.containers[0]);
    assert_eq!(reason, "CreateContainerConfigError");
    assert!(message.contains("\"nope\""), "{message}");
    assert_eq!(retry, RETRY_AFTER_ERROR);
    assert!(plan.image_pulls().is_empty());
    assert!(plan.create_sandbox.is_some(), "the sandbox is still made");
}

#[test]
fn init_containers_are_planned_before_the_app_and_held_the_same_way() {
    let init = container("setup", IMAGE);
    let mut p = pod(vec![container("app", IMAGE)]);
    p.spec.init_containers = vec![init.clone()];
    // The init container failed twice; the app has not run.
    let runtime = status(
        vec![sandbox(SandboxState::Ready)],
        vec![crashed(&init, 1, 1, 3, 2)],
    );
    let plan = plan(&p, &runtime, &present(&[IMAGE]));
    assert_eq!(plan.init_containers.len(), 1);
    assert!(
        plan.containers.is_empty(),
        "the app waits for initialization"
    );
    let (reason, message, retry) = waiting(&plan.init_containers[0]);
    assert_eq!(reason, "CrashLoopBackOff");
    assert!(message.contains("container=setup"), "{message}");
    assert_eq!(retry, Duration::from_secs(8));
}

#[test]
fn dns_warnings_come_with_the_sandbox_creation() {
    let mut p = pod(vec![container("app", IMAGE)]);
    p.spec.dns_policy = "ClusterFirst".into();
    let plan = plan(&p, &status(vec![], vec![]), &present(&[IMAGE]));
    let create = plan.create_sandbox.expect("creates a sandbox");
    assert_eq!(
        create.dns_warnings,
        [crate::domain::kuberuntime::dns::DnsWarning::MissingClusterDns]
    );
}

#[test]
fn containers_are_created_from_the_image_id_as_the_images_user() {
    let p = pod(vec![container("app", IMAGE)]);
    let runtime = status(vec![], vec![]);
    let plan = plan(&p, &runtime, &present(&[IMAGE]));
    let config = &started(&plan.containers[0]).config;
    assert_eq!(config.image, format!("sha256:id-of-{IMAGE}"));
    assert_eq!(
        config.security.run_as_user,
        Some(0),
        "an image without USER runs as root"
    );
    assert_eq!(
        config.security.namespace_options.pid,
        crate::domain::kuberuntime::requests::NamespaceMode::Container
    );
    assert_eq!(config.security.masked_paths.len(), 9);
}

#[test]
fn run_as_non_root_on_a_root_image_is_a_config_error_with_upstreams_message() {
    let mut c = container("app", IMAGE);
    c.security_context = Some(crate::domain::pod::SecurityContext {
        run_as_non_root: Some(true),
        ..Default::default()
    });
    let p = pod(vec![c]);
    let runtime = status(vec![], vec![]);
    let plan = plan(&p, &runtime, &present(&[IMAGE]));
    let (reason, message, retry) = waiting(&plan.containers[0]);
    assert_eq!(reason, "CreateContainerConfigError");
    assert_eq!(
        message,
        "container has runAsNonRoot and image will run as root (pod: \"web_default(uid-1)\", container: app)"
    );
    assert_eq!(retry, RETRY_AFTER_ERROR);

    // An image still to pull is checked after its pull.
    let images = BTreeMap::from([(IMAGE.to_owned(), ImagePresence::Absent)]);
    let plan = plan_with(&p, &runtime, &images, &BTreeMap::new());
    let start = started(&plan.containers[0]);
    assert!(start.pull_image);
    let facts = ImageFacts {
        id: "sha256:pulled".into(),
        user: ImageUser::root(),
    };
    let held = complete_after_pull(&p, ContainerKind::Regular, 0, &start.config, &facts)
        .expect_err("held");
    assert_eq!(held.waiting.reason, "CreateContainerConfigError");
    let facts = ImageFacts {
        id: "sha256:pulled".into(),
        user: ImageUser::of(Some(1000), ""),
    };
    let config =
        complete_after_pull(&p, ContainerKind::Regular, 0, &start.config, &facts).expect("config");
    assert_eq!(config.image, "sha256:pulled");
    assert_eq!(config.security.run_as_user, Some(1000));
}

#[test]
fn a_rejected_pod_starts_nothing_and_stops_what_runs() {
    let mut p = pod(vec![container("app", IMAGE)]);
    p.spec.security_context = Some(crate::domain::pod::PodSecurityContext {
        sysctls: vec![crate::domain::pod::security::Sysctl {
            name: "kernel.msgmax".into(),
            value: "1".into(),
        }],
        ..Default::default()
    });
    let plan = plan(&p, &status(vec![], vec![]), &present(&[IMAGE]));
    let rejected = plan.rejected.as_ref().expect("rejected");
    assert_eq!(rejected.reason, "SysctlForbidden");
    assert!(plan.create_sandbox.is_none() && plan.containers.is_empty());
    assert!(plan.kill_pod.is_none(), "nothing runs");
    assert!(!plan.is_empty());

    let c = &p.spec.containers[0];
    let running = status(
        vec![sandbox(SandboxState::Ready)],
        vec![instance(c, 0, ContainerState::Running)],
    );
    let again = super::tests::plan(&p, &running, &present(&[IMAGE]));
    assert!(matches!(again.kill_pod, Some(KillReason::Rejected { .. })));
    assert!(again.kill_only);
}

#[test]
fn a_pod_with_a_refused_field_is_rejected_naming_it() {
    let value = serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-1"},
        "spec": {"hostnameOverride": "other",
                 "containers": [{"name": "app", "image": IMAGE}]}
    });
    let p = crate::domain::pod::pod_from_value(&value).expect("decodes");
    let plan = plan(&p, &status(vec![], vec![]), &present(&[IMAGE]));
    let rejected = plan.rejected.as_ref().expect("rejected");
    assert_eq!(rejected.reason, "PodFeatureUnsupported");
    assert!(
        rejected.message.ends_with(
            ": spec.hostnameOverride: the hostname override is not given to the sandbox"
        ),
        "{}",
        rejected.message
    );
    assert!(plan.create_sandbox.is_none() && plan.containers.is_empty());
}

/// A field the node cannot honour on a pod already running (adopted from another kubelet
/// in a swap): the pod runs on (nothing stopped), warned about, rather than being killed.
#[test]
fn a_refused_field_on_a_running_pod_warns_and_stops_nothing() {
    let value = serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-1"},
        "spec": {"containers": [{"name": "app", "image": IMAGE}],
                 "hostnameOverride": "other"}
    });
    let p = crate::domain::pod::pod_from_value(&value).expect("decodes");
    let c = &p.spec.containers[0];
    let running = status(
        vec![sandbox(SandboxState::Ready)],
        vec![instance(c, 0, ContainerState::Running)],
    );
    let plan = plan(&p, &running, &present(&[IMAGE]));
    assert!(plan.rejected.is_none());
    assert!(plan.kill_pod.is_none() && plan.kill_containers.is_empty());
    let unhonoured = plan.unhonoured.as_ref().expect("warned about");
    assert_eq!(unhonoured.reason, "PodFeatureUnsupported");
    assert!(
        unhonoured.message.contains("spec.hostnameOverride"),
        "{}",
        unhonoured.message
    );
    // The same pod, new on the node, is refused.
    let fresh = super::tests::plan(&p, &status(vec![], vec![]), &present(&[IMAGE]));
    assert!(fresh.rejected.is_some());
}

fn with_debugger(target: &str) -> Pod {
    let mut p = pod(vec![container("app", IMAGE)]);
    p.spec
        .init_containers
        .push(container("setup", "registry.example/setup:1"));
    p.spec
        .ephemeral_containers
        .push(crate::domain::pod::EphemeralContainer {
            container: container("debugger", IMAGE),
            target_container_name: target.into(),
        });
    p
}

/// Upstream's `computePodActions`: an ephemeral container starts in the running sandbox
/// before the init containers (a stuck init container does not keep it out), joins its
/// target's process namespace, and is never started again once it has run.
#[test]
fn an_ephemeral_container_starts_once_in_its_targets_process_namespace() {
    let p = with_debugger("app");
    let setup = &p.spec.init_containers[0];
    let app = &p.spec.containers[0];
    let debugger = &p.spec.ephemeral_containers[0].container;
    let mut running = status(
        vec![sandbox(SandboxState::Ready)],
        vec![
            ContainerStatus {
                exit_code: 0,
                ..instance(setup, 0, ContainerState::Exited)
            },
            instance(app, 0, ContainerState::Running),
        ],
    );
    let plan1 = plan(&p, &running, &present(&[IMAGE]));
    assert!(plan1.kill_pod.is_none() && plan1.containers.is_empty());
    let [step] = plan1.ephemeral_containers.as_slice() else {
        panic!("one ephemeral start: {:?}", plan1.ephemeral_containers);
    };
    assert_eq!(
        (step.kind, step.name.as_str()),
        (ContainerKind::Ephemeral, "debugger")
    );
    let ContainerAction::Start(start) = &step.action else {
        panic!("started: {:?}", step.action);
    };
    let ns = &start.config.security.namespace_options;
    assert_eq!(
        (ns.pid, ns.target_id.as_str()),
        (NamespaceMode::Target, "app-0")
    );
    assert_eq!(
        plan1.steps().next().map(|s| s.kind),
        Some(ContainerKind::Ephemeral)
    );

    // Exited, it stays exited: no restart whatever the restart policy.
    running.containers.push(ContainerStatus {
        exit_code: 1,
        ..instance(debugger, 0, ContainerState::Exited)
    });
    assert!(plan(&p, &running, &present(&[IMAGE])).is_empty());

    // A sandbox made afresh starts the pod's own containers only.
    let fresh = plan(&p, &status(vec![], vec![]), &present(&[IMAGE]));
    assert!(fresh.create_sandbox.is_some() && fresh.ephemeral_containers.is_empty());
}

#[test]
fn an_ephemeral_containers_missing_target_holds_it_with_upstreams_message() {
    let p = with_debugger("app");
    let setup = &p.spec.init_containers[0];
    // Initialization still runs: the debugger starts anyway, but `app` has no instance.
    let initializing = status(
        vec![sandbox(SandboxState::Ready)],
        vec![instance(setup, 0, ContainerState::Running)],
    );
    let plan = plan(&p, &initializing, &present(&[IMAGE]));
    let held = plan.ephemeral_containers[0].held().expect("held");
    assert_eq!(held.waiting.reason, "CreateContainerConfigError");
    assert_eq!(held.waiting.message, "unable to find target container app");
    assert_eq!(plan.resync_after, Some(RETRY_AFTER_ERROR));

    // Without a target, or in a pod sharing one process namespace, the pod's is used.
    let mut shared = with_debugger("");
    let untargeted = super::tests::plan(&shared, &initializing, &present(&[IMAGE]));
    let ContainerAction::Start(start) = &untargeted.ephemeral_containers[0].action else {
        panic!("started");
    };
    assert_eq!(
        start.config.security.namespace_options.pid,
        NamespaceMode::Container
    );
    shared.spec.share_process_namespace = Some(true);
    shared.spec.ephemeral_containers[0].target_container_name = "setup".into();
    let in_pod = super::tests::plan(&shared, &initializing, &present(&[IMAGE]));
    let ContainerAction::Start(start) = &in_pod.ephemeral_containers[0].action else {
        panic!("started");
    };
    let ns = &start.config.security.namespace_options;
    assert_eq!((ns.pid, ns.target_id.as_str()), (NamespaceMode::Pod, ""));
}
