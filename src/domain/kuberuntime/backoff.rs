//! Back-off: how long the kubelet waits before it tries again.
//!
//! The policy is upstream's: the first failure waits `initial` (10s), each further
//! failure doubles the wait up to `max` (300s), and a key quiet for more than
//! `2 * max` counts as stable again, so its next failure starts from `initial`.
//! Upstream adds no jitter for container or image back-off, nor do we, which keeps
//! this deterministic.
//!
//! Two users, two forms:
//! - **Crash-loop back-off is derived from what the runtime records** ([`restart_backoff`]),
//!   not kept in memory: a restarted rkubelet and the dry-run planner see the same wait
//!   as the running kubelet (upstream keeps it in memory, forgets it on restart and then
//!   restarts every crash-looping container at once).
//! - **Image pull back-off stays in memory** ([`Backoff`], keyed per pod and image): the
//!   runtime records no failed pull. Its time is a monotonic instant expressed as a
//!   `Duration` since any fixed origin the caller chooses.
//!
//! ## How the crash-loop wait is derived
//! The runtime keeps, for the newest instance of each container, its restart count
//! (`attempt`), when it started and exited, its spec hash, and the annotations the
//! kubelet created it with. Among those, rkubelet records the instance's *back-off
//! step* ([`CONTAINER_BACKOFF_STEP_ANNOTATION`]): how many quick failures came before
//! it in the current streak. When that instance has exited:
//! - the streak starts over (step 0) when the instance ran longer than `2 * max`
//!   (10 minutes; upstream's "stable" rule: its back-off entry would have expired
//!   between the restart and this exit) or when it was made from another spec
//!   (upstream keys back-off by the spec hash, so an edited container starts afresh);
//! - the wait is nothing at step 0 (upstream restarts a first failure at once),
//!   otherwise `initial * 2^(step - 1)`, capped at `max`: 10s, 20s, 40s, ... 300s;
//! - the next start is allowed at `finished_at + wait` (wall-clock), and the instance
//!   started then records `step + 1`.
//!
//! An instance without the annotation (created by an older rkubelet or another
//! kubelet) counts its restart count as its step, which is what the step is when the
//! streak never started over.
//!
//! [`CONTAINER_BACKOFF_STEP_ANNOTATION`]: crate::domain::kuberuntime::labels::CONTAINER_BACKOFF_STEP_ANNOTATION

use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::kuberuntime::runtime::{ContainerState, ContainerStatus};

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

    /// A pod sync that failed on the runtime (a call refused or timed out): the next sync
    /// after 2 s, doubling to upstream's 10 s pod worker back-off period, so a failing
    /// runtime is not asked again by every pod every 2 s.
    pub const SYNC_ERROR: BackoffPolicy = BackoffPolicy {
        initial: Duration::from_secs(2),
        max: Duration::from_secs(10),
    };

    /// How long a key must stay quiet before its back-off starts over.
    pub fn stable_after(&self) -> Duration {
        self.max.saturating_mul(2)
    }

    /// The wait after a failure at crash-loop `step`: none at step 0, then
    /// `initial`, doubling, capped at `max` (see the module documentation).
    pub fn delay_for_step(&self, step: u32) -> Duration {
        let Some(doublings) = step.checked_sub(1) else {
            return Duration::ZERO;
        };
        let initial = self.initial.min(self.max);
        // 2^31 times anything reaches the cap long before; saturate rather than overflow.
        let factor = 1u32.checked_shl(doublings.min(31)).unwrap_or(u32::MAX);
        initial.saturating_mul(factor).min(self.max)
    }
}

/// When a container whose newest instance is known may start again, derived from what
/// the runtime records (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartBackoff {
    /// The wait the newest instance's exit imposes (zero: none).
    pub delay: Duration,
    /// Wall-clock nanoseconds since the Unix epoch from which a start is allowed.
    pub allowed_from_unix_nanos: i64,
    /// The back-off step to record on the instance started next.
    pub next_step: u32,
}

impl RestartBackoff {
    /// How long from `now_unix_nanos` until a start is allowed; `None` when it is now.
    pub fn remaining(&self, now_unix_nanos: i64) -> Option<Duration> {
        let left = self.allowed_from_unix_nanos.saturating_sub(now_unix_nanos);
        // A finish time ahead of our clock never makes the wait longer than the delay.
        let left = Duration::from_nanos(u64::try_from(left).ok()?).min(self.delay);
        (!left.is_zero()).then_some(left)
    }
}

/// The back-off of a container about to be (re)started, whose newest instance is
/// `newest` (none: it never ran) and whose current spec hashes to `spec_hash`.
pub fn restart_backoff(
    policy: BackoffPolicy,
    newest: Option<&ContainerStatus>,
    spec_hash: u64,
) -> RestartBackoff {
    let Some(newest) = newest else {
        return RestartBackoff {
            delay: Duration::ZERO,
            allowed_from_unix_nanos: i64::MIN,
            next_step: 0,
        };
    };
    // A hash of 0 is "not reported": no evidence of a changed spec.
    let same_spec = newest.hash == 0 || newest.hash == spec_hash;
    let recorded = newest.backoff_step.unwrap_or(newest.attempt);
    if newest.state != ContainerState::Exited {
        // Never ran to an exit (created, unknown, or killed while running): no wait,
        // and a start that keeps failing does not reset the streak.
        return RestartBackoff {
            delay: Duration::ZERO,
            allowed_from_unix_nanos: i64::MIN,
            next_step: if same_spec { recorded } else { 0 },
        };
    }
    let ran_nanos = if newest.started_at_nanos > 0 {
        newest
            .finished_at_nanos
            .saturating_sub(newest.started_at_nanos)
    } else {
        0
    };
    let stable_nanos = i64::try_from(policy.stable_after().as_nanos()).unwrap_or(i64::MAX);
    let step = if !same_spec || ran_nanos > stable_nanos {
        0
    } else {
        recorded
    };
    let delay = policy.delay_for_step(step);
    RestartBackoff {
        delay,
        allowed_from_unix_nanos: newest
            .finished_at_nanos
            .saturating_add(i64::try_from(delay.as_nanos()).unwrap_or(i64::MAX)),
        next_step: step.saturating_add(1),
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

/// Per-key back-off state in memory (image pulls: the runtime records no failed
/// pull), as upstream's `flowcontrol.Backoff`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Backoff {
    policy: BackoffPolicy,
    entries: BTreeMap<String, Entry>,
}

/// Back-off key for pulling `image` for the pod `pod_uid` (upstream keys it the same way).
pub fn image_pull_key(pod_uid: &str, image: &str) -> String {
    format!("{pod_uid}_{image}")
}

impl Backoff {
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
    fn failed_syncs_back_off_from_2_s_to_upstreams_10_s() {
        let delays: Vec<Duration> = (0..6)
            .map(|n| BackoffPolicy::SYNC_ERROR.delay_for_step(n))
            .collect();
        assert_eq!(delays, [s(0), s(2), s(4), s(8), s(10), s(10)]);
    }

    #[test]
    fn unknown_key_is_not_in_backoff() {
        let b = Backoff::new(BackoffPolicy::CRASH_LOOP);
        assert_eq!(b.in_backoff("k", s(0)), None);
        assert!(b.is_empty());
    }

    #[test]
    fn delays_double_from_10s_and_cap_at_300s() {
        let mut b = Backoff::new(BackoffPolicy::default());
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
        let mut b = Backoff::new(BackoffPolicy::CRASH_LOOP);
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
        let mut b = Backoff::new(BackoffPolicy::CRASH_LOOP);
        b.record_failure("a", s(0));
        b.record_failure("a", s(10));
        b.record_failure("b", s(10));
        assert_eq!(b.current_delay("a"), Some(s(20)));
        assert_eq!(b.current_delay("b"), Some(s(10)));
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn failure_after_twice_max_of_quiet_restarts_at_initial() {
        let mut b = Backoff::new(BackoffPolicy::CRASH_LOOP);
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
        let mut b = Backoff::new(policy);
        b.record_failure("k", s(0));
        // initial is clamped to max.
        assert_eq!(b.current_delay("k"), Some(s(100)));
        assert_eq!(b.in_backoff("k", s(201)), None);
    }

    #[test]
    fn reset_forgets_the_key() {
        let mut b = Backoff::new(BackoffPolicy::CRASH_LOOP);
        b.record_failure("k", s(0));
        b.record_failure("k", s(10));
        b.reset("k");
        assert_eq!(b.in_backoff("k", s(11)), None);
        b.record_failure("k", s(12));
        assert_eq!(b.current_delay("k"), Some(s(10)));
    }

    #[test]
    fn gc_drops_only_stable_keys() {
        let mut b = Backoff::new(BackoffPolicy::CRASH_LOOP);
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
    fn image_pull_key_is_pod_and_image() {
        assert_eq!(image_pull_key("uid", "busybox:1.36"), "uid_busybox:1.36");
        assert_ne!(image_pull_key("a", "x"), image_pull_key("b", "x"));
    }

    // ---- crash-loop back-off derived from the runtime's record ----

    const SEC: i64 = 1_000_000_000;
    const T0: i64 = 1_700_000_000 * SEC;

    /// An instance of `app` that started at `started` and exited at `finished` (seconds
    /// after T0), with restart count `attempt` and, when given, a recorded step.
    fn exited(attempt: u32, step: Option<u32>, started: i64, finished: i64) -> ContainerStatus {
        ContainerStatus {
            attempt,
            backoff_step: step,
            hash: 7,
            started_at_nanos: T0 + started * SEC,
            finished_at_nanos: T0 + finished * SEC,
            ..ContainerStatus::new("c", "app", ContainerState::Exited)
        }
    }

    fn derived(newest: &ContainerStatus) -> RestartBackoff {
        restart_backoff(BackoffPolicy::CRASH_LOOP, Some(newest), 7)
    }

    #[test]
    fn step_delays_start_at_none_then_double_from_10s_to_300s() {
        let p = BackoffPolicy::CRASH_LOOP;
        let seen: Vec<u64> = (0..9).map(|n| p.delay_for_step(n).as_secs()).collect();
        assert_eq!(seen, vec![0, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(p.delay_for_step(u32::MAX), s(300));
    }

    #[test]
    fn a_container_that_never_ran_starts_at_once_at_step_0() {
        let b = restart_backoff(BackoffPolicy::CRASH_LOOP, None, 7);
        assert_eq!(b.delay, Duration::ZERO);
        assert_eq!(b.remaining(T0), None);
        assert_eq!(b.next_step, 0);
    }

    #[test]
    fn the_first_exit_restarts_at_once_and_later_ones_wait_from_the_exit_time() {
        // Instance 0 exits: restart now; the next instance records step 1.
        let first = derived(&exited(0, Some(0), 0, 5));
        assert_eq!((first.delay, first.next_step), (Duration::ZERO, 1));
        assert_eq!(first.remaining(T0 + 5 * SEC), None);
        // Instance 1 exits at +20s: 10 s from its exit time.
        let second = derived(&exited(1, Some(1), 6, 20));
        assert_eq!(second.delay, s(10));
        assert_eq!(second.allowed_from_unix_nanos, T0 + 30 * SEC);
        assert_eq!(second.remaining(T0 + 20 * SEC), Some(s(10)));
        assert_eq!(second.remaining(T0 + 24 * SEC), Some(s(6)));
        assert_eq!(second.remaining(T0 + 30 * SEC), None, "due exactly then");
        assert_eq!(second.next_step, 2);
        // A long-crashing one is capped at 5 minutes.
        assert_eq!(derived(&exited(9, Some(9), 0, 1)).delay, s(300));
    }

    #[test]
    fn a_restarted_kubelet_or_the_planner_sees_the_same_wait() {
        // The same record gives the same answer whoever asks, whenever: only `now` moves.
        let record = exited(3, Some(3), 100, 110);
        let a = derived(&record);
        let b = derived(&record.clone());
        assert_eq!(a, b);
        assert_eq!(a.delay, s(40));
        assert_eq!(a.remaining(T0 + 130 * SEC), Some(s(20)));
    }

    #[test]
    fn without_the_annotation_the_restart_count_is_the_step() {
        assert_eq!(derived(&exited(0, None, 0, 1)).delay, Duration::ZERO);
        assert_eq!(derived(&exited(2, None, 0, 1)).delay, s(20));
        assert_eq!(derived(&exited(2, None, 0, 1)).next_step, 3);
    }

    #[test]
    fn an_instance_that_ran_longer_than_twice_max_starts_the_streak_over() {
        // Exactly 2*max of running is not yet stable ...
        let at_limit = derived(&exited(8, Some(6), 0, 600));
        assert_eq!((at_limit.delay, at_limit.next_step), (s(300), 7));
        // ... one second more is: restart at once, and the next failure waits 10 s.
        let stable = derived(&exited(8, Some(6), 0, 601));
        assert_eq!((stable.delay, stable.next_step), (Duration::ZERO, 1));
        assert_eq!(stable.remaining(T0 + 601 * SEC), None);
        let next = derived(&exited(9, Some(stable.next_step), 601, 603));
        assert_eq!(next.delay, s(10));
    }

    #[test]
    fn a_changed_spec_starts_afresh() {
        // Upstream keys its back-off by the spec hash: an edit gives a fresh start.
        let edited = restart_backoff(
            BackoffPolicy::CRASH_LOOP,
            Some(&exited(5, Some(5), 0, 1)),
            8,
        );
        assert_eq!((edited.delay, edited.next_step), (Duration::ZERO, 1));
        // An unreported hash (0) is no evidence of an edit.
        let mut unknown = exited(5, Some(5), 0, 1);
        unknown.hash = 0;
        assert_eq!(derived(&unknown).delay, s(160));
    }

    #[test]
    fn an_instance_that_did_not_exit_imposes_no_wait_but_keeps_its_step() {
        let mut created = exited(4, Some(4), 0, 0);
        created.state = ContainerState::Created;
        let b = derived(&created);
        assert_eq!((b.delay, b.next_step), (Duration::ZERO, 4));
        assert_eq!(b.remaining(T0), None);
        let b = restart_backoff(BackoffPolicy::CRASH_LOOP, Some(&created), 9);
        assert_eq!(b.next_step, 0, "another spec: the streak starts over");
    }

    #[test]
    fn an_exit_time_ahead_of_our_clock_never_waits_longer_than_the_delay() {
        let b = derived(&exited(1, Some(1), 0, 100));
        assert_eq!(b.remaining(T0), Some(s(10)));
        // Never started (no start time): the instance counts as a quick failure.
        let b = derived(&exited(2, Some(2), -T0 / SEC, 100));
        assert_eq!(b.delay, s(20));
    }
}
