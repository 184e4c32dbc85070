//! Node admission of a new pod. STUB (apipods branch): admits everything; the
//! coordinator's module with upstream's predicates replaces this file on merge.

use std::collections::BTreeMap;

use crate::domain::pod::Pod;
use crate::domain::units::quantity::Quantity;

pub use crate::domain::config::model::Taint;

/// What admission knows of the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub allocatable: BTreeMap<String, Quantity>,
    pub taints: Vec<Taint>,
}

/// Why a pod was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

/// Whether `pod` may run on `node` beside `admitted`.
pub fn admit_pod(_pod: &Pod, _admitted: &[Pod], _node: &NodeInfo) -> Result<(), Rejection> {
    Ok(())
}
