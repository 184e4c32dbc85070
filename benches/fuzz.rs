//! The fuzz targets' long runs (fuzz/targets.rs): each parser that takes outside input
//! (static pod manifests, the KubeletConfiguration file in YAML, JSON and TOML, the
//! command line, flag values and units with eviction thresholds, the kubelet API's
//! request targets, API pods through decoding and admission, kubeconfig files, and the
//! CRI responses the adapter maps) on `RKUBELET_BENCH_FUZZ_CASES` generated and
//! mutated inputs (default 50,000 a target), from `RKUBELET_FUZZ_SEED` (default: the
//! time, printed). Figures: executions, their rate, the slowest input (goal < 1 s) and
//! the failures (panics or errors without a message; goal 0, the shrunk input printed).

#[path = "common/mod.rs"]
mod bench;
#[path = "../fuzz/targets.rs"]
mod fuzz_targets;

use bench::{at_most, below, env_number};

pub fn main() {
    let cases =
        u32::try_from(env_number::<u64>("RKUBELET_BENCH_FUZZ_CASES", 50_000)).unwrap_or(u32::MAX);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let seed = env_number("RKUBELET_FUZZ_SEED", now);
    let mut failed = 0;
    for target in fuzz_targets::targets() {
        let report = fuzz_targets::run(&target, cases, seed);
        let slowest_ms = report.slowest.as_secs_f64() * 1e3;
        let failures = usize::from(report.failure.is_some());
        println!(
            "fuzz {}: {} executions in {:.1} s ({:.0}/s), seed {seed}; slowest input {slowest_ms:.1} ms ({}); failures {failures} ({})",
            report.target,
            report.executions,
            report.took.as_secs_f64(),
            f64::from(report.executions) / report.took.as_secs_f64().max(1e-9),
            below(slowest_ms, 1000.0, " ms"),
            at_most(failures as f64, 0.0, "")
        );
        if let Some(failure) = report.failure {
            println!("fuzz {}: failing input: {failure}", report.target);
            failed += 1;
        }
    }
    println!("fuzz: targets with a failure: {failed}");
}
