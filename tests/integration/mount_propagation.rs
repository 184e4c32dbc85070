//! `mountPropagation` (issue 32) as upstream's e2e checks it (`test/e2e/node/
//! mount_propagation.go`): a shared host folder mounted into four privileged static pods,
//! each with one mode; each pod and the host mount a tmpfs in it; each side sees the
//! mounts its mode lets through and no other. On a private containerd
//! with rkubelet; needs root and containerd, and fails, saying which is missing, without
//! them.

use crate::common::node::{container, pod, Node};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `sh -c script` in the `main` container of `pod`: (stdout, exit code).
async fn exec(node: &Node, pod: &str, script: &str) -> (String, i32) {
    node.exec_sh(pod, "main", script).await
}

fn host_mount(args: &[&str]) {
    let out = Command::new("mount")
        .args(args)
        .output()
        .expect("run mount");
    assert!(
        out.status.success(),
        "mount {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Unmounts everything at or under its folder on the host when dropped, also when the
/// test fails.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-R").arg(&self.0).output();
    }
}

/// The manifest of pod `name` mounting `host` at `/mnt/test` with `mode` (unset when
/// `None`), its privileged container running `script`.
fn propagation_pod(
    name: &str,
    image: &str,
    host: &Path,
    mode: Option<&str>,
    script: &str,
) -> String {
    let mut mount = "    volumeMounts:\n    - name: host\n      mountPath: /mnt/test\n".to_owned();
    if let Some(mode) = mode {
        mount.push_str(&format!("      mountPropagation: {mode}\n"));
    }
    mount.push_str("    securityContext:\n      privileged: true\n");
    let main =
        container("main", image, script).replace("    command:", &format!("{mount}    command:"));
    pod(
        name,
        &format!(
            "  volumes:\n  - name: host\n    hostPath:\n      path: {}\n",
            host.display()
        ),
        &[],
        &[main],
    )
}

#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn mounts_reach_the_containers_and_the_host_as_their_propagation_says() {
    let mut node = Node::start("propagation");
    let image = node.busybox.clone();
    let shared = tempfile::tempdir().expect("temp dir");
    let host = shared.path().join("shared");
    std::fs::create_dir_all(&host).expect("shared folder");
    // A shared mount of its own, as upstream's test makes its host folder, so that the
    // runtime's rshared and rslave mounts of it propagate.
    host_mount(&[
        "--bind",
        &host.display().to_string(),
        &host.display().to_string(),
    ]);
    let _unmount = Unmount(host.clone());
    host_mount(&["--make-rshared", &host.display().to_string()]);

    // Privileged, all of them, as upstream's, so that each can mount.
    let modes = [
        ("master", Some("Bidirectional")),
        ("slave", Some("HostToContainer")),
        ("private", Some("None")),
        ("default", None),
    ];
    for (name, mode) in modes {
        node.write(
            &format!("{name}.yaml"),
            &propagation_pod(name, &image, &host, mode, "sleep 3600"),
        );
    }
    node.kubelet();
    for (name, _) in modes {
        node.wait_running(&format!("{name}-n1"), "main", 60).await;
    }
    // Each pod mounts a tmpfs at /mnt/test/<its name> once all run (a mount made before
    // another container started would be copied into its recursive bind), then the host.
    for (name, _) in modes {
        let (out, code) = exec(
            &node,
            &format!("{name}-n1"),
            &format!(
                "mkdir -p /mnt/test/{name} && mount -t tmpfs {name} /mnt/test/{name} && echo {name} > /mnt/test/{name}/file"
            ),
        )
        .await;
        assert_eq!(code, 0, "{name}'s mount: {out}");
    }
    std::fs::create_dir_all(host.join("host")).expect("host's folder");
    host_mount(&[
        "-t",
        "tmpfs",
        "host",
        &host.join("host").display().to_string(),
    ]);
    std::fs::write(host.join("host/file"), "host\n").expect("host's file");

    // Upstream's expected mounts: Bidirectional and HostToContainer see the host's;
    // the master's reaches the host and the slave; None and unset see their own alone.
    let everyone = ["master", "slave", "private", "default", "host"];
    for (name, sees) in [
        ("master", &["master", "host"][..]),
        ("slave", &["master", "slave", "host"][..]),
        ("private", &["private"][..]),
        ("default", &["default"][..]),
    ] {
        let pod = format!("{name}-n1");
        for mount in everyone {
            let (out, code) = exec(&node, &pod, &format!("cat /mnt/test/{mount}/file")).await;
            if sees.contains(&mount) {
                assert_eq!((out.trim(), code), (mount, 0), "{pod} sees {mount}'s mount");
            } else {
                assert_ne!(code, 0, "{pod} must not see {mount}'s mount: {out}");
            }
        }
    }
    for mount in everyone {
        let seen = std::fs::read_to_string(host.join(mount).join("file")).is_ok();
        assert_eq!(
            seen,
            ["master", "host"].contains(&mount),
            "the host sees {mount}'s mount: {seen}"
        );
    }

    node.finish();
}
