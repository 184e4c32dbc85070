//! The fault toolkit: what the fault tests (and later tests) do to the peers around
//! rkubelet. Processes are signalled by PID (SIGKILL, SIGSTOP/SIGCONT, SIGTERM), never by
//! name; the peers' own guards (`Containerd`, `Cluster`, `Daemon`) start them again and
//! tear them down. `CriProxy` sits between rkubelet and containerd and delays or fails a
//! share of the CRI calls.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::cluster::Cluster;
use super::containerd::Containerd;
use super::Daemon;

/// A process by PID: signals and waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc(pub i32);

impl Proc {
    /// The PID recorded in a pid file.
    pub fn from_pid_file(path: &Path) -> Option<Proc> {
        std::fs::read_to_string(path)
            .ok()?
            .trim()
            .parse()
            .ok()
            .map(Proc)
    }

    pub fn signal(self, signal: Signal) -> bool {
        kill(Pid::from_raw(self.0), signal).is_ok()
    }

    /// Alive and not a zombie.
    pub fn alive(self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.0))
            .ok()
            .and_then(|s| {
                // The state follows the command name in parentheses.
                s.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.chars().next())
            })
            .is_some_and(|state| state != 'Z')
    }

    /// Waits until the process is gone (or a zombie); false after `within`.
    pub fn wait_gone(self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if !self.alive() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        !self.alive()
    }

    /// SIGKILL, and wait until it is gone.
    pub fn kill9(self) {
        self.signal(Signal::SIGKILL);
        assert!(
            self.wait_gone(Duration::from_secs(10)),
            "process {} survived SIGKILL",
            self.0
        );
    }

    /// SIGSTOP: the process is frozen, its sockets stay open but nothing answers.
    pub fn pause(self) {
        assert!(self.signal(Signal::SIGSTOP), "SIGSTOP {}", self.0);
    }

    /// SIGCONT.
    pub fn resume(self) {
        assert!(self.signal(Signal::SIGCONT), "SIGCONT {}", self.0);
    }

    /// Resident set size in KiB (`VmRSS`).
    pub fn rss_kib(self) -> Option<u64> {
        status_field(self.0, "VmRSS:")
    }

    /// Anonymous resident memory in KiB (`RssAnon`): the heap and stacks, which the
    /// release of start-up's code pages does not move.
    pub fn anon_kib(self) -> Option<u64> {
        status_field(self.0, "RssAnon:")
    }

    /// The resident memory's high-water mark, KiB.
    pub fn peak_rss_kib(self) -> Option<u64> {
        status_field(self.0, "VmHWM:")
    }

    /// Open file descriptors.
    pub fn fd_count(self) -> Option<usize> {
        std::fs::read_dir(format!("/proc/{}/fd", self.0))
            .ok()
            .map(|d| d.count())
    }

    /// Threads.
    pub fn threads(self) -> Option<u64> {
        status_field(self.0, "Threads:")
    }

    /// Threads apart from tokio's blocking pool, and the pool's threads (named
    /// `tokio-rt-worker`; rkubelet's runtime has no worker threads, so every such thread
    /// is the pool's).
    pub fn threads_and_pool(self) -> Option<(u64, u64)> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.0)).ok()?;
        let (mut others, mut pool) = (0, 0);
        for task in tasks.flatten() {
            let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if name.trim_end() == "tokio-rt-worker" {
                pool += 1;
            } else {
                others += 1;
            }
        }
        Some((others, pool))
    }
}

fn status_field(pid: i32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Daemon {
    pub fn proc(&self) -> Proc {
        Proc(i32::try_from(self.child.id()).expect("pid fits"))
    }
}

impl Containerd {
    /// The containerd daemon (not its shims).
    pub fn daemon_proc(&self) -> Proc {
        Proc::from_pid_file(&self.base.join("containerd.pid")).expect("containerd.pid")
    }

    /// SIGKILL the daemon; its shims and so the pods' processes survive, as when
    /// containerd crashes on a node.
    pub fn kill9_daemon(&self) {
        self.daemon_proc().kill9();
    }

    /// Starts the daemon again in the background (containerd-up.sh on the same base), so
    /// the caller can time containerd's return itself; wait on the child for the script.
    pub fn spawn_start(&self) -> std::process::Child {
        std::process::Command::new(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env/containerd-up.sh"),
        )
        .arg(&self.base)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("containerd-up.sh runs")
    }

    /// Processes whose command line carries this instance's socket (the shims once the
    /// daemon is gone).
    pub fn shim_count(&self) -> usize {
        let socket = self.socket();
        let socket = socket.to_string_lossy();
        std::fs::read_dir("/proc")
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|pid| {
                        std::fs::read_to_string(format!("/proc/{pid}/comm"))
                            .is_ok_and(|c| c.starts_with("containerd-shim"))
                            && std::fs::read(format!("/proc/{pid}/cmdline"))
                                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == socket.as_bytes()))
                    })
                    .count()
            })
            .unwrap_or(0)
    }
}

impl Cluster {
    /// A control-plane component (`apiserver`, `etcd`, `controller-manager`, `scheduler`)
    /// by its pid file.
    pub fn component_proc(&self, name: &str) -> Option<Proc> {
        Proc::from_pid_file(&self.base.join(format!("{name}.pid"))).filter(|p| p.alive())
    }
}

/// A small tmpfs mounted for one test (a disk that fills up), unmounted on drop.
pub struct SmallDisk {
    pub path: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (`mount -o size=`) and 2,000 inodes at `path`, created if
    /// missing.
    pub fn mount(path: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(path).expect("mount point");
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},nr_inodes=2k,mode=0755"),
                "tmpfs",
            ])
            .arg(path)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "mount tmpfs at {}: {out:?}",
            path.display()
        );
        SmallDisk {
            path: path.to_path_buf(),
        }
    }

    /// Fills the disk: a file of zeros written until the filesystem refuses (ENOSPC),
    /// then empty files until no inode is left (on tmpfs a folder needs no block, only
    /// an inode). Returns the bytes written.
    pub fn fill(&self) -> u64 {
        use std::io::Write;
        let mut file = std::fs::File::create(self.path.join(".filler")).expect("filler");
        let chunk = vec![0u8; 64 * 1024];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => written += n as u64,
            }
        }
        // Smaller writes take what the 64 KiB ones could not.
        while let Ok(n) = file.write(&chunk[..512]) {
            if n == 0 {
                break;
            }
            written += n as u64;
        }
        let inodes = self.path.join(".filler.d");
        if std::fs::create_dir(&inodes).is_ok() {
            let mut i = 0u32;
            while std::fs::File::create(inodes.join(i.to_string())).is_ok() {
                i += 1;
            }
        }
        written
    }

    /// Gives the space back.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.path.join(".filler"));
        let _ = std::fs::remove_dir_all(self.path.join(".filler.d"));
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // The disk and what is mounted on or in it: a kubelet's root binds onto itself.
        super::mounts::unmount_below(&self.path);
        if super::mounts::mounts_below(&self.path).is_empty() {
            let _ = std::fs::remove_dir(&self.path);
        } else {
            eprintln!("could not unmount {}", self.path.display());
        }
    }
}

/// Paths below `dir` (recursively, folders included), for leak checks.
pub fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        out.push(path.clone());
        if path.is_dir() && !path.is_symlink() {
            out.extend(tree(&path));
        }
    }
    out
}

/// The immediate children of `dir` by name.
pub fn children(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

pub use super::mounts::mounts_below;

/// The pod cgroups (`pod<uid>` folders) under `root` in the v1 `cpu` hierarchy, by uid.
pub fn pod_cgroups(cgroup_root: &str) -> Vec<String> {
    let base = Path::new("/sys/fs/cgroup/cpu,cpuacct").join(cgroup_root.trim_start_matches('/'));
    let base = if base.exists() {
        base
    } else {
        Path::new("/sys/fs/cgroup/cpu").join(cgroup_root.trim_start_matches('/'))
    };
    let mut uids = Vec::new();
    for qos in ["kubepods", "kubepods/burstable", "kubepods/besteffort"] {
        for name in children(&base.join(qos)) {
            if let Some(uid) = name.strip_prefix("pod") {
                uids.push(uid.to_string());
            }
        }
    }
    uids.sort();
    uids
}

/// Small deterministic pseudo-random numbers (xorshift), so a fault pattern can be
/// replayed from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// True with probability `share` (0..=1).
    pub fn chance(&mut self, share: f64) -> bool {
        (self.next_u64() % 1_000_000) as f64 / 1_000_000.0 < share
    }
}

/// What the CRI proxy does to the calls it relays.
#[derive(Debug, Clone, Default)]
pub struct CriFaults {
    /// The share of calls (0..=1) answered `UNAVAILABLE` without reaching containerd.
    pub fail_share: f64,
    /// The share of calls held for `delay` before they are relayed.
    pub delay_share: f64,
    pub delay: Duration,
    /// Only calls whose method (`RunPodSandbox`, `ListContainers`, ...) is listed are
    /// touched; all when empty.
    pub methods: Vec<String>,
    /// Calls of these methods are not relayed: their request messages are kept (see
    /// [`CriProxy::captured`]) and answered `UNKNOWN`, as a runtime that cannot do them.
    pub capture: Vec<String>,
}

/// What the proxy saw, per CRI method.
#[derive(Debug, Clone, Default)]
pub struct CriCounts {
    pub calls: BTreeMap<String, u64>,
    pub failed: BTreeMap<String, u64>,
    pub delayed: BTreeMap<String, u64>,
}

impl CriCounts {
    pub fn total(map: &BTreeMap<String, u64>) -> u64 {
        map.values().sum()
    }
}

struct ProxyState {
    faults: CriFaults,
    counts: CriCounts,
    rng: Rng,
    /// The protobuf messages of the captured calls, by method.
    captured: BTreeMap<String, Vec<Vec<u8>>>,
}

/// A CRI proxy in the test process: listens on its own unix socket and relays each gRPC
/// call (one HTTP/2 request) to containerd's socket, delaying or failing a share of them
/// as `CriFaults` says. It runs on its own thread and runtime, so sync and async tests
/// use it alike; dropping it stops it and removes its socket.
pub struct CriProxy {
    pub socket: PathBuf,
    state: Arc<Mutex<ProxyState>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CriProxy {
    /// Listens on `socket` and relays to `upstream` (both plain paths).
    pub fn start(socket: &Path, upstream: &Path, seed: u64) -> CriProxy {
        let _ = std::fs::remove_file(socket);
        let state = Arc::new(Mutex::new(ProxyState {
            faults: CriFaults::default(),
            counts: CriCounts::default(),
            rng: Rng::new(seed),
            captured: BTreeMap::new(),
        }));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (sock, up, st) = (socket.to_path_buf(), upstream.to_path_buf(), state.clone());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("proxy runtime");
            runtime.block_on(proxy::serve(sock, up, st, stop_rx, ready_tx));
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("CRI proxy listening");
        CriProxy {
            socket: socket.to_path_buf(),
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// The endpoint to give rkubelet.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    pub fn set(&self, faults: CriFaults) {
        if let Ok(mut s) = self.state.lock() {
            s.faults = faults;
        }
    }

    pub fn clear(&self) {
        self.set(CriFaults::default());
    }

    /// The request messages (protobuf, without gRPC framing) of the captured calls of
    /// `method`, in order.
    #[allow(dead_code)] // the pull-secret test only
    pub fn captured(&self, method: &str) -> Vec<Vec<u8>> {
        self.state
            .lock()
            .map(|s| s.captured.get(method).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    pub fn counts(&self) -> CriCounts {
        self.state
            .lock()
            .map(|s| s.counts.clone())
            .unwrap_or_default()
    }
}

impl Drop for CriProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

mod proxy {
    use super::*;
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt, Empty};
    use hyper::body::{Bytes, Incoming};
    use hyper::{Request, Response};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use tokio::net::{UnixListener, UnixStream};

    type Body = BoxBody<Bytes, hyper::Error>;

    pub(super) async fn serve(
        socket: PathBuf,
        upstream: PathBuf,
        state: Arc<Mutex<ProxyState>>,
        mut stop: tokio::sync::oneshot::Receiver<()>,
        ready: std::sync::mpsc::Sender<()>,
    ) {
        let listener = UnixListener::bind(&socket).expect("proxy socket");
        let _ = ready.send(());
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    connections.spawn(connection(stream, upstream.clone(), state.clone()));
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        connections.abort_all();
    }

    /// One client connection: one upstream HTTP/2 connection for it, opened on the first
    /// call (and again after containerd restarts).
    async fn connection(stream: UnixStream, upstream: PathBuf, state: Arc<Mutex<ProxyState>>) {
        let sender: Arc<
            tokio::sync::Mutex<Option<hyper::client::conn::http2::SendRequest<Incoming>>>,
        > = Arc::new(tokio::sync::Mutex::new(None));
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let (upstream, state, sender) = (upstream.clone(), state.clone(), sender.clone());
            async move {
                Ok::<_, std::convert::Infallible>(relay(req, &upstream, &state, &sender).await)
            }
        });
        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(TokioIo::new(stream), service)
            .await;
    }

    fn method_of(req: &Request<Incoming>) -> String {
        req.uri()
            .path()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// A trailers-only gRPC answer with `status` (14 is UNAVAILABLE).
    fn grpc_error(status: u32, message: &str) -> Response<Body> {
        Response::builder()
            .status(200)
            .header("content-type", "application/grpc")
            .header("grpc-status", status.to_string())
            .header("grpc-message", message.replace(' ', "%20"))
            .body(Empty::new().map_err(|never| match never {}).boxed())
            .expect("a valid response")
    }

    async fn relay(
        req: Request<Incoming>,
        upstream: &Path,
        state: &Mutex<ProxyState>,
        sender: &tokio::sync::Mutex<Option<hyper::client::conn::http2::SendRequest<Incoming>>>,
    ) -> Response<Body> {
        let method = method_of(&req);
        let capture = state
            .lock()
            .is_ok_and(|s| s.faults.capture.contains(&method));
        if capture {
            let Ok(body) = req.into_body().collect().await else {
                return grpc_error(13, "proxy: unreadable request");
            };
            // One unary message: a flag byte and a 4-byte length before it.
            let bytes = body.to_bytes();
            let message = bytes.get(5..).unwrap_or_default().to_vec();
            if let Ok(mut s) = state.lock() {
                *s.counts.calls.entry(method.clone()).or_default() += 1;
                s.captured.entry(method).or_default().push(message);
            }
            return grpc_error(2, "captured by the test's CRI proxy");
        }
        let (fail, delay) = {
            let Ok(mut s) = state.lock() else {
                return grpc_error(13, "proxy state poisoned");
            };
            *s.counts.calls.entry(method.clone()).or_default() += 1;
            let f = s.faults.clone();
            let touched = f.methods.is_empty() || f.methods.contains(&method);
            let fail = touched && s.rng.chance(f.fail_share);
            let delay = touched && !fail && s.rng.chance(f.delay_share);
            if fail {
                *s.counts.failed.entry(method.clone()).or_default() += 1;
            }
            if delay {
                *s.counts.delayed.entry(method.clone()).or_default() += 1;
            }
            (fail, delay.then_some(f.delay))
        };
        if fail {
            return grpc_error(14, "injected by the test's CRI proxy");
        }
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        let mut send = {
            let mut guard = sender.lock().await;
            let usable = guard.as_ref().is_some_and(|s| !s.is_closed());
            if !usable {
                *guard = match open(upstream).await {
                    Ok(s) => Some(s),
                    Err(e) => return grpc_error(14, &format!("proxy: upstream: {e}")),
                };
            }
            match guard.as_ref() {
                Some(s) => s.clone(),
                None => return grpc_error(14, "proxy: no upstream"),
            }
        };
        if send.ready().await.is_err() {
            *sender.lock().await = None;
            return grpc_error(14, "proxy: upstream closed");
        }
        match send.send_request(req).await {
            Ok(resp) => resp.map(|b| b.boxed()),
            Err(e) => grpc_error(14, &format!("proxy: upstream call: {e}")),
        }
    }

    async fn open(
        upstream: &Path,
    ) -> Result<hyper::client::conn::http2::SendRequest<Incoming>, String> {
        let stream = UnixStream::connect(upstream)
            .await
            .map_err(|e| e.to_string())?;
        let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        Ok(send)
    }
}
