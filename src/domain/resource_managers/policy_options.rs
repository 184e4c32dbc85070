//! The static policy's `cpuManagerPolicyOptions` (upstream v1.26 `policy_options.go`):
//! which are known, which feature gate each needs, and which fit the machine and the
//! topology manager's policy.

use std::collections::BTreeMap;

use super::topology::CpuTopology;
use super::topology_manager::policy::POLICY_SINGLE_NUMA_NODE;
use super::{parse_bool_option, OptionGates};
use crate::domain::units::go_quote;

pub const FULL_PCPUS_ONLY_OPTION: &str = "full-pcpus-only";
pub const DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION: &str = "distribute-cpus-across-numa";
pub const ALIGN_BY_SOCKET_OPTION: &str = "align-by-socket";

const ALPHA_OPTIONS: [&str; 2] = [DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION, ALIGN_BY_SOCKET_OPTION];
const BETA_OPTIONS: [&str; 1] = [FULL_PCPUS_ONLY_OPTION];

/// Why the options were refused, in upstream's words (its "Topolgy" typo kept: operators
/// search for the message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyOptionError {
    #[error("unknown CPU Manager Policy option: {}", go_quote(.0))]
    Unknown(String),
    #[error("CPU Manager Policy Alpha-level Options not enabled, but option {} provided", go_quote(.0))]
    AlphaDisabled(String),
    #[error("CPU Manager Policy Beta-level Options not enabled, but option {} provided", go_quote(.0))]
    BetaDisabled(String),
    #[error("bad value for option {}: {reason}", go_quote(.option))]
    BadValue { option: String, reason: String },
    #[error("Topolgy manager {POLICY_SINGLE_NUMA_NODE} policy is incompatible with CPUManager {ALIGN_BY_SOCKET_OPTION} policy option")]
    AlignBySocketWithSingleNumaNode,
    #[error("Align by socket is not compatible with hardware where number of sockets are more than number of NUMA")]
    AlignBySocketHardware,
}

/// Whether an option is known and its level allowed by the gates (upstream's
/// `CheckPolicyOptionAvailable`).
pub fn check_policy_option_available(
    option: &str,
    gates: OptionGates,
) -> Result<(), PolicyOptionError> {
    let alpha = ALPHA_OPTIONS.contains(&option);
    let beta = BETA_OPTIONS.contains(&option);
    if !alpha && !beta {
        return Err(PolicyOptionError::Unknown(option.to_string()));
    }
    if alpha && !gates.alpha {
        return Err(PolicyOptionError::AlphaDisabled(option.to_string()));
    }
    if beta && !gates.beta {
        return Err(PolicyOptionError::BetaDisabled(option.to_string()));
    }
    Ok(())
}

/// The parsed options (upstream's `StaticPolicyOptions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaticPolicyOptions {
    /// Exclusive CPUs only in whole physical cores: a request that is no multiple of the
    /// threads per core is refused (`SMTAlignmentError`).
    pub full_physical_cpus_only: bool,
    /// Spread requests that need more than one NUMA node evenly over them.
    pub distribute_cpus_across_numa: bool,
    /// Align to sockets rather than NUMA nodes.
    pub align_by_socket: bool,
}

impl StaticPolicyOptions {
    /// Parses `cpuManagerPolicyOptions` (upstream's `NewStaticPolicyOptions`).
    pub fn new(
        options: &BTreeMap<String, String>,
        gates: OptionGates,
    ) -> Result<StaticPolicyOptions, PolicyOptionError> {
        let mut opts = StaticPolicyOptions::default();
        for (name, value) in options {
            check_policy_option_available(name, gates)?;
            let parsed =
                parse_bool_option(value).map_err(|reason| PolicyOptionError::BadValue {
                    option: name.clone(),
                    reason,
                })?;
            match name.as_str() {
                FULL_PCPUS_ONLY_OPTION => opts.full_physical_cpus_only = parsed,
                DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION => opts.distribute_cpus_across_numa = parsed,
                ALIGN_BY_SOCKET_OPTION => opts.align_by_socket = parsed,
                other => return Err(PolicyOptionError::Unknown(other.to_string())),
            }
        }
        Ok(opts)
    }
}

/// Whether the options fit the machine and the topology manager's policy (upstream's
/// `ValidateStaticPolicyOptions`).
pub fn validate_static_policy_options(
    opts: &StaticPolicyOptions,
    topology: &CpuTopology,
    topology_manager_policy: &str,
) -> Result<(), PolicyOptionError> {
    if opts.align_by_socket {
        if topology_manager_policy == POLICY_SINGLE_NUMA_NODE {
            return Err(PolicyOptionError::AlignBySocketWithSingleNumaNode);
        }
        if topology.num_sockets > topology.num_numa_nodes {
            return Err(PolicyOptionError::AlignBySocketHardware);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::resource_managers::fixtures::*;

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    // TestPolicyDefaultsAvailable and TestPolicyOptionsAvailable.
    #[test]
    fn option_availability_follows_the_gates() {
        let defaults = OptionGates::CPU_MANAGER_DEFAULT;
        assert!(check_policy_option_available("this-option-does-not-exist", defaults).is_err());
        assert!(check_policy_option_available(FULL_PCPUS_ONLY_OPTION, defaults).is_ok());
        let beta_only = |beta| OptionGates { alpha: false, beta };
        let alpha_only = OptionGates {
            alpha: true,
            beta: false,
        };
        let cases = [
            ("this-option-does-not-exist", beta_only(false), false),
            ("this-option-does-not-exist", beta_only(true), false),
            (FULL_PCPUS_ONLY_OPTION, beta_only(true), true),
            (FULL_PCPUS_ONLY_OPTION, beta_only(false), false),
            (ALIGN_BY_SOCKET_OPTION, alpha_only, true),
            (ALIGN_BY_SOCKET_OPTION, beta_only(true), false),
        ];
        for (option, gates, available) in cases {
            assert_eq!(
                check_policy_option_available(option, gates).is_ok(),
                available,
                "{option} {gates:?}"
            );
        }
    }

    #[test]
    fn refusals_use_upstream_words() {
        let gates = OptionGates::CPU_MANAGER_DEFAULT;
        let err = |pairs: &[(&str, &str)], gates| {
            StaticPolicyOptions::new(&opts(pairs), gates).map_err(|e| e.to_string())
        };
        assert_eq!(
            err(&[("bogus", "true")], gates),
            Err(r#"unknown CPU Manager Policy option: "bogus""#.into())
        );
        assert_eq!(
            err(&[(ALIGN_BY_SOCKET_OPTION, "true")], gates),
            Err(r#"CPU Manager Policy Alpha-level Options not enabled, but option "align-by-socket" provided"#.into())
        );
        assert_eq!(
            err(&[(FULL_PCPUS_ONLY_OPTION, "true")], OptionGates { alpha: false, beta: false }),
            Err(r#"CPU Manager Policy Beta-level Options not enabled, but option "full-pcpus-only" provided"#.into())
        );
        assert_eq!(
            err(&[(FULL_PCPUS_ONLY_OPTION, "yes")], gates),
            Err(r#"bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": invalid syntax"#.into())
        );
        assert_eq!(
            StaticPolicyOptions::new(&opts(&[(FULL_PCPUS_ONLY_OPTION, "True")]), gates),
            Ok(StaticPolicyOptions {
                full_physical_cpus_only: true,
                ..Default::default()
            })
        );
    }

    // TestValidateStaticPolicyOptions.
    #[test]
    fn validate_static_policy_options_cases() {
        let alpha = OptionGates {
            alpha: true,
            beta: true,
        };
        let cases = [
            (
                "Align by socket not enabled",
                FULL_PCPUS_ONLY_OPTION,
                topo_dual_socket_multi_numa_per_socket_ht(),
                "single-numa-node",
                false,
            ),
            (
                "Align by socket enabled with topology manager single numa node",
                ALIGN_BY_SOCKET_OPTION,
                topo_dual_socket_multi_numa_per_socket_ht(),
                "single-numa-node",
                true,
            ),
            (
                "Align by socket enabled with num_sockets > num_numa",
                ALIGN_BY_SOCKET_OPTION,
                fake_topo_multi_socket_dual_socket_per_numa_ht(),
                "none",
                true,
            ),
            (
                "Align by socket enabled: with topology manager None policy",
                ALIGN_BY_SOCKET_OPTION,
                topo_dual_socket_multi_numa_per_socket_ht(),
                "none",
                false,
            ),
            (
                "Align by socket enabled: with topology manager best-effort policy",
                ALIGN_BY_SOCKET_OPTION,
                topo_dual_socket_multi_numa_per_socket_ht(),
                "best-effort",
                false,
            ),
            (
                "Align by socket enabled: with topology manager restricted policy",
                ALIGN_BY_SOCKET_OPTION,
                topo_dual_socket_multi_numa_per_socket_ht(),
                "restricted",
                false,
            ),
        ];
        for (description, option, topology, tm_policy, expect_err) in cases {
            let parsed =
                StaticPolicyOptions::new(&opts(&[(option, "true")]), alpha).expect("known option");
            let result = validate_static_policy_options(&parsed, topology, tm_policy);
            assert_eq!(result.is_err(), expect_err, "{description}");
        }
        assert_eq!(
            PolicyOptionError::AlignBySocketWithSingleNumaNode.to_string(),
            "Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option"
        );
    }
}
