//! Block volumes' global maps on Linux, as upstream's `volumepathhandler`: the device
//! file a CSI driver published, bind-mounted on a file per pod, and a loop device over
//! that file holding the device open, so it cannot be removed and its name given to
//! another device while a pod uses it. The loop device is made with the kernel's
//! `loop-control` interface rather than `losetup`, and found again, as upstream finds
//! it, by its backing file in sysfs (so one the upstream kubelet made is found too).

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::MntFlags;

use super::errno_at;
use super::folders::{mounts_under, read_mountinfo};
use crate::ports::pod_files::PodFilesError;

mod ioctl {
    nix::ioctl_none_bad!(loop_ctl_get_free, 0x4C82);
    nix::ioctl_write_int_bad!(loop_set_fd, 0x4C00);
    nix::ioctl_none_bad!(loop_clr_fd, 0x4C01);
}

/// The index of a free loop device (`LOOP_CTL_GET_FREE` on `/dev/loop-control`).
#[allow(unsafe_code)]
fn loop_ctl_get_free(control: &std::fs::File) -> nix::Result<i32> {
    // SAFETY: the request takes no argument and the descriptor is open while borrowed.
    unsafe { ioctl::loop_ctl_get_free(control.as_raw_fd()) }
}

/// Binds the loop device `loop_file` to `backing` (`LOOP_SET_FD`).
#[allow(unsafe_code)]
fn loop_set_fd(loop_file: &std::fs::File, backing: &std::fs::File) -> nix::Result<i32> {
    // SAFETY: the request takes a descriptor by value; both are open while borrowed,
    // and the kernel takes its own reference to the backing file.
    unsafe { ioctl::loop_set_fd(loop_file.as_raw_fd(), backing.as_raw_fd()) }
}

/// Unbinds the loop device `loop_file` (`LOOP_CLR_FD`; on its last close when another
/// program has it open).
#[allow(unsafe_code)]
fn loop_clr_fd(loop_file: &std::fs::File) -> nix::Result<i32> {
    // SAFETY: the request takes no argument and the descriptor is open while borrowed.
    unsafe { ioctl::loop_clr_fd(loop_file.as_raw_fd()) }
}

const LOOP_CONTROL: &str = "/dev/loop-control";
const SYS_BLOCK: &str = "/sys/block";
/// A free loop device can be taken by another program between asking for it and
/// binding it: asked again this many times.
const LOOP_ATTEMPTS: usize = 8;

pub(super) fn map_block_device(device: &Path, map: &Path) -> Result<(), PodFilesError> {
    if let Some(dir) = map.parent() {
        super::folders::create_dir_all(dir, Some(0o750))?;
    }
    if !bound_to_device(map, device) {
        if is_mounted(map) {
            // Bound to another device (the driver published anew): bound again.
            nix::mount::umount2(map, MntFlags::MNT_DETACH).map_err(errno_at("unmount", map))?;
        }
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o750)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(map)
            .map_err(PodFilesError::io("create", map))?;
        nix::mount::mount(
            Some(device),
            map,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(errno_at("bind-mount the device on", map))?;
    }
    if loop_device_over(map).is_none() {
        attach_loop_device(map)?;
    }
    Ok(())
}

pub(super) fn unmap_block_device(map: &Path) -> Result<(), PodFilesError> {
    match std::fs::symlink_metadata(map) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(PodFilesError::Io {
                action: "stat",
                path: map.to_owned(),
                source,
            })
        }
        Ok(_) => {}
    }
    if let Some(loop_device) = loop_device_over(map) {
        detach_loop_device(&loop_device)?;
    }
    if is_mounted(map) {
        // A loop device another program still has open lets go of the map only when it
        // closes it: the mount leaves the tree now and goes then.
        nix::mount::umount2(map, MntFlags::empty())
            .or_else(|e| match e {
                Errno::EBUSY => nix::mount::umount2(map, MntFlags::MNT_DETACH),
                other => Err(other),
            })
            .map_err(errno_at("unmount", map))?;
    }
    match std::fs::remove_file(map) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(PodFilesError::Io {
            action: "remove",
            path: map.to_owned(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Is `map` a mount point already showing `device`?
fn bound_to_device(map: &Path, device: &Path) -> bool {
    let (Ok(mapped), Ok(wanted)) = (std::fs::metadata(map), std::fs::metadata(device)) else {
        return false;
    };
    mapped.file_type().is_block_device()
        && wanted.file_type().is_block_device()
        && mapped.rdev() == wanted.rdev()
        && is_mounted(map)
}

fn is_mounted(path: &Path) -> bool {
    mounts_under(&read_mountinfo(), path)
        .iter()
        .any(|point| point == path)
}

/// The loop device whose backing file is `path` (upstream's `getLoopDeviceFromSysfs`).
pub(super) fn loop_device_over(path: &Path) -> Option<PathBuf> {
    loop_devices_over(path).into_iter().next()
}

/// Every loop device whose backing file is `path`.
pub(super) fn loop_devices_over(path: &Path) -> Vec<PathBuf> {
    let real = std::fs::canonicalize(path).ok();
    let Ok(devices) = std::fs::read_dir(SYS_BLOCK) else {
        return Vec::new();
    };
    devices
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            if !name.starts_with("loop") {
                return None;
            }
            let backing = std::fs::read_to_string(entry.path().join("loop/backing_file")).ok()?;
            let backing = Path::new(backing.trim_end_matches('\n'));
            (backing == path || real.as_deref() == Some(backing))
                .then(|| PathBuf::from("/dev").join(name))
        })
        .collect()
}

pub(super) fn attach_loop_device(map: &Path) -> Result<(), PodFilesError> {
    let control = OpenOptions::new()
        .read(true)
        .write(true)
        .open(LOOP_CONTROL)
        .map_err(PodFilesError::io("open", Path::new(LOOP_CONTROL)))?;
    // Read-write when the device allows it; a read-only one makes a read-only loop.
    let backing = OpenOptions::new()
        .read(true)
        .write(true)
        .open(map)
        .or_else(|_| OpenOptions::new().read(true).open(map))
        .map_err(PodFilesError::io("open", map))?;
    let mut last = Errno::EBUSY;
    for _ in 0..LOOP_ATTEMPTS {
        let index = loop_ctl_get_free(&control).map_err(errno_at(
            "find a free loop device with",
            Path::new(LOOP_CONTROL),
        ))?;
        let device = PathBuf::from(format!("/dev/loop{index}"));
        let loop_file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&device)
            .map_err(PodFilesError::io("open", &device))?;
        match loop_set_fd(&loop_file, &backing) {
            Ok(_) => return Ok(()),
            // Taken by another program since it was free.
            Err(Errno::EBUSY) => last = Errno::EBUSY,
            Err(e) => return Err(errno_at("attach a loop device to", map)(e)),
        }
    }
    Err(errno_at("attach a loop device to", map)(last))
}

pub(super) fn detach_loop_device(device: &Path) -> Result<(), PodFilesError> {
    let loop_file = match OpenOptions::new().read(true).open(device) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        other => other.map_err(PodFilesError::io("open", device))?,
    };
    match loop_clr_fd(&loop_file) {
        // ENXIO: already detached.
        Ok(_) | Err(Errno::ENXIO) => Ok(()),
        Err(e) => Err(errno_at("detach the loop device", device)(e)),
    }
}
