//! The CRI requests of rkubelet against the upstream kubelet v1.26.1's: the static pods
//! of `fixtures/upstream-compare` (every security setting, ports, resources, an init
//! container, host namespaces, a Localhost seccomp profile, an image with a USER) are
//! started by upstream on a private containerd, then, after they are removed, by
//! rkubelet with the same manifests and node name. What containerd recorded for each
//! sandbox and container (`crictl inspectp`/`inspect`: the CRI config it received and
//! the OCI spec it wrote) must be the same, apart from the differences listed in
//! [`ALLOWED`] and documented in `docs/live-swap.md`.
//!
//! Needs root, containerd and the upstream binaries (`scripts/test-env/kube-bins.sh`);
//! fails without them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::runtime::{ContainerFilter, ContainerState, SandboxFilter};
use rkubelet::domain::pod::static_pod::{decode_static_pods, PodSourceKind};
use rkubelet::ports::runtime::RuntimeService;
use serde_json::Value;

use crate::common::containerd::Containerd;
use crate::common::start_daemon;
use crate::common::upstream::{self, remove_pod_logs_of, UpstreamArgs, UpstreamKubelet};

/// A difference allowed between the two views: where it is (a part of the flattened
/// path) and why (`docs/live-swap.md` says the same).
struct Allowed {
    /// Only in the sandboxes and containers whose name holds this ("" for all).
    object_contains: &'static str,
    path_contains: &'static str,
    why: &'static str,
}

const ALLOWED: &[Allowed] = &[
    Allowed {
        object_contains: "hostnet-",
        path_contains: "mounts[/etc/hosts]",
        why: "a host-network pod: rkubelet mounts the node's /etc/hosts with the pod's aliases, as upstream does once it knows the node's IP; upstream v1.26 standalone knows no pod IP at the container's creation and leaves the runtime's copy",
    },
    Allowed {
        object_contains: "",
        path_contains: "mounts[/dev/termination-log].host_path",
        why: "the termination-message file of a container instance: upstream names it with a random id, rkubelet with the instance's attempt (unique per instance too)",
    },
    Allowed {
        object_contains: "",
        path_contains: "mounts[/dev/termination-log].source",
        why: "the same file, in the OCI spec",
    },
    Allowed {
        object_contains: "",
        path_contains: "mounts[/dev/termination-log].hostPath",
        why: "the same file, in the container's status",
    },
    Allowed {
        object_contains: "",
        path_contains: "annotations.io.rkubelet.container.backOffStep",
        why: "rkubelet records the crash-loop back-off step on each container",
    },
    Allowed {
        object_contains: "",
        path_contains: "config.linux.security_context.seccomp_profile_path",
        why: "upstream v1.26 also sends the container's deprecated seccomp_profile_path, which the CRI rkubelet speaks no longer has (the seccomp profile itself is the same)",
    },
    Allowed {
        object_contains: "",
        path_contains: "config.linux.security_context.apparmor",
        why: "upstream v1.26 sends the AppArmor annotation in the deprecated apparmor_profile string, rkubelet in the apparmor profile field (the same profile)",
    },
];

/// Keys whose values differ from run to run whoever starts the pod.
const VOLATILE: &[&str] = &[
    ".status.id",
    ".status.createdAt",
    ".status.startedAt",
    ".status.finishedAt",
    ".info.pid",
    ".info.sandboxID",
    ".info.snapshotKey",
    ".info.cniResult",
    ".status.network.ip",
    ".status.annotations.kubernetes.io/config.seen",
    ".info.config.annotations.kubernetes.io/config.seen",
    ".info.runtimeSpec.annotations.io.kubernetes.cri.sandbox-id",
    // containerd 2.x's sandbox info: the same facts under `sandboxMetadata.Metadata`.
    ".info.sandboxMetadata.Metadata.CNIResult",
    ".info.sandboxMetadata.Metadata.IP",
    ".info.sandboxMetadata.Metadata.NetNSPath",
    ".info.sandboxMetadata.Metadata.Config.annotations.kubernetes.io/config.seen",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/upstream-compare/manifests")
}

/// The pods of the fixtures: name, init containers, containers.
fn expected(manifests: &Path, node: &str) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    let mut pods = BTreeMap::new();
    for entry in std::fs::read_dir(manifests).expect("manifests") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("manifest");
        let decoded = decode_static_pods(
            &path.display().to_string(),
            text.as_bytes(),
            node,
            PodSourceKind::File,
            "2024-01-01T00:00:00Z",
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for pod in decoded {
            let names = |cs: &[rkubelet::domain::pod::Container]| {
                cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>()
            };
            pods.insert(
                pod.metadata.name.clone(),
                (
                    names(&pod.spec.init_containers),
                    names(&pod.spec.containers),
                ),
            );
        }
    }
    pods
}

/// True once every pod has a ready sandbox, its init containers exited and its
/// containers running.
async fn complete(rt: &CriRuntime, want: &BTreeMap<String, (Vec<String>, Vec<String>)>) -> bool {
    let Ok(sandboxes) = rt.list_pod_sandboxes(&SandboxFilter::default()).await else {
        return false;
    };
    let Ok(containers) = rt.list_containers(&ContainerFilter::default()).await else {
        return false;
    };
    want.iter().all(|(pod, (init, regular))| {
        let Some(sandbox) = sandboxes.iter().find(|s| &s.name == pod) else {
            return false;
        };
        let state = |name: &str| {
            containers
                .iter()
                .find(|c| c.sandbox_id == sandbox.status.id && c.status.name == name)
                .map(|c| c.status.state)
        };
        init.iter()
            .all(|c| state(c) == Some(ContainerState::Exited))
            && regular
                .iter()
                .all(|c| state(c) == Some(ContainerState::Running))
    })
}

async fn wait_complete(
    rt: &CriRuntime,
    want: &BTreeMap<String, (Vec<String>, Vec<String>)>,
    who: &str,
    log: impl Fn() -> String,
) {
    let deadline = Instant::now() + crate::common::patience(180);
    while !complete(rt, want).await {
        assert!(
            Instant::now() < deadline,
            "{who} did not run every pod within 180 s; its log:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn crictl(bins: &Path, endpoint: &str, args: &[&str]) -> String {
    let out = Command::new(bins.join("crictl"))
        .arg(format!("--runtime-endpoint={endpoint}"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("crictl {args:?}: {e}"));
    assert!(
        out.status.success(),
        "crictl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What containerd shows for every sandbox (`pod/<name>`) and container
/// (`container/<pod>/<name>`).
fn capture(bins: &Path, endpoint: &str) -> BTreeMap<String, Value> {
    let json = |text: String| -> Value { serde_json::from_str(&text).expect("crictl JSON") };
    let mut views = BTreeMap::new();
    for id in crictl(bins, endpoint, &["pods", "-q"]).lines() {
        let v = json(crictl(bins, endpoint, &["inspectp", id]));
        let name = v["status"]["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        views.insert(format!("pod/{name}"), v);
    }
    for id in crictl(bins, endpoint, &["ps", "-a", "-q"]).lines() {
        let v = json(crictl(bins, endpoint, &["inspect", id]));
        let pod = v["status"]["labels"]["io.kubernetes.pod.name"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let name = v["status"]["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        views.insert(format!("container/{pod}/{name}"), v);
    }
    views
}

/// Stops and removes every sandbox the runtime holds.
async fn remove_all(rt: &CriRuntime) {
    for s in rt
        .list_pod_sandboxes(&SandboxFilter::default())
        .await
        .expect("ListPodSandbox")
    {
        rt.stop_pod_sandbox(&s.status.id).await.expect("stop");
        rt.remove_pod_sandbox(&s.status.id).await.expect("remove");
    }
}

/// A 64-digit hex id (sandbox or container) anywhere in a string becomes `<id>`.
fn mask_ids(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let run = bytes[i..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            .count();
        if run >= 64 {
            out.push_str("<id>");
            i += run;
        } else {
            let end = i + run.max(1);
            out.push_str(&s[i..end]);
            i = end;
        }
    }
    out
}

/// Flattens `v` into `path = value` lines, with the root dir spelled `<root-dir>`, ids
/// masked, and mount lists keyed by their destination.
fn flatten(v: &Value, path: &str, root: &str, out: &mut BTreeMap<String, String>) {
    if VOLATILE.iter().any(|k| path.ends_with(k))
        || path.contains(".linux.namespaces[") && path.ends_with(".path")
    {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                flatten(x, &format!("{path}.{k}"), root, out);
            }
        }
        Value::Array(items) if path.ends_with("mounts") => {
            for m in items {
                let key = ["destination", "container_path", "containerPath"]
                    .iter()
                    .find_map(|k| m[*k].as_str())
                    .unwrap_or("?");
                flatten(m, &format!("{path}[{key}]"), root, out);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                flatten(x, &format!("{path}[{i}]"), root, out);
            }
        }
        Value::String(s) => {
            out.insert(path.to_owned(), mask_ids(&s.replace(root, "<root-dir>")));
        }
        other => {
            out.insert(path.to_owned(), other.to_string());
        }
    }
}

#[tokio::test]
#[ignore = "needs containerd and the upstream kubelet: run by scripts/test.sh"]
async fn rkubelet_sends_the_cri_requests_upstream_v1_26_sends() {
    let (bins, _lock) = upstream::require_peers();
    let mut ctrd = Containerd::start("cmp");
    let endpoint = ctrd.var("CRI_ENDPOINT");
    let rt = CriRuntime::connect(&endpoint, Duration::from_secs(30)).expect("CRI client");
    let dir = PathBuf::from(format!("/tmp/rkcmp-{}", std::process::id()));
    let node = format!("cmp{}", std::process::id());
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifest folder");
    for entry in std::fs::read_dir(fixtures()).expect("fixtures") {
        let path = entry.expect("fixture").path();
        std::fs::copy(&path, manifests.join(path.file_name().expect("name"))).expect("copy");
    }
    let up_root = dir.join("upstream/root");
    let rk_root = dir.join("rkubelet/root");
    for root in [&up_root, &rk_root] {
        let profiles = root.join("seccomp/rk");
        std::fs::create_dir_all(&profiles).expect("seccomp folder");
        std::fs::write(
            profiles.join("allow.json"),
            r#"{"defaultAction":"SCMP_ACT_ALLOW"}"#,
        )
        .expect("seccomp profile");
    }
    let want = expected(&manifests, &node);
    assert_eq!(want.len(), 5, "{want:?}");

    // Upstream first.
    let kubelet = UpstreamKubelet::start(
        &bins,
        &ctrd,
        &UpstreamArgs {
            dir: &dir.join("upstream"),
            node: &node,
            manifests: Some(&manifests),
            url: None,
            extra: &[],
        },
    );
    wait_complete(&rt, &want, "the upstream kubelet", || kubelet.log()).await;
    let upstream_view = capture(&bins, &endpoint);
    let mut kubelet = kubelet;
    kubelet.stop();
    remove_all(&rt).await;
    remove_pod_logs_of(&node);

    // Then rkubelet, with the same manifests and node name.
    let mut daemon = start_daemon(
        &[
            format!("--container-runtime-endpoint={endpoint}"),
            format!("--pod-manifest-path={}", manifests.display()),
            format!("--root-dir={}", rk_root.display()),
            format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
            format!("--hostname-override={node}"),
            "--file-check-frequency=2s".into(),
        ],
        false,
    );
    wait_complete(&rt, &want, "rkubelet", || daemon.log_text()).await;
    let rkubelet_view = capture(&bins, &endpoint);
    assert!(
        daemon.terminate_within(Duration::from_secs(15)).is_some(),
        "rkubelet stops on SIGTERM"
    );
    remove_all(&rt).await;

    // The comparison.
    assert_eq!(
        upstream_view.keys().collect::<Vec<_>>(),
        rkubelet_view.keys().collect::<Vec<_>>(),
        "the same sandboxes and containers"
    );
    let mut fields = 0;
    let mut allowed: BTreeMap<&str, usize> = BTreeMap::new();
    let mut undocumented = Vec::new();
    for (object, up) in &upstream_view {
        let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
        flatten(up, "", &up_root.display().to_string(), &mut a);
        flatten(
            &rkubelet_view[object],
            "",
            &rk_root.display().to_string(),
            &mut b,
        );
        let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        fields += keys.len();
        for key in keys {
            let (x, y) = (a.get(key), b.get(key));
            if x == y {
                continue;
            }
            match ALLOWED
                .iter()
                .find(|r| object.contains(r.object_contains) && key.contains(r.path_contains))
            {
                Some(rule) => *allowed.entry(rule.path_contains).or_default() += 1,
                None => {
                    undocumented.push(format!("{object} {key}: upstream {x:?}, rkubelet {y:?}"))
                }
            }
        }
    }
    eprintln!(
        "CRI comparison with the upstream kubelet v1.26.1: {} sandboxes and containers, {fields} fields; documented differences: {allowed:?}",
        upstream_view.len()
    );
    for rule in ALLOWED {
        eprintln!("  allowed {}: {}", rule.path_contains, rule.why);
    }
    assert!(
        undocumented.is_empty(),
        "{} undocumented differences:\n{}",
        undocumented.len(),
        undocumented.join("\n")
    );

    drop(kubelet);
    remove_pod_logs_of(&node);
    // rkubelet's root is bound onto itself (rshared), as upstream's is.
    crate::common::mounts::unmount_below(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let left = ctrd.down();
    assert!(left.is_empty(), "containerd teardown left: {left:?}");
    assert!(!dir.exists(), "{} left", dir.display());
}
