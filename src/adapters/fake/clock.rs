use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::ports::clock::Clock;

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct FakeClock {
    unix_nanos: AtomicI64,
    monotonic_nanos: AtomicU64,
}

impl FakeClock {
    /// Starts at `unix_nanos` wall-clock time and 0 monotonic time.
    pub fn new(unix_nanos: i64) -> Self {
        Self {
            unix_nanos: AtomicI64::new(unix_nanos),
            monotonic_nanos: AtomicU64::new(0),
        }
    }

    /// Jumps the wall clock (as NTP may); monotonic time is left alone.
    pub fn set_unix_nanos(&self, unix_nanos: i64) {
        self.unix_nanos.store(unix_nanos, Ordering::SeqCst);
    }

    /// Moves both clocks forward by `by`.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let signed = i64::try_from(nanos).unwrap_or(i64::MAX);
        self.unix_nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(signed))
            })
            .ok();
        self.monotonic_nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(nanos))
            })
            .ok();
    }
}

impl Clock for FakeClock {
    fn now_unix_nanos(&self) -> i64 {
        self.unix_nanos.load(Ordering::SeqCst)
    }

    fn monotonic_nanos(&self) -> u64 {
        self.monotonic_nanos.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_moves_both_clocks_and_set_moves_only_wall_time() {
        let clock = FakeClock::new(1_000);
        clock.advance(Duration::from_nanos(500));
        assert_eq!(clock.now_unix_nanos(), 1_500);
        assert_eq!(clock.monotonic_nanos(), 500);
        clock.set_unix_nanos(10);
        assert_eq!(clock.now_unix_nanos(), 10);
        assert_eq!(clock.monotonic_nanos(), 500);
    }

    #[test]
    fn advance_saturates() {
        let clock = FakeClock::new(i64::MAX - 1);
        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.now_unix_nanos(), i64::MAX);
    }
}
