//! What the domain's unit tests share.

use std::collections::BTreeMap;

use crate::domain::config::NodeFacts;
use crate::domain::kuberuntime::requests::RequestContext;
use crate::domain::node::machine::MachineInfo;
use crate::domain::units::cpuset::CpuSet;

/// A two-CPU node with 8 GiB of memory and 100 GiB of disk.
pub fn two_cpu_machine() -> MachineInfo {
    MachineInfo {
        num_cores: 2,
        online_cpus: CpuSet::new([0, 1]),
        memory_capacity_bytes: 8 << 30,
        root_fs_capacity_bytes: 100 << 30,
        pid_max: 4_194_304,
        boot_id: "boot".into(),
        machine_id: "machine".into(),
        system_uuid: String::new(),
        hugepages: Vec::new(),
        apparmor_enabled: false,
    }
}

/// [`two_cpu_machine`] named `node-a`.
pub fn node_a() -> NodeFacts {
    NodeFacts {
        hostname: "node-a".into(),
        machine: two_cpu_machine(),
    }
}

/// A string map from pairs.
pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The request context of a node at `/var/lib/kubelet` with logs under `/var/log/pods`.
pub fn request_context() -> RequestContext {
    RequestContext {
        pod_logs_dir: "/var/log/pods".into(),
        root_dir: "/var/lib/kubelet".into(),
        host_dns: Default::default(),
        cluster_dns: Vec::new(),
        cluster_domain: "cluster.local".into(),
        cpu_cfs_quota: true,
        cpu_cfs_quota_period_us: 100_000,
        memory_capacity_bytes: 1 << 30,
        hugepage_sizes: Vec::new(),
        security: Default::default(),
    }
}
