//! systemd cgroup driver benchmark: create then destroy 100 pod slices (each with cpu,
//! quota, memory and pids limits) under `kubepods-burstable.slice`, one at a time, against
//! a private systemd manager (scripts/test-env/systemd-up.sh). Prints the time per slice
//! for each phase. Goal: under 10 ms per create and per destroy. `RKUBELET_BENCH_PODS`
//! sets the number of pods (default 100). Skips, saying why, when not root or systemd is
//! not installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rkubelet::adapters::systemd::{CgroupMount, SystemdManager};
use rkubelet::domain::cgroup::{CgroupName, ResourceConfig};
use rkubelet::ports::cgroup::CgroupManager;

#[allow(dead_code)] // shared with the tests, which use more of it
#[path = "../tests/common/cgroups.rs"]
mod cgroups;

use cgroups::pod_limits;

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env")
}

/// Tears the private manager down however the bench ends.
struct Peer(PathBuf);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = Command::new(scripts().join("systemd-down.sh"))
            .arg(&self.0)
            .status();
    }
}

fn per(total: Duration, n: usize) -> String {
    format!(
        "{:.2} ms/slice ({:.0} ms total)",
        total.as_secs_f64() * 1000.0 / n.max(1) as f64,
        total.as_secs_f64() * 1000.0
    )
}

fn main() {
    if !nix::unistd::Uid::effective().is_root() {
        println!("cgroups_systemd: SKIP: not root; a private systemd manager needs root");
        return;
    }
    if !Path::new("/lib/systemd/systemd").exists() {
        println!(
            "cgroups_systemd: SKIP: systemd is not installed (scripts/test-env/install-deps.sh)"
        );
        return;
    }
    let pods: usize = std::env::var("RKUBELET_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let base = PathBuf::from(format!("/tmp/rksd-{}-bench", std::process::id()));
    let peer = Peer(base.clone());
    let up = Command::new(scripts().join("systemd-up.sh"))
        .arg(&base)
        // its stdout is the env file's path; its timings (stderr) stay visible
        .stdout(std::process::Stdio::null())
        .status();
    if !up.is_ok_and(|s| s.success()) {
        println!("cgroups_systemd: FAIL: systemd-up.sh failed");
        std::process::exit(1);
    }
    let address = format!("unix:path={}/run/bus", base.display());

    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        println!("cgroups_systemd: FAIL: no tokio runtime");
        std::process::exit(1);
    };
    let result = rt.block_on(async {
        let root = std::path::PathBuf::from("/sys/fs/cgroup");
        let version = rkubelet::adapters::cgroupfs::detect_version(&root);
        let sd = SystemdManager::connect(Some(&address), CgroupMount { root, version }).await?;
        let none = ResourceConfig::default();
        let burstable = CgroupName::new(&CgroupName::root(), &["kubepods", "burstable"])
            .map_err(|e| rkubelet::ports::cgroup::CgroupError::InvalidName(e.to_string()))?;
        sd.create(&burstable.parent(), &none).await?;
        sd.create(&burstable, &none).await?;
        let limits = pod_limits();
        let names: Vec<CgroupName> = (0..pods)
            .filter_map(|i| {
                CgroupName::new(
                    &burstable,
                    &[format!("pod{i:08x}-0000-4000-8000-000000000000")],
                )
                .ok()
            })
            .collect();
        let start = Instant::now();
        for n in &names {
            sd.create(n, &limits).await?;
        }
        let created = start.elapsed();
        let listed = sd.children(&burstable).await?.len();
        let start = Instant::now();
        for n in &names {
            sd.destroy(n).await?;
        }
        let destroyed = start.elapsed();
        Ok::<_, rkubelet::ports::cgroup::CgroupError>((created, destroyed, listed))
    });
    drop(peer);
    match result {
        Ok((created, destroyed, listed)) => {
            println!("cgroups_systemd: {pods} pod slices (listed {listed} while up)");
            println!("cgroups_systemd: create  {}", per(created, pods));
            println!("cgroups_systemd: destroy {}", per(destroyed, pods));
        }
        Err(e) => {
            println!("cgroups_systemd: FAIL: {e}");
            std::process::exit(1);
        }
    }
}
