//! systemd cgroup driver benchmark: create then destroy 100 pod slices (each with cpu,
//! quota, memory and pids limits) under `kubepods-burstable.slice`, one at a time, against
//! a private systemd manager (scripts/test-env/systemd-up.sh). Prints the time per slice
//! for each phase. Goal: under 10 ms per create and per destroy. `RKUBELET_BENCH_PODS`
//! sets the number of pods (default 100). Needs root and systemd; fails, saying which is
//! missing, without them.

use std::time::{Duration, Instant};

use rkubelet::adapters::systemd::{CgroupMount, SystemdManager};
use rkubelet::domain::cgroup::{CgroupName, ResourceConfig};
use rkubelet::ports::cgroup::CgroupManager;

#[allow(dead_code)] // shared with the tests, which use more of it
#[path = "../tests/common/cgroups.rs"]
mod cgroups;
#[path = "../tests/common/env_file.rs"]
mod env_file;
#[allow(dead_code)] // shared with the tests, which use more of it
#[path = "../tests/common/systemd.rs"]
mod systemd;

mod common;

use cgroups::pod_limits;
use common::{below, fail};
use systemd::Systemd;

/// Milliseconds per slice.
fn per_slice(total: Duration, n: usize) -> f64 {
    total.as_secs_f64() * 1000.0 / n.max(1) as f64
}

pub fn main() {
    if let Some(missing) = Systemd::unavailable() {
        fail("cgroups_systemd", &missing);
    }
    let pods: usize = std::env::var("RKUBELET_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    // Torn down however the bench ends.
    let peer = Systemd::start("bench");
    let address = peer.var("DBUS_SYSTEM_BUS_ADDRESS");

    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        fail("cgroups_systemd", "no tokio runtime");
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
            for (phase, total) in [("create ", created), ("destroy", destroyed)] {
                let each = per_slice(total, pods);
                println!(
                    "cgroups_systemd: {phase} {each:.2} ms/slice ({:.0} ms total; {})",
                    total.as_secs_f64() * 1000.0,
                    below(each, 10.0, " ms/slice")
                );
            }
        }
        Err(e) => fail("cgroups_systemd", &e.to_string()),
    }
}
