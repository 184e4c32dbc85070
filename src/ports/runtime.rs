//! The container runtime (CRI) in the project's own types. Start-up needs only the
//! version handshake; the pod lifecycle calls join with the CRI adapter.

use async_trait::async_trait;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeVersion {
    pub runtime_name: String,
    pub runtime_version: String,
    pub runtime_api_version: String,
}

/// Errors of every runtime call, mapped from the transport's codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("the runtime does not implement {0}")]
    Unimplemented(String),
    #[error("runtime unavailable at {endpoint}: {reason}")]
    Unavailable { endpoint: String, reason: String },
    #[error("runtime call {call} timed out after {timeout_ms} ms")]
    DeadlineExceeded { call: String, timeout_ms: u64 },
    #[error("runtime call {call} failed: {reason}")]
    Failed { call: String, reason: String },
}

#[async_trait]
pub trait RuntimeService: Send + Sync {
    /// The runtime's name and versions. Errors: `Unavailable` when it cannot be reached.
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError>;
}
