//! The node's own Node object.

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use super::CallError;
use crate::domain::node_status::model::NodeObject;

#[derive(Debug, Error)]
pub enum NodesError {
    #[error("node {name:?} not found")]
    NotFound { name: String },
    #[error("node {name:?} already exists")]
    AlreadyExists { name: String },
    #[error("{verb} node {name:?}: {source}")]
    Call {
        verb: &'static str,
        name: String,
        #[source]
        source: CallError,
    },
}

impl NodesError {
    /// The failed call, when the error is one.
    pub fn call_error(&self) -> Option<&CallError> {
        match self {
            NodesError::Call { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[async_trait]
pub trait NodeApi: Send + Sync {
    /// # Errors
    /// [`NodesError::NotFound`] when there is no such Node; [`NodesError::Call`] otherwise.
    async fn get_node(&self, name: &str) -> Result<NodeObject, NodesError>;

    /// The Node as the API server's watch cache holds it (`resourceVersion=0`, upstream's
    /// `FromApiserverCache`): the status loop's read every period, which spares etcd. It
    /// may lag a write by moments; the next period sees it.
    /// # Errors
    /// As [`NodeApi::get_node`].
    async fn get_node_from_cache(&self, name: &str) -> Result<NodeObject, NodesError> {
        self.get_node(name).await
    }

    /// Create the Node; the answer is the stored object (with its uid).
    /// # Errors
    /// [`NodesError::AlreadyExists`] when a Node of that name exists.
    async fn create_node(&self, node: &NodeObject) -> Result<NodeObject, NodesError>;

    /// A strategic-merge patch of the `status` subresource.
    /// # Errors
    /// [`NodesError::NotFound`] when the Node is gone.
    async fn patch_node_status(&self, name: &str, patch: &Value) -> Result<NodeObject, NodesError>;

    /// A strategic-merge patch of the Node (labels, annotations).
    /// # Errors
    /// [`NodesError::NotFound`] when the Node is gone.
    async fn patch_node(&self, name: &str, patch: &Value) -> Result<NodeObject, NodesError>;
}
