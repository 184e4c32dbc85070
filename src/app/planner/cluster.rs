//! Connected mode in the dry run: the Node rkubelet would register, or how it would patch
//! the one the API server holds, decided by the node agent's own domain functions
//! (`domain::node_status::plan`). The API server is only read.

use serde::Serialize;
use serde_json::Value;

use crate::domain::node_status::labels::Registration;
use crate::domain::node_status::model::NodeObject;
use crate::domain::node_status::plan::{node_action, NodeAction};
use crate::domain::node_status::status::StatusInputs;

/// What the dry run observed of the cluster.
#[derive(Debug, Clone)]
pub struct ClusterObservation {
    /// The API server the kubeconfig names (empty when it could not be read).
    pub server: String,
    /// The client certificate must first be requested with the bootstrap kubeconfig.
    pub bootstrap_first: bool,
    pub registration: Registration,
    pub status_inputs: StatusInputs,
    /// The Node the API server holds (`None`: there is none), or why it could not be read.
    pub existing: Result<Option<NodeObject>, String>,
}

/// The plan's connected-mode section.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPlan {
    pub server: String,
    pub node: String,
    pub bootstrap_first: bool,
    /// `register`, `adopt`, or `unknown` (the Node could not be read).
    pub action: String,
    pub reason: Option<String>,
    /// The Node that would be created.
    pub node_object: Option<Value>,
    pub metadata_patch: Option<Value>,
    pub status_patch: Option<Value>,
    /// Requests that would change the cluster.
    pub action_count: usize,
}

pub fn cluster_plan(observed: &ClusterObservation) -> ClusterPlan {
    let mut plan = ClusterPlan {
        server: observed.server.clone(),
        node: observed.registration.node_name.clone(),
        bootstrap_first: observed.bootstrap_first,
        action: "unknown".into(),
        reason: None,
        node_object: None,
        metadata_patch: None,
        status_patch: None,
        action_count: usize::from(observed.bootstrap_first),
    };
    let existing = match &observed.existing {
        Ok(existing) => existing.as_ref(),
        Err(why) => {
            plan.reason = Some(why.clone());
            return plan;
        }
    };
    match node_action(&observed.registration, &observed.status_inputs, existing) {
        NodeAction::Register(node) => {
            plan.action = "register".into();
            plan.reason = Some("no Node of this name exists".into());
            plan.node_object = serde_json::to_value(&*node).ok();
            plan.action_count += 1;
        }
        NodeAction::Adopt {
            metadata_patch,
            status_patch,
        } => {
            plan.action = "adopt".into();
            plan.reason = Some("the Node exists: it is adopted, not created again".into());
            plan.action_count += usize::from(metadata_patch.is_some());
            plan.action_count += usize::from(status_patch.is_some());
            plan.metadata_patch = metadata_patch;
            plan.status_patch = status_patch;
        }
    }
    plan
}
