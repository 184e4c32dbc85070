//! Whether the PLEG (the relist of the runtime's pods) is healthy: upstream's
//! `GenericPLEG.Healthy`, whose answer feeds the node's readiness and, through the sync
//! loop, `/healthz`; and whether a relist tells a pod's worker anything its own sync has
//! not already seen.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::kuberuntime::runtime::{ContainerState, SandboxState};
use crate::domain::units::duration::GoDuration;

/// The state of every sandbox and container of one pod, by id: what the PLEG compares.
pub type PodFingerprint = BTreeMap<String, String>;

/// Whether a relist's view of a pod is one its worker's last sync already saw (`seen`,
/// the runtime as that sync left it), so that syncing again would only read the runtime
/// to do nothing: a pod's own sandbox and container starts are otherwise synced a second
/// time, four more runtime calls each. A relist begun after that sync ended must match
/// `seen` exactly. One begun before may have caught the sync half-way (a sandbox without
/// its container yet): each thing it saw must be in `seen` in the same state, and it
/// must have seen something (an empty one may be a removal).
pub fn relist_already_seen(
    relisted: &PodFingerprint,
    began_before_sync_ended: bool,
    seen: &PodFingerprint,
) -> bool {
    if began_before_sync_ended {
        !relisted.is_empty()
            && relisted
                .iter()
                .all(|(id, state)| seen.get(id) == Some(state))
    } else {
        relisted == seen
    }
}

/// Upstream's generic PLEG relist threshold: a PLEG whose last successful relist is older
/// than this is unhealthy.
pub const RELIST_THRESHOLD: Duration = Duration::from_secs(3 * 60);

/// The gate of upstream's evented PLEG.
pub const EVENTED_PLEG_GATE: &str = "EventedPLEG";

/// How many times the runtime's event stream may fail before the PLEG relists on its own
/// for good (upstream's `eventedPlegMaxStreamRetries`).
pub const EVENTED_PLEG_MAX_STREAM_RETRIES: u32 = 5;

/// How long after its first failure the event stream is subscribed again, doubled after
/// each further one (1, 2, 4, 8 s: 15 s before the fifth try). Upstream retries at once,
/// which a restarting runtime's refusals would use up within milliseconds.
pub const EVENT_STREAM_RETRY_DELAY: Duration = Duration::from_secs(1);

/// The wait before subscribing again after `failures` failures.
pub fn event_stream_retry_delay(first: Duration, failures: u32) -> Duration {
    first.saturating_mul(1 << failures.saturating_sub(1).min(16))
}

/// Whether the event stream is subscribed again after `failures` subscriptions or
/// streams failed (each failure relists at once, as upstream's).
pub fn resubscribes(failures: u32) -> bool {
    failures < EVENTED_PLEG_MAX_STREAM_RETRIES
}

/// How often the relist runs and how old its last success may be: upstream's generic
/// PLEG (every second, three minutes), or its evented one while the runtime's container
/// events stream (every 300 s, ten minutes): the events then wake each pod's worker, and
/// the relist is only the safety net for a lost one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelistCadence {
    pub period: Duration,
    pub threshold: Duration,
}

impl RelistCadence {
    pub const EVENTED: RelistCadence = RelistCadence {
        period: Duration::from_secs(300),
        threshold: Duration::from_secs(10 * 60),
    };

    /// The cadence with the `EventedPLEG` gate and the event stream as they are; the
    /// generic one relists every `generic_period`.
    pub fn choose(gate_enabled: bool, events_streaming: bool, generic_period: Duration) -> Self {
        if gate_enabled && events_streaming {
            Self::EVENTED
        } else {
            RelistCadence {
                period: generic_period,
                threshold: RELIST_THRESHOLD,
            }
        }
    }
}

/// Why the PLEG is unhealthy, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlegUnhealthy {
    #[error("pleg has yet to be successful")]
    NeverRelisted,
    #[error("pleg was last seen active {elapsed} ago; threshold is {threshold}")]
    Inactive {
        elapsed: GoDuration,
        threshold: GoDuration,
    },
}

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
) -> Result<(), PlegUnhealthy> {
    let threshold_nanos = u64::try_from(threshold.as_nanos()).unwrap_or(u64::MAX);
    let go = |nanos: u64| GoDuration::from_nanos(i64::try_from(nanos).unwrap_or(i64::MAX));
    match last_relist_nanos {
        None if now_nanos.saturating_sub(started_nanos) > threshold_nanos => {
            Err(PlegUnhealthy::NeverRelisted)
        }
        None => Ok(()),
        Some(last) => {
            let elapsed = now_nanos.saturating_sub(last);
            if elapsed > threshold_nanos {
                Err(PlegUnhealthy::Inactive {
                    elapsed: go(elapsed),
                    threshold: go(threshold_nanos),
                })
            } else {
                Ok(())
            }
        }
    }
}

/// Upstream's PLEG event types (`PodLifeCycleEventType`) for containers and sandboxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlegEventType {
    ContainerStarted,
    ContainerDied,
    ContainerRemoved,
    ContainerChanged,
}

const SANDBOX_READY: &str = "ready";
const SANDBOX_NOT_READY: &str = "notready";
const CONTAINER_RUNNING: &str = "running";
const CONTAINER_EXITED: &str = "exited";

/// A sandbox's state as its pod's fingerprint holds it.
pub fn sandbox_word(state: SandboxState) -> &'static str {
    match state {
        SandboxState::Ready => SANDBOX_READY,
        SandboxState::NotReady => SANDBOX_NOT_READY,
    }
}

/// A container's state as its pod's fingerprint holds it.
pub fn container_word(state: ContainerState) -> &'static str {
    match state {
        ContainerState::Created => "created",
        ContainerState::Running => CONTAINER_RUNNING,
        ContainerState::Exited => CONTAINER_EXITED,
        ContainerState::Unknown => "unknown",
    }
}

/// A state word of a fingerprint as upstream's PLEG sees it: a ready sandbox runs, one not
/// ready has exited (upstream's `SandboxToContainerState`), a created container's state is
/// unknown (upstream's `convertState`: "kubelet doesn't use the created state yet").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PlegState {
    Running,
    Exited,
    Unknown,
    NonExistent,
}

fn pleg_state(word: Option<&String>) -> PlegState {
    match word.map(String::as_str) {
        None => PlegState::NonExistent,
        Some(CONTAINER_RUNNING | SANDBOX_READY) => PlegState::Running,
        Some(CONTAINER_EXITED | SANDBOX_NOT_READY) => PlegState::Exited,
        Some(_) => PlegState::Unknown,
    }
}

/// The events upstream's generic PLEG generates for one pod between two relists
/// (`generateEvents`), by sandbox or container id: what its sync loop logs.
pub fn pleg_events(
    before: &PodFingerprint,
    after: &PodFingerprint,
) -> Vec<(String, PlegEventType)> {
    let ids: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let mut events = Vec::new();
    for id in ids {
        let (old, new) = (pleg_state(before.get(id)), pleg_state(after.get(id)));
        if old == new {
            continue;
        }
        let kinds: &[PlegEventType] = match (new, old) {
            (PlegState::Running, _) => &[PlegEventType::ContainerStarted],
            (PlegState::Exited, _) => &[PlegEventType::ContainerDied],
            (PlegState::Unknown, _) => &[PlegEventType::ContainerChanged],
            // Its death was reported when it exited.
            (PlegState::NonExistent, PlegState::Exited) => &[PlegEventType::ContainerRemoved],
            (PlegState::NonExistent, _) => &[
                PlegEventType::ContainerDied,
                PlegEventType::ContainerRemoved,
            ],
        };
        events.extend(kinds.iter().map(|kind| (id.clone(), *kind)));
    }
    events
}

/// A PLEG event as upstream's text log prints its `*PodLifecycleEvent` (Go's `%+v`):
/// `&{ID:<pod uid> Type:ContainerStarted Data:<container id>}`.
pub fn pleg_event_text(pod_uid: &str, kind: PlegEventType, id: &str) -> String {
    format!("&{{ID:{pod_uid} Type:{kind:?} Data:{id}}}")
}

/// A fingerprint from `(id, state)` pairs, for tests.
#[cfg(test)]
pub(crate) fn fingerprint(entries: &[(&str, &str)]) -> PodFingerprint {
    entries
        .iter()
        .map(|(id, state)| ((*id).to_owned(), (*state).to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::fingerprint as fp;
    use super::*;

    #[test]
    fn relisted_changes_are_upstreams_pleg_events() {
        use PlegEventType::*;
        let before = fp(&[
            ("s1", "ready"),
            ("starts", "created"),
            ("dies", "running"),
            ("removed", "exited"),
            ("vanishes", "running"),
            ("same", "running"),
        ]);
        let after = fp(&[
            ("s1", "notready"),
            ("starts", "running"),
            ("dies", "exited"),
            ("same", "running"),
            ("new", "created"),
        ]);
        let events = pleg_events(&before, &after);
        let expected = [
            ("dies", ContainerDied),
            ("new", ContainerChanged),
            ("removed", ContainerRemoved),
            ("s1", ContainerDied),
            ("starts", ContainerStarted),
            ("vanishes", ContainerDied),
            ("vanishes", ContainerRemoved),
        ];
        assert_eq!(
            events,
            expected.map(|(id, kind)| (id.to_owned(), kind)).to_vec()
        );
        assert_eq!(
            pleg_event_text("5f1c", ContainerStarted, "9ab0"),
            "&{ID:5f1c Type:ContainerStarted Data:9ab0}"
        );
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn the_event_stream_is_tried_five_times_with_doubling_waits() {
        let waits: Vec<u64> = (1..EVENTED_PLEG_MAX_STREAM_RETRIES)
            .map(|f| event_stream_retry_delay(EVENT_STREAM_RETRY_DELAY, f).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8]);
        assert!(resubscribes(4));
        assert!(!resubscribes(5));
        assert_eq!(
            event_stream_retry_delay(Duration::from_secs(1), u32::MAX),
            Duration::from_secs(1 << 16)
        );
    }

    #[test]
    fn a_relist_tells_a_worker_only_what_its_sync_did_not_see() {
        let seen = fp(&[("s1", "ready"), ("c1", "running")]);
        // After the sync: only the very same state is nothing new.
        assert!(relist_already_seen(&seen, false, &seen));
        assert!(!relist_already_seen(&fp(&[("s1", "ready")]), false, &seen));
        assert!(!relist_already_seen(
            &fp(&[("s1", "ready"), ("c1", "exited")]),
            false,
            &seen
        ));
        // During the sync: its half-way state is nothing new, a change is.
        assert!(relist_already_seen(&fp(&[("s1", "ready")]), true, &seen));
        assert!(!relist_already_seen(&fp(&[("c1", "exited")]), true, &seen));
        assert!(!relist_already_seen(&fp(&[("c9", "running")]), true, &seen));
        assert!(!relist_already_seen(&fp(&[]), true, &seen));
    }

    #[test]
    fn healthy_within_the_threshold_unhealthy_after_in_upstreams_words() {
        assert_eq!(
            pleg_health(Some(10 * S), 0, 190 * S, RELIST_THRESHOLD),
            Ok(())
        );
        assert_eq!(
            pleg_health(Some(10 * S), 0, 191 * S, RELIST_THRESHOLD).map_err(|e| e.to_string()),
            Err("pleg was last seen active 3m1s ago; threshold is 3m0s".to_owned())
        );
    }

    #[test]
    fn before_the_first_relist_the_start_counts() {
        assert_eq!(pleg_health(None, 5 * S, 100 * S, RELIST_THRESHOLD), Ok(()));
        assert_eq!(
            pleg_health(None, 5 * S, 186 * S, RELIST_THRESHOLD),
            Err(PlegUnhealthy::NeverRelisted)
        );
        assert_eq!(
            PlegUnhealthy::NeverRelisted.to_string(),
            "pleg has yet to be successful"
        );
    }
}

#[cfg(test)]
mod cadence_tests {
    use super::*;

    #[test]
    fn the_relist_slows_only_with_the_gate_and_a_live_event_stream() {
        let second = Duration::from_secs(1);
        let generic = RelistCadence {
            period: second,
            threshold: RELIST_THRESHOLD,
        };
        assert_eq!(RelistCadence::choose(false, true, second), generic);
        assert_eq!(RelistCadence::choose(true, false, second), generic);
        let evented = RelistCadence::choose(true, true, second);
        assert_eq!(evented.period, Duration::from_secs(300));
        assert_eq!(evented.threshold, Duration::from_secs(600));
    }
}
