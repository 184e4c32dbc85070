//! The `cgroupfs` cgroup driver: the kubelet's cgroups written straight to the
//! cgroup filesystem, v1 (one hierarchy per controller group) or v2 (unified).
//!
//! Plain `std::fs` calls inside the async methods: cgroupfs operations are
//! in-kernel and return at once, so a blocking-pool hop would cost more than it saves.

mod mounts;

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

pub use mounts::{parse_mountinfo, Hierarchy};

use crate::domain::cgroup::{
    shares_to_weight, CgroupDriver, CgroupName, ResourceConfig, WeightCurve,
};
use crate::ports::cgroup::{CgroupError, CgroupManager};

/// Controllers enabled down a v2 tree when the parent offers them, as the
/// kubelet's libcontainer does, so runc can set container limits below a pod.
const V2_SUBTREE: &[&str] = &["cpuset", "cpu", "io", "memory", "hugetlb", "pids"];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    /// v1 hierarchies, plus any cgroup2 mount beside them (hybrid): every one
    /// gets the kubelet's cgroups, since runc creates container cgroups in all.
    V1(Vec<Hierarchy>),
    /// The unified hierarchy's mount.
    V2(PathBuf),
}

/// The cgroupfs driver.
#[derive(Debug, Clone)]
pub struct CgroupfsManager {
    layout: Layout,
    weight_curve: WeightCurve,
}

fn io_err(op: &'static str, path: &Path, e: &io::Error) -> CgroupError {
    CgroupError::Io {
        op,
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

fn missing(controller: &str, reason: String) -> CgroupError {
    CgroupError::MissingController {
        controller: controller.to_owned(),
        reason,
    }
}

fn read(path: &Path) -> Result<String, CgroupError> {
    std::fs::read_to_string(path).map_err(|e| io_err("read", path, &e))
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(|e| CgroupError::Io {
        op: "write",
        path: path.display().to_string(),
        reason: format!("value {value:?}: {e}"),
    })
}

/// `-1` (or any negative) is "no limit": v1 memory takes -1 (`max` is EINVAL
/// there), pids and every v2 file take `max`.
fn limit(value: i64, unlimited: &str) -> String {
    if value < 0 {
        unlimited.to_owned()
    } else {
        value.to_string()
    }
}

/// Creates `path`; true when it was created, false when it already existed.
fn mkdir(path: &Path) -> Result<bool, CgroupError> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_err("mkdir", path, &e)),
    }
}

/// Removes `path` and every cgroup below it, deepest first (runc leaves
/// nothing, but a crashed runtime can leave empty container cgroups behind).
/// An absent directory is fine; a busy one (processes still inside) is an
/// error naming it, for the caller to retry.
fn remove_tree(path: &Path) -> Result<(), CgroupError> {
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("read dir", path, &e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io_err("read dir", path, &e))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    match std::fs::remove_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("rmdir", path, &e)),
    }
}

/// The pids in `cgroup.procs` of `path` and every cgroup below it.
fn collect_pids(path: &Path, out: &mut BTreeSet<u32>) -> Result<(), CgroupError> {
    let procs = path.join("cgroup.procs");
    match std::fs::read_to_string(&procs) {
        Ok(text) => {
            for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                let pid = line.parse().map_err(|_| CgroupError::Io {
                    op: "parse",
                    path: procs.display().to_string(),
                    reason: format!("not a pid: {line:?}"),
                })?;
                out.insert(pid);
            }
        }
        // Gone meanwhile, or a fixture without the file: no processes.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("read", &procs, &e)),
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("read dir", path, &e)),
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect_pids(&entry.path(), out)?;
        }
    }
    Ok(())
}

fn child_names(parent: &CgroupName, dir: &Path) -> Result<Vec<CgroupName>, CgroupError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("read dir", dir, &e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_err("read dir", dir, &e))?;
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        // A directory whose name is no valid component (holds `_`) is not
        // one of the kubelet's: skip it rather than fail the whole listing.
        if let Ok(name) = CgroupName::new(parent, &[entry.file_name().to_string_lossy()]) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

fn wants_cpu(r: &ResourceConfig) -> bool {
    r.cpu_shares.is_some() || r.cpu_quota.is_some() || r.cpu_period.is_some()
}

impl CgroupfsManager {
    /// Finds the hierarchies mounted under `mount_root` (normally
    /// `/sys/fs/cgroup`) from `/proc/self/mountinfo`.
    pub fn detect(mount_root: &Path) -> Result<Self, CgroupError> {
        let mountinfo = Path::new("/proc/self/mountinfo");
        Self::from_mounts(&read(mountinfo)?, mount_root)
    }

    /// As [`CgroupfsManager::detect`], from given mountinfo text (tests, fixtures).
    /// v1 when any v1 hierarchy is mounted (a cgroup2 mount beside them is
    /// kept as one more hierarchy); v2 when only a cgroup2 mount is there.
    pub fn from_mounts(mountinfo: &str, mount_root: &Path) -> Result<Self, CgroupError> {
        let hierarchies = parse_mountinfo(mountinfo, mount_root);
        let layout = if hierarchies.iter().any(|h| !h.unified) {
            Layout::V1(hierarchies)
        } else if let Some(h) = hierarchies.into_iter().next() {
            Layout::V2(h.mount)
        } else {
            return Err(CgroupError::Io {
                op: "detect",
                path: mount_root.display().to_string(),
                reason: "no cgroup or cgroup2 filesystem mounted there".to_owned(),
            });
        };
        Ok(Self {
            layout,
            weight_curve: WeightCurve::default(),
        })
    }

    /// How v2 `cpu.weight` is derived from shares (default: quadratic, as runc/crun).
    pub fn with_weight_curve(mut self, curve: WeightCurve) -> Self {
        self.weight_curve = curve;
        self
    }

    /// Whether the host uses the unified (v2-only) hierarchy.
    pub fn is_unified(&self) -> bool {
        matches!(self.layout, Layout::V2(_))
    }

    /// Every mount the kubelet's cgroups are created in.
    pub fn mounts(&self) -> Vec<&Path> {
        match &self.layout {
            Layout::V1(hs) => hs.iter().map(|h| h.mount.as_path()).collect(),
            Layout::V2(root) => vec![root.as_path()],
        }
    }

    /// The directory of `name` in the hierarchy holding `controller` (v2: the
    /// unified one whatever the controller); None when it is not mounted.
    pub fn path_of(&self, controller: &str, name: &CgroupName) -> Option<PathBuf> {
        let mount = match &self.layout {
            Layout::V1(hs) => &hs.iter().find(|h| h.has(controller))?.mount,
            Layout::V2(root) => root,
        };
        Some(join(mount, name))
    }

    fn v1_hierarchy<'a>(hs: &'a [Hierarchy], controller: &str) -> Option<&'a Hierarchy> {
        hs.iter().find(|h| h.has(controller))
    }

    /// The hierarchy listing and process queries read: pids, else memory,
    /// else cpu, else the first.
    fn primary(&self) -> &Path {
        match &self.layout {
            Layout::V1(hs) => ["pids", "memory", "cpu"]
                .iter()
                .find_map(|c| Self::v1_hierarchy(hs, c))
                .or(hs.first())
                .map_or(Path::new("/"), |h| h.mount.as_path()),
            Layout::V2(root) => root,
        }
    }

    fn create_sync(&self, name: &CgroupName, r: &ResourceConfig) -> Result<(), CgroupError> {
        match &self.layout {
            Layout::V1(hs) => {
                Self::v1_check(hs, r)?;
                for h in hs {
                    let mut path = h.mount.clone();
                    for component in name.components() {
                        let parent = path.clone();
                        path.push(component);
                        if mkdir(&path)? && h.has("cpuset") {
                            // A new cpuset cgroup starts empty and refuses tasks.
                            for file in ["cpuset.cpus", "cpuset.mems"] {
                                let value = read(&parent.join(file))?;
                                write(&path.join(file), value.trim())?;
                            }
                        }
                    }
                }
                Self::v1_set(hs, name, r)
            }
            Layout::V2(root) => {
                let mut path = root.clone();
                for component in name.components() {
                    self.v2_enable(&path, r)?;
                    path.push(component);
                    mkdir(&path)?;
                }
                self.v2_set(&path, r)
            }
        }
    }

    fn update_sync(&self, name: &CgroupName, r: &ResourceConfig) -> Result<(), CgroupError> {
        let primary = join(self.primary(), name);
        if !primary.is_dir() {
            return Err(CgroupError::NotFound(name.to_cgroupfs()));
        }
        match &self.layout {
            Layout::V1(hs) => {
                Self::v1_check(hs, r)?;
                Self::v1_set(hs, name, r)
            }
            Layout::V2(root) => self.v2_set(&join(root, name), r),
        }
    }

    fn v1_check(hs: &[Hierarchy], r: &ResourceConfig) -> Result<(), CgroupError> {
        let needed = [
            ("cpu", wants_cpu(r)),
            ("memory", r.memory_limit.is_some()),
            ("pids", r.pids_limit.is_some()),
        ];
        for (controller, wanted) in needed {
            if wanted && Self::v1_hierarchy(hs, controller).is_none() {
                return Err(missing(
                    controller,
                    "no cgroup v1 hierarchy has it mounted".into(),
                ));
            }
        }
        Ok(())
    }

    fn v1_set(hs: &[Hierarchy], name: &CgroupName, r: &ResourceConfig) -> Result<(), CgroupError> {
        if let Some(h) = Self::v1_hierarchy(hs, "cpu") {
            let dir = join(&h.mount, name);
            if let Some(shares) = r.cpu_shares {
                write(&dir.join("cpu.shares"), &shares.to_string())?;
            }
            let quota_file = dir.join("cpu.cfs_quota_us");
            let quota = r.cpu_quota.map(|q| limit(q, "-1"));
            if let Some(period) = r.cpu_period {
                let period_file = dir.join("cpu.cfs_period_us");
                // Period first, so the quota is checked against the new one;
                // the kernel refuses a period that would put the old quota
                // over the parent's bandwidth, so then quota first (as runc).
                if let Err(first) = write(&period_file, &period.to_string()) {
                    let Some(q) = &quota else { return Err(first) };
                    write(&quota_file, q)?;
                    write(&period_file, &period.to_string())?;
                }
            }
            if let Some(q) = quota {
                write(&quota_file, &q)?;
            }
        }
        if let (Some(h), Some(mem)) = (Self::v1_hierarchy(hs, "memory"), r.memory_limit) {
            write(
                &join(&h.mount, name).join("memory.limit_in_bytes"),
                &limit(mem, "-1"),
            )?;
        }
        if let (Some(h), Some(pids)) = (Self::v1_hierarchy(hs, "pids"), r.pids_limit) {
            write(&join(&h.mount, name).join("pids.max"), &limit(pids, "max"))?;
        }
        Ok(())
    }

    /// Enables, in `dir`'s `cgroup.subtree_control`, the controllers its
    /// children need: those `r` sets (missing → error) and the usual others
    /// when offered.
    fn v2_enable(&self, dir: &Path, r: &ResourceConfig) -> Result<(), CgroupError> {
        let available_file = dir.join("cgroup.controllers");
        let available = read(&available_file)?;
        let available: BTreeSet<&str> = available.split_whitespace().collect();
        let needed = [
            ("cpu", wants_cpu(r)),
            ("memory", r.memory_limit.is_some()),
            ("pids", r.pids_limit.is_some()),
        ];
        for (controller, wanted) in needed {
            if wanted && !available.contains(controller) {
                return Err(missing(
                    controller,
                    format!("not in {}", available_file.display()),
                ));
            }
        }
        let control = dir.join("cgroup.subtree_control");
        let enabled = read(&control)?;
        let enabled: BTreeSet<&str> = enabled.split_whitespace().collect();
        let add: Vec<String> = V2_SUBTREE
            .iter()
            .filter(|c| available.contains(*c) && !enabled.contains(*c))
            .map(|c| format!("+{c}"))
            .collect();
        if add.is_empty() {
            return Ok(());
        }
        write(&control, &add.join(" "))
    }

    fn v2_set(&self, dir: &Path, r: &ResourceConfig) -> Result<(), CgroupError> {
        if let Some(shares) = r.cpu_shares {
            let weight = shares_to_weight(shares, self.weight_curve);
            // 0 is "unset" (0 shares): leave the kernel's default.
            if weight != 0 {
                write(&dir.join("cpu.weight"), &weight.to_string())?;
            }
        }
        if r.cpu_quota.is_some() || r.cpu_period.is_some() {
            // As runc: `<quota|max>` plus ` <period>` when one is given.
            let mut value = match r.cpu_quota {
                Some(q) if q > 0 => q.to_string(),
                _ => "max".to_owned(),
            };
            if let Some(period) = r.cpu_period {
                value.push_str(&format!(" {period}"));
            }
            write(&dir.join("cpu.max"), &value)?;
        }
        if let Some(mem) = r.memory_limit {
            write(&dir.join("memory.max"), &limit(mem, "max"))?;
        }
        if let Some(pids) = r.pids_limit {
            write(&dir.join("pids.max"), &limit(pids, "max"))?;
        }
        Ok(())
    }

    fn destroy_sync(&self, name: &CgroupName) -> Result<(), CgroupError> {
        if name.is_root() {
            return Err(CgroupError::InvalidName(
                "the root cgroup cannot be removed".into(),
            ));
        }
        for mount in self.mounts() {
            remove_tree(&join(mount, name))?;
        }
        Ok(())
    }

    fn exists_sync(&self, name: &CgroupName) -> bool {
        self.mounts().iter().all(|m| join(m, name).is_dir())
    }
}

/// `mount` joined with the name's components (the root is the mount itself).
fn join(mount: &Path, name: &CgroupName) -> PathBuf {
    let mut path = mount.to_path_buf();
    path.extend(name.components());
    path
}

#[async_trait]
impl CgroupManager for CgroupfsManager {
    fn driver(&self) -> CgroupDriver {
        CgroupDriver::Cgroupfs
    }

    fn driver_name(&self, name: &CgroupName) -> String {
        name.to_cgroupfs()
    }

    async fn create(
        &self,
        name: &CgroupName,
        resources: &ResourceConfig,
    ) -> Result<(), CgroupError> {
        self.create_sync(name, resources)
    }

    async fn update(
        &self,
        name: &CgroupName,
        resources: &ResourceConfig,
    ) -> Result<(), CgroupError> {
        self.update_sync(name, resources)
    }

    async fn destroy(&self, name: &CgroupName) -> Result<(), CgroupError> {
        self.destroy_sync(name)
    }

    async fn exists(&self, name: &CgroupName) -> Result<bool, CgroupError> {
        Ok(self.exists_sync(name))
    }

    async fn pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError> {
        let mut pids = BTreeSet::new();
        collect_pids(&join(self.primary(), name), &mut pids)?;
        Ok(pids.into_iter().collect())
    }

    async fn children(&self, name: &CgroupName) -> Result<Vec<CgroupName>, CgroupError> {
        child_names(name, &join(self.primary(), name))
    }
}

#[cfg(test)]
mod tests;
