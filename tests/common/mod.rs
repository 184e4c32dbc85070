//! Helpers shared by the integration tests that run the rkubelet binary.
#![allow(dead_code)] // each test crate uses its own subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod api_pods;
pub mod cgroups;
pub mod cluster;
pub mod containerd;
pub mod env_file;
pub mod faults;
pub mod kubelet_api;
pub mod mounts;
pub mod node;
pub mod patience;
pub mod peer;
pub mod pod_resources;
pub mod ports;
pub mod systemd;
pub mod upstream;

pub use patience::patience;
pub use ports::free_port;

pub const BIN: &str = env!("CARGO_BIN_EXE_rkubelet");

/// `GET path` on 127.0.0.1:port: the status code and the body.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http_get_within(port, path, Duration::from_secs(5))
}

/// [`http_get`] with a read timeout of `within`: a liveness check on a loaded machine,
/// where a refused connection still fails at once.
pub fn http_get_within(port: u16, path: &str, within: Duration) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(within)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// `GET /pods` on the read-only port of a daemon started with `--read-only-port` (the
/// healthz port serves `/healthz` only).
pub fn pods_get(daemon: &Daemon) -> Option<(u16, String)> {
    assert!(
        daemon.read_only_port != 0,
        "start the daemon with --read-only-port to read /pods without credentials"
    );
    http_get(daemon.read_only_port, "/pods")
}

/// `GET path` on the daemon's kubelet API (TLS, its self-signed certificate not checked,
/// no credentials: the daemon must allow anonymous requests): the status and the body.
/// Waits up to 20 s (by [`patience`]) for the port to answer.
pub fn api_get(daemon: &Daemon, path: &str) -> Option<(u16, String)> {
    let deadline = Instant::now() + patience(20);
    loop {
        let out = Command::new("curl")
            .args(["-sk", "--max-time", "5", "-w", "\n%{http_code}"])
            .arg(format!("https://127.0.0.1:{}{path}", daemon.api_port))
            .output()
            .ok()?;
        let all = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = all.rsplit_once('\n').unwrap_or(("", &all));
        match code.trim().parse::<u16>() {
            Ok(code) if code != 0 => return Some((code, body.to_owned())),
            _ if Instant::now() >= deadline => return None,
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// `--read-only-port=<a free port>`, for tests that read `/pods` without credentials.
pub fn read_only_port_flag() -> String {
    format!("--read-only-port={}", free_port())
}

/// A running rkubelet; killed on drop. `log` keeps every stderr line.
pub struct Daemon {
    pub child: Child,
    /// The healthz port: `/healthz` only.
    pub port: u16,
    /// The kubelet API's TLS port (`--port`).
    pub api_port: u16,
    /// `--read-only-port` when the test gave one (0 otherwise): `/pods` without
    /// authentication.
    pub read_only_port: u16,
    pub log: Arc<Mutex<Vec<String>>>,
    /// The kubelet API's serving certificate folder when the test gave none.
    pub _cert_dir: Option<tempfile::TempDir>,
}

impl Daemon {
    pub fn log_text(&self) -> String {
        self.log.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// SIGTERM, then wait for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal sent");
        self.child.wait().expect("exits")
    }

    /// SIGTERM, then the exit status if it exits within `grace`; SIGKILL and `None`
    /// otherwise.
    pub fn terminate_within(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failed test shows what rkubelet said, which its assertion alone cannot.
        if std::thread::panicking() {
            let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
            let tail = &log[log.len().saturating_sub(80)..];
            eprintln!(
                "--- rkubelet log (last {} lines) ---\n{}",
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// Start rkubelet with `args` plus a free `--healthz-port`, optionally as `nobody`, and
/// wait until its log says it serves healthz (the log line is the readiness signal, so
/// no fixed sleep).
pub fn start_daemon(args: &[String], as_nobody: bool) -> Daemon {
    let port = free_port();
    let mut all = args.to_vec();
    // Test nodes on a real runtime share the host's disk, which other work fills: no
    // disk-based eviction and no image GC there unless a test asks for them (the
    // upstream kubelet peer runs with `--eviction-hard=` too).
    let real_runtime = args
        .iter()
        .any(|a| a.starts_with("--container-runtime-endpoint=unix://"));
    let given = |flag: &str| args.iter().any(|a| a.starts_with(flag));
    if real_runtime && !given("--eviction-hard") {
        all.push("--eviction-hard=".into());
    }
    if real_runtime && !given("--image-gc-high-threshold") {
        all.push("--image-gc-high-threshold=100".into());
    }
    all.push(format!("--healthz-port={port}"));
    // The kubelet API: on a free port and with its self-signed
    // certificate in a folder of the test's own, so parallel tests (and the upstream
    // kubelet peers) never contend for 10250 or write /var/lib/kubelet/pki.
    let flag_value = |flag: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(flag))
            .and_then(|v| v.parse::<u16>().ok())
    };
    let api_port = flag_value("--port=").unwrap_or_else(|| {
        let port = free_port();
        all.push(format!("--port={port}"));
        port
    });
    let read_only_port = flag_value("--read-only-port=").unwrap_or(0);
    let cert_dir = if given("--cert-dir") {
        None
    } else {
        let dir = tempfile::tempdir().expect("cert dir");
        all.push(format!("--cert-dir={}", dir.path().display()));
        Some(dir)
    };
    let mut command = if as_nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN]);
        c
    } else {
        Command::new(BIN)
    };
    let mut child = command
        .args(&all)
        .env_remove("NOTIFY_SOCKET")
        .stderr(Stdio::piped())
        .spawn()
        .expect("rkubelet starts");
    let stderr = child.stderr.take().expect("stderr piped");
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = log.clone();
    std::thread::spawn(move || {
        // Keep draining after the ready line: a closed pipe would fail the daemon's logging.
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let ready = line.contains("serving /healthz");
            if let Ok(mut l) = sink.lock() {
                l.push(line);
            }
            if ready {
                let _ = tx.send(());
            }
        }
    });
    let daemon = Daemon {
        child,
        port,
        api_port,
        read_only_port,
        log,
        _cert_dir: cert_dir,
    };
    let deadline = Instant::now() + patience(20);
    if rx
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .is_err()
    {
        panic!(
            "rkubelet did not start serving; log:\n{}",
            daemon.log_text()
        );
    }
    daemon
}

/// A committed generated document (`relative` to the repository) must be `generated`;
/// with the environment variable `update` set, it is rewritten instead. `regenerate` is
/// the command the failure tells the reader to run.
pub fn assert_generated(relative: &str, generated: &str, update: &str, regenerate: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os(update).is_some() {
        std::fs::write(&path, generated)
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{relative} is out of date; regenerate it with\n  {regenerate}"
    );
}

/// A manifest folder under `dir` with one static pod, `default/web` of one container
/// `app` (image `busybox`): for the tests on the simulated runtime.
#[allow(dead_code)] // the integration tests only
pub fn web_manifest(dir: &std::path::Path) -> std::path::PathBuf {
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifest folder");
    std::fs::write(
        manifests.join("web.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\nspec:\n  containers:\n  - {name: app, image: busybox}\n",
    )
    .expect("manifest");
    manifests
}
