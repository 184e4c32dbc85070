//! The node's Lease in `kube-node-lease`.

use async_trait::async_trait;
use thiserror::Error;

use super::CallError;
use crate::domain::node_status::model::Lease;

#[derive(Debug, Error)]
pub enum LeasesError {
    #[error("lease {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("lease {namespace}/{name} already exists")]
    AlreadyExists { namespace: String, name: String },
    /// The lease changed since it was read (its resourceVersion is stale).
    #[error("lease {namespace}/{name} was changed since it was read")]
    Conflict { namespace: String, name: String },
    #[error("{verb} lease {namespace}/{name}: {source}")]
    Call {
        verb: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: CallError,
    },
}

#[async_trait]
pub trait LeaseApi: Send + Sync {
    /// # Errors
    /// [`LeasesError::NotFound`] when absent.
    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Lease, LeasesError>;

    /// # Errors
    /// [`LeasesError::AlreadyExists`] when one exists.
    async fn create_lease(&self, lease: &Lease) -> Result<Lease, LeasesError>;

    /// Replace the lease; its `resourceVersion` must be the stored one.
    /// # Errors
    /// [`LeasesError::Conflict`] when it is not; [`LeasesError::NotFound`] when gone.
    async fn update_lease(&self, lease: &Lease) -> Result<Lease, LeasesError>;
}
