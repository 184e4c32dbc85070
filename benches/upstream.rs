//! rkubelet side by side with the upstream kubelet v1.26.1, on one private control plane
//! (scripts/test-env/cluster-up.sh) and a private containerd each (the same scripts, so the
//! same images and settings). Each kubelet, connected with its own node identity, is started
//! with the same 30 static pods, one after the other (never two at once), and measured:
//! start to `/healthz` answering, to its Node created, to its Node Ready (both seen on a
//! watch of the API), to the 30 pods' containers running (the runtime polled every 100 ms),
//! then over `RKUBELET_BENCH_IDLE_SECS` (default 60) of idling its resident memory, its CPU
//! time and the API requests it sends (the API server's audit log). Every figure is printed
//! for both with the ratio, and with issue 11's goals where it sets one. Needs root,
//! containerd, the control plane and the upstream kubelet; fails, saying which is missing,
//! without them.

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

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::runtime::{ContainerFilter, ContainerState};
use rkubelet::ports::runtime::RuntimeService;
use serde_json::Value;

use cluster::Cluster;
use common::{at_most, below, cpu_secs, fail, free_port, rss_kib, rss_parts, verdict};
use containerd::Containerd;

const PODS: usize = 30;
const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// A cluster DNS address, as every cluster node has: without one upstream writes a
/// `MissingClusterDNS` event at every sync of every pod, which is not an idle node's traffic.
const CLUSTER_DNS: &str = "--cluster-dns=10.0.0.10";

fn idle_secs() -> u64 {
    std::env::var("RKUBELET_BENCH_IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60)
}

#[derive(Clone, Copy, PartialEq)]
enum Kubelet {
    Rkubelet,
    Upstream,
}

impl Kubelet {
    fn name(self) -> &'static str {
        match self {
            Kubelet::Rkubelet => "rkubelet",
            Kubelet::Upstream => "upstream",
        }
    }
}

/// What one kubelet's run measured; `None` where it never got there.
#[derive(Default)]
struct Figures {
    healthz: Option<Duration>,
    registered: Option<Duration>,
    ready: Option<Duration>,
    pods_running: Option<Duration>,
    rss_mib: Option<f64>,
    /// Its anonymous and file-backed parts (`rss_parts`).
    rss_parts: String,
    idle_cpu_secs: Option<f64>,
    requests_per_minute: Option<f64>,
    /// The most frequent idle requests, `verb resource[/subresource]` and their count.
    top_requests: Vec<(String, usize)>,
}

/// A watch on one Node through the admin's kubectl (`get --raw` streams the events):
/// each event's arrival time and object.
struct NodeWatch {
    child: Child,
    events: mpsc::Receiver<(Instant, Value)>,
}

impl NodeWatch {
    fn start(c: &Cluster, node: &str) -> Result<NodeWatch, String> {
        let mut child = Command::new(c.var("KUBECTL"))
            .env("KUBECONFIG", c.admin_kubeconfig())
            .args([
                "get",
                "--raw",
                &format!("/api/v1/nodes?watch=true&fieldSelector=metadata.name%3D{node}"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("kubectl watch: {e}"))?;
        let stdout = child.stdout.take().ok_or("kubectl watch: no stdout")?;
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send((Instant::now(), event["object"].clone())).is_err() {
                    break;
                }
            }
        });
        Ok(NodeWatch { child, events })
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn node_ready(node: &Value) -> bool {
    node["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn healthz_ok(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(
        s,
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

/// The 30 static pods both kubelets run: busybox sleeping, as in the pods benchmark.
fn write_manifests(dir: &Path, image: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for i in 0..PODS {
        let text = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: side{i:03}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - name: main\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n"
        );
        let path = dir.join(format!("side{i:03}.yaml"));
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// How many of the static pods have a running container.
fn running_pods(rt: &tokio::runtime::Runtime, cri: &CriRuntime) -> usize {
    let filter = ContainerFilter {
        state: Some(ContainerState::Running),
        ..Default::default()
    };
    rt.block_on(cri.list_containers(&filter))
        .map(|cs| {
            cs.iter()
                .filter(|c| {
                    c.labels
                        .get(POD_NAME_LABEL)
                        .is_some_and(|n| n.starts_with("side"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// A running kubelet of either kind; stopped (its pods left to the containerd teardown) on
/// drop (upstream's guard stops it and removes what it left on the host).
enum Running {
    Rkubelet(Child),
    Upstream {
        _guard: upstream::UpstreamKubelet,
        pid: u32,
    },
}

impl Running {
    fn pid(&self) -> u32 {
        match self {
            Running::Rkubelet(child) => child.id(),
            Running::Upstream { pid, .. } => *pid,
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
) -> Result<Figures, String> {
    let node = format!("side-{}", kind.name());
    let ctrd = Containerd::try_start(&format!("side{}", kind.name()))?;
    // The CRI client's connection task needs the runtime's reactor.
    let _context = rt.enter();
    let cri = CriRuntime::connect(&ctrd.var("CRI_ENDPOINT"), Duration::from_secs(30))
        .map_err(|e| format!("CRI client: {e}"))?;
    let dir = mounts::TempRoot::new().map_err(|e| format!("temp dir: {e}"))?;
    let manifests = dir.path().join("manifests");
    write_manifests(&manifests, &ctrd.var("BUSYBOX_IMAGE"))?;
    let kubeconfig = c.node_kubeconfig(&node, 30);
    let healthz_port = free_port();
    let watch = NodeWatch::start(c, &node)?;
    let mut figures = Figures::default();

    let t0 = Instant::now();
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
                    format!("--pod-manifest-path={}", manifests.display()),
                    format!("--root-dir={}", root.display()),
                    format!("--cert-dir={}", dir.path().join("pki").display()),
                    format!("--port={}", free_port()),
                    format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
                    format!("--pod-infra-container-image={}", ctrd.var("PAUSE_IMAGE")),
                    format!("--hostname-override={node}"),
                    format!("--healthz-port={healthz_port}"),
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
            let kdir = dir.path().join("upstream");
            let extra = [
                format!("--kubeconfig={}", kubeconfig.display()),
                // pflag keeps the last value: this overrides the peer's own port.
                format!("--healthz-port={healthz_port}"),
                CLUSTER_DNS.into(),
            ];
            let kubelet = upstream::UpstreamKubelet::start(
                bins,
                &ctrd,
                &upstream::UpstreamArgs {
                    dir: &kdir,
                    node: &node,
                    manifests: Some(&manifests),
                    url: None,
                    extra: &extra,
                },
            );
            let pid = kubelet.pid().ok_or("the upstream kubelet exited at once")?;
            Running::Upstream {
                _guard: kubelet,
                pid,
            }
        }
    };

    let deadline = t0 + Duration::from_secs(120);
    let mut last_pod_poll = Instant::now() - Duration::from_secs(1);
    while Instant::now() < deadline
        && (figures.healthz.is_none()
            || figures.registered.is_none()
            || figures.ready.is_none()
            || figures.pods_running.is_none())
    {
        if figures.healthz.is_none() && healthz_ok(healthz_port) {
            figures.healthz = Some(t0.elapsed());
        }
        while let Ok((at, object)) = watch.events.try_recv() {
            figures.registered.get_or_insert(at - t0);
            if figures.ready.is_none() && node_ready(&object) {
                figures.ready = Some(at - t0);
            }
        }
        if figures.pods_running.is_none() && last_pod_poll.elapsed() >= Duration::from_millis(100) {
            last_pod_poll = Instant::now();
            if running_pods(rt, &cri) >= PODS {
                figures.pods_running = Some(t0.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(watch);

    let idle = idle_secs();
    let window_start = SystemTime::now();
    let cpu_before = cpu_secs(running.pid());
    std::thread::sleep(Duration::from_secs(idle));
    figures.idle_cpu_secs = cpu_before.zip(cpu_secs(running.pid())).map(|(a, b)| b - a);
    figures.rss_mib = rss_kib(running.pid()).map(|kib| kib as f64 / 1024.0);
    figures.rss_parts = rss_parts(running.pid());
    let since = window_start
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let user = format!("system:node:{node}");
    let idle_requests: Vec<Value> = c
        .audit_events()
        .into_iter()
        .filter(|e| e["user"]["username"] == user.as_str())
        .filter(|e| {
            e["stageTimestamp"]
                .as_str()
                .and_then(rkubelet::domain::units::time::parse_rfc3339)
                .is_some_and(|t| t as f64 / 1e9 >= since)
        })
        .collect();
    figures.requests_per_minute = Some(idle_requests.len() as f64 / (idle as f64 / 60.0));
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for e in &idle_requests {
        let r = &e["objectRef"];
        let sub = r["subresource"]
            .as_str()
            .map_or(String::new(), |s| format!("/{s}"));
        let kind = format!(
            "{} {}{sub} ({})",
            e["verb"].as_str().unwrap_or("?"),
            r["resource"].as_str().unwrap_or("?"),
            e["responseStatus"]["code"]
        );
        *kinds.entry(kind).or_default() += 1;
    }
    let mut kinds: Vec<(String, usize)> = kinds.into_iter().collect();
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
    kinds.truncate(4);
    figures.top_requests = kinds;
    drop(running);
    drop(ctrd);
    Ok(figures)
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("never".into(), |d| format!("{:.3} s", d.as_secs_f64()))
}

/// rkubelet's figure over upstream's, when both exist.
fn ratio(ours: Option<f64>, theirs: Option<f64>) -> String {
    match ours.zip(theirs) {
        Some((o, t)) if t > 0.0 => format!("{:.2}x upstream", o / t),
        _ => "no ratio".into(),
    }
}

fn print_time(what: &str, ours: Option<Duration>, theirs: Option<Duration>, half_goal: bool) {
    let (o, t) = (
        ours.map(|d| d.as_secs_f64()),
        theirs.map(|d| d.as_secs_f64()),
    );
    let goal = match (half_goal, o.zip(t)) {
        (false, _) => String::new(),
        (true, Some((o, t))) => format!(
            "; goal at most half of upstream's: {}",
            verdict(o <= t / 2.0)
        ),
        (true, None) => "; goal at most half of upstream's: NOT MET, not measured".into(),
    };
    println!(
        "side by side: start to {what}: rkubelet {}, upstream {} ({}{goal})",
        secs(ours),
        secs(theirs),
        ratio(o, t)
    );
}

fn main() {
    if let Some(missing) = Containerd::unavailable() {
        fail("upstream", &missing);
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => fail("upstream", &format!("no tokio runtime: {e}")),
    };
    let bins = upstream::kube_bins();
    let _lock = upstream::lock();
    let c = Cluster::start("side");
    let upstream = measure(Kubelet::Upstream, &c, Some(&bins), &rt)
        .unwrap_or_else(|e| fail("upstream", &format!("the upstream kubelet's run: {e}")));
    let ours = measure(Kubelet::Rkubelet, &c, None, &rt)
        .unwrap_or_else(|e| fail("upstream", &format!("rkubelet's run: {e}")));
    let idle = idle_secs();

    print_time("/healthz answering", ours.healthz, upstream.healthz, false);
    print_time(
        "Node registered",
        ours.registered,
        upstream.registered,
        true,
    );
    print_time("Node Ready", ours.ready, upstream.ready, true);
    // No goal of its own here: the pods benchmark holds the 30-pod goal.
    print_time(
        &format!("{PODS} static pods running"),
        ours.pods_running,
        upstream.pods_running,
        false,
    );
    let mib = |v: Option<f64>| v.map_or("unavailable".into(), |v| format!("{v:.1} MiB"));
    println!(
        "side by side: resident memory connected with {PODS} pods after {idle} s idle: rkubelet {} ({}), upstream {} ({}; {})",
        mib(ours.rss_mib),
        ours.rss_parts,
        mib(upstream.rss_mib),
        ratio(ours.rss_mib, upstream.rss_mib),
        ours.rss_mib
            .map_or("goal < 16 MiB: NOT MET, not measured".into(), |v| below(v, 16.0, " MiB"))
    );
    let cpu = |v: Option<f64>| v.map_or("unavailable".into(), |v| format!("{v:.2} s"));
    println!(
        "side by side: CPU time over {idle} s idle with {PODS} pods: rkubelet {}, upstream {} ({})",
        cpu(ours.idle_cpu_secs),
        cpu(upstream.idle_cpu_secs),
        ratio(ours.idle_cpu_secs, upstream.idle_cpu_secs)
    );
    let goal = match (ours.requests_per_minute, upstream.requests_per_minute) {
        (Some(o), Some(t)) => at_most(o, t, " a minute (upstream's)"),
        _ => "goal no more than upstream's: NOT MET, not measured".into(),
    };
    let per_min = |v: Option<f64>| v.map_or("unavailable".into(), |v| format!("{v:.1}"));
    println!(
        "side by side: API requests a minute of an idle node: rkubelet {}, upstream {} ({goal})",
        per_min(ours.requests_per_minute),
        per_min(upstream.requests_per_minute)
    );
    let top = |f: &Figures| {
        f.top_requests
            .iter()
            .map(|(kind, n)| format!("{kind} x{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("side by side:   rkubelet's idle requests: {}", top(&ours));
    println!(
        "side by side:   upstream's idle requests: {}",
        top(&upstream)
    );
}
