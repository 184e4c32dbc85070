//! When the pod loop last came round, for the kubelet API's `syncloop` health check
//! (decided by `domain::kubelet_api::healthz::sync_loop_health`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::domain::kubelet_api::healthz::sync_loop_health;
use crate::ports::clock::Clock;

pub struct SyncLoopHealth {
    clock: Arc<dyn Clock>,
    resync_period: Duration,
    /// Monotonic nanoseconds of the loop's last entry, plus one; 0 before the first.
    last: AtomicU64,
}

impl SyncLoopHealth {
    pub fn new(clock: Arc<dyn Clock>, resync_period: Duration) -> Arc<Self> {
        Arc::new(Self {
            clock,
            resync_period,
            last: AtomicU64::new(0),
        })
    }

    /// The loop comes round now.
    pub(super) fn entered(&self) {
        let now = self.clock.monotonic_nanos();
        self.last.store(now.saturating_add(1), Ordering::Relaxed);
    }

    /// `Err` with upstream's message when the loop has not come round for too long.
    pub fn check(&self) -> Result<(), String> {
        let last = self.last.load(Ordering::Relaxed).checked_sub(1);
        sync_loop_health(last, self.clock.monotonic_nanos(), self.resync_period)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::FakeClock;

    #[test]
    fn a_loop_that_stops_coming_round_fails_the_check() {
        let clock = Arc::new(FakeClock::new(0));
        let health = SyncLoopHealth::new(clock.clone(), Duration::from_secs(60));
        assert_eq!(health.check(), Ok(()));
        health.entered();
        clock.advance(Duration::from_secs(300));
        assert_eq!(health.check(), Ok(()));
        clock.advance(Duration::from_secs(1));
        assert!(health.check().is_err());
        health.entered();
        assert_eq!(health.check(), Ok(()));
    }
}
