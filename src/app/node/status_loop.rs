//! The node status loop (upstream's `syncNodeStatus`): every `nodeStatusUpdateFrequency`
//! the Node is read, the status computed on the one the API server holds, and sent as a
//! strategic-merge patch when it differs from it beyond heartbeat times or
//! `nodeStatusReportFrequency` passed (upstream's `tryUpdateNodeStatus`); a change of the
//! runtime's readiness sends it at once. Comparing with the held Node, not with what was
//! last sent, corrects a condition someone else changed (the node controller marks the
//! node `Unknown` after an API server outage) at the next period.

use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info};

use super::failures::FailureLog;
use super::register::{register, Registered};
use super::Agent;
use crate::domain::node_status::report::report_status;
use crate::ports::api::NodesError;

/// The loop's memory between periods.
#[derive(Debug)]
pub struct StatusState {
    pub last_report: Option<Instant>,
    /// Register again (the Node was deleted).
    pub reregister: bool,
}

impl StatusState {
    pub fn after(registered: &Registered) -> StatusState {
        let created = matches!(registered, Registered::Created(_));
        StatusState {
            // A created Node's status is fresh; an adopted one's is the last run's.
            last_report: created.then(Instant::now),
            reregister: false,
        }
    }
}

/// One period: read the Node, compute, decide, maybe send.
pub async fn sync_status(agent: &Agent, state: &mut StatusState) -> Result<bool, NodesError> {
    let name = agent.settings.registration.node_name.clone();
    let api = agent.clients.borrow().nodes.clone();
    if state.reregister {
        let registered = register(agent).await;
        *state = StatusState::after(&registered);
        agent
            .node_uid
            .send_replace(Some(registered.node().metadata.uid.clone()));
    }
    let held = api.get_node_from_cache(&name).await.inspect_err(|e| {
        if matches!(e, NodesError::NotFound { .. }) {
            info!(node = %name, "Node is gone; registering it again");
            state.reregister = agent.settings.register_node;
        }
    })?;
    let since = state.last_report.map(|t| t.elapsed());
    let inputs = agent.status_inputs();
    let report = report_status(
        &held.status,
        &inputs,
        since,
        agent.settings.status_report_frequency,
    );
    let in_use = &agent.settings.volumes_in_use;
    let Some(patch) = report.patch else {
        debug!("node status unchanged; not sent");
        in_use.mark_reported(&inputs.volumes_in_use);
        return Ok(false);
    };
    match api.patch_node_status(&name, &patch).await {
        Ok(_) => {
            in_use.mark_reported(&inputs.volumes_in_use);
            state.last_report = Some(Instant::now());
            // Recorded once the API holds the transition (a failed patch is tried again
            // from the held Node, which would record them twice).
            for event in report.events {
                agent.recorder.record(event);
            }
            Ok(true)
        }
        Err(e) => {
            if matches!(e, NodesError::NotFound { .. }) {
                info!(node = %name, "Node is gone; registering it again");
                state.reregister = agent.settings.register_node;
            }
            Err(e)
        }
    }
}

/// A device plugin's devices changed (never, without the device manager).
async fn devices_changed(agent: &Agent) {
    match &agent.settings.devices {
        Some(devices) => devices.changed.notified().await,
        None => std::future::pending().await,
    }
}

/// Run forever: one sync per period, or sooner when the runtime's readiness, the
/// attached volumes in use or a device plugin's devices change (a pod's volume waits
/// for its report; a plugin's resource shows at once).
pub async fn run_status_loop(agent: &Agent, mut state: StatusState, first_now: bool) {
    let mut failures = FailureLog::new("updating the node status");
    let period = agent.settings.status_update_frequency;
    let mut next = if first_now {
        Instant::now()
    } else {
        Instant::now() + period
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = agent.health.changed.notified() => {}
            () = agent.settings.volumes_in_use.changed.notified() => {}
            () = devices_changed(agent) => {}
        }
        match sync_status(agent, &mut state).await {
            Ok(_) => failures.succeeded(),
            Err(e) => {
                failures.failed(&e);
            }
        }
        next = Instant::now() + period.max(Duration::from_millis(100));
    }
}
