//! The upstream kubelet v1.26.1 as a test peer: its binaries (and crictl) found by
//! `scripts/test-env/kube-bins.sh`, one instance run with a private containerd, and
//! everything it leaves on the host removed on drop. Upstream v1.26 always uses
//! /var/lib/kubelet/device-plugins and /var/log/pods, whatever its root dir, so runs
//! take [`LOCK`].

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use super::containerd::Containerd;
use super::free_port;

pub const LOCK: &str = "/tmp/rkubelet-upstream-kubelet.lock";

/// The folder of the upstream binaries; panics, saying how to get them, when absent.
pub fn kube_bins() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env/kube-bins.sh");
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("{} does not run: {e}", script.display()));
    assert!(
        out.status.success(),
        "the upstream kubelet v1.26.1 is needed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// What every test with the upstream kubelet needs: root, containerd, the upstream
/// binaries (their folder is returned) and [`LOCK`] (held by the returned guard). Fails
/// the test, saying which is missing.
pub fn require_peers() -> (PathBuf, Flock<File>) {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "must run as root: it starts containerd and the upstream kubelet"
    );
    if let Some(reason) = Containerd::unavailable() {
        panic!("containerd is needed: {reason}");
    }
    (kube_bins(), lock())
}

/// Holds [`LOCK`]: one upstream kubelet (and whatever shares its host paths) at a time.
pub fn lock() -> Flock<File> {
    let file = File::create(LOCK).expect("lock file");
    Flock::lock(file, FlockArg::LockExclusive).unwrap_or_else(|(_, e)| panic!("lock {LOCK}: {e}"))
}

/// How to run one upstream kubelet.
pub struct UpstreamArgs<'a> {
    /// Its folder: root dir, cert dir, plugin dir and log below it.
    pub dir: &'a Path,
    pub node: &'a str,
    /// `--pod-manifest-path`, when given.
    pub manifests: Option<&'a Path>,
    /// `--manifest-url`, when given.
    pub url: Option<&'a str>,
    /// Further flags.
    pub extra: &'a [String],
}

/// The upstream kubelet and everything it leaves on the host, removed on drop.
pub struct UpstreamKubelet {
    child: Option<Child>,
    pub dir: PathBuf,
    pub node: String,
    var_lib_kubelet_existed: bool,
    /// Remove its folder and pod logs on drop.
    clean_up: bool,
}

impl UpstreamKubelet {
    /// `<dir>/root` is its root dir (`--root-dir`); it runs with `ctrd`'s endpoint,
    /// pause image and cgroup root, cgroupfs, no eviction, ports of its own.
    pub fn start(bins: &Path, ctrd: &Containerd, a: &UpstreamArgs<'_>) -> UpstreamKubelet {
        std::fs::create_dir_all(a.dir).expect("kubelet folder");
        let var_lib_kubelet_existed = Path::new("/var/lib/kubelet").exists();
        let log = File::create(a.dir.join("kubelet.log")).expect("log file");
        let mut args = vec![
            format!("--hostname-override={}", a.node),
            format!("--container-runtime-endpoint={}", ctrd.var("CRI_ENDPOINT")),
            format!("--root-dir={}", a.dir.join("root").display()),
            format!("--cert-dir={}", a.dir.join("pki").display()),
            format!("--volume-plugin-dir={}", a.dir.join("plugins").display()),
            format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
            "--cgroup-driver=cgroupfs".into(),
            "--fail-swap-on=false".into(),
            format!("--port={}", free_port()),
            "--read-only-port=0".into(),
            format!("--healthz-port={}", free_port()),
            "--make-iptables-util-chains=false".into(),
            format!("--pod-infra-container-image={}", ctrd.var("PAUSE_IMAGE")),
            "--eviction-hard=".into(),
            "--file-check-frequency=2s".into(),
            "--http-check-frequency=2s".into(),
        ];
        if let Some(m) = a.manifests {
            args.push(format!("--pod-manifest-path={}", m.display()));
        }
        if let Some(url) = a.url {
            args.push(format!("--manifest-url={url}"));
        }
        args.extend(a.extra.iter().cloned());
        let child = Command::new(bins.join("kubelet"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("the upstream kubelet does not start: {e}"));
        UpstreamKubelet {
            child: Some(child),
            dir: a.dir.to_owned(),
            node: a.node.to_owned(),
            var_lib_kubelet_existed,
            clean_up: true,
        }
    }

    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The last 60 lines of its log.
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("kubelet.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// SIGTERM, then SIGKILL after 10 s; its pods keep running. Its root dir stays
    /// (unmounted), so another kubelet can take it over.
    pub fn stop(&mut self) {
        self.stop_process();
        unmount_below(&self.dir);
    }

    /// SIGTERM, then SIGKILL after 10 s; its pods keep running, their volumes mounted.
    fn stop_process(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl UpstreamKubelet {
    /// Stops it and leaves its folder, pods and logs for the next kubelet (a swap).
    pub fn hand_over(mut self) {
        self.stop();
        self.clean_up = false;
    }

    /// Stops it and leaves everything as a live node's kubelet leaves it: its pods'
    /// volumes stay mounted for the next kubelet.
    #[allow(dead_code)]
    pub fn hand_over_mounted(mut self) {
        self.stop_process();
        self.clean_up = false;
        if !self.var_lib_kubelet_existed {
            let _ = std::fs::remove_dir_all("/var/lib/kubelet");
        }
    }
}

pub use super::mounts::unmount_below;

/// Removes the pod log folders of pods named `*-<node>` from /var/log/pods (where
/// upstream v1.26 always writes them).
pub fn remove_pod_logs_of(node: &str) {
    if let Ok(entries) = std::fs::read_dir("/var/log/pods") {
        let ours = format!("-{node}_");
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().contains(&ours) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

impl Drop for UpstreamKubelet {
    fn drop(&mut self) {
        if !self.clean_up {
            // Handed over: what it leaves is the next kubelet's.
            self.stop_process();
            return;
        }
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
        remove_pod_logs_of(&self.node);
        if !self.var_lib_kubelet_existed {
            let _ = std::fs::remove_dir_all("/var/lib/kubelet");
        }
    }
}

/// A kubelet a bench runs side by side with the other: rkubelet, killed and reaped on
/// drop, or the upstream kubelet, which cleans up on its own drop.
pub enum RunningKubelet {
    Rkubelet(Child),
    Upstream(UpstreamKubelet),
}

impl RunningKubelet {
    pub fn pid(&self) -> Option<u32> {
        match self {
            RunningKubelet::Rkubelet(c) => Some(c.id()),
            RunningKubelet::Upstream(u) => u.pid(),
        }
    }

    /// The upstream kubelet's last log lines, for an error; nothing for rkubelet (its log
    /// stays in the bench's folder).
    pub fn log_tail(&self) -> String {
        match self {
            RunningKubelet::Rkubelet(_) => String::new(),
            RunningKubelet::Upstream(u) => {
                format!("; the upstream kubelet's log ends:\n{}", u.log())
            }
        }
    }
}

impl Drop for RunningKubelet {
    fn drop(&mut self) {
        if let RunningKubelet::Rkubelet(child) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
