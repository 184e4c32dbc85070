//! What the node status needs from the container runtime beyond the pod calls: its
//! readiness conditions (CRI `Status`) and the images it holds (CRI `ListImages`).

use async_trait::async_trait;

use crate::domain::node_status::readiness::RuntimeCondition;
use crate::domain::node_status::status::ImageSummary;
use crate::ports::runtime::RuntimeError;

#[async_trait]
pub trait RuntimeStatusService: Send + Sync {
    /// The runtime's conditions (`RuntimeReady`, `NetworkReady`).
    /// # Errors
    /// [`RuntimeError::Unavailable`] or [`RuntimeError::DeadlineExceeded`] when the runtime
    /// does not answer.
    async fn runtime_conditions(&self) -> Result<Vec<RuntimeCondition>, RuntimeError>;

    /// The images the runtime holds.
    /// # Errors
    /// As [`RuntimeStatusService::runtime_conditions`].
    async fn list_images(&self) -> Result<Vec<ImageSummary>, RuntimeError>;
}
