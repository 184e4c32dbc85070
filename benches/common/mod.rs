//! What every benchmark shares: each figure line with a goal ends in `met` or `NOT MET`,
//! and a bench that cannot measure (a peer missing, a step failing) exits non-zero.
#![allow(dead_code)] // each bench uses its own subset

/// `goal < {limit}{unit}: met`, or `NOT MET` when `value` is not below `limit`.
pub fn below(value: f64, limit: f64, unit: &str) -> String {
    format!("goal < {limit}{unit}: {}", verdict(value < limit))
}

/// `goal <= {limit}{unit}: met`, or `NOT MET` when `value` is above `limit`.
pub fn at_most(value: f64, limit: f64, unit: &str) -> String {
    format!("goal <= {limit}{unit}: {}", verdict(value <= limit))
}

/// The goal of a figure that could not be measured: never met.
pub fn unmeasured(limit: f64, unit: &str) -> String {
    format!("goal < {limit}{unit}: NOT MET, not measured")
}

pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT MET"
    }
}

/// Ends the bench with `bench: message` on stderr and a failing status.
pub fn fail(bench: &str, message: &str) -> ! {
    eprintln!("{bench}: FAILED: {message}");
    std::process::exit(1)
}
