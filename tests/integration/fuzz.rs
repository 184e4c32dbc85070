//! The fuzz targets' short runs (fuzz/targets.rs; the bench `fuzz` runs them long): each
//! parser that takes outside input answers arbitrary and mutated inputs with a value or
//! a typed error that says something, and never panics. `RKUBELET_FUZZ_CASES` sets the
//! inputs per target (default 2,000), `RKUBELET_FUZZ_SEED` the seed (default: the time,
//! printed, so a failure can be replayed).

use crate::fuzz_targets::{run, targets};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn every_parser_answers_fuzzed_input_without_panicking() {
    let cases = u32::try_from(env_number("RKUBELET_FUZZ_CASES", 2_000)).unwrap_or(u32::MAX);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let seed = env_number("RKUBELET_FUZZ_SEED", now);
    let mut failures = Vec::new();
    for target in targets() {
        let report = run(&target, cases, seed);
        println!(
            "FIGURE fuzz {}: {} executions in {:.1} s, slowest {:.1} ms, seed {seed}",
            report.target,
            report.executions,
            report.took.as_secs_f64(),
            report.slowest.as_secs_f64() * 1e3
        );
        if let Some(failure) = report.failure {
            failures.push(format!("{} (seed {seed}): {failure}", report.target));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
