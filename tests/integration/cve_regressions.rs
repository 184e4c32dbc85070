//! Regression tests for historic kubelet vulnerabilities that apply to a Linux node
//! (issue 30), each against a private containerd (and a private control plane where the
//! refusal is an event or the protection is eviction, which static pods escape). Each
//! test says what the advisory was, what upstream's fix does, and what it checks here.
//!
//! Needs root, containerd and the Kubernetes binaries (`scripts/test-env/install-deps.sh`);
//! fails without them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::cluster::Cluster;
use crate::common::node::*;

/// The image whose config sets `"User": "1000:1000"` (scripts/test-env/build-images.sh
/// `--user-image`).
const USER_IMAGE: &str = "registry.rkubelet.test/busybox-user:1";

fn node(name: &str) -> Node {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "must run as root: it starts containerd"
    );
    Node::start(name)
}

fn import_user_image(node: &Node) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env/build-images.sh");
    let out = std::process::Command::new(script)
        .arg("--user-image")
        .arg(node.ctrd.socket())
        .output()
        .expect("build-images.sh runs");
    assert!(
        out.status.success(),
        "build-images.sh --user-image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The pod's folder under the root directory (`<root>/pods/<uid>`), its uid read from
/// its sandbox.
async fn pod_dir(node: &Node, pod: &str) -> PathBuf {
    let uid = eventually!(60, format!("a sandbox of {pod}"), {
        node.sandboxes(pod).await.first().map(|s| s.uid.clone())
    });
    node.root.join("pods").join(uid)
}

/// The events of `object` in the default namespace, as (reason, message).
fn events_of(cluster: &Cluster, object: &str) -> Vec<(String, String)> {
    crate::common::api_pods::events_of(cluster, object)
        .into_iter()
        .map(|(_, reason, message)| (reason, message))
        .collect()
}

/// CVE-2019-11245 (v1.13.6, v1.14.2): a container without `runAsUser` whose image names a
/// non-root `USER` ran as that user the first time, but as root (uid 0) after a restart
/// (the kubelet read the user from an image status it no longer populated). Upstream's
/// fix takes the user from the image on every start. Checked here: a container of an
/// image with `"User": "1000:1000"`, no `runAsUser`, that records `id -u`/`id -g` into an
/// emptyDir and exits 1; restarted by `restartPolicy: Always`, it records 1000:1000 on
/// its first run and on its restart, never 0.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn cve_2019_11245_a_restarted_container_keeps_the_images_non_root_user() {
    let mut node = node("cve-11245");
    import_user_image(&node);
    let main = container(
        "main",
        USER_IMAGE,
        "echo \"$(id -u):$(id -g)\" >> /scratch/ids; sleep 1; exit 1",
    ) + "    volumeMounts:\n    - {name: scratch, mountPath: /scratch}\n";
    node.write(
        "imageuser.yaml",
        &pod(
            "imageuser",
            "  restartPolicy: Always\n  volumes:\n  - name: scratch\n    emptyDir: {}\n",
            &[],
            &[main],
        ),
    );
    node.kubelet();
    let dir = pod_dir(&node, "imageuser-n1").await;
    let ids_file = dir.join("volumes/kubernetes.io~empty-dir/scratch/ids");
    // The crash-loop back-off is 10 s before the first restart.
    let ids = eventually!(
        60,
        format!("two runs recorded in {}", ids_file.display()),
        std::fs::read_to_string(&ids_file)
            .ok()
            .filter(|t| t.lines().count() >= 2)
    );
    let runs: Vec<&str> = ids.lines().collect();
    assert_eq!(
        runs[..2],
        ["1000:1000", "1000:1000"],
        "the image's user on the first run and after the restart: {ids:?}"
    );
    // The second run writes its line as it starts; the status says so a moment later.
    eventually!(
        10,
        "restarted by policy (restartCount 1)",
        node.pod_json("imageuser-n1")
            .and_then(|p| p["status"]["containerStatuses"][0]["restartCount"].as_u64())
            .filter(|n| *n >= 1)
    );
    node.finish();
}

/// CVE-2023-2431 (v1.24.14, v1.25.10, v1.26.5, v1.27.2): a `seccompProfile` of type
/// `Localhost` with an empty `localhostProfile` passed validation and the kubelet ran
/// the container `Unconfined`, bypassing the seccomp profile an admission policy
/// demanded. Upstream's fix refuses it: the container waits with
/// `CreateContainerConfigError` and "localhostProfile must be set if seccompProfile type
/// is Localhost.". Checked here for static pods (no API server in between), on the pod
/// and on the container: a profile with an empty name (which validation lets through,
/// as the API server's does) leaves the container waiting with upstream's reason and
/// message; a profile without a name is refused earlier, by the manifest's validation
/// with the API server's message (logged); in both cases no container is ever created.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn cve_2023_2431_a_localhost_seccomp_profile_without_a_name_is_refused() {
    let mut node = node("cve-2431");
    let bb = node.busybox.clone();
    let cases = [
        (
            "podnoname",
            "  securityContext:\n    seccompProfile: {type: Localhost}\n",
            "",
        ),
        (
            "podempty",
            "  securityContext:\n    seccompProfile: {type: Localhost, localhostProfile: \"\"}\n",
            "",
        ),
        (
            "ctrnoname",
            "",
            "    securityContext:\n      seccompProfile: {type: Localhost}\n",
        ),
        (
            "ctrempty",
            "  securityContext:\n    seccompProfile: {type: RuntimeDefault}\n",
            "    securityContext:\n      seccompProfile: {type: Localhost, localhostProfile: \"\"}\n",
        ),
    ];
    for (name, spec_extra, container_extra) in cases {
        let text = pod(
            name,
            spec_extra,
            &[],
            &[container("main", &bb, "sleep 3600") + container_extra],
        );
        node.write(&format!("{name}.yaml"), &text);
    }
    node.kubelet();
    for (name, field) in [
        ("podnoname", "spec.securityContext"),
        ("ctrnoname", "spec.containers[0].securityContext"),
    ] {
        let line = eventually!(
            30,
            format!("{name}.yaml refused by validation"),
            node.log_text()
                .lines()
                .find(|l| l.contains(&format!("{name}.yaml holds an invalid pod")))
                .map(str::to_string)
        );
        assert!(
            line.contains(&format!(
                "{field}.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"
            )),
            "{line}"
        );
    }
    for name in ["podempty", "ctrempty"] {
        let pod = format!("{name}-n1");
        let waiting = eventually!(
            60,
            format!(
                "{pod}'s CreateContainerConfigError; /pods: {}",
                node.pods_body()
            ),
            node.pod_json(&pod).and_then(|p| {
                let w = p["status"]["containerStatuses"][0]["state"]["waiting"].clone();
                (w["reason"] == "CreateContainerConfigError").then_some(w)
            })
        );
        assert_eq!(
            waiting["message"], "localhostProfile must be set if seccompProfile type is Localhost.",
            "{pod}"
        );
    }
    // Held, not retried into an unconfined container.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (name, _, _) in cases {
        let pod = format!("{name}-n1");
        assert!(
            node.containers(&pod).await.is_empty(),
            "{pod} has a container"
        );
    }
    node.finish();
}

/// CVE-2024-10220 (v1.28.12, v1.29.7, v1.30.3): a `gitRepo` volume let a pod run code on
/// the node as the kubelet: the kubelet ran `git` on the host in a repository the pod's
/// author controlled (its hooks). Upstream's fix refuses a `directory` that leaves the
/// volume, and upstream has deprecated the plugin. rkubelet implements no `gitRepo` at
/// all; checked here that the volume is refused, not ignored: a pod from the API server
/// with a `gitRepo` volume (mounted by one container, and declared but unmounted in a
/// second pod) gets a `FailedMount` event naming the plugin as unsupported, its
/// containers wait in `ContainerCreating`, no container of it is ever created, and no
/// `git-repo` folder appears under the pod's folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd and a control plane: run by scripts/test.sh"]
async fn cve_2024_10220_a_git_repo_volume_is_refused_with_a_reason() {
    let cluster = Cluster::start("cve-10220");
    let mut node = node("cve-10220");
    node.kubelet_connected(&cluster, &[]);
    let bb = node.busybox.clone();
    let volume = "  volumes:\n  - name: repo\n    gitRepo: {repository: \"https://example.invalid/hooks.git\", directory: \".\"}\n";
    let mounted = container("main", &bb, "sleep 3600")
        + "    volumeMounts:\n    - {name: repo, mountPath: /repo}\n";
    cluster.apply(&api_pod("gitmounted", volume, &[], &[mounted]));
    cluster.apply(&api_pod(
        "gitdeclared",
        volume,
        &[],
        &[container("main", &bb, "sleep 3600")],
    ));
    for pod in ["gitmounted", "gitdeclared"] {
        let failed = eventually!(
            60,
            format!(
                "a FailedMount event of {pod}: {:?}",
                events_of(&cluster, pod)
            ),
            events_of(&cluster, pod)
                .into_iter()
                .find(|(reason, _)| reason == "FailedMount")
        );
        assert!(
            failed
                .1
                .contains("\"gitRepo\" volume plugin is not supported"),
            "{pod}: {failed:?}"
        );
        let status = cluster
            .get_json(&["pod", pod])
            .map(|p| p["status"].clone())
            .unwrap_or_default();
        assert_eq!(status["phase"], "Pending", "{pod}: {status}");
        let waiting = &status["containerStatuses"][0]["state"]["waiting"]["reason"];
        assert_eq!(waiting, "ContainerCreating", "{pod}: {status}");
        assert!(
            node.containers(pod).await.is_empty(),
            "{pod} has a container"
        );
        let mut git_dirs = Vec::new();
        walk(&node.root.join("pods"), &mut |p| {
            if p.to_string_lossy().contains("git-repo") {
                git_dirs.push(p.to_path_buf());
            }
        });
        assert!(git_dirs.is_empty(), "{git_dirs:?}");
    }
    node.finish();
}

/// CVE-2020-8557 (v1.16.13, v1.17.9, v1.18.6): the kubelet-managed `/etc/hosts` is a file
/// in the pod's folder on the node's disk, mounted read-write; writes to it were not
/// counted in the pod's ephemeral storage, so a pod could fill the node's disk past its
/// `ephemeral-storage` limit without being evicted. Upstream's fix counts the file in the
/// pod's usage (`calcEphemeralStorage`, `podLocalEphemeralStorageUsage`). Checked here: a
/// pod from the API server with an `ephemeral-storage` limit of 1Mi whose container
/// appends 5 MiB to `/etc/hosts` is evicted with upstream's message (local storage
/// isolation needs no threshold), the 5 MiB having landed in `<pod-dir>/etc-hosts`; a
/// pod beside it within its limit keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd and a control plane: run by scripts/test.sh"]
async fn cve_2020_8557_writes_to_etc_hosts_count_in_ephemeral_storage() {
    let cluster = Cluster::start("cve-8557");
    let mut node = node("cve-8557");
    node.kubelet_connected(&cluster, &["--housekeeping-interval=1s"]);
    let bb = node.busybox.clone();
    let limit = "    resources:\n      limits: {ephemeral-storage: 1Mi}\n";
    let filler = container(
        "main",
        &bb,
        "sleep 1; dd if=/dev/zero bs=1M count=5 >> /etc/hosts; sleep 3600",
    ) + limit;
    cluster.apply(&api_pod("hostsfill", "", &[], &[filler]));
    let quiet = container(
        "main",
        &bb,
        "echo '127.0.0.2 extra' >> /etc/hosts; sleep 3600",
    ) + limit;
    cluster.apply(&api_pod("hostsquiet", "", &[], &[quiet]));
    let dir = pod_dir(&node, "hostsfill").await;
    let hosts = dir.join("etc-hosts");
    let written = eventually!(
        60,
        format!("5 MiB in {}", hosts.display()),
        std::fs::metadata(&hosts)
            .ok()
            .map(|m| m.len())
            .filter(|len| *len >= 5 << 20)
    );
    let started = Instant::now();
    let evicted = eventually!(
        60,
        format!("hostsfill evicted; /pods: {}", node.pods_body()),
        node.pod_json("hostsfill")
            .filter(|p| { p["status"]["phase"] == "Failed" && p["status"]["reason"] == "Evicted" })
    );
    println!(
        "FIGURE /etc/hosts filled to {:.1} MiB: evicted {:.1} s after the write was seen",
        written as f64 / f64::from(1 << 20),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        evicted["status"]["message"],
        "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. "
    );
    // An evicted pod stays Failed, so waiting for Running cannot hide an eviction; the
    // wait covers a /pods answer slower than 5 s on CI's loaded machine (2026-11-29).
    let quiet = eventually!(
        30,
        format!("hostsquiet listed; /pods: {}", node.pods_body()),
        node.pod_json("hostsquiet")
    );
    assert_eq!(quiet["status"]["phase"], "Running", "{quiet}");
    node.finish();
}
