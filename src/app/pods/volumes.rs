//! Setting up a pod's emptyDir folders as the domain decided (`VolumeSetup`): created
//! with their mode, then, with an `fsGroup`, every file in them given to the group with
//! group permissions (upstream's `SetVolumeOwnership`), unless `OnRootMismatch` finds
//! the root already right.

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::domain::securitycontext::{fs_group_mode, volume_root_matches, VolumeSetup};

/// A volume folder that could not be set up, with the path and call that failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}", path.display())]
pub struct VolumeSetupError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

fn at<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> VolumeSetupError + 'p {
    move |source| VolumeSetupError {
        action,
        path: path.to_owned(),
        source,
    }
}

/// Creates the folder (once; an existing one keeps its content) with its mode, and
/// applies `fsGroup`.
pub fn set_up(setup: &VolumeSetup) -> Result<(), VolumeSetupError> {
    let path = &setup.path;
    let existed = path.is_dir();
    std::fs::create_dir_all(path).map_err(at("create", path))?;
    if !existed {
        // The umask narrowed what create_dir_all made.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(setup.mode))
            .map_err(at("chmod", path))?;
    }
    let Some(gid) = setup.fs_group.and_then(|g| u32::try_from(g).ok()) else {
        return Ok(());
    };
    if setup.on_root_mismatch {
        let meta = std::fs::metadata(path).map_err(at("stat", path))?;
        if volume_root_matches(setup, meta.gid(), meta.mode(), meta.is_dir()) {
            return Ok(());
        }
    }
    walk(path, gid, setup.readonly)
}

/// Children first, then the folder itself, as upstream walks.
fn walk(path: &Path, gid: u32, readonly: bool) -> Result<(), VolumeSetupError> {
    let meta = std::fs::symlink_metadata(path).map_err(at("stat", path))?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(at("read", path))? {
            let entry = entry.map_err(at("read", path))?;
            walk(&entry.path(), gid, readonly)?;
        }
    }
    std::os::unix::fs::lchown(path, None, Some(gid)).map_err(at("chown", path))?;
    let is_symlink = meta.file_type().is_symlink();
    if let Some(mode) = fs_group_mode(meta.mode() & 0o7777, meta.is_dir(), is_symlink, readonly) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(at("chmod", path))?;
    }
    Ok(())
}

// ---- tmpfs and hostPaths (issue 13); the files are `ports::pod_files`' ----

use crate::domain::volumes::plan::{check_host_path, FileKind, HostPathStep, HostPathType};

/// Is `dir` a mount point (its device differs from its parent's)?
pub fn is_mount_point(dir: &Path) -> bool {
    let (Ok(me), Some(Ok(parent))) = (std::fs::metadata(dir), dir.parent().map(std::fs::metadata))
    else {
        return false;
    };
    me.dev() != parent.dev()
}

/// Mounts a tmpfs on `dir` (created first) unless one is there; `size_bytes` 0 or
/// `None`: the kernel's default size.
pub fn mount_tmpfs(dir: &Path, size_bytes: Option<i64>, mode: u32) -> Result<(), VolumeSetupError> {
    std::fs::create_dir_all(dir).map_err(at("create", dir))?;
    if is_mount_point(dir) {
        return Ok(());
    }
    let mut options = format!("mode={mode:o}");
    if let Some(size) = size_bytes.filter(|s| *s > 0) {
        options.push_str(&format!(",size={size}"));
    }
    nix::mount::mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some(options.as_str()),
    )
    .map_err(|e| VolumeSetupError {
        action: "mount tmpfs on",
        path: dir.to_owned(),
        source: io::Error::from(e),
    })
}

/// The mount points at or under `dir`, from this process's mountinfo.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(p.replace("\\040", " ")))
        .filter(|p| p.starts_with(dir))
        .collect()
}

/// Unmounts everything under a pod's folder, then removes it; a folder with a mount
/// left in it is kept, since removing it would remove what the mount shows (a
/// hostPath's subpath is the host's own folder).
pub fn unmount_and_remove(dir: &Path) -> Result<(), Vec<VolumeSetupError>> {
    let mut errors = unmount_under(dir);
    let left = mounts_under(dir);
    if !left.is_empty() {
        errors.extend(left.into_iter().map(|path| VolumeSetupError {
            action: "remove the pod folder: still mounted:",
            path,
            source: io::Error::from(io::ErrorKind::ResourceBusy),
        }));
        return Err(errors);
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => errors.push(VolumeSetupError {
            action: "remove",
            path: dir.to_owned(),
            source: e,
        }),
        _ => {}
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Unmounts every mount under `dir` (deepest first), so the folder can be removed
/// (tmpfs volumes and subpath binds, also those left by a killed kubelet).
pub fn unmount_under(dir: &Path) -> Vec<VolumeSetupError> {
    let mut points = mounts_under(dir);
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
        .into_iter()
        .filter_map(|p| {
            nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH)
                .err()
                .map(|e| VolumeSetupError {
                    action: "unmount",
                    path: p,
                    source: io::Error::from(e),
                })
        })
        .collect()
}

fn file_kind(path: &Path) -> Option<FileKind> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path).ok()?;
    let t = meta.file_type();
    Some(if t.is_dir() {
        FileKind::Directory
    } else if t.is_file() {
        FileKind::File
    } else if t.is_socket() {
        FileKind::Socket
    } else if t.is_char_device() {
        FileKind::CharDevice
    } else if t.is_block_device() {
        FileKind::BlockDevice
    } else {
        FileKind::Other
    })
}

/// Why a hostPath cannot be used: upstream's type-check message, or an I/O failure.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    #[error(transparent)]
    Check(#[from] crate::domain::volumes::plan::VolumeErrorKind),
    #[error(transparent)]
    Io(#[from] VolumeSetupError),
}

/// Checks a hostPath against its `type`, creating it for the `...OrCreate` types.
pub fn prepare_host_path(path: &Path, kind: HostPathType) -> Result<(), HostPathError> {
    match check_host_path(path, kind, file_kind(path))? {
        HostPathStep::Ready => Ok(()),
        HostPathStep::CreateDirectory => {
            std::fs::create_dir_all(path).map_err(at("create", path))?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
                .map_err(at("chmod", path))?;
            Ok(())
        }
        HostPathStep::CreateFile => {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(at("create", path))?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
                .map_err(at("chmod", path))?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_dir_gets_its_mode_and_the_fs_group_owns_everything_in_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("cache");
        let mut setup = VolumeSetup {
            path: path.clone(),
            mode: 0o777,
            fs_group: None,
            on_root_mismatch: false,
            readonly: false,
        };
        set_up(&setup).expect("set up");
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.mode() & 0o7777).unwrap_or(0);
        assert_eq!(mode(&path), 0o777);

        std::fs::create_dir(path.join("sub")).expect("sub");
        std::fs::write(path.join("sub/file"), "x").expect("file");
        std::fs::set_permissions(path.join("sub/file"), PermissionsExt::from_mode(0o600))
            .expect("chmod");
        // A group the test process may give files to whoever it runs as: its own.
        let gid = std::fs::metadata(dir.path()).map(|m| m.gid()).unwrap_or(0);
        setup.fs_group = Some(i64::from(gid));
        set_up(&setup).expect("fs group");
        assert_eq!(mode(&path), 0o2777);
        assert_eq!(mode(&path.join("sub")) & 0o2770, 0o2770);
        assert_eq!(mode(&path.join("sub/file")), 0o660);
        let group = |p: &Path| std::fs::metadata(p).map(|m| m.gid()).unwrap_or(u32::MAX);
        assert_eq!(group(&path.join("sub/file")), gid);

        // OnRootMismatch: a matching root is left alone, so a file changed since stays.
        std::fs::set_permissions(path.join("sub/file"), PermissionsExt::from_mode(0o600))
            .expect("chmod");
        setup.on_root_mismatch = true;
        set_up(&setup).expect("skip");
        assert_eq!(mode(&path.join("sub/file")), 0o600);
    }
}

#[cfg(test)]
mod writer_tests {
    use super::*;

    #[test]
    fn host_paths_are_created_or_refused_as_their_type_says() {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path().join("d");
        prepare_host_path(&d, HostPathType::DirectoryOrCreate).expect("dir");
        assert!(d.is_dir());
        let f = dir.path().join("f");
        prepare_host_path(&f, HostPathType::FileOrCreate).expect("file");
        assert!(f.is_file());
        let err = prepare_host_path(&dir.path().join("nope"), HostPathType::File)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err,
            Some(format!(
                "hostPath type check failed: {} is not a file",
                dir.path().join("nope").display()
            ))
        );
    }
}
