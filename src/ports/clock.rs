//! Time, behind a port so loops and start-up run deterministically in tests.

/// A source of wall-clock and monotonic time.
pub trait Clock: Send + Sync {
    /// Wall-clock time as nanoseconds since the Unix epoch (negative before 1970).
    fn now_unix_nanos(&self) -> i64;
    /// Nanoseconds on a clock that never goes back; only differences are meaningful.
    fn monotonic_nanos(&self) -> u64;
}
