//! Pods from the API server (issue 12), rkubelet side by side with the upstream kubelet
//! v1.26.1 on one private control plane (scripts/test-env/cluster-up.sh) and a private
//! containerd each, one kubelet after the other. For each: a pod created in the API (bound
//! to the node; the moment a watch opened before `kubectl apply` sees it) to its container
//! running in the runtime (polled every 20 ms) and to `Running` in the API (seen on that
//! watch), median of `RKUBELET_BENCH_SINGLE_RUNS` (3); `RKUBELET_BENCH_API_PODS` (100) pods
//! created at once to all `Running` in the API; the API write requests the node sent per
//! pod started (audit log: creates, updates, patches and deletes of pods and events); its
//! resident memory with those pods. The baseline, on the same containerd before the
//! kubelet starts: the bare CRI calls (RunPodSandbox, CreateContainer, StartContainer) for
//! one pod and for all of them at once. Goals: the latencies at most half of upstream's,
//! all pods within 1.2x of the bare calls, writes per pod no more than upstream's. Needs
//! root, containerd, the control plane and the upstream kubelet; fails, saying which is
//! missing, without them.

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
#[path = "../tests/common/upstream.rs"]
mod upstream;

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rkubelet::adapters::apiserver::KubeConnector;
use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::runtime::{ContainerFilter, ContainerState};
use rkubelet::ports::api::{ApiConnector, PodApi, PodWatchEvent};
use rkubelet::ports::runtime::RuntimeService;

use cluster::Cluster;
use common::bare_cri::BareCri;
use common::{at_most, fail, free_port, rss_kib, verdict};
use containerd::Containerd;

const BIN: &str = env!("CARGO_BIN_EXE_rkubelet");
const CLUSTER_DNS: &str = "--cluster-dns=10.0.0.10";

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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
    to_started: Vec<f64>,
    to_running: Vec<f64>,
    many_running: Option<f64>,
    writes_per_pod: Option<f64>,
    rss_mib: Option<f64>,
    /// The bare CRI calls on the same containerd: one pod (median), all pods at once.
    bare_single: Vec<f64>,
    bare_many: Option<f64>,
}

fn pod_yaml(name: &str, node: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 0\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n"
    )
}

fn kubectl_apply(c: &Cluster, dir: &Path, name: &str, yaml: &str) -> Result<(), String> {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).map_err(|e| format!("manifest: {e}"))?;
    let out = c.kubectl(&["apply", "-f", &file.display().to_string()]);
    if !out.status.success() {
        return Err(format!(
            "kubectl apply: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// When each pod in `names` appeared on the watch (created in the API), and when the
/// last of them was `Running` there.
struct Seen {
    added: BTreeMap<String, Instant>,
    all_running: Instant,
}

impl Seen {
    /// The earliest creation seen.
    fn first_added(&self) -> Option<Instant> {
        self.added.values().min().copied()
    }
}

/// Watches the node's pods from before they are created: tells `ready` once the watch
/// is open, then records when each of `names` is added and when all are Running.
async fn track(
    api: Arc<dyn PodApi>,
    node: String,
    names: Vec<String>,
    within: Duration,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Result<Seen, String> {
    let selector = format!("spec.nodeName={node}");
    let list = api.list_pods(&selector).await.map_err(|e| e.to_string())?;
    let mut watch = api
        .watch_pods(&selector, &list.resource_version)
        .await
        .map_err(|e| e.to_string())?;
    let _ = ready.send(());
    let mut added = BTreeMap::new();
    let mut running = BTreeSet::new();
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = tokio::time::timeout(left, watch.next())
            .await
            .map_err(|_| format!("not all Running within {within:?}"))?;
        match event {
            Some(Ok(PodWatchEvent::Added(p) | PodWatchEvent::Modified(p))) => {
                let now = Instant::now();
                let Some(name) = p["metadata"]["name"].as_str() else {
                    continue;
                };
                added.entry(name.to_owned()).or_insert(now);
                if p["status"]["phase"] == "Running" {
                    running.insert(name.to_owned());
                }
                if names.iter().all(|n| running.contains(n)) {
                    return Ok(Seen {
                        added,
                        all_running: now,
                    });
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("the watch ended".into()),
        }
    }
}

/// Polls the runtime until a running container belongs to the pod `name`.
async fn wait_started(cri: CriRuntime, name: String, within: Duration) -> Result<Instant, String> {
    let deadline = Instant::now() + within;
    let mut filter = ContainerFilter::default();
    filter
        .labels
        .insert("io.kubernetes.pod.name".into(), name.clone());
    filter.state = Some(ContainerState::Running);
    while Instant::now() < deadline {
        if cri
            .list_containers(&filter)
            .await
            .is_ok_and(|c| !c.is_empty())
        {
            return Ok(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!(
        "pod {name}'s container not running within {within:?}"
    ))
}

/// Creates `yaml` (the pods `names`) with kubectl while watching: when they appeared in
/// the API and when all were Running there.
#[allow(clippy::too_many_arguments)]
fn create_and_track(
    c: &Cluster,
    dir: &Path,
    rt: &tokio::runtime::Runtime,
    api: &Arc<dyn PodApi>,
    node: &str,
    file_name: &str,
    names: &[String],
    yaml: &str,
    within: Duration,
) -> Result<Seen, String> {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let tracker = rt.spawn(track(
        api.clone(),
        node.to_owned(),
        names.to_vec(),
        within,
        ready_tx,
    ));
    let opened = rt.block_on(ready_rx).is_ok();
    if opened {
        kubectl_apply(c, dir, file_name, yaml)?;
    }
    rt.block_on(tracker)
        .map_err(|e| format!("the watch's task: {e}"))?
}

/// The node's write requests on pods and events in the audit log, after `from` (the
/// count of audit lines before the run).
fn node_writes(c: &Cluster, node: &str, from: usize) -> usize {
    let user = format!("system:node:{node}");
    c.audit_events()
        .iter()
        .skip(from)
        .filter(|e| e["user"]["username"] == user)
        .filter(|e| {
            ["create", "update", "patch", "delete"].contains(&e["verb"].as_str().unwrap_or(""))
        })
        .filter(|e| ["pods", "events"].contains(&e["objectRef"]["resource"].as_str().unwrap_or("")))
        .count()
}

enum Running {
    Rkubelet(Child),
    Upstream(upstream::UpstreamKubelet),
}

impl Running {
    fn pid(&self) -> Option<u32> {
        match self {
            Running::Rkubelet(c) => Some(c.id()),
            Running::Upstream(u) => u.pid(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Rkubelet(child) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn measure(
    kind: Kubelet,
    c: &Cluster,
    bins: Option<&Path>,
    rt: &tokio::runtime::Runtime,
    api: &Arc<dyn PodApi>,
) -> Result<Figures, String> {
    let node = format!("apipods-{}", kind.name());
    let ctrd = Containerd::try_start(&format!("apipods{}", kind.name()))?;
    let _context = rt.enter();
    let cri = CriRuntime::connect(&ctrd.var("CRI_ENDPOINT"), Duration::from_secs(30))
        .map_err(|e| format!("CRI client: {e}"))?;
    let image = ctrd.var("BUSYBOX_IMAGE");
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let mut figures = Figures::default();
    let count = env_number("RKUBELET_BENCH_API_PODS", 100);
    let bare = BareCri {
        cri: cri.clone(),
        busybox: image.clone(),
        logs: PathBuf::from(ctrd.var("RKUBELET_POD_LOG_ROOT")),
    };
    rt.block_on(async {
        bare.run(999).await?; // warms containerd up as the kubelets' first pods do
        for i in 0..env_number("RKUBELET_BENCH_SINGLE_RUNS", 3) {
            figures.bare_single.push(bare.run(i).await?.as_secs_f64());
        }
        figures.bare_many = Some(bare.concurrent(count).await?.as_secs_f64());
        Ok::<(), String>(())
    })?;
    let kubeconfig = c.node_kubeconfig(&node, 30);
    let healthz_port = free_port();
    let running = match kind {
        Kubelet::Rkubelet => {
            let root = dir.path().join("root");
            std::fs::create_dir_all(&root).map_err(|e| format!("root dir: {e}"))?;
            let log = File::create(dir.path().join("rkubelet.log"))
                .map_err(|e| format!("log file: {e}"))?;
            let child = Command::new(BIN)
                .args([
                    format!("--kubeconfig={}", kubeconfig.display()),
                    format!("--container-runtime-endpoint={}", ctrd.var("CRI_ENDPOINT")),
                    format!("--root-dir={}", root.display()),
                    format!("--cert-dir={}", dir.path().join("pki").display()),
                    format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
                    format!("--pod-infra-container-image={}", ctrd.var("PAUSE_IMAGE")),
                    format!("--hostname-override={node}"),
                    format!("--healthz-port={healthz_port}"),
                    format!("--port={}", free_port()),
                    "--fail-swap-on=false".into(),
                    "--eviction-hard=".into(),
                    CLUSTER_DNS.into(),
                ])
                .env_remove("NOTIFY_SOCKET")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("rkubelet does not start: {e}"))?;
            Running::Rkubelet(child)
        }
        Kubelet::Upstream => {
            let bins = bins.ok_or("no upstream binaries")?;
            let extra = [
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--healthz-port={healthz_port}"),
                CLUSTER_DNS.into(),
            ];
            Running::Upstream(upstream::UpstreamKubelet::start(
                bins,
                &ctrd,
                &upstream::UpstreamArgs {
                    dir: &dir.path().join("upstream"),
                    node: &node,
                    manifests: None,
                    url: None,
                    extra: &extra,
                },
            ))
        }
    };
    // Ready: the node is registered and its API pod source listing.
    let ready_by = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = c.get_json(&["node", &node]).is_some_and(|n| {
            n["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        });
        if ready {
            break;
        }
        if Instant::now() > ready_by {
            return Err(format!("node {node} not Ready within 60 s"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    for i in 0..env_number("RKUBELET_BENCH_SINGLE_RUNS", 3) {
        let name = format!("single-{}-{i}", kind.name());
        let within = Duration::from_secs(30);
        let started = rt.spawn(wait_started(cri.clone(), name.clone(), within));
        let names = [name.clone()];
        let yaml = pod_yaml(&name, &node, &image);
        let seen = create_and_track(c, dir.path(), rt, api, &node, &name, &names, &yaml, within)?;
        let started = rt
            .block_on(started)
            .map_err(|e| format!("the runtime poll's task: {e}"))??;
        let created = seen
            .first_added()
            .ok_or_else(|| format!("pod {name} never seen on the watch"))?;
        figures.to_started.push((started - created).as_secs_f64());
        figures
            .to_running
            .push((seen.all_running - created).as_secs_f64());
    }
    let names: Vec<String> = (0..count)
        .map(|i| format!("many-{}-{i:03}", kind.name()))
        .collect();
    let list: String = names
        .iter()
        .map(|n| format!("---\n{}", pod_yaml(n, &node, &image)))
        .collect();
    let audit_before = c.audit_events().len();
    let seen = create_and_track(
        c,
        dir.path(),
        rt,
        api,
        &node,
        "many",
        &names,
        &list,
        Duration::from_secs(180),
    )?;
    figures.many_running = seen
        .first_added()
        .map(|first| (seen.all_running - first).as_secs_f64());
    std::thread::sleep(Duration::from_secs(3));
    figures.rss_mib = running.pid().and_then(rss_kib).map(|k| k as f64 / 1024.0);
    figures.writes_per_pod = Some(node_writes(c, &node, audit_before) as f64 / count as f64);
    // Remove the pods from the API before the kubelet goes, so nothing waits on it.
    let _ = c.kubectl(&[
        "delete",
        "pods",
        "--all",
        "--force",
        "--grace-period=0",
        "--wait=false",
    ]);
    drop(running);
    Ok(figures)
}

fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn main() {
    if let Some(missing) = Containerd::unavailable() {
        fail("api_pods", &missing);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => fail("api_pods", &format!("no tokio runtime: {e}")),
    };
    let bins = upstream::kube_bins();
    let _lock = upstream::lock();
    let c = Cluster::start("apipods");
    let api = rt
        .block_on(KubeConnector::default().connect(&c.admin_kubeconfig()))
        .unwrap_or_else(|e| fail("api_pods", &format!("admin client: {e}")))
        .pods;
    let up = measure(Kubelet::Upstream, &c, Some(&bins), &rt, &api)
        .unwrap_or_else(|e| fail("api_pods", &format!("the upstream kubelet's run: {e}")));
    let ours = measure(Kubelet::Rkubelet, &c, None, &rt, &api)
        .unwrap_or_else(|e| fail("api_pods", &format!("rkubelet's run: {e}")));
    let secs = |v: Option<f64>| v.map_or("unavailable".into(), |v| format!("{v:.3} s"));
    let half = |o: Option<f64>, u: Option<f64>| match (o, u) {
        (Some(o), Some(u)) => at_most(o, u / 2.0, " s (half of upstream's)"),
        _ => "goal at most half of upstream's: NOT MET, not measured".into(),
    };
    let (o, u) = (median(&ours.to_started), median(&up.to_started));
    println!(
        "api pods: created in the API to container started (median): rkubelet {}, upstream {} ({}); the bare CRI calls alone on the same containerd: {}",
        secs(o),
        secs(u),
        half(o, u),
        secs(median(&ours.bare_single))
    );
    let (o, u) = (median(&ours.to_running), median(&up.to_running));
    println!(
        "api pods: created in the API to Running in the API (median): rkubelet {}, upstream {} ({})",
        secs(o),
        secs(u),
        half(o, u)
    );
    let count = env_number("RKUBELET_BENCH_API_PODS", 100);
    let within_bare = match (ours.many_running, ours.bare_many) {
        (Some(o), Some(b)) => at_most(o, b * 1.2, " s (1.2x the bare CRI calls)"),
        _ => "goal within 1.2x of the bare CRI calls: NOT MET, not measured".into(),
    };
    println!(
        "api pods: {count} pods created at once to all Running in the API: rkubelet {}, upstream {}, the bare CRI calls for {count} pods at once {} ({within_bare})",
        secs(ours.many_running),
        secs(up.many_running),
        secs(ours.bare_many)
    );
    let writes = match (ours.writes_per_pod, up.writes_per_pod) {
        (Some(o), Some(u)) => format!(
            "rkubelet {o:.2}, upstream {u:.2} (goal no more than upstream's: {})",
            verdict(o <= u)
        ),
        _ => "unavailable (goal no more than upstream's: NOT MET, not measured)".into(),
    };
    println!("api pods: API write requests per pod started (pods and events): {writes}");
    let mib = |v: Option<f64>| v.map_or("unavailable".into(), |v| format!("{v:.1} MiB"));
    println!(
        "api pods: resident memory with {count} API pods: rkubelet {}, upstream {}",
        mib(ours.rss_mib),
        mib(up.rss_mib)
    );
}
