//! A private systemd manager for one test, started with
//! `scripts/test-env/systemd-up.sh BASE` and torn down with `systemd-down.sh BASE` when
//! the guard is dropped (also when an assertion fails). Every instance has its own base
//! directory and bus, so tests run in parallel.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::env_file;

/// The systemd binary systemd-up.sh starts: `$SYSTEMD_BIN`, or Debian's.
fn systemd_bin() -> String {
    std::env::var("SYSTEMD_BIN").unwrap_or_else(|_| "/lib/systemd/systemd".into())
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env")
}

/// A private systemd manager under its own base directory, torn down on drop.
pub struct Systemd {
    pub base: PathBuf,
    env: BTreeMap<String, String>,
}

impl Systemd {
    /// Starts one; panics, saying what is missing and how to get it, when this machine
    /// cannot run one, and when it could but the manager did not come up.
    pub fn start(name: &str) -> Systemd {
        if let Some(missing) = Systemd::unavailable() {
            panic!("{missing}");
        }
        let base = PathBuf::from(format!("/tmp/rksd-{}-{name}", std::process::id()));
        // The guard exists before the script runs, so a half-started instance is torn down.
        let mut guard = Systemd {
            base: base.clone(),
            env: BTreeMap::new(),
        };
        let out = Command::new(scripts().join("systemd-up.sh"))
            .arg(&base)
            .output()
            .expect("systemd-up.sh runs");
        assert!(
            out.status.success(),
            "systemd-up.sh failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // the harness's timings
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        guard.env = env_file::read(&base.join("env")).unwrap_or_else(|e| panic!("{e}"));
        guard
    }

    /// What this machine lacks to run a private systemd manager, and how to get it.
    pub fn unavailable() -> Option<String> {
        if !nix::unistd::Uid::effective().is_root() {
            return Some(
                "peer missing: a private systemd manager needs root; run as root, as \
                 scripts/test.sh does"
                    .into(),
            );
        }
        let systemd = systemd_bin();
        if !Path::new(&systemd).exists() {
            return Some(format!(
                "peer missing: systemd is not installed ({systemd} absent); \
                 scripts/test-env/install-deps.sh installs it"
            ));
        }
        None
    }

    /// A variable of `BASE/env`; panics when missing.
    pub fn var(&self, key: &str) -> String {
        self.env
            .get(key)
            .cloned()
            .unwrap_or_else(|| panic!("{key} missing from env"))
    }
}

impl Drop for Systemd {
    fn drop(&mut self) {
        let _ = Command::new(scripts().join("systemd-down.sh"))
            .arg(&self.base)
            .status();
    }
}
