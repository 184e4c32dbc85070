//! The pod lifecycle event generator's event half: container events the runtime
//! streams, forwarded as pod uids (the relist half is `runtime_state::relist`), and the
//! relist's health (`PlegHealth`, behind `/healthz`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::domain::kuberuntime::pleg::{pleg_health, PlegUnhealthy, RELIST_THRESHOLD};
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
/// for a lost event on the others.
pub(super) async fn forward_container_events(
    runtime: Arc<dyn RuntimeService>,
    signals: mpsc::Sender<RuntimeSignal>,
) {
    let mut stream = match runtime.container_events().await {
        Ok(stream) => stream,
        Err(RuntimeError::Unimplemented(_)) => {
            info!("the runtime does not stream container events (GetContainerEvents); the PLEG relists on its own");
            return;
        }
        Err(error) => {
            warn!(error = %Chain(&error), "cannot subscribe to container events; the PLEG relists on its own");
            return;
        }
    };
    info!("subscribed to the runtime's container events");
    if signals.send(RuntimeSignal::Streaming(true)).await.is_err() {
        return;
    }
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) if !event.pod_uid.is_empty() => {
                debug!(container = %event.container_id, kind = ?event.kind, uid = %event.pod_uid, "container event");
                if signals
                    .send(RuntimeSignal::Pod(event.pod_uid))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Ok(_) => {}
            Err(error) => {
                warn!(error = %Chain(&error), "container event stream failed; the PLEG relists on its own");
                break;
            }
        }
    }
    let _ = signals.send(RuntimeSignal::Streaming(false)).await;
}
