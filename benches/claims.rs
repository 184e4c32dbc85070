//! Pods on new claims (issue 33), rkubelet side by side with the upstream kubelet v1.26.1
//! on one private control plane, each on a containerd of its own with the CSI hostpath
//! driver v1.18.0 and its registrar (host processes, as REAL-PEERS.md ran them under the
//! upstream kubelet) and csi-provisioner v6.2.1; the CSIDriver says `attachRequired:
//! false` so neither kubelet waits for an attacher. For each kubelet: a claim and a pod
//! on it created at once (the pod bound to the node) to the pod `Running` in the API, and
//! from the claim bound to `Running`; a pod created on a claim already bound, as a
//! scheduler delivers pods, to `Running` (the kubelet's own part); each moment as a watch
//! opened before the creation sees it (no polling interval in the figures), median of
//! `RKUBELET_BENCH_CLAIM_RUNS` (3); `RKUBELET_BENCH_CLAIM_PODS` (30) such pairs created at
//! once to all `Running`; the kubelet's resident memory with them. The baseline: the
//! driver's own calls for one volume issued bare on its socket (`CreateVolume`,
//! `NodeStageVolume`, `NodePublishVolume`), median of as many runs, and a pod's CRI
//! calls issued bare (RunPodSandbox, CreateContainer, StartContainer), the same pod's
//! requests as rkubelet sends them, and the API calls a kubelet makes for it (GET claim,
//! GET PersistentVolume, PATCH status) issued bare as the node. Goals: one pod
//! faster than upstream's; within 1.2x of the bare driver calls (issue 33's words; the
//! API's provisioning and binding alone take longer, so it is printed, not met);
//! restated (proposed): the kubelet's own part, a pod on a bound claim created to Running,
//! within 1.2x of the bare `NodeStageVolume` + `NodePublishVolume` plus the bare pod,
//! judged on the median of each run's ratio, its baselines measured just before its pod.
//! Needs root, containerd, the control plane, the upstream kubelet and the CSI binaries;
//! fails, saying which is missing, without them.

#[allow(dead_code)]
#[path = "../tests/common/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../tests/common/containerd.rs"]
mod containerd;
#[allow(dead_code)]
#[path = "../tests/common/env_file.rs"]
mod env_file;
#[allow(dead_code)]
#[path = "../tests/common/mounts.rs"]
mod mounts;
#[allow(dead_code)]
#[path = "../tests/common/patience.rs"]
mod patience;
#[allow(dead_code)]
#[path = "../tests/common/upstream.rs"]
mod upstream;

mod common;

#[allow(clippy::all, clippy::pedantic)]
mod csi {
    tonic::include_proto!("csi.v1");
}

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use rkubelet::domain::kuberuntime::requests::RequestContext;

use cluster::Cluster;
use common::{admin_client, env_number, fail, free_port, median, rss_kib, verdict};
use containerd::Containerd;
use upstream::RunningKubelet;

const DRIVER: &str = "hostpath.csi.k8s.io";

/// A host process, killed and reaped on drop.
struct Peer(Child);

impl Peer {
    fn start(binary: &Path, args: &[String], log: &Path) -> Result<Peer, String> {
        let out = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        Command::new(binary)
            .args(args)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map(Peer)
            .map_err(|e| format!("{} does not start: {e}", binary.display()))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kubelet {
    Rkubelet,
    Upstream,
}

impl Kubelet {
    fn name(self) -> &'static str {
        match self {
            Kubelet::Rkubelet => "rk",
            Kubelet::Upstream => "up",
        }
    }
}

#[derive(Default)]
struct Figures {
    created_to_running: Vec<f64>,
    bound_to_running: Vec<f64>,
    /// A pod created on a claim already bound, to Running: the order a scheduler keeps.
    on_bound_to_running: Vec<f64>,
    many_running: Option<f64>,
    rss_mib: Option<f64>,
    /// The driver's three calls for one volume, bare.
    bare: Vec<f64>,
    /// Of those, `NodeStageVolume` + `NodePublishVolume`: the node's part.
    bare_node: Vec<f64>,
    /// A pod's RunPodSandbox + CreateContainer + StartContainer, bare.
    bare_pod: Vec<f64>,
    /// The same pod's requests as rkubelet sends them, bare.
    bare_kubelet_pod: Vec<f64>,
    /// The API calls a kubelet makes for a pod on a claim, issued bare with the node's
    /// identity: the claim's GET, then its PersistentVolume's, and a status PATCH.
    bare_api: Vec<f64>,
}

/// A process stopped with SIGSTOP until this is dropped.
struct Frozen(nix::unistd::Pid);

impl Frozen {
    fn new(pid: Option<u32>) -> Result<Frozen, String> {
        let pid = pid.ok_or("the kubelet has no process to stop")?;
        let pid =
            nix::unistd::Pid::from_raw(i32::try_from(pid).map_err(|e| format!("pid {pid}: {e}"))?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP)
            .map_err(|e| format!("SIGSTOP to {pid}: {e}"))?;
        Ok(Frozen(pid))
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGCONT);
    }
}

/// The API calls a kubelet cannot leave out for pod `name` on its claim `name`, issued
/// bare as the node (the Node authorizer allows a node these and no list or watch): the
/// claim's GET, then its PersistentVolume's, and an empty status PATCH. The pod's arrival
/// through the watch is not in it.
async fn bare_api_calls(node: &kube::Client, name: &str) -> Result<Duration, String> {
    use k8s_openapi::api::core::v1::PersistentVolume;
    use kube::api::{Api, Patch, PatchParams};
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.clone(), "default");
    let volumes: Api<PersistentVolume> = Api::all(node.clone());
    let pods: Api<Pod> = Api::namespaced(node.clone(), "default");
    let t = Instant::now();
    let claim = claims
        .get(name)
        .await
        .map_err(|e| format!("GET claim {name} as the node: {e}"))?;
    let volume = claim
        .spec
        .and_then(|s| s.volume_name)
        .ok_or(format!("claim {name} has no volume"))?;
    volumes
        .get(&volume)
        .await
        .map_err(|e| format!("GET volume {volume} as the node: {e}"))?;
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {}})),
    )
    .await
    .map_err(|e| format!("PATCH pod {name}'s status as the node: {e}"))?;
    Ok(t.elapsed())
}

/// Each run's figure over the sum of its two baselines.
fn ratios(figures: &[f64], bare_node: &[f64], bare_pod: &[f64]) -> Vec<f64> {
    figures
        .iter()
        .zip(bare_node.iter().zip(bare_pod))
        .filter(|(_, (n, p))| *n + *p > 0.0)
        .map(|(f, (n, p))| f / (n + p))
        .collect()
}

fn claim_object(name: &str) -> Result<PersistentVolumeClaim, String> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "storageClassName": "csi-hostpath",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Mi"}},
        },
    }))
    .map_err(|e| format!("claim {name}: {e}"))
}

fn pod_object(name: &str, node: &str, image: &str) -> Result<Pod, String> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "app",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "3600"],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}],
        },
    }))
    .map_err(|e| format!("pod {name}: {e}"))
}

/// What the bench's watch saw of the claims and pods `names`: the first of them created
/// in the API, when each claim was bound, when the last pod was Running.
struct Seen {
    first_added: Instant,
    bound: BTreeMap<String, Instant>,
    all_running: Instant,
}

enum Change {
    Claim(Box<WatchEvent<PersistentVolumeClaim>>),
    Pod(Box<WatchEvent<Pod>>),
}

/// Watches the claims and the node's pods from before they are created (tells `ready`
/// once both watches are open) until every pod of `names` is Running: the moments as the
/// API server told them, with no polling interval in them. With `pods_only` the claims
/// exist already and the first moment is the first pod's.
async fn track(
    client: kube::Client,
    node: String,
    names: Vec<String>,
    within: Duration,
    ready: tokio::sync::oneshot::Sender<()>,
    pods_only: bool,
) -> Result<Seen, String> {
    let claims: kube::Api<PersistentVolumeClaim> = kube::Api::namespaced(client.clone(), "default");
    let pods: kube::Api<Pod> = kube::Api::namespaced(client, "default");
    let selector = format!("spec.nodeName={node}");
    let version = |list: Option<String>| list.unwrap_or_default();
    let claims_from = version(
        claims
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .metadata
            .resource_version,
    );
    let pods_from = version(
        pods.list(&ListParams::default().fields(&selector))
            .await
            .map_err(|e| e.to_string())?
            .metadata
            .resource_version,
    );
    let claim_changes = claims
        .watch(&WatchParams::default(), &claims_from)
        .await
        .map_err(|e| e.to_string())?
        .map(|e| e.map(|e| Change::Claim(Box::new(e))));
    let pod_changes = pods
        .watch(&WatchParams::default().fields(&selector), &pods_from)
        .await
        .map_err(|e| e.to_string())?
        .map(|e| e.map(|e| Change::Pod(Box::new(e))));
    let mut changes = futures_util::stream::select(claim_changes.boxed(), pod_changes.boxed());
    let _ = ready.send(());
    let mut first_added = None;
    let mut bound = BTreeMap::new();
    let mut running = BTreeSet::new();
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let change = tokio::time::timeout(left, changes.next())
            .await
            .map_err(|_| format!("not all of {} pods Running within {within:?}", names.len()))?
            .ok_or("a watch ended")?
            .map_err(|e| e.to_string())?;
        let now = Instant::now();
        match change {
            Change::Claim(event) => {
                let (WatchEvent::Added(c) | WatchEvent::Modified(c)) = *event else {
                    continue;
                };
                if pods_only {
                    continue;
                }
                first_added.get_or_insert(now);
                if c.status.and_then(|s| s.phase).as_deref() == Some("Bound") {
                    if let Some(name) = c.metadata.name {
                        bound.entry(name).or_insert(now);
                    }
                }
            }
            Change::Pod(event) => {
                let (WatchEvent::Added(p) | WatchEvent::Modified(p)) = *event else {
                    continue;
                };
                first_added.get_or_insert(now);
                if p.status.and_then(|s| s.phase).as_deref() == Some("Running") {
                    if let Some(name) = p.metadata.name {
                        running.insert(name);
                    }
                }
            }
        }
        if names.iter().all(|n| running.contains(n)) {
            return Ok(Seen {
                first_added: first_added.unwrap_or(now),
                bound,
                all_running: now,
            });
        }
    }
}

/// When the claims are created: with their pods, or bound before the pods come, as a
/// scheduler delivers them (its VolumeBinding plugin binds a pod to a node only once the
/// pod's claims are bound).
#[derive(Clone, Copy, PartialEq)]
enum Claims {
    WithThePods,
    BoundFirst,
}

/// Creates the claims and pods `names` (a claim and a pod of each name, one request
/// each, all in flight together) while watching them.
fn create_and_track(
    client: &kube::Client,
    rt: &tokio::runtime::Runtime,
    node: &str,
    image: &str,
    names: &[String],
    claims_when: Claims,
    within: Duration,
) -> Result<Seen, String> {
    let claims: kube::Api<PersistentVolumeClaim> = kube::Api::namespaced(client.clone(), "default");
    let mut objects = Vec::new();
    for name in names {
        objects.push((claim_object(name)?, pod_object(name, node, image)?));
    }
    if claims_when == Claims::BoundFirst {
        let claim_objects = objects.iter().map(|(c, _)| c.clone()).collect();
        rt.block_on(create_bound(&claims, claim_objects, within))?;
    }
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let tracker = rt.spawn(track(
        client.clone(),
        node.to_owned(),
        names.to_vec(),
        within,
        ready_tx,
        claims_when == Claims::BoundFirst,
    ));
    if rt.block_on(ready_rx).is_ok() {
        rt.block_on(async {
            let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "default");
            let mut set = tokio::task::JoinSet::new();
            for (claim, pod) in objects {
                let (claims, pods) = (claims.clone(), pods.clone());
                if claims_when == Claims::WithThePods {
                    set.spawn(async move {
                        claims
                            .create(&PostParams::default(), &claim)
                            .await
                            .map(|_| ())
                    });
                }
                set.spawn(
                    async move { pods.create(&PostParams::default(), &pod).await.map(|_| ()) },
                );
            }
            while let Some(done) = set.join_next().await {
                done.map_err(|e| format!("a create's task: {e}"))?
                    .map_err(|e| format!("creating a claim or pod: {e}"))?;
            }
            Ok::<(), String>(())
        })?;
    }
    rt.block_on(tracker)
        .map_err(|e| format!("the watch's task: {e}"))?
}

/// Creates `objects` and waits, untimed, until each is bound.
async fn create_bound(
    claims: &kube::Api<PersistentVolumeClaim>,
    objects: Vec<PersistentVolumeClaim>,
    within: Duration,
) -> Result<(), String> {
    let mut names = BTreeSet::new();
    for claim in objects {
        names.insert(claim.metadata.name.clone().unwrap_or_default());
        claims
            .create(&PostParams::default(), &claim)
            .await
            .map_err(|e| format!("creating a claim: {e}"))?;
    }
    let deadline = Instant::now() + within;
    while !names.is_empty() {
        if Instant::now() > deadline {
            return Err(format!("claims {names:?} not bound within {within:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        for claim in claims
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
        {
            if claim.status.and_then(|s| s.phase).as_deref() == Some("Bound") {
                names.remove(claim.metadata.name.as_deref().unwrap_or_default());
            }
        }
    }
    Ok(())
}

/// Deletes every pod and claim and waits until the claims' volumes are gone. The claims
/// go once no volume is mounted below the kubelet's `root` any more: the pods' grace period
/// of 0 removes them from the API at once, before the kubelet has unpublished their
/// volumes, and a claim deleted then has its volume deleted while still published.
fn clear(c: &Cluster, root: &Path) -> Result<(), String> {
    let delete = |kind: &str| {
        let out = c.kubectl(&["delete", kind, "--all", "--wait=true", "--timeout=120s"]);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "kubectl delete {kind}: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    delete("pods")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let volume_mounts = || {
        mounts::mounts_below(&root.join("pods")).len()
            + mounts::mounts_below(&root.join("plugins/kubernetes.io")).len()
    };
    while volume_mounts() > 0 {
        if Instant::now() > deadline {
            return Err(format!(
                "volumes still mounted below {} 120 s after their pods' deletion",
                root.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    delete("pvc")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while c
        .get_json(&["pv"])
        .is_some_and(|l| l["items"].as_array().is_some_and(|i| !i.is_empty()))
    {
        if Instant::now() > deadline {
            return Err("PersistentVolumes left 120 s after their claims' deletion".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

async fn channel(socket: &Path) -> Result<tonic::transport::Channel, String> {
    let socket = socket.to_path_buf();
    tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let socket = socket.clone();
            async move {
                tokio::net::UnixStream::connect(socket)
                    .await
                    .map(hyper_util::rt::TokioIo::new)
            }
        }))
        .await
        .map_err(|e| format!("the driver's socket: {e}"))
}

/// The driver's calls for one volume, bare: `CreateVolume`, `NodeStageVolume`,
/// `NodePublishVolume`, then undone (not timed): how long all three took, and the last
/// two (the node's part).
async fn bare_calls(socket: &Path, dir: &Path, i: usize) -> Result<(Duration, Duration), String> {
    use csi::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
    let channel = channel(socket).await?;
    let mut controller = csi::controller_client::ControllerClient::new(channel.clone());
    let mut node = csi::node_client::NodeClient::new(channel);
    let capability = csi::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    };
    let staging = dir.join(format!("bare-stage-{i}"));
    let target = dir.join(format!("bare-target-{i}"));
    std::fs::create_dir_all(&staging).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let volume = controller
        .create_volume(csi::CreateVolumeRequest {
            name: format!("bare-{i}"),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: 1 << 20,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![capability.clone()],
            parameters: Default::default(),
        })
        .await
        .map_err(|e| format!("CreateVolume: {e}"))?
        .into_inner()
        .volume
        .ok_or("CreateVolume: no volume")?;
    let created = Instant::now();
    node.node_stage_volume(csi::NodeStageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(capability.clone()),
        volume_context: volume.volume_context.clone(),
        ..Default::default()
    })
    .await
    .map_err(|e| format!("NodeStageVolume: {e}"))?;
    node.node_publish_volume(csi::NodePublishVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(capability),
        volume_context: volume.volume_context.clone(),
        ..Default::default()
    })
    .await
    .map_err(|e| format!("NodePublishVolume: {e}"))?;
    let took = (started.elapsed(), created.elapsed());
    let _ = node
        .node_unpublish_volume(csi::NodeUnpublishVolumeRequest {
            volume_id: volume.volume_id.clone(),
            target_path: target.display().to_string(),
        })
        .await;
    let _ = node
        .node_unstage_volume(csi::NodeUnstageVolumeRequest {
            volume_id: volume.volume_id.clone(),
            staging_target_path: staging.display().to_string(),
        })
        .await;
    let _ = controller
        .delete_volume(csi::DeleteVolumeRequest {
            volume_id: volume.volume_id,
        })
        .await;
    Ok(took)
}

fn measure(
    kind: Kubelet,
    c: &Cluster,
    bins: &Path,
    rt: &tokio::runtime::Runtime,
) -> Result<Figures, String> {
    let node = format!("claims-{}", kind.name());
    let ctrd = Containerd::try_start(&format!("claims{}", kind.name()))?;
    let image = ctrd.var("BUSYBOX_IMAGE");
    let dir = mounts::TempRoot::new().map_err(|e| format!("temp dir: {e}"))?;
    let kubeconfig = c.node_kubeconfig(&node, 30);
    let root: PathBuf;
    let running = match kind {
        Kubelet::Rkubelet => {
            root = dir.path().join("root");
            std::fs::create_dir_all(&root).map_err(|e| format!("root dir: {e}"))?;
            let log = File::create(dir.path().join("rkubelet.log"))
                .map_err(|e| format!("log file: {e}"))?;
            let child = Command::new(common::rkubelet_bin())
                .args([
                    format!("--kubeconfig={}", kubeconfig.display()),
                    format!("--container-runtime-endpoint={}", ctrd.var("CRI_ENDPOINT")),
                    format!("--root-dir={}", root.display()),
                    format!("--cert-dir={}", dir.path().join("pki").display()),
                    format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
                    format!("--pod-infra-container-image={}", ctrd.var("PAUSE_IMAGE")),
                    format!("--hostname-override={node}"),
                    format!("--healthz-port={}", free_port()),
                    format!("--port={}", free_port()),
                    "--fail-swap-on=false".into(),
                    "--eviction-hard=".into(),
                ])
                .env_remove("NOTIFY_SOCKET")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("rkubelet does not start: {e}"))?;
            RunningKubelet::Rkubelet(child)
        }
        Kubelet::Upstream => {
            let up_dir = dir.path().join("upstream");
            root = up_dir.join("root");
            let extra = [
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--healthz-port={}", free_port()),
            ];
            RunningKubelet::Upstream(upstream::UpstreamKubelet::start(
                bins,
                &ctrd,
                &upstream::UpstreamArgs {
                    dir: &up_dir,
                    node: &node,
                    manifests: None,
                    url: None,
                    extra: &extra,
                },
            ))
        }
    };
    let ready_by = Instant::now() + Duration::from_secs(60);
    while !c.get_json(&["node", &node]).is_some_and(|n| {
        n["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    }) {
        if Instant::now() > ready_by {
            return Err(format!("node {node} not Ready within 60 s"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // The driver's node side and its provisioner, on this node's root directory.
    let socket_dir = root.join("plugins/csi-hostpath");
    std::fs::create_dir_all(&socket_dir).map_err(|e| e.to_string())?;
    let registry = root.join("plugins_registry");
    std::fs::create_dir_all(&registry).map_err(|e| e.to_string())?;
    let socket = socket_dir.join("csi.sock");
    let csi_address = format!("--csi-address={}", socket.display());
    let _driver = [
        Peer::start(
            &bins.join("hostpathplugin"),
            &[
                format!("--drivername={DRIVER}"),
                format!("--endpoint=unix://{}", socket.display()),
                format!("--nodeid={node}"),
                format!("--statedir={}", dir.path().join("csi-data").display()),
            ],
            &dir.path().join("hostpathplugin.log"),
        )?,
        Peer::start(
            &bins.join("csi-node-driver-registrar"),
            &[
                csi_address.clone(),
                format!("--kubelet-registration-path={}", socket.display()),
                format!("--plugin-registration-path={}", registry.display()),
            ],
            &dir.path().join("registrar.log"),
        )?,
        Peer::start(
            &bins.join("csi-provisioner"),
            &[
                csi_address,
                format!("--kubeconfig={}", c.admin_kubeconfig().display()),
            ],
            &dir.path().join("provisioner.log"),
        )?,
    ];
    let registered_by = Instant::now() + Duration::from_secs(60);
    while !c.get_json(&["csinode", &node]).is_some_and(|n| {
        n["spec"]["drivers"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["name"] == DRIVER))
    }) {
        if Instant::now() > registered_by {
            return Err(format!("the driver not registered on {node} within 60 s"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut figures = Figures::default();
    let runs = env_number("RKUBELET_BENCH_CLAIM_RUNS", 3).max(1);
    // rkubelet's baselines, each run's just before its pods, so that the machine's drift
    // over the bench (the bare pod alone varied 0.12 to 0.42 s between runs) falls on
    // both sides of each run's ratio.
    let baselines = if kind == Kubelet::Rkubelet {
        // The CRI client's channel is made on the runtime.
        let _in_runtime = rt.enter();
        let bare_cri = common::bare_cri::BareCri {
            cri: rkubelet::adapters::cri::CriRuntime::connect(
                &ctrd.var("CRI_ENDPOINT"),
                Duration::from_secs(30),
            )
            .map_err(|e| format!("CRI client: {e}"))?,
            busybox: image.clone(),
            logs: PathBuf::from(ctrd.var("RKUBELET_POD_LOG_ROOT")),
        };
        let mut requests = RequestContext::under_root(&dir.path().join("bare-root"));
        requests.pod_logs_dir = PathBuf::from(ctrd.var("RKUBELET_POD_LOG_ROOT"));
        let bare_kubelet = common::bare_cri::BareKubeletCri {
            cri: bare_cri.cri.clone(),
            busybox: image.clone(),
            requests,
        };
        let node_client = rt.block_on(admin_client(&kubeconfig))?;
        Some((bare_cri, bare_kubelet, node_client))
    } else {
        None
    };
    let client = rt.block_on(admin_client(&c.admin_kubeconfig()))?;
    let pods = |names: &[String], claims_when: Claims, within: Duration| {
        create_and_track(&client, rt, &node, &image, names, claims_when, within)
    };
    for i in 0..runs {
        if let Some((bare_cri, bare_kubelet, _)) = &baselines {
            // rkubelet is stopped meanwhile: it would take the bare pods for pods no source
            // wants and kill them (a StartContainer failed so), and its work would be in
            // the baseline's time.
            let _frozen = Frozen::new(running.pid())?;
            let (all, node_part) = rt.block_on(bare_calls(&socket, dir.path(), i))?;
            figures.bare.push(all.as_secs_f64());
            figures.bare_node.push(node_part.as_secs_f64());
            figures
                .bare_pod
                .push(rt.block_on(bare_cri.run(i))?.as_secs_f64());
            figures
                .bare_kubelet_pod
                .push(rt.block_on(bare_kubelet.run(i))?.as_secs_f64());
        }
        let name = format!("bound-{}-{i}", kind.name());
        let one = std::slice::from_ref(&name);
        let seen = pods(one, Claims::BoundFirst, Duration::from_secs(90))?;
        figures
            .on_bound_to_running
            .push((seen.all_running - seen.first_added).as_secs_f64());
        if let Some((_, _, node_client)) = &baselines {
            let _frozen = Frozen::new(running.pid())?;
            figures.bare_api.push(
                rt.block_on(bare_api_calls(node_client, &name))?
                    .as_secs_f64(),
            );
        }
        clear(c, &root)?;
        let name = format!("one-{}-{i}", kind.name());
        let one = std::slice::from_ref(&name);
        let seen = pods(one, Claims::WithThePods, Duration::from_secs(90))?;
        figures
            .created_to_running
            .push((seen.all_running - seen.first_added).as_secs_f64());
        if let Some(at) = seen.bound.get(&name) {
            figures.bound_to_running.push(
                seen.all_running
                    .saturating_duration_since(*at)
                    .as_secs_f64(),
            );
        }
        clear(c, &root)?;
    }
    let count = env_number("RKUBELET_BENCH_CLAIM_PODS", 30);
    let names: Vec<String> = (0..count)
        .map(|i| format!("many-{}-{i:02}", kind.name()))
        .collect();
    let seen = pods(&names, Claims::WithThePods, Duration::from_secs(240))?;
    figures.many_running = Some((seen.all_running - seen.first_added).as_secs_f64());
    std::thread::sleep(Duration::from_secs(3));
    figures.rss_mib = running.pid().and_then(rss_kib).map(|k| k as f64 / 1024.0);
    clear(c, &root)?;
    drop(running);
    let _ = std::fs::copy(
        dir.path().join("rkubelet.log"),
        format!("/tmp/claims-{}.log", kind.name()),
    );
    Ok(figures)
}

fn main() {
    if let Some(missing) = Containerd::unavailable() {
        fail("claims", &missing);
    }
    let bins = upstream::kube_bins();
    for binary in [
        "kubelet",
        "hostpathplugin",
        "csi-node-driver-registrar",
        "csi-provisioner",
    ] {
        if !bins.join(binary).is_file() {
            fail(
                "claims",
                &format!(
                    "{binary} is needed in {} (../shared/peers/bin/{binary}.zst)",
                    bins.display()
                ),
            );
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail("claims", &format!("no tokio runtime: {e}")));
    let _lock = upstream::lock();
    let c = Cluster::start("claims");
    let objects = format!(
        "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {{name: {DRIVER}}}\nspec:\n  attachRequired: false\n  podInfoOnMount: true\n  fsGroupPolicy: File\n  volumeLifecycleModes: [Persistent]\n---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: csi-hostpath}}\nprovisioner: {DRIVER}\nvolumeBindingMode: Immediate\nreclaimPolicy: Delete\n"
    );
    c.apply(&objects);
    let up = measure(Kubelet::Upstream, &c, &bins, &rt)
        .unwrap_or_else(|e| fail("claims", &format!("the upstream kubelet's run: {e}")));
    let ours = measure(Kubelet::Rkubelet, &c, &bins, &rt)
        .unwrap_or_else(|e| fail("claims", &format!("rkubelet's run: {e}")));
    let secs = |v: Option<f64>| v.map_or("unavailable".into(), |v| format!("{v:.3} s"));
    let (o, u) = (
        median(&ours.created_to_running),
        median(&up.created_to_running),
    );
    let faster = match (o, u) {
        (Some(o), Some(u)) => format!("goal faster than upstream's: {}", verdict(o < u)),
        _ => "goal faster than upstream's: NOT MET, not measured".into(),
    };
    println!(
        "claims: a claim and its pod created at once to the pod Running (median): rkubelet {}, upstream {} ({faster})",
        secs(o),
        secs(u)
    );
    let bare = median(&ours.bare);
    let within = match (o, bare) {
        (Some(o), Some(b)) => format!("{:.1}x; goal within 1.2x: {}", o / b, verdict(o <= b * 1.2)),
        _ => "goal within 1.2x: NOT MET, not measured".into(),
    };
    println!(
        "claims: the driver's calls for one volume issued bare (CreateVolume, NodeStageVolume, NodePublishVolume, median): {}; rkubelet's pod above takes {within} (the API's provisioning and binding are in it)",
        secs(bare)
    );
    // The goal restated for what a kubelet controls (proposed in issue 33): a pod on a
    // bound claim, as a scheduler delivers it, created to Running, against the node's
    // driver calls and a pod's CRI calls issued bare. The API's round trips (the pod to
    // the kubelet, the claim and volume reads, the status back) are in ours, not in the
    // baseline.
    let own = median(&ours.on_bound_to_running);
    let bare_own = match (median(&ours.bare_node), median(&ours.bare_pod)) {
        (Some(n), Some(p)) => Some(n + p),
        _ => None,
    };
    // The goal is judged on the median of each run's own ratio (its pod against the
    // baselines measured just before it).
    let own_ratio = median(&ratios(
        &ours.on_bound_to_running,
        &ours.bare_node,
        &ours.bare_pod,
    ));
    let own_within = match own_ratio {
        Some(r) => format!(
            "{r:.2}x (median of each run's ratio); restated goal within 1.2x: {}",
            verdict(r <= 1.2)
        ),
        None => "restated goal within 1.2x: NOT MET, not measured".into(),
    };
    println!(
        "claims: a pod created on a claim already bound (as a scheduler delivers it) to Running, the kubelet's own part (median): rkubelet {}, upstream {}; bare NodeStageVolume + NodePublishVolume {} + bare CRI pod {} = {}; rkubelet takes {own_within}",
        secs(own),
        secs(median(&up.on_bound_to_running)),
        secs(median(&ours.bare_node)),
        secs(median(&ours.bare_pod)),
        secs(bare_own),
    );
    // What the runtime alone takes for the requests a kubelet sends (upstream's
    // hardening, DNS, the /etc/hosts and termination-message mounts) against the bare
    // pod's: the part of the gap that is the requests' and not the kubelet's.
    let bare_kubelet_own = match (median(&ours.bare_node), median(&ours.bare_kubelet_pod)) {
        (Some(n), Some(p)) => Some(n + p),
        _ => None,
    };
    let of_kubelet_requests = median(&ratios(
        &ours.on_bound_to_running,
        &ours.bare_node,
        &ours.bare_kubelet_pod,
    ))
    .map_or("unavailable".into(), |r| format!("{r:.2}x"));
    println!(
        "claims: the same pod's requests as rkubelet sends them, issued bare: {} + bare NodeStageVolume + NodePublishVolume = {}; rkubelet's pod on a bound claim takes {of_kubelet_requests} of it (no goal)",
        secs(median(&ours.bare_kubelet_pod)),
        secs(bare_kubelet_own),
    );
    // The same with the API calls a kubelet cannot leave out, issued bare: what is left
    // is the pod's arrival through the watch and the kubelet's own work.
    let with_api: Vec<f64> = ours
        .bare_kubelet_pod
        .iter()
        .zip(&ours.bare_api)
        .map(|(p, a)| p + a)
        .collect();
    let of_kubelet_calls = median(&ratios(
        &ours.on_bound_to_running,
        &ours.bare_node,
        &with_api,
    ))
    .map_or("unavailable".into(), |r| format!("{r:.2}x"));
    println!(
        "claims: the API calls a kubelet makes for that pod, issued bare as the node (GET claim, GET PersistentVolume, PATCH status): {}; with the bare requests and driver calls above: {}; rkubelet's pod on a bound claim takes {of_kubelet_calls} of it (no goal; the pod's arrival through the watch is not in the baseline)",
        secs(median(&ours.bare_api)),
        secs(
            median(&with_api)
                .zip(median(&ours.bare_node))
                .map(|(a, n)| a + n)
        ),
    );
    // Without a scheduler the pod comes first and each kubelet reads the claim again
    // until it is bound (every 0.1 s in both, as the node may get a claim, not watch it).
    println!(
        "claims: with claim and pod created at once, from the claim seen bound to the pod Running (median): rkubelet {}, upstream {} (no goal: the wait for the next read of the claim is in it)",
        secs(median(&ours.bound_to_running)),
        secs(median(&up.bound_to_running)),
    );
    let count = env_number("RKUBELET_BENCH_CLAIM_PODS", 30);
    println!(
        "claims: {count} claims and their pods created at once to all Running: rkubelet {}, upstream {} (no goal)",
        secs(ours.many_running),
        secs(up.many_running)
    );
    let mib = |v: Option<f64>| v.map_or("unavailable".into(), |v| format!("{v:.1} MiB"));
    println!(
        "claims: resident memory with {count} claim-backed pods, 3 s after all were Running: rkubelet {}, upstream {}",
        mib(ours.rss_mib),
        mib(up.rss_mib)
    );
}
