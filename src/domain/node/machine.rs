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
    /// The huge page sizes the kernel offers, as runc names them (`2MB`, `1GB`), in the
    /// order the kernel lists `/sys/kernel/mm/hugepages`.
    #[serde(default)]
    pub hugepage_sizes: Vec<String>,
    /// Whether the kernel enforces AppArmor profiles.
    #[serde(default)]
    pub apparmor_enabled: bool,
}
