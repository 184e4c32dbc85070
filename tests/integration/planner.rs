//! `rkubelet --dry-run` end to end: the JSON plan for bad input, reservations and
//! eviction from a snapshot (deterministic, no root), and against a real private
//! containerd with static pods run by rkubelet (root and containerd; fails without).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;

use common::containerd::Containerd;

const BIN: &str = env!("CARGO_BIN_EXE_rkubelet");
const SNAPSHOT_BIN: &str = env!("CARGO_BIN_EXE_rkubelet-snapshot");

fn run(args: &[String]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("NOTIFY_SOCKET")
        .output()
        .expect("rkubelet runs")
}

/// The JSON plan and the exit status of `rkubelet --dry-run --dry-run-output=json ARGS`.
fn dry_run(args: &[String]) -> (Value, i32, Vec<u8>) {
    let mut all = vec!["--dry-run".to_string(), "--dry-run-output=json".to_string()];
    all.extend(args.iter().cloned());
    let out = run(&all);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (plan, out.status.code().unwrap_or(-1), out.stdout)
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

const TWO_CPU_SNAPSHOT: &str = concat!(
    r#"
version = 1
hostname = "node-a"
cgroup_version = "v2"
pods = []
"#,
    include_str!("../fixtures/two_cpu_machine.toml")
);

fn snapshot_file(dir: &Path) -> String {
    snapshot_file_on(dir, "v2")
}

/// [`TWO_CPU_SNAPSHOT`] with the given cgroup version (`v1` or `v2`).
fn snapshot_file_on(dir: &Path, cgroup_version: &str) -> String {
    let path = dir.join(format!("node-{cgroup_version}.toml"));
    let text = TWO_CPU_SNAPSHOT.replace(
        "cgroup_version = \"v2\"",
        &format!("cgroup_version = \"{cgroup_version}\""),
    );
    std::fs::write(&path, text).expect("write snapshot");
    format!("--dry-run-snapshot={}", path.display())
}

#[test]
fn bad_input_prints_every_problem_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args: Vec<String> = [
        "--container-runtime-endpoint=fake://",
        "--oom-score-adj=5000",
        "--cgroup-driver=nonsense",
        "--max-pods=-1",
        "--eviction-soft=memory.available<1Gi",
    ]
    .iter()
    .map(ToString::to_string)
    .chain([format!("--root-dir={}", dir.path().join("root").display())])
    .collect();
    let (plan, code, _) = dry_run(&args);
    assert_eq!(code, 1, "{plan}");
    assert_eq!(plan["valid"], false);
    let problems = strs(&plan["problems"]).join("\n");
    for want in [
        "oomScoreAdj",
        "5000",
        "cgroupDriver",
        "nonsense",
        "maxPods",
        "grace period",
    ] {
        assert!(problems.contains(want), "{want} missing from {problems}");
    }
    assert!(
        !dir.path().join("root").exists(),
        "the dry run created the root dir"
    );
    // Node-level refusals too (the reservation against the snapshot's machine).
    let (plan, code, _) = dry_run(&[
        "--container-runtime-endpoint=fake://".into(),
        snapshot_file(dir.path()),
        "--reserved-cpus=0-99".into(),
        "--kube-reserved=memory=100Ti".into(),
    ]);
    assert_eq!(code, 1, "{plan}");
    let problems = strs(&plan["problems"]).join("\n");
    assert!(
        problems.contains("0-99") && problems.contains("0-1"),
        "{problems}"
    );
    assert!(problems.contains("memory"), "{problems}");
    // And the text form prints them too.
    let out = run(&[
        "--dry-run".into(),
        "--container-runtime-endpoint=fake://".into(),
        "--oom-score-adj=5000".into(),
        "--cgroup-driver=nonsense".into(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text.contains("oomScoreAdj") && text.contains("cgroupDriver"),
        "{text}"
    );
}

#[test]
fn reserved_cpus_replace_system_reserved_cpu_and_drop_kube_reserved_cpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (plan, code, _) = dry_run(&[
        "--container-runtime-endpoint=fake://".into(),
        snapshot_file(dir.path()),
        "--reserved-cpus=1".into(),
        "--system-reserved=cpu=500m,memory=1Gi".into(),
        "--kube-reserved=cpu=200m,memory=256Mi".into(),
    ]);
    assert_eq!(code, 0, "{plan}");
    let node = &plan["node"];
    assert_eq!(node["name"], "node-a");
    assert_eq!(node["reservedCpus"], "1");
    assert_eq!(node["systemReserved"]["given"]["cpu"], "500m");
    assert_eq!(node["systemReserved"]["effective"]["cpu"], "1");
    assert_eq!(node["systemReserved"]["effective"]["memory"], "1Gi");
    assert_eq!(node["kubeReserved"]["given"]["cpu"], "200m");
    assert_eq!(node["kubeReserved"]["effective"].get("cpu"), None);
    assert_eq!(node["kubeReserved"]["effective"]["memory"], "256Mi");
    assert_eq!(node["capacity"]["cpu"], "2");
    assert_eq!(node["allocatable"]["cpu"], "1");
    // 8Gi - 1Gi - 256Mi - 100Mi (default hard eviction) = 6812Mi
    assert_eq!(node["allocatable"]["memory"], "6812Mi");
    let effect = strs(&node["reservedCpusEffect"]).join("\n");
    assert!(effect.contains("500m replaced by 1"), "{effect}");
    assert!(effect.contains("kubeReserved cpu 200m removed"), "{effect}");
    let origin = plan["config"]
        .as_array()
        .and_then(|c| c.iter().find(|e| e["field"] == "reservedSystemCPUs"))
        .map(|e| e["source"].clone());
    assert_eq!(
        origin,
        Some(serde_json::json!({"kind": "flag", "from": "reserved-cpus"}))
    );
}

fn hard_signals(plan: &Value) -> Vec<String> {
    plan["node"]["eviction"]["hard"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    format!(
                        "{}<{}",
                        t["signal"].as_str().unwrap_or(""),
                        t["value"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_given_hard_eviction_map_replaces_the_defaults_unless_merged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = snapshot_file(dir.path());
    let (plan, code, _) = dry_run(&[
        "--container-runtime-endpoint=fake://".into(),
        snapshot.clone(),
        "--eviction-hard=memory.available<500Mi".into(),
    ]);
    assert_eq!(code, 0, "{plan}");
    let eviction = &plan["node"]["eviction"];
    assert_eq!(eviction["defaultsReplaced"], true);
    assert_eq!(
        strs(&eviction["defaultsNotApplied"]),
        [
            "imagefs.available<15%",
            "nodefs.available<10%",
            "nodefs.inodesFree<5%"
        ]
    );
    assert!(eviction["note"]
        .as_str()
        .is_some_and(|n| n.contains("no longer apply")));
    assert!(hard_signals(&plan).contains(&"memory.available<500Mi".to_string()));
    assert!(!hard_signals(&plan).iter().any(|s| s.starts_with("nodefs")));

    let config = dir.path().join("kubelet.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmergeDefaultEvictionSettings: true\n",
    )
    .expect("write config");
    let (plan, code, _) = dry_run(&[
        "--container-runtime-endpoint=fake://".into(),
        snapshot,
        format!("--config={}", config.display()),
        "--eviction-hard=memory.available<500Mi".into(),
    ]);
    assert_eq!(code, 0, "{plan}");
    let eviction = &plan["node"]["eviction"];
    assert_eq!(eviction["defaultsReplaced"], false);
    assert_eq!(eviction["mergeDefaultEvictionSettings"], true);
    assert_eq!(strs(&eviction["defaultsNotApplied"]), Vec::<String>::new());
    let hard = hard_signals(&plan);
    for want in [
        "memory.available<500Mi",
        "nodefs.available<10%",
        "nodefs.inodesFree<5%",
        "imagefs.available<15%",
    ] {
        assert!(
            hard.contains(&want.to_string()),
            "{want} missing from {hard:?}"
        );
    }
    // The snapshot's node statistics are shown beside the thresholds.
    let memory = plan["node"]["eviction"]["hard"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["signal"] == "memory.available"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(memory["observed"], "3Gi");
}

// ---- against a real containerd ----

fn manifest(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    command: [\"sh\", \"-c\", \"while true; do sleep 3600; done\"]\n"
    )
}

/// Every sandbox and container the runtime holds, with its state, as `crictl`-like lines.
fn runtime_state(endpoint: &str) -> Vec<String> {
    use rkubelet::domain::kuberuntime::runtime::{ContainerFilter, SandboxFilter};
    use rkubelet::ports::runtime::RuntimeService;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let cri = rkubelet::adapters::cri::CriRuntime::connect(endpoint, Duration::from_secs(30))
            .expect("connects");
        let mut lines: Vec<String> = cri
            .list_pod_sandboxes(&SandboxFilter::default())
            .await
            .expect("lists sandboxes")
            .into_iter()
            .map(|s| format!("sandbox {} {} {:?}", s.status.id, s.name, s.status.state))
            .collect();
        lines.extend(
            cri.list_containers(&ContainerFilter::default())
                .await
                .expect("lists containers")
                .into_iter()
                .map(|c| {
                    format!(
                        "container {} {} {:?} {}",
                        c.status.id, c.status.name, c.status.state, c.status.image
                    )
                }),
        );
        lines.sort();
        lines
    })
}

/// Directories of the cgroup tree down to `depth` levels, for a before/after comparison.
fn cgroup_dirs(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth == 0 {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(entry.path());
                cgroup_dirs(&entry.path(), depth - 1, out);
            }
        }
    }
}

/// The cgroup directories three levels down, without the roots of other
/// instances (`rkubelet-<id>`) that tests running in parallel create and remove.
fn cgroup_tree(own_root: &str) -> Vec<PathBuf> {
    let own = own_root.trim_matches('/');
    let mut dirs = Vec::new();
    cgroup_dirs(Path::new("/sys/fs/cgroup"), 3, &mut dirs);
    // Other tests' trees (their rkubelet's, a private systemd's `rksd-`) come and go
    // meanwhile: only this one's and the machine's own count.
    dirs.retain(|dir| {
        dir.components().all(|part| {
            let part = part.as_os_str().to_string_lossy();
            !(part.starts_with("rkubelet-") || part.starts_with("rksd-") || part.starts_with("rk-"))
                || part == own
        })
    });
    dirs.sort();
    dirs
}

#[test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
fn against_containerd_the_plan_starts_only_what_is_missing_and_changes_nothing() {
    let ctrd = Containerd::start("plan");
    let endpoint = ctrd.var("CRI_ENDPOINT");
    let busybox = ctrd.var("BUSYBOX_IMAGE");
    // Outside the containerd base, which goes away before the offline replay.
    let scratch = tempfile::tempdir().expect("tempdir");
    let manifests = scratch.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifest dir");
    std::fs::write(manifests.join("one.yaml"), manifest("one", &busybox)).expect("write");
    std::fs::write(manifests.join("two.yaml"), manifest("two", &busybox)).expect("write");
    let common_args = vec![
        format!("--container-runtime-endpoint={endpoint}"),
        format!("--root-dir={}", ctrd.base.join("kubelet-root").display()),
        format!("--pod-logs-dir={}", ctrd.var("RKUBELET_POD_LOG_ROOT")),
        format!("--pod-manifest-path={}", manifests.display()),
        "--hostname-override=plan-node".to_string(),
        // The instance's own cgroup root: parallel kubelets never share /kubepods.
        format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
    ];

    // rkubelet runs the two pods, then stops (pods keep running).
    let mut daemon = common::start_daemon(
        &[
            common_args.clone(),
            vec!["--file-check-frequency=1s".into()],
        ]
        .concat(),
        false,
    );
    let deadline = Instant::now() + crate::common::patience(90);
    loop {
        let state = runtime_state(&endpoint);
        let running = state
            .iter()
            .filter(|l| l.starts_with("container") && l.contains("Running"))
            .count();
        if running == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "pods did not start: {state:?}\n{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    daemon.terminate();

    std::fs::write(manifests.join("three.yaml"), manifest("three", &busybox)).expect("write");
    let before = runtime_state(&endpoint);
    let own_cgroup_root = ctrd.var("RKUBELET_CGROUP_ROOT");
    let cgroups_before = cgroup_tree(&own_cgroup_root);
    let (live, code, live_bytes) = dry_run(&common_args);
    assert_eq!(code, 2, "{live}");
    assert_eq!(
        runtime_state(&endpoint),
        before,
        "the dry run changed the runtime"
    );
    assert_eq!(
        cgroup_tree(&own_cgroup_root),
        cgroups_before,
        "the dry run changed the cgroup tree"
    );
    assert_eq!(strs(&live["warnings"]), Vec::<String>::new());
    let pods = live["pods"].as_array().cloned().unwrap_or_default();
    assert_eq!(pods.len(), 3, "{live}");
    for pod in &pods {
        let name = pod["name"].as_str().unwrap_or_default();
        if name.starts_with("three") {
            assert!(pod["actions"]["createSandbox"].is_object(), "{pod}");
            assert_eq!(pod["actions"]["killPod"], Value::Null);
            let started: Vec<&str> = pod["actions"]["startContainers"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
                .unwrap_or_default();
            assert_eq!(started, ["main"]);
            assert_eq!(pod["actionCount"], 2);
        } else {
            assert_eq!(pod["actionCount"], 0, "{pod}");
            assert_eq!(strs(&pod["running"]), ["main"]);
        }
    }
    assert_eq!(live["podsToRemove"], serde_json::json!([]));
    assert_eq!(live["actionCount"], 2);
    // The eviction manager's view of the node now, read through the same observer: the
    // memory, node filesystem and pid signals observed, and what it would do.
    let decision = &live["node"]["eviction"]["decision"];
    for signal in ["memory.available", "nodefs.available", "pid.available"] {
        assert!(
            decision["observed"][signal]
                .as_str()
                .is_some_and(|v| v.contains(" of ")),
            "{signal} not observed: {decision}"
        );
    }
    assert!(decision["thresholdsMet"].is_array(), "{decision}");
    assert!(decision["wouldEvict"].is_array(), "{decision}");
    // kubepods, two QoS cgroups and one per pod, under the instance's cgroup root.
    let root = ctrd.var("RKUBELET_CGROUP_ROOT");
    let entries = live["cgroups"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(entries.len(), 6, "{}", live["cgroups"]);
    assert!(entries.iter().all(|e| e["name"]
        .as_str()
        .is_some_and(|n| n.starts_with(root.trim_end_matches('/')))));

    // A snapshot of this state, recorded through read calls only.
    let snap = Command::new(SNAPSHOT_BIN)
        .args(&common_args)
        .output()
        .expect("rkubelet-snapshot runs");
    assert!(
        snap.status.success(),
        "{}",
        String::from_utf8_lossy(&snap.stderr)
    );
    assert_eq!(
        runtime_state(&endpoint),
        before,
        "recording changed the runtime"
    );
    let snapshot_path = scratch.path().join("node.json");
    std::fs::write(&snapshot_path, &snap.stdout).expect("write snapshot");

    // An edited manifest: static pod uids derive from the content, so the edit is a
    // new pod (created) and the old one is no longer wanted (stopped and removed).
    let edited = manifest("one", &format!("{busybox}-edited"));
    std::fs::write(manifests.join("one.yaml"), edited).expect("write");
    let old_uid = pods
        .iter()
        .find(|p| p["name"].as_str().is_some_and(|n| n.starts_with("one")))
        .map(|p| p["uid"].clone())
        .unwrap_or_default();
    let (changed, code, _) = dry_run(&common_args);
    assert_eq!(code, 2, "{changed}");
    assert_eq!(
        runtime_state(&endpoint),
        before,
        "the dry run changed the runtime"
    );
    let removed = changed["podsToRemove"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(removed.len(), 1, "{changed}");
    assert_eq!(removed[0]["uid"], old_uid);
    assert_eq!(removed[0]["reason"]["code"], "NotDesired");
    assert_eq!(strs(&removed[0]["stopContainers"]).len(), 1);
    let new_one = changed["pods"]
        .as_array()
        .and_then(|p| {
            p.iter()
                .find(|p| p["name"].as_str().is_some_and(|n| n.starts_with("one")))
        })
        .cloned()
        .unwrap_or_default();
    assert_ne!(new_one["uid"], old_uid);
    assert!(new_one["actions"]["createSandbox"].is_object(), "{new_one}");
    assert_eq!(
        new_one["actions"]["startContainers"][0]["image"],
        format!("{busybox}-edited")
    );

    // The same plan from the snapshot, byte for byte, with containerd gone.
    std::fs::write(manifests.join("one.yaml"), manifest("one", &busybox)).expect("write");
    drop(ctrd);
    let offline: Vec<String> = common_args
        .iter()
        .cloned()
        .chain([format!("--dry-run-snapshot={}", snapshot_path.display())])
        .collect();
    let (replayed, code, snapshot_bytes) = dry_run(&offline);
    assert_eq!(code, 2);
    // The eviction section replays what the snapshot recorded; its measurements (free
    // memory, disk, pids) were taken a moment after the live plan's, so they may differ
    // by what the machine did meanwhile. Everything else is byte for byte.
    let recorded: Value = serde_json::from_slice(&snap.stdout).expect("snapshot JSON");
    let recorded_memory = &recorded["eviction"]["summary"]["memory"];
    assert!(recorded_memory.is_object(), "{}", recorded["eviction"]);
    assert!(replayed["node"]["eviction"]["decision"]["observed"]["memory.available"].is_string());
    let without_measurements = |bytes: &[u8]| {
        let mut plan: Value = serde_json::from_slice(bytes).expect("plan JSON");
        let eviction = &mut plan["node"]["eviction"];
        eviction["decision"] = Value::Null;
        for kind in ["hard", "soft"] {
            if let Some(list) = eviction[kind].as_array_mut() {
                list.iter_mut().for_each(|t| t["observed"] = Value::Null);
            }
        }
        serde_json::to_string_pretty(&plan).expect("plan encodes")
    };
    assert_eq!(
        without_measurements(&snapshot_bytes),
        without_measurements(&live_bytes),
        "the snapshot's plan differs from the live one"
    );
}

/// The newest instance of every container the runtime holds: (name, attempt, state).
fn newest_instances(endpoint: &str) -> Vec<(String, u32, String)> {
    use rkubelet::domain::kuberuntime::runtime::ContainerFilter;
    use rkubelet::ports::runtime::RuntimeService;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let cri = rkubelet::adapters::cri::CriRuntime::connect(endpoint, Duration::from_secs(30))
            .expect("connects");
        let mut newest: BTreeMap<String, (u32, String)> = BTreeMap::new();
        for c in cri
            .list_containers(&ContainerFilter::default())
            .await
            .expect("lists containers")
        {
            let s = c.status;
            if newest.get(&s.name).is_none_or(|(a, _)| *a <= s.attempt) {
                newest.insert(s.name, (s.attempt, format!("{:?}", s.state)));
            }
        }
        newest
            .into_iter()
            .map(|(name, (attempt, state))| (name, attempt, state))
            .collect()
    })
}

/// A container rkubelet ran into crash-loop back-off, and a pod whose image is absent:
/// the dry run (a separate process, no memory of the daemon's) holds the first with
/// upstream's CrashLoopBackOff message, derived from the runtime's restart count and
/// exit time, and plans the pull for the second.
#[test]
#[ignore = "needs containerd: run by scripts/test.sh"]
fn against_containerd_the_plan_shows_crash_loop_back_off_and_image_pulls() {
    let ctrd = Containerd::start("plan-backoff");
    let endpoint = ctrd.var("CRI_ENDPOINT");
    let busybox = ctrd.var("BUSYBOX_IMAGE");
    let scratch = tempfile::tempdir().expect("tempdir");
    let manifests = scratch.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifest dir");
    std::fs::write(
        manifests.join("crash.yaml"),
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crash\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {busybox}\n    command: [\"sh\", \"-c\", \"exit 1\"]\n"
        ),
    )
    .expect("write");
    let common_args = vec![
        format!("--container-runtime-endpoint={endpoint}"),
        format!("--root-dir={}", ctrd.base.join("kubelet-root").display()),
        format!("--pod-logs-dir={}", ctrd.var("RKUBELET_POD_LOG_ROOT")),
        format!("--pod-manifest-path={}", manifests.display()),
        "--hostname-override=plan-node".to_string(),
        format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
    ];

    // rkubelet runs the pod until its second instance has failed (restart 1: held 10 s).
    let mut daemon = common::start_daemon(
        &[
            common_args.clone(),
            vec!["--file-check-frequency=1s".into()],
        ]
        .concat(),
        false,
    );
    let deadline = Instant::now() + crate::common::patience(90);
    loop {
        let newest = newest_instances(&endpoint);
        if newest
            .iter()
            .any(|(name, attempt, state)| name == "main" && *attempt >= 1 && state == "Exited")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the container did not fail twice: {newest:?}\n{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    daemon.terminate();

    // A pod whose image the node does not have (never pulled: no daemon runs now).
    let absent = "registry.invalid/rkubelet/absent:1";
    std::fs::write(manifests.join("fresh.yaml"), manifest("fresh", absent)).expect("write");
    let before = runtime_state(&endpoint);
    let (plan, code, _) = dry_run(&common_args);
    assert_eq!(code, 2, "{plan}");
    assert_eq!(
        runtime_state(&endpoint),
        before,
        "the dry run changed the runtime"
    );
    assert_eq!(strs(&plan["warnings"]), Vec::<String>::new());
    let pod = |prefix: &str| {
        plan["pods"]
            .as_array()
            .and_then(|p| {
                p.iter()
                    .find(|p| p["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            })
            .cloned()
            .unwrap_or_else(|| panic!("{prefix} pod in {plan}"))
    };
    let crash = pod("crash");
    let held = crash["actions"]["heldContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(held.len(), 1, "{crash}");
    assert_eq!(held[0]["name"], "main");
    assert_eq!(held[0]["reason"], "CrashLoopBackOff");
    let message = held[0]["message"].as_str().unwrap_or_default();
    let uid = crash["uid"].as_str().unwrap_or_default();
    let tail = format!(" restarting failed container=main pod=crash-plan-node_default({uid})");
    assert!(
        message.starts_with("back-off ") && message.ends_with(&tail),
        "{message}"
    );
    assert_eq!(crash["actions"]["startContainers"], serde_json::json!([]));
    assert_eq!(crash["actionCount"], 0);

    let fresh = pod("fresh");
    assert_eq!(
        fresh["actions"]["pullImages"],
        serde_json::json!([{"image": absent, "containers": ["main"]}])
    );
    assert_eq!(fresh["actions"]["startContainers"][0]["name"], "main");

    // The text form says the same in words.
    let text = run(&[vec!["--dry-run".to_string()], common_args.clone()].concat());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("hold container main (") && text.contains("[CrashLoopBackOff]: back-off "),
        "{text}"
    );
    assert!(
        text.contains(&format!("pull image {absent} (for main)")),
        "{text}"
    );
    eprintln!("{text}");
}

/// The documented schema and the plan agree on every object's fields (a drift check;
/// the schema's `additionalProperties: false` makes extra fields a documentation bug).
/// `rkubelet-snapshot --help` speaks for rkubelet-snapshot, with rkubelet's flags.
#[test]
fn the_snapshot_binary_has_its_own_help() {
    let out = Command::new(SNAPSHOT_BIN)
        .arg("--help")
        .output()
        .expect("rkubelet-snapshot runs");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(
        help.starts_with("rkubelet-snapshot: record this node for `rkubelet --dry-run"),
        "{help}"
    );
    assert!(
        help.contains("Usage: rkubelet-snapshot [OPTIONS]"),
        "{help}"
    );
    assert!(!help.contains("a Kubernetes node agent"), "{help}");
    assert!(help.contains("--container-runtime-endpoint"), "{help}");
    let bad = Command::new(SNAPSHOT_BIN)
        .arg("--no-such-flag")
        .output()
        .expect("rkubelet-snapshot runs");
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--no-such-flag"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn the_plan_has_exactly_the_fields_the_schema_documents() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/plan.schema.json"),
        )
        .expect("schema file"),
    )
    .expect("schema is JSON");
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = dir.path().join("m");
    std::fs::create_dir_all(&manifests).expect("dir");
    std::fs::write(manifests.join("a.yaml"), manifest("a", "busybox")).expect("write");
    let (plan, code, _) = dry_run(&[
        "--container-runtime-endpoint=fake://".into(),
        snapshot_file(dir.path()),
        format!("--pod-manifest-path={}", manifests.display()),
    ]);
    assert_eq!(code, 2, "{plan}");
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        k.sort();
        k
    };
    let required = |v: &Value| -> Vec<String> {
        let mut k = strs(&v["required"]);
        k.sort();
        k
    };
    let defs = &schema["$defs"];
    assert_eq!(keys(&plan), required(&schema));
    assert_eq!(keys(&plan["node"]), required(&defs["node"]));
    assert_eq!(keys(&plan["pods"][0]), required(&defs["pod"]));
    assert_eq!(
        keys(&plan["pods"][0]["actions"]),
        required(&defs["pod"]["properties"]["actions"])
    );
    assert_eq!(
        keys(&plan["config"][0]),
        required(&schema["properties"]["config"]["items"])
    );
    assert_eq!(
        keys(&plan["node"]["eviction"]["hard"][0]),
        required(&defs["threshold"])
    );
    if !plan["cgroups"].is_null() {
        assert_eq!(keys(&plan["cgroups"]), required(&defs["cgroups"]));
    }
}

#[test]
fn a_pod_without_host_users_shows_its_own_user_namespace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = dir.path().join("m");
    std::fs::create_dir_all(&manifests).expect("dir");
    std::fs::write(
        manifests.join("a.yaml"),
        manifest("a", "busybox").replace("spec:\n", "spec:\n  hostUsers: false\n"),
    )
    .expect("write");
    std::fs::write(manifests.join("b.yaml"), manifest("b", "busybox")).expect("write");
    let (plan, _, _) = dry_run(&[
        "--container-runtime-endpoint=fake://".into(),
        snapshot_file(dir.path()),
        format!("--pod-manifest-path={}", manifests.display()),
    ]);
    let namespaces = |pod: &str| {
        plan["pods"]
            .as_array()
            .and_then(|pods| pods.iter().find(|p| p["name"] == pod))
            .map(|p| p["actions"]["startContainers"][0]["security"]["namespaces"].clone())
            .unwrap_or_else(|| panic!("pod {pod} in {plan}"))
    };
    assert_eq!(namespaces("a-node-a")["user"], "Pod", "{plan}");
    assert!(namespaces("b-node-a").get("user").is_none(), "{plan}");
}

fn burstable_manifest_dir(dir: &Path) -> PathBuf {
    let manifests = dir.join("m");
    std::fs::create_dir_all(&manifests).expect("dir");
    std::fs::write(
        manifests.join("web.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: busybox\n    resources:\n      requests: {cpu: 250m, memory: 64Mi}\n      limits: {cpu: 500m, memory: 128Mi}\n",
    )
    .expect("write");
    manifests
}

fn cgroup_entries(plan: &Value) -> Vec<(String, String, BTreeMap<String, String>)> {
    plan["cgroups"]["entries"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    let values = e["values"]
                        .as_array()
                        .map(|v| {
                            v.iter()
                                .map(|kv| {
                                    // cgroupfs values are strings; systemd ones
                                    // are typed, compared here as their JSON.
                                    let value = match &kv["value"] {
                                        Value::String(s) => s.clone(),
                                        other => other.to_string(),
                                    };
                                    (kv["key"].as_str().unwrap_or("").to_string(), value)
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    (
                        e["role"].as_str().unwrap_or("").to_string(),
                        e["name"].as_str().unwrap_or("").to_string(),
                        values,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn cgroupfs_shows_paths_and_file_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = burstable_manifest_dir(dir.path());
    let (plan, code, _) = dry_run(&[
        "--container-runtime-endpoint=fake://".into(),
        snapshot_file(dir.path()),
        "--cgroup-driver=cgroupfs".into(),
        format!("--pod-manifest-path={}", manifests.display()),
    ]);
    assert_eq!(code, 2, "{plan}");
    assert_eq!(plan["cgroups"]["driver"], "cgroupfs");
    assert_eq!(plan["cgroups"]["cgroupVersion"], "v2");
    let entries = cgroup_entries(&plan);
    let names: Vec<&str> = entries.iter().map(|(_, n, _)| n.as_str()).collect();
    let uid = plan["pods"][0]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let pod_path = format!("/kubepods/burstable/pod{uid}");
    assert_eq!(
        names,
        [
            "/kubepods",
            "/kubepods/burstable",
            "/kubepods/besteffort",
            pod_path.as_str()
        ]
    );
    assert_eq!(plan["pods"][0]["cgroup"], pod_path);
    // kubepods: allocatable without eviction (8Gi machine, nothing reserved), 2 CPUs.
    let kubepods = &entries[0].2;
    assert_eq!(kubepods["memory.max"], "8589934592");
    assert!(kubepods.contains_key("cpu.weight"), "{kubepods:?}");
    let pod = &entries[3].2;
    assert_eq!(pod["cpu.max"], "50000 100000");
    assert_eq!(pod["memory.max"], "134217728");
    assert_eq!(
        entries[2].2.get("cpu.weight").map(String::as_str),
        Some("1")
    );
}

#[test]
fn systemd_shows_slice_names_and_properties() {
    for (version, v1) in [("v1", true), ("v2", false)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifests = burstable_manifest_dir(dir.path());
        let (plan, code, _) = dry_run(&[
            "--container-runtime-endpoint=fake://".into(),
            snapshot_file_on(dir.path(), version),
            "--cgroup-driver=systemd".into(),
            format!("--pod-manifest-path={}", manifests.display()),
        ]);
        assert_eq!(code, 2, "{plan}");
        assert_eq!(plan["cgroups"]["driver"], "systemd");
        assert_eq!(plan["cgroups"]["cgroupVersion"], version);
        let entries = cgroup_entries(&plan);
        let uid = plan["pods"][0]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let names: Vec<&str> = entries.iter().map(|(_, n, _)| n.as_str()).collect();
        let pod_unit = format!("kubepods-burstable-pod{uid}.slice");
        assert_eq!(
            names,
            [
                "kubepods.slice",
                "kubepods-burstable.slice",
                "kubepods-besteffort.slice",
                pod_unit.as_str()
            ]
        );
        assert_eq!(
            plan["pods"][0]["cgroup"],
            format!("/kubepods.slice/kubepods-burstable.slice/{pod_unit}")
        );
        // The real unit properties, typed as on D-Bus.
        let pod = &entries[3].2;
        assert_eq!(pod["Wants"], r#"["kubepods-burstable.slice"]"#);
        assert_eq!(pod["DefaultDependencies"], "false");
        assert_eq!(pod["CPUQuotaPeriodUSec"], "100000");
        assert_eq!(pod["CPUQuotaPerSecUSec"], "500000");
        if v1 {
            assert_eq!(pod["CPUShares"], "256");
            assert_eq!(pod["MemoryLimit"], "134217728");
            assert!(pod.contains_key("BlockIOAccounting"), "{pod:?}");
            assert!(!pod.contains_key("CPUWeight") && !pod.contains_key("MemoryMax"));
        } else {
            // The default curve, as --cpu-weight-curve leaves it.
            let weight = rkubelet::domain::cgroup::shares_to_weight(
                256,
                rkubelet::domain::cgroup::WeightCurve::default(),
            );
            assert_eq!(pod["CPUWeight"], weight.to_string());
            assert_eq!(pod["MemoryMax"], "134217728");
            assert!(pod.contains_key("IOAccounting"), "{pod:?}");
            assert!(!pod.contains_key("CPUShares") && !pod.contains_key("MemoryLimit"));
        }
        assert_eq!(plan["schemaVersion"], 4);
    }
}

/// A manifest with several problems (issue 32's new user): every one named in one pass,
/// the bad quantity by its field, the unknown key by name; the manifest skipped, exit 1.
#[test]
fn a_bad_manifest_is_skipped_with_every_problem_named_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).expect("manifest dir");
    std::fs::write(
        manifests.join("bad.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  restartPolicy: Sometimes\n  containers:\n  - name: App_1\n    image: busybox\n    comand: [sleep]\n    resources: {limits: {cpu: lots}}\n",
    )
    .expect("manifest");
    let (plan, code, _) = dry_run(&[
        "--container-runtime-endpoint=fake://".into(),
        snapshot_file(dir.path()),
        format!("--pod-manifest-path={}", manifests.display()),
    ]);
    assert_eq!(code, 1, "{plan}");
    let skipped = strs(&plan["skippedManifests"]);
    let [one] = skipped.as_slice() else {
        panic!("one skipped manifest: {plan}");
    };
    for want in [
        "spec.restartPolicy: Unsupported value: \"Sometimes\"",
        "spec.containers[0].resources.limits.cpu: quantities must match",
        "spec.containers[0].name: Invalid value: \"App_1\"",
        "spec.containers[0].comand: not a field rkubelet knows",
    ] {
        assert!(one.contains(want), "{want} missing from {one}");
    }
}
