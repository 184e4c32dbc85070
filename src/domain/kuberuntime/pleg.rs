//! Whether the PLEG (the relist of the runtime's pods) is healthy: upstream's
//! `GenericPLEG.Healthy`, whose answer feeds the node's readiness and, through the sync
//! loop, `/healthz`.

use std::time::Duration;

use crate::domain::units::duration::GoDuration;

/// Upstream's generic PLEG relist threshold: a PLEG whose last successful relist is older
/// than this is unhealthy.
pub const RELIST_THRESHOLD: Duration = Duration::from_secs(3 * 60);

/// The PLEG's health at monotonic time `now_nanos`, from the time of its last successful
/// relist (`None` before the first) and the time it started: `Err` with upstream's words
/// when the last relist is older than `threshold`. Before the first success the PLEG is
/// given `threshold` from its start (upstream says "pleg has yet to be successful" at
/// once; a `/healthz` that failed during the first second of every start would restart a
/// kubelet under a strict probe).
pub fn pleg_health(
    last_relist_nanos: Option<u64>,
    started_nanos: u64,
    now_nanos: u64,
    threshold: Duration,
) -> Result<(), String> {
    let threshold_nanos = u64::try_from(threshold.as_nanos()).unwrap_or(u64::MAX);
    let go = |nanos: u64| GoDuration::from_nanos(i64::try_from(nanos).unwrap_or(i64::MAX));
    match last_relist_nanos {
        None if now_nanos.saturating_sub(started_nanos) > threshold_nanos => {
            Err("pleg has yet to be successful".to_owned())
        }
        None => Ok(()),
        Some(last) => {
            let elapsed = now_nanos.saturating_sub(last);
            if elapsed > threshold_nanos {
                Err(format!(
                    "pleg was last seen active {} ago; threshold is {}",
                    go(elapsed),
                    go(threshold_nanos)
                ))
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn healthy_within_the_threshold_unhealthy_after_in_upstreams_words() {
        assert_eq!(
            pleg_health(Some(10 * S), 0, 190 * S, RELIST_THRESHOLD),
            Ok(())
        );
        assert_eq!(
            pleg_health(Some(10 * S), 0, 191 * S, RELIST_THRESHOLD),
            Err("pleg was last seen active 3m1s ago; threshold is 3m0s".to_owned())
        );
    }

    #[test]
    fn before_the_first_relist_the_start_counts() {
        assert_eq!(pleg_health(None, 5 * S, 100 * S, RELIST_THRESHOLD), Ok(()));
        assert_eq!(
            pleg_health(None, 5 * S, 186 * S, RELIST_THRESHOLD),
            Err("pleg has yet to be successful".to_owned())
        );
    }
}
