//! Where the kubelet's pods come from besides the API server: the manifest
//! folder (`--pod-manifest-path`) and, later, the manifest URL.
//!
//! As upstream's file and HTTP sources do, a source always sends the full
//! set of its pods (a SET update), never a delta: the pod manager diffs the
//! new set against the previous one from the same source to find pods to
//! add, update and remove.

use async_trait::async_trait;

use crate::domain::pod::static_pod::ManifestError;
use crate::domain::pod::Pod;

/// Every pod a source holds now, replacing whatever it sent before.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSetUpdate {
    /// The source's name, the `kubernetes.io/config.source` value: "file" or "http".
    pub source: String,
    /// The complete, ordered set of pods; an empty set removes all of them.
    pub pods: Vec<Pod>,
    /// Manifests that yielded no pods this time, for the operator; the
    /// remaining manifests still contribute their pods.
    pub errors: Vec<ManifestError>,
}

/// A source that cannot be set up or read.
#[derive(Debug, thiserror::Error)]
pub enum PodSourceError {
    /// The configuration names a source that cannot work (a bad URL).
    #[error("invalid {what} {value:?}")]
    Invalid {
        /// The flag or field: `--manifest-url`.
        what: &'static str,
        value: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A read failed (the URL did not answer).
    #[error("cannot read pods from {origin}")]
    Read {
        /// The folder or URL.
        origin: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A stream of pod set updates. The first call returns the initial set; each
/// later call waits until the set changes and returns the new set.
#[async_trait]
pub trait PodSource: Send {
    /// The next set, or `None` once the source has stopped for good.
    async fn next(&mut self) -> Option<PodSetUpdate>;

    /// One read of the source now, for the planner: the set it holds, with the
    /// manifests that yielded no pod. Errors: [`PodSourceError::Read`] when the source
    /// could not be read at all.
    async fn read_once(&self) -> Result<PodSetUpdate, PodSourceError>;
}
