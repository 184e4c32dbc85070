//! The pod lifecycle event generator's event half: container events the runtime
//! streams, forwarded as pod uids (the relist half is `runtime_state::relist`), and the
//! relist's health (`PlegHealth`, behind `/healthz`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::domain::kuberuntime::pleg::{
    event_stream_retry_delay, pleg_health, resubscribes, PlegUnhealthy, RELIST_THRESHOLD,
};
use crate::ports::clock::Clock;
use crate::ports::error::Chain;
use crate::ports::runtime::{RuntimeError, RuntimeService};

/// When the relist last succeeded, for upstream's PLEG health check: unhealthy once the
/// last success is older than the cadence's threshold (three minutes; ten while the
/// runtime's events stream under `EventedPLEG`): a runtime that hangs or fails every list.
pub struct PlegHealth {
    clock: Arc<dyn Clock>,
    started: u64,
    /// Monotonic nanoseconds of the last successful relist, plus one; 0 before the first.
    last: AtomicU64,
    threshold_nanos: AtomicU64,
}

impl PlegHealth {
    pub fn new(clock: Arc<dyn Clock>) -> Arc<Self> {
        let started = clock.monotonic_nanos();
        Arc::new(PlegHealth {
            clock,
            started,
            last: AtomicU64::new(0),
            threshold_nanos: AtomicU64::new(nanos(RELIST_THRESHOLD)),
        })
    }

    /// The relist's cadence changed: its health is judged by the new threshold.
    pub(super) fn set_threshold(&self, threshold: Duration) {
        self.threshold_nanos
            .store(nanos(threshold), Ordering::Relaxed);
    }

    /// A relist succeeded now.
    pub(super) fn relisted(&self) {
        let now = self.clock.monotonic_nanos();
        self.last.store(now.saturating_add(1), Ordering::Relaxed);
    }

    /// `Err` with upstream's message when the PLEG is unhealthy.
    pub fn check(&self) -> Result<(), PlegUnhealthy> {
        let last = self.last.load(Ordering::Relaxed).checked_sub(1);
        pleg_health(
            last,
            self.started,
            self.clock.monotonic_nanos(),
            Duration::from_nanos(self.threshold_nanos.load(Ordering::Relaxed)),
        )
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What the runtime's event stream tells the pod loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RuntimeSignal {
    /// A container of this pod changed.
    Pod(String),
    /// The stream is live (`true`) or gone (`false`): the relist's cadence follows.
    Streaming(bool),
}

/// Forwards the pod uid of each container event the runtime streams, so a change is
/// synced at once rather than at the next relist. The relist stays either way: it is
/// the only source on runtimes without the call (containerd 1.6) and the safety net
/// for a lost event on the others. A stream that fails or ends is subscribed again
/// (after `retry_delay`, doubled after each further failure, so a restarting runtime can
/// come back), the relist back to its generic cadence meanwhile; after upstream's five
/// failures the PLEG relists on its own.
pub(super) async fn forward_container_events(
    runtime: Arc<dyn RuntimeService>,
    signals: mpsc::Sender<RuntimeSignal>,
    retry_delay: Duration,
) {
    let mut failures = 0;
    loop {
        if failures > 0 {
            if !resubscribes(failures) {
                warn!(
                    failures,
                    "Fall back to Generic PLEG relisting since Evented PLEG is not working"
                );
                return;
            }
            tokio::time::sleep(event_stream_retry_delay(retry_delay, failures)).await;
        }
        let mut stream = match runtime.container_events().await {
            Ok(stream) => stream,
            Err(RuntimeError::Unimplemented(_)) => {
                info!("the runtime does not stream container events (GetContainerEvents); the PLEG relists on its own");
                return;
            }
            Err(error) => {
                warn!(error = %Chain(&error), failures, "cannot subscribe to container events; the PLEG relists meanwhile");
                failures += 1;
                continue;
            }
        };
        info!("subscribed to the runtime's container events");
        if signals.send(RuntimeSignal::Streaming(true)).await.is_err() {
            return;
        }
        loop {
            match stream.next().await {
                Some(Ok(event)) if !event.pod_uid.is_empty() => {
                    debug!(container_id = %event.container_id, kind = ?event.kind, uid = %event.pod_uid, "container event");
                    if signals
                        .send(RuntimeSignal::Pod(event.pod_uid))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    warn!(error = %Chain(&error), "container event stream failed; the PLEG relists meanwhile");
                    break;
                }
                None => {
                    warn!("container event stream ended; the PLEG relists meanwhile");
                    break;
                }
            }
        }
        failures += 1;
        if signals.send(RuntimeSignal::Streaming(false)).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::runtime::FakeRuntime;
    use crate::domain::kuberuntime::pleg::EVENTED_PLEG_MAX_STREAM_RETRIES;

    /// A stream that ends is subscribed again after the delay, the relist told each time;
    /// after upstream's five failures the PLEG relists on its own.
    #[tokio::test(start_paused = true)]
    async fn an_ended_stream_is_subscribed_again_up_to_five_times() {
        let runtime = Arc::new(FakeRuntime::new());
        runtime.stream_events();
        let (tx, mut rx) = mpsc::channel(16);
        let delay = Duration::from_secs(1);
        let feeder = tokio::spawn(forward_container_events(runtime.clone(), tx, delay));
        for failure in 1..=EVENTED_PLEG_MAX_STREAM_RETRIES {
            assert_eq!(rx.recv().await, Some(RuntimeSignal::Streaming(true)));
            assert_eq!(runtime.event_streams(), 1, "subscribed ({failure})");
            runtime.end_event_streams();
            assert_eq!(rx.recv().await, Some(RuntimeSignal::Streaming(false)));
        }
        // The fifth failure ends the forwarding: no sixth subscription.
        tokio::time::sleep(delay * 32).await;
        assert!(feeder.is_finished());
        assert_eq!(rx.recv().await, None);
        assert_eq!(runtime.event_streams(), 0);
    }

    /// A runtime without the call is not asked again.
    #[tokio::test(start_paused = true)]
    async fn a_runtime_without_events_is_asked_once() {
        let runtime = Arc::new(FakeRuntime::new());
        let (tx, mut rx) = mpsc::channel(16);
        forward_container_events(runtime, tx, Duration::from_secs(1)).await;
        assert_eq!(rx.recv().await, None);
    }
}
