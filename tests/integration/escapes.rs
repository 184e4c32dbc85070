//! Attacks a pod author can make on the node with nothing but a pod spec, each the
//! kubelet's historic vulnerability or a finding of issue 30, run on a private
//! containerd against rkubelet. Each checks that the attack fails: a host folder (the
//! sentinel, which no container mounts) unchanged, the expected refusal in the pod's
//! status, and nothing made outside the pod's folders.
//!
//! - CVE-2017-1002101: a symlink made in a volume, then named by another container's
//!   `subPath`, gave that container the link's target on the host, read-write. Fixed
//!   upstream by opening the subpath under the volume without following links and
//!   bind-mounting the descriptor; rkubelet does the same (`ports::pod_files`).
//! - CVE-2021-25741: the same with the link swapped in while the kubelet checks the
//!   path; the descriptor is what gets mounted, so a swap after the check does nothing.
//! - CVE-2017-1002102: a container that could write its ConfigMap, Secret, downwardAPI
//!   or projected volume could point `..data` at a host folder, which the atomic writer
//!   then removed at the next update; these volumes are mounted read-only.
//! - `subPathExpr` that expands out of the volume, and a self-doubling environment that
//!   made rkubelet's memory grow by hundreds of MiB on every sync.
//!
//! Needs root and containerd (`scripts/test-env/install-deps.sh`); fails without them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::ports::runtime::RuntimeService;

use crate::common::node::*;

fn node(name: &str) -> Node {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "must run as root: it starts containerd"
    );
    Node::start(name)
}

/// A host folder no container mounts, with one file: what an escape would reach.
struct Sentinel {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Sentinel {
    fn new() -> Sentinel {
        let dir = tempfile::Builder::new()
            .prefix("rkubelet-sentinel-")
            .tempdir_in("/tmp")
            .expect("sentinel folder");
        let path = dir.path().to_owned();
        std::fs::write(path.join("keep"), "host").expect("sentinel file");
        Sentinel { _dir: dir, path }
    }

    fn assert_unchanged(&self) {
        let names: Vec<String> = std::fs::read_dir(&self.path)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(names, ["keep"], "the host folder changed");
        assert_eq!(
            std::fs::read_to_string(self.path.join("keep"))
                .ok()
                .as_deref(),
            Some("host")
        );
    }
}

/// A container of `image` running `script` with volume mounts given as YAML lines.
fn container_with_mounts(name: &str, image: &str, script: &str, mounts: &str) -> String {
    container(name, image, script).replace(
        "    command:",
        &format!("    volumeMounts:\n{mounts}    command:"),
    )
}

/// The waiting state of `container` in the pod's status, once its reason is `reason`.
fn waiting_for(node: &Node, pod: &str, container: &str, reason: &str) -> Option<serde_json::Value> {
    let pod = node.pod_json(pod)?;
    let statuses = pod["status"]["containerStatuses"].as_array()?.clone();
    statuses
        .into_iter()
        .find(|s| s["name"] == container)
        .map(|s| s["state"]["waiting"].clone())
        .filter(|w| w["reason"] == reason)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test]
#[ignore = "needs containerd: run by scripts/test.sh"]
async fn a_subpath_through_a_symlink_never_reaches_the_host() {
    let sentinel = Sentinel::new();
    let mut node = node("esc-subpath");
    let volume = "  volumes:\n  - name: v\n    emptyDir: {}\n";
    let init = |target: &str| {
        container_with_mounts(
            "plant",
            &node.busybox,
            &format!("ln -s {target} /v/evil && mkdir -p /v/ok"),
            "    - name: v\n      mountPath: /v\n",
        )
    };
    let writer = |sub: &str| {
        container_with_mounts(
            "main",
            &node.busybox,
            "echo pwned > /data/pwned; sleep 3600",
            &format!("    - name: v\n      mountPath: /data\n      subPath: {sub}\n"),
        )
    };
    // CVE-2017-1002101: a link to the host's root, and one to the sentinel.
    node.write(
        "root.yaml",
        &pod("root", volume, &[init("/")], &[writer("evil")]),
    );
    let sentinel_path = sentinel.path.display().to_string();
    node.write(
        "sentinel.yaml",
        &pod(
            "sentinel",
            volume,
            &[init(&sentinel_path)],
            &[writer("evil")],
        ),
    );
    // A subpath inside the volume works, and its writes land in the volume.
    node.write(
        "inside.yaml",
        &pod("inside", volume, &[init("/")], &[writer("ok")]),
    );
    // subPathExpr expanding out of the volume is refused, not given the whole volume.
    let expr = container_with_mounts(
        "main",
        &node.busybox,
        "sleep 3600",
        "    - name: v\n      mountPath: /data\n      subPathExpr: $(UP)/etc\n",
    )
    .replace(
        "    command:",
        "    env:\n    - name: UP\n      value: ../..\n    command:",
    );
    node.write("expr.yaml", &pod("expr", volume, &[], &[expr]));
    node.kubelet();

    for pod in ["root-n1", "sentinel-n1"] {
        let waiting = eventually!(
            90,
            format!("{pod}'s CreateContainerConfigError"),
            waiting_for(&node, pod, "main", "CreateContainerConfigError")
        );
        assert_eq!(
            waiting["message"],
            "failed to prepare subPath for volumeMount \"v\" of container \"main\""
        );
        let names: Vec<String> = node
            .containers(pod)
            .await
            .into_iter()
            .map(|c| c.status.name)
            .collect();
        assert_eq!(names, ["plant"], "{pod}: main was never created");
    }
    let waiting = eventually!(
        60,
        "expr's CreateContainerConfigError",
        waiting_for(&node, "expr-n1", "main", "CreateContainerConfigError")
    );
    assert_eq!(
        waiting["message"],
        "unable to provision SubPath `../../etc`: must not contain '..'"
    );
    node.wait_running("inside-n1", "main", 60).await;
    let uid = node.sandboxes("inside-n1").await[0].uid.clone();
    let written = node.root.join(format!(
        "pods/{uid}/volumes/kubernetes.io~empty-dir/v/ok/pwned"
    ));
    eventually!(
        30,
        "the subpath's write in the volume",
        std::fs::read_to_string(&written)
            .ok()
            .filter(|t| t == "pwned\n")
    );
    let target = node
        .root
        .join(format!("pods/{uid}/volume-subpaths/v/main/0"));
    assert!(
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .contains(&format!(" {} ", target.display())),
        "the runtime mounts the kubelet's bind at {}",
        target.display()
    );
    assert!(!Path::new("/pwned").exists(), "a file on the host's root");
    sentinel.assert_unchanged();

    // The pods go: their binds are unmounted and their folders removed.
    for file in ["root.yaml", "sentinel.yaml", "inside.yaml", "expr.yaml"] {
        node.remove(file);
    }
    eventually!(
        60,
        "the pods' folders removed",
        leftovers(&node).pod_dirs.is_empty().then_some(())
    );
    sentinel.assert_unchanged();
    node.finish();
}

#[tokio::test]
#[ignore = "needs containerd: run by scripts/test.sh"]
async fn a_symlink_swapped_in_during_the_check_never_reaches_the_host() {
    // CVE-2021-25741: one container swaps `/v/race` between a folder and a link to the
    // host as fast as it can, while others start with `subPath: race`, each a bind made
    // while the swap runs. Each either gets the volume's folder or is refused.
    let sentinel = Sentinel::new();
    let mut node = node("esc-race");
    let s = sentinel.path.display();
    let swapper = container_with_mounts(
        "swapper",
        &node.busybox,
        &format!(
            "while true; do rm -rf /v/race; mkdir /v/race; rm -rf /v/race; ln -s {s} /v/race; done"
        ),
        "    - name: v\n      mountPath: /v\n",
    );
    let victims: Vec<String> = (0..6)
        .map(|i| {
            container_with_mounts(
                &format!("victim{i}"),
                &node.busybox,
                &format!("echo pwned > /data/pwned{i}; sleep 3600"),
                "    - name: v\n      mountPath: /data\n      subPath: race\n",
            )
        })
        .collect();
    let mut containers = vec![swapper];
    containers.extend(victims);
    node.write(
        "race.yaml",
        &pod(
            "race",
            "  volumes:\n  - name: v\n    emptyDir: {}\n",
            &[],
            &containers,
        ),
    );
    node.kubelet();
    node.wait_running("race-n1", "swapper", 60).await;
    // Every victim tried at least once: running, or refused and waiting.
    let settled = |pod: &serde_json::Value| {
        let statuses = pod["status"]["containerStatuses"].as_array().cloned()?;
        let tried = statuses
            .iter()
            .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("victim")))
            .filter(|s| {
                s["state"]["running"].is_object()
                    || s["state"]["waiting"]["reason"] == "CreateContainerConfigError"
                    || s["restartCount"].as_u64().is_some_and(|n| n > 0)
            })
            .count();
        (tried == 6).then_some(statuses)
    };
    let statuses = eventually!(
        90,
        "every victim started or refused",
        node.pod_json("race-n1").as_ref().and_then(settled)
    );
    let refused = statuses
        .iter()
        .filter(|s| s["state"]["waiting"]["reason"] == "CreateContainerConfigError")
        .count();
    println!(
        "FIGURE subpath race: {refused} of 6 binds refused, the others got the volume's folder"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    sentinel.assert_unchanged();
    node.remove("race.yaml");
    eventually!(
        60,
        "the pod's folder removed",
        leftovers(&node).pod_dirs.is_empty().then_some(())
    );
    sentinel.assert_unchanged();
    node.finish();
}

#[tokio::test]
#[ignore = "needs containerd: run by scripts/test.sh"]
async fn api_data_volumes_are_read_only_and_an_environment_bomb_costs_no_memory() {
    let mut node = node("esc-ro");
    // CVE-2017-1002102: the container tries to point `..data` at a host folder.
    let tamper = container_with_mounts(
        "main",
        &node.busybox,
        "sleep 3600",
        "    - name: info\n      mountPath: /etc/podinfo\n",
    );
    node.write(
        "ro.yaml",
        &pod(
            "ro",
            "  volumes:\n  - name: info\n    downwardAPI:\n      items:\n      - path: name\n        fieldRef: {fieldPath: metadata.name}\n",
            &[],
            &[tamper],
        ),
    );
    // 26 variables each repeating the one before twice: 128 MiB expanded.
    let mut env = String::from("    env:\n    - name: V0\n      value: xx\n");
    for i in 1..=26 {
        env.push_str(&format!(
            "    - name: V{i}\n      value: $(V{})$(V{})\n",
            i - 1,
            i - 1
        ));
    }
    let bomb = container("main", &node.busybox, "sleep 3600")
        .replace("    command:", &format!("{env}    command:"));
    node.kubelet();
    node.wait_running("ro-n1", "main", 60).await;
    let entry = node.wait_running("ro-n1", "main", 5).await;
    let cmd = [
        "sh".to_owned(),
        "-c".to_owned(),
        "ln -sfn /etc /etc/podinfo/..data 2>&1; rm -rf /etc/podinfo/..data 2>&1; cat /etc/podinfo/name".to_owned(),
    ];
    let r = node
        .rt
        .exec_sync(&entry.status.id, &cmd, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("ExecSync: {e}"));
    let out = String::from_utf8_lossy(&r.stdout).into_owned();
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(out.ends_with("ro-n1"), "the volume is intact: {out}");

    let pid = node.daemon.as_ref().map_or(0, |d| d.child.id());
    let before = rss_kib(pid);
    node.write("bomb.yaml", &pod("bomb", "", &[], &[bomb]));
    let waiting = eventually!(
        60,
        "the bomb's CreateContainerConfigError",
        waiting_for(&node, "bomb-n1", "main", "CreateContainerConfigError")
    );
    assert!(
        waiting["message"]
            .as_str()
            .is_some_and(|m| m.contains("the most the kernel passes to a process")),
        "{waiting}"
    );
    // A few more syncs of the refused pod.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = rss_kib(pid);
    println!(
        "FIGURE environment bomb: rkubelet resident {:.1} MiB before, {:.1} MiB after (was 502 MiB)",
        before as f64 / 1024.0,
        after as f64 / 1024.0
    );
    assert!(
        after < before + 32 * 1024,
        "resident memory grew from {before} KiB to {after} KiB"
    );
    assert!(node.containers("bomb-n1").await.is_empty());
    node.remove("bomb.yaml");
    node.remove("ro.yaml");
    eventually!(
        60,
        "the pods' folders removed",
        leftovers(&node).pod_dirs.is_empty().then_some(())
    );
    node.finish();
}
