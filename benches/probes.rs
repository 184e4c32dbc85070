//! Probe cost on a private containerd: N static pods (default 100), each with an exec
//! readiness probe (`true` in the container) and an HTTP liveness probe every second,
//! the HTTP probes answered by a server in this bench on 127.0.0.1 (`httpGet.host`), so
//! the time each probe arrives is known. Figures, each with its goal:
//! - rkubelet's CPU time over T seconds (default 60) with those 2N probes a second;
//! - the same for the upstream kubelet v1.26.1 on the same pods (it takes them over,
//!   as in a live swap); goal: rkubelet's CPU per probe delivered at most half of
//!   upstream's (each exec probe appends a byte to a file of the bench, so both kinds are
//!   counted: a kubelet that falls behind spends less CPU on fewer probes);
//! - the delay of each HTTP probe behind its schedule (the first probe of each pod plus
//!   whole periods): p50, p99, max, beside the exec probes (whose runc processes keep
//!   both cores busy: the delay is mostly the wait for a core), then on new pods with the
//!   HTTP probes alone, where it is the delay rkubelet adds: goal p99 under 10 ms.
//!
//! `RKUBELET_BENCH_PROBE_PODS` and `RKUBELET_BENCH_PROBE_SECS` shorten the run. Needs
//! root, containerd and the upstream binaries; fails, saying which is missing, without.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::runtime::{ContainerFilter, ContainerState};
use rkubelet::ports::runtime::RuntimeService;

#[allow(dead_code)] // shared with the tests, which use more of it
#[path = "../tests/common/containerd.rs"]
mod containerd;
#[path = "../tests/common/env_file.rs"]
mod env_file;
#[allow(dead_code)] // shared with the tests, which use more of it
#[path = "../tests/common/mounts.rs"]
mod mounts;
#[allow(dead_code)]
#[path = "../tests/common/upstream.rs"]
mod upstream;

use common::{at_most, below, cpu_secs, env_number, fail};
use containerd::Containerd;

mod common;

const NODE: &str = "probebench";
/// The bench's HTTP server: first free port from here (this bench's range).
const HTTP_PORTS: std::ops::Range<u16> = 26500..26600;

/// The next port `free_port` looks at: each call hands out a new one (a kubelet binds its
/// ports only later, so a port found free twice would be given to two servers, and a taken
/// port stops the kubelet at start).
static NEXT_PORT: AtomicU16 = AtomicU16::new(26600);

/// A free port for the kubelets' own servers (used by `upstream`), never the same twice.
fn free_port() -> u16 {
    let from = NEXT_PORT.load(Ordering::Relaxed);
    let port = (from..26999)
        .find(|p| TcpListener::bind(("0.0.0.0", *p)).is_ok())
        .unwrap_or(26999);
    NEXT_PORT.store(port.saturating_add(1), Ordering::Relaxed);
    port
}

/// Arrival times of the HTTP probes, by path.
type Arrivals = Arc<Mutex<BTreeMap<String, Vec<Instant>>>>;

/// Serves `200 ok` to every GET on one port, recording when each arrived.
fn http_server() -> Result<(u16, Arrivals), String> {
    let listener = HTTP_PORTS
        .clone()
        .find_map(|p| TcpListener::bind(("127.0.0.1", p)).ok())
        .ok_or("no free port in 26500..26600 for the probe server")?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let arrivals: Arrivals = Arc::default();
    let log = Arc::clone(&arrivals);
    std::thread::spawn(move || {
        // The instrument must not be late itself: the exec probes keep both cores busy
        // (runc per probe), and a server thread at normal priority would add its own wait
        // for a core to every arrival, for either kubelet. Real-time priority (as root)
        // makes the recorded time the probe's; without it the figures are upper bounds.
        let tid = nix::unistd::gettid().to_string();
        let prioritised = Command::new("chrt")
            .args(["-f", "-p", "1", &tid])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !prioritised {
            eprintln!("probes: the probe server runs at normal priority (chrt failed); delays include its own");
        }
        for stream in listener.incoming().flatten() {
            let at = Instant::now();
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split(' ').nth(1).unwrap_or("").to_owned();
            // The rest of the request up to its blank line.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            if let Ok(mut map) = log.lock() {
                map.entry(path).or_default().push(at);
            }
            let _ = (&stream)
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    Ok((port, arrivals))
}

/// A pod with an HTTP liveness probe every second against the bench's server and, with
/// `exec`, an exec readiness probe every second too, which appends one byte to
/// `<counts>/<name>` (a hostPath) so that the probes run can be counted.
fn manifest(name: &str, busybox: &str, port: u16, exec: Option<&Path>) -> String {
    let (readiness, volume, mount) = match exec {
        Some(counts) => (
            format!("    readinessProbe:\n      exec:\n        command: [\"sh\", \"-c\", \"printf . >> /counts/{name}\"]\n      periodSeconds: 1\n"),
            format!("  volumes:\n  - name: counts\n    hostPath: {{path: {}}}\n", counts.display()),
            "    volumeMounts: [{name: counts, mountPath: /counts}]\n".to_owned(),
        ),
        None => Default::default(),
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 0\n{volume}  containers:\n  - name: main\n    image: {busybox}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n{mount}{readiness}    livenessProbe:\n      httpGet:\n        host: 127.0.0.1\n        port: {port}\n        path: /{name}\n      periodSeconds: 1\n      failureThreshold: 3\n"
    )
}

/// The exec probes run so far: the bytes they appended under `counts`.
fn exec_probes_run(counts: &Path) -> u64 {
    std::fs::read_dir(counts)
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Waits until every path of `names` has had a probe arrive since `since`.
async fn wait_probed(
    arrivals: &Arrivals,
    names: &[String],
    since: Instant,
    secs: u64,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let missing = {
            let map = arrivals.lock().map(|m| m.clone()).unwrap_or_default();
            names
                .iter()
                .filter(|n| {
                    !map.get(&format!("/{n}"))
                        .is_some_and(|times| times.iter().any(|t| *t >= since))
                })
                .count()
        };
        if missing == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{missing} pods not probed after {secs} s"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How late each probe arrived behind its pod's schedule (first arrival in the window
/// plus whole periods), in milliseconds, sorted.
fn lateness(arrivals: &Arrivals, from: Instant, to: Instant) -> Vec<f64> {
    let map = arrivals.lock().map(|m| m.clone()).unwrap_or_default();
    let mut late = Vec::new();
    for times in map.values() {
        let window: Vec<Instant> = times
            .iter()
            .copied()
            .filter(|t| *t >= from && *t <= to)
            .collect();
        let Some(first) = window.first().copied() else {
            continue;
        };
        // The schedule's origin: the earliest first + k periods over the window.
        let origin = window
            .iter()
            .enumerate()
            .map(|(k, t)| t.duration_since(first).as_secs_f64() - k as f64)
            .fold(f64::INFINITY, f64::min);
        for (k, t) in window.iter().enumerate() {
            let behind = t.duration_since(first).as_secs_f64() - k as f64 - origin;
            late.push(behind * 1000.0);
        }
    }
    late.sort_by(f64::total_cmp);
    late
}

/// p50, p99 and max of sorted delays.
fn spread(sorted: &[f64]) -> (f64, f64, f64) {
    (
        percentile(sorted, 0.5),
        percentile(sorted, 0.99),
        sorted.last().copied().unwrap_or(f64::NAN),
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Waits until `n` containers run on the runtime.
async fn wait_running(cri: &CriRuntime, n: usize, secs: u64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let running = cri
            .list_containers(&ContainerFilter::default())
            .await
            .map_err(|e| format!("list containers: {e}"))?
            .iter()
            .filter(|c| c.status.state == ContainerState::Running)
            .count();
        if running >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{running} of {n} containers running after {secs} s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

struct Rkubelet(Child);

impl Drop for Rkubelet {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What one kubelet did in a measured window.
struct Window {
    cpu_secs: f64,
    /// The HTTP probes' delays behind their schedule, sorted.
    late: Vec<f64>,
    exec_probes: u64,
}

impl Window {
    /// CPU per probe delivered (HTTP and exec), in milliseconds.
    fn cpu_ms_per_probe(&self) -> f64 {
        self.cpu_secs * 1000.0 / (self.late.len() as u64 + self.exec_probes).max(1) as f64
    }
}

/// Measures one kubelet (`pid`) over `secs`: CPU seconds, the HTTP probes' lateness and
/// the exec probes run.
async fn measure(
    pid: u32,
    secs: u64,
    arrivals: &Arrivals,
    counts: &Path,
) -> Result<Window, String> {
    let from = Instant::now();
    let before = cpu_secs(pid).ok_or("kubelet CPU unreadable")?;
    let exec_before = exec_probes_run(counts);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let after = cpu_secs(pid).ok_or("kubelet exited while measured")?;
    Ok(Window {
        cpu_secs: after - before,
        late: lateness(arrivals, from, Instant::now()),
        exec_probes: exec_probes_run(counts).saturating_sub(exec_before),
    })
}

async fn run(dir: &Path) -> Result<(), String> {
    let pods = env_number("RKUBELET_BENCH_PROBE_PODS", 100) as usize;
    let secs = env_number("RKUBELET_BENCH_PROBE_SECS", 60);
    let bins = upstream::kube_bins();
    let mut ctrd = Containerd::try_start("probebench")?;
    let var = |k: &str| {
        ctrd.get(k)
            .map(str::to_string)
            .ok_or_else(|| format!("{k} missing from containerd's env file"))
    };
    let endpoint = var("CRI_ENDPOINT")?;
    let busybox = var("BUSYBOX_IMAGE")?;
    let cri = CriRuntime::connect(&endpoint, Duration::from_secs(60))
        .map_err(|e| format!("CRI client: {e}"))?;
    let (port, arrivals) = http_server()?;
    let manifests = dir.join("manifests");
    let root = dir.join("root");
    let counts = dir.join("exec-probes");
    for d in [&manifests, &root, &counts] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    for i in 0..pods {
        let name = format!("pb{i:03}");
        let path = manifests.join(format!("{name}.yaml"));
        std::fs::write(&path, manifest(&name, &busybox, port, Some(&counts)))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let start = |log_name: &str| -> Result<Rkubelet, String> {
        let log = File::create(dir.join(log_name)).map_err(|e| e.to_string())?;
        Command::new(common::rkubelet_bin())
            .args([
                format!("--container-runtime-endpoint={endpoint}"),
                format!("--pod-manifest-path={}", manifests.display()),
                format!("--root-dir={}", root.display()),
                format!("--port={}", free_port()),
                format!("--cert-dir={}", root.join("pki").display()),
                format!("--pod-logs-dir={}", var("RKUBELET_POD_LOG_ROOT")?),
                format!("--cgroup-root={}", var("RKUBELET_CGROUP_ROOT")?),
                format!("--hostname-override={NODE}"),
                format!("--healthz-port={}", free_port()),
                // The node's disk is shared with other work: no disk-based eviction and
                // no image GC, as the tests and the upstream peer run.
                "--eviction-hard=".into(),
                "--image-gc-high-threshold=100".into(),
            ])
            .env_remove("NOTIFY_SOCKET")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map(Rkubelet)
            .map_err(|e| format!("rkubelet does not start: {e}"))
    };
    let kubelet = start("rkubelet.log")?;
    wait_running(&cri, pods, 300).await?;
    // Every probe worker has started and settled.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let ours = measure(kubelet.0.id(), secs, &arrivals, &counts).await?;
    drop(kubelet);
    let probes = 2 * pods;
    println!(
        "probes: rkubelet CPU time with {probes} probes a second ({pods} exec + {pods} HTTP) over {secs} s: {:.2} s; delivered {} exec + {} HTTP probes ({:.2} ms per probe)",
        ours.cpu_secs,
        ours.exec_probes,
        ours.late.len(),
        ours.cpu_ms_per_probe()
    );
    let (p50, p99, max) = spread(&ours.late);
    // The exec probes' runc processes keep both cores busy here: this delay is mostly
    // the wait for a core, which any process on the node has.
    println!(
        "probes: rkubelet HTTP probe delay behind its schedule beside {pods} exec probes a second (cores saturated by runc) over {} probes: p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms",
        ours.late.len(),
    );

    // The upstream kubelet takes the same pods over and probes them the same way.
    let _lock = upstream::lock();
    let upstream_dir = dir.join("upstream");
    let theirs = {
        let kubelet = upstream::UpstreamKubelet::start(
            &bins,
            &ctrd,
            &upstream::UpstreamArgs {
                dir: &upstream_dir,
                node: NODE,
                manifests: Some(&manifests),
                url: None,
                extra: &[],
            },
        );
        let pid = kubelet.pid().ok_or("the upstream kubelet exited")?;
        // Its start-up (adopting or recreating the pods) is not counted.
        tokio::time::sleep(Duration::from_secs(30)).await;
        wait_running(&cri, pods, 120).await?;
        let measured = measure(pid, secs, &arrivals, &counts).await;
        if measured.is_err() {
            eprintln!("upstream kubelet log:\n{}", kubelet.log());
        }
        measured?
    };
    upstream::remove_pod_logs_of(NODE);
    println!(
        "probes: upstream kubelet v1.26.1 CPU time with the same {probes} probes a second over {secs} s: {:.2} s; delivered {} exec + {} HTTP probes ({:.2} ms per probe; its HTTP probe delay p99 {:.2} ms)",
        theirs.cpu_secs,
        theirs.exec_probes,
        theirs.late.len(),
        theirs.cpu_ms_per_probe(),
        percentile(&theirs.late, 0.99)
    );
    // Per probe delivered: a kubelet that falls behind spends less CPU on fewer probes.
    let ratio = ours.cpu_ms_per_probe() / theirs.cpu_ms_per_probe().max(1e-9);
    println!(
        "probes: rkubelet / upstream CPU per probe delivered: {ratio:.2} ({}); CPU time alone {:.2}",
        at_most(ratio, 0.5, ""),
        ours.cpu_secs / theirs.cpu_secs.max(1e-9)
    );

    // The delay rkubelet adds: the same HTTP probes without the exec load, on new pods
    // (rkubelet takes the node back and replaces the old ones).
    let names: Vec<String> = (0..pods).map(|i| format!("ph{i:03}")).collect();
    for (i, name) in names.iter().enumerate() {
        let old = manifests.join(format!("pb{i:03}.yaml"));
        std::fs::remove_file(&old).map_err(|e| format!("{}: {e}", old.display()))?;
        let path = manifests.join(format!("{name}.yaml"));
        std::fs::write(&path, manifest(name, &busybox, port, None))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let since = Instant::now();
    let kubelet = start("rkubelet-http.log")?;
    wait_probed(&arrivals, &names, since, 300).await?;
    // The old pods gone and every worker settled.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let alone = measure(kubelet.0.id(), secs, &arrivals, &counts)
        .await?
        .late;
    drop(kubelet);
    let (p50, p99, max) = spread(&alone);
    println!(
        "probes: rkubelet HTTP probe delay behind its schedule, {pods} HTTP probes a second alone, over {} probes: p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms ({})",
        alone.len(),
        below(p99, 10.0, " ms")
    );
    let left = ctrd.down();
    if !left.is_empty() {
        return Err(format!("containerd teardown left: {left:?}"));
    }
    Ok(())
}

fn main() {
    if let Some(missing) = Containerd::unavailable() {
        fail("probes", &missing);
    }
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => fail("probes", &format!("temp dir: {e}")),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => fail("probes", &format!("no tokio runtime: {e}")),
    };
    let result = runtime.block_on(run(dir.path()));
    upstream::unmount_below(dir.path());
    if let Err(e) = result {
        fail("probes", &e);
    }
}
