//! The planner over in-memory inputs: pod decisions, removals, node facts, exit codes.

use std::sync::Arc;

use super::render::render_text;
use super::*;
use crate::adapters::fake::FakeHost;
use crate::app::test_support::resolved_on;
use crate::domain::kuberuntime::runtime::{ContainerStatus, SandboxState, SandboxStatus};
use crate::domain::pod::{container_hash, Container};

const NOW: i64 = 1_700_000_000_000_000_000;

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
        cpu_manager: None,
        devices: Default::default(),
        resolved: config,
        cgroup_version: CgroupVersion::V2,
        node_stats: BTreeMap::new(),
        desired,
        sources_complete: true,
        warnings: Vec::new(),
        skipped_manifests: Vec::new(),
        observed,
        images: BTreeMap::new(),
        now_unix_nanos: NOW,
        cluster: None,
        eviction: None,
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
    // Untagged images mean pull policy Always: a start pulls them, which counts too.
    let pulls: Vec<&str> = new.pull_images.iter().map(|p| p.image.as_str()).collect();
    assert_eq!(pulls, ["busybox", "nginx"]);
    assert_eq!(
        plan.action_count,
        3 + 2,
        "sandbox and two starts, plus two pulls"
    );
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
fn the_plan_shows_each_subpath_bind_before_its_container() {
    let mut a = pod("a", "ua", &[("app", "busybox")]);
    a.spec.volumes = vec![
        serde_json::from_value(serde_json::json!({"name": "v", "emptyDir": {}}))
            .unwrap_or_else(|e| panic!("volume: {e}")),
    ];
    a.spec.containers[0].volume_mounts = vec![crate::domain::pod::VolumeMount {
        name: "v".into(),
        mount_path: "/data".into(),
        sub_path: "logs".into(),
        ..Default::default()
    }];
    let plan = compute_plan(&inputs(resolved(&[]), vec![a], Vec::new()));
    let text = render::render_text(&plan);
    assert!(
        text.contains(
            "bind subPath \"logs\" of volume v at /var/lib/kubelet/pods/ua/volume-subpaths/v/app/0"
        ),
        "{text}"
    );
}

/// A static pod's claim cannot be read without an API server: the plan says why the pod
/// would wait, in the volume manager's words; its emptyDir is not listed.
#[test]
fn the_plan_shows_why_a_pods_claim_would_wait() {
    let mut a = pod("a", "ua", &[("app", "busybox")]);
    a.spec.volumes = vec![
        serde_json::from_value(
            serde_json::json!({"name": "data", "persistentVolumeClaim": {"claimName": "db"}}),
        )
        .unwrap_or_else(|e| panic!("volume: {e}")),
        serde_json::from_value(serde_json::json!({"name": "scratch", "emptyDir": {}}))
            .unwrap_or_else(|e| panic!("volume: {e}")),
    ];
    a.spec.containers[0].volume_mounts = vec![crate::domain::pod::VolumeMount {
        name: "data".into(),
        mount_path: "/data".into(),
        ..Default::default()
    }];
    let plan = compute_plan(&inputs(resolved(&[]), vec![a], Vec::new()));
    let volumes = &plan.pods[0].volumes;
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    assert_eq!(volumes[0].name, "data");
    assert_eq!(volumes[0].mount, None);
    let text = render::render_text(&plan);
    assert!(
        text.contains("volume data would wait: Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: error processing PVC default/db: failed to fetch PVC from API server"),
        "{text}"
    );
}

#[test]
fn accepted_but_not_implemented_flags_are_listed() {
    let plan = compute_plan(&inputs(
        resolved(&["--runtime-cgroups=/runtime.slice"]),
        Vec::new(),
        Vec::new(),
    ));
    assert!(
        plan.not_implemented
            .iter()
            .any(|n| n.name == "--runtime-cgroups" && n.value == "/runtime.slice"),
        "{:?}",
        plan.not_implemented
    );
}

mod through_the_fake_runtime {
    //! The planner end to end over the fake runtime: a pod run and crash-looped by the
    //! real sync, a pod whose image is absent, read back through the read-only runtime.

    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::adapters::fake::runtime::FakeRuntime;
    use crate::adapters::fake::{FakeCgroupManager, FakeClock, FakeHost};
    use crate::app::bootstrap::Deps;
    use crate::app::container_manager::ContainerManager;
    use crate::app::planner::gather::gather_inputs;
    use crate::app::pods::sync::{sync_pod, SyncContext};
    use crate::domain::cgroup::CgroupDriver;
    use crate::domain::config::layers::GivenFlags;
    use crate::domain::kuberuntime::runtime::ContainerFilter;
    use crate::ports::runtime::{ImageService, RuntimeService};

    const PRESENT: &str = "docker.io/library/busybox:1.36";
    const ABSENT: &str = "example.com/absent:1";

    fn manifest(name: &str, image: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: app\n    image: {image}\n"
        )
    }

    /// The fake world with `fake` as the runtime and the real manifest sources.
    fn deps(fake: &Arc<FakeRuntime>, clock: &Arc<FakeClock>) -> Deps {
        let runtime = fake.clone();
        let images = fake.clone();
        Deps {
            runtime_for: Box::new(move |_, _| Ok(runtime.clone() as Arc<dyn RuntimeService>)),
            images_for: Box::new(move |_, _| Ok(images.clone() as Arc<dyn ImageService>)),
            sources_for: Box::new(crate::app::compose::pod_sources),
            clock: clock.clone(),
            prober: Arc::new(crate::ports::prober::NoProber),
            ..crate::app::test_support::deps(&Arc::new(FakeHost::new()))
        }
    }

    /// `rkubelet <args>` as the command line gives them.
    fn given(args: &[String]) -> GivenFlags {
        let argv = ["rkubelet", "--container-runtime-endpoint=fake://"]
            .into_iter()
            .map(String::from)
            .chain(args.iter().cloned());
        crate::app::cli::parse(argv).expect("flags parse")
    }

    async fn newest_running(fake: &FakeRuntime) -> String {
        let mut list: Vec<_> = fake
            .list_containers(&ContainerFilter::default())
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.status)
            .filter(|c| c.state == ContainerState::Running)
            .collect();
        list.sort_by_key(|c| c.attempt);
        list.pop().map(|c| c.id).unwrap_or_default()
    }

    #[tokio::test]
    async fn the_dry_run_shows_the_crash_loop_hold_and_the_pull_it_would_make() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifests = dir.path().join("manifests");
        std::fs::create_dir_all(&manifests).expect("manifest dir");
        std::fs::write(manifests.join("crash.yaml"), manifest("crash", PRESENT)).expect("write");
        std::fs::write(manifests.join("fresh.yaml"), manifest("fresh", ABSENT)).expect("write");
        let args = vec![
            format!("--pod-manifest-path={}", manifests.display()),
            "--hostname-override=node-a".to_string(),
            format!("--root-dir={}", dir.path().join("root").display()),
            format!("--pod-logs-dir={}", dir.path().join("logs").display()),
        ];
        let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let config = resolved(&arg_refs);
        let clock = Arc::new(FakeClock::new(NOW));
        let fake = Arc::new(FakeRuntime::with_clock(clock.clone()));
        fake.add_image(PRESENT);
        let deps = deps(&fake, &clock);

        // The pod loop runs `crash`; its container fails twice, the second time now.
        let desired = gather_inputs(given(&args), &deps)
            .await
            .expect("inputs")
            .desired;
        let crash = desired
            .iter()
            .find(|p| p.metadata.name == "crash-node-a")
            .cloned()
            .expect("the crash pod is desired");
        let containers = Arc::new(ContainerManager::new(
            Arc::new(FakeCgroupManager::new(CgroupDriver::Cgroupfs)),
            config.node.cgroup_tree.clone(),
            config.node.node.clone(),
        ));
        let requests = RequestContext::from_config(&config, ResolvConf::default());
        let ctx = SyncContext::new(
            fake.clone(),
            fake.clone(),
            clock.clone(),
            requests,
            "fake".into(),
            containers,
        )
        .with_volumes(Arc::new(
            crate::app::pods::volume_manager::VolumeManager::standalone(
                clock.clone(),
                Arc::clone(&deps.pod_files),
            ),
        ));
        sync_pod(&ctx, &crash).await;
        fake.exit_container(&newest_running(&fake).await, 1);
        assert!(
            sync_pod(&ctx, &crash).await.waiting.is_empty(),
            "first restart at once"
        );
        fake.exit_container(&newest_running(&fake).await, 1);
        let journal = fake.journal();
        clock.advance(Duration::from_secs(4));

        // The dry run, through the same read calls as `rkubelet --dry-run`.
        let inputs = gather_inputs(given(&args), &deps).await.expect("inputs");
        let plan = compute_plan(&inputs);
        assert_eq!(fake.journal(), journal, "the planner changed nothing");
        assert!(plan.valid, "{:?}", plan.problems);
        assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);

        let pod = |name: &str| {
            plan.pods
                .iter()
                .find(|p| p.name == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} in the plan"))
        };
        let crashing = pod("crash-node-a");
        let held = &crashing.actions.held_containers;
        assert_eq!(held.len(), 1, "{crashing:?}");
        assert_eq!(held[0].name, "app");
        assert_eq!(held[0].reason, "CrashLoopBackOff");
        assert_eq!(
            held[0].message,
            format!(
                "back-off 10s restarting failed container=app pod=crash-node-a_default({})",
                crash.metadata.uid
            )
        );
        assert_eq!(held[0].retry_after, "6s");
        assert!(crashing.actions.start_containers.is_empty());
        assert_eq!(crashing.actions.kill_pod, None);
        assert_eq!(crashing.action_count, 0);

        let fresh = pod("fresh-node-a");
        assert_eq!(
            fresh.actions.pull_images,
            [ImagePull {
                image: ABSENT.into(),
                containers: vec!["app".into()],
            }]
        );
        assert_eq!(fresh.actions.start_containers.len(), 1);
        assert!(fresh.actions.create_sandbox.is_some());
        assert_eq!(fresh.action_count, 3, "sandbox, pull, start");

        let text = render::render_text(&plan);
        assert!(
            text.contains(&format!(
                "hold container app ({PRESENT}) [CrashLoopBackOff]: back-off 10s restarting failed container=app pod=crash-node-a_default({}); next try in 6s",
                crash.metadata.uid
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("pull image {ABSENT} (for app)")),
            "{text}"
        );

        // Later the hold is over: the plan starts the container (no pull: present).
        clock.advance(Duration::from_secs(6));
        let plan = compute_plan(&gather_inputs(given(&args), &deps).await.expect("inputs"));
        let crashing = plan
            .pods
            .iter()
            .find(|p| p.name == "crash-node-a")
            .cloned()
            .expect("crash pod");
        assert!(crashing.actions.held_containers.is_empty());
        assert_eq!(crashing.actions.start_containers.len(), 1);
        assert!(crashing.actions.pull_images.is_empty());
    }
}

mod connected {
    //! `--dry-run` with a kubeconfig: the Node it would register, or the patches for the
    //! one the API server holds, read from a fake API server that sees only reads.

    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::adapters::fake::runtime::FakeRuntime;
    use crate::adapters::fake::{
        FakeApiServer, FakeCertStore, FakeConnector, FakeHost, FakeHostFacts, FakePki,
        FakeRuntimeStatus,
    };
    use crate::app::bootstrap::Deps;
    use crate::app::node::NodeAgentDeps;
    use crate::app::planner::gather::plan_with;
    use crate::domain::node_status::labels::LABEL_HOSTNAME;
    use crate::ports::api::connect::KubeconfigSummary;

    const KUBECONFIG: &str = "/etc/kubernetes/kubelet.conf";

    fn deps(server: &FakeApiServer) -> Deps {
        let connector = FakeConnector::new(server.clone());
        connector.set_kubeconfig(
            Path::new(KUBECONFIG),
            KubeconfigSummary {
                server: "https://10.0.0.1:6443".into(),
                ..KubeconfigSummary::default()
            },
        );
        Deps {
            node_agent_for: Box::new(move |_, runtime, clock| {
                Ok(NodeAgentDeps {
                    connector: Arc::new(connector.clone()),
                    runtime,
                    runtime_status: Arc::new(FakeRuntimeStatus::new()),
                    host_facts: Arc::new(FakeHostFacts::default()),
                    clock,
                    pki: Arc::new(FakePki::new()),
                    cert_store: Arc::new(FakeCertStore::new()),
                    serving_cert_store: Arc::new(FakeCertStore::new()),
                })
            }),
            runtime_for: Box::new(|_, _| {
                Ok(Arc::new(FakeRuntime::new()) as Arc<dyn crate::ports::runtime::RuntimeService>)
            }),
            ..crate::app::test_support::deps(&Arc::new(FakeHost::new().with_hostname("node-a")))
        }
    }

    fn given() -> crate::domain::config::layers::GivenFlags {
        crate::app::cli::parse([
            "rkubelet",
            "--container-runtime-endpoint=fake://",
            &format!("--kubeconfig={KUBECONFIG}"),
            "--node-labels=node.kubernetes.io/pool=blue",
            "--node-ip=10.0.0.9",
        ])
        .expect("flags parse")
    }

    /// The pods bound to the node: listed read-only, admitted in creation order, their
    /// actions planned beside the static pods'; mirror and invalid pods named.
    #[tokio::test]
    async fn the_nodes_api_pods_are_listed_with_their_admission_and_actions() {
        let server = FakeApiServer::new();
        let pod = |name: &str, created: &str| {
            serde_json::json!({"metadata": {"name": name, "namespace": "default",
                                             "creationTimestamp": created},
                               "spec": {"nodeName": "node-a",
                                        "containers": [{"name": "app", "image": "busybox:1.36"}]}})
        };
        server.put_pod(pod("web", "2026-11-23T19:00:00Z"));
        let mut mirror = pod("static-node-a", "2026-11-23T19:00:01Z");
        mirror["metadata"]["annotations"] = serde_json::json!({"kubernetes.io/config.mirror": "h"});
        server.put_pod(mirror);
        let mut bad = pod("bad", "2026-11-23T19:00:02Z");
        bad["spec"]["restartPolicy"] = serde_json::json!("Sometimes");
        server.put_pod(bad);
        let plan = plan_with(given(), &deps(&server)).await;
        let cluster = plan.cluster.clone().expect("connected mode");
        let actions: Vec<(&str, &str)> = cluster
            .pods
            .iter()
            .map(|p| (p.name.as_str(), p.action.as_str()))
            .collect();
        assert_eq!(
            actions,
            [
                ("bad", "invalid"),
                ("static-node-a", "mirror"),
                ("web", "run")
            ]
        );
        assert!(plan.pods.iter().any(|p| p.name == "web"));
        let text = render::render_text(&plan);
        assert!(text.contains("pod default/bad ("), "{text}");
        assert!(
            text.contains("invalid InvalidPod: Pod was rejected: spec.restartPolicy"),
            "{text}"
        );
        assert!(server.count("patch") + server.count("delete") == 0);
    }

    #[tokio::test]
    async fn a_new_node_would_be_registered_and_an_existing_one_adopted() {
        let server = FakeApiServer::new();
        let plan = plan_with(given(), &deps(&server)).await;
        assert!(plan.valid, "{:?}", plan.problems);
        let cluster = plan.cluster.clone().expect("connected mode");
        assert_eq!(cluster.server, "https://10.0.0.1:6443");
        assert_eq!(cluster.action, "register");
        let node = cluster.node_object.expect("the Node to create");
        assert_eq!(node["metadata"]["name"], "node-a");
        assert_eq!(node["metadata"]["labels"][LABEL_HOSTNAME], "node-a");
        assert_eq!(
            node["metadata"]["labels"]["node.kubernetes.io/pool"],
            "blue"
        );
        assert_eq!(node["status"]["addresses"][0]["address"], "10.0.0.9");
        assert!(plan.action_count >= 1);
        let text = render::render_text(&plan);
        assert!(
            text.contains("register: no Node of this name exists"),
            "{text}"
        );

        // The Node exists as registered: adopted, nothing to patch.
        let existing: crate::domain::node_status::model::NodeObject =
            serde_json::from_value(node).expect("a Node");
        server.put_node(existing);
        let plan = plan_with(given(), &deps(&server)).await;
        let cluster = plan.cluster.expect("connected mode");
        assert_eq!(cluster.action, "adopt");
        assert_eq!(cluster.metadata_patch, None);
        assert_eq!(cluster.action_count, 0);
        // The planner only read.
        assert!(
            server
                .journal()
                .iter()
                .all(|call| call.starts_with("get ") || call.starts_with("list pods ")),
            "{:?}",
            server.journal()
        );
    }
}

/// Live, the plan shows the eviction manager's decision on the node as observed: the
/// threshold met, the ranking and the pod that would go, with upstream's message.
#[test]
fn the_eviction_section_says_which_pod_would_be_evicted_and_why() {
    use crate::domain::eviction::signals::{MemoryStats, NodeSummary, PodStats};
    // The largest user is a static pod: protected, as upstream's `IsCriticalPod`; the
    // API pods behind it are what the node reclaims from.
    let hog = pod("hog", "uhog", &[("app", "busybox")]);
    let api_pod = |name: &str, uid: &str| {
        let mut pod = pod(name, uid, &[("app", "busybox")]);
        pod.metadata
            .annotations
            .insert(CONFIG_SOURCE_ANNOTATION.into(), "api".into());
        pod
    };
    let web = api_pod("web", "uweb");
    let quiet = api_pod("quiet", "uquiet");
    let gib = 1u64 << 30;
    let mut given = inputs(
        resolved(&[]),
        vec![hog.clone(), web.clone(), quiet.clone()],
        vec![running(&hog), running(&web), running(&quiet)],
    );
    let pod_stats = |uid: &str, bytes: u64| PodStats {
        uid: uid.into(),
        memory_working_set_bytes: Some(bytes),
        process_count: None,
        containers: Vec::new(),
        volumes: Vec::new(),
        etc_hosts: None,
    };
    given.eviction = Some(Observation {
        summary: NodeSummary {
            time_unix_nanos: NOW,
            // 50 MiB free of 8 GiB: under the default memory.available<100Mi.
            memory: Some(MemoryStats::new(8 * gib - (50 << 20), 0, Some(8 * gib))),
            pods: vec![
                pod_stats("uhog", gib),
                pod_stats("uweb", 512 << 20),
                pod_stats("uquiet", 10 << 20),
            ],
            ..NodeSummary::default()
        },
        dedicated_image_fs: false,
    });
    let plan = compute_plan(&given);
    let decision = plan
        .node
        .as_ref()
        .and_then(|n| n.eviction.decision.clone())
        .expect("a decision when live");
    assert_eq!(decision.thresholds_met, ["memory.available<100Mi"]);
    assert_eq!(decision.observed["memory.available"], "50Mi of 8Gi");
    assert!(decision.reclaim_first.is_empty());
    assert_eq!(
        decision.ranked[..2],
        ["hog_default(uhog)", "web_default(uweb)"]
    );
    assert_eq!(decision.protected, ["hog_default(uhog)"]);
    assert_eq!(decision.would_evict.len(), 1);
    assert_eq!(decision.would_evict[0].pod, "web_default(uweb)");
    assert!(
        decision.would_evict[0].message.starts_with(
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
        ),
        "{}",
        decision.would_evict[0].message
    );
    let text = render_text(&plan);
    assert!(
        text.contains("eviction now: thresholds met: memory.available<100Mi"),
        "{text}"
    );
    assert!(
        text.contains("would evict web_default(uweb): The node was low on resource: memory."),
        "{text}"
    );
    assert!(text.contains("(observed 50Mi of 8Gi)"), "{text}");

    // Nothing met: said so.
    given.eviction = Some(Observation {
        summary: NodeSummary {
            time_unix_nanos: NOW,
            memory: Some(MemoryStats::new(gib, 0, Some(8 * gib))),
            ..NodeSummary::default()
        },
        dedicated_image_fs: false,
    });
    let text = render_text(&compute_plan(&given));
    assert!(text.contains("nothing would be evicted"), "{text}");
}

#[test]
fn the_static_cpu_manager_shows_each_containers_cpu_set() {
    use crate::domain::units::quantity::Quantity;
    use crate::ports::machine::MachineInfoProvider;
    let with_cpu = |name: &str, uid: &str, limit: Option<&str>| {
        let mut p = pod(name, uid, &[("app", "busybox")]);
        let q = |s: &str| Quantity::parse(s).expect("quantity");
        let resources = &mut p.spec.containers[0].resources;
        match limit {
            Some(cpu) => {
                resources.limits = [("cpu".into(), q(cpu)), ("memory".into(), q("64Mi"))].into();
                resources.requests = resources.limits.clone();
            }
            None => {
                resources.requests = [("memory".into(), q("16Mi"))].into();
            }
        }
        p
    };
    let desired = vec![
        with_cpu("g", "uid-1", Some("1")),
        with_cpu("b", "uid-2", None),
        with_cpu("g2", "uid-3", Some("1")),
    ];
    let mut inputs = inputs(
        resolved(&["--cpu-manager-policy=static", "--reserved-cpus=0"]),
        desired,
        Vec::new(),
    );
    let topology = crate::adapters::fake::FakeMachine::default()
        .cpu_topology()
        .expect("topology");
    inputs.cpu_manager = Some(CpuManagerInputs {
        topology,
        state: None,
        state_path: "/var/lib/kubelet/cpu_manager_state".into(),
    });
    let plan = compute_plan(&inputs);
    let cpus = |name: &str| {
        plan.pods
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.cpus.clone())
            .unwrap_or_default()
    };
    assert_eq!(cpus("g"), [("app".to_string(), "1".to_string())].into());
    assert_eq!(cpus("b"), [("app".to_string(), "0".to_string())].into());
    assert_eq!(
        cpus("g2"),
        [(
            "*".to_string(),
            "UnexpectedAdmissionError: Allocate failed due to not enough cpus available to satisfy request, which is unexpected".to_string()
        )]
        .into()
    );
    let text = render_text(&plan);
    assert!(text.contains("    cpus of app: 1\n"), "{text}");
    assert!(text.contains("    cpus of app: 0\n"), "{text}");
    assert!(
        text.contains("    the CPU manager would refuse it: UnexpectedAdmissionError: "),
        "{text}"
    );
}

#[test]
fn the_plan_shows_each_containers_devices_and_the_ids_it_holds() {
    use crate::domain::devices::ContainerAllocateResponse;
    let q = |s: &str| crate::domain::units::quantity::Quantity::parse(s).expect("quantity");
    let with_devices = |name: &str, uid: &str, count: &str| {
        let mut p = pod(name, uid, &[("app", "busybox")]);
        let resources = &mut p.spec.containers[0].resources;
        resources.limits = [("example.com/resource".into(), q(count))].into();
        resources.requests = resources.limits.clone();
        p
    };
    let desired = vec![
        with_devices("held", "uid-1", "1"),
        with_devices("new", "uid-2", "2"),
        pod("plain", "uid-3", &[("app", "busybox")]),
    ];
    let mut inputs = inputs(resolved(&[]), desired, Vec::new());
    inputs.devices.commit(
        "uid-1",
        "app",
        "example.com/resource",
        &["Dev-1".to_string()],
        ContainerAllocateResponse::default(),
        Vec::new(),
    );
    let plan = compute_plan(&inputs);
    let devices = |name: &str| {
        plan.pods
            .iter()
            .find(|p| p.name == name)
            .map(|p| serde_json::to_value(&p.devices).expect("json"))
    };
    assert_eq!(
        devices("held"),
        Some(serde_json::json!({"app": {"example.com/resource": {"count": 1, "ids": ["Dev-1"]}}}))
    );
    assert_eq!(
        devices("new"),
        Some(serde_json::json!({"app": {"example.com/resource": {"count": 2}}}))
    );
    assert_eq!(devices("plain"), Some(serde_json::json!({})));
    let text = render_text(&plan);
    assert!(
        text.contains("devices of app: example.com/resource: 1 (Dev-1)"),
        "{text}"
    );
    assert!(
        text.contains("devices of app: example.com/resource: 2\n"),
        "{text}"
    );
}
