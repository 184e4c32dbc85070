//! Resources held back from pods: kube/system reserved, QoS memory reserve,
//! the enforceNodeAllocatable rules and reserved CPUs.
//!
//! Checks and messages follow the kubelet's server.go (parseResourceList,
//! getReservedCPUs), cm helpers (ParseQOSReserved) and the configuration
//! validation, so an operator sees the words the upstream kubelet would use.

use std::collections::BTreeMap;

use crate::domain::units::cpuset::{CpuSet, CpuSetError};
use crate::domain::units::quantity::{Format, Quantity, QuantityError};

/// Resource name ("cpu", "memory", "ephemeral-storage", "pid") to amount.
pub type ResourceList = BTreeMap<String, Quantity>;

/// `cpu=1,memory=1Gi` as flags write it; `none` for an empty list.
pub fn format_resource_list(list: &ResourceList) -> String {
    if list.is_empty() {
        return "none".to_string();
    }
    list.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The resources that can be reserved for system and kube daemons.
const RESERVABLE: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

const QOS_FIELD: &str = "qosReserved (--qos-reserved)";

pub const ENFORCE_PODS: &str = "pods";
pub const ENFORCE_SYSTEM_RESERVED: &str = "system-reserved";
pub const ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE: &str = "system-reserved-compressible";
pub const ENFORCE_KUBE_RESERVED: &str = "kube-reserved";
pub const ENFORCE_KUBE_RESERVED_COMPRESSIBLE: &str = "kube-reserved-compressible";
pub const ENFORCE_NONE: &str = "none";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservedError {
    #[error("{field}: cannot reserve {resource:?} resource")]
    UnsupportedResource { field: String, resource: String },
    #[error("{field}: failed to parse quantity {value:?} for {resource:?} resource: {source}")]
    InvalidQuantity {
        field: String,
        resource: String,
        value: String,
        source: QuantityError,
    },
    #[error("{field}: resource quantity for {resource:?} cannot be negative: {value}")]
    NegativeQuantity {
        field: String,
        resource: String,
        value: String,
    },
    #[error("{flag}: invalid value {text:?}: malformed pair {pair:?}, expect string=string")]
    MalformedPair {
        flag: String,
        text: String,
        pair: String,
    },
    #[error("{QOS_FIELD}: cannot reserve {resource:?} resource")]
    QosUnsupportedResource { resource: String },
    #[error("{QOS_FIELD} {resource:?}: percentage expected, got '{value}'")]
    QosPercentageExpected { resource: String, value: String },
    #[error("{QOS_FIELD} {resource:?}: invalid number in percentage '{value}'")]
    QosInvalidNumber { resource: String, value: String },
    #[error("{QOS_FIELD} {resource:?}: percentage must be between 0 and 100, got '{value}'")]
    QosOutOfRange { resource: String, value: String },
    #[error("invalid configuration: both {full:?} and {compressible:?} cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)")]
    EnforcementConflict {
        full: &'static str,
        compressible: &'static str,
    },
    #[error("invalid configuration: duplicated enforcements {value:?} in enforceNodeAllocatable (--enforce-node-allocatable)")]
    DuplicatedEnforcement { value: String },
    #[error("invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\" or \"system-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)")]
    SystemReservedCgroupRequired,
    #[error("invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when \"kube-reserved\" or \"kube-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)")]
    KubeReservedCgroupRequired,
    #[error("invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when \"none\" is specified")]
    NoneWithOthers,
    #[error("invalid configuration: option {value:?} specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \"pods\", \"system-reserved\", \"system-reserved-compressible\", \"kube-reserved\", \"kube-reserved-compressible\" or \"none\"")]
    InvalidEnforcement { value: String },
    #[error("invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)")]
    ReservedCpusWithCgroups,
    #[error("invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) {value}, error: {source}")]
    InvalidReservedCpus { value: String, source: CpuSetError },
    #[error("reserved-cpus: {reserved} is not a subset of online-cpus: {online}")]
    ReservedCpusNotOnline { reserved: String, online: String },
}

/// `kubeReserved` / `systemReserved`: every entry is checked and every
/// problem returned. `field` names the setting in the messages, e.g.
/// "kubeReserved (--kube-reserved)".
pub fn parse_reserved(
    field: &str,
    map: &BTreeMap<String, String>,
) -> Result<ResourceList, Vec<ReservedError>> {
    let mut out = ResourceList::new();
    let mut errors = Vec::new();
    for (resource, value) in map {
        if !RESERVABLE.contains(&resource.as_str()) {
            errors.push(ReservedError::UnsupportedResource {
                field: field.to_string(),
                resource: resource.clone(),
            });
            continue;
        }
        match Quantity::parse(value) {
            Ok(q) if q.is_negative() => errors.push(ReservedError::NegativeQuantity {
                field: field.to_string(),
                resource: resource.clone(),
                value: value.clone(),
            }),
            Ok(q) => {
                out.insert(resource.clone(), q);
            }
            Err(source) => errors.push(ReservedError::InvalidQuantity {
                field: field.to_string(),
                resource: resource.clone(),
                value: value.clone(),
                source,
            }),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Flag syntax "cpu=500m,memory=1Gi", split like upstream's map flags (empty
/// items skipped, keys and values trimmed, first '=' splits).
pub fn parse_kv_map(flag: &str, s: &str) -> Result<BTreeMap<String, String>, ReservedError> {
    let mut out = BTreeMap::new();
    for item in s.split(',') {
        if item.is_empty() {
            continue;
        }
        let Some((k, v)) = item.split_once('=') else {
            return Err(ReservedError::MalformedPair {
                flag: flag.to_string(),
                text: s.to_string(),
                pair: item.to_string(),
            });
        };
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// `qosReserved`: only memory, as a whole percentage 0..=100.
pub fn parse_qos_reserved(
    map: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, i64>, ReservedError> {
    let mut out = BTreeMap::new();
    for (resource, value) in map {
        if resource != "memory" {
            return Err(ReservedError::QosUnsupportedResource {
                resource: resource.clone(),
            });
        }
        let Some(number) = value.strip_suffix('%') else {
            return Err(ReservedError::QosPercentageExpected {
                resource: resource.clone(),
                value: value.clone(),
            });
        };
        // Upstream trims every trailing '%' before the integer parse.
        let number = number.trim_end_matches('%');
        let pct: i64 = number
            .parse()
            .map_err(|_| ReservedError::QosInvalidNumber {
                resource: resource.clone(),
                value: value.clone(),
            })?;
        if !(0..=100).contains(&pct) {
            return Err(ReservedError::QosOutOfRange {
                resource: resource.clone(),
                value: value.clone(),
            });
        }
        out.insert(resource.clone(), pct);
    }
    Ok(out)
}

/// The enforceNodeAllocatable rules of the kubelet configuration validation;
/// every problem is returned.
pub fn validate_enforce_node_allocatable(
    values: &[String],
    system_reserved_cgroup: &str,
    kube_reserved_cgroup: &str,
) -> Vec<ReservedError> {
    let mut errors = Vec::new();
    let has = |k: &str| values.iter().any(|v| v == k);
    // Full and CPU-only enforcement of the same cgroup would fight each other.
    for (full, compressible) in [
        (
            ENFORCE_SYSTEM_RESERVED,
            ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE,
        ),
        (ENFORCE_KUBE_RESERVED, ENFORCE_KUBE_RESERVED_COMPRESSIBLE),
    ] {
        if has(full) && has(compressible) {
            errors.push(ReservedError::EnforcementConflict { full, compressible });
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for v in values {
        if seen.contains(&v.as_str()) {
            errors.push(ReservedError::DuplicatedEnforcement { value: v.clone() });
            continue;
        }
        seen.push(v);
        match v.as_str() {
            ENFORCE_PODS => {}
            ENFORCE_SYSTEM_RESERVED | ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE => {
                if system_reserved_cgroup.is_empty() {
                    errors.push(ReservedError::SystemReservedCgroupRequired);
                }
            }
            ENFORCE_KUBE_RESERVED | ENFORCE_KUBE_RESERVED_COMPRESSIBLE => {
                if kube_reserved_cgroup.is_empty() {
                    errors.push(ReservedError::KubeReservedCgroupRequired);
                }
            }
            ENFORCE_NONE => {
                if values.len() > 1 {
                    errors.push(ReservedError::NoneWithOthers);
                }
            }
            _ => errors.push(ReservedError::InvalidEnforcement { value: v.clone() }),
        }
    }
    errors
}

/// `reservedSystemCPUs` / `--reserved-cpus` as a CPU list; "" is no CPUs.
pub fn parse_reserved_cpus(value: &str) -> Result<CpuSet, ReservedError> {
    CpuSet::parse(value).map_err(|source| ReservedError::InvalidReservedCpus {
        value: value.to_string(),
        source,
    })
}

/// Reserved CPUs must exist on this machine.
pub fn check_reserved_cpus(reserved: &CpuSet, online: &CpuSet) -> Result<(), ReservedError> {
    if reserved.is_subset_of(online) {
        Ok(())
    } else {
        Err(ReservedError::ReservedCpusNotOnline {
            reserved: reserved.to_string(),
            online: online.to_string(),
        })
    }
}

/// Reserved CPUs replace the cgroup-based cpu reservation, so the two cannot
/// be combined.
pub fn validate_reserved_cpus_cgroups(
    value: &str,
    system_reserved_cgroup: &str,
    kube_reserved_cgroup: &str,
) -> Option<ReservedError> {
    (!value.is_empty() && (!system_reserved_cgroup.is_empty() || !kube_reserved_cgroup.is_empty()))
        .then_some(ReservedError::ReservedCpusWithCgroups)
}

/// With reserved CPUs, the whole cpu reservation is those CPUs: system
/// reserved cpu becomes their count and kube reserved cpu is dropped, as the
/// upstream kubelet rewrites them. Returns (system, kube).
pub fn apply_reserved_cpus(
    reserved: &CpuSet,
    system: &ResourceList,
    kube: &ResourceList,
) -> (ResourceList, ResourceList) {
    let mut system = system.clone();
    let mut kube = kube.clone();
    if !reserved.is_empty() {
        // A CPU count always fits in i64; saturate rather than panic.
        let count = i64::try_from(reserved.len()).unwrap_or(i64::MAX);
        system.insert("cpu".to_string(), Quantity::new(count, Format::DecimalSI));
        kube.remove("cpu");
    }
    (system, kube)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::domain::test_support::map;

    fn rl(pairs: &[(&str, &str)]) -> ResourceList {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity::parse(v).unwrap()))
            .collect()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn msgs(errs: &[ReservedError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    const KUBE: &str = "kubeReserved (--kube-reserved)";

    #[test]
    fn reserved_resource_lists() {
        let got = parse_reserved(
            KUBE,
            &map(&[
                ("cpu", "500m"),
                ("memory", "1Gi"),
                ("ephemeral-storage", "10Gi"),
                ("pid", "1000"),
            ]),
        )
        .unwrap();
        assert_eq!(
            got,
            rl(&[
                ("cpu", "500m"),
                ("memory", "1Gi"),
                ("ephemeral-storage", "10Gi"),
                ("pid", "1000"),
            ])
        );
        assert!(parse_reserved(KUBE, &map(&[])).unwrap().is_empty());

        let errs = parse_reserved(
            KUBE,
            &map(&[("cpu", "-1"), ("memory", "lots"), ("nvidia.com/gpu", "1")]),
        )
        .unwrap_err();
        assert_eq!(
            msgs(&errs),
            vec![
                "kubeReserved (--kube-reserved): resource quantity for \"cpu\" cannot be negative: -1".to_string(),
                "kubeReserved (--kube-reserved): failed to parse quantity \"lots\" for \"memory\" resource: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".to_string(),
                "kubeReserved (--kube-reserved): cannot reserve \"nvidia.com/gpu\" resource".to_string(),
            ]
        );
    }

    #[test]
    fn kv_flag_syntax() {
        assert_eq!(
            parse_kv_map("--kube-reserved", "cpu=500m, memory=1Gi,").unwrap(),
            map(&[("cpu", "500m"), ("memory", "1Gi")])
        );
        assert_eq!(
            parse_kv_map("--system-reserved", "cpu").unwrap_err().to_string(),
            "--system-reserved: invalid value \"cpu\": malformed pair \"cpu\", expect string=string"
        );
    }

    #[test]
    fn qos_reserved() {
        assert_eq!(
            parse_qos_reserved(&map(&[("memory", "50%")])).unwrap(),
            [("memory".to_string(), 50)].into_iter().collect()
        );
        assert_eq!(
            parse_qos_reserved(&map(&[("memory", "0%")])).unwrap()["memory"],
            0
        );
        assert_eq!(
            parse_qos_reserved(&map(&[("memory", "100%")])).unwrap()["memory"],
            100
        );
        let cases = [
            (
                ("cpu", "50%"),
                "qosReserved (--qos-reserved): cannot reserve \"cpu\" resource",
            ),
            (
                ("memory", "50"),
                "qosReserved (--qos-reserved) \"memory\": percentage expected, got '50'",
            ),
            (
                ("memory", "half%"),
                "qosReserved (--qos-reserved) \"memory\": invalid number in percentage 'half%'",
            ),
            (
                ("memory", "12.5%"),
                "qosReserved (--qos-reserved) \"memory\": invalid number in percentage '12.5%'",
            ),
            (
                ("memory", "150%"),
                "qosReserved (--qos-reserved) \"memory\": percentage must be between 0 and 100, got '150%'",
            ),
            (
                ("memory", "-1%"),
                "qosReserved (--qos-reserved) \"memory\": percentage must be between 0 and 100, got '-1%'",
            ),
        ];
        for ((k, v), want) in cases {
            assert_eq!(
                parse_qos_reserved(&map(&[(k, v)])).unwrap_err().to_string(),
                want
            );
        }
    }

    /// Ported from upstream TestValidateKubeletConfiguration's
    /// enforceNodeAllocatable cases.
    #[test]
    fn enforce_node_allocatable() {
        let ok: &[&[&str]] = &[
            &["pods"],
            &[],
            &["none"],
            &["pods", "system-reserved", "kube-reserved"],
            &[
                "pods",
                "system-reserved-compressible",
                "kube-reserved-compressible",
            ],
        ];
        for v in ok {
            assert!(
                validate_enforce_node_allocatable(&strings(v), "/system.slice", "/kube.slice")
                    .is_empty(),
                "{v:?}"
            );
        }
        let bad: &[(&[&str], &str, &str, &[&str])] = &[
            (
                &["system-reserved"],
                "",
                "/kube.slice",
                &["invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\" or \"system-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)"],
            ),
            (
                &["kube-reserved-compressible"],
                "/system.slice",
                "",
                &["invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when \"kube-reserved\" or \"kube-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)"],
            ),
            (
                &["none", "kube-reserved"],
                "/system.slice",
                "/kube.slice",
                &["invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when \"none\" is specified"],
            ),
            (
                &["invalid-enforce-node-allocatable"],
                "",
                "",
                &["invalid configuration: option \"invalid-enforce-node-allocatable\" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \"pods\", \"system-reserved\", \"system-reserved-compressible\", \"kube-reserved\", \"kube-reserved-compressible\" or \"none\""],
            ),
            (
                &["pods", "pods"],
                "",
                "",
                &["invalid configuration: duplicated enforcements \"pods\" in enforceNodeAllocatable (--enforce-node-allocatable)"],
            ),
            (
                &["system-reserved", "system-reserved-compressible"],
                "/system.slice",
                "",
                &["invalid configuration: both \"system-reserved\" and \"system-reserved-compressible\" cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)"],
            ),
            (
                &["kube-reserved-compressible", "kube-reserved"],
                "",
                "/kube.slice",
                &["invalid configuration: both \"kube-reserved\" and \"kube-reserved-compressible\" cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)"],
            ),
        ];
        for (values, sys, kube, want) in bad {
            let got = msgs(&validate_enforce_node_allocatable(
                &strings(values),
                sys,
                kube,
            ));
            assert_eq!(got, *want, "{values:?}");
        }
    }

    /// A 2-CPU machine: online CPUs "0-1".
    #[test]
    fn reserved_cpus_on_two_cpus() {
        let online = CpuSet::parse("0-1").unwrap();

        let too_many = parse_reserved_cpus("0-99").unwrap();
        assert_eq!(
            check_reserved_cpus(&too_many, &online)
                .unwrap_err()
                .to_string(),
            "reserved-cpus: 0-99 is not a subset of online-cpus: 0-1"
        );

        let err = parse_reserved_cpus("abc").unwrap_err().to_string();
        assert!(
            err.starts_with(
                "invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) abc, error: "
            ),
            "{err}"
        );

        let one = parse_reserved_cpus("1").unwrap();
        check_reserved_cpus(&one, &online).unwrap();
        let (system, kube) = apply_reserved_cpus(
            &one,
            &rl(&[("cpu", "500m"), ("memory", "1Gi")]),
            &rl(&[("cpu", "200m"), ("memory", "512Mi")]),
        );
        assert_eq!(system, rl(&[("cpu", "1"), ("memory", "1Gi")]));
        assert_eq!(system["cpu"].to_string(), "1");
        assert_eq!(kube, rl(&[("memory", "512Mi")]));

        // No reserved CPUs leaves both lists alone.
        let none = parse_reserved_cpus("").unwrap();
        assert!(none.is_empty());
        check_reserved_cpus(&none, &online).unwrap();
        let (system, kube) =
            apply_reserved_cpus(&none, &rl(&[("cpu", "500m")]), &rl(&[("cpu", "1")]));
        assert_eq!(system, rl(&[("cpu", "500m")]));
        assert_eq!(kube, rl(&[("cpu", "1")]));
    }

    /// Ported from upstream validation cases for reservedSystemCPUs with the
    /// reserved cgroups.
    #[test]
    fn reserved_cpus_and_cgroups() {
        let msg = "invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)";
        assert_eq!(
            validate_reserved_cpus_cgroups("0-3", "/system.slice", "")
                .unwrap()
                .to_string(),
            msg
        );
        assert_eq!(
            validate_reserved_cpus_cgroups("0-3", "", "/kube.slice")
                .unwrap()
                .to_string(),
            msg
        );
        assert!(validate_reserved_cpus_cgroups("0-3", "", "").is_none());
        assert!(validate_reserved_cpus_cgroups("", "/system.slice", "/kube.slice").is_none());
    }
}
