//! The node as the kubelet sees it at start-up: its name, its capacity, what is reserved
//! and what is left for pods. Pure: machine facts come in as values.

pub mod allocatable;
pub mod machine;
pub mod reserved;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::eviction::Threshold;
use crate::domain::units::cpuset::CpuSet;
use crate::domain::units::quantity::{Format, Quantity};
use allocatable::{node_allocatable, validate_node_allocatable};
use machine::MachineInfo;
use reserved::ResourceList;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeNameError {
    #[error("node name is empty: the hostname is empty and --hostname-override is not set")]
    Empty,
}

/// How the node name was chosen, for the log and the planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeNameSource {
    HostnameOverride,
    Hostname,
}

/// The node name: `--hostname-override` when given (and not blank), else the OS
/// hostname; trimmed and lower-cased as upstream does.
pub fn resolve_node_name(
    hostname_override: Option<&str>,
    os_hostname: &str,
) -> Result<(String, NodeNameSource), NodeNameError> {
    let (raw, source) = match hostname_override.map(str::trim) {
        Some(name) if !name.is_empty() => (name, NodeNameSource::HostnameOverride),
        _ => (os_hostname.trim(), NodeNameSource::Hostname),
    };
    if raw.is_empty() {
        return Err(NodeNameError::Empty);
    }
    Ok((raw.to_lowercase(), source))
}

/// What the container manager works with, computed once at start-up.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeSettings {
    pub capacity: ResourceList,
    pub online_cpus: CpuSet,
    /// `--reserved-cpus`, when given.
    pub reserved_cpus: Option<CpuSet>,
    /// `systemReserved` and `kubeReserved` as given, before `reservedSystemCPUs` took
    /// over their cpu.
    pub given_system_reserved: ResourceList,
    pub given_kube_reserved: ResourceList,
    /// After `--reserved-cpus` took over the cpu reservation.
    pub system_reserved: ResourceList,
    pub kube_reserved: ResourceList,
    pub hard_thresholds: Vec<Threshold>,
    pub soft_thresholds: Vec<Threshold>,
    /// True when the given `evictionHard` replaced the defaults.
    pub eviction_defaults_replaced: bool,
    pub allocatable: ResourceList,
}

/// The node's capacity as the kubelet reports it: cpu, memory, ephemeral storage, pods,
/// and a `hugepages-<size>` entry per huge page pool of the kernel (its pages times its page
/// size; zero when none are set aside), as upstream's cAdvisor-based capacity.
pub fn capacity(machine: &MachineInfo, max_pods: i32) -> ResourceList {
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let hugepages = machine.hugepages.iter().map(|pool| {
        let page = Quantity::new(to_i64(pool.page_size_bytes), Format::BinarySI);
        let total = pool.pages.saturating_mul(pool.page_size_bytes);
        (
            format!("hugepages-{page}"),
            Quantity::new(to_i64(total), Format::BinarySI),
        )
    });
    let mut capacity = BTreeMap::from([
        (
            "cpu".to_string(),
            Quantity::new(to_i64(machine.num_cores as u64), Format::DecimalSI),
        ),
        (
            "memory".to_string(),
            Quantity::new(to_i64(machine.memory_capacity_bytes), Format::BinarySI),
        ),
        (
            "ephemeral-storage".to_string(),
            Quantity::new(to_i64(machine.root_fs_capacity_bytes), Format::BinarySI),
        ),
        (
            "pods".to_string(),
            Quantity::new(i64::from(max_pods), Format::DecimalSI),
        ),
    ]);
    capacity.extend(hugepages);
    capacity
}

/// One problem with the node-level settings against this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeSettingsError {
    #[error(transparent)]
    ReservedCpus(#[from] reserved::ReservedError),
    #[error(transparent)]
    Allocatable(#[from] allocatable::AllocatableError),
    /// Upstream states only the total; this names what it is made of, so the flag to fix
    /// is obvious.
    #[error("the reservation is kubeReserved (--kube-reserved) {kube} + systemReserved (--system-reserved) {system} + hard eviction {eviction}")]
    ReservationMadeOf {
        kube: String,
        system: String,
        eviction: String,
    },
}

/// The reservations and thresholds as the configuration gives them, parsed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GivenReservations {
    pub system_reserved: ResourceList,
    pub kube_reserved: ResourceList,
    /// `reservedSystemCPUs`, when given.
    pub reserved_cpus: Option<CpuSet>,
    pub hard_thresholds: Vec<Threshold>,
    pub soft_thresholds: Vec<Threshold>,
    /// True when the given `evictionHard` replaced the defaults.
    pub eviction_defaults_replaced: bool,
}

/// The node-level settings of this machine: reserved CPUs must be online (they then take
/// over the cpu reservations) and the reservations must fit capacity. Every problem is
/// reported.
pub fn node_settings(
    machine: &MachineInfo,
    max_pods: i32,
    given: GivenReservations,
) -> Result<NodeSettings, Vec<NodeSettingsError>> {
    let mut problems = Vec::new();
    let GivenReservations {
        mut system_reserved,
        mut kube_reserved,
        reserved_cpus,
        hard_thresholds,
        soft_thresholds,
        eviction_defaults_replaced,
    } = given;
    let (given_system_reserved, given_kube_reserved) =
        (system_reserved.clone(), kube_reserved.clone());
    let online_cpus = machine.online_cpus.clone();
    let reserved_cpus = match reserved_cpus {
        Some(cpus) => match reserved::check_reserved_cpus(&cpus, &online_cpus) {
            Ok(()) => {
                (system_reserved, kube_reserved) =
                    reserved::apply_reserved_cpus(&cpus, &system_reserved, &kube_reserved);
                Some(cpus)
            }
            Err(e) => {
                problems.push(NodeSettingsError::from(e));
                None
            }
        },
        None => None,
    };
    let capacity = capacity(machine, max_pods);
    if let Err(errors) = validate_node_allocatable(
        &capacity,
        &system_reserved,
        &kube_reserved,
        &hard_thresholds,
    ) {
        problems.extend(errors.into_iter().map(NodeSettingsError::from));
        let show = reserved::format_resource_list;
        problems.push(NodeSettingsError::ReservationMadeOf {
            kube: show(&kube_reserved),
            system: show(&system_reserved),
            eviction: show(&allocatable::hard_eviction_reservation(
                &hard_thresholds,
                &capacity,
            )),
        });
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let allocatable = node_allocatable(
        &capacity,
        &system_reserved,
        &kube_reserved,
        &hard_thresholds,
    );
    Ok(NodeSettings {
        capacity,
        online_cpus,
        reserved_cpus,
        given_system_reserved,
        given_kube_reserved,
        system_reserved,
        kube_reserved,
        hard_thresholds,
        soft_thresholds,
        eviction_defaults_replaced,
        allocatable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_name_prefers_the_override_and_lower_cases() {
        let cases = [
            (
                Some("  Node-A "),
                "host",
                Ok(("node-a".to_string(), NodeNameSource::HostnameOverride)),
            ),
            (
                Some("   "),
                "My-Host\n",
                Ok(("my-host".to_string(), NodeNameSource::Hostname)),
            ),
            (
                None,
                "HOST",
                Ok(("host".to_string(), NodeNameSource::Hostname)),
            ),
            (None, "  ", Err(NodeNameError::Empty)),
        ];
        for (override_, hostname, want) in cases {
            assert_eq!(resolve_node_name(override_, hostname), want);
        }
    }

    #[test]
    fn capacity_has_a_hugepages_entry_per_pool() {
        let mut machine = crate::domain::test_support::two_cpu_machine();
        machine.hugepages = vec![
            machine::HugePagePool {
                page_size_bytes: 2 << 20,
                pages: 512,
            },
            machine::HugePagePool {
                page_size_bytes: 1 << 30,
                pages: 0,
            },
        ];
        let shown: BTreeMap<String, String> = capacity(&machine, 110)
            .into_iter()
            .filter(|(name, _)| name.starts_with("hugepages-"))
            .map(|(name, q)| (name, q.to_string()))
            .collect();
        assert_eq!(
            shown,
            BTreeMap::from([
                ("hugepages-1Gi".to_string(), "0".to_string()),
                ("hugepages-2Mi".to_string(), "1Gi".to_string()),
            ])
        );
    }
}
