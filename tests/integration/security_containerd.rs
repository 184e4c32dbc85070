//! Security settings seen from inside the containers rkubelet starts on a private
//! containerd, read with `ExecSync`: upstream v1.26's default hardening (masked and
//! read-only paths, each container in its own PID namespace), its absence in a
//! privileged container, users and groups, dropped capabilities, a read-only root,
//! `fsGroup` on an emptyDir, and the refusals (`runAsNonRoot` on a root image, unsafe
//! sysctls, AppArmor on a host without it).
//!
//! Needs root and containerd (`scripts/test-env/install-deps.sh`); fails without them.

use std::path::Path;
use std::time::{Duration, Instant};

use rkubelet::domain::kuberuntime::runtime::ExecResult;
use rkubelet::ports::runtime::RuntimeService;

use crate::common::node::*;

fn node(name: &str) -> Node {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "must run as root: it starts containerd"
    );
    Node::start(name)
}

/// Runs `script` with `sh -c` in the running container `container` of `pod`.
async fn exec(node: &Node, pod: &str, container: &str, script: &str) -> ExecResult {
    let entry = node.wait_running(pod, container, 60).await;
    let cmd = ["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    node.rt
        .exec_sync(&entry.status.id, &cmd, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("ExecSync {script:?} in {pod}/{container}: {e}"))
}

/// stdout of `script`, trimmed; panics, with stderr, when it exits non-zero.
async fn output(node: &Node, pod: &str, container: &str, script: &str) -> String {
    let r = exec(node, pod, container, script).await;
    assert_eq!(
        r.exit_code,
        0,
        "{script:?} in {pod}/{container}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    String::from_utf8_lossy(&r.stdout).trim().to_owned()
}

/// A pod with one busybox container `main` sleeping, with `container_extra` lines
/// (four-space indented) in the container and `spec_extra` in the spec.
fn sleeper(node: &Node, name: &str, spec_extra: &str, container_extra: &str) -> String {
    let mut text = pod(
        name,
        spec_extra,
        &[],
        &[container("main", &node.busybox, "sleep 3600")],
    );
    text.push_str(container_extra);
    text
}

/// The mount points of `/proc/self/mountinfo`.
fn mount_points(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .collect()
}

#[tokio::test]
#[ignore = "needs containerd: run by scripts/test.sh"]
async fn default_containers_are_hardened_and_privileged_ones_are_not() {
    let mut node = node("sec-default");
    node.write("plain.yaml", &sleeper(&node, "plain", "", ""));
    node.write(
        "priv.yaml",
        &sleeper(
            &node,
            "priv",
            "",
            "    securityContext:\n      privileged: true\n",
        ),
    );
    node.write(
        "shared.yaml",
        &sleeper(&node, "shared", "  shareProcessNamespace: true\n", ""),
    );
    node.kubelet();

    // The masked paths this kernel has (a VM kernel may lack /proc/kcore or sysrq).
    let masked: Vec<&str> = [
        "/proc/acpi",
        "/proc/kcore",
        "/proc/keys",
        "/proc/latency_stats",
        "/proc/timer_list",
        "/proc/timer_stats",
        "/proc/sched_debug",
        "/proc/scsi",
        "/sys/firmware",
    ]
    .into_iter()
    .filter(|p| Path::new(p).exists())
    .collect();
    assert!(
        masked.contains(&"/proc/keys"),
        "the host has /proc/keys: {masked:?}"
    );
    let plain = mount_points(&output(&node, "plain-n1", "main", "cat /proc/self/mountinfo").await);
    let privileged =
        mount_points(&output(&node, "priv-n1", "main", "cat /proc/self/mountinfo").await);
    for path in &masked {
        assert!(
            plain.iter().any(|m| m == path),
            "{path} is masked in a default container: {plain:?}"
        );
        assert!(
            !privileged.iter().any(|m| m == path),
            "{path} is not masked in a privileged container"
        );
    }
    for path in ["/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"] {
        if Path::new(path).exists() {
            assert!(plain.iter().any(|m| m == path), "{path} read-only");
        }
    }
    // Masked files read as empty; unmasked, root reads the kernel's text.
    let keys_and_timers = "wc -c < /proc/keys; wc -c < /proc/timer_list";
    assert_eq!(
        output(&node, "plain-n1", "main", keys_and_timers).await,
        "0\n0"
    );
    let unmasked = output(&node, "priv-n1", "main", "wc -c < /proc/timer_list").await;
    assert_ne!(
        unmasked, "0",
        "a privileged container reads /proc/timer_list"
    );
    if Path::new("/proc/kcore").exists() {
        assert_eq!(
            output(&node, "plain-n1", "main", "wc -c < /proc/kcore").await,
            "0"
        );
    }

    // Writing below the read-only paths fails; a privileged container may (its own
    // network namespace's sysctl, so the host is untouched).
    let write_sysctl = "cat /proc/sys/net/ipv4/ping_group_range > /tmp/v && cat /tmp/v > /proc/sys/net/ipv4/ping_group_range";
    let denied = exec(&node, "plain-n1", "main", write_sysctl).await;
    assert_ne!(denied.exit_code, 0, "/proc/sys is read-only");
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("Read-only file system"),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );
    assert_eq!(
        exec(&node, "priv-n1", "main", write_sysctl).await.exit_code,
        0
    );
    let sysrq = "printf '' >> /proc/sysrq-trigger";
    assert_ne!(exec(&node, "plain-n1", "main", sysrq).await.exit_code, 0);
    if Path::new("/proc/sysrq-trigger").exists() {
        assert_eq!(exec(&node, "priv-n1", "main", sysrq).await.exit_code, 0);
        assert!(plain.iter().any(|m| m == "/proc/sysrq-trigger"));
    } else {
        eprintln!("this kernel has no /proc/sysrq-trigger: only the default container's refusal is checked");
    }

    // Each container has its own PID namespace unless the pod shares one.
    let own = output(&node, "plain-n1", "main", "cat /proc/1/comm").await;
    assert!(
        own == "sleep" || own == "sh",
        "PID 1 of a default container is its own process, not {own:?}"
    );
    let shared = output(&node, "shared-n1", "main", "cat /proc/1/comm").await;
    assert_eq!(
        shared, "pause",
        "shareProcessNamespace: the sandbox's pause is PID 1"
    );
    // A privileged container gets every device.
    let devices = output(&node, "priv-n1", "main", "ls /dev | wc -l").await;
    let default_devices = output(&node, "plain-n1", "main", "ls /dev | wc -l").await;
    assert!(
        devices.parse::<u32>().unwrap_or(0) > default_devices.parse::<u32>().unwrap_or(0),
        "privileged /dev has {devices} entries, default {default_devices}"
    );
    eprintln!(
        "masked in a default container and not in a privileged one: {masked:?}; /dev entries: privileged {devices}, default {default_devices}"
    );
    node.finish();
}

#[tokio::test]
#[ignore = "needs containerd: run by scripts/test.sh"]
async fn users_groups_capabilities_and_a_read_only_root_hold_inside_the_container() {
    let mut node = node("sec-users");
    node.write(
        "user.yaml",
        &sleeper(
            &node,
            "user",
            "  securityContext:\n    runAsUser: 1000\n    runAsGroup: 3000\n    fsGroup: 2000\n    supplementalGroups: [4000]\n  volumes:\n  - name: data\n    emptyDir: {}\n",
            "    volumeMounts:\n    - {name: data, mountPath: /data}\n",
        ),
    );
    node.write(
        "noraw.yaml",
        &sleeper(
            &node,
            "noraw",
            "",
            "    securityContext:\n      capabilities:\n        drop: [NET_RAW]\n",
        ),
    );
    node.write("raw.yaml", &sleeper(&node, "raw", "", ""));
    node.write(
        "ro.yaml",
        &sleeper(
            &node,
            "ro",
            "",
            "    securityContext:\n      readOnlyRootFilesystem: true\n      allowPrivilegeEscalation: false\n",
        ),
    );
    node.kubelet();

    let id = output(&node, "user-n1", "main", "id -u; id -g; id -G").await;
    let lines: Vec<&str> = id.lines().collect();
    assert_eq!(lines[..2], ["1000", "3000"], "id: {id}");
    let groups: Vec<&str> = lines[2].split_whitespace().collect();
    for g in ["3000", "2000", "4000"] {
        assert!(groups.contains(&g), "group {g} in {groups:?}");
    }
    // fsGroup owns the emptyDir (setgid, so new files join the group too).
    let data = output(
        &node,
        "user-n1",
        "main",
        "stat -c '%g %a' /data; touch /data/f && stat -c %g /data/f",
    )
    .await;
    assert_eq!(data, "2000 2777\n2000", "emptyDir ownership");

    let ping = "ping -c 1 -W 2 127.0.0.1";
    assert_eq!(
        exec(&node, "raw-n1", "main", ping).await.exit_code,
        0,
        "ping works with the default capabilities"
    );
    let denied = exec(&node, "noraw-n1", "main", ping).await;
    assert_ne!(denied.exit_code, 0, "ping without NET_RAW");
    eprintln!(
        "ping without NET_RAW: {}",
        String::from_utf8_lossy(&denied.stderr).trim()
    );

    let write_root = "touch /rk-write-test";
    let ro = exec(&node, "ro-n1", "main", write_root).await;
    assert_ne!(ro.exit_code, 0);
    assert!(
        String::from_utf8_lossy(&ro.stderr).contains("Read-only file system"),
        "{}",
        String::from_utf8_lossy(&ro.stderr)
    );
    assert_eq!(exec(&node, "raw-n1", "main", write_root).await.exit_code, 0);
    // allowPrivilegeEscalation: false sets no_new_privs.
    let status = output(&node, "ro-n1", "main", "grep NoNewPrivs /proc/self/status").await;
    assert!(status.ends_with('1'), "{status}");
    let default = output(&node, "raw-n1", "main", "grep NoNewPrivs /proc/self/status").await;
    assert!(default.ends_with('0'), "{default}");
    node.finish();
}

#[tokio::test]
#[ignore = "needs containerd: run by scripts/test.sh"]
async fn refusals_read_as_upstreams() {
    let mut node = node("sec-refuse");
    node.write(
        "nonroot.yaml",
        &sleeper(
            &node,
            "nonroot",
            "",
            "    securityContext:\n      runAsNonRoot: true\n",
        ),
    );
    node.write(
        "sysctl.yaml",
        &sleeper(
            &node,
            "sysctl",
            "  securityContext:\n    sysctls: [{name: kernel.msgmax, value: \"65536\"}]\n",
            "",
        ),
    );
    node.write(
        "apparmor.yaml",
        &sleeper(
            &node,
            "apparmor",
            "",
            "    securityContext:\n      appArmorProfile: {type: RuntimeDefault}\n",
        ),
    );
    node.write(
        "safesysctl.yaml",
        &sleeper(
            &node,
            "safesysctl",
            "  securityContext:\n    sysctls: [{name: net.ipv4.ping_group_range, value: \"0 2147483647\"}]\n",
            "",
        ),
    );
    node.kubelet();

    let waiting = eventually!(
        60,
        "nonroot's CreateContainerConfigError",
        node.pod_json("nonroot-n1").and_then(|p| {
            let w = p["status"]["containerStatuses"][0]["state"]["waiting"].clone();
            (w["reason"] == "CreateContainerConfigError").then_some(w)
        })
    );
    let uid = node.sandboxes("nonroot-n1").await[0].uid.clone();
    assert_eq!(
        waiting["message"],
        format!("container has runAsNonRoot and image will run as root (pod: \"nonroot-n1_default({uid})\", container: main)")
    );
    assert!(node.containers("nonroot-n1").await.is_empty());

    for (pod, reason, message) in [
        (
            "sysctl-n1",
            "SysctlForbidden",
            "Pod was rejected: forbidden sysctl: \"kernel.msgmax\" not allowlisted",
        ),
        (
            "apparmor-n1",
            "AppArmor",
            "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host",
        ),
    ] {
        let status = eventually!(
            60,
            format!("{pod} rejected"),
            node.pod_json(pod)
                .filter(|p| p["status"]["phase"] == "Failed")
                .map(|p| p["status"].clone())
        );
        assert_eq!(status["reason"], reason, "{status}");
        assert_eq!(status["message"], message, "{status}");
        assert!(node.sandboxes(pod).await.is_empty(), "{pod} has no sandbox");
    }
    // A safe sysctl reaches the pod's network namespace.
    let range = output(
        &node,
        "safesysctl-n1",
        "main",
        "cat /proc/sys/net/ipv4/ping_group_range",
    )
    .await;
    assert_eq!(
        range.split_whitespace().collect::<Vec<_>>(),
        ["0", "2147483647"]
    );
    node.finish();
}

/// `hostUsers: false` (upstream's `test/e2e/node/security_context.go` user namespace
/// specs): where the runtime's handler supports user namespaces, root in the container
/// is an unprivileged host ID (`/proc/<pid>/uid_map`: `0 <first> 65536`, the first of a
/// block of 65536 from 65536 up) and the block is kept in the pod's folder. Where it does
/// not, the sandbox is not made and the pod waits, with upstream's reason. containerd 1.6
/// lists no handlers; containerd 2.3 lists its handlers, here with user namespaces off:
/// Debian's runc 1.1.5 cannot make idmapped mounts, which containerd requires of it
/// (`runc features` has no `mountExtensions.idmap`).
#[tokio::test]
#[ignore = "needs containerd: run by scripts/test.sh"]
async fn a_pod_without_host_users_gets_its_own_ids_or_waits_with_the_runtimes_reason() {
    let mut node = node("sec-userns");
    node.write(
        "userns.yaml",
        &sleeper(&node, "userns", "  hostUsers: false\n", ""),
    );
    node.kubelet();
    let handlers = node.rt.runtime_handlers().await.expect("CRI Status");
    let supported = handlers
        .iter()
        .find(|h| h.name.is_empty())
        .is_some_and(|h| h.user_namespaces);
    let version = node.ctrd.var("RKUBELET_CONTAINERD_VERSION");
    if supported {
        let entry = node.wait_running("userns-n1", "main", 60).await;
        let uid_map = output(&node, "userns-n1", "main", "cat /proc/self/uid_map").await;
        let fields: Vec<&str> = uid_map.split_whitespace().collect();
        assert_eq!(fields.len(), 3, "{uid_map}");
        assert_eq!(fields[0], "0");
        let first: u32 = fields[1].parse().expect("host ID");
        assert!(first >= 65536 && first.is_multiple_of(65536), "{uid_map}");
        assert_eq!(fields[2], "65536");
        let kept = std::fs::read_to_string(
            node.root
                .join("pods")
                .join(&entry.labels["io.kubernetes.pod.uid"])
                .join("userns"),
        )
        .expect("the block kept in the pod's folder");
        assert!(kept.contains(&format!("\"hostId\":{first}")), "{kept}");
        node.finish();
        return;
    }
    let reason = if version == "2.3" {
        assert!(
            !handlers.is_empty(),
            "containerd 2.3 lists its handlers: {handlers:?}"
        );
        "RuntimeClass handler \"\" does not support user namespaces".to_owned()
    } else {
        assert!(
            handlers.is_empty(),
            "containerd 1.6 lists none: {handlers:?}"
        );
        "runtime handlers are not set: ".to_owned()
    };
    // The event, as klog writes it (quotes escaped).
    let message = format!("Failed to create pod sandbox: {reason}").replace('"', "\\\"");
    let line = eventually!(
        60,
        format!("the sandbox refused with {reason:?}"),
        node.log_text()
            .lines()
            .find(|l| l.contains("event=\"FailedCreatePodSandBox\"") && l.contains(&message))
            .map(str::to_owned)
    );
    assert!(line.contains("userns-n1"), "{line}");
    let status = node.pod_json("userns-n1").expect("the pod is known")["status"].clone();
    assert_eq!(status["phase"], "Pending", "{status}");
    assert!(node.sandboxes("userns-n1").await.is_empty(), "no sandbox");
    // No block is handed out to a pod that cannot use it.
    let mut kept = Vec::new();
    walk(&node.root.join("pods"), &mut |p| {
        if p.file_name().is_some_and(|n| n == "userns") {
            kept.push(p.to_path_buf());
        }
    });
    assert!(kept.is_empty(), "{kept:?}");
    node.finish();
}
