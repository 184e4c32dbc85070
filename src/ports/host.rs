//! The host operating system as start-up sees it: identity, OOM score, the lock file, the
//! service manager, and the files it reads (the configuration and its drop-ins,
//! `resolv.conf`, the dry run's snapshot).

use std::fmt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use thiserror::Error;

/// Why a host operation failed. Every I/O failure names the path (or socket address) it was on.
#[derive(Debug, Error)]
pub enum HostError {
    #[error("failed to get hostname")]
    Hostname {
        #[source]
        source: std::io::Error,
    },
    #[error("hostname is not valid UTF-8: {hostname:?}")]
    HostnameNotUtf8 { hostname: String },
    /// The kernel accepts -1000..=1000 only.
    #[error("invalid oom_score_adj {value}: must be in [-1000, 1000]")]
    OomScoreOutOfRange { value: i32 },
    /// Writing `oom_score_adj` failed. Lowering the score needs CAP_SYS_RESOURCE: without it the
    /// kernel answers EACCES (see [`HostError::is_permission_denied`]).
    #[error("failed to write oom_score_adj {value} to {}", path.display())]
    OomScoreAdj {
        path: PathBuf,
        value: i32,
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the lock.
    #[error("lock file {} is held by another process", path.display())]
    LockContended { path: PathBuf },
    #[error("failed to lock {}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to watch {} for lock contention", path.display())]
    LockWatch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to create directory {}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Reading the process's own mappings (`/proc/self/smaps`, `/proc/self/exe`) failed.
    #[error("failed to read {}", path.display())]
    ReadMappings {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused to drop a mapping's pages.
    #[error("failed to release the pages of {path} at {start:#x}-{end:#x}")]
    ReleasePages {
        path: String,
        start: u64,
        end: u64,
        #[source]
        source: std::io::Error,
    },
    /// A file start-up reads (a configuration file, `resolv.conf`, a snapshot) cannot be
    /// read, or is not UTF-8 text (`InvalidData`).
    #[error("failed to read {}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to list {}", path.display())]
    ListDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Upstream's `MakeRShared` of the root directory failed.
    #[error("failed to make {} rshared ({step})", path.display())]
    MakeShared {
        path: PathBuf,
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid NOTIFY_SOCKET {socket:?}: {detail}")]
    NotifySocketInvalid { socket: String, detail: String },
    #[error("failed to notify the service manager at {socket:?}")]
    Notify {
        socket: String,
        #[source]
        source: std::io::Error,
    },
}

impl HostError {
    /// True when the OS refused for lack of privilege (EACCES or EPERM): callers usually warn and
    /// go on, as the upstream kubelet does for the OOM score.
    pub fn is_permission_denied(&self) -> bool {
        let source = match self {
            Self::Hostname { source }
            | Self::OomScoreAdj { source, .. }
            | Self::Lock { source, .. }
            | Self::LockWatch { source, .. }
            | Self::CreateDir { source, .. }
            | Self::ReadFile { source, .. }
            | Self::ListDir { source, .. }
            | Self::Notify { source, .. } => source,
            _ => return false,
        };
        source.kind() == std::io::ErrorKind::PermissionDenied
    }
}

/// Proof of an exclusive lock on a file. The lock lives as long as this value: dropping it
/// releases the lock.
pub struct LockHandle {
    path: PathBuf,
    // Type-erased so each adapter keeps whatever owns the lock (an open file, a fake's token).
    _guard: Box<dyn Send + Sync>,
}

impl LockHandle {
    /// Wraps whatever keeps the lock held; `guard` is dropped when the handle is.
    pub fn new(path: impl Into<PathBuf>, guard: impl Send + Sync + 'static) -> Self {
        Self {
            path: path.into(),
            _guard: Box::new(guard),
        }
    }

    /// The locked file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockHandle")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The host operating system.
/// Resolves on lock file contention; see [`Host::watch_lock_contention`].
pub type ContentionWait =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), HostError>> + Send>>;

#[async_trait]
pub trait Host: Send + Sync {
    /// The kernel hostname, as is (callers lowercase and trim it like the upstream kubelet).
    ///
    /// # Errors
    /// [`HostError::Hostname`], [`HostError::HostnameNotUtf8`].
    fn hostname(&self) -> Result<String, HostError>;

    /// The effective user id of this process.
    fn effective_uid(&self) -> u32;

    /// Sets `oom_score_adj` of `pid` (`None`: this process).
    ///
    /// # Errors
    /// [`HostError::OomScoreOutOfRange`] before any I/O; [`HostError::OomScoreAdj`] when the
    /// kernel refuses (EACCES when lowering without CAP_SYS_RESOURCE, ENOENT when the process is
    /// gone).
    fn set_oom_score_adj(&self, pid: Option<u32>, value: i32) -> Result<(), HostError>;

    /// Takes an exclusive, non-blocking lock on `path`, creating the file and its parent
    /// directory if needed.
    ///
    /// # Errors
    /// [`HostError::LockContended`] when another process (or another open of the same file)
    /// holds it; [`HostError::CreateDir`] or [`HostError::Lock`] on I/O failure.
    fn acquire_lock(&self, path: &Path) -> Result<LockHandle, HostError>;

    /// Start watching `path` now and return a future that resolves when another process
    /// opens it or it is gone (what `--exit-on-lock-contention` exits on). The watch
    /// exists when this returns, so no open after it is missed; opens before it, ours
    /// included, do not count. "Gone" means the inode is freed: an unlink while we still
    /// hold the lock fd does not count. Call it inside the async runtime.
    ///
    /// # Errors
    /// [`HostError::LockWatch`] when the watch cannot be set up, or (from the future) read.
    fn watch_lock_contention(&self, path: &Path) -> Result<ContentionWait, HostError>;

    /// Tells the service manager start-up is complete (`READY=1` to `$NOTIFY_SOCKET`).
    /// Returns `Ok(false)` when no notify socket is configured.
    ///
    /// # Errors
    /// [`HostError::NotifySocketInvalid`], [`HostError::Notify`].
    fn notify_ready(&self) -> Result<bool, HostError>;

    /// Creates `path` and its missing parents.
    ///
    /// # Errors
    /// [`HostError::CreateDir`].
    fn create_dir_all(&self, path: &Path) -> Result<(), HostError>;

    /// Bind-mounts `path` (and the mounts below it) onto itself and makes the bind
    /// `rshared`, so mounts below it propagate (upstream's `MakeRShared`, after it found
    /// `path` on a mount that is not shared).
    ///
    /// # Errors
    /// [`HostError::MakeShared`] naming the step that failed.
    fn make_rshared(&self, path: &Path) -> Result<(), HostError>;

    /// The text of the file at `path` (links followed).
    ///
    /// # Errors
    /// [`HostError::ReadFile`]: missing, unreadable, or not UTF-8 (`InvalidData`).
    fn read_to_string(&self, path: &Path) -> Result<String, HostError>;

    /// The regular files (links followed) in the folder `dir`, sorted by path; folders
    /// and other kinds of entry are left out.
    ///
    /// # Errors
    /// [`HostError::ListDir`].
    fn files_in(&self, dir: &Path) -> Result<Vec<PathBuf>, HostError>;

    /// Drops from this process the resident pages of its executable's mappings whose
    /// pages equal the file's (`domain::code_pages::releasable`); the kernel maps them
    /// back from the page cache when they run again. Returns the KiB that were resident.
    ///
    /// # Errors
    /// [`HostError::ReadMappings`], [`HostError::ReleasePages`].
    fn release_code_pages(&self) -> Result<u64, HostError>;
}
