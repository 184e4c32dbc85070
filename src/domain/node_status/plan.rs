//! What connected mode would do to the node's Node object, for the dry run: register it,
//! or adopt the existing one with which metadata and status patches. The same functions
//! the node agent uses decide it.

use serde_json::Value;

use super::labels::{initial_node, reconcile_metadata, Registration};
use super::model::{NodeObject, NodeStatus};
use super::report::{metadata_patch, status_patch};
use super::status::{compute_status, status_changed, StatusInputs};

/// The registration decision.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeAction {
    /// No such Node: create this one (status included, as registration sends it).
    Register(Box<NodeObject>),
    /// The Node exists and is adopted (no second create); each patch only when needed.
    Adopt {
        metadata_patch: Option<Value>,
        status_patch: Option<Value>,
    },
}

/// What registering `registration` with the status `inputs` describes would do, given the
/// Node the API server holds (`None`: there is none).
pub fn node_action(
    registration: &Registration,
    inputs: &StatusInputs,
    existing: Option<&NodeObject>,
) -> NodeAction {
    let mut node = initial_node(registration);
    let Some(existing) = existing else {
        node.status = compute_status(&NodeStatus::default(), inputs).status;
        return NodeAction::Register(Box::new(node));
    };
    let changes = reconcile_metadata(&node, existing);
    let status = compute_status(&existing.status, inputs).status;
    NodeAction::Adopt {
        metadata_patch: (!changes.is_empty()).then(|| metadata_patch(&changes)),
        status_patch: status_changed(&existing.status, &status)
            .then(|| status_patch(&existing.status, &status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::node_status::labels::LABEL_HOSTNAME;

    fn registration() -> Registration {
        Registration {
            node_name: "n1".into(),
            hostname: "n1".into(),
            os: "linux".into(),
            arch: "amd64".into(),
            schedulable: true,
            controller_attach_detach: true,
            ..Registration::default()
        }
    }

    fn inputs() -> StatusInputs {
        StatusInputs {
            node_name: "n1".into(),
            kubelet_port: 10250,
            max_images: 50,
            ..StatusInputs::default()
        }
    }

    #[test]
    fn a_missing_node_is_registered_with_its_labels_and_status() {
        let NodeAction::Register(node) = node_action(&registration(), &inputs(), None) else {
            panic!("registers");
        };
        assert_eq!(node.metadata.name, "n1");
        assert_eq!(
            node.metadata.labels.get(LABEL_HOSTNAME).map(String::as_str),
            Some("n1")
        );
        assert!(!node.status.conditions.is_empty());
    }

    #[test]
    fn an_existing_node_is_adopted_and_patched_only_where_it_differs() {
        let NodeAction::Register(existing) = node_action(&registration(), &inputs(), None) else {
            panic!("registers");
        };
        let mut existing = *existing;
        assert_eq!(
            node_action(&registration(), &inputs(), Some(&existing)),
            NodeAction::Adopt {
                metadata_patch: None,
                status_patch: None
            }
        );
        existing.metadata.labels.remove(LABEL_HOSTNAME);
        let NodeAction::Adopt {
            metadata_patch: Some(patch),
            status_patch: None,
        } = node_action(&registration(), &inputs(), Some(&existing))
        else {
            panic!("a label patch only");
        };
        assert_eq!(patch["metadata"]["labels"][LABEL_HOSTNAME], "n1");
    }
}
