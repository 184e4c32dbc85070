//! Mirror pods in the API server: the node's list of them, a wait for a change, create,
//! and delete with a uid precondition (upstream's `MirrorClient`).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use super::CallError;
use crate::domain::pod::mirror::MirrorPod;

#[derive(Debug, Error)]
pub enum MirrorPodsError {
    /// A pod of that name exists (a mirror not yet gone, or a pod that is no mirror).
    #[error("pod {namespace}/{name} already exists")]
    AlreadyExists { namespace: String, name: String },
    #[error("{verb} mirror pod {namespace}/{name}: {source}")]
    Call {
        verb: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: CallError,
    },
}

/// The mirrors bound to a node, and the list's resource version to watch from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorList {
    pub mirrors: Vec<MirrorPod>,
    pub resource_version: String,
}

#[async_trait]
pub trait MirrorPodApi: Send + Sync {
    /// The pods with `spec.nodeName=<node>` that carry the mirror annotation.
    /// # Errors
    /// [`MirrorPodsError::Call`].
    async fn list_mirror_pods(&self, node: &str) -> Result<MirrorList, MirrorPodsError>;

    /// Returns when a mirror of the node is added, deleted or marked for deletion after
    /// `resource_version`, or after `within` (then nothing may have changed).
    /// # Errors
    /// [`MirrorPodsError::Call`] when the watch cannot start or breaks (list again).
    async fn wait_mirror_change(
        &self,
        node: &str,
        resource_version: &str,
        within: Duration,
    ) -> Result<(), MirrorPodsError>;

    /// Create the pod `body` (a mirror from `mirror_pod_body`).
    /// # Errors
    /// [`MirrorPodsError::AlreadyExists`], or [`MirrorPodsError::Call`].
    async fn create_mirror_pod(&self, body: &Value) -> Result<(), MirrorPodsError>;

    /// Delete now (grace 0) the pod whose uid is `uid`; one gone or replaced (another
    /// uid) is no error, as upstream's `DeleteMirrorPod`.
    /// # Errors
    /// [`MirrorPodsError::Call`].
    async fn delete_mirror_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<(), MirrorPodsError>;
}
