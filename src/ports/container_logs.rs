//! The containers' log files under `podLogsDir`: what the log manager rotates (sizes,
//! renames, the removals and compressions of a rotation plan) and what the kubelet API's
//! `/containerLogs` reads (a log opened at a size, and whether the file at its path is
//! still the one opened, so a followed log goes on in the file that replaced it).

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncSeek};

use crate::domain::kuberuntime::log_rotation::RotationPlan;

/// A log file operation that failed: the call, the path it was on, and the cause.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {}", path.display())]
pub struct ContainerLogsError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl ContainerLogsError {
    /// An error of `action` on `path`, for `map_err`.
    pub fn io<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> Self + 'p {
        move |source| Self {
            action,
            path: path.to_owned(),
            source,
        }
    }

    /// Whether the file (or its folder) is not there.
    pub fn is_not_found(&self) -> bool {
        self.source.kind() == io::ErrorKind::NotFound
    }
}

/// Which file a path named when it was opened (device and inode on Linux): a rotated
/// log's path names a new file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity(pub u64, pub u64);

/// What the open log file is read through.
pub trait LogReader: AsyncRead + AsyncSeek + Send + Unpin {}
impl<T: AsyncRead + AsyncSeek + Send + Unpin> LogReader for T {}

/// A log file opened for reading.
pub struct OpenLog {
    pub reader: Pin<Box<dyn LogReader>>,
    /// Its size when opened.
    pub len: u64,
    pub identity: FileIdentity,
}

#[async_trait]
pub trait ContainerLogs: Send + Sync {
    /// The sizes of the files at `paths`, in order, measured in one pass off the async
    /// threads (a round where no log is full costs one hop, not one per container).
    async fn sizes(&self, paths: Vec<PathBuf>) -> Vec<Result<u64, ContainerLogsError>>;

    /// The names in the folder `dir` that are UTF-8 (log names are), not sorted.
    ///
    /// # Errors
    /// [`ContainerLogsError`] (`list`), not found when the folder is missing.
    async fn list(&self, dir: &Path) -> Result<Vec<String>, ContainerLogsError>;

    /// Renames `from` to `to` (one folder).
    ///
    /// # Errors
    /// [`ContainerLogsError`] (`rename`).
    async fn rename(&self, from: &Path, to: &Path) -> Result<(), ContainerLogsError>;

    /// Carries out `plan`'s removals (a missing file is already removed), then its
    /// compressions in `dir`: each `log` becomes `log.gz` through `log.gz.tmp`, so that a
    /// crash leaves the plain file or a whole archive, never half of one.
    ///
    /// # Errors
    /// [`ContainerLogsError`] (`remove`, `open`, `create`, `compress`, `rename`): the
    /// first failure; what came before it stays done.
    async fn tidy(&self, dir: &Path, plan: &RotationPlan) -> Result<(), ContainerLogsError>;

    /// Opens the log at `path` for reading.
    ///
    /// # Errors
    /// [`ContainerLogsError`] (`open`, `stat`).
    async fn open(&self, path: &Path) -> Result<OpenLog, ContainerLogsError>;

    /// Which file is at `path` now; `None` when there is none.
    async fn identity(&self, path: &Path) -> Option<FileIdentity>;
}
