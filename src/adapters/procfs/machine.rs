use std::io;
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::domain::units::cpuset::CpuSet;

use crate::domain::node::machine::{HugePagePool, MachineInfo};
use crate::domain::resource_managers::topology::{MachineTopology, SysfsCpu, SysfsNumaNode};
use crate::ports::machine::{MachineInfoError, MachineInfoProvider};

/// Where the facts are read from. Every path is configurable so tests can point at a fixture tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachinePaths {
    /// procfs mount, normally `/proc`.
    pub proc_root: PathBuf,
    /// sysfs mount, normally `/sys`.
    pub sys_root: PathBuf,
    /// Candidate machine-id files, first readable wins.
    pub machine_id_files: Vec<PathBuf>,
    /// A directory on the root filesystem to measure (the kubelet root directory).
    pub root_dir: PathBuf,
}

impl MachinePaths {
    /// The real host's paths, measuring the filesystem that holds `root_dir`.
    pub fn host(root_dir: impl Into<PathBuf>) -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            machine_id_files: vec![
                PathBuf::from("/etc/machine-id"),
                PathBuf::from("/var/lib/dbus/machine-id"),
            ],
            root_dir: root_dir.into(),
        }
    }
}

/// Reads [`MachineInfo`] from kernel files.
#[derive(Debug, Clone)]
pub struct ProcfsMachineInfo {
    paths: MachinePaths,
}

impl ProcfsMachineInfo {
    pub fn new(paths: MachinePaths) -> Self {
        Self { paths }
    }
}

fn read(path: &Path) -> Result<String, MachineInfoError> {
    std::fs::read_to_string(path).map_err(|source| MachineInfoError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Reads an optional identity file: absent or unreadable (the DMI uuid is root-only) gives
/// `None`, like cAdvisor, since many VMs and containers lack them.
fn read_optional(path: &Path) -> Result<Option<String>, MachineInfoError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_owned())),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
            ) =>
        {
            Ok(None)
        }
        Err(source) => Err(MachineInfoError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

fn parse_error(path: &Path, detail: impl Into<String>) -> MachineInfoError {
    MachineInfoError::Parse {
        path: path.to_owned(),
        detail: detail.into(),
    }
}

/// `MemTotal:  24684096 kB` in bytes.
fn parse_mem_total(path: &Path, meminfo: &str) -> Result<u64, MachineInfoError> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .ok_or_else(|| parse_error(path, "no MemTotal line"))?;
    let mut fields = line.split_whitespace();
    let value: u64 = fields
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| parse_error(path, format!("invalid MemTotal {line:?}")))?;
    match fields.next() {
        Some("kB") => value
            .checked_mul(1024)
            .ok_or_else(|| parse_error(path, format!("MemTotal overflows: {line:?}"))),
        None => Ok(value),
        Some(unit) => Err(parse_error(path, format!("unknown MemTotal unit {unit:?}"))),
    }
}

/// The folder's entries; `None` when it is absent (a kernel without the feature).
fn read_dir_if_present(dir: &Path) -> Result<Option<std::fs::ReadDir>, MachineInfoError> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(Some(entries)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(MachineInfoError::Read {
            path: dir.to_owned(),
            source,
        }),
    }
}

/// The kernel's huge page pools (`hugepages-2048kB` is 2 MiB pages, `nr_hugepages` their
/// count), in the folder's order as runc lists it; none when the folder is absent.
fn hugepage_pools(dir: &Path) -> Result<Vec<HugePagePool>, MachineInfoError> {
    let Some(entries) = read_dir_if_present(dir)? else {
        return Ok(Vec::new());
    };
    // In the folder's own order, unsorted, as runc lists it (upstream sends the limits
    // in that order: `2MB` before `1GB` here).
    let names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names
        .iter()
        .map(|name| {
            let page_size_bytes = name
                .strip_prefix("hugepages-")
                .and_then(|s| s.strip_suffix("kB"))
                .and_then(|s| s.parse::<u64>().ok())
                .and_then(|kib| kib.checked_mul(1024))
                .filter(|bytes| *bytes > 0)
                .ok_or_else(|| parse_error(dir, format!("unexpected entry {name:?}")))?;
            let count_path = dir.join(name).join("nr_hugepages");
            let count = read(&count_path)?;
            let pages = count
                .trim()
                .parse()
                .map_err(|_| parse_error(&count_path, format!("invalid page count {count:?}")))?;
            Ok(HugePagePool {
                page_size_bytes,
                pages,
            })
        })
        .collect()
}

/// runc's test: the AppArmor module is enabled and its filesystem is there.
fn apparmor_enabled(sys_root: &Path) -> bool {
    sys_root.join("kernel/security/apparmor").exists()
        && std::fs::read_to_string(sys_root.join("module/apparmor/parameters/enabled"))
            .is_ok_and(|v| v.starts_with('Y'))
}

impl MachineInfoProvider for ProcfsMachineInfo {
    fn machine_info(&self) -> Result<MachineInfo, MachineInfoError> {
        let p = &self.paths;

        let online_path = p.sys_root.join("devices/system/cpu/online");
        let online_cpus = CpuSet::parse(read(&online_path)?.trim())
            .map_err(|e| parse_error(&online_path, e.to_string()))?;
        let num_cores = online_cpus.len();

        let meminfo_path = p.proc_root.join("meminfo");
        let memory_capacity_bytes = parse_mem_total(&meminfo_path, &read(&meminfo_path)?)?;

        let pid_max_path = p.proc_root.join("sys/kernel/pid_max");
        let pid_max_text = read(&pid_max_path)?;
        let pid_max = pid_max_text
            .trim()
            .parse()
            .map_err(|_| parse_error(&pid_max_path, format!("invalid pid_max {pid_max_text:?}")))?;

        let boot_id_path = p.proc_root.join("sys/kernel/random/boot_id");
        let boot_id = read(&boot_id_path)?.trim().to_owned();
        if boot_id.is_empty() {
            return Err(parse_error(&boot_id_path, "empty boot_id"));
        }

        let mut machine_id = String::new();
        for path in &p.machine_id_files {
            if let Some(id) = read_optional(path)?.filter(|id| !id.is_empty()) {
                machine_id = id;
                break;
            }
        }
        if machine_id.is_empty() {
            warn!(files = ?p.machine_id_files, "no machine-id found; leaving it empty");
        }

        let uuid_path = p.sys_root.join("class/dmi/id/product_uuid");
        let system_uuid = read_optional(&uuid_path)?.unwrap_or_default();

        // The root dir is created only after validation; its filesystem is the one of
        // its nearest existing ancestor.
        let fs_probe = p
            .root_dir
            .ancestors()
            .find(|a| a.exists())
            .unwrap_or(&p.root_dir)
            .to_path_buf();
        let stat = nix::sys::statvfs::statvfs(&fs_probe).map_err(|e| MachineInfoError::Statfs {
            path: fs_probe.clone(),
            source: e.into(),
        })?;
        // Capacity as df reports it: total blocks in fragment-size units.
        let root_fs_capacity_bytes = stat.blocks().saturating_mul(stat.fragment_size());

        let hugepages = hugepage_pools(&p.sys_root.join("kernel/mm/hugepages"))?;
        let apparmor_enabled = apparmor_enabled(&p.sys_root);

        Ok(MachineInfo {
            num_cores,
            online_cpus,
            memory_capacity_bytes,
            root_fs_capacity_bytes,
            pid_max,
            boot_id,
            machine_id,
            system_uuid,
            hugepages,
            apparmor_enabled,
        })
    }

    fn cpu_topology(&self) -> Result<MachineTopology, MachineInfoError> {
        let cpu_dir = self.paths.sys_root.join("devices/system/cpu");
        let online_path = cpu_dir.join("online");
        let online = CpuSet::parse(read(&online_path)?.trim())
            .map_err(|e| parse_error(&online_path, e.to_string()))?;
        let cpus = online
            .iter()
            .map(|cpu| {
                let topology = cpu_dir.join(format!("cpu{cpu}/topology"));
                Ok(SysfsCpu {
                    cpu,
                    socket_id: read_number(&topology.join("physical_package_id"))?,
                    core_id: read_number(&topology.join("core_id"))?,
                })
            })
            .collect::<Result<Vec<_>, MachineInfoError>>()?;
        let nodes = numa_nodes(&self.paths.sys_root.join("devices/system/node"))?;
        Ok(MachineTopology::from_sysfs(&cpus, &nodes))
    }
}

fn read_number(path: &Path) -> Result<usize, MachineInfoError> {
    let text = read(path)?;
    text.trim()
        .parse()
        .map_err(|_| parse_error(path, format!("not a number: {text:?}")))
}

/// The NUMA nodes under `dir` (`node<N>/cpulist`, `distance`); none when the folder is
/// absent (a kernel without NUMA support).
fn numa_nodes(dir: &Path) -> Result<Vec<SysfsNumaNode>, MachineInfoError> {
    let Some(entries) = read_dir_if_present(dir)? else {
        return Ok(Vec::new());
    };
    let mut nodes = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_prefix("node").and_then(|n| n.parse().ok()) else {
            continue;
        };
        let cpulist = entry.path().join("cpulist");
        let cpus = CpuSet::parse(read(&cpulist)?.trim())
            .map_err(|e| parse_error(&cpulist, e.to_string()))?;
        let distance = entry.path().join("distance");
        let distances = read(&distance)?
            .split_whitespace()
            .map(|d| {
                d.parse()
                    .map_err(|_| parse_error(&distance, format!("not a distance: {d:?}")))
            })
            .collect::<Result<Vec<u64>, _>>()?;
        nodes.push(SysfsNumaNode {
            id,
            cpus,
            distances,
        });
    }
    nodes.sort_by_key(|n| n.id);
    Ok(nodes)
}
