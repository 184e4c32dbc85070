//! PersistentVolumeClaims of API pods (issue 33, its first part: claims bound to
//! `local` and `hostPath` PersistentVolumes), against a real private control plane (the
//! controller manager's PersistentVolume binder binds the claims, its pvc-protection
//! guards them; the Node authorizer lets the node read only its pods' claims and their
//! volumes), a private containerd and rkubelet. The checks are upstream's e2e
//! `persistent_volumes-local.go` (one pod writes and reads, a second pod reads what the
//! first wrote and writes back, `fsGroup` on the volume's folder, a non-existent path,
//! the wrong node) and its volume manager's messages for a claim not yet bound. Missing
//! peers fail the test.

use crate::common::api_pods::{eventually, phase, pod};
use crate::common::cluster::{Cluster, ClusterOptions};
use crate::common::mounts::TempRoot;
use crate::common::node::{Node, NODE};

const VOLUME_DIR: &str = "/mnt/volume1";

/// A claim pre-bound to `volume` (upstream's `immediateMode` local test volumes bind
/// the same way), and that PersistentVolume with `source` (a YAML mapping line) unless
/// `source` is empty.
fn claim_and_volume(claim: &str, volume: &str, source: &str) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {claim}}}\nspec:\n  storageClassName: \"\"\n  volumeName: {volume}\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Mi}}}}\n"
    );
    if !source.is_empty() {
        yaml.push_str(&persistent_volume(volume, source));
    }
    yaml
}

fn persistent_volume(volume: &str, source: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {volume}}}\nspec:\n  storageClassName: \"\"\n  capacity: {{storage: 1Mi}}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Retain\n{source}"
    )
}

/// A local volume at `path` for the node whose `kubernetes.io/hostname` is `host`.
fn local_source(path: &str, host: &str) -> String {
    format!(
        "  local: {{path: {path}}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{host}]}}]\n"
    )
}

/// A pod of the node mounting `claim` at `VOLUME_DIR`, with `fs_group` when given.
fn claim_pod(
    name: &str,
    image: &str,
    claim: &str,
    read_only: bool,
    fs_group: Option<u32>,
) -> String {
    let security = fs_group.map_or(String::new(), |g| {
        format!("  securityContext: {{fsGroup: {g}}}\n")
    });
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n  automountServiceAccountToken: false\n{security}  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n    volumeMounts: [{{name: data, mountPath: {VOLUME_DIR}}}]\n  volumes: [{{name: data, persistentVolumeClaim: {{claimName: {claim}, readOnly: {read_only}}}}}]\n"
    )
}

/// What `script` prints in the pod's container, asserting it succeeded.
async fn run(node: &Node, pod: &str, script: &str) -> String {
    let (out, code) = node.exec_sh(pod, "app", script).await;
    assert_eq!(code, 0, "{pod}: {script}: {out}");
    out
}

fn running(cluster: &Cluster, name: &str) {
    eventually(60, &format!("pod {name} Running"), || {
        (phase(cluster, name) == "Running").then_some(())
    });
}

/// Waits for a `FailedMount` event of pod `name` with `message`; the pod is then still
/// `Pending`.
fn held_with(cluster: &Cluster, name: &str, message: &str) {
    let selector = format!("involvedObject.name={name},reason=FailedMount");
    eventually(
        60,
        &format!("FailedMount {message:?} of pod {name}"),
        || {
            let events = cluster.get_json(&["events", "--field-selector", &selector])?;
            events["items"]
                .as_array()?
                .iter()
                .any(|e| e["message"] == message && e["type"] == "Warning")
                .then_some(())
        },
    );
    assert_eq!(phase(cluster, name), "Pending", "pod {name}");
}

fn bound(cluster: &Cluster, claim: &str) {
    eventually(60, &format!("claim {claim} Bound"), || {
        let c = cluster.get_json(&["pvc", claim])?;
        (c["status"]["phase"] == "Bound").then_some(())
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd, control plane (kube-apiserver, etcd, controller-manager): run by scripts/test.sh"]
async fn claims_bound_to_local_and_host_path_volumes_hold_data_across_pods() {
    let disks = TempRoot::new().expect("temp dir");
    // Served through the API server's node proxy, for the volume stats (as the CSI
    // test's node).
    let cluster = Cluster::start_with("pvs", ClusterOptions::default());
    let mut node = Node::start("pvs");
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    node.kubelet_with(&[
        &format!("--kubeconfig={}", kubeconfig.display()),
        "--sync-frequency=5s",
        &format!("--port={}", crate::common::free_port()),
        &format!("--node-ip={}", crate::common::kubelet_api::host_ip()),
        &format!("--client-ca-file={}", cluster.ca_cert().display()),
        &format!("--cert-dir={}", disks.path().join("pki").display()),
    ]);
    eventually(30, "node registered", || cluster.get_json(&["node", NODE]));
    let image = node.busybox.clone();
    let local = disks.path().join("local");
    std::fs::create_dir_all(&local).expect("local volume folder");
    let local = local.display().to_string();
    let host = cluster
        .get_json(&["node", NODE])
        .and_then(|n| {
            n["metadata"]["labels"]["kubernetes.io/hostname"]
                .as_str()
                .map(str::to_owned)
        })
        .expect("the node's kubernetes.io/hostname label");

    // One pod requesting one prebound claim: it writes, reads back; the folder is the
    // fsGroup's (upstream's createPodWithFsGroupTest: `stat -c %g`).
    cluster.apply(&claim_and_volume(
        "pvc-local",
        "pv-local",
        &local_source(&local, &host),
    ));
    bound(&cluster, "pvc-local");
    cluster.apply(&claim_pod("writer", &image, "pvc-local", false, Some(1234)));
    running(&cluster, "writer");
    assert_eq!(
        run(&node, "writer", &format!("stat -c %g {VOLUME_DIR}")).await,
        "1234\n"
    );
    run(
        &node,
        "writer",
        &format!("echo test-file-content > {VOLUME_DIR}/test-file"),
    )
    .await;
    assert_eq!(
        run(&node, "writer", &format!("cat {VOLUME_DIR}/test-file")).await,
        "test-file-content\n"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{local}/test-file")).expect("the file on the host"),
        "test-file-content\n",
        "the container wrote the local volume's folder"
    );
    // Measured as its filesystem (upstream's local plugin: statfs), in the summary API
    // with its claim, and in `kubelet_volume_stats_*`.
    let measured = eventually(60, "the local claim's volume in /stats/summary", || {
        use crate::common::kubelet_api::{proxy, text};
        let summary: serde_json::Value =
            serde_json::from_str(&text(&proxy(&cluster, "/stats/summary"))).ok()?;
        summary["pods"]
            .as_array()?
            .iter()
            .flat_map(|p| p["volume"].as_array().cloned().unwrap_or_default())
            .find(|v| v["pvcRef"]["name"] == "pvc-local")
    });
    for field in [
        "capacityBytes",
        "availableBytes",
        "usedBytes",
        "inodes",
        "inodesUsed",
    ] {
        assert!(
            measured[field].as_u64().is_some_and(|n| n > 0),
            "{field} in {measured}"
        );
    }
    let metrics =
        crate::common::kubelet_api::text(&crate::common::kubelet_api::proxy(&cluster, "/metrics"));
    let series = "kubelet_volume_stats_capacity_bytes{namespace=\"default\",persistentvolumeclaim=\"pvc-local\"}";
    assert!(
        metrics.lines().any(|l| l.starts_with(series)),
        "{series} expected in:\n{metrics}"
    );
    // Two pods mounting it at once: the second reads what the first wrote, writes, and
    // the first reads that; the same fsGroup on both.
    cluster.apply(&claim_pod("reader", &image, "pvc-local", false, Some(1234)));
    running(&cluster, "reader");
    assert_eq!(
        run(&node, "reader", &format!("cat {VOLUME_DIR}/test-file")).await,
        "test-file-content\n"
    );
    assert_eq!(
        run(&node, "reader", &format!("stat -c %g {VOLUME_DIR}")).await,
        "1234\n"
    );
    run(
        &node,
        "reader",
        &format!("echo {local} > {VOLUME_DIR}/test-file"),
    )
    .await;
    assert_eq!(
        run(&node, "writer", &format!("cat {VOLUME_DIR}/test-file")).await,
        format!("{local}\n")
    );
    // The data outlives the pods: deleted, a new pod reads it.
    let out = cluster.kubectl(&["delete", "pod", "writer", "reader", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.apply(&claim_pod("later", &image, "pvc-local", false, None));
    running(&cluster, "later");
    assert_eq!(
        run(&node, "later", &format!("cat {VOLUME_DIR}/test-file")).await,
        format!("{local}\n")
    );

    // A hostPath volume (DirectoryOrCreate) through a read-only claim reference: the
    // folder is made, and the mount refuses writes.
    let made = disks.path().join("host/made");
    cluster.apply(&claim_and_volume(
        "pvc-host",
        "pv-host",
        &format!(
            "  hostPath: {{path: {}, type: DirectoryOrCreate}}\n",
            made.display()
        ),
    ));
    bound(&cluster, "pvc-host");
    cluster.apply(&claim_pod("ro", &image, "pvc-host", true, None));
    running(&cluster, "ro");
    assert!(made.is_dir(), "DirectoryOrCreate made {}", made.display());
    let (out, code) = node
        .exec_sh("ro", "app", &format!("touch {VOLUME_DIR}/x 2>&1"))
        .await;
    assert_ne!(code, 0, "a read-only claim's mount refuses writes");
    assert!(out.contains("Read-only file system"), "{out}");

    // A claim not bound yet holds the pod with upstream's message; once its volume
    // exists and the binder binds it, the pod starts.
    cluster.apply(&claim_and_volume("pvc-late", "pv-late", ""));
    cluster.apply(&claim_pod("early", &image, "pvc-late", false, None));
    held_with(
        &cluster,
        "early",
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: error processing PVC default/pvc-late: PVC is not bound",
    );
    let late = disks.path().join("late");
    cluster.apply(&persistent_volume(
        "pv-late",
        &format!(
            "  hostPath: {{path: {}, type: DirectoryOrCreate}}\n",
            late.display()
        ),
    ));
    bound(&cluster, "pvc-late");
    running(&cluster, "early");

    // Local volumes that cannot be mounted: another node's, and a path that does not
    // exist (upstream: the pod never runs).
    cluster.apply(&claim_and_volume(
        "pvc-far",
        "pv-far",
        &local_source(&local, "some-other-node"),
    ));
    cluster.apply(&claim_and_volume(
        "pvc-gone",
        "pv-gone",
        &local_source("/non-existent/location/nowhere", &host),
    ));
    bound(&cluster, "pvc-far");
    bound(&cluster, "pvc-gone");
    cluster.apply(&claim_pod("far", &image, "pvc-far", false, None));
    cluster.apply(&claim_pod("gone", &image, "pvc-gone", false, None));
    held_with(
        &cluster,
        "far",
        "MountVolume.NodeAffinity check failed for volume \"pv-far\" : no matching NodeSelectorTerms",
    );
    held_with(
        &cluster,
        "gone",
        "MountVolume.SetUp failed for volume \"pv-gone\" : local volume path \"/non-existent/location/nowhere\" does not exist or is not a directory",
    );
    assert!(
        pod(&cluster, "far").is_some_and(|p| p["status"]["containerStatuses"][0]["state"]
            ["waiting"]["reason"]
            == "ContainerCreating"),
        "a held pod's container is ContainerCreating"
    );
    node.finish();
}
