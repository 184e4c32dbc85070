//! The runtime's health as the node status needs it (upstream's `updateRuntimeUp` every
//! 5 s): readiness conditions, the version, and the image list, checked in the background;
//! a change of readiness wakes the status loop so the node's Ready condition follows at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::domain::node_status::readiness::{RuntimeState, StatusCheck};
use crate::domain::node_status::status::ImageSummary;
use crate::ports::runtime::RuntimeService;
use crate::ports::runtime_status::RuntimeStatusService;

/// What the watcher last learnt.
#[derive(Debug, Clone, Default)]
pub struct RuntimeObservations {
    pub state: RuntimeState,
    /// `containerd://1.6.20`, once known.
    pub version: Option<String>,
    /// `None` until listed, or when the last listing failed.
    pub images: Option<Vec<ImageSummary>>,
}

/// Shared between the watcher and the status loop.
#[derive(Debug)]
pub struct RuntimeHealth {
    observations: Mutex<RuntimeObservations>,
    /// Monotonic origin of the state's times.
    origin: Instant,
    /// How long without a good check before the runtime is down.
    pub down_after: Duration,
    /// Woken when readiness changes.
    pub changed: Notify,
}

impl RuntimeHealth {
    pub fn new(down_after: Duration) -> Arc<Self> {
        Arc::new(RuntimeHealth {
            observations: Mutex::new(RuntimeObservations::default()),
            origin: Instant::now(),
            down_after,
            changed: Notify::new(),
        })
    }

    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    pub fn snapshot(&self) -> RuntimeObservations {
        self.observations
            .lock()
            .map(|o| o.clone())
            .unwrap_or_default()
    }

    /// Why the node is not ready now; empty when it is.
    pub fn not_ready(&self) -> Vec<String> {
        self.snapshot().state.errors(self.now(), self.down_after)
    }

    fn update(&self, f: impl FnOnce(&mut RuntimeObservations)) {
        if let Ok(mut o) = self.observations.lock() {
            f(&mut o);
        }
    }
}

/// One check: conditions always; version and images when `full`.
pub async fn check_once(
    health: &RuntimeHealth,
    runtime: &dyn RuntimeService,
    status: &dyn RuntimeStatusService,
    full: bool,
    timeout: Duration,
) {
    let check = match tokio::time::timeout(timeout, status.runtime_conditions()).await {
        Ok(Ok(conditions)) => StatusCheck::Answered(conditions),
        Ok(Err(e)) => {
            warn!(error = %e, "Container runtime sanity check failed");
            StatusCheck::Failed
        }
        Err(_) => {
            warn!(
                timeout_s = timeout.as_secs_f64(),
                "Container runtime sanity check timed out"
            );
            StatusCheck::Failed
        }
    };
    let now = health.now();
    let answered = matches!(check, StatusCheck::Answered(_));
    health.update(|o| o.state.observe(&check, now));
    if answered && full {
        if let Ok(Ok(v)) = tokio::time::timeout(timeout, runtime.version()).await {
            let version = format!("{}://{}", v.runtime_name, v.runtime_version);
            health.update(|o| o.version = Some(version));
        }
        let images = tokio::time::timeout(timeout, status.list_images())
            .await
            .ok()
            .and_then(Result::ok);
        health.update(|o| o.images = images);
    }
}

/// Check every `period` forever; the version and images every `full_every` checks (and
/// after the runtime comes back). The first check is done by the caller.
pub async fn watch_runtime(
    health: Arc<RuntimeHealth>,
    runtime: Arc<dyn RuntimeService>,
    status: Arc<dyn RuntimeStatusService>,
    period: Duration,
    full_every: u32,
) {
    let mut count: u32 = 0;
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    // Compared after each check: a silent runtime turns "down" by the passage of time,
    // not by one check's result.
    let mut was_ready = health.not_ready().is_empty();
    loop {
        ticker.tick().await;
        count = count.wrapping_add(1);
        let full = !was_ready || count.is_multiple_of(full_every.max(1));
        check_once(&health, runtime.as_ref(), status.as_ref(), full, period).await;
        let reasons = health.not_ready();
        let ready = reasons.is_empty();
        if ready != was_ready {
            if ready {
                info!("Container runtime is ready");
            } else {
                warn!(?reasons, "Container runtime is not ready");
            }
            health.changed.notify_one();
            was_ready = ready;
        }
    }
}
