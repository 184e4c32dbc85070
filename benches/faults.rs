//! The long forms of two fault tests (tests/integration/faults.rs, issue 17), run side by
//! side on their own peers:
//! - fault 5: the CRI list calls hang until upstream's PLEG threshold (3 minutes) makes
//!   `/healthz` fail; then the runtime answers again. Figures: the stall to `/healthz`
//!   500 (goal: upstream's 180 s, within one 10 s health period), and the catch-up of
//!   the add and removal made meanwhile (goal < 30 s).
//! - fault 3: the API server stopped for 5 minutes under a connected rkubelet with static
//!   and API pods. Figures: the node's connection attempts a minute in the outage's second
//!   half (goal <= 30,
//!   the Lease's back-off capped at 7 s), the Lease renewed after the return (goal
//!   < 15 s), the node status patched, static pod containers restarted (goal 0), an API
//!   pod deleted during the outage (through a second API server) gone after it.
//!
//! - fault 2: containerd killed with SIGKILL under a connected rkubelet with 30 pods, then
//!   started again. Figures: containerd's return to rkubelet's first good relist (goal
//!   < 5 s, without a restart of its own), to the 30 pods running and to `Ready` True;
//!   containers adopted, recreated, lost by containerd itself and duplicated (goal 0).
//! - fault 6 (decoder half): each manifest at the limits (10 MiB, 1,000 containers,
//!   100,000 env vars) decoded or refused in this release build (goal < 5 s each).
//!
//! `RKUBELET_BENCH_OUTAGE_SECS` shortens the outage; `RKUBELET_BENCH_PLEG_STALL=0` holds
//! the CRI calls for 30 s only, as the test does (no `/healthz` figure: the 3-minute wait
//! is the long form's). `RKUBELET_BENCH_FAULT_PEERS=0` (CI's form) runs fault 6 alone:
//! the short forms of faults 2, 3 and 5 are the integration tests themselves (the same
//! functions, every goal above asserted there, their figures printed by nextest), so CI
//! runs them once, as tests. Needs root, containerd and the
//! control plane's binaries; fails, saying which is missing, without them.

use std::time::Duration;

#[path = "common/mod.rs"]
mod bench;
// The fault tests name the tests' helpers `crate::common` (benches/in_process.rs).
#[allow(dead_code, unused_imports)]
#[path = "../tests/integration/faults.rs"]
mod faults;

use bench::{at_most, below, fail};
use faults::{
    api_server_outage, containerd_restart, decode_limit_manifests, slow_and_failing_cri, Stall,
};

pub fn main() {
    for d in decode_limit_manifests() {
        let ms = d.took.as_secs_f64() * 1e3;
        let peak = d.peak_above_kib.map_or("unmeasured".into(), |k| {
            format!("{:.1} MiB", k as f64 / 1024.0)
        });
        println!(
            "faults: manifest at the limits {} ({} bytes): {} in {ms:.0} ms ({}); peak memory above the text's {peak}",
            d.name,
            d.size,
            d.outcome,
            below(ms, 5_000.0, " ms")
        );
    }
    if std::env::var("RKUBELET_BENCH_FAULT_PEERS").is_ok_and(|v| v == "0") {
        println!(
            "faults: CRI stall, API server outage, containerd restart: short forms run as the tests faults::slow_and_failing_cri_calls_are_retried_and_no_worker_is_stuck, faults::an_api_server_outage_restarts_nothing_and_the_lease_resumes, faults::containerd_killed_and_restarted_under_30_pods (their FIGURE lines above); long forms with RKUBELET_BENCH_FAULT_PEERS=1"
        );
        return;
    }
    let outage = std::env::var("RKUBELET_BENCH_OUTAGE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail("faults", &format!("tokio runtime: {e}")));
    runtime.block_on(async {
        let until_unhealthy = std::env::var("RKUBELET_BENCH_PLEG_STALL").map_or(true, |v| v != "0");
        let stall_kind = if until_unhealthy {
            Stall::UntilUnhealthy
        } else {
            Stall::For(Duration::from_secs(30))
        };
        let stall = tokio::spawn(slow_and_failing_cri("b5cri", stall_kind));
        let api = tokio::spawn(api_server_outage("b3", Duration::from_secs(outage)));
        let restart = tokio::spawn(containerd_restart("b2"));
        match stall.await {
            Ok(f) => {
                if until_unhealthy {
                    let unhealthy = f.unhealthy_after.map_or(f64::MAX, |d| d.as_secs_f64());
                    println!(
                        "faults: CRI list calls hanging to /healthz 500: {unhealthy:.0} s ({})",
                        at_most(unhealthy, 190.0, " s, upstream's 180 s threshold")
                    );
                } else {
                    println!(
                        "faults: CRI list calls hanging to /healthz 500: long form only (RKUBELET_BENCH_PLEG_STALL=1, 3 minutes); held 30 s here"
                    );
                }
                let caught_up = f.caught_up.as_secs_f64();
                println!(
                    "faults: runtime back to the add and removal made in the stall done: {caught_up:.1} s ({})",
                    below(caught_up, 30.0, " s")
                );
                println!(
                    "faults: 10 pods through 10 % failing and 10 % held CRI calls: running after {:.1} s; calls {}, failed {}, held {}; duplicated {} ({})",
                    f.pods_running.as_secs_f64(),
                    f.calls.0,
                    f.calls.1,
                    f.calls.2,
                    f.duplicated,
                    at_most(f.duplicated as f64, 0.0, "")
                );
            }
            Err(e) => fail("faults", &format!("the CRI stall run failed: {e}")),
        }
        match api.await {
            Ok(f) => {
                let minutes = outage as f64 / 60.0;
                let per_minute = f.attempts as f64 / minutes;
                let steady = f.attempts_second_half as f64 / (minutes / 2.0);
                println!(
                    "faults: {outage} s API server outage: {} connection attempts, {per_minute:.1} a minute; {steady:.1} a minute in its second half ({}); {} log lines",
                    f.attempts,
                    at_most(steady, 30.0, " a minute"),
                    f.log_lines
                );
                let lease = f.lease.as_secs_f64();
                println!(
                    "faults: API server back to the Lease renewed: {lease:.1} s ({})",
                    below(lease, 15.0, " s")
                );
                println!(
                    "faults: API server back to the node status patched: {:.1} s",
                    f.status.as_secs_f64()
                );
                println!(
                    "faults: static and API pod containers restarted across the outage: {} ({})",
                    f.restarted,
                    at_most(f.restarted as f64, 0.0, "")
                );
                println!(
                    "faults: API server back to the API pod deleted in the outage gone (runtime and API) {:.1} s, to a new API pod running {:.1} s, to a deleted one gone {:.1} s",
                    f.deleted_in_outage_gone.as_secs_f64(),
                    f.new_pod_running.as_secs_f64(),
                    f.deleted_pod_gone.as_secs_f64()
                );
            }
            Err(e) => fail("faults", &format!("the API server outage run failed: {e}")),
        }
        match restart.await {
            Ok(f) => {
                let reconnect = f.reconnect.as_secs_f64();
                println!(
                    "faults: containerd killed to the node Ready False: {:.1} s; containerd back to rkubelet's first good relist: {reconnect:.2} s ({})",
                    f.not_ready.as_secs_f64(),
                    below(reconnect, 5.0, " s, without a restart of rkubelet")
                );
                println!(
                    "faults: containerd back to its 30 pods running: {:.1} s, to Ready True: {:.1} s; containers adopted {}, recreated {}, lost by containerd {}, duplicated {} ({})",
                    f.pods_running.as_secs_f64(),
                    f.ready.as_secs_f64(),
                    f.adopted,
                    f.recreated,
                    f.lost,
                    f.duplicated,
                    at_most(f.duplicated as f64, 0.0, "")
                );
            }
            Err(e) => fail("faults", &format!("the containerd restart run failed: {e}")),
        }
    });
}
