//! The planner over in-memory inputs: pod decisions, removals, node facts, exit codes.

use std::sync::Arc;

use super::*;
use crate::adapters::fake::FakeHost;
use crate::app::test_support::resolved_on;
use crate::domain::kuberuntime::runtime::{ContainerStatus, SandboxState, SandboxStatus};
use crate::domain::pod::{container_hash, Container};

/// The configuration on the fake machine named `node-a`.
fn resolved(args: &[&str]) -> ResolvedConfig {
    resolved_on(&Arc::new(FakeHost::new().with_hostname("node-a")), args)
        .expect("valid configuration")
}

fn pod(name: &str, uid: &str, images: &[(&str, &str)]) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = name.into();
    pod.metadata.namespace = "default".into();
    pod.metadata.uid = uid.into();
    pod.metadata
        .annotations
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
    for (container, image) in images {
        pod.spec.containers.push(Container {
            name: (*container).into(),
            image: (*image).into(),
            ..Container::default()
        });
    }
    pod
}

/// The runtime state of `pod` running as specified (one ready sandbox, every
/// container running from the current spec).
fn running(pod: &Pod) -> PodRuntimeStatus {
    PodRuntimeStatus {
        uid: pod.metadata.uid.clone(),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        sandboxes: vec![SandboxStatus {
            id: format!("sb-{}", pod.metadata.uid),
            attempt: 0,
            state: SandboxState::Ready,
            created_at_nanos: 1,
            host_network: false,
            ip: "10.0.0.2".into(),
        }],
        containers: pod
            .spec
            .containers
            .iter()
            .map(|c| ContainerStatus {
                hash: container_hash(c),
                image: c.image.clone(),
                ..ContainerStatus::new(
                    &format!("c-{}-{}", pod.metadata.uid, c.name),
                    &c.name,
                    ContainerState::Running,
                )
            })
            .collect(),
    }
}

fn inputs(
    config: ResolvedConfig,
    desired: Vec<Pod>,
    observed: Vec<PodRuntimeStatus>,
) -> PlanInputs {
    PlanInputs {
        resolved: config,
        cgroup_version: CgroupVersion::V2,
        node_stats: BTreeMap::new(),
        desired,
        sources_complete: true,
        warnings: Vec::new(),
        observed,
    }
}

#[test]
fn running_pods_need_nothing_and_a_new_one_gets_a_sandbox_and_its_containers() {
    let a = pod("a", "ua", &[("app", "busybox")]);
    let b = pod("b", "ub", &[("app", "busybox")]);
    let c = pod("c", "uc", &[("one", "busybox"), ("two", "nginx")]);
    let plan = compute_plan(&inputs(
        resolved(&[]),
        vec![c.clone(), a.clone(), b.clone()],
        vec![running(&a), running(&b)],
    ));
    assert!(plan.valid, "{:?}", plan.problems);
    let names: Vec<&str> = plan.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"], "sorted by namespace and name");
    assert_eq!(plan.pods[0].action_count, 0);
    assert_eq!(plan.pods[0].running, ["app"]);
    assert_eq!(plan.pods[1].action_count, 0);
    let new = &plan.pods[2].actions;
    assert_eq!(
        new.kill_pod, None,
        "nothing to kill for a pod the runtime lacks"
    );
    assert_eq!(new.create_sandbox.as_ref().map(|s| s.attempt), Some(0));
    let started: Vec<(&str, &str)> = new
        .start_containers
        .iter()
        .map(|s| (s.name.as_str(), s.image.as_str()))
        .collect();
    assert_eq!(started, [("one", "busybox"), ("two", "nginx")]);
    assert_eq!(plan.action_count, 3);
    assert_eq!(plan.exit_code(), EXIT_ACTIONS);
    assert!(plan.pods_to_remove.is_empty());
}

#[test]
fn a_changed_image_under_the_same_uid_kills_and_starts_with_the_reason() {
    let before = pod("web", "uw", &[("app", "busybox:1.36")]);
    let after = pod("web", "uw", &[("app", "busybox:1.37")]);
    let plan = compute_plan(&inputs(resolved(&[]), vec![after], vec![running(&before)]));
    let a = &plan.pods[0].actions;
    assert_eq!(a.kill_containers.len(), 1);
    assert_eq!(a.kill_containers[0].id, "c-uw-app");
    assert_eq!(a.kill_containers[0].reason.code, "SpecChanged");
    assert!(a.kill_containers[0]
        .reason
        .message
        .contains("definition changed"));
    assert_eq!(a.start_containers.len(), 1);
    assert_eq!(a.start_containers[0].image, "busybox:1.37");
    assert!(!a.start_containers[0].reason.is_empty());
    assert_eq!(a.keep_sandbox.as_deref(), Some("sb-uw"));
    assert_eq!(plan.exit_code(), EXIT_ACTIONS);
}

#[test]
fn a_pod_no_source_wants_is_removed_unless_a_source_was_not_read() {
    let gone = pod("old", "uold", &[("app", "busybox")]);
    let mut i = inputs(resolved(&[]), Vec::new(), vec![running(&gone)]);
    let plan = compute_plan(&i);
    assert_eq!(plan.pods_to_remove.len(), 1);
    let removal = &plan.pods_to_remove[0];
    assert_eq!(removal.uid, "uold");
    assert_eq!(removal.reason.code, "NotDesired");
    assert_eq!(removal.stop_containers, ["c-uold-app"]);
    assert_eq!(removal.remove_sandboxes, ["sb-uold"]);
    assert_eq!(plan.exit_code(), EXIT_ACTIONS);

    i.sources_complete = false;
    let plan = compute_plan(&i);
    assert!(plan.pods_to_remove.is_empty());
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.contains("could not be read")));
    assert_eq!(plan.exit_code(), EXIT_NO_ACTIONS);
}

#[test]
fn an_empty_node_with_no_pods_exits_zero() {
    let plan = compute_plan(&inputs(resolved(&[]), Vec::new(), Vec::new()));
    assert!(plan.valid);
    assert_eq!(plan.exit_code(), EXIT_NO_ACTIONS);
}

#[tokio::test]
async fn node_level_problems_make_the_plan_invalid() {
    let host = Arc::new(FakeHost::new().with_hostname("node-a"));
    let given = crate::app::cli::parse([
        "rkubelet",
        "--container-runtime-endpoint=fake://",
        "--reserved-cpus=0-99",
        "--kube-reserved=memory=100Ti",
    ])
    .expect("flags parse");
    let plan = gather::plan_with(given, &crate::app::test_support::deps(&host)).await;
    assert!(!plan.valid);
    assert_eq!(plan.exit_code(), EXIT_INVALID);
    let all = plan.problems.join("\n");
    assert!(all.contains("0-99") && all.contains("memory"), "{all}");
}

#[test]
fn reserved_cpus_take_over_the_cpu_reservations() {
    let plan = compute_plan(&inputs(
        resolved(&[
            "--reserved-cpus=1",
            "--system-reserved=cpu=500m,memory=1Gi",
            "--kube-reserved=cpu=200m",
        ]),
        Vec::new(),
        Vec::new(),
    ));
    let node = plan.node.expect("node");
    assert_eq!(node.system_reserved.effective["cpu"], "1");
    assert_eq!(node.system_reserved.given["cpu"], "500m");
    assert!(!node.kube_reserved.effective.contains_key("cpu"));
    assert_eq!(node.allocatable["cpu"], "1");
    assert_eq!(node.reserved_cpus_effect.len(), 2);
}

#[test]
fn every_field_says_where_it_came_from() {
    let plan = compute_plan(&inputs(resolved(&["--max-pods=7"]), Vec::new(), Vec::new()));
    let entry = |f: &str| plan.config.iter().find(|e| e.field == f).cloned();
    let max_pods = entry("maxPods").expect("maxPods listed");
    assert_eq!(max_pods.value, serde_json::json!(7));
    assert_eq!(max_pods.source, Source::Flag("max-pods".into()));
    assert_eq!(
        entry("healthzPort").map(|e| e.source),
        Some(Source::Default)
    );
}

#[test]
fn the_text_form_names_each_decision() {
    let a = pod("a", "ua", &[("app", "busybox")]);
    let plan = compute_plan(&inputs(resolved(&[]), vec![a], Vec::new()));
    let text = render::render_text(&plan);
    assert!(text.contains("create sandbox (attempt 0)"), "{text}");
    assert!(text.contains("start container app (busybox)"), "{text}");
    assert!(text.contains("exit 2"), "{text}");
}

#[test]
fn accepted_but_not_implemented_flags_are_listed() {
    let plan = compute_plan(&inputs(
        resolved(&["--node-ip=10.0.0.9"]),
        Vec::new(),
        Vec::new(),
    ));
    assert!(
        plan.not_implemented
            .iter()
            .any(|n| n.name == "--node-ip" && n.value == "10.0.0.9"),
        "{:?}",
        plan.not_implemented
    );
}
