use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::ports::clock::Clock;

/// The real clocks. Monotonic time counts from this value's creation: `Instant` is the only
/// infallible monotonic source in std, and callers only subtract readings.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_unix_nanos(&self) -> i64 {
        // Saturate instead of wrapping: i64 nanoseconds last until 2262.
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
            Err(before) => i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |n| -n),
        }
    }

    fn monotonic_nanos(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_is_after_2020_and_monotonic_does_not_go_back() {
        let clock = SystemClock::new();
        assert!(clock.now_unix_nanos() > 1_577_836_800_000_000_000);
        let a = clock.monotonic_nanos();
        let b = clock.monotonic_nanos();
        assert!(b >= a);
    }
}
