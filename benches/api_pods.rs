//! Pods from the API server (issue 12), rkubelet side by side with the upstream kubelet
//! v1.26.1 on one private control plane (scripts/test-env/cluster-up.sh) and a private
//! containerd each, one kubelet after the other. For each: a pod created in the API (bound
//! to the node; the moment a watch opened before its creation sees it) to its container
//! running in the runtime (polled every 20 ms) and to `Running` in the API (seen on that
//! watch), median of `RKUBELET_BENCH_SINGLE_RUNS` (3); `RKUBELET_BENCH_API_PODS` (100) pods
//! created at once (one create request each, all in flight together) to all `Running` in
//! the API, median of `RKUBELET_BENCH_API_ROUNDS` (3) rounds for rkubelet (the pods removed
//! between rounds), one round for upstream, whose figure is no goal; the API write requests
//! the node sent per pod started (audit log of the first round: creates, updates, patches
//! and deletes of pods and events); its resident memory with those pods. The baseline, on
//! the same containerd before the kubelet starts: the bare CRI calls (RunPodSandbox,
//! CreateContainer, StartContainer) for one pod, and for all of them at once (median of as
//! many rounds); printed beside it, no goal, the same pods' requests as rkubelet sends them
//! (built by the domain functions its sync uses), issued bare at once, one round. Goals: the latencies at most half of upstream's, all pods within 1.2x of
//! the bare calls, writes per pod no more than upstream's. Needs root, containerd, the
//! control plane and the upstream kubelet; fails, saying which is missing, without them.

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

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::requests::RequestContext;
use rkubelet::domain::kuberuntime::runtime::{ContainerFilter, ContainerState, SandboxFilter};
use rkubelet::ports::runtime::RuntimeService;

use cluster::Cluster;
use common::bare_cri::{BareCri, BareKubeletCri};
use common::{
    admin_client, at_most, env_number, fail, free_port, median, rss_kib, rss_parts, verdict,
};
use containerd::Containerd;
use upstream::RunningKubelet;

const CLUSTER_DNS_IP: &str = "10.0.0.10";
const CLUSTER_DNS: &str = "--cluster-dns=10.0.0.10";

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
    /// All pods at once to all Running, one figure per round.
    many_running: Vec<f64>,
    writes_per_pod: Option<f64>,
    rss_mib: Option<f64>,
    /// What that resident set is made of.
    rss_parts: String,
    /// The bare CRI calls on the same containerd: one pod (median), all pods at once.
    bare_single: Vec<f64>,
    bare_many: Vec<f64>,
    /// The requests rkubelet sends for those pods, issued bare at once, one per round.
    bare_kubelet_many: Vec<f64>,
}

fn pod_object(name: &str, node: &str, image: &str) -> Result<Pod, String> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "app",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "3600"],
            }],
        },
    }))
    .map_err(|e| format!("pod {name}: {e}"))
}

/// Creates the pods with one request each, all in flight together: "at once" (kubectl
/// creates a file's pods one after the other, which here spreads 30 pods over 0.3 s).
async fn create_pods(client: &kube::Client, pods: Vec<Pod>) -> Result<(), String> {
    let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "default");
    let mut set = tokio::task::JoinSet::new();
    for pod in pods {
        let api = api.clone();
        set.spawn(async move { api.create(&PostParams::default(), &pod).await });
    }
    while let Some(done) = set.join_next().await {
        done.map_err(|e| format!("a create's task: {e}"))?
            .map_err(|e| format!("creating a pod: {e}"))?;
    }
    Ok(())
}

/// The bench's own clients of the API server (admin).
struct Clients {
    kube: kube::Client,
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
    client: kube::Client,
    node: String,
    names: Vec<String>,
    within: Duration,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Result<Seen, String> {
    let api: kube::Api<Pod> = kube::Api::all(client);
    let selector = format!("spec.nodeName={node}");
    let list = api
        .list(&ListParams::default().fields(&selector))
        .await
        .map_err(|e| e.to_string())?;
    let version = list.metadata.resource_version.unwrap_or_default();
    let mut watch = api
        .watch(&WatchParams::default().fields(&selector), &version)
        .await
        .map_err(|e| e.to_string())?
        .boxed();
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
            Some(Ok(WatchEvent::Added(p) | WatchEvent::Modified(p))) => {
                let now = Instant::now();
                let Some(name) = p.metadata.name.clone() else {
                    continue;
                };
                added.entry(name.clone()).or_insert(now);
                if p.status.and_then(|s| s.phase).as_deref() == Some("Running") {
                    running.insert(name);
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

/// Creates the pods `names` through the API while watching: when they appeared in the API
/// and when all were Running there.
fn create_and_track(
    clients: &Clients,
    rt: &tokio::runtime::Runtime,
    node: &str,
    image: &str,
    names: &[String],
    within: Duration,
) -> Result<Seen, String> {
    let pods = names
        .iter()
        .map(|n| pod_object(n, node, image))
        .collect::<Result<Vec<_>, _>>()?;
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let tracker = rt.spawn(track(
        clients.kube.clone(),
        node.to_owned(),
        names.to_vec(),
        within,
        ready_tx,
    ));
    let opened = rt.block_on(ready_rx).is_ok();
    if opened {
        rt.block_on(create_pods(&clients.kube, pods))?;
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

/// Deletes every pod in the API at once (force, grace 0), without waiting for the kubelet.
fn delete_all_pods(c: &Cluster) -> std::process::Output {
    c.kubectl(&[
        "delete",
        "pods",
        "--all",
        "--force",
        "--grace-period=0",
        "--wait=false",
    ])
}

/// Removes the round's pods from the API and waits until the kubelet has removed their
/// sandboxes from the runtime, so the next round starts on an empty node.
fn clear_pods(c: &Cluster, rt: &tokio::runtime::Runtime, cri: &CriRuntime) -> Result<(), String> {
    let out = delete_all_pods(c);
    if !out.status.success() {
        return Err(format!(
            "kubectl delete pods: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = rt
            .block_on(cri.list_pod_sandboxes(&SandboxFilter::default()))
            .map_err(|e| format!("listing the sandboxes: {e}"))?
            .len();
        if left == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{left} sandboxes left 120 s after the pods' deletion"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn measure(
    kind: Kubelet,
    c: &Cluster,
    bins: Option<&std::path::Path>,
    rt: &tokio::runtime::Runtime,
    clients: &Clients,
) -> Result<Figures, String> {
    let node = format!("apipods-{}", kind.name());
    let ctrd = Containerd::try_start(&format!("apipods{}", kind.name()))?;
    let _context = rt.enter();
    let cri = CriRuntime::connect(&ctrd.var("CRI_ENDPOINT"), Duration::from_secs(30))
        .map_err(|e| format!("CRI client: {e}"))?;
    let image = ctrd.var("BUSYBOX_IMAGE");
    let dir = mounts::TempRoot::new().map_err(|e| format!("temp dir: {e}"))?;
    let mut figures = Figures::default();
    let count = env_number("RKUBELET_BENCH_API_PODS", 100);
    // Upstream's figure for all pods is printed beside ours, not a goal: one round (and
    // one of the bare calls) saves half a minute.
    let rounds = match kind {
        Kubelet::Rkubelet => env_number("RKUBELET_BENCH_API_ROUNDS", 3).max(1),
        Kubelet::Upstream => 1,
    };
    let bare = BareCri {
        cri: cri.clone(),
        busybox: image.clone(),
        logs: PathBuf::from(ctrd.var("RKUBELET_POD_LOG_ROOT")),
    };
    let mut requests = RequestContext::under_root(&dir.path().join("bare-root"));
    requests.pod_logs_dir = PathBuf::from(ctrd.var("RKUBELET_POD_LOG_ROOT"));
    requests.cluster_dns = vec![CLUSTER_DNS_IP.to_owned()];
    let bare_kubelet = BareKubeletCri {
        cri: cri.clone(),
        busybox: image.clone(),
        requests,
    };
    rt.block_on(async {
        bare.run(999).await?; // warms containerd up as the kubelets' first pods do
        for i in 0..env_number("RKUBELET_BENCH_SINGLE_RUNS", 3) {
            figures.bare_single.push(bare.run(i).await?.as_secs_f64());
        }
        for _ in 0..rounds {
            figures
                .bare_many
                .push(bare.concurrent(count).await?.as_secs_f64());
        }
        // One round: the figure has no goal, and CI's time is short.
        if kind == Kubelet::Rkubelet {
            let t = bare_kubelet.concurrent(count).await?;
            figures.bare_kubelet_many.push(t.as_secs_f64());
        }
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
            let child = Command::new(common::rkubelet_bin())
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
            RunningKubelet::Rkubelet(child)
        }
        Kubelet::Upstream => {
            let bins = bins.ok_or("no upstream binaries")?;
            let extra = [
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--healthz-port={healthz_port}"),
                CLUSTER_DNS.into(),
            ];
            RunningKubelet::Upstream(upstream::UpstreamKubelet::start(
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
        let seen = create_and_track(
            clients,
            rt,
            &node,
            &image,
            std::slice::from_ref(&name),
            within,
        )?;
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
    for round in 0..rounds {
        if round > 0 {
            clear_pods(c, rt, &cri)?;
        }
        let names: Vec<String> = (0..count)
            .map(|i| format!("many-{}-{round}-{i:03}", kind.name()))
            .collect();
        let audit_before = c.audit_events().len();
        let seen = create_and_track(clients, rt, &node, &image, &names, Duration::from_secs(180))?;
        let first = seen.first_added().ok_or("no pod seen on the watch")?;
        figures
            .many_running
            .push((seen.all_running - first).as_secs_f64());
        if round == 0 {
            std::thread::sleep(Duration::from_secs(3));
            figures.rss_mib = running.pid().and_then(rss_kib).map(|k| k as f64 / 1024.0);
            figures.rss_parts = running.pid().map(rss_parts).unwrap_or_default();
            figures.writes_per_pod =
                Some(node_writes(c, &node, audit_before) as f64 / count as f64);
        }
    }
    // Remove the pods from the API before the kubelet goes, so nothing waits on it.
    let _ = delete_all_pods(c);
    drop(running);
    Ok(figures)
}

async fn admin_clients(kubeconfig: &std::path::Path) -> Result<Clients, String> {
    Ok(Clients {
        kube: admin_client(kubeconfig).await?,
    })
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
    let clients = rt
        .block_on(admin_clients(&c.admin_kubeconfig()))
        .unwrap_or_else(|e| fail("api_pods", &format!("admin client: {e}")));
    // An A/B of two rkubelet builds (by hand) needs rkubelet's half alone; upstream's
    // figures then print as unavailable and their goals as not measured.
    let up = if env_number("RKUBELET_BENCH_API_UPSTREAM", 1) == 0 {
        Figures::default()
    } else {
        measure(Kubelet::Upstream, &c, Some(&bins), &rt, &clients)
            .unwrap_or_else(|e| fail("api_pods", &format!("the upstream kubelet's run: {e}")))
    };
    let ours = measure(Kubelet::Rkubelet, &c, None, &rt, &clients)
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
    let (o, b) = (median(&ours.many_running), median(&ours.bare_many));
    let within_bare = match (o, b) {
        (Some(o), Some(b)) => at_most(o, b * 1.2, " s (1.2x the bare CRI calls)"),
        _ => "goal within 1.2x of the bare CRI calls: NOT MET, not measured".into(),
    };
    let rounds = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "api pods: {count} pods created at once to all Running in the API (median of rounds): rkubelet {} ({} s), upstream {}, the bare CRI calls for {count} pods at once {} ({} s) ({within_bare})",
        secs(o),
        rounds(&ours.many_running),
        secs(median(&up.many_running)),
        secs(b),
        rounds(&ours.bare_many)
    );
    let k = median(&ours.bare_kubelet_many);
    let ratio = match (o, k) {
        (Some(o), Some(k)) if k > 0.0 => format!("{:.2}x", o / k),
        _ => "unavailable".into(),
    };
    println!(
        "api pods: the same {count} pods' requests as rkubelet sends them (upstream's sandbox security context, DNS, /etc/hosts and termination-message mounts, PodSandboxStatus), issued bare at once: {} ({} s); rkubelet takes {ratio} of it",
        secs(k),
        rounds(&ours.bare_kubelet_many)
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
        "api pods: resident memory with {count} API pods, 3 s after all were Running: rkubelet {} ({}), upstream {} ({})",
        mib(ours.rss_mib),
        ours.rss_parts,
        mib(up.rss_mib),
        up.rss_parts
    );
}
