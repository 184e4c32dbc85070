//! Whether the root directory's mount propagates mounts (upstream's `isShared`, read
//! from the text of `/proc/self/mountinfo`): the kubelet makes it `rshared` at start
//! when not, so a volume under it can be mounted `HostToContainer` or `Bidirectional`.

use std::path::Path;

use crate::domain::cgroup::mounts::unescape;

/// Whether `path` lies on a shared mount: the mount whose mount point is the longest
/// prefix of `path` (the last one mounted when several share it) has a `shared:N`
/// optional field.
pub fn is_shared(mountinfo: &str, path: &Path) -> bool {
    let mut best: Option<(usize, bool)> = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(mount_point), Some(separator)) =
            (fields.get(4), fields.iter().position(|f| *f == "-"))
        else {
            continue;
        };
        let mount_point = unescape(mount_point);
        if !path.starts_with(&mount_point) {
            continue;
        }
        let depth = Path::new(&mount_point).components().count();
        let shared = fields
            .get(6..separator)
            .is_some_and(|optional| optional.iter().any(|f| f.starts_with("shared:")));
        if best.is_none_or(|(d, _)| depth >= d) {
            best = Some((depth, shared));
        }
    }
    best.is_some_and(|(_, shared)| shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
30 22 0:40 / /var/lib rw,relatime shared:5 - ext4 /dev/sdb1 rw
31 30 0:41 / /var/lib/kubelet/pods/x rw master:3 - tmpfs tmpfs rw
40 22 0:50 / /srv/with\\040space rw shared:9 master:2 - ext4 /dev/sdc1 rw
";

    #[test]
    fn the_nearest_mount_says_whether_a_path_is_shared() {
        assert!(!is_shared(MOUNTINFO, Path::new("/var/tmp/kubelet")));
        assert!(is_shared(MOUNTINFO, Path::new("/var/lib/kubelet")));
        assert!(!is_shared(
            MOUNTINFO,
            Path::new("/var/lib/kubelet/pods/x/volumes")
        ));
        assert!(is_shared(MOUNTINFO, Path::new("/srv/with space/root")));
        // `/var/library` is not below `/var/lib`.
        assert!(!is_shared(MOUNTINFO, Path::new("/var/library")));
    }

    #[test]
    fn a_bind_on_top_decides() {
        let bound = format!(
            "{MOUNTINFO}50 22 8:1 /root /var/tmp/kubelet rw shared:12 - ext4 /dev/sda1 rw\n"
        );
        assert!(is_shared(&bound, Path::new("/var/tmp/kubelet")));
        let over = format!("{bound}51 50 8:1 /root /var/tmp/kubelet rw - ext4 /dev/sda1 rw\n");
        assert!(!is_shared(&over, Path::new("/var/tmp/kubelet")));
        assert!(!is_shared("", Path::new("/var/tmp/kubelet")));
    }
}
