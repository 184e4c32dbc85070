//! A crash-looping container's events over time, through the correlator, on a fake clock:
//! what the unit tests bound and the bench prints beside upstream's allowance.

use std::time::Duration;

use super::{already_present, container_reference, created, held_events, started};
use crate::domain::kuberuntime::plan::Held;
use crate::domain::node_status::events::{
    make_event, EventAction, EventCorrelator, SPAM_BURST, SPAM_QPS,
};
use crate::domain::node_status::model::EventSource;
use crate::domain::pod::Pod;
use crate::domain::status::Waiting;

/// Upstream's crash-loop back-off: 10 s doubling to 300 s.
const BACKOFF_START: u64 = 10;
const BACKOFF_MAX: u64 = 300;
/// How often a pod in back-off is synced again (upstream's pod worker requeues a failed
/// sync after `workerBackOffPeriod`, 10 s), each sync recording `BackOff`.
const RESYNC_IN_BACKOFF: u64 = 10;
/// How long the container runs before it exits.
const RUNS_FOR: u64 = 1;

/// What one minute of the loop sent to the API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Minute {
    /// Events the pod loop recorded.
    pub recorded: u32,
    /// New Event objects written.
    pub created: u32,
    /// Repeats written as a count increment.
    pub patched: u32,
    /// Dropped by the spam filter.
    pub skipped: u32,
}

impl Minute {
    pub fn writes(&self) -> u32 {
        self.created + self.patched
    }
}

/// The most writes upstream's spam filter lets through for one object in `minutes`: the
/// burst, then one per refill period.
pub fn upstream_allowance(minutes: u64) -> u64 {
    let refills = (minutes as f64 * 60.0 * SPAM_QPS).floor() as u64;
    u64::from(SPAM_BURST) + refills
}

/// The events a pod whose one container exits after a second records over `minutes`,
/// per minute, through the correlator.
pub fn crash_loop(pod: &Pod, minutes: u64) -> Vec<Minute> {
    let container = pod
        .spec
        .containers
        .first()
        .map(|c| (c.name.clone(), c.image.clone()))
        .unwrap_or_default();
    let (name, image) = container;
    let object = container_reference(pod, &name);
    let source = EventSource {
        component: "kubelet".into(),
        host: "n1".into(),
    };
    let backoff = Held {
        waiting: Waiting::new("CrashLoopBackOff", "back-off"),
        retry_after: Duration::ZERO,
    };
    let mut schedule = Vec::new();
    let end = minutes * 60;
    let (mut t, mut delay) = (0, BACKOFF_START);
    while t < end {
        for event in [already_present(&image), created(&name), started(&name)] {
            schedule.push((t, event));
        }
        let died = t + RUNS_FOR;
        let mut sync = died;
        while sync < died + delay {
            schedule.extend(
                held_events(pod, &name, &image, &backoff)
                    .into_iter()
                    .map(|e| (sync, e)),
            );
            sync += RESYNC_IN_BACKOFF;
        }
        t = died + delay;
        delay = (delay * 2).min(BACKOFF_MAX);
    }
    let mut correlator = EventCorrelator::default();
    let mut out = vec![Minute::default(); usize::try_from(minutes).unwrap_or(0)];
    for (i, (at, event)) in schedule.into_iter().filter(|(at, _)| *at < end).enumerate() {
        let nanos = i64::try_from(at).unwrap_or(0) * 1_000_000_000 + i as i64;
        let made = make_event(&object, &source, &event, nanos);
        let Some(minute) = out.get_mut(usize::try_from(at / 60).unwrap_or(usize::MAX)) else {
            continue;
        };
        minute.recorded += 1;
        match correlator.correlate(made, nanos, Duration::from_secs(at)) {
            EventAction::Create(_) => minute.created += 1,
            EventAction::Patch { .. } => minute.patched += 1,
            EventAction::Skip => minute.skipped += 1,
        }
    }
    out
}
