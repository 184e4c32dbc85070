//! How long the tests wait: [`patience`].

use std::time::Duration;

/// How long a test waits for something it expects, given what it takes on a quiet
/// machine: `secs` times `RKUBELET_TEST_PATIENCE` (3 unless set). A wait's budget only
/// tells a failure from a slow machine, so it is generous: on the landing CI of
/// 2026-11-30 a control plane came up in 33 s (8 to 11 s here), a sandbox took 1.5 s to
/// create, the test step took about three times as long, and five tests waiting on many
/// pods or on deletions failed. What a wait measures against a goal is the benchmarks'
/// to judge.
pub fn patience(secs: u64) -> Duration {
    let factor = std::env::var("RKUBELET_TEST_PATIENCE")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f >= 1.0)
        .unwrap_or(3.0);
    Duration::from_secs_f64(secs as f64 * factor)
}
