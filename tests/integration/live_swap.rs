//! A live swap between the upstream kubelet v1.26.1 and rkubelet, both ways, with 30
//! static pods on one containerd, the same manifests, root dir, pod log folder and cgroup
//! root: upstream starts the pods; rkubelet replaces it and adopts them; upstream comes
//! back and adopts them again; then rkubelet starts them afresh and upstream adopts
//! those. Each hand-over must restart no container and create no sandbox.
//!
//! Needs root, containerd and the upstream binaries (`scripts/test-env/kube-bins.sh`);
//! fails without them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::runtime::{
    ContainerFilter, ContainerState, SandboxFilter, SandboxState,
};
use rkubelet::ports::runtime::RuntimeService;

use crate::common::containerd::Containerd;
use crate::common::upstream::{self, remove_pod_logs_of, UpstreamArgs, UpstreamKubelet};
use crate::common::{start_daemon, Daemon};

const PODS: usize = 30;

/// Pod `i`: a busybox sleeping, with one of five shapes (plain; users, groups, fsGroup
/// and an emptyDir with a read-only root; an init container; a shared PID namespace
/// with ports and resources; privileged with host IPC).
fn manifest(i: usize, image: &str) -> String {
    let name = format!("swap-{i:02}");
    let container = |extra: &str| {
        format!(
            "  - name: main\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"sleep 3600\"]\n{extra}"
        )
    };
    let (spec, init, main) = match i % 5 {
        0 => (String::new(), String::new(), container("")),
        1 => (
            "  securityContext: {runAsUser: 1000, runAsGroup: 3000, fsGroup: 2000, seccompProfile: {type: RuntimeDefault}}\n  volumes:\n  - {name: data, emptyDir: {}}\n".to_owned(),
            String::new(),
            container("    securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [NET_RAW]}}\n    volumeMounts:\n    - {name: data, mountPath: /data}\n"),
        ),
        2 => (
            String::new(),
            format!("  initContainers:\n  - name: init\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"true\"]\n"),
            container(""),
        ),
        3 => (
            "  shareProcessNamespace: true\n".to_owned(),
            String::new(),
            container("    ports:\n    - {name: http, containerPort: 8080}\n    resources:\n      requests: {cpu: 10m, memory: 8Mi}\n      limits: {cpu: 50m, memory: 32Mi}\n"),
        ),
        _ => (
            "  hostIPC: true\n".to_owned(),
            String::new(),
            container("    securityContext: {privileged: true}\n"),
        ),
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n{spec}{init}  containers:\n{main}"
    )
}

/// What the runtime holds: sandbox id to state, container id to (pod, name, state).
#[derive(Debug, Clone, PartialEq)]
struct Holdings {
    sandboxes: BTreeMap<String, (String, SandboxState)>,
    containers: BTreeMap<String, (String, String, ContainerState)>,
}

async fn holdings(rt: &CriRuntime) -> Holdings {
    let sandboxes = rt
        .list_pod_sandboxes(&SandboxFilter::default())
        .await
        .expect("ListPodSandbox")
        .into_iter()
        .map(|s| (s.status.id, (s.name, s.status.state)))
        .collect();
    let containers = rt
        .list_containers(&ContainerFilter::default())
        .await
        .expect("ListContainers")
        .into_iter()
        .map(|c| {
            let pod = c
                .labels
                .get("io.kubernetes.pod.name")
                .cloned()
                .unwrap_or_default();
            (c.status.id, (pod, c.status.name, c.status.state))
        })
        .collect();
    Holdings {
        sandboxes,
        containers,
    }
}

/// Every pod has one ready sandbox and its main container running.
fn all_running(h: &Holdings) -> bool {
    let ready = h
        .sandboxes
        .values()
        .filter(|(_, s)| *s == SandboxState::Ready)
        .count();
    let running = h
        .containers
        .values()
        .filter(|(_, name, s)| name == "main" && *s == ContainerState::Running)
        .count();
    ready == PODS && running == PODS && h.sandboxes.len() == PODS
}

/// Containers started and sandboxes created since `before`, and containers of
/// `before` no longer running.
fn changes(before: &Holdings, after: &Holdings) -> (usize, usize, Vec<String>) {
    let mut notes = Vec::new();
    let new_sandboxes = after
        .sandboxes
        .keys()
        .filter(|id| !before.sandboxes.contains_key(*id))
        .count();
    let mut restarted = 0;
    for (id, (pod, name, state)) in &after.containers {
        if !before.containers.contains_key(id) {
            restarted += 1;
            notes.push(format!("new container {pod}/{name} ({state:?})"));
        }
    }
    for (id, (pod, name, state)) in &before.containers {
        let now = after.containers.get(id).map(|c| c.2);
        if *state == ContainerState::Running && now != Some(ContainerState::Running) {
            notes.push(format!("{pod}/{name} was running, now {now:?}"));
        }
    }
    (restarted, new_sandboxes, notes)
}

async fn wait_all_running(rt: &CriRuntime, who: &str, log: impl Fn() -> String) -> Holdings {
    let deadline = Instant::now() + crate::common::patience(240);
    loop {
        let h = holdings(rt).await;
        if all_running(&h) {
            return h;
        }
        assert!(
            Instant::now() < deadline,
            "{who} did not run the {PODS} pods within 240 s: {} sandboxes; log:\n{}",
            h.sandboxes.len(),
            log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The upstream kubelet at `--v=4`, so its log says when it has synced each pod.
fn start_upstream(bins: &Path, ctrd: &Containerd, dir: &Path, manifests: &Path) -> UpstreamKubelet {
    UpstreamKubelet::start(
        bins,
        ctrd,
        &UpstreamArgs {
            dir,
            node: NODE,
            manifests: Some(manifests),
            url: None,
            extra: &["--v=4".to_owned()],
        },
    )
}

const NODE: &str = "swapnode";

/// What the run leaves, passed or not: the test folder (unmounted first), the pod logs,
/// and /var/lib/kubelet when upstream made it.
struct Cleanup {
    dir: PathBuf,
    var_lib_kubelet_existed: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        upstream::unmount_below(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
        remove_pod_logs_of(NODE);
        if !self.var_lib_kubelet_existed {
            let _ = std::fs::remove_dir_all("/var/lib/kubelet");
        }
    }
}

/// Waits until upstream's log says it synced every pod (`syncPod exit`) since its start.
async fn wait_upstream_synced(kubelet: &UpstreamKubelet) -> Duration {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    loop {
        let log = std::fs::read_to_string(kubelet.dir.join("kubelet.log")).unwrap_or_default();
        let synced = (0..PODS)
            .filter(|i| {
                log.contains(&format!(
                    "\"syncPod exit\" pod=\"default/swap-{i:02}-{NODE}\""
                ))
            })
            .count();
        if synced == PODS {
            return started.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "upstream synced {synced} of {PODS} pods in 120 s; log:\n{}",
            kubelet.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Waits until rkubelet's `/pods` shows every pod running (each synced once).
async fn wait_rkubelet_synced(daemon: &Daemon) -> Duration {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    loop {
        let running = crate::common::pods_get(daemon)
            .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
            .and_then(|list| {
                let items = list["items"].as_array()?.clone();
                Some(
                    items
                        .iter()
                        .filter(|p| {
                            p["status"]["containerStatuses"][0]["state"]["running"].is_object()
                        })
                        .count(),
                )
            })
            .unwrap_or(0);
        if running == PODS {
            return started.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "rkubelet shows {running} of {PODS} pods running after 120 s; log:\n{}",
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn start_rkubelet(ctrd: &Containerd, root: &Path, manifests: &Path) -> Daemon {
    start_daemon(
        &[
            format!("--container-runtime-endpoint={}", ctrd.var("CRI_ENDPOINT")),
            format!("--pod-manifest-path={}", manifests.display()),
            format!("--root-dir={}", root.display()),
            format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
            format!("--hostname-override={NODE}"),
            "--file-check-frequency=2s".into(),
            crate::common::read_only_port_flag(),
        ],
        false,
    )
}

/// Watches the runtime for `secs` seconds after a take-over and returns the changes.
async fn settle(rt: &CriRuntime, before: &Holdings, secs: u64) -> (usize, usize, Vec<String>) {
    tokio::time::sleep(Duration::from_secs(secs)).await;
    changes(before, &holdings(rt).await)
}

#[tokio::test]
#[ignore = "needs containerd and the upstream kubelet: run by scripts/test.sh"]
async fn a_node_swaps_kubelets_both_ways_without_restarting_a_container() {
    let (bins, _lock) = upstream::require_peers();
    let mut ctrd = Containerd::start("swap");
    let rt = CriRuntime::connect(&ctrd.var("CRI_ENDPOINT"), Duration::from_secs(30))
        .expect("CRI client");
    let dir = PathBuf::from(format!("/tmp/rkswap-{}", std::process::id()));
    let var_lib_kubelet_existed = Path::new("/var/lib/kubelet").exists();
    let cleanup = Cleanup {
        dir: dir.clone(),
        var_lib_kubelet_existed,
    };
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifest folder");
    let image = ctrd.var("BUSYBOX_IMAGE");
    for i in 0..PODS {
        std::fs::write(
            manifests.join(format!("swap-{i:02}.yaml")),
            manifest(i, &image),
        )
        .expect("manifest");
    }
    // One kubelet folder for both: upstream's root dir is `<kubelet>/root`.
    let kubelet_dir = dir.join("kubelet");
    let root = kubelet_dir.join("root");
    let mut report = Vec::new();

    // 1. Upstream starts the pods.
    let t0 = Instant::now();
    let up = start_upstream(&bins, &ctrd, &kubelet_dir, &manifests);
    let before = wait_all_running(&rt, "the upstream kubelet", || up.log()).await;
    report.push(format!(
        "upstream started {PODS} pods in {:.1} s",
        t0.elapsed().as_secs_f64()
    ));
    up.hand_over();

    // 2. rkubelet takes over.
    let daemon = start_rkubelet(&ctrd, &root, &manifests);
    let synced = wait_rkubelet_synced(&daemon).await;
    let (restarted, sandboxes, notes) = settle(&rt, &before, 5).await;
    assert_eq!(
        (restarted, sandboxes),
        (0, 0),
        "upstream -> rkubelet: {notes:?}; rkubelet's log:\n{}",
        daemon.log_text()
    );
    report.push(format!(
        "upstream -> rkubelet: synced {PODS} pods in {:.1} s, {restarted} containers restarted, {sandboxes} extra sandboxes",
        synced.as_secs_f64()
    ));
    let mut daemon = daemon;
    assert!(daemon.terminate_within(Duration::from_secs(15)).is_some());

    // 3. Upstream takes them back.
    let up = start_upstream(&bins, &ctrd, &kubelet_dir, &manifests);
    let synced = wait_upstream_synced(&up).await;
    let (restarted, sandboxes, notes) = settle(&rt, &before, 5).await;
    assert_eq!(
        (restarted, sandboxes),
        (0, 0),
        "rkubelet -> upstream: {notes:?}; upstream's log:\n{}",
        up.log()
    );
    report.push(format!(
        "rkubelet -> upstream: synced {PODS} pods in {:.1} s, {restarted} containers restarted, {sandboxes} extra sandboxes",
        synced.as_secs_f64()
    ));
    up.hand_over();

    // 4. rkubelet starts the pods afresh, and upstream adopts what rkubelet made.
    for s in rt
        .list_pod_sandboxes(&SandboxFilter::default())
        .await
        .expect("ListPodSandbox")
    {
        rt.stop_pod_sandbox(&s.status.id).await.expect("stop");
        rt.remove_pod_sandbox(&s.status.id).await.expect("remove");
    }
    let t0 = Instant::now();
    let mut daemon = start_rkubelet(&ctrd, &root, &manifests);
    let fresh = wait_all_running(&rt, "rkubelet", || daemon.log_text()).await;
    report.push(format!(
        "rkubelet started {PODS} pods in {:.1} s",
        t0.elapsed().as_secs_f64()
    ));
    assert!(daemon.terminate_within(Duration::from_secs(15)).is_some());
    let up = start_upstream(&bins, &ctrd, &kubelet_dir, &manifests);
    let synced = wait_upstream_synced(&up).await;
    let (restarted, sandboxes, notes) = settle(&rt, &fresh, 5).await;
    assert_eq!(
        (restarted, sandboxes),
        (0, 0),
        "rkubelet-made pods -> upstream: {notes:?}; upstream's log:\n{}",
        up.log()
    );
    report.push(format!(
        "rkubelet-made pods -> upstream: synced {PODS} pods in {:.1} s, {restarted} containers restarted, {sandboxes} extra sandboxes",
        synced.as_secs_f64()
    ));
    for line in &report {
        eprintln!("live swap: {line}");
    }

    drop(up);
    drop(cleanup);
    assert!(
        var_lib_kubelet_existed || !Path::new("/var/lib/kubelet").exists(),
        "/var/lib/kubelet left"
    );
    let left = ctrd.down();
    assert!(left.is_empty(), "containerd teardown left: {left:?}");
    assert!(!dir.exists(), "{} left", dir.display());
}
