//! Image pulls for a sync: each credential in turn, the pull back-off recorded.

use tracing::debug;

use super::sync::{lock, SyncContext};
use crate::domain::kuberuntime::backoff::image_pull_key;
use crate::domain::kuberuntime::credentials::AuthConfig;
use crate::domain::kuberuntime::plan::RETRY_AFTER_ERROR;
use crate::domain::kuberuntime::pod_sync::Answer;
use crate::domain::pod::Pod;
use crate::domain::units::duration::GoDuration;
use crate::ports::error::Chain;
use crate::ports::runtime::{ImageService, RuntimeError};

/// Pulls `image`; a failure is recorded in the pull back-off (upstream's
/// `EnsureImageExists` after its decision), a success resets it.
pub(super) async fn pull_image(
    ctx: &SyncContext,
    pod: &Pod,
    image: &str,
    credentials: &[AuthConfig],
) -> Answer {
    let key = image_pull_key(&pod.metadata.uid, image);
    let started = ctx.clock.monotonic_nanos();
    match pull_with_credentials(ctx.images.as_ref(), image, credentials).await {
        Ok(reference) => {
            let took = GoDuration::from_nanos(
                i64::try_from(ctx.clock.monotonic_nanos().saturating_sub(started))
                    .unwrap_or(i64::MAX),
            );
            debug!(image, %reference, "pulled image");
            lock(&ctx.image_backoff).reset(&key);
            Answer::Pulled { took }
        }
        Err(error) => {
            let mut backoff = lock(&ctx.image_backoff);
            // Keys of pods gone without their spec (orphans, pods from before a restart)
            // are not reset; the table keeps only the failures still counting.
            backoff.gc(ctx.monotonic());
            backoff.record_failure(&key, ctx.monotonic());
            // Look again soon: the status then says ImagePullBackOff until the next pull.
            let retry_after = backoff
                .current_delay(&key)
                .map_or(RETRY_AFTER_ERROR, |d| d.min(RETRY_AFTER_ERROR));
            Answer::PullFailed {
                error: Chain(&error).to_string(),
                retry_after,
            }
        }
    }
}

/// Upstream's `PullImage`: anonymously when no credential matches the image's
/// registry, else with each matching credential in turn until one works; the errors of
/// all the attempts when none does.
async fn pull_with_credentials(
    images: &dyn ImageService,
    image: &str,
    credentials: &[AuthConfig],
) -> Result<String, RuntimeError> {
    if credentials.is_empty() {
        return images.pull_image(image, None).await;
    }
    let mut errors = Vec::new();
    for auth in credentials {
        match images.pull_image(image, Some(auth)).await {
            Ok(reference) => return Ok(reference),
            Err(e) => errors.push(e),
        }
    }
    match errors.len() {
        1 => Err(errors.remove(0)),
        _ => Err(RuntimeError::Failed {
            call: "PullImage".into(),
            source: std::sync::Arc::new(PullErrors(
                errors.iter().map(|e| Chain(e).to_string()).collect(),
            )),
        }),
    }
}

/// The errors of several pull attempts, as upstream's aggregate prints them.
#[derive(Debug)]
struct PullErrors(Vec<String>);

impl std::fmt::Display for PullErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}]", self.0.join(", "))
    }
}

impl std::error::Error for PullErrors {}
