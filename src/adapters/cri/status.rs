//! The CRI `Status` and `ListImages` calls, for the node status.

use async_trait::async_trait;

use super::{proto, CriRuntime};
use crate::domain::node_status::readiness::RuntimeCondition;
use crate::domain::node_status::status::ImageSummary;
use crate::ports::runtime::RuntimeError;
use crate::ports::runtime_status::RuntimeStatusService;

impl CriRuntime {
    /// CRI `Status`: the conditions and the handlers.
    pub(super) async fn status_response(&self) -> Result<proto::StatusResponse, RuntimeError> {
        let mut c = self.runtime.clone();
        self.call(
            "Status",
            c.status(self.request(proto::StatusRequest { verbose: false })),
        )
        .await
    }
}

#[async_trait]
impl RuntimeStatusService for CriRuntime {
    async fn runtime_conditions(&self) -> Result<Vec<RuntimeCondition>, RuntimeError> {
        Ok(self
            .status_response()
            .await?
            .status
            .map(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .map(|c| RuntimeCondition {
                type_: c.r#type,
                status: c.status,
                reason: c.reason,
                message: c.message,
            })
            .collect())
    }

    async fn list_images(&self) -> Result<Vec<ImageSummary>, RuntimeError> {
        Ok(self
            .all_images()
            .await?
            .into_iter()
            .map(|i| ImageSummary {
                repo_digests: i.repo_digests,
                repo_tags: i.repo_tags,
                size_bytes: i64::try_from(i.size).unwrap_or(i64::MAX),
            })
            .collect())
    }
}
