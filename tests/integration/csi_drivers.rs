//! CSI driver registration (issue 33) against the real peers: the CSI hostpath driver
//! v1.18.0 (`hostpathplugin`) and its `csi-node-driver-registrar` v2.17.0 run as host
//! processes, as `../shared/REAL-PEERS.md` tested them under the upstream kubelet; a
//! private kube-apiserver v1.26.1 and rkubelet. What the API shows: the node's `CSINode`
//! (owned by its Node) lists the driver with its node ID and topology key, the Node has
//! the `csi.volume.kubernetes.io/nodeid` annotation and the topology label, and the
//! registrar is told it is registered; an inline (ephemeral) volume is published by the
//! driver with the pod's identity, is writable and the `fsGroup`'s in the container, and
//! is unpublished when the pod goes; a driver without the Ephemeral mode is refused in
//! upstream's words; a claim the provisioner makes is attached (csi-attacher, the
//! controller manager's attach-detach controller, the Node's `volumesInUse`), staged,
//! published, written by a non-root user through its `fsGroup`, measured in
//! `/stats/summary` and `kubelet_volume_stats_*`, kept for the next pod, then unstaged and
//! detached; a registrar stopped (its socket removed) takes the driver off, a pod on its
//! claim then waits with the attacher's reason while a pod beside it runs, and a
//! registrar started again puts the driver back and the waiting pod starts; a publish the
//! driver fails (the volume's folder moved away) holds the next pod in `FailedMount` with
//! the driver's error until the folder is back. The second
//! test runs the driver's node side as a pod, under a StatefulSet and a SIGKILL of
//! rkubelet and a live swap with the upstream kubelet. Missing peers fail the tests.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::api_pods::eventually;
use crate::common::cluster::{Cluster, ClusterOptions};
use crate::common::free_port;
use crate::common::kubelet_api::{host_ip, proxy, text};
use crate::common::mounts::{mounts_below, TempRoot};
use crate::common::node::{Node, NODE};
use crate::common::peer::Peer;
use crate::common::upstream::kube_bins;

const DRIVER: &str = "hostpath.csi.k8s.io";
const TOPOLOGY_KEY: &str = "topology.hostpath.csi/node";

/// Waits up to a minute for pod `name` to run; the failure names its events.
fn running(cluster: &crate::common::cluster::Cluster, name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while crate::common::api_pods::phase(cluster, name) != "Running" {
        assert!(
            std::time::Instant::now() < deadline,
            "pod {name} not Running after 60 s; its events: {:?}",
            crate::common::api_pods::events_of(cluster, name)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The dry run's plan for pod `name`'s volumes, connected with the node's identity (read
/// only; the fake runtime, so the node's containerd is not asked).
fn planned_volumes(cluster: &Cluster, name: &str) -> Vec<Value> {
    let root = TempRoot::new().expect("temp dir");
    let out = Command::new(crate::common::BIN)
        .args([
            "--dry-run",
            "--dry-run-output=json",
            "--container-runtime-endpoint=fake://",
            &format!(
                "--kubeconfig={}",
                cluster.node_kubeconfig(NODE, 30).display()
            ),
            &format!("--hostname-override={NODE}"),
            &format!("--root-dir={}", root.path().display()),
        ])
        .output()
        .expect("the dry run runs");
    let plan: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    plan["pods"]
        .as_array()
        .and_then(|pods| pods.iter().find(|p| p["name"] == name))
        .and_then(|p| p["volumes"].as_array().cloned())
        .unwrap_or_else(|| panic!("pod {name}'s volumes in the plan: {plan}"))
}

#[allow(clippy::all, clippy::pedantic, clippy::unwrap_used, missing_docs)]
mod csi {
    tonic::include_proto!("csi.v1");
}

/// The driver's ControllerExpandVolume of `handle` to `bytes`, as csi-resizer calls it.
async fn controller_expand(socket: &Path, handle: &str, bytes: i64) {
    let socket = socket.to_path_buf();
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let socket = socket.clone();
            async move {
                tokio::net::UnixStream::connect(socket)
                    .await
                    .map(hyper_util::rt::TokioIo::new)
            }
        }))
        .await
        .expect("the driver's socket");
    let answer = csi::controller_client::ControllerClient::new(channel)
        .controller_expand_volume(csi::ControllerExpandVolumeRequest {
            volume_id: handle.to_owned(),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: bytes,
                limit_bytes: 0,
            }),
            secrets: Default::default(),
            volume_capability: None,
        })
        .await
        .expect("ControllerExpandVolume")
        .into_inner();
    assert!(answer.node_expansion_required, "{answer:?}");
}

/// Plays csi-resizer (not among the peers) for the claim `claim` of the volume `pv`
/// (driver handle `handle`): the driver's ControllerExpandVolume to 2Mi, the claim's
/// request and the volume's capacity raised, the claim's FileSystemResizePending
/// condition. Then waits for the kubelet to grow it on the node and give the claim its
/// new size, with upstream's event on the pod `pod`.
async fn resize_to_2mi(
    cluster: &Cluster,
    socket: &Path,
    claim: &str,
    pv: &str,
    handle: &str,
    pod: &str,
) {
    controller_expand(socket, handle, 2 << 20).await;
    for (kind, name, subresource, patch) in [
        (
            "pvc",
            claim,
            None,
            r#"{"spec":{"resources":{"requests":{"storage":"2Mi"}}}}"#,
        ),
        ("pv", pv, None, r#"{"spec":{"capacity":{"storage":"2Mi"}}}"#),
        (
            "pvc",
            claim,
            Some("--subresource=status"),
            r#"{"status":{"conditions":[{"type":"FileSystemResizePending","status":"True"}]}}"#,
        ),
    ] {
        let mut args = vec!["patch", kind, name, "--type=merge", "-p", patch];
        args.extend(subresource);
        let out = cluster.kubectl(&args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eventually(60, "the claim's status at its new size", || {
        let c = cluster.get_json(&["pvc", claim])?;
        (c["status"]["capacity"]["storage"] == "2Mi"
            && c["status"]["conditions"]
                .as_array()
                .is_none_or(|conditions| conditions.is_empty()))
        .then_some(())
    });
    let resized = format!("MountVolume.NodeExpandVolume succeeded for volume \"{pv}\" {NODE}");
    assert!(
        crate::common::api_pods::events_of(cluster, pod)
            .iter()
            .any(|(kind, reason, m)| kind == "Normal"
                && reason == "FileSystemResizeSuccessful"
                && *m == resized),
        "{resized}: {:?}",
        crate::common::api_pods::events_of(cluster, pod)
    );
    eventually(30, "FileSystemResizeSuccessful on the claim too", || {
        crate::common::api_pods::events_of(cluster, claim)
            .iter()
            .any(|(kind, reason, m)| {
                kind == "Normal" && reason == "FileSystemResizeSuccessful" && *m == resized
            })
            .then_some(())
    });
}

/// The claim `claim`'s volume as the driver measures it, in `/stats/summary` through the
/// API server's node proxy, once it is there; and whether `/metrics` has its
/// `kubelet_volume_stats_used_bytes` series.
fn measured_claim(cluster: &Cluster, claim: &str) -> (Value, bool) {
    let measured = eventually(60, "the claim's volume in /stats/summary", || {
        let summary: Value = serde_json::from_str(&text(&proxy(cluster, "/stats/summary"))).ok()?;
        summary["pods"]
            .as_array()?
            .iter()
            .flat_map(|p| p["volume"].as_array().cloned().unwrap_or_default())
            .find(|v| v["pvcRef"]["name"] == claim)
    });
    let series = format!(
        "kubelet_volume_stats_used_bytes{{namespace=\"default\",persistentvolumeclaim=\"{claim}\"}}"
    );
    let metrics = text(&proxy(cluster, "/metrics"));
    (measured, metrics.lines().any(|l| l.starts_with(&series)))
}

fn csi_node_drivers(cluster: &crate::common::cluster::Cluster) -> Option<Vec<Value>> {
    let csi_node = cluster.get_json(&["csinode", NODE])?;
    Some(
        csi_node["spec"]["drivers"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd, control plane, the CSI hostpath driver and node-driver-registrar: run by scripts/test.sh"]
async fn the_hostpath_driver_registers_through_its_registrar_and_leaves_with_it() {
    let bins = kube_bins();
    for binary in [
        "hostpathplugin",
        "csi-node-driver-registrar",
        "csi-provisioner",
        "csi-attacher",
    ] {
        assert!(
            bins.join(binary).is_file(),
            "{binary} is needed in {} (../shared/peers/bin/{binary}.zst)",
            bins.display()
        );
    }
    let state = TempRoot::new().expect("temp dir");
    // Served through the API server's node proxy, for the volume stats: the node's
    // outbound address as its InternalIP, the cluster's CA for its client.
    let cluster = Cluster::start_with("csireg", ClusterOptions::default());
    let mut node = Node::start("csireg");
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    node.kubelet_with(&[
        &format!("--kubeconfig={}", kubeconfig.display()),
        &format!("--port={}", free_port()),
        &format!("--node-ip={}", host_ip()),
        &format!("--client-ca-file={}", cluster.ca_cert().display()),
        &format!("--cert-dir={}", state.path().join("pki").display()),
        // A running pod's volumes are looked at again every 10 s (its resync), so a
        // claim's expansion is seen within the test's wait.
        "--sync-frequency=10s",
    ]);
    eventually(30, "node registered", || cluster.get_json(&["node", NODE]));
    let driver_dir = node.root.join("plugins/csi-hostpath");
    std::fs::create_dir_all(&driver_dir).expect("driver folder");
    let socket = driver_dir.join("csi.sock");
    let registry = node.root.join("plugins_registry");
    let _driver = Peer::start(
        &bins.join("hostpathplugin"),
        &[
            format!("--drivername={DRIVER}"),
            format!("--endpoint=unix://{}", socket.display()),
            format!("--nodeid={NODE}"),
            format!("--statedir={}", state.path().join("data").display()),
            // Its ControllerPublishVolume, called by the attacher, is what a node call
            // on an unattached volume is refused for.
            "--enable-attach=true".into(),
            "--v=5".into(),
        ],
        &state.path().join("hostpathplugin.log"),
    );
    let registrar_args = [
        format!("--csi-address={}", socket.display()),
        format!("--kubelet-registration-path={}", socket.display()),
        format!("--plugin-registration-path={}", registry.display()),
        "--v=5".into(),
    ];
    let registrar_log = state.path().join("registrar.log");
    let mut registrar = Peer::start(
        &bins.join("csi-node-driver-registrar"),
        &registrar_args,
        &registrar_log,
    );

    // Registered: the CSINode lists the driver as NodeGetInfo gave it.
    let drivers = eventually(60, "the driver in the node's CSINode", || {
        csi_node_drivers(&cluster).filter(|d| !d.is_empty())
    });
    assert_eq!(drivers.len(), 1, "{drivers:?}");
    assert_eq!(drivers[0]["name"], DRIVER);
    assert_eq!(drivers[0]["nodeID"], NODE);
    assert_eq!(
        drivers[0]["topologyKeys"],
        serde_json::json!([TOPOLOGY_KEY])
    );
    let csi_node = cluster.get_json(&["csinode", NODE]).expect("CSINode");
    let the_node = cluster.get_json(&["node", NODE]).expect("Node");
    let owner = &csi_node["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Node");
    assert_eq!(owner["name"], NODE);
    assert_eq!(
        owner["uid"], the_node["metadata"]["uid"],
        "owned by its Node"
    );
    assert_eq!(
        the_node["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"],
        format!("{{\"{DRIVER}\":\"{NODE}\"}}")
    );
    assert_eq!(the_node["metadata"]["labels"][TOPOLOGY_KEY], NODE);
    // Its `Received NotifyRegistrationStatus call` line (gogo's or protobuf-go's text).
    let registered =
        |log: &str| log.contains("PluginRegistered:true") || log.contains("plugin_registered:true");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let told = loop {
        let log = std::fs::read_to_string(&registrar_log).unwrap_or_default();
        if registered(&log) {
            break log;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the registrar was not told it is registered:\n{log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(!told.contains("PluginRegistered:false"), "{told}");

    // An inline volume (upstream's e2e ephemeral.go: a pod writes and reads its volume):
    // its CSIDriver (upstream's for this driver) allows Ephemeral, asks for the pod's
    // identity, leaves fsGroup to the kubelet (`File`) and has claims' volumes attached
    // first (inline volumes are not).
    cluster.apply(&format!(
        "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {{name: {DRIVER}}}\nspec:\n  attachRequired: true\n  podInfoOnMount: true\n  fsGroupPolicy: File\n  volumeLifecycleModes: [Persistent, Ephemeral]\n"
    ));
    let inline_pod = |name: &str, driver: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n  automountServiceAccountToken: false\n  securityContext: {{fsGroup: 1234}}\n  containers:\n  - name: app\n    image: {}\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n    volumeMounts: [{{name: data, mountPath: /data}}]\n  volumes: [{{name: data, csi: {{driver: {driver}, volumeAttributes: {{size: 1Mi}}}}}}]\n",
            node.busybox
        )
    };
    cluster.apply(&inline_pod("inline", DRIVER));
    running(&cluster, "inline");
    let (out, code) = node
        .exec_sh(
            "inline",
            "app",
            "echo written > /data/f && cat /data/f && stat -c %g /data && awk '$5 == \"/data\"' /proc/self/mountinfo | wc -l",
        )
        .await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out, "written\n1234\n1\n",
        "the volume is mounted, writable and the fsGroup's"
    );
    let driver_log = state.path().join("hostpathplugin.log");
    let published = std::fs::read_to_string(&driver_log).unwrap_or_default();
    assert!(
        published.contains("NodePublishVolume")
            && published.contains("\"csi.storage.k8s.io/pod.name\":\"inline\"")
            && published.contains("\"csi.storage.k8s.io/ephemeral\":\"true\""),
        "the driver published it with the pod's identity:\n{published}"
    );
    // A driver without the Ephemeral mode (no CSIDriver): upstream's refusal.
    cluster.apply(&inline_pod("refused", "nodriver.example.com"));
    let message = "MountVolume.SetUp failed for volume \"data\" : kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: volume mode \"Ephemeral\" not supported by driver nodriver.example.com (only supports [\"Persistent\"])";
    eventually(60, "FailedMount of pod refused", || {
        crate::common::api_pods::events_of(&cluster, "refused")
            .iter()
            .any(|(kind, reason, m)| kind == "Warning" && reason == "FailedMount" && m == message)
            .then_some(())
    });
    // Deleted, the pod's volume is unpublished by the driver; nothing stays mounted.
    let out = cluster.kubectl(&["delete", "pod", "inline", "refused", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pods_dir = node.root.join("pods");
    eventually(60, "the inline volume unpublished and unmounted", || {
        let log = std::fs::read_to_string(&driver_log).ok()?;
        (log.contains("NodeUnpublishVolume") && mounts_below(&pods_dir).is_empty()).then_some(())
    });

    // A claim the driver provisions (csi-provisioner v6.2.1 with the admin kubeconfig):
    // attached first (the controller manager's attach-detach controller makes the
    // VolumeAttachment, csi-attacher v4.12.0 completes it once the Node reports the
    // volume in use), staged at its global path and published in each pod using it,
    // its data kept from one pod to the next, unstaged when the last pod goes, then
    // detached (upstream's provisioning and persistent-volume e2e checks: write in one
    // pod, read in the next).
    let _attacher = Peer::start(
        &bins.join("csi-attacher"),
        &[
            format!("--csi-address={}", socket.display()),
            format!("--kubeconfig={}", cluster.admin_kubeconfig().display()),
            // Its retries of a failed attachment at most 5 s apart (5 minutes by
            // default), so the test does not wait out its back-off.
            "--retry-interval-max=5s".into(),
            "--v=5".into(),
        ],
        &state.path().join("attacher.log"),
    );
    let _provisioner = Peer::start(
        &bins.join("csi-provisioner"),
        &[
            format!("--csi-address={}", socket.display()),
            format!("--kubeconfig={}", cluster.admin_kubeconfig().display()),
            "--feature-gates=Topology=true".into(),
            "--extra-create-metadata".into(),
            "--v=5".into(),
        ],
        &state.path().join("provisioner.log"),
    );
    cluster.apply(&format!(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: csi-hostpath}}\nprovisioner: {DRIVER}\nvolumeBindingMode: Immediate\nreclaimPolicy: Delete\nallowVolumeExpansion: true\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data}}\nspec:\n  storageClassName: csi-hostpath\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Mi}}}}\n"
    ));
    eventually(90, "claim data provisioned and bound", || {
        let c = cluster.get_json(&["pvc", "data"])?;
        (c["status"]["phase"] == "Bound").then_some(())
    });
    let claim_pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n  automountServiceAccountToken: false\n  securityContext: {{fsGroup: 1234, runAsUser: 1000, runAsGroup: 1000}}\n  containers:\n  - name: app\n    image: {}\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n    volumeMounts: [{{name: data, mountPath: /data}}]\n  volumes: [{{name: data, persistentVolumeClaim: {{claimName: data}}}}]\n",
            node.busybox
        )
    };
    cluster.apply(&claim_pod("db1"));
    running(&cluster, "db1");
    let (out, code) = node
        .exec_sh(
            "db1",
            "app",
            "id -u && echo kept > /data/f && stat -c %g /data",
        )
        .await;
    assert_eq!(
        (out.as_str(), code),
        ("1000\n1234\n", 0),
        "written by a non-root user through the fsGroup (upstream's fsGroup policy File)"
    );
    let log = std::fs::read_to_string(&driver_log).unwrap_or_default();
    assert!(
        log.contains("ControllerPublishVolume") && log.contains("NodeStageVolume"),
        "attached, then staged before it was published:\n{log}"
    );
    let handle = cluster
        .get_json(&["pvc", "data"])
        .and_then(|c| c["spec"]["volumeName"].as_str().map(str::to_owned))
        .and_then(|pv| cluster.get_json(&["pv", &pv]))
        .and_then(|pv| {
            pv["spec"]["csi"]["volumeHandle"]
                .as_str()
                .map(str::to_owned)
        })
        .expect("the claim's volume handle");
    // The dry run shows the claim's volume as the sync sets it up: the driver, the
    // volume, staged and published, attached.
    let planned = planned_volumes(&cluster, "db1");
    let mount = planned[0]["mount"].as_str().unwrap_or_default();
    assert!(
        planned[0]["name"] == "data"
            && mount.contains(&format!("CSI driver {DRIVER} volume {handle}, staged at "))
            && mount.contains("/globalmount, published at ")
            && mount.contains("/mount, attached first (VolumeAttachment csi-"),
        "{planned:?}"
    );
    let unique = format!("kubernetes.io/csi/{DRIVER}^{handle}");
    let status = cluster.get_json(&["node", NODE]).expect("Node")["status"].clone();
    assert_eq!(
        status["volumesInUse"],
        serde_json::json!([unique]),
        "{status}"
    );
    assert_eq!(status["volumesAttached"][0]["name"], unique, "{status}");
    let attachments = cluster
        .get_json(&["volumeattachments"])
        .expect("VolumeAttachments");
    assert_eq!(
        attachments["items"][0]["status"]["attached"], true,
        "{attachments}"
    );
    // Its usage as the driver measures it (`NodeGetVolumeStats`), in the summary API and
    // upstream's `kubelet_volume_stats_*` series, through the API server's node proxy.
    let (measured, in_metrics) = measured_claim(&cluster, "data");
    assert_eq!(measured["pvcRef"]["namespace"], "default", "{measured}");
    assert_eq!(measured["name"], "data", "{measured}");
    for field in [
        "capacityBytes",
        "availableBytes",
        "usedBytes",
        "inodes",
        "inodesFree",
        "inodesUsed",
    ] {
        assert!(measured[field].is_u64(), "{field} in {measured}");
    }
    assert!(measured["capacityBytes"].as_u64() > Some(0), "{measured}");
    assert!(
        in_metrics,
        "kubelet_volume_stats_used_bytes of claim data in /metrics"
    );
    let out = cluster.kubectl(&["delete", "pod", "db1", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.apply(&claim_pod("db2"));
    running(&cluster, "db2");
    let (out, code) = node.exec_sh("db2", "app", "cat /data/f").await;
    assert_eq!(
        (out.as_str(), code),
        ("kept\n", 0),
        "the data outlived the first pod"
    );

    // Online expansion (upstream's volume_expand.go): the test plays csi-resizer (not
    // among the peers): the driver's ControllerExpandVolume, the claim's request and the
    // volume's capacity raised, the claim's FileSystemResizePending condition. rkubelet
    // then has the driver grow the volume in use (NodeExpandVolume) and gives the claim
    // its new size, the pod running on.
    let pv_name = cluster
        .get_json(&["pvc", "data"])
        .and_then(|c| c["spec"]["volumeName"].as_str().map(str::to_owned))
        .expect("the claim's volume");
    resize_to_2mi(&cluster, &socket, "data", &pv_name, &handle, "db2").await;
    let log = std::fs::read_to_string(&driver_log).unwrap_or_default();
    assert!(
        log.lines().any(
            |l| l.contains("\"Method\":\"/csi.v1.Node/NodeExpandVolume\"")
                && l.contains("\"required_bytes\":2097152")
                && l.contains("/mount\"")
        ),
        "NodeExpandVolume of the published volume to 2Mi:\n{log}"
    );
    assert_eq!(
        crate::common::api_pods::phase(&cluster, "db2"),
        "Running",
        "the pod ran on"
    );
    let out = cluster.kubectl(&["delete", "pod", "db2", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Grown while no pod uses it, then mounted read-only (upstream's expansion during
    // the mount): not grown, upstream's FileSystemResizeFailed on the pod and the claim,
    // at the mount or, the volume read less than 10 s before, at a sync after it.
    controller_expand(&socket, &handle, 3 << 20).await;
    let out = cluster.kubectl(&[
        "patch",
        "pv",
        &pv_name,
        "--type=merge",
        "-p",
        r#"{"spec":{"capacity":{"storage":"3Mi"}}}"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cluster
        .apply(&claim_pod("db3").replace("{claimName: data}", "{claimName: data, readOnly: true}"));
    running(&cluster, "db3");
    let refused = format!(
        "MountVolume.NodeExpandVolume failed for volume \"{pv_name}\" requested read-only file system"
    );
    for object in ["db3", "data"] {
        eventually(
            30,
            "FileSystemResizeFailed on the pod and the claim",
            || {
                crate::common::api_pods::events_of(&cluster, object)
                    .iter()
                    .any(|(kind, reason, m)| {
                        kind == "Warning" && reason == "FileSystemResizeFailed" && *m == refused
                    })
                    .then_some(())
            },
        );
    }
    let log = std::fs::read_to_string(&driver_log).unwrap_or_default();
    assert!(
        !log.lines().any(
            |l| l.contains("\"Method\":\"/csi.v1.Node/NodeExpandVolume\"")
                && l.contains("\"required_bytes\":3145728")
        ),
        "a read-only claim is not grown on the node:\n{log}"
    );
    assert_eq!(
        cluster.get_json(&["pvc", "data"]).expect("claim data")["status"]["capacity"]["storage"],
        "2Mi"
    );
    let out = cluster.kubectl(&["delete", "pod", "db3", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plugins_dir = node.root.join("plugins");
    eventually(60, "the claim's volume unpublished and unstaged", || {
        let log = std::fs::read_to_string(&driver_log).ok()?;
        (log.matches("NodeUnstageVolume").count() >= 2
            && mounts_below(&pods_dir).is_empty()
            && mounts_below(&plugins_dir).is_empty())
        .then_some(())
    });
    // No longer in use: the attach-detach controller detaches it.
    eventually(60, "the claim's volume out of use and detached", || {
        let node_status = cluster.get_json(&["node", NODE])?["status"].clone();
        let attachments = cluster.get_json(&["volumeattachments"])?;
        (node_status.get("volumesInUse").is_none()
            && node_status.get("volumesAttached").is_none()
            && attachments["items"].as_array().is_some_and(Vec::is_empty))
        .then_some(())
    });

    // A generic ephemeral volume: the controller manager's ephemeral volume controller
    // makes the claim `eph-scratch` owned by the pod, the driver provisions it, the pod
    // runs on it; the claim goes with the pod.
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: eph}}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n  automountServiceAccountToken: false\n  containers:\n  - name: app\n    image: {}\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n    volumeMounts: [{{name: scratch, mountPath: /scratch}}]\n  volumes:\n  - name: scratch\n    ephemeral:\n      volumeClaimTemplate:\n        spec: {{storageClassName: csi-hostpath, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Mi}}}}}}\n",
        node.busybox
    ));
    running(&cluster, "eph");
    let claim = cluster
        .get_json(&["pvc", "eph-scratch"])
        .expect("the ephemeral claim");
    assert_eq!(claim["metadata"]["ownerReferences"][0]["name"], "eph");
    let (out, code) = node
        .exec_sh("eph", "app", "echo scratch > /scratch/f && cat /scratch/f")
        .await;
    assert_eq!((out.as_str(), code), ("scratch\n", 0));
    let out = cluster.kubectl(&["delete", "pod", "eph", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually(
        60,
        "the ephemeral volume unmounted and its claim gone",
        || {
            (mounts_below(&pods_dir).is_empty()
                && cluster.get_json(&["pvc", "eph-scratch"]).is_none())
            .then_some(())
        },
    );

    // The registrar stops and removes its socket: the driver is taken off.
    registrar.stop();
    eventually(30, "the driver off the CSINode", || {
        csi_node_drivers(&cluster).filter(Vec::is_empty)
    });
    eventually(30, "the node-ID annotation removed", || {
        let n = cluster.get_json(&["node", NODE])?;
        n["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"]
            .is_null()
            .then_some(())
    });

    // Meanwhile a pod on a claim of this driver waits with upstream's reason, a pod
    // without volumes runs beside it, and once the driver is back the first one starts,
    // rkubelet untouched.
    cluster.apply(&claim_pod("db3"));
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: bystander}}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n  automountServiceAccountToken: false\n  containers:\n  - name: app\n    image: {}\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n",
        node.busybox
    ));
    // Its volume cannot be attached first: the attacher finds no node ID for the driver
    // (the VolumeAttachment's attachError, as the upstream kubelet would show it).
    let unregistered = format!("CSINode {NODE} does not contain driver {DRIVER}");
    eventually(
        60,
        "FailedMount of pod db3 naming the unregistered driver",
        || {
            crate::common::api_pods::events_of(&cluster, "db3")
                .iter()
                .any(|(kind, reason, m)| {
                    kind == "Warning" && reason == "FailedMount" && m.contains(&unregistered)
                })
                .then_some(())
        },
    );
    running(&cluster, "bystander");
    assert_eq!(crate::common::api_pods::phase(&cluster, "db3"), "Pending");
    // The dry run says why db3 would wait, in the same words.
    let planned = planned_volumes(&cluster, "db3");
    assert!(
        planned[0]["waits"]
            .as_str()
            .is_some_and(|w| w.contains(&unregistered)),
        "{planned:?}"
    );

    // Started again (a driver pod restarted): registered again.
    let _registrar = Peer::start(
        &bins.join("csi-node-driver-registrar"),
        &registrar_args,
        &state.path().join("registrar-2.log"),
    );
    let drivers = eventually(60, "the driver back in the CSINode", || {
        csi_node_drivers(&cluster).filter(|d| !d.is_empty())
    });
    assert_eq!(drivers[0]["name"], DRIVER);
    running(&cluster, "db3");
    let (out, code) = node.exec_sh("db3", "app", "cat /data/f").await;
    assert_eq!((out.as_str(), code), ("kept\n", 0), "db3 runs on the claim");

    // A driver whose NodePublishVolume fails (the volume's folder gone from the driver's
    // state folder, so its bind mount fails): a second pod on the claim waits with the
    // driver's error in upstream's FailedMount, db3 runs on untouched, and once the
    // folder is back the second pod starts, rkubelet untouched.
    let volume_dir = state.path().join("data").join(&handle);
    let moved_away = state.path().join("data").join(format!("{handle}.away"));
    std::fs::rename(&volume_dir, &moved_away).expect("the volume's folder moved away");
    cluster.apply(&claim_pod("db4"));
    eventually(
        60,
        "FailedMount of pod db4 with the driver's publish error",
        || {
            crate::common::api_pods::events_of(&cluster, "db4")
                .iter()
                .any(|(kind, reason, m)| {
                    kind == "Warning"
                        && reason == "FailedMount"
                        && m.starts_with("MountVolume.SetUp failed for volume")
                        && m.contains("failed to mount device")
                })
                .then_some(())
        },
    );
    assert_eq!(crate::common::api_pods::phase(&cluster, "db4"), "Pending");
    let db3 = cluster.get_json(&["pod", "db3"]).expect("pod db3");
    assert_eq!(db3["status"]["phase"], "Running", "{db3}");
    assert_eq!(
        db3["status"]["containerStatuses"][0]["restartCount"], 0,
        "{db3}"
    );
    std::fs::rename(&moved_away, &volume_dir).expect("the volume's folder back");
    running(&cluster, "db4");
    let (out, code) = node.exec_sh("db4", "app", "cat /data/f").await;
    assert_eq!((out.as_str(), code), ("kept\n", 0), "db4 runs on the claim");

    let out = cluster.kubectl(&["delete", "pod", "db3", "db4", "bystander", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually(60, "db3's volume unpublished and unstaged", || {
        (mounts_below(&pods_dir).is_empty() && mounts_below(&plugins_dir).is_empty()).then_some(())
    });

    // Secrets a volume's driver needs (its StorageClass names them, the provisioner
    // puts them in the PersistentVolume, as drivers such as Ceph's ask): while the stage
    // Secret is missing, the pod waits with upstream's MountDevice reason; once both are
    // made, the driver gets them (its log strips their values) with the volume's
    // mountOptions, and the pod runs.
    cluster.apply(&format!(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: csi-hostpath-secrets}}\nprovisioner: {DRIVER}\nvolumeBindingMode: Immediate\nreclaimPolicy: Delete\nmountOptions: [noatime]\nparameters:\n  csi.storage.k8s.io/node-stage-secret-name: stage-creds\n  csi.storage.k8s.io/node-stage-secret-namespace: storage\n  csi.storage.k8s.io/node-publish-secret-name: publish-creds\n  csi.storage.k8s.io/node-publish-secret-namespace: storage\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: secured}}\nspec:\n  storageClassName: csi-hostpath-secrets\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Mi}}}}\n"
    ));
    eventually(90, "claim secured provisioned and bound", || {
        let c = cluster.get_json(&["pvc", "secured"])?;
        (c["status"]["phase"] == "Bound").then_some(())
    });
    cluster.apply(&claim_pod("db1").replace("claimName: data", "claimName: secured"));
    eventually(60, "FailedMount of pod db1 naming the stage Secret", || {
        crate::common::api_pods::events_of(&cluster, "db1")
            .iter()
            .any(|(kind, reason, m)| {
                kind == "Warning"
                    && reason == "FailedMount"
                    && m.starts_with("MountVolume.MountDevice failed for volume \"pvc-")
                    && m.ends_with(": fetching NodeStageSecretRef storage/stage-creds failed: kubernetes.io/csi: failed to find the secret stage-creds in the namespace storage with error: secrets \"stage-creds\" not found")
            })
            .then_some(())
    });
    cluster.apply(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: storage}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: stage-creds, namespace: storage}\nstringData: {key: staged}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: publish-creds, namespace: storage}\nstringData: {key: published}\n",
    );
    running(&cluster, "db1");
    let log = std::fs::read_to_string(&driver_log).unwrap_or_default();
    // The test driver logs its requests whole, the Secrets' values too. A staged
    // volume serves every pod: its stage has the volume's attributes, not a pod's.
    for (call, secret, pod_info) in [
        ("NodeStageVolume", "staged", false),
        ("NodePublishVolume", "published", true),
    ] {
        let request = log
            .lines()
            .filter(|l| l.contains(&format!("\"Method\":\"/csi.v1.Node/{call}\"")))
            .find(|l| l.contains(&format!("\"secrets\":{{\"key\":\"{secret}\"}}")));
        assert!(
            request.is_some_and(|l| l.contains("\"mount_flags\":[\"noatime\"]")
                && l.contains("csi.storage.k8s.io/pod.name") == pod_info),
            "{call} with its Secret and the mount flags:\n{log}"
        );
    }
    let out = cluster.kubectl(&["delete", "pod", "db1", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually(60, "the secured volume unpublished and unstaged", || {
        (mounts_below(&pods_dir).is_empty() && mounts_below(&plugins_dir).is_empty()).then_some(())
    });

    // A Block claim (upstream's e2e `volumeMode` and `volumes` block checks: the device
    // written raw in one pod, read in the next): the driver provisions a loop device,
    // rkubelet stages it in `volumeDevices/staging`, has it published as the pod's file
    // and gives the container the device at its `devicePath`. A Filesystem claim given
    // as a device waits with upstream's reason. Deleted, each device is unpublished, the
    // last one unstaged, nothing left mounted.
    cluster.apply(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: raw}\nspec:\n  storageClassName: csi-hostpath\n  volumeMode: Block\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Mi}}\n",
    );
    eventually(90, "claim raw provisioned and bound", || {
        let c = cluster.get_json(&["pvc", "raw"])?;
        (c["status"]["phase"] == "Bound").then_some(())
    });
    let block_pod = |name: &str, claim: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n  automountServiceAccountToken: false\n  containers:\n  - name: app\n    image: {}\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n    volumeDevices: [{{name: data, devicePath: /dev/xvda}}]\n  volumes: [{{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}]\n",
            node.busybox
        )
    };
    cluster.apply(&block_pod("raw1", "raw"));
    cluster.apply(&block_pod("wrongmode", "data"));
    running(&cluster, "raw1");
    let (out, code) = node
        .exec_sh(
            "raw1",
            "app",
            "test -b /dev/xvda && echo block && printf rkubelet-block | dd of=/dev/xvda conv=fsync,notrunc 2>/dev/null && dd if=/dev/xvda bs=14 count=1 2>/dev/null",
        )
        .await;
    assert_eq!(
        (out.as_str(), code),
        ("block\nrkubelet-block", 0),
        "a block device the container writes raw"
    );
    let raw_pv = cluster
        .get_json(&["pvc", "raw"])
        .and_then(|c| c["spec"]["volumeName"].as_str().map(str::to_owned))
        .expect("the raw claim's volume");
    let raw1_uid = cluster
        .get_json(&["pod", "raw1"])
        .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_owned))
        .expect("raw1's UID");
    let devices = plugins_dir.join("kubernetes.io/csi/volumeDevices");
    let publish_file = devices.join("publish").join(&raw_pv).join(&raw1_uid);
    assert!(
        mounts_below(&devices).contains(&publish_file.display().to_string()),
        "published at upstream's path {}: {:?}",
        publish_file.display(),
        mounts_below(&devices)
    );
    assert_eq!(
        std::fs::read_link(
            pods_dir
                .join(&raw1_uid)
                .join("volumeDevices/kubernetes.io~csi")
                .join(&raw_pv)
        )
        .ok(),
        Some(publish_file.clone()),
        "the pod's link to its device"
    );
    let log = std::fs::read_to_string(&driver_log).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("/csi.v1.Node/NodeStageVolume")
                && l.contains(&format!("volumeDevices/staging/{raw_pv}"))),
        "staged at upstream's block staging path:\n{log}"
    );
    // Upstream's global map (`MapBlockVolume`): the device bound on
    // `volumeDevices/<pv>/dev/<pod uid>` and held open by a loop device over it, where an
    // upstream kubelet taking the node over finds it.
    let global_map = devices.join(&raw_pv).join("dev").join(&raw1_uid);
    assert!(
        mounts_below(&devices).contains(&global_map.display().to_string()),
        "the device bound at the global map {}: {:?}",
        global_map.display(),
        mounts_below(&devices)
    );
    assert_eq!(
        crate::common::mounts::loop_devices_below(&global_map).len(),
        1,
        "one loop device holds the global map"
    );
    // Measured by the driver there (upstream's block metrics), with its claim.
    let (measured, in_metrics) = measured_claim(&cluster, "raw");
    assert_eq!(measured["name"], "data", "{measured}");
    assert!(measured["capacityBytes"].as_u64() > Some(0), "{measured}");
    assert!(
        in_metrics,
        "kubelet_volume_stats_used_bytes of claim raw in /metrics"
    );
    assert!(
        std::fs::read_to_string(&driver_log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("/csi.v1.Node/NodeGetVolumeStats")
                && l.contains(&global_map.display().to_string())),
        "NodeGetVolumeStats at the global map"
    );
    // Grown online: the driver's NodeExpandVolume of the device the pod has, as a block
    // volume (upstream's block expansion: the publish path, the block staging path).
    let raw_handle = cluster
        .get_json(&["pv", &raw_pv])
        .and_then(|pv| {
            pv["spec"]["csi"]["volumeHandle"]
                .as_str()
                .map(str::to_owned)
        })
        .expect("the raw claim's volume handle");
    resize_to_2mi(&cluster, &socket, "raw", &raw_pv, &raw_handle, "raw1").await;
    let log = std::fs::read_to_string(&driver_log).unwrap_or_default();
    assert!(
        log.lines().any(
            |l| l.contains("\"Method\":\"/csi.v1.Node/NodeExpandVolume\"")
                && l.contains("\"required_bytes\":2097152")
                && l.contains(&publish_file.display().to_string())
                && l.contains(&format!("volumeDevices/staging/{raw_pv}"))
                && l.to_lowercase().contains("\"block\":{")
        ),
        "NodeExpandVolume of the block volume to 2Mi:\n{log}"
    );
    let selector = "involvedObject.name=wrongmode,reason=FailedMount";
    let wrong = "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: error processing PVC default/data: volume data has volumeMode Filesystem, but is specified in volumeDevices";
    eventually(60, "FailedMount of pod wrongmode", || {
        let events = cluster.get_json(&["events", "--field-selector", selector])?;
        events["items"]
            .as_array()?
            .iter()
            .any(|e| e["message"] == wrong && e["type"] == "Warning")
            .then_some(())
    });
    let out = cluster.kubectl(&["delete", "pod", "raw1", "wrongmode", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually(
        60,
        "raw1's device unmapped, unpublished and unstaged",
        || {
            (mounts_below(&devices).is_empty()
                && crate::common::mounts::loop_devices_below(&devices).is_empty())
            .then_some(())
        },
    );
    cluster.apply(&block_pod("raw2", "raw"));
    running(&cluster, "raw2");
    let (out, code) = node
        .exec_sh("raw2", "app", "dd if=/dev/xvda bs=14 count=1 2>/dev/null")
        .await;
    assert_eq!(
        (out.as_str(), code),
        ("rkubelet-block", 0),
        "the device's data outlived the first pod"
    );
    let out = cluster.kubectl(&["delete", "pod", "raw2", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually(60, "raw2's device unpublished and unstaged", || {
        let log = std::fs::read_to_string(&driver_log).ok()?;
        let unstaged = log.lines().any(|l| {
            l.contains("/csi.v1.Node/NodeUnstageVolume")
                && l.contains(&format!("volumeDevices/staging/{raw_pv}"))
        });
        (unstaged && mounts_below(&devices).is_empty() && !devices.join(&raw_pv).exists())
            .then_some(())
    });
    node.finish();
}

/// The hostpath driver as clusters run it: its node side (hostpathplugin and
/// csi-node-driver-registrar, image `registry.rkubelet.test/csi-hostpath:1` built by
/// `build-images.sh --csi-image`) as a privileged pod on rkubelet mounting the root
/// directory's `pods` and `plugins` with `Bidirectional` propagation (upstream's
/// `csi-hostpath-plugin.yaml`), its controller sidecars (provisioner, attacher) as host
/// processes on the socket the pod makes; its upstream CSIDriver.
struct HostpathDriver {
    _peers: Vec<Peer>,
    logs: std::path::PathBuf,
    state: std::path::PathBuf,
}

const DRIVER_IMAGE: &str = "registry.rkubelet.test/csi-hostpath:1";

impl HostpathDriver {
    fn start(cluster: &Cluster, node: &Node, state: &Path) -> HostpathDriver {
        let bins = kube_bins();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env/build-images.sh");
        let out = Command::new(script)
            .arg("--csi-image")
            .arg(node.ctrd.socket())
            .env("KUBE_BINS", &bins)
            .output()
            .expect("build-images.sh runs");
        assert!(
            out.status.success(),
            "build-images.sh --csi-image: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let root = node.root.display().to_string();
        let data = state.join("data");
        std::fs::create_dir_all(&data).expect("driver data folder");
        cluster.apply(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: csi-hostpathplugin, labels: {{app: csi-hostpathplugin}}}}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n  automountServiceAccountToken: false\n  containers:\n  - name: hostpath\n    image: {DRIVER_IMAGE}\n    imagePullPolicy: IfNotPresent\n    args: [--drivername={DRIVER}, --endpoint=unix:///csi/csi.sock, --nodeid={NODE}, --statedir=/csi-data-dir, --enable-attach=true, --v=5]\n    securityContext: {{privileged: true}}\n    volumeMounts:\n    - {{name: socket-dir, mountPath: /csi}}\n    - {{name: mountpoint-dir, mountPath: {root}/pods, mountPropagation: Bidirectional}}\n    - {{name: plugins-dir, mountPath: {root}/plugins, mountPropagation: Bidirectional}}\n    - {{name: csi-data-dir, mountPath: /csi-data-dir}}\n    - {{name: dev-dir, mountPath: /dev}}\n  - name: node-driver-registrar\n    image: {DRIVER_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [/csi-node-driver-registrar, --csi-address=/csi/csi.sock, --kubelet-registration-path={root}/plugins/csi-hostpath/csi.sock]\n    volumeMounts:\n    - {{name: socket-dir, mountPath: /csi}}\n    - {{name: registration-dir, mountPath: /registration}}\n  volumes:\n  - {{name: socket-dir, hostPath: {{path: {root}/plugins/csi-hostpath, type: DirectoryOrCreate}}}}\n  - {{name: mountpoint-dir, hostPath: {{path: {root}/pods, type: DirectoryOrCreate}}}}\n  - {{name: plugins-dir, hostPath: {{path: {root}/plugins, type: Directory}}}}\n  - {{name: registration-dir, hostPath: {{path: {root}/plugins_registry, type: Directory}}}}\n  - {{name: csi-data-dir, hostPath: {{path: {}, type: DirectoryOrCreate}}}}\n  - {{name: dev-dir, hostPath: {{path: /dev, type: Directory}}}}\n",
            data.display()
        ));
        let socket = node.root.join("plugins/csi-hostpath/csi.sock");
        let csi_address = format!("--csi-address={}", socket.display());
        let kubeconfig = format!("--kubeconfig={}", cluster.admin_kubeconfig().display());
        let peers = vec![
            Peer::start(
                &bins.join("csi-provisioner"),
                &[
                    csi_address.clone(),
                    kubeconfig.clone(),
                    "--feature-gates=Topology=true".into(),
                    "--extra-create-metadata".into(),
                ],
                &state.join("provisioner.log"),
            ),
            Peer::start(
                &bins.join("csi-attacher"),
                &[csi_address, kubeconfig],
                &state.join("attacher.log"),
            ),
        ];
        cluster.apply(&format!(
            "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {{name: {DRIVER}}}\nspec:\n  attachRequired: true\n  podInfoOnMount: true\n  fsGroupPolicy: File\n  volumeLifecycleModes: [Persistent, Ephemeral]\n---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: csi-hostpath}}\nprovisioner: {DRIVER}\nvolumeBindingMode: WaitForFirstConsumer\nreclaimPolicy: Delete\n"
        ));
        eventually(
            90,
            "the driver pod registered in the node's CSINode",
            || csi_node_drivers(cluster).filter(|d| !d.is_empty()),
        );
        HostpathDriver {
            _peers: peers,
            logs: node.logs.clone(),
            state: data,
        }
    }

    /// How many times the driver was called `method` (its container log's
    /// `GRPC call:` lines).
    fn calls(&self, method: &str) -> usize {
        let mut text = String::new();
        crate::common::node::walk(&self.logs, &mut |path| {
            let path_text = path.display().to_string();
            if path_text.contains("csi-hostpathplugin") && path_text.contains("/hostpath/") {
                text.push_str(&std::fs::read_to_string(path).unwrap_or_default());
            }
        });
        text.lines()
            .filter(|l| l.contains("GRPC call:") && l.trim_end().ends_with(method))
            .count()
    }
}

/// Each pod of the StatefulSet `db`: its container's ID and restart count, by pod name.
fn stateful_pods(cluster: &Cluster) -> Option<std::collections::BTreeMap<String, (String, u64)>> {
    let list = cluster.get_json(&["pods", "-l", "app=db"])?;
    list["items"]
        .as_array()?
        .iter()
        .map(|p| {
            let status = &p["status"]["containerStatuses"][0];
            let running = p["status"]["phase"] == "Running" && status["ready"] == true;
            running.then(|| {
                (
                    p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    (
                        status["containerID"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        status["restartCount"].as_u64().unwrap_or(u64::MAX),
                    ),
                )
            })
        })
        .collect()
}

/// Upstream's StatefulSet storage checks (e2e `apps/statefulset.go`, `storage/persistent_volumes.go`)
/// and issue 33's restart check, against the real peers: the hostpath driver's node side
/// runs as a pod on rkubelet with `Bidirectional` propagation, as clusters run it; a
/// StatefulSet of 10 replicas with `volumeClaimTemplates` on it (provisioned on first use,
/// attached, staged, published), scheduled by kube-scheduler; each writes its ordinal to
/// its volume, which lands in the driver's own folder.
/// rkubelet killed with SIGKILL and started again: every volume is found again (the
/// Node's `volumesInUse` lists all ten again), no container restarted, no mount doubled.
/// Then a live swap both ways with the upstream kubelet v1.26.1: each reconstructs the
/// other's volumes, neither restarts a container nor mounts a volume twice.
/// A deleted pod comes back with its data; scaled to 0, every volume is unpublished and
/// unstaged: nothing of them is left in the mount table, and none stays in use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd, control plane with scheduler, the CSI hostpath driver and its sidecars: run by scripts/test.sh"]
async fn a_stateful_set_keeps_its_volumes_across_a_sigkill_of_rkubelet_and_a_live_swap() {
    let bins = kube_bins();
    for binary in [
        "hostpathplugin",
        "csi-node-driver-registrar",
        "csi-provisioner",
        "csi-attacher",
    ] {
        assert!(
            bins.join(binary).is_file(),
            "{binary} is needed in {} (../shared/peers/bin/{binary}.zst)",
            bins.display()
        );
    }
    let state = TempRoot::new().expect("temp dir");
    let cluster = Cluster::start_with(
        "csists",
        ClusterOptions {
            scheduler: true,
            ..ClusterOptions::default()
        },
    );
    let mut node = Node::start("csists");
    let kubeconfig = format!(
        "--kubeconfig={}",
        cluster.node_kubeconfig(NODE, 30).display()
    );
    node.kubelet_with(&[&kubeconfig]);
    eventually(30, "node registered", || cluster.get_json(&["node", NODE]));
    let driver = HostpathDriver::start(&cluster, &node, state.path());
    const REPLICAS: usize = 10;
    cluster.apply(&format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: db}}\nspec:\n  serviceName: db\n  replicas: {REPLICAS}\n  podManagementPolicy: Parallel\n  selector: {{matchLabels: {{app: db}}}}\n  template:\n    metadata: {{labels: {{app: db}}}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      automountServiceAccountToken: false\n      containers:\n      - name: app\n        image: {}\n        imagePullPolicy: IfNotPresent\n        command: [sh, -c, \"[ -f /data/ordinal ] || echo ${{HOSTNAME##*-}} > /data/ordinal; exec sleep 3600\"]\n        volumeMounts: [{{name: data, mountPath: /data}}]\n  volumeClaimTemplates:\n  - metadata: {{name: data}}\n    spec: {{storageClassName: csi-hostpath, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Mi}}}}}}\n",
        node.busybox
    ));
    let before = eventually(180, "10 replicas Running", || {
        stateful_pods(&cluster).filter(|p| p.len() == REPLICAS)
    });
    let (out, code) = node.exec_sh("db-3", "app", "cat /data/ordinal").await;
    assert_eq!((out.as_str(), code), ("3\n", 0), "db-3 wrote its ordinal");
    // The driver's bind mount, made in its container, reached the host and the
    // replicas' containers (Bidirectional, then the kubelet's rshared root): what each
    // wrote is in the driver's own folder.
    let mut ordinals = Vec::new();
    crate::common::node::walk(&driver.state, &mut |path| {
        if path.ends_with("ordinal") {
            ordinals.push(std::fs::read_to_string(path).unwrap_or_default());
        }
    });
    ordinals.sort();
    let expected: Vec<String> = {
        let mut all: Vec<String> = (0..REPLICAS).map(|i| format!("{i}\n")).collect();
        all.sort();
        all
    };
    assert_eq!(
        ordinals, expected,
        "each replica's ordinal in the driver's folder"
    );
    let pods_dir = node.root.join("pods");
    let plugins_dir = node.root.join("plugins");
    let published = mounts_below(&pods_dir);
    // The hostpath driver's staging mounts nothing: the staged volumes are the
    // kubelet's `vol_data.json` beside each global path.
    let staged_volumes = || {
        let global = plugins_dir.join("kubernetes.io/csi").join(DRIVER);
        std::fs::read_dir(global)
            .map(|dirs| {
                dirs.flatten()
                    .filter(|d| d.path().join("vol_data.json").is_file())
                    .count()
            })
            .unwrap_or(0)
    };
    let staged = staged_volumes();
    assert!(published.len() >= REPLICAS, "{published:?}");
    assert_eq!(staged, REPLICAS, "each volume staged once");

    // SIGKILL, then started again on the same root: the volumes are found again.
    let publishes = driver.calls("/csi.v1.Node/NodePublishVolume");
    let stages = driver.calls("/csi.v1.Node/NodeStageVolume");
    assert!(
        publishes >= REPLICAS && stages >= REPLICAS,
        "{publishes} {stages}"
    );
    node.kill9();
    node.kubelet_with(&[&kubeconfig]);
    eventually(90, "all ten volumes in use again", || {
        let status = cluster.get_json(&["node", NODE])?["status"].clone();
        (status["volumesInUse"].as_array()?.len() == REPLICAS).then_some(())
    });
    let after = eventually(60, "10 replicas Running after the restart", || {
        stateful_pods(&cluster).filter(|p| p.len() == REPLICAS)
    });
    assert_eq!(after, before, "no container restarted or replaced");
    let mut published_after = mounts_below(&pods_dir);
    let mut published_before = published.clone();
    published_after.sort();
    published_before.sort();
    assert_eq!(
        published_after, published_before,
        "no volume published twice"
    );
    assert_eq!(staged_volumes(), staged, "no volume staged twice");
    assert_eq!(
        (
            driver.calls("/csi.v1.Node/NodePublishVolume"),
            driver.calls("/csi.v1.Node/NodeStageVolume")
        ),
        (publishes, stages),
        "the running pods' volumes were not published or staged again"
    );

    // A live swap both ways with the volumes in use (docs/live-swap.md): rkubelet
    // stopped, the upstream kubelet v1.26.1 takes the node over on the same root
    // directory, identity and containerd, the driver's own pod included; then rkubelet
    // takes it back from upstream. Neither restarts a container, and neither mounts a
    // volume twice: each finds the other's volumes (the same `vol_data.json` files and
    // paths). Upstream may publish a volume again (its reconstruction of v1.26 does);
    // the driver answers a publish of a mounted target without mounting it again.
    let running = node.running_containers().await;
    node.stop_kubelet();
    {
        let _upstream_lock = crate::common::upstream::lock();
        let upstream = crate::common::upstream::UpstreamKubelet::start(
            &bins,
            &node.ctrd,
            &crate::common::upstream::UpstreamArgs {
                dir: node.root.parent().expect("the root directory's folder"),
                node: NODE,
                manifests: None,
                url: None,
                extra: &[kubeconfig.clone(), "--v=4".to_owned()],
            },
        );
        let synced = |log: &str| {
            (0..REPLICAS)
                .map(|i| format!("db-{i}"))
                .chain(["csi-hostpathplugin".to_owned()])
                .all(|pod| log.contains(&format!("\"syncPod exit\" pod=\"default/{pod}\"")))
        };
        let log = || std::fs::read_to_string(upstream.dir.join("kubelet.log")).unwrap_or_default();
        eventually(120, "the upstream kubelet synced every pod", || {
            synced(&log()).then_some(())
        });
        // Upstream's reconstruction read rkubelet's `vol_data.json` of each claim's
        // volume, then its reconciler set each up again (a publish of a mounted target).
        let count = |text: &str| {
            log()
                .lines()
                .filter(|l| l.contains(text) && l.contains("pvc-"))
                .count()
        };
        eventually(
            60,
            "the upstream kubelet set up every claim's volume",
            || (count("MountVolume.SetUp succeeded for volume") >= REPLICAS).then_some(()),
        );
        assert!(
            count("Volume exists in desired state, marking as InUse") >= REPLICAS,
            "upstream reconstructed rkubelet's volumes; its log:\n{}",
            upstream.log()
        );
        eprintln!(
            "under upstream: the driver's NodePublishVolume calls {} (rkubelet's {publishes}), NodeStageVolume {} ({stages})",
            driver.calls("/csi.v1.Node/NodePublishVolume"),
            driver.calls("/csi.v1.Node/NodeStageVolume")
        );
        let mut published_upstream = mounts_below(&pods_dir);
        published_upstream.sort();
        assert_eq!(
            (node.running_containers().await, published_upstream),
            (running.clone(), published_before.clone()),
            "under upstream: no container restarted, no volume mounted twice; its log:\n{}",
            upstream.log()
        );
        let (out, code) = node.exec_sh("db-3", "app", "cat /data/ordinal").await;
        assert_eq!(
            (out.as_str(), code),
            ("3\n", 0),
            "db-3's data under upstream"
        );
        upstream.hand_over_mounted();
    }
    node.kubelet_with(&[&kubeconfig]);
    // Every pod synced by rkubelet once (its `/pods` shows its own view of each).
    eventually(90, "rkubelet synced every pod after upstream", || {
        let answer = node.pods_body();
        let pods: Value = serde_json::from_str(answer.strip_prefix("200 ")?).ok()?;
        let running = pods["items"]
            .as_array()?
            .iter()
            .filter(|p| {
                let statuses = p["status"]["containerStatuses"].as_array();
                statuses.is_some_and(|s| {
                    !s.is_empty() && s.iter().all(|c| c["state"]["running"].is_object())
                })
            })
            .count();
        (running == REPLICAS + 1).then_some(())
    });
    let back = eventually(60, "10 replicas Running under rkubelet again", || {
        stateful_pods(&cluster).filter(|p| p.len() == REPLICAS)
    });
    assert_eq!(
        back, before,
        "no container restarted or replaced by the swaps"
    );
    let mut published_back = mounts_below(&pods_dir);
    published_back.sort();
    assert_eq!(
        (node.running_containers().await, published_back),
        (running, published_before),
        "back under rkubelet: no container restarted, no volume mounted twice"
    );
    assert_eq!(
        staged_volumes(),
        staged,
        "no volume staged twice by the swaps"
    );

    // A deleted replica comes back with its data.
    let out = cluster.kubectl(&["delete", "pod", "db-3", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually(90, "db-3 back", || {
        stateful_pods(&cluster)
            .filter(|p| p.len() == REPLICAS && p.get("db-3") != before.get("db-3"))
    });
    let (out, code) = node.exec_sh("db-3", "app", "cat /data/ordinal").await;
    assert_eq!((out.as_str(), code), ("3\n", 0), "db-3's data outlived it");

    // Scaled to 0: every volume unpublished and unstaged, out of use, detached.
    let out = cluster.kubectl(&["scale", "statefulset", "db", "--replicas=0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually(
        120,
        "every volume unpublished, unstaged and out of use",
        || {
            let status = cluster.get_json(&["node", NODE])?["status"].clone();
            (mounts_below(&pods_dir).is_empty()
                && mounts_below(&plugins_dir).is_empty()
                && status.get("volumesInUse").is_none())
            .then_some(())
        },
    );
    assert!(
        driver.calls("/csi.v1.Node/NodeUnstageVolume") >= REPLICAS,
        "each volume unstaged"
    );
    node.finish();
}
