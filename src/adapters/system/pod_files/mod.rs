//! The pod's files on Linux (`ports::pod_files`): subpaths opened under their volume
//! without following a link (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or
//! `openat` with `O_NOFOLLOW` a component at a time where the kernel lacks it) and
//! bind-mounted from the descriptor (`/proc/self/fd/N`), so a link swapped in after the
//! check changes nothing (CVE-2021-25741); the atomic writer acting on its folder's
//! descriptor and removing only names of its own forms (CVE-2017-1002102). The pod's
//! folders, mounts and plain files are in `folders`.

use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, openat2, readlinkat, renameat, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fchmod, fstat, fstatat, mkdirat, FileStat, Mode, SFlag};
use nix::unistd::{fchown, fchownat, symlinkat, unlinkat, Gid, Uid, UnlinkatFlags};

use crate::domain::securitycontext::VolumeSetup;
use crate::domain::volumes::payload::{
    payload_change, top_level_entries, FileProjection, FilesOwnership, Payload,
};
use crate::domain::volumes::plan::FileKind;
use crate::domain::volumes::subpath::SubPath;
use crate::ports::pod_files::{PodFiles, PodFilesError};

mod block;
mod folders;

/// The `..data` link the atomic writer swaps, and its temporary name.
const DATA_DIR: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// Pod files on the host's filesystems.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemPodFiles;

fn errno_at<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(Errno) -> PodFilesError + 'p {
    move |e| PodFilesError::Io {
        action,
        path: path.to_owned(),
        source: std::io::Error::from(e),
    }
}

fn is_link(stat: &FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
}

fn is_dir(stat: &FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
}

/// The normal components of a relative path (`.` and empty ones dropped); `None` when
/// it has `..` or is absolute.
fn plain_components(rel: &Path) -> Option<Vec<&OsStr>> {
    rel.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect()
}

fn open_dir(path: &Path) -> Result<OwnedFd, PodFilesError> {
    nix::fcntl::open(
        path,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno_at("open", path))
}

/// Opens `rel` under `base` as `O_PATH`, meeting no symlink on the way (upstream's
/// `doSafeOpen`). `shown` names the full path in errors.
fn open_beneath(base: BorrowedFd<'_>, rel: &Path, shown: &Path) -> Result<OwnedFd, PodFilesError> {
    let Some(parts) = plain_components(rel) else {
        return Err(PodFilesError::OutsideVolume {
            path: shown.to_owned(),
            volume: PathBuf::new(),
        });
    };
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    let rel_text: PathBuf = if parts.is_empty() {
        PathBuf::from(".")
    } else {
        parts.iter().collect()
    };
    match openat2(base, &rel_text, how) {
        Ok(fd) => return Ok(fd),
        Err(Errno::ELOOP) => {
            return Err(PodFilesError::Symlink {
                path: shown.to_owned(),
            })
        }
        Err(Errno::ENOSYS) => {}
        Err(e) => return Err(errno_at("open", shown)(e)),
    }
    // Kernels before 5.6: one component at a time, each checked not to be a link.
    let mut current = openat(base, ".", OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(errno_at("open", shown))?;
    for part in parts {
        let next = openat(
            &current,
            part,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno_at("open", shown))?;
        if is_link(&fstat(&next).map_err(errno_at("stat", shown))?) {
            return Err(PodFilesError::Symlink {
                path: shown.to_owned(),
            });
        }
        current = next;
    }
    Ok(current)
}

/// Creates the folders of `rel` under `base` that are missing, with `mode`, never
/// following a link (upstream's `doSafeMakeDir`).
fn make_dirs_beneath(base: &Path, rel: &[&OsStr], mode: u32) -> Result<(), PodFilesError> {
    let mut current = open_dir(base)?;
    let mut shown = base.to_owned();
    for part in rel {
        shown.push(part);
        match mkdirat(&current, *part, Mode::from_bits_truncate(mode)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(errno_at("create", &shown)(e)),
        }
        let next = openat(
            &current,
            *part,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            // O_NOFOLLOW with O_DIRECTORY answers a link with ENOTDIR.
            let link = matches!(e, Errno::ELOOP | Errno::ENOTDIR)
                && fstatat(&current, *part, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                    .is_ok_and(|s| is_link(&s));
            if link {
                PodFilesError::Symlink {
                    path: shown.clone(),
                }
            } else {
                errno_at("open", &shown)(e)
            }
        })?;
        // The umask narrowed mkdirat's mode.
        fchmod(&next, Mode::from_bits_truncate(mode)).map_err(errno_at("chmod", &shown))?;
        current = next;
    }
    Ok(())
}

fn canonical(path: &Path) -> Result<PathBuf, PodFilesError> {
    std::fs::canonicalize(path).map_err(PodFilesError::io("resolve symlinks in", path))
}

/// Is `target` already bound to the file `fd` opened?
fn bound_to(target: &Path, opened: &FileStat) -> bool {
    std::fs::symlink_metadata(target)
        .is_ok_and(|m| m.dev() == opened.st_dev && m.ino() == opened.st_ino)
}

fn is_mount_point(path: &Path) -> bool {
    match (
        std::fs::symlink_metadata(path),
        path.parent().map(std::fs::metadata),
    ) {
        (Ok(me), Some(Ok(parent))) => me.dev() != parent.dev(),
        _ => false,
    }
}

impl PodFiles for SystemPodFiles {
    fn bind_sub_path(&self, sub: &SubPath) -> Result<(), PodFilesError> {
        let base = canonical(&sub.volume_path)?;
        let Some(parts) = plain_components(Path::new(&sub.path)) else {
            return Err(PodFilesError::OutsideVolume {
                path: sub.volume_path.join(&sub.path),
                volume: base,
            });
        };
        let full = base.join(&sub.path);
        // The links as they are now; the open below refuses any met later.
        let resolved = match std::fs::canonicalize(&full) {
            Ok(path) => path,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The longest part that exists must be in the volume; the rest is made
                // there as folders with the volume's mode (upstream's `SafeMakeDir`).
                let existing = (0..parts.len())
                    .rev()
                    .find_map(|n| {
                        let prefix: PathBuf = parts[..n].iter().collect();
                        std::fs::canonicalize(base.join(&prefix))
                            .ok()
                            .map(|p| (n, p))
                    })
                    .ok_or_else(|| PodFilesError::OutsideVolume {
                        path: full.clone(),
                        volume: base.clone(),
                    })?;
                let (n, real_prefix) = existing;
                let Ok(inside) = real_prefix.strip_prefix(&base) else {
                    return Err(PodFilesError::OutsideVolume {
                        path: real_prefix,
                        volume: base,
                    });
                };
                let mode = std::fs::metadata(&base)
                    .map_err(PodFilesError::io("stat", &base))?
                    .mode()
                    & 0o7777;
                let mut rel: Vec<&OsStr> = inside.iter().collect();
                rel.extend(&parts[n..]);
                make_dirs_beneath(&base, &rel, mode)?;
                canonical(&full)?
            }
            Err(source) => {
                return Err(PodFilesError::Io {
                    action: "resolve symlinks in",
                    path: full,
                    source,
                })
            }
        };
        let Ok(inside) = resolved.strip_prefix(&base) else {
            return Err(PodFilesError::OutsideVolume {
                path: resolved,
                volume: base,
            });
        };
        let base_fd = open_dir(&base)?;
        let opened = open_beneath(base_fd.as_fd(), inside, &resolved)?;
        let stat = fstat(&opened).map_err(errno_at("stat", &resolved))?;
        let target = &sub.target;
        if bound_to(target, &stat) {
            return Ok(());
        }
        if is_mount_point(target) {
            // Bound to another file (the subpath was replaced): bound again below.
            nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH)
                .map_err(errno_at("unmount", target))?;
        }
        if let Some(parent) = target.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o750)
                .create(parent)
                .map_err(PodFilesError::io("create", parent))?;
        }
        let made = if is_dir(&stat) {
            match std::fs::DirBuilder::new().mode(0o750).create(target) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            }
        } else {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o640)
                .custom_flags(libc_o_nofollow())
                .open(target)
                .map(drop)
        };
        made.map_err(PodFilesError::io("create", target))?;
        // The kernel resolves the descriptor's magic link to what was opened, whatever
        // the path's text now names.
        let source = PathBuf::from(format!("/proc/self/fd/{}", opened.as_raw_fd()));
        nix::mount::mount(
            Some(&source),
            target,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| {
            // Nothing half-made is left for the runtime to mount.
            let _ = std::fs::remove_dir(target).or_else(|_| std::fs::remove_file(target));
            errno_at("bind-mount the subpath on", target)(e)
        })
    }

    fn write_atomically(
        &self,
        dir: &Path,
        payload: &Payload,
        ownership: &FilesOwnership,
        stamp: &str,
    ) -> Result<bool, PodFilesError> {
        std::fs::create_dir_all(dir).map_err(PodFilesError::io("create", dir))?;
        let dir_fd = open_dir(dir)?;
        let data_link = dir.join(DATA_DIR);
        let old = match readlinkat(&dir_fd, DATA_DIR) {
            Ok(target) => {
                let target = target.to_string_lossy().into_owned();
                if !is_writer_folder(&target) {
                    return Err(PodFilesError::ForeignDataLink {
                        link: data_link,
                        target,
                    });
                }
                Some(target)
            }
            Err(Errno::ENOENT) => None,
            // EINVAL: `..data` is there but no link.
            Err(Errno::EINVAL) => {
                return Err(PodFilesError::ForeignDataLink {
                    link: data_link,
                    target: String::new(),
                })
            }
            Err(e) => return Err(errno_at("read", &data_link)(e)),
        };
        let current = match &old {
            Some(name) => read_payload(&dir.join(name)),
            None => Payload::new(),
        };
        let change = payload_change(&current, payload);
        if old.is_some() && !change.changed {
            return Ok(false);
        }
        if ownership.group.is_some() {
            // The volume's own folder too, as upstream's walk starts there: a container
            // of the group must search it to reach its files. Only when writing: an
            // unchanged volume was owned when it was written.
            own_folder(&dir_fd, dir, ownership)?;
        }
        let ts_name = format!("..{stamp}");
        let ts_path = dir.join(&ts_name);
        if !is_writer_folder(&ts_name) {
            return Err(PodFilesError::ForeignDataLink {
                link: data_link,
                target: ts_name,
            });
        }
        mkdirat(&dir_fd, ts_name.as_str(), Mode::from_bits_truncate(0o700))
            .map_err(errno_at("create", &ts_path))?;
        let ts_fd = open_dir(&ts_path)?;
        own_folder(&ts_fd, &ts_path, ownership)?;
        for (rel, file) in payload {
            write_file_beneath(&ts_fd, &ts_path, rel, file, ownership)?;
        }
        let tmp_link = dir.join(DATA_TMP);
        match unlinkat(&dir_fd, DATA_TMP, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(errno_at("remove", &tmp_link)(e)),
        }
        symlinkat(ts_name.as_str(), &dir_fd, DATA_TMP).map_err(errno_at("link", &tmp_link))?;
        own_link(&dir_fd, DATA_TMP, &tmp_link, ownership)?;
        renameat(&dir_fd, DATA_TMP, &dir_fd, DATA_DIR).map_err(errno_at("rename", &data_link))?;
        let wanted = top_level_entries(payload);
        for entry in wanted.iter().filter(|e| is_plain_name(e)) {
            let link = dir.join(entry);
            match fstatat(
                &dir_fd,
                entry.as_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            ) {
                Ok(_) => {}
                Err(Errno::ENOENT) => {
                    let points_to = Path::new(DATA_DIR).join(entry);
                    symlinkat(&points_to, &dir_fd, entry.as_str())
                        .map_err(errno_at("link", &link))?;
                    own_link(&dir_fd, entry.as_str(), &link, ownership)?;
                }
                Err(e) => return Err(errno_at("stat", &link)(e)),
            }
        }
        for entry in top_level_entries(&current).difference(&wanted) {
            // Only the writer's own user-visible links go; a plain name, unlinked
            // relative to the folder, so nothing outside it is ever reached.
            if is_plain_name(entry)
                && fstatat(
                    &dir_fd,
                    entry.as_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .is_ok_and(|s| is_link(&s))
            {
                let _ = unlinkat(&dir_fd, entry.as_str(), UnlinkatFlags::NoRemoveDir);
            }
        }
        if let Some(old) = old.filter(|o| *o != ts_name) {
            // A validated plain name in our folder; std's removal does not follow links.
            let _ = std::fs::remove_dir_all(dir.join(old));
        }
        Ok(true)
    }

    fn set_up_empty_dir(&self, setup: &VolumeSetup) -> Result<(), PodFilesError> {
        folders::set_up_empty_dir(setup)
    }

    fn give_to_fs_group(&self, setup: &VolumeSetup) -> Result<(), PodFilesError> {
        folders::give_to_fs_group(setup)
    }

    fn mount_tmpfs(
        &self,
        dir: &Path,
        size_bytes: Option<i64>,
        mode: u32,
    ) -> Result<(), PodFilesError> {
        folders::mount_tmpfs(dir, size_bytes, mode)
    }

    fn remove_pod_dir(&self, dir: &Path) -> Result<(), Vec<PodFilesError>> {
        folders::remove_pod_dir(dir)
    }

    fn file_kind(&self, path: &Path) -> Option<FileKind> {
        folders::file_kind(path)
    }

    fn create_dir_all(&self, path: &Path, mode: Option<u32>) -> Result<(), PodFilesError> {
        folders::create_dir_all(path, mode)
    }

    fn create_file(&self, path: &Path, mode: u32) -> Result<(), PodFilesError> {
        folders::create_file(path, mode)
    }

    fn write_file(&self, path: &Path, data: &[u8]) -> Result<(), PodFilesError> {
        folders::write_file(path, data)
    }

    fn read_at_most(&self, path: &Path, limit: u64) -> Result<Option<Vec<u8>>, PodFilesError> {
        folders::read_at_most(path, limit)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>, PodFilesError> {
        folders::list_dir(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<(), PodFilesError> {
        folders::remove_file(path)
    }

    fn symlink(&self, target: &Path, link: &Path) -> Result<(), PodFilesError> {
        folders::symlink(target, link)
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), PodFilesError> {
        folders::remove_dir_all(dir)
    }

    fn map_block_device(&self, device: &Path, map: &Path) -> Result<(), PodFilesError> {
        block::map_block_device(device, map)
    }

    fn unmap_block_device(&self, map: &Path) -> Result<(), PodFilesError> {
        block::unmap_block_device(map)
    }
}

fn libc_o_nofollow() -> i32 {
    OFlag::O_NOFOLLOW.bits()
}

/// A name with no `/`, not `.`/`..` and not starting with `..` (the writer's own names).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && !name.starts_with("..") && name != "."
}

/// The writer's folder names: `..` and upstream's time stamp
/// `2006_01_02_15_04_05.<digits>` (rkubelet's and the upstream kubelet's alike).
fn is_writer_folder(name: &str) -> bool {
    let Some(stamp) = name.strip_prefix("..") else {
        return false;
    };
    let bytes = stamp.as_bytes();
    // yyyy_mm_dd_hh_mm_ss = 19 bytes, then '.' and at least one digit.
    bytes.len() > 20
        && bytes[..19].iter().enumerate().all(|(i, b)| {
            if matches!(i, 4 | 7 | 10 | 13 | 16) {
                *b == b'_'
            } else {
                b.is_ascii_digit()
            }
        })
        && bytes[19] == b'.'
        && bytes[20..].iter().all(u8::is_ascii_digit)
}

/// Writes `file` at `rel` under `root_fd`, its folders made on the way, no link followed.
/// Gives the opened folder `fd` the writer's folder mode and `ownership`'s group.
fn own_folder(fd: &OwnedFd, path: &Path, ownership: &FilesOwnership) -> Result<(), PodFilesError> {
    if let Some(gid) = ownership.group {
        fchown(fd, None, Some(Gid::from_raw(gid))).map_err(errno_at("chown", path))?;
    }
    // After the chown, which may clear the setgid bit.
    fchmod(fd, Mode::from_bits_truncate(ownership.dir_mode)).map_err(errno_at("chmod", path))
}

/// Gives the link `name` in `dir_fd` (not what it points to) `ownership`'s group.
fn own_link(
    dir_fd: &OwnedFd,
    name: &str,
    shown: &Path,
    ownership: &FilesOwnership,
) -> Result<(), PodFilesError> {
    let Some(gid) = ownership.group else {
        return Ok(());
    };
    fchownat(
        dir_fd,
        name,
        None,
        Some(Gid::from_raw(gid)),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(errno_at("chown", shown))
}

fn write_file_beneath(
    root_fd: &OwnedFd,
    root: &Path,
    rel_path: &str,
    file: &FileProjection,
    ownership: &FilesOwnership,
) -> Result<(), PodFilesError> {
    let rel = Path::new(rel_path);
    let shown = root.join(rel);
    let parts = plain_components(rel)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| PodFilesError::OutsideVolume {
            path: shown.clone(),
            volume: root.to_owned(),
        })?;
    let (name, folders) = parts
        .split_last()
        .ok_or_else(|| PodFilesError::OutsideVolume {
            path: shown.clone(),
            volume: root.to_owned(),
        })?;
    let mut parent: Option<OwnedFd> = None;
    for folder in folders {
        let at = parent.as_ref().unwrap_or(root_fd);
        match mkdirat(at, *folder, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(errno_at("create", &shown)(e)),
        }
        let next = openat(
            at,
            *folder,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno_at("open", &shown))?;
        own_folder(&next, &shown, ownership)?;
        parent = Some(next);
    }
    let at = parent.as_ref().unwrap_or(root_fd);
    let fd = openat(
        at,
        *name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(errno_at("write", &shown))?;
    let user = ownership.users.get(rel_path).copied().map(Uid::from_raw);
    let group = ownership.group.map(Gid::from_raw);
    if user.is_some() || group.is_some() {
        fchown(&fd, user, group).map_err(errno_at("chown", &shown))?;
    }
    let mut out = std::fs::File::from(fd);
    out.write_all(&file.data)
        .map_err(PodFilesError::io("write", &shown))?;
    // After the chown, which clears set-id bits.
    out.set_permissions(std::fs::Permissions::from_mode(file.mode))
        .map_err(PodFilesError::io("chmod", &shown))?;
    Ok(())
}

/// The files under a writer's folder, with their modes; links are not followed.
fn read_payload(folder: &Path) -> Payload {
    fn walk(base: &Path, rel: &str, out: &mut Payload) {
        let Ok(entries) = std::fs::read_dir(base.join(rel)) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel_path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if meta.is_dir() {
                walk(base, &rel_path, out);
            } else if meta.is_file() {
                let data = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc_o_nofollow())
                    .open(entry.path())
                    .and_then(|mut f| {
                        let mut data = Vec::new();
                        std::io::Read::read_to_end(&mut f, &mut data).map(|_| data)
                    });
                if let Ok(data) = data {
                    out.insert(
                        rel_path,
                        FileProjection {
                            data,
                            mode: meta.mode() & 0o7777,
                        },
                    );
                }
            }
        }
    }
    let mut out = Payload::new();
    walk(folder, "", &mut out);
    out
}

#[cfg(test)]
mod tests;
