//! The benchmarks that time code in their own process (the domain's decisions, the
//! adapters they drive, parsers, compression), in one harness: the optimized build links
//! the crate with LTO once for all nine rather than once each, and shares its
//! dependencies and the library with the rkubelet binary the other benchmarks start (one
//! `release-unwind` build; see scripts/test.sh). Each is a module with its own `main`, as
//! it was a harness of its own.
//!
//! `cargo bench --profile release-unwind --bench in_process` runs them all in turn;
//! `-- planner volumes` runs those named. A bench that cannot measure (a peer missing, a
//! step failing) exits non-zero, as before.

// The shared helpers (tests/common, benches/common) are modules of several benches, and
// a bench may hold a helper module of its own name (`cgroups::cgroups`).
#![allow(clippy::duplicate_mod, clippy::module_inception)]

// `crate::common`: the tests' helpers, as the fault tests (tests/integration/faults.rs)
// and the control-plane helper (tests/common/cluster.rs) name them.
#[allow(unused_imports, unused_macros)]
#[path = "../tests/common/mod.rs"]
mod common;

#[path = "cgroups.rs"]
mod cgroups;
#[path = "cgroups_systemd.rs"]
mod cgroups_systemd;
#[path = "devices.rs"]
mod devices;
#[path = "eviction.rs"]
mod eviction;
#[path = "faults.rs"]
mod faults;
#[path = "fuzz.rs"]
mod fuzz;
#[path = "log_rotation.rs"]
mod log_rotation;
#[path = "planner.rs"]
mod planner;
#[path = "volumes.rs"]
mod volumes;

/// Each bench by the name it had as a harness of its own, in the order CI runs them.
const BENCHES: [(&str, fn()); 9] = [
    ("cgroups", cgroups::main),
    ("cgroups_systemd", cgroups_systemd::main),
    ("planner", planner::main),
    ("faults", faults::main),
    ("fuzz", fuzz::main),
    ("eviction", eviction::main),
    ("volumes", volumes::main),
    ("log_rotation", log_rotation::main),
    ("devices", devices::main),
];

fn main() {
    // `cargo bench` passes `--bench`; names pick benches.
    let picked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if let Some(unknown) = picked
        .iter()
        .find(|p| !BENCHES.iter().any(|(name, _)| name == p))
    {
        let names: Vec<&str> = BENCHES.iter().map(|(name, _)| *name).collect();
        eprintln!(
            "in_process: no bench {unknown:?} (the benches: {})",
            names.join(", ")
        );
        std::process::exit(2);
    }
    for (name, run) in BENCHES {
        if picked.is_empty() || picked.iter().any(|p| p == name) {
            run();
        }
    }
}
