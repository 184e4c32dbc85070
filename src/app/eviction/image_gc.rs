//! Image garbage collection (upstream's image GC manager): images are detected and
//! their last use recorded; every 5 minutes, when the image filesystem is over
//! `imageGCHighThresholdPercent`, unused images go, least recently used first, until it
//! is at `imageGCLowThresholdPercent`; the eviction manager asks for every unused image
//! to go before it evicts a pod for disk. The order is the domain's
//! (`domain::eviction::image_gc`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Mutex};
use tracing::{debug, info, warn};

use super::observe::Observer;
use crate::app::pods::PodStatusStore;
use crate::app::server::shutdown_requested;
use crate::domain::eviction::image_gc::{
    bytes_to_free, wanted_image_ids, ImageGcError, ImageGcPolicy, ImageRecords,
};
use crate::domain::eviction::signals::FsStats;
use crate::ports::clock::Clock;
use crate::ports::error::Chain;
use crate::ports::node_stats::RuntimeStats;
use crate::ports::runtime::RuntimeError;

/// Upstream's `ImageGCPeriod`.
pub const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);

/// Why a collection did not free what it had to.
#[derive(Debug, thiserror::Error)]
pub enum ImageGcFailure {
    #[error("cannot list the images or those in use")]
    Runtime(#[from] RuntimeError),
    #[error("the image filesystem cannot be measured")]
    NoImageFs,
    #[error(transparent)]
    Policy(#[from] ImageGcError),
}

/// The image GC manager.
pub struct ImageGc {
    runtime: Arc<dyn RuntimeStats>,
    /// The kubelet's pods: the images they name are kept.
    pods: PodStatusStore,
    clock: Arc<dyn Clock>,
    policy: ImageGcPolicy,
    /// `--pod-infra-container-image`, kept as upstream keeps it.
    sandbox_image: String,
    records: Mutex<(ImageRecords, bool)>,
}

impl ImageGc {
    pub fn new(
        runtime: Arc<dyn RuntimeStats>,
        pods: PodStatusStore,
        clock: Arc<dyn Clock>,
        policy: ImageGcPolicy,
        sandbox_image: String,
    ) -> Self {
        ImageGc {
            runtime,
            pods,
            clock,
            policy,
            sandbox_image,
            records: Mutex::new((ImageRecords::new(), false)),
        }
    }

    /// Records the images and their use; the first detection dates the images already
    /// there as old (upstream's zero time). Returns the images in use: those of the
    /// runtime's containers, the runtime's sandbox image, `--pod-infra-container-image`
    /// and those the kubelet's pods name.
    async fn detect(
        &self,
        records: &mut (ImageRecords, bool),
        now: i64,
    ) -> Result<BTreeSet<String>, RuntimeError> {
        let mut in_use = self.runtime.images_in_use().await?;
        let images = self.runtime.list_images().await?;
        let named: Vec<String> = self
            .pods
            .active_pods()
            .iter()
            .flat_map(|p| p.spec.all_containers())
            .map(|c| c.image.clone())
            .chain([self.sandbox_image.clone()])
            .collect();
        in_use.extend(wanted_image_ids(&images, &named));
        let detect_time = if records.1 { now } else { 0 };
        records.0.detect(&images, &in_use, detect_time, now);
        records.1 = true;
        Ok(in_use)
    }

    /// Removes unused images, least recently used first, until `bytes` are freed
    /// (upstream `freeSpace`). Returns what was freed; removal failures are logged and
    /// skipped.
    pub async fn free_space(&self, bytes: u64) -> Result<u64, RuntimeError> {
        let now = self.clock.now_unix_nanos();
        let mut records = self.records.lock().await;
        let in_use = self.detect(&mut records, now).await?;
        let order = records
            .0
            .removal_order(&in_use, now, self.policy.min_age_nanos);
        let mut freed = 0u64;
        for (id, size) in order {
            info!(image = %id, size, "removing image to free bytes");
            match self.runtime.remove_image(&id).await {
                Ok(()) => {
                    records.0.forget(&id);
                    freed = freed.saturating_add(size);
                }
                Err(error) => warn!(image = %id, error = %Chain(&error), "failed to remove image"),
            }
            if freed >= bytes {
                break;
            }
        }
        Ok(freed)
    }

    /// Every unused image that may go (upstream `DeleteUnusedImages`).
    pub async fn delete_unused_images(&self) -> Result<u64, RuntimeError> {
        info!("attempting to delete unused images");
        self.free_space(u64::MAX).await
    }

    /// One periodic collection (upstream `GarbageCollect`).
    pub async fn garbage_collect(&self, observer: &Observer) -> Result<u64, ImageGcFailure> {
        let fs = observer.image_fs().await.ok_or(ImageGcFailure::NoImageFs)?;
        self.collect(&fs.stats).await
    }

    /// One collection with the image filesystem measured as `fs`: over the high
    /// threshold, frees down to the low one.
    pub async fn collect(&self, fs: &FsStats) -> Result<u64, ImageGcFailure> {
        let capacity = i64::try_from(fs.capacity_bytes).unwrap_or(i64::MAX);
        let available = i64::try_from(fs.available_bytes).unwrap_or(i64::MAX);
        let Some(to_free) = bytes_to_free(&self.policy, capacity, available)? else {
            // Record uses anyway, so least-recently-used stays true between collections.
            let now = self.clock.now_unix_nanos();
            let mut records = self.records.lock().await;
            self.detect(&mut records, now).await?;
            debug!(
                capacity,
                available, "image filesystem below the high threshold"
            );
            return Ok(0);
        };
        info!(
            high_threshold = self.policy.high_threshold_percent,
            low_threshold = self.policy.low_threshold_percent,
            amount_to_free = to_free,
            "Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold"
        );
        let freed = self.free_space(u64::try_from(to_free).unwrap_or(0)).await?;
        let freed_i64 = i64::try_from(freed).unwrap_or(i64::MAX);
        if freed_i64 < to_free {
            return Err(ImageGcError::NotEnoughFreed {
                wanted: to_free,
                freed: freed_i64,
            }
            .into());
        }
        Ok(freed)
    }

    /// Collects every `period` until `stop`. Unlike upstream, the first collection is one
    /// period after start-up, not at once: images pulled for pods about to start are not
    /// removed before the pods are known.
    pub async fn run(
        self: Arc<Self>,
        observer: Arc<Observer>,
        period: Duration,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown_requested(&mut stop) => return,
                _ = ticker.tick() => {
                    if let Err(error) = self.garbage_collect(&observer).await {
                        warn!(error = %Chain(&error), "image garbage collection failed");
                    }
                }
            }
        }
    }
}
