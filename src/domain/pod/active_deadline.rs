//! `spec.activeDeadlineSeconds`: how long a pod may be active on the node, counted from
//! its `status.startTime` (upstream's `activeDeadlineHandler`). A pod past it is killed
//! and ends `Failed` with reason `DeadlineExceeded`, never started again.

use std::time::Duration;

use super::PodSpec;

/// Upstream's reason for the status and the event.
pub const DEADLINE_EXCEEDED_REASON: &str = "DeadlineExceeded";
/// Upstream's message for the status and the event.
pub const DEADLINE_EXCEEDED_MESSAGE: &str =
    "Pod was active on the node longer than the specified deadline";

/// Where a pod stands against its active deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveDeadline {
    /// No deadline, or no start time yet (upstream counts nothing before one).
    Unbounded,
    /// Still allowed for this long: the pod's worker looks again then.
    Remaining(Duration),
    Exceeded,
}

/// The pod's standing at `now_unix_nanos`, from its start time (Unix nanoseconds; the
/// status's `startTime`, which the API keeps across kubelet restarts, so a deadline that
/// passed while the kubelet was down is seen at once).
pub fn active_deadline(
    spec: &PodSpec,
    start_unix_nanos: Option<i64>,
    now_unix_nanos: i64,
) -> ActiveDeadline {
    let (Some(seconds), Some(start)) = (spec.active_deadline_seconds, start_unix_nanos) else {
        return ActiveDeadline::Unbounded;
    };
    let allowed = i128::from(seconds) * 1_000_000_000;
    let active = i128::from(now_unix_nanos) - i128::from(start);
    // Upstream: `duration >= allowedDuration`.
    if active >= allowed {
        return ActiveDeadline::Exceeded;
    }
    let left = u64::try_from(allowed - active).unwrap_or(u64::MAX);
    ActiveDeadline::Remaining(Duration::from_nanos(left))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: i64 = 1_000_000_000;

    fn spec(deadline: Option<i64>) -> PodSpec {
        PodSpec {
            active_deadline_seconds: deadline,
            ..PodSpec::default()
        }
    }

    /// Upstream's `TestActiveDeadlineHandler` cases: past, not yet, no deadline, no start.
    #[test]
    fn the_deadline_counts_from_the_start_time() {
        let start = 1_000 * SEC;
        let cases = [
            (
                "30 s of 10 allowed",
                Some(10),
                Some(start),
                start + 30 * SEC,
                ActiveDeadline::Exceeded,
            ),
            (
                "exactly at it",
                Some(10),
                Some(start),
                start + 10 * SEC,
                ActiveDeadline::Exceeded,
            ),
            (
                "3 s of 10",
                Some(10),
                Some(start),
                start + 3 * SEC,
                ActiveDeadline::Remaining(Duration::from_secs(7)),
            ),
            (
                "no deadline",
                None,
                Some(start),
                start + 3_600 * SEC,
                ActiveDeadline::Unbounded,
            ),
            (
                "not started",
                Some(10),
                None,
                start + 3_600 * SEC,
                ActiveDeadline::Unbounded,
            ),
        ];
        for (case, deadline, started, now, want) in cases {
            assert_eq!(
                active_deadline(&spec(deadline), started, now),
                want,
                "{case}"
            );
        }
    }
}
