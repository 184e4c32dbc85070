//! The pod's files and mounts: its folders and volumes (emptyDir folders with their
//! mode and `fsGroup` ownership, tmpfs mounts, hostPaths), its volumes' subpaths, the
//! files the kubelet writes into ConfigMap, Secret, downwardAPI and projected volumes,
//! `/etc/hosts`, termination-message files, log folders, and the tear-down of all of it.
//! A container controls its volumes' contents, symlinks included, so an adapter
//! resolves every path under the volume's root without following a link out of it
//! and acts on what it opened, never on a path a container could have changed since.
//!
//! The methods block (file and mount system calls): call them off the async runtime.

use std::io;
use std::path::{Path, PathBuf};

use crate::domain::securitycontext::VolumeSetup;
use crate::domain::volumes::payload::{FilesOwnership, Payload};
use crate::domain::volumes::plan::FileKind;
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
    /// A mount under a pod folder that could not be unmounted: the folder is kept, since
    /// removing it would remove what the mount shows (a hostPath subpath is the host's own
    /// folder).
    #[error("cannot remove the pod folder: still mounted: {}", path.display())]
    StillMounted { path: PathBuf },
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
    /// only names of the writer's own forms are removed. The files, folders and links it
    /// makes are given to `ownership`'s group and users before the swap, its folders
    /// `ownership.dir_mode`; with a group, `dir` itself too. Returns whether it wrote.
    ///
    /// # Errors
    /// [`PodFilesError::ForeignDataLink`], [`PodFilesError::Io`].
    fn write_atomically(
        &self,
        dir: &Path,
        payload: &Payload,
        ownership: &FilesOwnership,
        stamp: &str,
    ) -> Result<bool, PodFilesError>;

    /// Sets up an emptyDir folder as the domain decided: created once with `setup.mode`
    /// (an existing one keeps its content and mode), then with an `fsGroup` every file in
    /// it given to the group with the group permissions of `fs_group_mode` (upstream's
    /// `SetVolumeOwnership`), unless `on_root_mismatch` and `volume_root_matches` find
    /// the root already right. The walk follows no link and acts on what it opened: a
    /// container controls the folder's contents.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn set_up_empty_dir(&self, setup: &VolumeSetup) -> Result<(), PodFilesError>;

    /// The `fsGroup` walk of [`PodFiles::set_up_empty_dir`] on an existing folder (a
    /// `local` PersistentVolume's); `setup.mode` is not used.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn give_to_fs_group(&self, setup: &VolumeSetup) -> Result<(), PodFilesError>;

    /// Mounts a tmpfs on `dir` (created first) unless something is mounted there already;
    /// `size_bytes` `None` or 0: the kernel's default size.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn mount_tmpfs(
        &self,
        dir: &Path,
        size_bytes: Option<i64>,
        mode: u32,
    ) -> Result<(), PodFilesError>;

    /// Unmounts every mount at or under the pod folder `dir` (deepest first: tmpfs
    /// volumes and subpath binds, also those a killed kubelet left), then removes the
    /// folder. A missing folder is already removed.
    ///
    /// # Errors
    /// Every failure: [`PodFilesError::Io`], and [`PodFilesError::StillMounted`] for
    /// each mount left, in which case the folder is kept.
    fn remove_pod_dir(&self, dir: &Path) -> Result<(), Vec<PodFilesError>>;

    /// What is at `path`, its links followed (a hostPath's type check); `None` when
    /// nothing can be found there.
    fn file_kind(&self, path: &Path) -> Option<FileKind>;

    /// Creates the folder `path` and its missing parents; a folder this call made gets
    /// `mode` when one is given (the umask narrowed what was made).
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn create_dir_all(&self, path: &Path, mode: Option<u32>) -> Result<(), PodFilesError>;

    /// Creates `path` as an empty file when it is missing (what it holds is kept) and
    /// gives it `mode`. Its folder must exist; a link at `path` is refused, not followed.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn create_file(&self, path: &Path, mode: u32) -> Result<(), PodFilesError>;

    /// Replaces what `path` holds with `data` (created, `0644` less the umask, when it is
    /// missing). Its folder must exist; a link at `path` is refused, not followed.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn write_file(&self, path: &Path, data: &[u8]) -> Result<(), PodFilesError>;

    /// The first `limit` bytes of the file at `path`; `None` when there is none.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn read_at_most(&self, path: &Path, limit: u64) -> Result<Option<Vec<u8>>, PodFilesError>;

    /// The whole file at `path`; `None` when there is none.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn read(&self, path: &Path) -> Result<Option<Vec<u8>>, PodFilesError> {
        self.read_at_most(path, u64::MAX)
    }

    /// The names in the folder `dir` (not sorted; a name that is not UTF-8 with its bad
    /// bytes replaced); none when the folder is missing.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn list_dir(&self, dir: &Path) -> Result<Vec<String>, PodFilesError>;

    /// Removes the file (or link) `path`; a missing one is already removed.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn remove_file(&self, path: &Path) -> Result<(), PodFilesError>;

    /// Makes `link` a symbolic link to `target` (one to another target is replaced;
    /// anything else there is refused). Its folder must exist.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn symlink(&self, target: &Path, link: &Path) -> Result<(), PodFilesError>;

    /// Removes the folder `dir` and everything in it, following no link; a missing one
    /// is already removed.
    ///
    /// # Errors
    /// [`PodFilesError::Io`].
    fn remove_dir_all(&self, dir: &Path) -> Result<(), PodFilesError>;

    /// Upstream's `MapBlockVolume` on the node: makes `map` (its folder too) a file
    /// bind-mounted to the device file `device` (kept when it already is), then holds the
    /// device open with a loop device over `map` (upstream's descriptor lock, so the
    /// device cannot be removed and its name reused while a pod uses it), unless one is
    /// there already.
    ///
    /// # Errors
    /// [`PodFilesError::Io`] naming the step that failed.
    fn map_block_device(&self, device: &Path, map: &Path) -> Result<(), PodFilesError>;

    /// Undoes [`PodFiles::map_block_device`]: detaches the loop device over `map`,
    /// unmounts `map` and removes it. A missing map is already undone; one mapped by
    /// the upstream kubelet is undone the same way.
    ///
    /// # Errors
    /// [`PodFilesError::Io`] naming the step that failed.
    fn unmap_block_device(&self, map: &Path) -> Result<(), PodFilesError>;
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
        _ownership: &FilesOwnership,
        _stamp: &str,
    ) -> Result<bool, PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn set_up_empty_dir(&self, _setup: &VolumeSetup) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn give_to_fs_group(&self, _setup: &VolumeSetup) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn mount_tmpfs(
        &self,
        _dir: &Path,
        _size_bytes: Option<i64>,
        _mode: u32,
    ) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn remove_pod_dir(&self, _dir: &Path) -> Result<(), Vec<PodFilesError>> {
        Err(vec![PodFilesError::Unavailable])
    }

    fn file_kind(&self, _path: &Path) -> Option<FileKind> {
        None
    }

    fn create_dir_all(&self, _path: &Path, _mode: Option<u32>) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn create_file(&self, _path: &Path, _mode: u32) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn write_file(&self, _path: &Path, _data: &[u8]) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn read_at_most(&self, _path: &Path, _limit: u64) -> Result<Option<Vec<u8>>, PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn list_dir(&self, _dir: &Path) -> Result<Vec<String>, PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn symlink(&self, _target: &Path, _link: &Path) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn remove_file(&self, _path: &Path) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn remove_dir_all(&self, _dir: &Path) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn map_block_device(&self, _device: &Path, _map: &Path) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }

    fn unmap_block_device(&self, _map: &Path) -> Result<(), PodFilesError> {
        Err(PodFilesError::Unavailable)
    }
}
