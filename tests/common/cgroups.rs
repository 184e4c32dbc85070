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
