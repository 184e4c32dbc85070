//! The pod's files where a container can reach them: its volumes' subpaths and the
//! files the kubelet writes into ConfigMap, Secret, downwardAPI and projected volumes.
//! A container controls its volumes' contents, symlinks included, so an adapter
//! resolves every path under the volume's root without following a link out of it
//! and acts on what it opened, never on a path a container could have changed since.
//!
//! The methods block (file and mount system calls): call them off the async runtime.

use std::io;
use std::path::{Path, PathBuf};

use crate::domain::volumes::payload::Payload;
use crate::domain::volumes::subpath::SubPath;

/// Why a pod file operation failed: the call, the path it was on, and the cause.
#[derive(Debug, thiserror::Error)]
pub enum PodFilesError {
    #[error("cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A symlink where the kubelet must not follow one.
    #[error("unexpected symlink found {}", path.display())]
    Symlink { path: PathBuf },
    /// The subpath, its links resolved, leaves its volume.
    #[error("subpath {} not within volume path {}", path.display(), volume.display())]
    OutsideVolume { path: PathBuf, volume: PathBuf },
    /// `..data` names something the writer never makes: it is left alone, and the
    /// volume is not written.
    #[error("{} points to {target:?}, not a folder of the atomic writer", link.display())]
    ForeignDataLink { link: PathBuf, target: String },
    #[error("no pod files adapter configured")]
    Unavailable,
}

impl PodFilesError {
    /// An I/O error of `action` on `path`, for `map_err`.
    pub fn io<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> Self + 'p {
        move |source| PodFilesError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    }
}

pub trait PodFiles: Send + Sync {
    /// Opens `sub.path` under `sub.volume_path` (its links resolved; the result must
    /// stay in the volume, and no link may be met while opening it), creating it as a
    /// folder with the volume root's mode when it is missing (upstream's `SafeMakeDir`),
    /// and bind-mounts what it opened on `sub.target` (created, a folder or an empty
    /// file as the subpath is). A target already bound to the same file is kept.
    ///
    /// # Errors
    /// [`PodFilesError::OutsideVolume`], [`PodFilesError::Symlink`] (a link swapped in
    /// while opening), [`PodFilesError::Io`].
    fn bind_sub_path(&self, sub: &SubPath) -> Result<(), PodFilesError>;

    /// Upstream's `AtomicWriter.Write` into `dir`: when `payload` differs from what
    /// `..data` shows, the files go into a new `..<stamp>` folder, `..data` is swapped to
    /// it with one rename, the user-visible links are made, links no longer wanted and
    /// the old folder removed. Every operation is relative to `dir`'s descriptor, and
    /// only names of the writer's own forms are removed. Returns whether it wrote.
    ///
    /// # Errors
    /// [`PodFilesError::ForeignDataLink`], [`PodFilesError::Io`].
    fn write_atomically(
        &self,
        dir: &Path,
        payload: &Payload,
        stamp: &str,
    ) -> Result<bool, PodFilesError>;
}

/// Refuses every operation: the default until a real adapter is given.
pub struct NoPodFiles;

impl PodFiles for NoPodFiles {
    fn bind_sub_path(&self, _sub: &SubPath) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn write_atomically(
        &self,
        _dir: &Path,
        _payload: &Payload,
        _stamp: &str,
    ) -> Result<bool, PodFilesError> {
        Err(PodFilesError::Unavailable)
    }
}
