//! Connected mode in the dry run: the Node rkubelet would register, or how it would patch
//! the one the API server holds, decided by the node agent's own domain functions
//! (`domain::node_status::plan`). The API server is only read.

use serde::Serialize;
use serde_json::Value;

use crate::domain::admission::{admit_new_pods, NodeInfo};
use crate::domain::node_status::labels::Registration;
use crate::domain::node_status::model::NodeObject;
use crate::domain::node_status::plan::{node_action, NodeAction};
use crate::domain::node_status::status::StatusInputs;
use crate::domain::pod::api::{classify_api_object, ApiObject};
use crate::domain::pod::Pod;

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
    /// The pods bound to the node (`spec.nodeName`), as the API server sent them, or why
    /// they could not be listed.
    pub api_pods: Result<Vec<Value>, String>,
    /// The objects the API pods' claims lead to (claims, PersistentVolumes, CSIDrivers,
    /// VolumeAttachments), by pod uid, read as the volume manager reads them.
    pub volume_objects: std::collections::BTreeMap<String, crate::domain::volumes::PodObjects>,
}

/// What the kubelet would do with one pod bound to the node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiPodPlan {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `run` (admitted: its actions are in the pods section), `reject`, `invalid`,
    /// `delete` (being deleted), `mirror` (a static pod's API copy: never run).
    pub action: String,
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// Admission of the API pods in creation order (as the pod loop does), beside the
/// `admitted` pods (the static ones): the plan of each, and the pods that would run.
pub fn api_pod_plans(
    observed: &ClusterObservation,
    admitted: &[Pod],
    node: &NodeInfo,
) -> (Vec<ApiPodPlan>, Vec<Pod>) {
    let Ok(values) = &observed.api_pods else {
        return (Vec::new(), Vec::new());
    };
    let mut plans = Vec::new();
    let mut decoded = Vec::new();
    for v in values {
        let text = |k: &str| v["metadata"][k].as_str().unwrap_or_default().to_owned();
        let mut plan = ApiPodPlan {
            namespace: text("namespace"),
            name: text("name"),
            uid: text("uid"),
            action: String::new(),
            reason: None,
            message: None,
        };
        match classify_api_object(v) {
            ApiObject::Mirror { .. } => {
                plan.action = "mirror".into();
                plans.push(plan);
            }
            ApiObject::Pod(api) => decoded.push(api.pod),
            ApiObject::Invalid(invalid) => {
                let status = invalid.status();
                plan.action = "invalid".into();
                plan.reason = Some(status.reason);
                plan.message = Some(status.message);
                plans.push(plan);
            }
        }
    }
    // The pod loop's admission (the same domain function; no pressure is observed here).
    let (deleting, candidates): (Vec<&Pod>, Vec<&Pod>) =
        decoded.iter().partition(|p| p.is_being_deleted());
    let verdicts = admit_new_pods(candidates, admitted, Some(node), &[]);
    let mut run = Vec::new();
    for pod in deleting {
        plans.push(ApiPodPlan {
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            action: "delete".into(),
            reason: Some(format!(
                "being deleted: stopped with a grace period of {} s, then deleted in the API",
                pod.termination_grace_period()
            )),
            message: None,
        });
    }
    for (pod, verdict) in verdicts {
        let mut plan = ApiPodPlan {
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            action: "run".into(),
            reason: None,
            message: None,
        };
        match verdict {
            Err(rejection) => {
                plan.action = "reject".into();
                plan.reason = Some(rejection.reason);
                plan.message = Some(format!("Pod was rejected: {}", rejection.message));
            }
            Ok(()) => run.push(pod.clone()),
        }
        plans.push(plan);
    }
    (plans, run)
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
    /// The pods bound to the node and what would be done with each.
    pub pods: Vec<ApiPodPlan>,
    /// Why the node's pods could not be listed.
    pub pods_error: Option<String>,
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
        pods: Vec::new(),
        pods_error: observed.api_pods.as_ref().err().cloned(),
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
