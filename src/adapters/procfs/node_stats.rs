//! Node statistics from the kernel ([`NodeStats`]): a cgroup's memory, CPU, tasks and
//! block IO from the cgroup filesystem (v1: the memory, pids, cpu, cpuacct and blkio
//! hierarchies; v2: the unified one, the root from `/proc/meminfo` as runc does),
//! filesystems with `statvfs`, directory usage as `du -x`, and the node's pids from
//! `/proc/sys/kernel` and `/proc/loadavg` as upstream.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::domain::cgroup::mounts::parse_mountinfo;
use crate::domain::cgroup::{CgroupDriver, CgroupName};
use crate::domain::eviction::signals::{FsStats, FsUsage, PidStats};
use crate::domain::stats::{
    container_id_of_cgroup, parse_blkio, parse_io_stat, parse_net_dev, CgroupDetail, DeviceIo,
};
use crate::ports::node_stats::{
    CgroupStats, FilesystemInfo, InterfaceStats, NodeStats, OwnProcess, StatsError,
};

/// Above this a cgroup v1 limit means "no limit" (the kernel rounds its maximum down to
/// a page; cAdvisor uses the same bound).
const UNLIMITED_ABOVE: u64 = 1 << 62;

/// Where the cgroup files eviction reads are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupLayout {
    /// The v1 hierarchies holding the memory and pids controllers, when mounted.
    V1 {
        memory: Option<PathBuf>,
        pids: Option<PathBuf>,
        /// The hierarchy holding `cpuacct` (the node and pod CPU usage).
        cpuacct: Option<PathBuf>,
        /// The hierarchies holding `cpu` (CFS throttling) and `blkio` (block IO).
        cpu: Option<PathBuf>,
        blkio: Option<PathBuf>,
    },
    /// The unified hierarchy's mount.
    V2 { root: PathBuf },
}

impl CgroupLayout {
    /// The layout from `/proc/self/mountinfo`'s text: v1 when any v1 hierarchy is
    /// mounted under `mount_root` (a cgroup2 mount beside them holds no memory
    /// controller), v2 otherwise.
    pub fn from_mountinfo(mountinfo: &str, mount_root: &Path) -> Option<CgroupLayout> {
        let hierarchies = parse_mountinfo(mountinfo, mount_root);
        if hierarchies.iter().any(|h| !h.unified) {
            let find = |c: &str| {
                hierarchies
                    .iter()
                    .find(|h| h.has(c))
                    .map(|h| h.mount.clone())
            };
            return Some(CgroupLayout::V1 {
                memory: find("memory"),
                pids: find("pids"),
                cpuacct: find("cpuacct"),
                cpu: find("cpu"),
                blkio: find("blkio"),
            });
        }
        hierarchies
            .into_iter()
            .next()
            .map(|h| CgroupLayout::V2 { root: h.mount })
    }

    /// The v1 memory hierarchy's mount (memory threshold notifications need it).
    pub fn v1_memory(&self) -> Option<&Path> {
        match self {
            CgroupLayout::V1 { memory, .. } => memory.as_deref(),
            CgroupLayout::V2 { .. } => None,
        }
    }
}

/// The directory of `name` below a hierarchy mounted at `mount`, in the driver's
/// spelling (`/kubepods/burstable` or `/kubepods.slice/kubepods-burstable.slice`).
pub fn cgroup_dir(mount: &Path, name: &CgroupName, driver: CgroupDriver) -> PathBuf {
    dir_at(mount, &name.to_driver(driver))
}

/// The directory of the cgroup at `relative` (its path in the hierarchy) below `mount`.
fn dir_at(mount: &Path, relative: &str) -> PathBuf {
    mount.join(relative.trim_start_matches('/'))
}

/// Node statistics read from the kernel's files.
#[derive(Debug, Clone)]
pub struct ProcfsNodeStats {
    proc: PathBuf,
    /// The sysfs beside `proc` (`/sys`): block devices' names.
    sys: PathBuf,
    layout: Option<CgroupLayout>,
    driver: CgroupDriver,
    /// Block devices' nodes by `major:minor`, read once each.
    device_names: Arc<Mutex<HashMap<String, Option<String>>>>,
    /// How long a cgroup's limit, process count and finer counters are reused (the
    /// housekeeping interval): they cost a handful of files per cgroup, and scrapes
    /// come often.
    detail_period: Duration,
    details: Arc<DetailCache>,
}

/// The detail period unless told: the default housekeeping interval.
const DETAIL_PERIOD: Duration = crate::domain::config::options::DEFAULT_HOUSEKEEPING_INTERVAL;

/// What a cgroup's slower files said: its limit, its process count and the finer
/// counters, kept between their readings.
#[derive(Debug, Clone, Default)]
struct SlowReading {
    memory_limit_bytes: Option<u64>,
    tasks: Option<u64>,
    detail: CgroupDetail,
}

impl SlowReading {
    fn of(stats: &CgroupStats) -> Self {
        SlowReading {
            memory_limit_bytes: stats.memory_limit_bytes,
            tasks: stats.tasks,
            detail: stats.detail.clone(),
        }
    }

    fn apply_to(self, stats: &mut CgroupStats) {
        stats.memory_limit_bytes = self.memory_limit_bytes;
        stats.tasks = self.tasks;
        stats.detail = self.detail;
    }
}

/// The slower files' reading of each cgroup path as last made, and when.
#[derive(Debug, Default)]
struct DetailCache {
    state: Mutex<DetailReadings>,
}

#[derive(Debug, Default)]
struct DetailReadings {
    by_path: HashMap<String, (Instant, SlowReading)>,
    /// When readings of gone cgroups were last dropped.
    swept: Option<Instant>,
}

impl DetailCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, DetailReadings> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The reading of `relative` younger than `period`.
    fn fresh(&self, relative: &str, period: Duration) -> Option<SlowReading> {
        self.lock()
            .by_path
            .get(relative)
            .filter(|(at, _)| at.elapsed() < period)
            .map(|(_, reading)| reading.clone())
    }

    /// Keep `reading` as `relative`'s; once a minute, readings not renewed for a minute
    /// (cgroups gone with their pods) are dropped.
    fn store(&self, relative: &str, reading: SlowReading) {
        let mut readings = self.lock();
        let now = Instant::now();
        if readings
            .swept
            .is_none_or(|swept| now.duration_since(swept) >= DETAIL_FORGOTTEN)
        {
            readings
                .by_path
                .retain(|_, (at, _)| now.duration_since(*at) < DETAIL_FORGOTTEN);
            readings.swept = Some(now);
        }
        readings.by_path.insert(relative.to_owned(), (now, reading));
    }
}

/// A cgroup's reading is forgotten this long after it was made.
const DETAIL_FORGOTTEN: Duration = Duration::from_secs(60);

fn read_error(path: &Path, source: io::Error) -> StatsError {
    StatsError::Read {
        path: path.to_path_buf(),
        source,
    }
}

fn parse_error(path: &Path, detail: impl Into<String>) -> StatsError {
    StatsError::Parse {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// The file's text; `None` when it does not exist.
fn read_optional(path: &Path) -> Result<Option<String>, StatsError> {
    match std::fs::File::open(path) {
        Ok(file) => read_text(file).map(Some).map_err(|e| read_error(path, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(read_error(path, e)),
    }
}

/// The whole text of an open kernel file. Through `Take`, not `File::read_to_string`:
/// that one sizes its buffer with a `statx` and an `lseek` first, two calls more per file
/// for a size the kernel's files do not report anyway.
fn read_text(file: std::fs::File) -> io::Result<String> {
    use std::io::Read;
    let mut text = String::with_capacity(512);
    file.take(u64::MAX).read_to_string(&mut text)?;
    Ok(text)
}

/// A cgroup's folder, opened once for the files read from it: each file is then opened
/// relative to it, a name looked up rather than the hierarchy's whole path walked again
/// (most of what opening a cgroup file costs the kernel).
struct Folder {
    fd: std::os::fd::OwnedFd,
    path: PathBuf,
}

impl Folder {
    /// The folder at `path`; `None` when it does not exist.
    fn open(path: PathBuf) -> Result<Option<Folder>, StatsError> {
        use nix::fcntl::OFlag;
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        match nix::fcntl::open(&path, flags, nix::sys::stat::Mode::empty()) {
            Ok(fd) => Ok(Some(Folder { fd, path })),
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => Ok(None),
            Err(e) => Err(read_error(&path, e.into())),
        }
    }

    /// The text of the file `name` in this folder; `None` when it does not exist.
    fn read(&self, name: &str) -> Result<Option<String>, StatsError> {
        use nix::fcntl::OFlag;
        let opened = nix::fcntl::openat(
            &self.fd,
            name,
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        );
        match opened {
            Ok(fd) => read_text(std::fs::File::from(fd))
                .map(Some)
                .map_err(|e| read_error(&self.path.join(name), e)),
            Err(nix::errno::Errno::ENOENT) => Ok(None),
            Err(e) => Err(read_error(&self.path.join(name), e.into())),
        }
    }

    /// The number the file `name` holds; `None` when it does not exist.
    fn number(&self, name: &str) -> Result<Option<u64>, StatsError> {
        self.read(name)?
            .map(|text| parse_u64(&self.path.join(name), &text))
            .transpose()
    }
}

/// The number a file holds; `None` when it does not exist.
fn read_number(path: &Path) -> Result<Option<u64>, StatsError> {
    read_optional(path)?
        .map(|text| parse_u64(path, &text))
        .transpose()
}

/// Nanoseconds in one clock tick of `cpuacct.stat` (USER_HZ is 100 on every Linux ABI).
const NANOS_PER_CLOCK_TICK: u64 = 10_000_000;

fn parse_u64(path: &Path, text: &str) -> Result<u64, StatsError> {
    text.trim()
        .parse()
        .map_err(|_| parse_error(path, format!("not a number: {:?}", text.trim())))
}

/// The values of `keys` in a `memory.stat` (`key value` lines), in one pass: a v1
/// `memory.stat` has some 70 lines, and 300 cgroups are read on a scrape at 100 pods.
fn stat_values<const N: usize>(text: &str, keys: [&str; N]) -> [Option<u64>; N] {
    let mut values = [None; N];
    let mut left = N;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(' ') else {
            continue;
        };
        if let Some(i) = keys.iter().position(|key| *key == k) {
            if values[i].is_none() {
                values[i] = v.trim().parse().ok();
                left -= 1;
                if left == 0 {
                    break;
                }
            }
        }
    }
    values
}

/// The value of `key` in a `memory.stat` (`key value` lines).
fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// `MemTotal − MemFree` from `/proc/meminfo`, in bytes: the usage of the v2 root, which
/// has no `memory.current` (runc's `statsFromMeminfo`).
fn meminfo_usage(path: &Path, text: &str) -> Result<u64, StatsError> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .ok_or_else(|| parse_error(path, format!("no {name}")))
    };
    Ok(field("MemTotal")?.saturating_sub(field("MemFree")?) * 1024)
}

impl ProcfsNodeStats {
    /// Statistics for this machine: `proc_root` (normally `/proc`) and the cgroup
    /// hierarchies mounted under `mount_root` (normally `/sys/fs/cgroup`), named the
    /// way `driver` names cgroups.
    pub fn detect(proc_root: &Path, mount_root: &Path, driver: CgroupDriver) -> Self {
        let mountinfo =
            std::fs::read_to_string(proc_root.join("self/mountinfo")).unwrap_or_default();
        Self::with_layout(
            proc_root,
            CgroupLayout::from_mountinfo(&mountinfo, mount_root),
            driver,
        )
    }

    /// Statistics from given places (tests, fixtures).
    pub fn with_layout(
        proc_root: &Path,
        layout: Option<CgroupLayout>,
        driver: CgroupDriver,
    ) -> Self {
        ProcfsNodeStats {
            proc: proc_root.to_path_buf(),
            sys: proc_root.with_file_name("sys"),
            layout,
            driver,
            device_names: Arc::default(),
            detail_period: DETAIL_PERIOD,
            details: Arc::default(),
        }
    }

    /// How long a cgroup's limit, process count and finer counters are reused (zero
    /// reads them each time).
    pub fn with_detail_period(mut self, period: Duration) -> Self {
        self.detail_period = period;
        self
    }

    pub fn layout(&self) -> Option<&CgroupLayout> {
        self.layout.as_ref()
    }

    fn cgroup_v1(
        &self,
        memory: Option<&Path>,
        pids: Option<&Path>,
        relative: &str,
        detail: bool,
    ) -> Result<Option<CgroupStats>, StatsError> {
        let memory = memory.ok_or(StatsError::NoController {
            controller: "memory",
        })?;
        let Some(dir) = Folder::open(dir_at(memory, relative))? else {
            return Ok(None);
        };
        let Some(usage) = dir.number("memory.usage_in_bytes")? else {
            return Ok(None);
        };
        let stat = dir.read("memory.stat")?.unwrap_or_default();
        let limit = match detail {
            true => dir
                .number("memory.limit_in_bytes")?
                .filter(|l| *l <= UNLIMITED_ABOVE),
            false => None,
        };
        let tasks = match pids.filter(|_| detail) {
            Some(mount) => {
                let file = dir_at(mount, relative).join("pids.current");
                read_optional(&file)?
                    .map(|t| parse_u64(&file, &t))
                    .transpose()?
            }
            None => None,
        };
        let [inactive_file, rss, pgfault, pgmajfault, cache, mapped_file, swap] = stat_values(
            &stat,
            [
                "total_inactive_file",
                "total_rss",
                "total_pgfault",
                "total_pgmajfault",
                "total_cache",
                "total_mapped_file",
                "total_swap",
            ],
        );
        Ok(Some(CgroupStats {
            memory_usage_bytes: usage,
            inactive_file_bytes: inactive_file.unwrap_or(0),
            memory_limit_bytes: limit,
            tasks,
            cpu_usage_nanos: None,
            rss_bytes: rss,
            page_faults: pgfault,
            major_page_faults: pgmajfault,
            detail: CgroupDetail {
                cache_bytes: cache,
                mapped_file_bytes: mapped_file,
                swap_bytes: swap,
                memory_failcnt: match detail {
                    true => dir.number("memory.failcnt")?,
                    false => None,
                },
                ..CgroupDetail::default()
            },
        }))
    }

    fn cgroup_v2(
        &self,
        root: &Path,
        relative: &str,
        detail: bool,
    ) -> Result<Option<CgroupStats>, StatsError> {
        let Some(dir) = Folder::open(dir_at(root, relative))? else {
            return Ok(None);
        };
        let usage = match dir.number("memory.current")? {
            Some(usage) => usage,
            // The root has no memory.current.
            None if relative.trim_matches('/').is_empty() => {
                let meminfo = self.proc.join("meminfo");
                let text =
                    std::fs::read_to_string(&meminfo).map_err(|e| read_error(&meminfo, e))?;
                meminfo_usage(&meminfo, &text)?
            }
            None => {
                return Err(StatsError::NoController {
                    controller: "memory",
                })
            }
        };
        let stat = dir.read("memory.stat")?.unwrap_or_default();
        let (limit, tasks) = match detail {
            true => (
                match dir.read("memory.max")? {
                    Some(text) if text.trim() == "max" => None,
                    Some(text) => Some(parse_u64(&dir.path.join("memory.max"), &text)?),
                    None => None,
                },
                dir.number("pids.current")?,
            ),
            false => (None, None),
        };
        let cpu = dir.read("cpu.stat")?.unwrap_or_default();
        // cpu.stat counts microseconds.
        let cpu_nanos = |key: &str| stat_value(&cpu, key).map(|us| us.saturating_mul(1000));
        // The files only the finer counters need, when asked.
        let (events, swap, io) = match detail {
            true => (
                dir.read("memory.events")?.unwrap_or_default(),
                dir.number("memory.swap.current")?,
                dir.read("io.stat")?
                    .map(|t| self.named(parse_io_stat(&t)))
                    .unwrap_or_default(),
            ),
            false => (String::new(), None, Vec::new()),
        };
        let [inactive_file, anon, pgfault, pgmajfault, file, file_mapped] = stat_values(
            &stat,
            [
                "inactive_file",
                "anon",
                "pgfault",
                "pgmajfault",
                "file",
                "file_mapped",
            ],
        );
        Ok(Some(CgroupStats {
            memory_usage_bytes: usage,
            inactive_file_bytes: inactive_file.unwrap_or(0),
            memory_limit_bytes: limit,
            tasks,
            cpu_usage_nanos: cpu_nanos("usage_usec"),
            rss_bytes: anon,
            page_faults: pgfault,
            major_page_faults: pgmajfault,
            detail: CgroupDetail {
                cpu_user_nanos: cpu_nanos("user_usec"),
                cpu_system_nanos: cpu_nanos("system_usec"),
                cfs_periods: stat_value(&cpu, "nr_periods"),
                cfs_throttled_periods: stat_value(&cpu, "nr_throttled"),
                cfs_throttled_nanos: cpu_nanos("throttled_usec"),
                cache_bytes: file,
                mapped_file_bytes: file_mapped,
                swap_bytes: swap,
                memory_failcnt: stat_value(&events, "max"),
                io,
            },
        }))
    }

    /// Each device's node (`/dev/vda`) from `/sys/dev/block/<major:minor>/uevent`'s
    /// `DEVNAME`, remembered: cAdvisor labels block IO with it.
    fn named(&self, mut io: Vec<DeviceIo>) -> Vec<DeviceIo> {
        let mut names = self
            .device_names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for device in &mut io {
            device.device = names
                .entry(device.major_minor.clone())
                .or_insert_with(|| {
                    let uevent = self
                        .sys
                        .join("dev/block")
                        .join(&device.major_minor)
                        .join("uevent");
                    std::fs::read_to_string(uevent).ok().and_then(|text| {
                        text.lines()
                            .find_map(|l| l.strip_prefix("DEVNAME="))
                            .map(|name| format!("/dev/{}", name.trim()))
                    })
                })
                .clone();
        }
        io
    }

    fn pids_sync(&self) -> Result<PidStats, StatsError> {
        let mut max: Option<u64> = None;
        for file in ["sys/kernel/pid_max", "sys/kernel/threads-max"] {
            let path = self.proc.join(file);
            if let Some(text) = read_optional(&path)? {
                let limit = parse_u64(&path, &text)?;
                max = Some(max.map_or(limit, |m| m.min(limit)));
            }
        }
        let loadavg = self.proc.join("loadavg");
        let text = std::fs::read_to_string(&loadavg).map_err(|e| read_error(&loadavg, e))?;
        // "1.36 3.49 4.53 2/3518 3715089": the tasks that exist are after the slash.
        let running = text
            .split_whitespace()
            .nth(3)
            .and_then(|f| f.split_once('/'))
            .and_then(|(_, total)| total.parse().ok())
            .ok_or_else(|| parse_error(&loadavg, "no running/total task field"))?;
        Ok(PidStats {
            max: max.unwrap_or(u64::MAX),
            running,
        })
    }
}

/// `statvfs` of `path` and its device.
pub fn filesystem_info(path: &Path) -> Result<FilesystemInfo, StatsError> {
    let statfs_error = |source: io::Error| StatsError::Statfs {
        path: path.to_path_buf(),
        source,
    };
    let st = nix::sys::statvfs::statvfs(path).map_err(|e| statfs_error(e.into()))?;
    let device = std::fs::metadata(path).map_err(statfs_error)?.dev();
    let fragment = st.fragment_size();
    Ok(FilesystemInfo {
        stats: FsStats {
            capacity_bytes: st.blocks().saturating_mul(fragment),
            available_bytes: st.blocks_available().saturating_mul(fragment),
            inodes: Some(st.files()),
            inodes_free: Some(st.files_free()),
        },
        device,
        used: FsUsage {
            used_bytes: st
                .blocks()
                .saturating_sub(st.blocks_free())
                .saturating_mul(fragment),
            inodes_used: st.files().saturating_sub(st.files_free()),
        },
    })
}

/// Bytes on disk (512-byte blocks, as `du`) and inodes below `root` on its filesystem;
/// hard links count once; entries vanishing meanwhile are skipped.
pub fn directory_usage(root: &Path) -> Result<Option<FsUsage>, StatsError> {
    let meta = match std::fs::symlink_metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_error(root, e)),
    };
    let device = meta.dev();
    let mut usage = FsUsage {
        used_bytes: meta.blocks().saturating_mul(512),
        inodes_used: 1,
    };
    let mut linked: HashSet<u64> = HashSet::new();
    let mut dirs = if meta.is_dir() {
        vec![root.to_path_buf()]
    } else {
        Vec::new()
    };
    while let Some(dir) = dirs.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(read_error(&dir, e)),
        };
        for entry in entries.flatten() {
            // Not following symlinks: DirEntry::metadata is lstat.
            let Ok(m) = entry.metadata() else {
                continue;
            };
            if m.dev() != device {
                continue;
            }
            if !m.is_dir() && m.nlink() > 1 && !linked.insert(m.ino()) {
                continue;
            }
            usage.used_bytes = usage
                .used_bytes
                .saturating_add(m.blocks().saturating_mul(512));
            usage.inodes_used += 1;
            if m.is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    Ok(Some(usage))
}

impl ProcfsNodeStats {
    /// The cgroup at `relative`, its path in the hierarchy in the driver's spelling.
    /// The cgroup's usage, read now; its limit, process count and finer counters
    /// ([`CgroupDetail`]) read when their last reading is older than the detail period,
    /// else that reading's (as cAdvisor's housekeeping refreshes them): at 100 pods,
    /// two files fewer for each of 300 cgroups on every scrape.
    fn cgroup_at(&self, relative: &str) -> Result<Option<CgroupStats>, StatsError> {
        let cached = self.details.fresh(relative, self.detail_period);
        let stats = self.cgroup_read(relative, cached.is_none())?;
        Ok(stats.map(|mut stats| {
            match cached {
                Some(reading) => reading.apply_to(&mut stats),
                None => self.details.store(relative, SlowReading::of(&stats)),
            }
            stats
        }))
    }

    /// The cgroup's files; the limit's, the process count's and the finer counters'
    /// too when `detail`.
    fn cgroup_read(&self, relative: &str, detail: bool) -> Result<Option<CgroupStats>, StatsError> {
        match &self.layout {
            Some(CgroupLayout::V1 {
                memory,
                pids,
                cpuacct,
                cpu,
                blkio,
            }) => {
                let Some(mut stats) =
                    self.cgroup_v1(memory.as_deref(), pids.as_deref(), relative, detail)?
                else {
                    return Ok(None);
                };
                if let Some(mount) = cpuacct {
                    let dir = dir_at(mount, relative);
                    stats.cpu_usage_nanos = read_number(&dir.join("cpuacct.usage"))?;
                }
                if !detail {
                    return Ok(Some(stats));
                }
                if let Some(mount) = cpuacct {
                    let dir = dir_at(mount, relative);
                    // `user 12` and `system 3`, in clock ticks (USER_HZ, 100 on Linux).
                    let ticks = read_optional(&dir.join("cpuacct.stat"))?.unwrap_or_default();
                    let nanos = |key: &str| {
                        stat_value(&ticks, key).map(|t| t.saturating_mul(NANOS_PER_CLOCK_TICK))
                    };
                    stats.detail.cpu_user_nanos = nanos("user");
                    stats.detail.cpu_system_nanos = nanos("system");
                }
                if let Some(mount) = cpu {
                    let text = read_optional(&dir_at(mount, relative).join("cpu.stat"))?
                        .unwrap_or_default();
                    stats.detail.cfs_periods = stat_value(&text, "nr_periods");
                    stats.detail.cfs_throttled_periods = stat_value(&text, "nr_throttled");
                    stats.detail.cfs_throttled_nanos = stat_value(&text, "throttled_time");
                }
                if let Some(mount) = blkio {
                    let dir = dir_at(mount, relative);
                    let bytes =
                        read_optional(&dir.join("blkio.throttle.io_service_bytes_recursive"))?;
                    let ops = read_optional(&dir.join("blkio.throttle.io_serviced_recursive"))?;
                    stats.detail.io = self.named(parse_blkio(
                        bytes.as_deref().unwrap_or_default(),
                        ops.as_deref().unwrap_or_default(),
                    ));
                }
                Ok(Some(stats))
            }
            Some(CgroupLayout::V2 { root }) => self.cgroup_v2(root, relative, detail),
            None => Err(StatsError::NoController {
                controller: "memory",
            }),
        }
    }
}

#[async_trait]
impl NodeStats for ProcfsNodeStats {
    async fn cgroup(&self, cgroup: &CgroupName) -> Result<Option<CgroupStats>, StatsError> {
        self.cgroup_at(&cgroup.to_driver(self.driver))
    }

    async fn child_cgroups(
        &self,
        cgroup: &CgroupName,
        ids: &[&str],
    ) -> Result<Vec<(String, CgroupStats)>, StatsError> {
        let mount = match &self.layout {
            Some(CgroupLayout::V1 { memory, .. }) => memory.as_ref(),
            Some(CgroupLayout::V2 { root }) => Some(root),
            None => None,
        };
        let Some(mount) = mount else {
            return Err(StatsError::NoController {
                controller: "memory",
            });
        };
        let relative = cgroup.to_driver(self.driver);
        let dir = dir_at(mount, &relative);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(read_error(&dir, e)),
        };
        let mut children = Vec::new();
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if !ids.contains(&container_id_of_cgroup(&name)) {
                continue;
            }
            let child = format!("{}/{name}", relative.trim_end_matches('/'));
            // A container that ends meanwhile leaves no directory: skipped.
            if let Some(stats) = self.cgroup_at(&child)? {
                children.push((name, stats));
            }
        }
        Ok(children)
    }

    async fn filesystem(&self, path: &Path) -> Result<FilesystemInfo, StatsError> {
        filesystem_info(path)
    }

    async fn directory_usage(&self, path: &Path) -> Result<Option<FsUsage>, StatsError> {
        // A large folder takes a while to walk: off the (single) async thread.
        let path = path.to_path_buf();
        match tokio::task::spawn_blocking(move || directory_usage(&path)).await {
            Ok(result) => result,
            Err(join) => Err(StatsError::Read {
                path: PathBuf::new(),
                source: io::Error::other(join.to_string()),
            }),
        }
    }

    async fn pids(&self) -> Result<PidStats, StatsError> {
        self.pids_sync()
    }

    async fn own_process(&self) -> Result<Option<OwnProcess>, StatsError> {
        let stat_file = self.proc.join("self/stat");
        let stat = std::fs::read_to_string(&stat_file).map_err(|e| read_error(&stat_file, e))?;
        let status_file = self.proc.join("self/status");
        let status =
            std::fs::read_to_string(&status_file).map_err(|e| read_error(&status_file, e))?;
        let Some(boot) = self.boot_time_sync()? else {
            return Ok(None);
        };
        own_process(&stat_file, &stat, &status, boot).map(Some)
    }

    async fn boot_time(&self) -> Result<Option<i64>, StatsError> {
        self.boot_time_sync()
    }

    async fn network(&self, cgroup: &CgroupName) -> Result<Vec<InterfaceStats>, StatsError> {
        // The host's namespace is init's; a pod's is that of any of its processes.
        let pid = if cgroup.is_root() {
            Some(1)
        } else {
            let mount = match &self.layout {
                Some(CgroupLayout::V1 { memory, pids, .. }) => memory.as_ref().or(pids.as_ref()),
                Some(CgroupLayout::V2 { root }) => Some(root),
                None => None,
            };
            match mount {
                Some(mount) => first_pid(&cgroup_dir(mount, cgroup, self.driver)),
                None => None,
            }
        };
        let Some(pid) = pid else {
            return Ok(Vec::new());
        };
        let file = self.proc.join(format!("{pid}/net/dev"));
        Ok(read_optional(&file)?
            .map(|text| parse_net_dev(&text))
            .unwrap_or_default())
    }
}

/// A process in the cgroup at `dir` or below it (processes live in the leaves: the
/// containers' cgroups under a pod's).
fn first_pid(dir: &Path) -> Option<u32> {
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        if let Ok(Some(text)) = read_optional(&d.join("cgroup.procs")) {
            if let Some(pid) = text.lines().find_map(|l| l.trim().parse().ok()) {
                return Some(pid);
            }
        }
        if let Ok(entries) = std::fs::read_dir(&d) {
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    None
}

/// Clock ticks per second in `/proc` files (`USER_HZ`, fixed at 100 for user space).
const USER_HZ: f64 = 100.0;

impl ProcfsNodeStats {
    /// `btime` of `/proc/stat`.
    fn boot_time_sync(&self) -> Result<Option<i64>, StatsError> {
        let path = self.proc.join("stat");
        let text = std::fs::read_to_string(&path).map_err(|e| read_error(&path, e))?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok()))
    }
}

/// The process collector's values from `/proc/self/stat` (utime, stime, starttime in
/// ticks) and `/proc/self/status` (`VmRSS`), with the boot time in unix seconds.
fn own_process(
    stat_file: &Path,
    stat: &str,
    status: &str,
    boot_unix_seconds: i64,
) -> Result<OwnProcess, StatsError> {
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| parse_error(stat_file, "no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is 14, stime 15, starttime 22.
    let field = |n: usize| -> Result<f64, StatsError> {
        fields
            .get(n - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| parse_error(stat_file, format!("no field {n}")))
    };
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    Ok(OwnProcess {
        resident_memory_bytes: rss_kb * 1024,
        cpu_seconds: (field(14)? + field(15)?) / USER_HZ,
        start_time_unix_seconds: boot_unix_seconds as f64 + field(22)? / USER_HZ,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_process_comes_from_stat_and_status() {
        let stat =
            "42 (rk ubelet) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1000 123 456";
        let status = "Name:\trkubelet\nVmRSS:\t  2048 kB\n";
        let p = own_process(Path::new("stat"), stat, status, 1_700_000_000)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.resident_memory_bytes, 2048 * 1024);
        assert!((p.cpu_seconds - 3.0).abs() < 1e-9);
        assert!((p.start_time_unix_seconds - 1_700_000_010.0).abs() < 1e-9);
    }

    fn write(path: &Path, text: &str) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    fn name(parts: &[&str]) -> CgroupName {
        CgroupName::new(&CgroupName::root(), parts).unwrap_or_default()
    }

    /// A cgroup v2 host as a file tree: the root (no memory.current), kubepods with a
    /// limit, a pod without one.
    #[tokio::test]
    async fn cgroup_v2_files() -> Result<(), StatsError> {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let proc = tmp.path().join("proc");
        let cg = tmp.path().join("cgroup");
        write(&proc.join("meminfo"), "MemTotal:        8000000 kB\nMemFree:         3000000 kB\nMemAvailable:    5000000 kB\n");
        write(&cg.join("cgroup.controllers"), "cpu memory pids\n");
        write(
            &cg.join("memory.stat"),
            "anon 100\nfile 2000\ninactive_file 1048576\nactive_file 5\n",
        );
        write(&cg.join("kubepods/memory.current"), "3000000000\n");
        write(&cg.join("kubepods/memory.max"), "6000000000\n");
        write(
            &cg.join("kubepods/memory.stat"),
            "inactive_anon 7\ninactive_file 1000000000\nfile 800\nfile_mapped 64\n",
        );
        write(&cg.join("kubepods/pids.current"), "42\n");
        write(
            &cg.join("kubepods/cpu.stat"),
            "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 10\nnr_throttled 3\nthrottled_usec 2000\n",
        );
        write(&cg.join("kubepods/memory.swap.current"), "12\n");
        write(
            &cg.join("kubepods/memory.events"),
            "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\n",
        );
        write(
            &cg.join("kubepods/io.stat"),
            "253:0 rbytes=4096 wbytes=512 rios=2 wios=1 dbytes=0 dios=0\n7:1 rbytes=1 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
        );
        // The sysfs beside the proc root names the first device only.
        write(
            &tmp.path().join("sys/dev/block/253:0/uevent"),
            "MAJOR=253\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n",
        );
        write(
            &cg.join("kubepods/besteffort/podabc/memory.current"),
            "4096\n",
        );
        write(&cg.join("kubepods/besteffort/podabc/memory.max"), "max\n");
        write(
            &cg.join("kubepods/besteffort/podabc/memory.stat"),
            "inactive_file 1024\n",
        );
        let mountinfo = format!(
            "30 23 0:26 / {} rw,nosuid - cgroup2 cgroup2 rw\n",
            cg.display()
        );
        let layout = CgroupLayout::from_mountinfo(&mountinfo, &cg);
        assert_eq!(layout, Some(CgroupLayout::V2 { root: cg.clone() }));
        let stats = ProcfsNodeStats::with_layout(&proc, layout, CgroupDriver::Cgroupfs);
        assert_eq!(
            stats.cgroup(&CgroupName::root()).await?,
            Some(CgroupStats {
                memory_usage_bytes: 5_000_000 * 1024,
                inactive_file_bytes: 1_048_576,
                memory_limit_bytes: None,
                tasks: None,
                rss_bytes: Some(100),
                detail: CgroupDetail {
                    cache_bytes: Some(2000),
                    ..CgroupDetail::default()
                },
                ..CgroupStats::default()
            })
        );
        assert_eq!(
            stats.cgroup(&name(&["kubepods"])).await?,
            Some(CgroupStats {
                memory_usage_bytes: 3_000_000_000,
                inactive_file_bytes: 1_000_000_000,
                memory_limit_bytes: Some(6_000_000_000),
                tasks: Some(42),
                cpu_usage_nanos: Some(1_500_000),
                detail: CgroupDetail {
                    cpu_user_nanos: Some(1_000_000),
                    cpu_system_nanos: Some(500_000),
                    cfs_periods: Some(10),
                    cfs_throttled_periods: Some(3),
                    cfs_throttled_nanos: Some(2_000_000),
                    cache_bytes: Some(800),
                    mapped_file_bytes: Some(64),
                    swap_bytes: Some(12),
                    memory_failcnt: Some(5),
                    io: vec![
                        DeviceIo {
                            major_minor: "253:0".into(),
                            device: Some("/dev/vda".into()),
                            read_bytes: 4096,
                            write_bytes: 512,
                            reads: 2,
                            writes: 1,
                        },
                        DeviceIo {
                            major_minor: "7:1".into(),
                            device: None,
                            read_bytes: 1,
                            reads: 1,
                            ..DeviceIo::default()
                        },
                    ],
                },
                ..CgroupStats::default()
            })
        );
        // Within the detail period the usage is read anew and the limit, process count
        // and finer counters reused; past it (zero here) all are read.
        write(&cg.join("kubepods/memory.current"), "3100000000\n");
        write(
            &cg.join("kubepods/cpu.stat"),
            "usage_usec 2500\nuser_usec 2000\n",
        );
        write(&cg.join("kubepods/memory.max"), "7000000000\n");
        write(&cg.join("kubepods/pids.current"), "43\n");
        let again = stats.cgroup(&name(&["kubepods"])).await?;
        assert_eq!(
            again.map(|s| (
                s.memory_usage_bytes,
                s.cpu_usage_nanos,
                s.detail.cpu_user_nanos,
                s.memory_limit_bytes,
                s.tasks
            )),
            Some((
                3_100_000_000,
                Some(2_500_000),
                Some(1_000_000),
                Some(6_000_000_000),
                Some(42)
            ))
        );
        let anew = stats
            .clone()
            .with_detail_period(Duration::ZERO)
            .cgroup(&name(&["kubepods"]))
            .await?;
        assert_eq!(
            anew.map(|s| (
                s.detail.cpu_user_nanos,
                s.detail.memory_failcnt,
                s.memory_limit_bytes,
                s.tasks
            )),
            Some((Some(2_000_000), Some(5), Some(7_000_000_000), Some(43)))
        );
        let pod = stats
            .cgroup(&name(&["kubepods", "besteffort", "podabc"]))
            .await?;
        assert_eq!(
            pod.map(|p| (
                p.memory_usage_bytes,
                p.inactive_file_bytes,
                p.memory_limit_bytes
            )),
            Some((4096, 1024, None))
        );
        assert_eq!(stats.cgroup(&name(&["kubepods", "gone"])).await?, None);
        Ok(())
    }

    /// A cgroup v1 host as a file tree, named by the systemd driver.
    #[tokio::test]
    async fn cgroup_v1_files_with_systemd_names() -> Result<(), StatsError> {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let memory = tmp.path().join("memory");
        let pids = tmp.path().join("pids");
        let dir = memory.join("kubepods.slice/kubepods-burstable.slice");
        write(&dir.join("memory.usage_in_bytes"), "1000\n");
        write(&dir.join("memory.limit_in_bytes"), "9223372036854771712\n");
        write(
            &dir.join("memory.stat"),
            "cache 10\ninactive_file 1\ntotal_cache 50\ntotal_mapped_file 20\ntotal_inactive_file 300\ntotal_rss 600\ntotal_pgmajfault 2\n",
        );
        write(&dir.join("memory.failcnt"), "4\n");
        let cpu = tmp.path().join("cpu,cpuacct");
        let cpu_dir = cpu.join("kubepods.slice/kubepods-burstable.slice");
        write(&cpu_dir.join("cpuacct.usage"), "123456789\n");
        write(&cpu_dir.join("cpuacct.stat"), "user 12\nsystem 3\n");
        write(
            &cpu_dir.join("cpu.stat"),
            "nr_periods 100\nnr_throttled 7\nthrottled_time 123000\n",
        );
        let blkio = tmp.path().join("blkio");
        let blkio_dir = blkio.join("kubepods.slice/kubepods-burstable.slice");
        write(
            &blkio_dir.join("blkio.throttle.io_service_bytes_recursive"),
            "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 12288\n8:0 Total 12288\nTotal 12288\n",
        );
        write(
            &blkio_dir.join("blkio.throttle.io_serviced_recursive"),
            "8:0 Read 1\n8:0 Write 2\n8:0 Total 3\nTotal 3\n",
        );
        write(
            &pids.join("kubepods.slice/kubepods-burstable.slice/pids.current"),
            "7\n",
        );
        let mountinfo = format!(
            "32 31 0:29 / {} rw - cgroup cgroup rw,memory\n33 31 0:30 / {} rw - cgroup cgroup rw,pids\n34 31 0:31 / {} rw - cgroup cgroup rw,cpu,cpuacct\n35 31 0:32 / {} rw - cgroup cgroup rw,blkio\n41 31 0:38 / {}/unified rw - cgroup2 cgroup2 rw\n",
            memory.display(),
            pids.display(),
            cpu.display(),
            blkio.display(),
            tmp.path().display()
        );
        let layout = CgroupLayout::from_mountinfo(&mountinfo, tmp.path());
        assert_eq!(
            layout.as_ref().and_then(|l| l.v1_memory()),
            Some(memory.as_path())
        );
        let stats = ProcfsNodeStats::with_layout(tmp.path(), layout, CgroupDriver::Systemd);
        assert_eq!(
            stats.cgroup(&name(&["kubepods", "burstable"])).await?,
            Some(CgroupStats {
                memory_usage_bytes: 1000,
                inactive_file_bytes: 300,
                memory_limit_bytes: None,
                tasks: Some(7),
                cpu_usage_nanos: Some(123_456_789),
                rss_bytes: Some(600),
                major_page_faults: Some(2),
                detail: CgroupDetail {
                    cpu_user_nanos: Some(120_000_000),
                    cpu_system_nanos: Some(30_000_000),
                    cfs_periods: Some(100),
                    cfs_throttled_periods: Some(7),
                    cfs_throttled_nanos: Some(123_000),
                    cache_bytes: Some(50),
                    mapped_file_bytes: Some(20),
                    swap_bytes: None,
                    memory_failcnt: Some(4),
                    io: vec![DeviceIo {
                        major_minor: "8:0".into(),
                        device: None,
                        read_bytes: 4096,
                        write_bytes: 8192,
                        reads: 1,
                        writes: 2,
                    }],
                },
                ..CgroupStats::default()
            })
        );
        // A container's scope below it, in every hierarchy, as containerd makes it.
        let scope = "cri-containerd-abc.scope";
        write(&dir.join(scope).join("memory.usage_in_bytes"), "400\n");
        write(
            &dir.join(scope).join("memory.stat"),
            "total_inactive_file 100\n",
        );
        write(
            &cpu.join("kubepods.slice/kubepods-burstable.slice")
                .join(scope)
                .join("cpuacct.usage"),
            "99\n",
        );
        // The sandbox's cgroup beside it is no container asked for: left unread.
        write(
            &dir.join("cri-containerd-pause.scope")
                .join("memory.usage_in_bytes"),
            "1\n",
        );
        let children = stats
            .child_cgroups(&name(&["kubepods", "burstable"]), &["abc", "def"])
            .await?;
        assert_eq!(
            children
                .iter()
                .map(|(dir, s)| (dir.as_str(), s.working_set_bytes(), s.cpu_usage_nanos))
                .collect::<Vec<_>>(),
            vec![(scope, 300, Some(99))]
        );
        assert_eq!(
            stats
                .child_cgroups(&name(&["kubepods", "gone"]), &["abc"])
                .await?,
            vec![]
        );
        write(&dir.join("memory.usage_in_bytes"), "lots\n");
        let err = stats
            .cgroup(&name(&["kubepods", "burstable"]))
            .await
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err,
            Some(format!(
                "failed to parse {}: not a number: \"lots\"",
                dir.join("memory.usage_in_bytes").display()
            ))
        );
        Ok(())
    }

    #[tokio::test]
    async fn pids_as_upstream_counts_them() -> Result<(), StatsError> {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        write(&tmp.path().join("sys/kernel/pid_max"), "4194304\n");
        write(&tmp.path().join("sys/kernel/threads-max"), "63000\n");
        write(
            &tmp.path().join("loadavg"),
            "1.36 3.49 4.53 2/3518 3715089\n",
        );
        let stats = ProcfsNodeStats::with_layout(tmp.path(), None, CgroupDriver::Cgroupfs);
        assert_eq!(
            stats.pids().await?,
            PidStats {
                max: 63000,
                running: 3518
            }
        );
        assert!(matches!(
            stats.cgroup(&CgroupName::root()).await,
            Err(StatsError::NoController { .. })
        ));
        Ok(())
    }

    #[tokio::test]
    async fn directory_usage_counts_blocks_and_inodes_once() -> Result<(), StatsError> {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = tmp.path().join("vol");
        write(&root.join("a/big"), &"x".repeat(100_000));
        write(&root.join("small"), "y");
        std::fs::hard_link(root.join("a/big"), root.join("link")).unwrap_or_else(|e| panic!("{e}"));
        let stats = ProcfsNodeStats::with_layout(tmp.path(), None, CgroupDriver::Cgroupfs);
        let usage = stats.directory_usage(&root).await?.unwrap_or_default();
        // vol, a, a/big, small (the hard link is the same inode as a/big).
        assert_eq!(usage.inodes_used, 4);
        assert!(
            usage.used_bytes >= 100_000 && usage.used_bytes < 200_000,
            "{usage:?}"
        );
        assert_eq!(stats.directory_usage(&tmp.path().join("none")).await?, None);
        let fs = stats.filesystem(tmp.path()).await?;
        assert!(fs.stats.capacity_bytes >= fs.stats.available_bytes && fs.stats.capacity_bytes > 0);
        Ok(())
    }
}
