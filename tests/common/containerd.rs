//! A private containerd (CRI plugin) for one test or benchmark, started with
//! `scripts/test-env/containerd-up.sh BASE` and torn down with `containerd-down.sh BASE`
//! when the guard is dropped. Every instance has its own base directory, socket, bridge
//! and subnet, so tests run in parallel.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

// `common::env_file` in the tests; the benchmarks that include this file with
// `#[path]` include env_file.rs next to it.
use super::env_file;

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env")
}

/// A private containerd under its own base directory, torn down on drop.
pub struct Containerd {
    pub base: PathBuf,
    env: BTreeMap<String, String>,
    down: bool,
}

impl Containerd {
    /// Starts one; panics, saying what is missing and how to get it, when this machine
    /// cannot run one, and when it could but containerd did not come up.
    pub fn start(name: &str) -> Containerd {
        Containerd::try_start(name).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like `start`, but a missing peer or a failed start-up is an error, not a panic.
    pub fn try_start(name: &str) -> Result<Containerd, String> {
        Containerd::try_start_on(name, None)
    }

    /// Like `start`, with the base directory (containerd's root and state, and whatever
    /// the test puts there) on a tmpfs of `size_mib` of its own: a small disk.
    #[allow(dead_code)] // the disk-pressure tests only
    pub fn start_on_small_disk(name: &str, size_mib: u64) -> Containerd {
        Containerd::try_start_on(name, Some(size_mib)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_start_on(name: &str, disk_mib: Option<u64>) -> Result<Containerd, String> {
        if let Some(missing) = Containerd::unavailable() {
            return Err(missing);
        }
        // containerd-up.sh derives the pod subnet from the base directory's name (one /22
        // of 4,096) and refuses one that overlaps a live instance's (another test's, or
        // another run's on this machine): with several tests at once a chance clash is
        // likely enough over a run, so it takes another name rather than failing the test.
        let mut attempt = 0;
        loop {
            let instance = match attempt {
                0 => name.to_string(),
                n => format!("{name}-{n}"),
            };
            match Containerd::try_start_as(&instance, disk_mib) {
                Err(e) if e.contains("overlaps") && attempt < 5 => attempt += 1,
                started => return started,
            }
        }
    }

    fn try_start_as(name: &str, disk_mib: Option<u64>) -> Result<Containerd, String> {
        let base = PathBuf::from(format!("/tmp/rkcri-{}-{name}", std::process::id()));
        if let Some(mib) = disk_mib {
            std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
            let out = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
                .arg(&base)
                .output()
                .map_err(|e| format!("mount does not run: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "mounting a {mib} MiB tmpfs on {} failed: {}",
                    base.display(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        // The guard exists before the script runs, so a half-started instance is torn down.
        let mut guard = Containerd {
            base: base.clone(),
            env: BTreeMap::new(),
            down: false,
        };
        let out = Command::new(scripts().join("containerd-up.sh"))
            .arg(&base)
            .output()
            .map_err(|e| format!("containerd-up.sh does not run: {e}"))?;
        if !out.status.success() {
            if String::from_utf8_lossy(&out.stderr).contains("overlaps") {
                // Refused before it made anything but the folder (and its tmpfs).
                guard.down = true;
                if disk_mib.is_some() {
                    let _ = Command::new("umount").arg(&base).status();
                }
                let _ = std::fs::remove_dir(&base);
            }
            return Err(format!(
                "containerd-up.sh failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        guard.env = env_file::read(&base.join("env"))?;
        Ok(guard)
    }

    /// What this machine lacks to run a private containerd, and how to get it.
    pub fn unavailable() -> Option<String> {
        if !nix::unistd::Uid::effective().is_root() {
            return Some(
                "peer missing: a private containerd needs root; run as root, as scripts/test.sh does"
                    .into(),
            );
        }
        let installed = Command::new("sh")
            .args(["-c", "command -v containerd"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            return Some(
                "peer missing: containerd is not installed (not in PATH); \
                 scripts/test-env/install-deps.sh installs it"
                    .into(),
            );
        }
        None
    }

    /// A variable of `BASE/env`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.env.get(key).map(String::as_str)
    }

    /// A variable of `BASE/env`; panics when missing.
    pub fn var(&self, key: &str) -> String {
        self.get(key)
            .map(str::to_string)
            .unwrap_or_else(|| panic!("{key} missing from env"))
    }

    /// The socket path (without `unix://`).
    pub fn socket(&self) -> PathBuf {
        self.base.join("containerd.sock")
    }

    /// Tear down now and report what was left behind: containerd-down.sh's failure,
    /// shims still serving this instance, mounts below the base directory, or the base
    /// directory itself. Empty when everything is gone.
    pub fn down(&mut self) -> Vec<String> {
        self.down = true;
        let mut left = Vec::new();
        match Command::new(scripts().join("containerd-down.sh"))
            .arg(&self.base)
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => left.push(format!(
                "containerd-down.sh failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )),
            Err(e) => left.push(format!("containerd-down.sh does not run: {e}")),
        }
        let socket = self.socket();
        let socket = socket.to_string_lossy();
        for pid in processes_with_argument(&socket) {
            left.push(format!("process {pid} still serves {socket}"));
        }
        let base = format!("{}/", self.base.display());
        if let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") {
            for m in mounts.lines().filter_map(|l| l.split(' ').nth(4)) {
                if m.starts_with(&base) {
                    left.push(format!("mount {m} left"));
                }
            }
        }
        if self.base.exists() {
            left.push(format!("{} left", self.base.display()));
        }
        left
    }
}

impl Containerd {
    /// Stop the containerd daemon only (SIGTERM, its shims and pods stay), as an operator's
    /// `systemctl stop containerd` would.
    pub fn stop_daemon(&self) {
        let pid = std::fs::read_to_string(self.base.join("containerd.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
            .expect("containerd.pid");
        let pid = nix::unistd::Pid::from_raw(pid);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signalled");
        for _ in 0..200 {
            if nix::sys::signal::kill(pid, None).is_err() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("containerd did not stop");
    }

    /// Start the daemon again on the same base (containerd-up.sh is idempotent).
    pub fn start_daemon(&self) {
        let out = Command::new(scripts().join("containerd-up.sh"))
            .arg(&self.base)
            .output()
            .expect("containerd-up.sh runs");
        assert!(
            out.status.success(),
            "containerd-up.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Processes (shims, containerd) with `arg` as one whole command-line argument.
fn processes_with_argument(arg: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
        })
        .collect()
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if !self.down {
            let left = self.down();
            if !left.is_empty() {
                eprintln!("containerd teardown left: {left:?}");
            }
        }
    }
}
