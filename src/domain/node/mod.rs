//! The node as the kubelet sees it at start-up: its name, its capacity, what is reserved
//! and what is left for pods. Pure: machine facts come in as values.

pub mod allocatable;
pub mod machine;
pub mod reserved;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::config::error::ConfigError;
use crate::domain::config::model::KubeletConfiguration;
use crate::domain::eviction::{self, Threshold};
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
    /// After `--reserved-cpus` took over the cpu reservation.
    pub system_reserved: ResourceList,
    pub kube_reserved: ResourceList,
    pub hard_thresholds: Vec<Threshold>,
    pub soft_thresholds: Vec<Threshold>,
    /// True when the given `evictionHard` replaced the defaults.
    pub eviction_defaults_replaced: bool,
    pub allocatable: ResourceList,
}

/// The node's capacity as the kubelet reports it.
pub fn capacity(machine: &MachineInfo, max_pods: i32) -> ResourceList {
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    BTreeMap::from([
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
    ])
}

/// Resolve the node-level settings of a valid configuration against this machine.
/// Every problem is reported: a reserved CPU set that the machine does not have, and a
/// reservation larger than capacity.
pub fn node_settings(
    c: &KubeletConfiguration,
    machine: &MachineInfo,
) -> Result<NodeSettings, Vec<ConfigError>> {
    let mut problems = Vec::new();
    let invalid = |e: &dyn std::fmt::Display| ConfigError::Invalid(e.to_string());
    let mut system_reserved =
        reserved::parse_reserved("systemReserved (--system-reserved)", &c.system_reserved)
            .map_err(|errors| errors.iter().map(|e| invalid(e)).collect::<Vec<_>>())
            .unwrap_or_else(|errors| {
                problems.extend(errors);
                ResourceList::new()
            });
    let mut kube_reserved =
        reserved::parse_reserved("kubeReserved (--kube-reserved)", &c.kube_reserved)
            .map_err(|errors| errors.iter().map(|e| invalid(e)).collect::<Vec<_>>())
            .unwrap_or_else(|errors| {
                problems.extend(errors);
                ResourceList::new()
            });

    let online_cpus = machine.online_cpus.clone();
    let mut reserved_cpus = None;
    if !c.reserved_system_cpus.is_empty() {
        match reserved::parse_reserved_cpus(&c.reserved_system_cpus) {
            Ok(cpus) => match reserved::check_reserved_cpus(&cpus, &online_cpus) {
                Ok(()) => {
                    (system_reserved, kube_reserved) =
                        reserved::apply_reserved_cpus(&cpus, &system_reserved, &kube_reserved);
                    reserved_cpus = Some(cpus);
                }
                Err(e) => problems.push(invalid(&e)),
            },
            Err(e) => problems.push(invalid(&e)),
        }
    }

    let eviction_defaults_replaced = !c.merge_default_eviction_settings
        && eviction::default_eviction_hard()
            .keys()
            .any(|k| !c.eviction_hard.contains_key(k));
    let empty = BTreeMap::new();
    let hard_thresholds = eviction::parse_threshold_config(
        &c.enforce_node_allocatable,
        &c.eviction_hard,
        &empty,
        &empty,
        &c.eviction_minimum_reclaim,
    )
    .unwrap_or_else(|e| {
        problems.push(invalid(&e));
        Vec::new()
    });
    let soft_thresholds = eviction::parse_threshold_config(
        &[],
        &empty,
        &c.eviction_soft,
        &c.eviction_soft_grace_period,
        &c.eviction_minimum_reclaim,
    )
    .unwrap_or_else(|e| {
        problems.push(invalid(&e));
        Vec::new()
    });

    let capacity = capacity(machine, c.max_pods);
    if let Err(errors) = validate_node_allocatable(
        &capacity,
        &system_reserved,
        &kube_reserved,
        &hard_thresholds,
    ) {
        problems.extend(errors.iter().map(|e| invalid(e)));
        // Upstream states only the total; name what it is made of, so the flag to fix
        // is obvious.
        let show = reserved::format_resource_list;
        problems.push(ConfigError::Invalid(format!(
            "the reservation is kubeReserved (--kube-reserved) {} + systemReserved (--system-reserved) {} + hard eviction {}",
            show(&kube_reserved),
            show(&system_reserved),
            show(&crate::domain::node::allocatable::hard_eviction_reservation(&hard_thresholds, &capacity)),
        )));
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

    fn two_cpu_machine() -> MachineInfo {
        MachineInfo {
            num_cores: 2,
            online_cpus: CpuSet::new([0, 1]),
            memory_capacity_bytes: 8 << 30,
            root_fs_capacity_bytes: 100 << 30,
            pid_max: 4_194_304,
            boot_id: "boot".into(),
            machine_id: "machine".into(),
            system_uuid: String::new(),
        }
    }

    /// Hard thresholds without the allocatable ones upstream adds for `pods` enforcement.
    fn user_thresholds(node: &NodeSettings) -> usize {
        node.hard_thresholds
            .iter()
            .filter(|t| t.signal != eviction::Signal::AllocatableMemoryAvailable)
            .count()
    }

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).expect("valid quantity")
    }

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
    fn reserved_cpus_replace_the_cpu_reservations() {
        let c = KubeletConfiguration {
            reserved_system_cpus: "1".into(),
            system_reserved: BTreeMap::from([
                ("cpu".into(), "500m".into()),
                ("memory".into(), "1Gi".into()),
            ]),
            kube_reserved: BTreeMap::from([("cpu".into(), "200m".into())]),
            ..KubeletConfiguration::default()
        };
        let node = node_settings(&c, &two_cpu_machine()).expect("valid");
        assert_eq!(node.system_reserved.get("cpu"), Some(&q("1")));
        assert_eq!(node.system_reserved.get("memory"), Some(&q("1Gi")));
        assert_eq!(node.kube_reserved.get("cpu"), None);
        assert_eq!(node.allocatable.get("cpu"), Some(&q("1")));
        // 8Gi - 1Gi system-reserved - 100Mi hard eviction
        assert_eq!(node.allocatable.get("memory"), Some(&q("7068Mi")));
    }

    #[test]
    fn reserved_cpus_outside_the_machine_are_refused_naming_both_sets() {
        let c = KubeletConfiguration {
            reserved_system_cpus: "0-99".into(),
            ..KubeletConfiguration::default()
        };
        let problems = node_settings(&c, &two_cpu_machine()).expect_err("invalid");
        let text = problems[0].to_string();
        assert!(text.contains("0-99") && text.contains("0-1"), "{text}");
    }

    #[test]
    fn a_reservation_over_capacity_is_refused() {
        let c = KubeletConfiguration {
            kube_reserved: BTreeMap::from([("memory".into(), "100Ti".into())]),
            ..KubeletConfiguration::default()
        };
        let problems = node_settings(&c, &two_cpu_machine()).expect_err("invalid");
        assert!(
            problems.iter().any(|p| p.to_string().contains("memory")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_given_hard_map_replaces_the_defaults_unless_merged() {
        let mut c = KubeletConfiguration {
            eviction_hard: BTreeMap::from([("memory.available".into(), "500Mi".into())]),
            ..KubeletConfiguration::default()
        };
        let node = node_settings(&c, &two_cpu_machine()).expect("valid");
        assert!(node.eviction_defaults_replaced);
        assert_eq!(user_thresholds(&node), 1);
        c.merge_default_eviction_settings = true;
        c.eviction_hard = eviction::effective_eviction_hard(Some(&c.eviction_hard), true);
        let node = node_settings(&c, &two_cpu_machine()).expect("valid");
        assert!(!node.eviction_defaults_replaced);
        assert_eq!(user_thresholds(&node), 4);
    }
}
