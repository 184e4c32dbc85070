//! The pods bound to the node: list and watch them, patch their status, delete them once
//! terminated. Pods cross as raw JSON objects: each is decoded on its own by the domain,
//! so one pod rkubelet cannot read does not hide the others.

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use super::CallError;

#[derive(Debug, Error)]
pub enum PodsError {
    /// 410 Gone: the watch's resource version is too old; list again.
    #[error("the pods' resource version {resource_version:?} is too old")]
    Gone { resource_version: String },
    #[error("pod {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    /// 409: the uid precondition failed (the pod was recreated under its name) or a
    /// conflicting write.
    #[error("pod {namespace}/{name}: conflict (uid precondition or concurrent write)")]
    Conflict { namespace: String, name: String },
    #[error("{verb} pod {namespace}/{name}: {source}")]
    Call {
        verb: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: CallError,
    },
}

/// One page of a list: the pods and the resource version to watch from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodList {
    pub items: Vec<Value>,
    pub resource_version: String,
}

/// One change seen by a watch, with the object as the API sent it.
#[derive(Debug, Clone, PartialEq)]
pub enum PodWatchEvent {
    Added(Value),
    Modified(Value),
    Deleted(Value),
    /// Nothing changed; the resource version to resume from.
    Bookmark(String),
}

/// An open watch.
#[async_trait]
pub trait PodWatch: Send + Sync {
    /// The next change; `None` when the server ended the watch (list or watch again).
    /// # Errors
    /// [`PodsError::Gone`] when the resource version expired; [`PodsError::Call`] when
    /// the stream broke.
    async fn next(&mut self) -> Option<Result<PodWatchEvent, PodsError>>;
}

#[async_trait]
pub trait PodApi: Send + Sync {
    /// Every pod matching `field_selector` (`spec.nodeName=<node>`), in every namespace.
    /// # Errors
    /// [`PodsError::Call`].
    async fn list_pods(&self, field_selector: &str) -> Result<PodList, PodsError>;

    /// Watch the pods matching `field_selector` from `resource_version`.
    /// # Errors
    /// [`PodsError::Gone`] or [`PodsError::Call`].
    async fn watch_pods(
        &self,
        field_selector: &str,
        resource_version: &str,
    ) -> Result<Box<dyn PodWatch>, PodsError>;

    /// A strategic-merge patch of the pod's `status` subresource (the body carries the
    /// uid precondition, see `domain::status::status_patch`). Returns the pod as stored.
    /// # Errors
    /// [`PodsError::NotFound`], [`PodsError::Conflict`] (another pod under that name),
    /// [`PodsError::Call`].
    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, PodsError>;

    /// Delete the pod with `grace_period_seconds` and a uid precondition.
    /// # Errors
    /// [`PodsError::NotFound`], [`PodsError::Conflict`] (uid mismatch), [`PodsError::Call`].
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period_seconds: i64,
    ) -> Result<(), PodsError>;
}
