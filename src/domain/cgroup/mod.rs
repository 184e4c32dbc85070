//! The kubelet's cgroups as pure values: names in both drivers' spellings and the
//! resource settings each cgroup gets, and what a driver writes for them.

pub mod cfs;
pub mod config;
pub mod mounts;
pub mod name;
pub mod tree;
pub mod values;

pub use config::{
    kubepods_name, kubepods_resource_config, pod_cgroup_name, pod_resource_config, pod_uid_of,
    qos_cgroup_name, qos_resource_configs, shares_to_weight, CgroupSettings, WeightCurve,
    POD_CGROUP_PREFIX,
};
pub use name::{
    expand_slice, CgroupDriver, CgroupName, CgroupNameError, DriverAgreement, DriverMismatch,
};
pub use values::{
    cgroupfs_files, cpu_quota_per_sec_usec, resource_properties, slice_properties, CgroupVersion,
    PropValue, Property, INFINITY,
};

/// The limits one cgroup is given; `None` leaves a setting as it is (unlimited
/// for a new cgroup). Values are in cgroup v1 units; a v2 driver converts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResourceConfig {
    /// cpu.shares (v1); cpu.weight is derived from it on v2.
    pub cpu_shares: Option<u64>,
    /// cpu.cfs_quota_us; -1 means no limit.
    pub cpu_quota: Option<i64>,
    /// cpu.cfs_period_us.
    pub cpu_period: Option<u64>,
    /// memory.limit_in_bytes in bytes; -1 means no limit.
    pub memory_limit: Option<i64>,
    /// pids.max; -1 means no limit.
    pub pids_limit: Option<i64>,
}
