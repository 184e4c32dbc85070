//! The container log manager: every `containerLogMonitorInterval`, each running
//! container's live log that reached `containerLogMaxSize` is rotated as
//! `domain::kuberuntime::log_rotation` plans it, and the runtime reopens it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::domain::kuberuntime::labels::{POD_NAMESPACE_LABEL, POD_NAME_LABEL, POD_UID_LABEL};
use crate::domain::kuberuntime::log_rotation::{
    live_log_name, plan_rotation, LogRotatePolicy, LogRotationSettings, RotationPlan,
    COMPRESSED_SUFFIX, TEMPORARY_SUFFIX,
};
use crate::domain::kuberuntime::requests::pod_log_dir_of;
use crate::domain::kuberuntime::runtime::{ContainerEntry, ContainerFilter, ContainerState};
use crate::ports::clock::Clock;
use crate::ports::error::Chain;
use crate::ports::runtime::{RuntimeError, RuntimeService};

#[derive(Debug, thiserror::Error)]
pub enum LogRotationError {
    #[error("failed to {action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to reopen the log of container {container}")]
    Reopen {
        container: String,
        #[source]
        source: RuntimeError,
    },
    #[error("the rotation of {path} was interrupted")]
    Interrupted { path: PathBuf },
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> LogRotationError {
    let path = path.to_owned();
    move |source| LogRotationError::Io {
        action,
        path,
        source,
    }
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
    pod_logs_dir: PathBuf,
    policy: LogRotatePolicy,
    settings: LogRotationSettings,
}

impl ContainerLogManager {
    /// `None` when the settings turn rotation off.
    pub fn new(
        runtime: Arc<dyn RuntimeService>,
        clock: Arc<dyn Clock>,
        pod_logs_dir: PathBuf,
        settings: LogRotationSettings,
    ) -> Option<Self> {
        Some(Self {
            runtime,
            clock,
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
        // One blocking pass stats every live log: a round where none is full is one hop
        // off the async threads, not one per container.
        let Ok(sized) = tokio::task::spawn_blocking(move || {
            candidates
                .into_iter()
                .map(|(dir, entry)| {
                    let size = std::fs::metadata(dir.join(live_log_name(entry.status.attempt)))
                        .map(|meta| meta.len());
                    (dir, entry, size)
                })
                .collect::<Vec<_>>()
        })
        .await
        else {
            warn!("the round's size pass was interrupted");
            return Ok(RoundOutcome {
                checked,
                ..RoundOutcome::default()
            });
        };
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
        size: io::Result<u64>,
    ) -> Result<bool, LogRotationError> {
        let id = &entry.status.id;
        let live = live_log_name(entry.status.attempt);
        let path = dir.join(&live);
        let size = match size {
            Ok(size) => size,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A rotation cut short after the rename (the kubelet stopped before the
                // reopen) leaves no live file: upstream's recovery is a reopen.
                self.reopen(id).await?;
                tokio::fs::metadata(&path)
                    .await
                    .map_err(io_error("stat", &path))?
                    .len()
            }
            Err(e) => return Err(io_error("stat", &path)(e)),
        };
        // Below the size (a log just reopened), the plan says so.
        let entries = list_names(dir).await?;
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
        let folder = dir.to_owned();
        let tidy = plan.clone();
        tokio::task::spawn_blocking(move || tidy_rotated(&folder, &tidy))
            .await
            .map_err(|_| LogRotationError::Interrupted { path: path.clone() })??;
        let rotated = dir.join(&plan.rotate_to);
        tokio::fs::rename(&path, &rotated)
            .await
            .map_err(io_error("rename", &path))?;
        if let Err(error) = self.reopen(id).await {
            // Renamed back, the next round tries again; the container kept writing to
            // the same file all along.
            if let Err(back) = tokio::fs::rename(&rotated, &path).await {
                warn!(rotated = %rotated.display(), path = %path.display(), error = %back, "failed to rename a rotated log back: its lines stay in the rotated file");
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

async fn list_names(dir: &Path) -> Result<Vec<String>, LogRotationError> {
    let mut entries = tokio::fs::read_dir(dir)
        .await
        .map_err(io_error("list", dir))?;
    let mut names = Vec::new();
    while let Some(entry) = entries.next_entry().await.map_err(io_error("list", dir))? {
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// The plan's removals, then its compressions (blocking file work).
fn tidy_rotated(dir: &Path, plan: &RotationPlan) -> Result<(), LogRotationError> {
    for name in &plan.remove {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("remove", &path)(e)),
        }
    }
    for name in &plan.compress {
        compress(&dir.join(name))?;
    }
    Ok(())
}

/// `log` to `log.gz` through `log.gz.tmp`, so that a crash leaves either the plain file
/// or a whole archive (the next plan removes the temporary file).
fn compress(log: &Path) -> Result<(), LogRotationError> {
    use std::os::unix::fs::OpenOptionsExt;

    let mut name = log.as_os_str().to_owned();
    name.push(TEMPORARY_SUFFIX);
    let temporary = PathBuf::from(name);
    let mut name = log.as_os_str().to_owned();
    name.push(COMPRESSED_SUFFIX);
    let compressed = PathBuf::from(name);

    let mut input = std::fs::File::open(log).map_err(io_error("open", log))?;
    let output = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o640)
        .open(&temporary)
        .map_err(io_error("create", &temporary))?;
    let written = (|| {
        let mut encoder = flate2::write::GzEncoder::new(output, flate2::Compression::default());
        io::copy(&mut input, &mut encoder)?;
        encoder.finish()?.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(io_error("compress", log)(e));
    }
    std::fs::rename(&temporary, &compressed).map_err(io_error("rename", &temporary))?;
    std::fs::remove_file(log).map_err(io_error("remove", log))
}

#[cfg(test)]
mod tests;
