//! Cgroup helpers shared by the real-cgroup tests and the cgroup benchmarks (which
//! include this file with `#[path]`).

use std::path::Path;

use rkubelet::domain::cgroup::ResourceConfig;

/// Removes the cgroup directory `path` and every cgroup below it (deepest first;
/// cgroup directories are removed with rmdir, whatever files they show).
pub fn rmdir_tree(path: &Path) {
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_tree(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(path);
}

/// A burstable pod's limits: cpu shares, quota and period, memory and pids.
pub fn pod_limits() -> ResourceConfig {
    ResourceConfig {
        cpu_shares: Some(256),
        cpu_quota: Some(50_000),
        cpu_period: Some(100_000),
        memory_limit: Some(134_217_728),
        pids_limit: Some(1024),
    }
}

/// A `sleep` the runtime does not know of, moved into a cgroup, as a process a runtime
/// lost track of would be there; killed on drop if it still runs.
#[allow(dead_code)] // the real-cgroup tests only
pub struct StrayProcess(std::process::Child);

#[allow(dead_code)]
impl StrayProcess {
    /// Started and written into `cgroup.procs` of each of `dirs` (one a hierarchy).
    pub fn into_cgroups(dirs: impl IntoIterator<Item = std::path::PathBuf>) -> Self {
        let child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("sleep runs");
        for dir in dirs {
            let procs = dir.join("cgroup.procs");
            std::fs::write(&procs, child.id().to_string())
                .unwrap_or_else(|e| panic!("{}: {e}", procs.display()));
        }
        Self(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// The signal that ended it, waiting up to `within`; `None` if it still runs then.
    pub fn ending_signal(&mut self, within: std::time::Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + within;
        loop {
            match self.0.try_wait().expect("the stray process's status") {
                Some(status) => return std::os::unix::process::ExitStatusExt::signal(&status),
                None if std::time::Instant::now() > deadline => return None,
                None => std::thread::sleep(std::time::Duration::from_millis(50)),
            }
        }
    }
}

impl Drop for StrayProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
