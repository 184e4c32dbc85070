//! Node resource managers (issue 36): the static CPU manager policy and the topology
//! manager, as upstream v1.26 decides them (`pkg/kubelet/cm/cpumanager`,
//! `pkg/kubelet/cm/topologymanager`). Pure: the app reads sysfs and the checkpoint file,
//! hands the facts in, and writes back what these decide.
//!
//! - `topology`: the node's CPUs by NUMA node, socket and core (upstream's
//!   `cpumanager/topology`).
//! - `cpu_assignment`: which free CPUs an exclusive request takes (`takeByTopology`).
//! - `policy_options`, `policy_static`: the static policy: reserved CPUs, the shared pool,
//!   exclusive assignments, topology hints.
//! - `state`: the assignments and the `cpu_manager_state` checkpoint (JSON, checksum,
//!   checks on restore).
//! - `topology_manager`: NUMA bitmasks, hints, the four policies that merge them, and
//!   pod admission in the container or pod scope.
//! - `device_topology`: the topology manager over the devices alone, without the static
//!   CPU manager.

pub mod cpu_assignment;
pub mod cpu_manager;
pub mod device_topology;
pub mod policy_options;
pub mod policy_static;
pub mod state;
pub mod topology;
pub mod topology_manager;

#[cfg(test)]
mod fixtures;

/// Which levels of policy options the feature gates allow (upstream's
/// `CPUManagerPolicyAlphaOptions`/`BetaOptions` and
/// `TopologyManagerPolicyAlphaOptions`/`BetaOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionGates {
    pub alpha: bool,
    pub beta: bool,
}

impl OptionGates {
    /// The CPU manager's gates as v1.26 defaults them: beta options on, alpha off.
    pub const CPU_MANAGER_DEFAULT: OptionGates = OptionGates {
        alpha: false,
        beta: true,
    };
    /// The topology manager's gates as v1.26 defaults them: both off.
    pub const TOPOLOGY_MANAGER_DEFAULT: OptionGates = OptionGates {
        alpha: false,
        beta: false,
    };

    /// The CPU manager's gates from the kubelet's feature gates.
    pub fn cpu_manager(gates: &crate::domain::config::feature_gates::FeatureGates) -> OptionGates {
        OptionGates {
            alpha: gates.enabled("CPUManagerPolicyAlphaOptions"),
            beta: gates.enabled("CPUManagerPolicyBetaOptions"),
        }
    }
}

/// Go's `strconv.ParseBool` error text, as upstream wraps it in "bad value for option".
fn parse_bool_option(value: &str) -> Result<bool, String> {
    crate::domain::config::flags::parse_go_bool(value).ok_or_else(|| {
        format!(
            "strconv.ParseBool: parsing {}: invalid syntax",
            crate::domain::units::go_quote(value)
        )
    })
}
