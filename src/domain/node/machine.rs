//! What the node is made of, as observed once at start-up (cAdvisor's `MachineInfo`, trimmed to
//! what node status, allocatable and the CPU manager read).

use serde::{Deserialize, Serialize};

use crate::domain::units::cpuset::CpuSet;

/// Facts about the machine. Plain data: the `MachineInfoProvider` port fills it in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// Logical CPUs that are online.
    pub num_cores: usize,
    /// The online CPUs (the kernel writes them as `0-1` or `0,2-3`).
    pub online_cpus: CpuSet,
    pub memory_capacity_bytes: u64,
    /// Size of the filesystem holding the kubelet root directory.
    pub root_fs_capacity_bytes: u64,
    /// `/proc/sys/kernel/pid_max`: the node's pid capacity.
    pub pid_max: u64,
    pub boot_id: String,
    /// Empty when the machine has no machine-id file.
    pub machine_id: String,
    /// Empty when the firmware exposes no DMI product UUID (common in VMs and containers).
    pub system_uuid: String,
    /// The kernel's huge page pools, in the order it lists `/sys/kernel/mm/hugepages`
    /// (the order runc and upstream send page-size limits in).
    #[serde(default)]
    pub hugepages: Vec<HugePagePool>,
    /// Whether the kernel enforces AppArmor profiles.
    #[serde(default)]
    pub apparmor_enabled: bool,
}

/// One huge page pool of the kernel (`/sys/kernel/mm/hugepages/hugepages-<size>kB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HugePagePool {
    pub page_size_bytes: u64,
    /// `nr_hugepages`: the pages set aside in this pool.
    pub pages: u64,
}

impl MachineInfo {
    /// runc's names of the page sizes (`2MB`, `1GB`), in the kernel's order.
    pub fn hugepage_sizes(&self) -> Vec<String> {
        self.hugepages
            .iter()
            .filter_map(|pool| {
                crate::domain::kuberuntime::requests::hugepage_size_name(
                    i64::try_from(pool.page_size_bytes).ok()?,
                )
            })
            .collect()
    }
}
