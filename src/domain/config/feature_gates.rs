//! Feature gates the kubelet knows, with their defaults, and the gates in force.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
    Ga,
    Deprecated,
}

/// Kubelet-relevant gates of recent Kubernetes releases: name, default, stage. A gate
/// at GA is locked to true, as upstream locks it.
pub const KNOWN_GATES: &[(&str, bool, Stage)] = &[
    ("AllAlpha", false, Stage::Alpha),
    ("AllBeta", false, Stage::Beta),
    ("CPUManagerPolicyAlphaOptions", false, Stage::Alpha),
    ("CPUManagerPolicyBetaOptions", true, Stage::Beta),
    ("CPUManagerPolicyOptions", true, Stage::Beta),
    ("CustomCPUCFSQuotaPeriod", false, Stage::Alpha),
    ("DisableCPUQuotaWithExclusiveCPUs", true, Stage::Beta),
    ("EventedPLEG", false, Stage::Alpha),
    ("GracefulNodeShutdown", true, Stage::Beta),
    ("GracefulNodeShutdownBasedOnPodPriority", true, Stage::Beta),
    ("ImageMaximumGCAge", true, Stage::Beta),
    ("InPlacePodVerticalScaling", true, Stage::Beta),
    ("KubeletCgroupDriverFromCRI", true, Stage::Ga),
    ("KubeletCrashLoopBackOffMax", false, Stage::Alpha),
    ("KubeletEnsureSecretPulledImages", false, Stage::Alpha),
    ("KubeletInUserNamespace", false, Stage::Alpha),
    ("KubeletPodResourcesDynamicResources", false, Stage::Alpha),
    ("KubeletPodResourcesGet", false, Stage::Alpha),
    ("KubeletSeparateDiskGC", true, Stage::Beta),
    ("KubeletTracing", true, Stage::Beta),
    ("MemoryManager", true, Stage::Beta),
    ("MemoryQoS", false, Stage::Alpha),
    ("NodeLogQuery", false, Stage::Beta),
    ("NodeSwap", true, Stage::Beta),
    ("PodAndContainerStatsFromCRI", false, Stage::Alpha),
    ("PodLevelResources", false, Stage::Alpha),
    ("ProcMountType", true, Stage::Beta),
    ("RecursiveReadOnlyMounts", true, Stage::Beta),
    ("ResourceHealthStatus", false, Stage::Alpha),
    ("RotateKubeletServerCertificate", true, Stage::Beta),
    ("SidecarContainers", true, Stage::Ga),
    ("SupplementalGroupsPolicy", true, Stage::Beta),
    ("UserNamespacesSupport", true, Stage::Beta),
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    #[error("unrecognized feature gate: {0}")]
    Unrecognized(String),
    #[error("cannot set feature gate {name} to {value}, feature is locked to {locked}")]
    Locked {
        name: String,
        value: bool,
        locked: bool,
    },
}

/// The gates in force: defaults overlaid with the given ones.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeatureGates {
    enabled: BTreeMap<&'static str, bool>,
}

impl FeatureGates {
    /// Every problem with `given` is reported, not only the first.
    pub fn from_map(given: &BTreeMap<String, bool>) -> Result<FeatureGates, Vec<FeatureGateError>> {
        let mut enabled: BTreeMap<&'static str, bool> = KNOWN_GATES
            .iter()
            .map(|(name, default, _)| (*name, *default))
            .collect();
        let mut problems = Vec::new();
        for (name, &value) in given {
            match KNOWN_GATES.iter().find(|(known, _, _)| known == name) {
                None => problems.push(FeatureGateError::Unrecognized(name.clone())),
                Some((known, default, Stage::Ga)) if value != *default => {
                    problems.push(FeatureGateError::Locked {
                        name: (*known).to_string(),
                        value,
                        locked: *default,
                    })
                }
                Some((known, _, _)) => {
                    enabled.insert(known, value);
                }
            }
        }
        let all_alpha = enabled.get("AllAlpha").copied().unwrap_or(false);
        let all_beta = enabled.get("AllBeta").copied().unwrap_or(false);
        for (name, _, stage) in KNOWN_GATES {
            let explicit = given.contains_key(*name);
            let bulk = match stage {
                Stage::Alpha => all_alpha,
                Stage::Beta => all_beta,
                _ => false,
            };
            if bulk && !explicit {
                enabled.insert(name, true);
            }
        }
        if problems.is_empty() {
            Ok(FeatureGates { enabled })
        } else {
            Err(problems)
        }
    }

    pub fn enabled(&self, name: &str) -> bool {
        self.enabled.get(name).copied().unwrap_or(false)
    }

    /// Gates whose value differs from their default, for the start-up log.
    pub fn changed(&self) -> Vec<(&'static str, bool)> {
        KNOWN_GATES
            .iter()
            .filter_map(|(name, default, _)| {
                let now = self.enabled(name);
                (now != *default).then_some((*name, now))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(pairs: &[(&str, bool)]) -> BTreeMap<String, bool> {
        pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
    }

    #[test]
    fn defaults_apply_and_given_gates_override() {
        let gates =
            FeatureGates::from_map(&given(&[("CustomCPUCFSQuotaPeriod", true)])).expect("valid");
        assert!(gates.enabled("CustomCPUCFSQuotaPeriod"));
        assert!(gates.enabled("GracefulNodeShutdown"));
        assert!(!gates.enabled("MemoryQoS"));
        assert_eq!(gates.changed(), [("CustomCPUCFSQuotaPeriod", true)]);
    }

    #[test]
    fn unknown_and_locked_gates_are_all_reported() {
        let problems = FeatureGates::from_map(&given(&[
            ("NoSuchGate", true),
            ("SidecarContainers", false),
        ]))
        .expect_err("invalid");
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "unrecognized feature gate: NoSuchGate",
                "cannot set feature gate SidecarContainers to false, feature is locked to true"
            ]
        );
    }

    #[test]
    fn all_alpha_turns_on_alpha_gates_not_explicitly_set() {
        let gates = FeatureGates::from_map(&given(&[("AllAlpha", true), ("MemoryQoS", false)]))
            .expect("valid");
        assert!(gates.enabled("CustomCPUCFSQuotaPeriod"));
        assert!(!gates.enabled("MemoryQoS"));
    }
}
