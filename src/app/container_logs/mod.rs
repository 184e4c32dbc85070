//! The container log manager: every `containerLogMonitorInterval`, each running
//! container's live log that reached `containerLogMaxSize` is rotated as
//! `domain::kuberuntime::log_rotation` plans it, and the runtime reopens it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::domain::kuberuntime::labels::{POD_NAMESPACE_LABEL, POD_NAME_LABEL, POD_UID_LABEL};
use crate::domain::kuberuntime::log_rotation::{
    live_log_name, plan_rotation, LogRotatePolicy, LogRotationSettings,
};
use crate::domain::kuberuntime::requests::pod_log_dir_of;
use crate::domain::kuberuntime::runtime::{ContainerEntry, ContainerFilter, ContainerState};
use crate::ports::clock::Clock;
use crate::ports::container_logs::{ContainerLogs, ContainerLogsError};
use crate::ports::error::Chain;
use crate::ports::runtime::{RuntimeError, RuntimeService};

#[derive(Debug, thiserror::Error)]
pub enum LogRotationError {
    #[error(transparent)]
    Files(#[from] ContainerLogsError),
    #[error("failed to reopen the log of container {container}")]
    Reopen {
        container: String,
        #[source]
        source: RuntimeError,
    },
}

/// What one round did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RoundOutcome {
    /// Running containers whose log was looked at.
    pub checked: usize,
    pub rotated: usize,
    pub failed: usize,
}

pub struct ContainerLogManager {
    runtime: Arc<dyn RuntimeService>,
    clock: Arc<dyn Clock>,
    logs: Arc<dyn ContainerLogs>,
    pod_logs_dir: PathBuf,
    policy: LogRotatePolicy,
    settings: LogRotationSettings,
}

impl ContainerLogManager {
    /// `None` when the settings turn rotation off.
    pub fn new(
        runtime: Arc<dyn RuntimeService>,
        clock: Arc<dyn Clock>,
        logs: Arc<dyn ContainerLogs>,
        pod_logs_dir: PathBuf,
        settings: LogRotationSettings,
    ) -> Option<Self> {
        Some(Self {
            runtime,
            clock,
            logs,
            pod_logs_dir,
            policy: settings.policy?,
            settings,
        })
    }

    /// Rounds every monitor interval until `stop`.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        info!(
            max_size_bytes = self.policy.max_size_bytes,
            max_files = self.policy.max_files,
            interval_ms = self.settings.monitor_interval.as_millis() as u64,
            "container log rotation started"
        );
        let mut ticks = tokio::time::interval(self.settings.monitor_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stop.changed() => return,
            }
            if *stop.borrow() {
                return;
            }
            match self.rotate_logs().await {
                Ok(outcome) if outcome.rotated > 0 || outcome.failed > 0 => {
                    info!(?outcome, "container log rotation round")
                }
                Ok(_) => {}
                Err(error) => warn!(error = %Chain(&error), "failed to rotate container logs"),
            }
        }
    }

    /// One round over the running containers, `containerLogMaxWorkers` at a time; one
    /// container's failure does not stop the others'.
    pub async fn rotate_logs(&self) -> Result<RoundOutcome, RuntimeError> {
        let running = self
            .runtime
            .list_containers(&ContainerFilter {
                state: Some(ContainerState::Running),
                ..Default::default()
            })
            .await?;
        let candidates: Vec<(PathBuf, ContainerEntry)> = running
            .into_iter()
            .filter_map(|entry| Some((self.log_dir(&entry)?, entry)))
            .collect();
        let checked = candidates.len();
        let sizes = self
            .logs
            .sizes(
                candidates
                    .iter()
                    .map(|(dir, entry)| dir.join(live_log_name(entry.status.attempt)))
                    .collect(),
            )
            .await;
        let sized: Vec<_> = candidates
            .into_iter()
            .zip(sizes)
            .map(|((dir, entry), size)| (dir, entry, size))
            .collect();
        let max = self.policy.max_size_bytes;
        let results: Vec<Result<bool, LogRotationError>> = futures_util::stream::iter(
            sized
                .into_iter()
                .filter(|(_, _, size)| !matches!(size, Ok(bytes) if *bytes < max)),
        )
        .map(|(dir, entry, size)| async move {
            let result = self.rotate_container(&dir, &entry, size).await;
            if let Err(error) = &result {
                warn!(container_id = %entry.status.id, error = %Chain(error), "failed to rotate log for container");
            }
            result
        })
        .buffer_unordered(self.settings.max_workers)
        .collect()
        .await;
        let mut outcome = RoundOutcome {
            checked,
            ..RoundOutcome::default()
        };
        for result in results {
            match result {
                Ok(true) => outcome.rotated += 1,
                Ok(false) => {}
                Err(_) => outcome.failed += 1,
            }
        }
        Ok(outcome)
    }

    /// The folder of the container's logs, from the labels the kubelet put on it; `None`
    /// for a container no kubelet made.
    fn log_dir(&self, entry: &ContainerEntry) -> Option<PathBuf> {
        let label = |key: &str| entry.labels.get(key).map(String::as_str);
        let dir = pod_log_dir_of(
            &self.pod_logs_dir,
            label(POD_NAMESPACE_LABEL)?,
            label(POD_NAME_LABEL)?,
            label(POD_UID_LABEL)?,
        );
        Some(dir.join(&entry.status.name))
    }

    /// Rotates the container's live log in `dir`, of `size` as the round found it, when
    /// it is full; `true` when it did.
    async fn rotate_container(
        &self,
        dir: &Path,
        entry: &ContainerEntry,
        size: Result<u64, ContainerLogsError>,
    ) -> Result<bool, LogRotationError> {
        let id = &entry.status.id;
        let live = live_log_name(entry.status.attempt);
        let path = dir.join(&live);
        let size = match size {
            Ok(size) => size,
            Err(e) if e.is_not_found() => {
                // A rotation cut short after the rename (the kubelet stopped before the
                // reopen) leaves no live file: upstream's recovery is a reopen.
                self.reopen(id).await?;
                let mut sizes = self.logs.sizes(vec![path.clone()]).await;
                sizes.pop().unwrap_or(Err(e))?
            }
            Err(e) => return Err(e.into()),
        };
        // Below the size (a log just reopened), the plan says so.
        let entries = self.logs.list(dir).await?;
        let Some(plan) = plan_rotation(
            &live,
            size,
            &entries,
            &self.policy,
            self.clock.now_unix_nanos(),
        ) else {
            return Ok(false);
        };
        debug!(container_id = %id, ?plan, "rotating container log");
        self.logs.tidy(dir, &plan).await?;
        let rotated = dir.join(&plan.rotate_to);
        self.logs.rename(&path, &rotated).await?;
        if let Err(error) = self.reopen(id).await {
            // Renamed back, the next round tries again; the container kept writing to
            // the same file all along.
            if let Err(back) = self.logs.rename(&rotated, &path).await {
                warn!(rotated = %rotated.display(), path = %path.display(), error = %Chain(&back), "failed to rename a rotated log back: its lines stay in the rotated file");
            }
            return Err(error);
        }
        Ok(true)
    }

    async fn reopen(&self, id: &str) -> Result<(), LogRotationError> {
        self.runtime
            .reopen_container_log(id)
            .await
            .map_err(|source| LogRotationError::Reopen {
                container: id.to_owned(),
                source,
            })
    }
}

#[cfg(test)]
mod tests;
