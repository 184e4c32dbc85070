//! The soak's long form (tests/integration/soak.rs, issue 17): 250 static pods created
//! and deleted in waves on a simulated node (`fake://`) for `RKUBELET_BENCH_SOAK_SECS`
//! (default 600; the full run is 1800). Figures: waves and pods churned, the
//! anonymous resident memory's slope after the warm-up (`RssAnon`, goal < 1 KiB a pod
//! churned; the resident total's is printed beside it, and drops at each release of
//! start-up's code pages), file
//! descriptors and threads gained (goal 0), pod folders left (goal 0).
//!
//! Then the same churn on the private containerd for `RKUBELET_BENCH_CONTAINERD_SOAK_SECS`
//! (default 600, the run; 0 skips it; `RKUBELET_BENCH_CONTAINERD_SOAK_PODS` pods a
//! wave, default 250), with what the runtime and the node keep
//! counted after the last wave (sandboxes, containers, shims, folders, cgroups, mounts:
//! goal 0).
// The bench helpers and the tests' helpers both carry the port picker.
#![allow(clippy::duplicate_mod)]

use std::time::Duration;

#[path = "common/mod.rs"]
mod bench;
#[allow(unused_imports, unused_macros)]
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code, unused_imports)]
#[path = "../tests/integration/soak.rs"]
mod soak;

use bench::{at_most, below};

fn main() {
    simulated();
    on_containerd();
}

fn on_containerd() {
    let secs: u64 = std::env::var("RKUBELET_BENCH_CONTAINERD_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    if secs == 0 {
        println!(
            "soak on containerd: long form only (RKUBELET_BENCH_CONTAINERD_SOAK_SECS=600, about 11 min); the test runs 5 waves of 30 pods"
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| bench::fail("soak", &format!("tokio runtime: {e}")));
    let pods: usize = std::env::var("RKUBELET_BENCH_CONTAINERD_SOAK_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(250);
    let (f, left) = runtime.block_on(soak::soak_containerd(
        "bsoak",
        pods,
        usize::MAX,
        Duration::from_secs(secs),
    ));
    println!(
        "soak on containerd: {secs} s, {} waves of {pods} pods ({} churned); slowest wave {:.1} s",
        f.waves,
        f.pods_churned,
        f.slowest_wave.as_secs_f64()
    );
    println!(
        "soak on containerd: resident KiB after each wave {:?}, anonymous {:?}; slope after the warm-up {:.3} KiB a pod churned anonymous ({}), {:.3} resident",
        f.rss_kib,
        f.anon_kib,
        f.slope_kib_per_pod,
        below(f.slope_kib_per_pod, 1.0, " KiB a pod"),
        f.rss_slope_kib_per_pod
    );
    println!(
        "soak on containerd: file descriptors {:?}, threads outside the blocking pool {:?}, the blocking pool at most {}; left after the last wave: {left:?} ({})",
        f.fds,
        f.threads,
        f.pool_threads,
        at_most(left.total() as f64, 0.0, " things left")
    );
}

fn simulated() {
    let secs = std::env::var("RKUBELET_BENCH_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let f = soak::soak_simulated(250, usize::MAX, Duration::from_secs(secs));
    println!(
        "soak: {secs} s, {} waves of 250 pods ({} churned) on a simulated node; slowest wave {:.1} s",
        f.waves,
        f.pods_churned,
        f.slowest_wave.as_secs_f64()
    );
    let first = f.rss_kib.get(2).copied().unwrap_or(0);
    let last = f.rss_kib.last().copied().unwrap_or(0);
    let anon_first = f.anon_kib.get(2).copied().unwrap_or(0);
    let anon_last = f.anon_kib.last().copied().unwrap_or(0);
    println!(
        "soak: resident memory after the warm-up {first} KiB, at the end {last} KiB (anonymous {anon_first} and {anon_last} KiB); slope {:.3} KiB a pod churned anonymous ({}), {:.3} resident",
        f.slope_kib_per_pod,
        below(f.slope_kib_per_pod, 1.0, " KiB a pod"),
        f.rss_slope_kib_per_pod
    );
    // The curve, not only its ends: a plateau (the allocator's high-water mark) and a
    // leak look alike at the two ends.
    let tenth = (f.rss_kib.len() / 10).max(1);
    let curve: Vec<String> = f
        .rss_kib
        .iter()
        .enumerate()
        .filter(|(w, _)| w % tenth == 0 || *w + 1 == f.rss_kib.len())
        .map(|(w, kib)| {
            let anon = f.anon_kib.get(w).copied().unwrap_or(0);
            format!("wave {}: {kib} KiB ({anon} anonymous)", w + 1)
        })
        .collect();
    println!("soak: resident memory along the run: {}", curve.join(", "));
    let fds = f.fds.1.saturating_sub(f.fds.0);
    let threads = f.threads.1.saturating_sub(f.threads.0);
    println!(
        "soak: file descriptors {} -> {} ({}); threads outside the blocking pool {} -> {} ({}); the blocking pool at most {} threads (its bound {}); pod folders left {} ({})",
        f.fds.0,
        f.fds.1,
        at_most(fds as f64, 0.0, " gained"),
        f.threads.0,
        f.threads.1,
        at_most(threads as f64, 0.0, " gained"),
        f.pool_threads,
        rkubelet::app::compose::MAX_BLOCKING_THREADS,
        f.pod_dirs_left,
        at_most(f.pod_dirs_left as f64, 0.0, "")
    );
}
