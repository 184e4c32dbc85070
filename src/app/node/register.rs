//! Registration (upstream's `registerWithAPIServer`): create the Node with its status, or
//! adopt the existing one (no second create) and reconcile its default labels; retried with
//! back-off (from 200 ms doubling to 7 s) while the API server is down or refuses.

use std::time::Duration;

use tracing::{debug, info};

use super::failures::FailureLog;
use super::Agent;
use crate::domain::node_status::labels::{initial_node, reconcile_metadata};
use crate::domain::node_status::model::{NodeObject, NodeStatus};
use crate::domain::node_status::report::metadata_patch;
use crate::domain::node_status::status::compute_status;
use crate::ports::api::NodesError;

const STEP_INITIAL: Duration = Duration::from_millis(200);
const STEP_MAX: Duration = Duration::from_secs(7);

/// How registration ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Registered {
    /// Created with this status.
    Created(NodeObject),
    /// An existing Node adopted; its status is the previous run's.
    Adopted(NodeObject),
}

impl Registered {
    pub fn node(&self) -> &NodeObject {
        match self {
            Registered::Created(n) | Registered::Adopted(n) => n,
        }
    }
}

/// One attempt.
async fn try_register(agent: &Agent, first: bool) -> Result<Registered, NodesError> {
    let mut node = initial_node(&agent.settings.registration);
    let update = compute_status(&NodeStatus::default(), &agent.status_inputs());
    node.status = update.status;
    let api = agent.clients.borrow().nodes.clone();
    if first {
        info!(node = %node.metadata.name, "Attempting to register node");
    } else {
        debug!(node = %node.metadata.name, "Attempting to register node");
    }
    match api.create_node(&node).await {
        Ok(created) => {
            for event in update.events {
                agent.recorder.record(event);
            }
            info!(node = %created.metadata.name, "Successfully registered node");
            Ok(Registered::Created(created))
        }
        Err(NodesError::AlreadyExists { .. }) => {
            let existing = api.get_node(&node.metadata.name).await?;
            info!(node = %node.metadata.name, "Node was previously registered");
            let changes = reconcile_metadata(&node, &existing);
            if changes.is_empty() {
                return Ok(Registered::Adopted(existing));
            }
            info!(labels = ?changes.labels, annotations = ?changes.annotations, "Reconciling the existing Node's labels");
            let patched = api
                .patch_node(&node.metadata.name, &metadata_patch(&changes))
                .await?;
            Ok(Registered::Adopted(patched))
        }
        Err(e) => Err(e),
    }
}

/// Register until it works.
pub async fn register(agent: &Agent) -> Registered {
    let mut failures = FailureLog::new("registering the node");
    let mut step = STEP_INITIAL;
    loop {
        match try_register(agent, failures.failures() == 0).await {
            Ok(registered) => {
                failures.succeeded();
                return registered;
            }
            Err(e) => {
                failures.failed(&e);
                tokio::time::sleep(step).await;
                step = (step * 2).min(STEP_MAX);
            }
        }
    }
}
