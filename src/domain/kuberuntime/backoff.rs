//! Crash-loop back-off: how long a failed container must wait before the
//! kubelet starts it again.
//!
//! Same policy as the upstream kubelet: the first failure waits `initial`
//! (10s), each further failure doubles the wait up to `max` (300s), and a
//! key whose last failure is more than `2 * max` old counts as stable again,
//! so its next failure starts from `initial`. Upstream adds no jitter for
//! container back-off, and neither do we, which keeps this deterministic.
//!
//! Time is a value: every method takes `now`, a monotonic instant expressed
//! as a `Duration` since any fixed origin the caller chooses.

use std::collections::BTreeMap;
use std::time::Duration;

/// Delay bounds of an exponential back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    pub initial: Duration,
    pub max: Duration,
}

impl BackoffPolicy {
    /// The kubelet's container crash-loop policy: 10s doubling to 5 minutes.
    pub const CRASH_LOOP: BackoffPolicy = BackoffPolicy {
        initial: Duration::from_secs(10),
        max: Duration::from_secs(300),
    };

    /// How long a key must stay quiet before its back-off starts over.
    pub fn stable_after(&self) -> Duration {
        self.max.saturating_mul(2)
    }
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self::CRASH_LOOP
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// Wait imposed by the latest failure.
    delay: Duration,
    /// When the latest failure was recorded.
    last_failure: Duration,
}

/// Per-key back-off state, keyed by [`crash_loop_key`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CrashLoopBackoff {
    policy: BackoffPolicy,
    entries: BTreeMap<String, Entry>,
}

/// Back-off key for one container of one pod.
///
/// The spec hash is part of the key, as upstream does, so that editing a
/// crash-looping container's definition gives the new version a fresh start
/// instead of inheriting the old version's five-minute wait.
pub fn crash_loop_key(pod_uid: &str, container_name: &str, spec_hash: u64) -> String {
    format!("{pod_uid}_{container_name}_{spec_hash:x}")
}

impl CrashLoopBackoff {
    pub fn new(policy: BackoffPolicy) -> Self {
        Self {
            policy,
            entries: BTreeMap::new(),
        }
    }

    pub fn policy(&self) -> BackoffPolicy {
        self.policy
    }

    fn expired(&self, entry: &Entry, now: Duration) -> bool {
        now.saturating_sub(entry.last_failure) > self.policy.stable_after()
    }

    /// Remaining wait for `key` at `now`, or `None` when it may start.
    pub fn in_backoff(&self, key: &str, now: Duration) -> Option<Duration> {
        let entry = self.entries.get(key)?;
        if self.expired(entry, now) {
            return None;
        }
        // A `now` earlier than the failure (caller mixed clocks) is treated
        // as "just failed" rather than underflowing.
        let elapsed = now.saturating_sub(entry.last_failure);
        entry.delay.checked_sub(elapsed).filter(|d| !d.is_zero())
    }

    /// The wait the latest failure of `key` imposed, whether or not it has
    /// elapsed yet (what the "back-off Ns restarting failed container"
    /// message reports).
    pub fn current_delay(&self, key: &str) -> Option<Duration> {
        self.entries.get(key).map(|e| e.delay)
    }

    /// Records a failure of `key` at `now` and sets its next wait.
    pub fn record_failure(&mut self, key: &str, now: Duration) {
        let initial = self.policy.initial.min(self.policy.max);
        let delay = match self.entries.get(key) {
            Some(entry) if !self.expired(entry, now) => {
                entry.delay.saturating_mul(2).min(self.policy.max)
            }
            _ => initial,
        };
        self.entries.insert(
            key.to_owned(),
            Entry {
                delay,
                last_failure: now,
            },
        );
    }

    /// Forgets `key`, e.g. when its pod is deleted.
    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Drops every key that has been quiet long enough to count as stable;
    /// such entries would be ignored anyway, this only bounds memory.
    pub fn gc(&mut self, now: Duration) {
        let stable_after = self.policy.stable_after();
        self.entries
            .retain(|_, e| now.saturating_sub(e.last_failure) <= stable_after);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn unknown_key_is_not_in_backoff() {
        let b = CrashLoopBackoff::new(BackoffPolicy::CRASH_LOOP);
        assert_eq!(b.in_backoff("k", s(0)), None);
        assert!(b.is_empty());
    }

    #[test]
    fn delays_double_from_10s_and_cap_at_300s() {
        let mut b = CrashLoopBackoff::new(BackoffPolicy::default());
        let mut now = s(1_000);
        let mut seen = Vec::new();
        for _ in 0..8 {
            b.record_failure("k", now);
            let delay = b.current_delay("k").expect("entry exists");
            seen.push(delay.as_secs());
            // The container fails again right after its wait is over.
            now += delay;
        }
        assert_eq!(seen, vec![10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn remaining_wait_counts_down_from_the_failure() {
        let mut b = CrashLoopBackoff::new(BackoffPolicy::CRASH_LOOP);
        b.record_failure("k", s(100));
        assert_eq!(b.in_backoff("k", s(100)), Some(s(10)));
        assert_eq!(b.in_backoff("k", s(104)), Some(s(6)));
        assert_eq!(b.in_backoff("k", s(110)), None);
        assert_eq!(b.in_backoff("k", s(150)), None);
        // A clock reading before the failure is clamped to "just failed".
        assert_eq!(b.in_backoff("k", s(90)), Some(s(10)));
    }

    #[test]
    fn keys_are_independent() {
        let mut b = CrashLoopBackoff::new(BackoffPolicy::CRASH_LOOP);
        b.record_failure("a", s(0));
        b.record_failure("a", s(10));
        b.record_failure("b", s(10));
        assert_eq!(b.current_delay("a"), Some(s(20)));
        assert_eq!(b.current_delay("b"), Some(s(10)));
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn failure_after_twice_max_of_quiet_restarts_at_initial() {
        let mut b = CrashLoopBackoff::new(BackoffPolicy::CRASH_LOOP);
        for t in [0, 10, 30, 70] {
            b.record_failure("k", s(t));
        }
        assert_eq!(b.current_delay("k"), Some(s(80)));
        // Exactly 2*max after the last failure is not yet stable ...
        b.record_failure("k", s(70 + 600));
        assert_eq!(b.current_delay("k"), Some(s(160)));
        // ... one tick past it is.
        b.record_failure("k", s(670 + 601));
        assert_eq!(b.current_delay("k"), Some(s(10)));
    }

    #[test]
    fn expired_entry_is_not_in_backoff_even_if_delay_is_huge() {
        let policy = BackoffPolicy {
            initial: s(1_000),
            max: s(100),
        };
        let mut b = CrashLoopBackoff::new(policy);
        b.record_failure("k", s(0));
        // initial is clamped to max.
        assert_eq!(b.current_delay("k"), Some(s(100)));
        assert_eq!(b.in_backoff("k", s(201)), None);
    }

    #[test]
    fn reset_forgets_the_key() {
        let mut b = CrashLoopBackoff::new(BackoffPolicy::CRASH_LOOP);
        b.record_failure("k", s(0));
        b.record_failure("k", s(10));
        b.reset("k");
        assert_eq!(b.in_backoff("k", s(11)), None);
        b.record_failure("k", s(12));
        assert_eq!(b.current_delay("k"), Some(s(10)));
    }

    #[test]
    fn gc_drops_only_stable_keys() {
        let mut b = CrashLoopBackoff::new(BackoffPolicy::CRASH_LOOP);
        b.record_failure("old", s(0));
        b.record_failure("fresh", s(500));
        b.gc(s(600));
        assert_eq!(b.len(), 2, "exactly 2*max old is kept");
        b.gc(s(601));
        assert_eq!(b.len(), 1);
        assert!(b.current_delay("old").is_none());
        assert!(b.current_delay("fresh").is_some());
    }

    #[test]
    fn key_changes_with_spec_hash() {
        assert_eq!(crash_loop_key("uid", "app", 255), "uid_app_ff");
        assert_ne!(
            crash_loop_key("uid", "app", 1),
            crash_loop_key("uid", "app", 2)
        );
    }
}
