//! The node status loop (upstream's `syncNodeStatus`): every `nodeStatusUpdateFrequency`
//! the status is computed and sent as a strategic-merge patch when it changed beyond
//! heartbeat times or `nodeStatusReportFrequency` passed; a change of the runtime's
//! readiness sends it at once. Unlike upstream, the Node is not read every period: the
//! status last sent is the reference, and the Node is read again only after a failure (when
//! someone else may have written it meanwhile).

use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info};

use super::failures::FailureLog;
use super::register::{register, Registered};
use super::Agent;
use crate::domain::node_status::model::NodeStatus;
use crate::domain::node_status::report::{should_report, status_patch};
use crate::domain::node_status::status::compute_status;
use crate::ports::api::NodesError;

/// The loop's memory between periods.
#[derive(Debug)]
pub struct StatusState {
    /// The status as the API server holds it, as far as we know.
    pub reported: NodeStatus,
    /// The status last computed (transition times and events follow it).
    pub computed: NodeStatus,
    pub last_report: Option<Instant>,
    /// Read the Node before the next computation.
    pub resync: bool,
    /// Register again (the Node was deleted).
    pub reregister: bool,
}

impl StatusState {
    pub fn after(registered: &Registered) -> StatusState {
        let status = registered.node().status.clone();
        let created = matches!(registered, Registered::Created(_));
        StatusState {
            reported: status.clone(),
            computed: status,
            // A created Node's status is fresh; an adopted one's is the last run's.
            last_report: created.then(Instant::now),
            resync: false,
            reregister: false,
        }
    }
}

/// One period: compute, decide, maybe send. Errors leave the state ready to resync.
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
    if state.resync {
        let node = api.get_node(&name).await.inspect_err(|e| {
            if matches!(e, NodesError::NotFound { .. }) {
                state.reregister = agent.settings.register_node;
            }
        })?;
        state.reported = node.status.clone();
        state.computed = node.status;
        state.resync = false;
    }
    let update = compute_status(&state.computed, &agent.status_inputs());
    for event in update.events {
        agent.recorder.record(event);
    }
    state.computed = update.status.clone();
    let since = state.last_report.map(|t| t.elapsed());
    if !should_report(
        &state.reported,
        &update.status,
        since,
        agent.settings.status_report_frequency,
    ) {
        debug!("node status unchanged; not sent");
        return Ok(false);
    }
    let patch = status_patch(&state.reported, &update.status);
    match api.patch_node_status(&name, &patch).await {
        Ok(node) => {
            state.reported = node.status;
            state.last_report = Some(Instant::now());
            Ok(true)
        }
        Err(e) => {
            state.resync = true;
            if matches!(e, NodesError::NotFound { .. }) {
                info!(node = %name, "Node is gone; registering it again");
                state.reregister = agent.settings.register_node;
            }
            Err(e)
        }
    }
}

/// Run forever: one sync per period, or sooner when the runtime's readiness changes.
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
