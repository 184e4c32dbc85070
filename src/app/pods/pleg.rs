//! The pod lifecycle event generator's event half: container events the runtime
//! streams, forwarded as pod uids (the relist half is `runtime_state::relist`), and the
//! relist's health (`PlegHealth`, behind `/healthz`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::domain::kuberuntime::pleg::{pleg_health, PlegUnhealthy, RELIST_THRESHOLD};
use crate::ports::clock::Clock;
use crate::ports::error::Chain;
use crate::ports::runtime::{RuntimeError, RuntimeService};

/// When the relist last succeeded, for upstream's PLEG health check: unhealthy once the
/// last success is older than three minutes (a runtime that hangs or fails every list).
pub struct PlegHealth {
    clock: Arc<dyn Clock>,
    started: u64,
    /// Monotonic nanoseconds of the last successful relist, plus one; 0 before the first.
    last: AtomicU64,
}

impl PlegHealth {
    pub fn new(clock: Arc<dyn Clock>) -> Arc<Self> {
        let started = clock.monotonic_nanos();
        Arc::new(PlegHealth {
            clock,
            started,
            last: AtomicU64::new(0),
        })
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
            RELIST_THRESHOLD,
        )
    }
}

/// Forwards the pod uid of each container event the runtime streams, so a change is
/// synced at once rather than at the next relist. The relist stays either way: it is
/// the only source on runtimes without the call (containerd 1.6) and the safety net
/// for a lost event on the others.
pub(super) async fn forward_container_events(
    runtime: Arc<dyn RuntimeService>,
    uids: mpsc::Sender<String>,
) {
    let mut stream = match runtime.container_events().await {
        Ok(stream) => stream,
        Err(RuntimeError::Unimplemented(_)) => {
            info!("the runtime does not stream container events (GetContainerEvents); the PLEG relists every second");
            return;
        }
        Err(error) => {
            warn!(error = %Chain(&error), "cannot subscribe to container events; the PLEG relists every second");
            return;
        }
    };
    info!("subscribed to the runtime's container events");
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) if !event.pod_uid.is_empty() => {
                debug!(container = %event.container_id, kind = ?event.kind, uid = %event.pod_uid, "container event");
                if uids.send(event.pod_uid).await.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(error) => {
                warn!(error = %Chain(&error), "container event stream failed; the PLEG relists every second");
                return;
            }
        }
    }
}
