//! Finding the cgroup hierarchies in the text of `/proc/self/mountinfo` (pure: the
//! cgroup driver and the node statistics read the file and ask this).

use std::path::{Path, PathBuf};

/// One mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub mount: PathBuf,
    /// v1 controllers bound to it (`cpu`, `cpuacct`, ..., `name=systemd`);
    /// empty for a cgroup2 mount.
    pub controllers: Vec<String>,
    /// A cgroup2 mount.
    pub unified: bool,
}

impl Hierarchy {
    pub fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }
}

/// v1 controllers the kernel knows; other super options (`rw`, `xattr`,
/// `clone_children`, `release_agent=...`) are not controllers.
const V1_CONTROLLERS: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "pids",
    "blkio",
    "io",
    "devices",
    "freezer",
    "net_cls",
    "net_prio",
    "perf_event",
    "hugetlb",
    "rdma",
    "misc",
];

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
pub(crate) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let octal = std::str::from_utf8(&bytes[i + 1..i + 4]).ok();
            if let Some(b) = octal.and_then(|o| u8::from_str_radix(o, 8).ok()) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup hierarchies mounted at or below `mount_root`, in mountinfo
/// order; a later mount on the same point replaces an earlier one. Mounts
/// elsewhere (a container's view, another tool's private mount) are ignored.
pub fn parse_mountinfo(mountinfo: &str, mount_root: &Path) -> Vec<Hierarchy> {
    let mut out: Vec<Hierarchy> = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mountpoint) = left.split_whitespace().nth(4) else {
            continue;
        };
        let mut right = right.split_whitespace();
        let (Some(fstype), Some(_source), Some(superopts)) =
            (right.next(), right.next(), right.next())
        else {
            continue;
        };
        let mount = PathBuf::from(unescape(mountpoint));
        if !mount.starts_with(mount_root) {
            continue;
        }
        let hierarchy = match fstype {
            "cgroup" => Hierarchy {
                mount,
                controllers: superopts
                    .split(',')
                    .filter(|o| V1_CONTROLLERS.contains(o) || o.starts_with("name="))
                    .map(str::to_owned)
                    .collect(),
                unified: false,
            },
            "cgroup2" => Hierarchy {
                mount,
                controllers: Vec::new(),
                unified: true,
            },
            _ => continue,
        };
        out.retain(|h| h.mount != hierarchy.mount);
        out.push(hierarchy);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset,clone_children
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,release_agent=/x,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
50 23 0:40 / /other/cgroup/memory rw,relatime - cgroup cgroup rw,memory
51 23 0:41 / /sys/fs/cgroup/with\\040space rw - cgroup cgroup rw,pids
";

    #[test]
    fn hybrid_hierarchies_under_root() {
        let h = parse_mountinfo(HYBRID, Path::new("/sys/fs/cgroup"));
        let mounts: Vec<_> = h.iter().map(|h| h.mount.display().to_string()).collect();
        assert_eq!(
            mounts,
            [
                "/sys/fs/cgroup/cpu,cpuacct",
                "/sys/fs/cgroup/cpuset",
                "/sys/fs/cgroup/systemd",
                "/sys/fs/cgroup/unified",
                "/sys/fs/cgroup/with space",
            ]
        );
        assert_eq!(h[0].controllers, ["cpu", "cpuacct"]);
        assert_eq!(h[1].controllers, ["cpuset"]);
        assert_eq!(h[2].controllers, ["name=systemd"]);
        assert!(h[3].unified && h[3].controllers.is_empty());
        assert!(h[4].has("pids"));
    }

    #[test]
    fn pure_v2() {
        let text = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let h = parse_mountinfo(text, Path::new("/sys/fs/cgroup"));
        assert_eq!(h.len(), 1);
        assert!(h[0].unified);
        assert_eq!(h[0].mount, Path::new("/sys/fs/cgroup"));
    }
}
