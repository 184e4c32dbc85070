//! Quiet failure logging for loops that retry: the first failure is logged, then at most one
//! line a minute with the count, and one line when it works again. An API server outage
//! then costs a handful of log lines, not one per attempt.

use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, warn};

/// How often a failure that goes on is logged again.
pub const REPEAT_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct FailureLog {
    what: &'static str,
    failures: u32,
    since: Option<Instant>,
    last_logged: Option<Instant>,
}

impl FailureLog {
    pub fn new(what: &'static str) -> Self {
        FailureLog {
            what,
            failures: 0,
            since: None,
            last_logged: None,
        }
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Record a failure; returns whether it was logged.
    pub fn failed(&mut self, error: &dyn std::error::Error) -> bool {
        let now = Instant::now();
        self.failures = self.failures.saturating_add(1);
        self.since.get_or_insert(now);
        let due = self
            .last_logged
            .is_none_or(|last| now.duration_since(last) >= REPEAT_EVERY);
        if due {
            self.last_logged = Some(now);
            warn!(
                what = self.what,
                failures = self.failures,
                error = %crate::ports::error::Chain(error),
                "{} failed; retrying with back-off", self.what
            );
        }
        due
    }

    /// Record a success; logs the recovery when there were failures.
    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            let lasted = self.since.map(|s| s.elapsed()).unwrap_or_default();
            info!(
                what = self.what,
                failures = self.failures,
                after_s = lasted.as_secs_f64(),
                "{} works again",
                self.what
            );
        }
        self.failures = 0;
        self.since = None;
        self.last_logged = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn logs_the_first_failure_then_once_a_minute() {
        let mut log = FailureLog::new("lease renewal");
        let error = std::io::Error::other("connection refused");
        let mut logged = 0;
        // Two minutes of failures every 7 s.
        for _ in 0..18 {
            if log.failed(&error) {
                logged += 1;
            }
            tokio::time::sleep(Duration::from_secs(7)).await;
        }
        // At 0 s and 63 s.
        assert_eq!(logged, 2);
        assert_eq!(log.failures(), 18);
        log.succeeded();
        assert_eq!(log.failures(), 0);
        assert!(log.failed(&error));
    }
}
