//! The `cgroupfs` cgroup driver: the kubelet's cgroups written straight to the
//! cgroup filesystem, v1 (one hierarchy per controller group) or v2 (unified).
//!
//! Plain `std::fs` calls inside the async methods: cgroupfs operations are
//! in-kernel and return at once, so a blocking-pool hop would cost more than it saves.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

pub use crate::domain::cgroup::mounts::{parse_mountinfo, Hierarchy};

use crate::domain::cgroup::{
    cgroupfs_files, CgroupDriver, CgroupName, CgroupVersion, ResourceConfig, WeightCurve,
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

fn io_err(op: &'static str, path: &Path, source: io::Error) -> CgroupError {
    CgroupError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn missing(controller: &str, reason: String) -> CgroupError {
    CgroupError::MissingController {
        controller: controller.to_owned(),
        reason,
    }
}

fn read(path: &Path) -> Result<String, CgroupError> {
    std::fs::read_to_string(path).map_err(|e| io_err("read", path, e))
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(|source| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_owned(),
        source,
    })
}

/// The files to write for `r`, with values, as the domain decides them.
type Files = Vec<(&'static str, String)>;

/// The controller a cgroup file belongs to: its name's prefix (`cpu.max` → `cpu`).
fn controller_of(file: &'static str) -> &'static str {
    file.split_once('.').map_or(file, |(c, _)| c)
}

/// The controllers `files` need, each once, in order.
fn controllers(files: &Files) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (file, _) in files {
        let c = controller_of(file);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// How the cgroup version is seen from the filesystem alone: v2 when `root` (normally
/// /sys/fs/cgroup) is a cgroup2 mount (it holds `cgroup.controllers`) and there is no
/// v1 cpu hierarchy beside it; a hybrid host (v1 controllers, cgroup2 at `unified/`)
/// is v1. Reads only; for the systemd driver and the dry-run plan, which need no mounts.
pub fn detect_version(root: &Path) -> CgroupVersion {
    let unified = root.join("cgroup.controllers").is_file();
    let v1_cpu =
        root.join("cpu/cpu.shares").is_file() || root.join("cpu,cpuacct/cpu.shares").is_file();
    if unified && !v1_cpu {
        CgroupVersion::V2
    } else {
        CgroupVersion::V1
    }
}

/// Creates `path`; true when it was created, false when it already existed.
fn mkdir(path: &Path) -> Result<bool, CgroupError> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_err("mkdir", path, e)),
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
        Err(e) => return Err(io_err("read dir", path, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io_err("read dir", path, e))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    match std::fs::remove_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("rmdir", path, e)),
    }
}

/// The pids in `cgroup.procs` of `path` and every cgroup below it.
fn collect_pids(path: &Path, out: &mut BTreeSet<u32>) -> Result<(), CgroupError> {
    let procs = path.join("cgroup.procs");
    match std::fs::read_to_string(&procs) {
        Ok(text) => {
            for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                let pid = line.parse().map_err(|_| CgroupError::Unexpected {
                    op: "parse",
                    path: procs.clone(),
                    detail: format!("not a pid: {line:?}"),
                })?;
                out.insert(pid);
            }
        }
        // Gone meanwhile, or a fixture without the file: no processes.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("read", &procs, e)),
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("read dir", path, e)),
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
        Err(e) => return Err(io_err("read dir", dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_err("read dir", dir, e))?;
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
            return Err(CgroupError::Unexpected {
                op: "detect",
                path: mount_root.to_path_buf(),
                detail: "no cgroup or cgroup2 filesystem mounted there".to_owned(),
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
        self.version() == CgroupVersion::V2
    }

    /// Which version's files are written: v2 only on a unified host (a hybrid host's
    /// cgroup2 mount gets the cgroups but no limits, as with runc).
    pub fn version(&self) -> CgroupVersion {
        match self.layout {
            Layout::V1(_) => CgroupVersion::V1,
            Layout::V2(_) => CgroupVersion::V2,
        }
    }

    fn files(&self, r: &ResourceConfig) -> Files {
        cgroupfs_files(r, self.version(), self.weight_curve)
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
        let files = self.files(r);
        match &self.layout {
            Layout::V1(hs) => {
                Self::v1_check(hs, &files)?;
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
                Self::v1_set(hs, name, &files)
            }
            Layout::V2(root) => {
                let mut path = root.clone();
                for component in name.components() {
                    Self::v2_enable(&path, &files)?;
                    path.push(component);
                    mkdir(&path)?;
                }
                Self::v2_set(&path, &files)
            }
        }
    }

    fn update_sync(&self, name: &CgroupName, r: &ResourceConfig) -> Result<(), CgroupError> {
        let primary = join(self.primary(), name);
        if !primary.is_dir() {
            return Err(CgroupError::NotFound(name.to_cgroupfs()));
        }
        let files = self.files(r);
        match &self.layout {
            Layout::V1(hs) => {
                Self::v1_check(hs, &files)?;
                Self::v1_set(hs, name, &files)
            }
            Layout::V2(root) => Self::v2_set(&join(root, name), &files),
        }
    }

    fn v1_check(hs: &[Hierarchy], files: &Files) -> Result<(), CgroupError> {
        for controller in controllers(files) {
            if Self::v1_hierarchy(hs, controller).is_none() {
                return Err(missing(
                    controller,
                    "no cgroup v1 hierarchy has it mounted".into(),
                ));
            }
        }
        Ok(())
    }

    /// Writes `files`, each in its controller's hierarchy, in the given order.
    fn v1_set(hs: &[Hierarchy], name: &CgroupName, files: &Files) -> Result<(), CgroupError> {
        let quota = files.iter().find(|(f, _)| *f == "cpu.cfs_quota_us");
        for (file, value) in files {
            let Some(h) = Self::v1_hierarchy(hs, controller_of(file)) else {
                continue;
            };
            let dir = join(&h.mount, name);
            let path = dir.join(file);
            let Err(first) = write(&path, value) else {
                continue;
            };
            // The kernel refuses a period that would put the old quota over the
            // parent's bandwidth: then quota first, then the period (as runc); the
            // quota is written again after, in its turn.
            match quota {
                Some((qf, q)) if *file == "cpu.cfs_period_us" => {
                    write(&dir.join(qf), q)?;
                    write(&path, value)?;
                }
                _ => return Err(first),
            }
        }
        Ok(())
    }

    /// Enables, in `dir`'s `cgroup.subtree_control`, the controllers its
    /// children need: those `files` belong to (missing → error) and the usual others
    /// when offered.
    fn v2_enable(dir: &Path, files: &Files) -> Result<(), CgroupError> {
        let available_file = dir.join("cgroup.controllers");
        let available = read(&available_file)?;
        let available: BTreeSet<&str> = available.split_whitespace().collect();
        for controller in controllers(files) {
            if !available.contains(controller) {
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

    fn v2_set(dir: &Path, files: &Files) -> Result<(), CgroupError> {
        files
            .iter()
            .try_for_each(|(file, value)| write(&dir.join(file), value))
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

    async fn kill_processes(&self, name: &CgroupName) -> Result<usize, CgroupError> {
        let pids = self.pids(name).await?;
        for &pid in &pids {
            kill_process(pid, name)?;
        }
        Ok(pids.len())
    }

    async fn children(&self, name: &CgroupName) -> Result<Vec<CgroupName>, CgroupError> {
        child_names(name, &join(self.primary(), name))
    }
}

/// SIGKILL to `pid`, a process of the cgroup `name`; one gone meanwhile is no error.
fn kill_process(pid: u32, name: &CgroupName) -> Result<(), CgroupError> {
    let error = |source: std::io::Error| CgroupError::Kill {
        pid,
        cgroup: name.to_string(),
        source,
    };
    let raw = i32::try_from(pid).map_err(|_| error(std::io::ErrorKind::InvalidInput.into()))?;
    match nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(raw),
        nix::sys::signal::Signal::SIGKILL,
    ) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(errno) => Err(error(errno.into())),
    }
}

#[cfg(test)]
mod tests;
