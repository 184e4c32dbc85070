//! `mountPropagation` (issue 32) as upstream's e2e checks it (`test/e2e/node/
//! mount_propagation.go`): a host folder under the kubelet's root directory (which the
//! kubelet makes rshared at start, upstream's `MakeRShared`) mounted into four
//! privileged static pods, each with one mode; each pod and the host mount a tmpfs in it;
//! each side sees the mounts its mode lets through and no other. Then an emptyDir
//! mounted `HostToContainer`, which needs the root directory rshared. On a private
//! containerd with rkubelet; needs root and containerd, and fails, saying which is
//! missing, without them.

use crate::common::node::{container, pod, Node};
use std::path::Path;
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
    // Upstream's test uses `/var/lib/kubelet/<namespace>`: shared through the root's bind.
    // The node's folders, mounts included, go with it.
    let host = node.root.join("propagation");
    std::fs::create_dir_all(&host).expect("shared folder");

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
    // An emptyDir mounted HostToContainer: containerd refuses its rslave bind unless the
    // folder is on a shared mount.
    let watcher = container("main", &image, "sleep 3600").replace(
        "    command:",
        "    volumeMounts:\n    - {name: scratch, mountPath: /mnt/scratch, mountPropagation: HostToContainer}\n    command:",
    );
    node.write(
        "watcher.yaml",
        &pod(
            "watcher",
            "  volumes:\n  - {name: scratch, emptyDir: {}}\n",
            &[],
            &[watcher],
        ),
    );
    node.kubelet();
    for (name, _) in modes {
        node.wait_running(&format!("{name}-n1"), "main", 60).await;
    }
    node.wait_running("watcher-n1", "main", 60).await;
    let mut scratch = None;
    crate::common::node::walk_dirs(&node.root.join("pods"), 4, &mut |dir| {
        if dir.ends_with("kubernetes.io~empty-dir/scratch") {
            scratch = Some(dir.to_owned());
        }
    });
    let scratch = scratch.expect("the watcher's emptyDir");
    std::fs::create_dir_all(scratch.join("from-host")).expect("folder in the emptyDir");
    host_mount(&[
        "-t",
        "tmpfs",
        "from-host",
        &scratch.join("from-host").display().to_string(),
    ]);
    std::fs::write(scratch.join("from-host/file"), "from the host\n").expect("file");
    let (out, code) = exec(&node, "watcher-n1", "cat /mnt/scratch/from-host/file").await;
    assert_eq!(
        (out.trim(), code),
        ("from the host", 0),
        "the host's mount in the emptyDir reaches the container"
    );
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
