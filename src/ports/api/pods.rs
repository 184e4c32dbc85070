//! The pods bound to the node: list them, keep a watch of them, patch their status, delete
//! them once terminated. Pods cross as raw JSON objects: each is decoded on its own by the domain,
//! so one pod rkubelet cannot read does not hide the others.

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use super::CallError;

#[derive(Debug, Error)]
pub enum PodsError {
    /// 410 Gone: the watch's resource version is too old; the watch lists again.
    #[error("the pods' watch expired (410 Gone): {message}")]
    Gone { message: String },
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

/// A list: the pods and the resource version it was read at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodList {
    pub items: Vec<Value>,
    pub resource_version: String,
}

/// What the watch of the node's pods reports.
#[derive(Debug, Clone, PartialEq)]
pub enum PodWatchEvent {
    /// A list, the first or one after the watch could not resume (410 Gone): every
    /// matching pod now. A pod reported before and missing here is gone, deleted while
    /// nothing was watched.
    Listed(Vec<Value>),
    /// A pod created or changed, as the API sent it.
    Applied(Value),
    /// A pod deleted, in its final state.
    Deleted(Value),
}

/// A watch that keeps itself going: it lists, watches from the list's resource version,
/// resumes from the last one it saw (bookmarks keep it fresh) when the server ends a
/// watch, lists again after 410 Gone, and backs off after failures (upstream's reflector:
/// 800 ms doubling to 30 s, with jitter).
#[async_trait]
pub trait PodWatch: Send + Sync {
    /// The next change; `None` once the watch has stopped for good.
    /// # Errors
    /// A failure the watch recovers from by itself, for the log: [`PodsError::Gone`] (a
    /// list follows), [`PodsError::Call`] (a list or watch failed or broke; tried again
    /// after the back-off).
    async fn next(&mut self) -> Option<Result<PodWatchEvent, PodsError>>;
}

#[async_trait]
pub trait PodApi: Send + Sync {
    /// Every pod matching `field_selector` (`spec.nodeName=<node>`), in every namespace.
    /// # Errors
    /// [`PodsError::Call`].
    async fn list_pods(&self, field_selector: &str) -> Result<PodList, PodsError>;

    /// A watch of the pods matching `field_selector`, listing them first. Nothing is sent
    /// before its first [`PodWatch::next`].
    fn watch_pods(&self, field_selector: &str) -> Box<dyn PodWatch>;

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
