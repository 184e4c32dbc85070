//! The pod's folders on Linux: emptyDir set-up with its mode and the `fsGroup` walk
//! (descriptor-relative, no link followed: a container controls the folder's contents),
//! tmpfs mounts, the tear-down of a pod folder (its mounts from mountinfo, deepest
//! first), and the plain file operations of the sync (`/etc/hosts`, termination
//! messages, log folders).

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fchmod, fstat, Mode};
use nix::unistd::{fchownat, Gid};

use super::{errno_at, is_dir, is_link};
use crate::domain::securitycontext::{fs_group_mode, volume_root_matches, VolumeSetup};
use crate::domain::volumes::plan::FileKind;
use crate::ports::pod_files::PodFilesError;

fn io_at<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> PodFilesError + 'p {
    PodFilesError::io(action, path)
}

/// Creates `path` and its parents; the folder gets `mode` when this call made it.
pub(super) fn create_dir_all(path: &Path, mode: Option<u32>) -> Result<(), PodFilesError> {
    let existed = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    std::fs::create_dir_all(path).map_err(io_at("create", path))?;
    if let Some(mode) = mode.filter(|_| !existed) {
        // The umask narrowed what create_dir_all made.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(io_at("chmod", path))?;
    }
    Ok(())
}

pub(super) fn set_up_empty_dir(setup: &VolumeSetup) -> Result<(), PodFilesError> {
    create_dir_all(&setup.path, Some(setup.mode))?;
    give_to_fs_group(setup)
}

pub(super) fn give_to_fs_group(setup: &VolumeSetup) -> Result<(), PodFilesError> {
    let path = &setup.path;
    let Some(gid) = setup.fs_group.and_then(|g| u32::try_from(g).ok()) else {
        return Ok(());
    };
    let root = super::open_dir(path)?;
    if setup.on_root_mismatch {
        let stat = fstat(&root).map_err(errno_at("stat", path))?;
        if volume_root_matches(setup, stat.st_gid, stat.st_mode & 0o7777, is_dir(&stat)) {
            return Ok(());
        }
    }
    give_to_group(root.as_fd(), path, gid, setup.readonly)
}

/// The `fsGroup` walk under the open folder `dir` (`shown` names it in errors): children
/// first, then the folder itself, as upstream walks. Each entry is opened relative to
/// its folder with `O_PATH | O_NOFOLLOW` and changed through that descriptor, so a link
/// (or a name a container swaps for one meanwhile) is changed itself, never its target.
fn give_to_group(
    dir: BorrowedFd<'_>,
    shown: &Path,
    gid: u32,
    readonly: bool,
) -> Result<(), PodFilesError> {
    for name in entry_names(dir, shown)? {
        let path = shown.join(&name);
        let entry = openat(
            dir,
            name.as_os_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno_at("open", &path))?;
        let stat = fstat(&entry).map_err(errno_at("stat", &path))?;
        if is_dir(&stat) {
            // Reopened from the descriptor, not the name: the folder that was checked.
            let sub = openat(
                &entry,
                ".",
                OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(errno_at("open", &path))?;
            give_to_group(sub.as_fd(), &path, gid, readonly)?;
        } else {
            change(
                &entry,
                &path,
                stat.st_mode,
                false,
                is_link(&stat),
                gid,
                readonly,
            )?;
        }
    }
    let stat = fstat(dir).map_err(errno_at("stat", shown))?;
    change(&dir, shown, stat.st_mode, true, false, gid, readonly)
}

/// Gives the opened entry to `gid` and the mode `fs_group_mode` decides.
fn change<Fd: AsFd>(
    fd: &Fd,
    path: &Path,
    st_mode: u32,
    dir: bool,
    link: bool,
    gid: u32,
    readonly: bool,
) -> Result<(), PodFilesError> {
    // AT_EMPTY_PATH: the descriptor itself (a link's own O_PATH descriptor is the link).
    fchownat(
        fd,
        "",
        None,
        Some(Gid::from_raw(gid)),
        AtFlags::AT_EMPTY_PATH,
    )
    .map_err(errno_at("chown", path))?;
    let Some(mode) = fs_group_mode(st_mode & 0o7777, dir, link, readonly) else {
        return Ok(());
    };
    if dir {
        return fchmod(fd, Mode::from_bits_truncate(mode)).map_err(errno_at("chmod", path));
    }
    // fchmod refuses an O_PATH descriptor; its /proc magic link names what was opened.
    let by_fd = PathBuf::from(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()));
    std::fs::set_permissions(&by_fd, std::fs::Permissions::from_mode(mode))
        .map_err(io_at("chmod", path))
}

/// The names in the open folder `dir`, `.` and `..` left out.
fn entry_names(dir: BorrowedFd<'_>, shown: &Path) -> Result<Vec<OsString>, PodFilesError> {
    let mut stream = nix::dir::Dir::openat(
        dir,
        ".",
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno_at("read", shown))?;
    let mut names = Vec::new();
    for entry in stream.iter() {
        let entry = entry.map_err(errno_at("read", shown))?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsStr::from_bytes(name).to_owned());
        }
    }
    Ok(names)
}

/// Is `dir` a mount point (its device differs from its parent's)?
fn is_mount_point(dir: &Path) -> bool {
    let (Ok(me), Some(Ok(parent))) = (
        std::fs::symlink_metadata(dir),
        dir.parent().map(std::fs::metadata),
    ) else {
        return false;
    };
    me.dev() != parent.dev()
}

pub(super) fn mount_tmpfs(
    dir: &Path,
    size_bytes: Option<i64>,
    mode: u32,
) -> Result<(), PodFilesError> {
    std::fs::create_dir_all(dir).map_err(io_at("create", dir))?;
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
    .map_err(errno_at("mount tmpfs on", dir))
}

/// The mount points at or under `dir` in a mountinfo text (its fifth field, with the
/// kernel's octal escapes of space, tab, newline and backslash undone).
pub(super) fn mounts_under(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mount_path(p)))
        .filter(|p| p.starts_with(dir))
        .collect()
}

fn unescape_mount_path(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

pub(super) fn read_mountinfo() -> String {
    // Unreadable: no mount is known, and the removal below reports what stays busy.
    std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default()
}

/// Unmounts every mount under `dir`, deepest first (lazily: a mount still in use goes
/// when its last user does).
fn unmount_under(dir: &Path) -> Vec<PodFilesError> {
    let mut points = mounts_under(&read_mountinfo(), dir);
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
        .into_iter()
        .filter_map(|p| {
            nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH)
                .err()
                .map(|e| errno_at("unmount", &p)(e))
        })
        .collect()
}

pub(super) fn remove_pod_dir(dir: &Path) -> Result<(), Vec<PodFilesError>> {
    let mut errors = unmount_under(dir);
    let left = mounts_under(&read_mountinfo(), dir);
    if !left.is_empty() {
        errors.extend(
            left.into_iter()
                .map(|path| PodFilesError::StillMounted { path }),
        );
        return Err(errors);
    }
    if let Err(e) = remove_dir_all(dir) {
        errors.push(e);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

pub(super) fn file_kind(path: &Path) -> Option<FileKind> {
    // Followed, as upstream's hostPath check stats the path.
    let t = std::fs::metadata(path).ok()?.file_type();
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

pub(super) fn create_file(path: &Path, mode: u32) -> Result<(), PodFilesError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(OFlag::O_NOFOLLOW.bits() | OFlag::O_CLOEXEC.bits())
        .mode(mode)
        .open(path)
        .map_err(io_at("create", path))?;
    // On the opened file: the umask narrowed `mode`, and the file may have existed.
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io_at("chmod", path))
}

pub(super) fn write_file(path: &Path, data: &[u8]) -> Result<(), PodFilesError> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(OFlag::O_NOFOLLOW.bits() | OFlag::O_CLOEXEC.bits())
        .mode(0o644)
        .open(path)
        .map_err(io_at("write", path))?;
    file.write_all(data).map_err(io_at("write", path))
}

pub(super) fn read_at_most(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, PodFilesError> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_at("open", path)(e)),
    };
    let mut data = Vec::new();
    file.take(limit)
        .read_to_end(&mut data)
        .map_err(io_at("read", path))?;
    Ok(Some(data))
}

pub(super) fn list_dir(dir: &Path) -> Result<Vec<String>, PodFilesError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_at("read", dir)(e)),
    };
    entries
        .map(|entry| {
            entry
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .map_err(io_at("read", dir))
        })
        .collect()
}

pub(super) fn remove_file(path: &Path) -> Result<(), PodFilesError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_at("remove", path)(e)),
        _ => Ok(()),
    }
}

pub(super) fn symlink(target: &Path, link: &Path) -> Result<(), PodFilesError> {
    match std::fs::read_link(link) {
        Ok(existing) if existing == target => return Ok(()),
        Ok(_) => remove_file(link)?,
        Err(_) => {}
    }
    std::os::unix::fs::symlink(target, link).map_err(io_at("link", link))
}

pub(super) fn remove_dir_all(dir: &Path) -> Result<(), PodFilesError> {
    // std's removal opens each folder relative to its parent and follows no link.
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_at("remove", dir)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
