//! The node's `storage.k8s.io/v1` CSINode: the CSI drivers registered on it (the Node
//! authorizer lets a node read and write its own).

use async_trait::async_trait;

use super::ObjectsError;
use crate::domain::csi::CsiNodeDriver;

/// What the kubelet reads and writes of its CSINode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiNodeObject {
    pub name: String,
    /// For the optimistic update.
    pub resource_version: String,
    pub drivers: Vec<CsiNodeDriver>,
}

#[async_trait]
pub trait CsiNodeApi: Send + Sync {
    /// `Ok(None)` when the node has no CSINode yet.
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn get_csi_node(&self, name: &str) -> Result<Option<CsiNodeObject>, ObjectsError>;

    /// Creates the CSINode `name` with `drivers`, owned by the Node of uid `node_uid`
    /// (it goes with the Node, as upstream's).
    /// # Errors
    /// [`ObjectsError::Call`] (also when it exists).
    async fn create_csi_node(
        &self,
        name: &str,
        node_uid: &str,
        drivers: &[CsiNodeDriver],
    ) -> Result<(), ObjectsError>;

    /// Replaces the drivers of the CSINode read as `node` (refused when it changed since).
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn update_csi_node(&self, node: &CsiNodeObject) -> Result<(), ObjectsError>;
}
