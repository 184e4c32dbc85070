//! The mounts a test leaves below its folders: rkubelet and the upstream kubelet bind
//! their root folder onto itself (rshared, for mount propagation), and running pods'
//! volumes stay mounted when a kubelet stops. Benches include this file too.

use std::path::Path;

/// Mount points at or below `prefix` (from /proc/self/mountinfo).
pub fn mounts_below(prefix: &Path) -> Vec<String> {
    let prefix = format!("{}/", prefix.display());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&prefix) || format!("{m}/") == prefix)
        .map(str::to_string)
        .collect()
}

/// The loop devices whose backing files are at or below `dir` (a CSI driver's block
/// volumes, a kubelet's global maps), by sysfs.
pub fn loop_devices_below(dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    let Ok(devices) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    devices
        .flatten()
        .filter_map(|entry| {
            let backing = std::fs::read_to_string(entry.path().join("loop/backing_file")).ok()?;
            let backing = backing.trim_end_matches('\n');
            (backing.starts_with(&prefix) || Path::new(backing) == dir)
                .then(|| format!("/dev/{}", entry.file_name().to_string_lossy()))
        })
        .collect()
}

/// Detaches the loop devices below `dir`, then unmounts every mount at or below it,
/// deepest first, each detached (a kubelet's self-bind is unmounted after the volumes
/// inside it). A loop device still open is detached by the kernel on its last close.
pub fn unmount_below(dir: &Path) {
    for device in loop_devices_below(dir) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &device])
            .output();
    }
    let mut mounts = mounts_below(dir);
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for mount in mounts {
        let _ = nix::mount::umount2(mount.as_str(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// A temporary folder for a kubelet's root: what was mounted below it is unmounted
/// before the folder goes.
pub struct TempRoot(pub tempfile::TempDir);

impl TempRoot {
    pub fn new() -> std::io::Result<TempRoot> {
        tempfile::tempdir().map(TempRoot)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        unmount_below(self.0.path());
    }
}
