//! What a cgroup driver writes for a [`ResourceConfig`]: the cgroupfs files with their
//! values, or the systemd unit properties. Kept here, pure, so the drivers and the
//! dry-run plan cannot disagree on them. The systemd names and conversions follow
//! runc's systemd driver (`libcontainer/cgroups/systemd`), which upstream's kubelet uses.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::cfs::DEFAULT_QUOTA_PERIOD_US;
use super::{shares_to_weight, CgroupName, ResourceConfig, WeightCurve};

/// Which cgroup version the node runs; it decides file and property names. Decided
/// once per driver: once a systemd unit has a v2 name (`CPUWeight`, `MemoryMax`),
/// systemd silently ignores the v1 one (`CPUShares`, `MemoryLimit`) on it, so the two
/// are never mixed. The default (v2) is what a snapshot without the field means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    #[default]
    V2,
}

impl CgroupVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V2 => "v2",
        }
    }
}

/// A negative limit is "none": v1 memory and CFS quota take -1 (`max` is EINVAL
/// there), pids and every v2 file take `max`.
fn limit(value: i64, unlimited: &str) -> String {
    if value < 0 {
        unlimited.to_owned()
    } else {
        value.to_string()
    }
}

/// The files the cgroupfs driver writes for `r` (file name, value), in the order it
/// writes them. On v1 the period comes before the quota so the quota is checked
/// against the new period; each file lives in the hierarchy named by its prefix
/// (`cpu.`, `memory.`, `pids.`). Settings left `None` are not written.
pub fn cgroupfs_files(
    r: &ResourceConfig,
    version: CgroupVersion,
    curve: WeightCurve,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match version {
        CgroupVersion::V1 => {
            if let Some(shares) = r.cpu_shares {
                out.push(("cpu.shares", shares.to_string()));
            }
            if let Some(period) = r.cpu_period {
                out.push(("cpu.cfs_period_us", period.to_string()));
            }
            if let Some(quota) = r.cpu_quota {
                out.push(("cpu.cfs_quota_us", limit(quota, "-1")));
            }
            if let Some(memory) = r.memory_limit {
                out.push(("memory.limit_in_bytes", limit(memory, "-1")));
            }
        }
        CgroupVersion::V2 => {
            // 0 is "unset" (0 shares): leave the kernel's default.
            if let Some(weight) = r
                .cpu_shares
                .map(|s| shares_to_weight(s, curve))
                .filter(|w| *w != 0)
            {
                out.push(("cpu.weight", weight.to_string()));
            }
            if r.cpu_quota.is_some() || r.cpu_period.is_some() {
                // As runc: `<quota|max>` plus ` <period>` when one is given.
                let mut max = match r.cpu_quota {
                    Some(q) if q > 0 => q.to_string(),
                    _ => "max".to_owned(),
                };
                if let Some(period) = r.cpu_period {
                    max.push_str(&format!(" {period}"));
                }
                out.push(("cpu.max", max));
            }
            if let Some(memory) = r.memory_limit {
                out.push(("memory.max", limit(memory, "max")));
            }
        }
    }
    if let Some(pids) = r.pids_limit {
        out.push(("pids.max", limit(pids, "max")));
    }
    out
}

/// systemd's `USEC_INFINITY` / `CGROUP_LIMIT_MAX`: "no limit" for every u64 property below.
pub const INFINITY: u64 = u64::MAX;

/// One property value, as systemd expects its D-Bus type (numbers are always `t`: systemd
/// rejects `i`/`u` for them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropValue {
    Bool(bool),
    U64(u64),
    Str(String),
    StrList(Vec<String>),
}

pub type Property = (&'static str, PropValue);

/// JSON the way `busctl --json` shows the D-Bus value: booleans, numbers, strings,
/// string arrays.
impl Serialize for PropValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Bool(b) => s.serialize_bool(*b),
            Self::U64(n) => s.serialize_u64(*n),
            Self::Str(v) => s.serialize_str(v),
            Self::StrList(v) => v.serialize(s),
        }
    }
}

/// As `systemctl show` prints it: `infinity` for [`INFINITY`], lists space-separated.
impl fmt::Display for PropValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bool(true) => f.write_str("yes"),
            Self::Bool(false) => f.write_str("no"),
            Self::U64(INFINITY) => f.write_str("infinity"),
            Self::U64(n) => write!(f, "{n}"),
            Self::Str(v) => f.write_str(v),
            Self::StrList(v) => f.write_str(&v.join(" ")),
        }
    }
}

/// `CPUQuotaPerSecUSec` for a CFS quota: the quota as microseconds per second of wall time,
/// rounded up to 10 ms because systemd keeps it as a whole CPU percentage (runc rounds the
/// same way so the cgroup gets at least the quota asked for). A quota of zero or below
/// means no limit.
pub fn cpu_quota_per_sec_usec(quota: i64, period: Option<u64>) -> u64 {
    if quota <= 0 {
        return INFINITY;
    }
    let period = match period {
        Some(p) if p > 0 => p,
        _ => DEFAULT_QUOTA_PERIOD_US,
    };
    let per_sec = (quota as u64).saturating_mul(1_000_000) / period;
    if per_sec.is_multiple_of(10_000) {
        per_sec
    } else {
        (per_sec / 10_000 + 1) * 10_000
    }
}

/// A limit where -1 (or any negative value) means none.
fn limit_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(INFINITY)
}

/// The resource properties for `resources`; settings left `None` are not sent, so
/// systemd keeps what the unit has.
/// `curve` turns shares into v2's `CPUWeight` (systemd passes it to `cpu.weight` as is).
pub fn resource_properties(
    resources: &ResourceConfig,
    version: CgroupVersion,
    curve: WeightCurve,
) -> Vec<Property> {
    let mut props = Vec::new();
    if let Some(shares) = resources.cpu_shares.filter(|s| *s > 0) {
        props.push(match version {
            CgroupVersion::V1 => ("CPUShares", PropValue::U64(shares)),
            CgroupVersion::V2 => ("CPUWeight", PropValue::U64(shares_to_weight(shares, curve))),
        });
    }
    if let Some(period) = resources.cpu_period.filter(|p| *p > 0) {
        props.push(("CPUQuotaPeriodUSec", PropValue::U64(period)));
    }
    if let Some(quota) = resources.cpu_quota {
        props.push((
            "CPUQuotaPerSecUSec",
            PropValue::U64(cpu_quota_per_sec_usec(quota, resources.cpu_period)),
        ));
    }
    if let Some(memory) = resources.memory_limit.filter(|m| *m != 0) {
        let name = match version {
            CgroupVersion::V1 => "MemoryLimit",
            CgroupVersion::V2 => "MemoryMax",
        };
        props.push((name, PropValue::U64(limit_u64(memory))));
    }
    if let Some(pids) = resources.pids_limit.filter(|p| *p != 0) {
        props.push(("TasksMax", PropValue::U64(limit_u64(pids))));
    }
    props
}

/// Everything a new slice is started with: what it is, its parent, no default
/// dependencies (a kubelet slice must not be ordered against shutdown targets), accounting
/// for every controller the kubelet reads (without it systemd does not create the unit's
/// cgroup in that controller's hierarchy), then the resources.
pub fn slice_properties(
    name: &CgroupName,
    resources: &ResourceConfig,
    version: CgroupVersion,
    curve: WeightCurve,
) -> Vec<Property> {
    let io_accounting = match version {
        CgroupVersion::V1 => "BlockIOAccounting",
        CgroupVersion::V2 => "IOAccounting",
    };
    let mut props = vec![
        (
            "Description",
            PropValue::Str(format!("rkubelet cgroup {name}")),
        ),
        (
            "Wants",
            PropValue::StrList(vec![name.parent().to_systemd_unit()]),
        ),
        ("DefaultDependencies", PropValue::Bool(false)),
        ("CPUAccounting", PropValue::Bool(true)),
        ("MemoryAccounting", PropValue::Bool(true)),
        (io_accounting, PropValue::Bool(true)),
        ("TasksAccounting", PropValue::Bool(true)),
    ];
    props.extend(resource_properties(resources, version, curve));
    props
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every limit at -1 ("none"), nothing else set.
    fn unlimited() -> ResourceConfig {
        ResourceConfig {
            cpu_quota: Some(-1),
            memory_limit: Some(-1),
            pids_limit: Some(-1),
            ..ResourceConfig::default()
        }
    }

    fn files(r: &ResourceConfig, version: CgroupVersion, curve: WeightCurve) -> Vec<String> {
        cgroupfs_files(r, version, curve)
            .into_iter()
            .map(|(file, value)| format!("{file}={value}"))
            .collect()
    }

    #[test]
    fn cgroupfs_files_in_write_order() {
        let quadratic = WeightCurve::Quadratic;
        assert_eq!(
            files(&full(), CgroupVersion::V1, quadratic),
            [
                "cpu.shares=256",
                "cpu.cfs_period_us=100000",
                "cpu.cfs_quota_us=50000",
                "memory.limit_in_bytes=134217728",
                "pids.max=1024",
            ]
        );
        assert_eq!(
            files(&full(), CgroupVersion::V2, quadratic),
            [
                "cpu.weight=35",
                "cpu.max=50000 100000",
                "memory.max=134217728",
                "pids.max=1024",
            ]
        );
        assert_eq!(
            files(&unlimited(), CgroupVersion::V1, quadratic),
            [
                "cpu.cfs_quota_us=-1",
                "memory.limit_in_bytes=-1",
                "pids.max=max"
            ]
        );
        assert_eq!(
            files(&unlimited(), CgroupVersion::V2, quadratic),
            ["cpu.max=max", "memory.max=max", "pids.max=max"]
        );
        for version in [CgroupVersion::V1, CgroupVersion::V2] {
            assert!(files(&ResourceConfig::default(), version, quadratic).is_empty());
        }
        // Weight on the given curve; 0 shares leave the kernel's default.
        let shares = |s| ResourceConfig {
            cpu_shares: Some(s),
            ..ResourceConfig::default()
        };
        assert_eq!(
            files(&shares(256), CgroupVersion::V2, WeightCurve::Linear),
            ["cpu.weight=10"]
        );
        assert!(files(&shares(0), CgroupVersion::V2, quadratic).is_empty());
        assert_eq!(
            files(&shares(0), CgroupVersion::V1, quadratic),
            ["cpu.shares=0"]
        );
    }

    #[test]
    fn property_values_as_json_and_text() {
        let json = |v: PropValue| serde_json::to_string(&v).unwrap_or_default();
        assert_eq!(json(PropValue::Bool(false)), "false");
        assert_eq!(json(PropValue::U64(5)), "5");
        assert_eq!(json(PropValue::Str("a".into())), "\"a\"");
        assert_eq!(json(PropValue::StrList(vec!["a".into()])), "[\"a\"]");
        assert_eq!(PropValue::U64(INFINITY).to_string(), "infinity");
        assert_eq!(PropValue::Bool(true).to_string(), "yes");
        assert_eq!(
            serde_json::to_string(&CgroupVersion::V1).unwrap_or_default(),
            "\"v1\""
        );
    }

    fn pod() -> CgroupName {
        CgroupName::new(&CgroupName::root(), &["kubepods", "burstable", "pod12-34"])
            .unwrap_or_default()
    }

    fn full() -> ResourceConfig {
        ResourceConfig {
            cpu_shares: Some(256),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            memory_limit: Some(134_217_728),
            pids_limit: Some(1024),
        }
    }

    fn names(props: &[Property]) -> Vec<&'static str> {
        props.iter().map(|(n, _)| *n).collect()
    }

    #[test]
    fn quota_is_per_second_and_rounded_up_to_ten_milliseconds() {
        assert_eq!(cpu_quota_per_sec_usec(50_000, Some(100_000)), 500_000);
        assert_eq!(cpu_quota_per_sec_usec(50_000, None), 500_000);
        assert_eq!(cpu_quota_per_sec_usec(200_000, Some(100_000)), 2_000_000);
        // 1234 µs per 100 ms = 12340 µs/s → 20000 (2 %)
        assert_eq!(cpu_quota_per_sec_usec(1_234, Some(100_000)), 20_000);
        // 10 ms per 50 ms period = 200 ms/s, already whole
        assert_eq!(cpu_quota_per_sec_usec(10_000, Some(50_000)), 200_000);
        assert_eq!(cpu_quota_per_sec_usec(-1, Some(100_000)), INFINITY);
        assert_eq!(cpu_quota_per_sec_usec(0, None), INFINITY);
        assert_eq!(cpu_quota_per_sec_usec(1_000, Some(0)), 10_000);
    }

    #[test]
    fn each_version_uses_its_own_names_only() {
        for (version, shares, memory) in [
            (CgroupVersion::V1, ("CPUShares", 256), "MemoryLimit"),
            (CgroupVersion::V2, ("CPUWeight", 10), "MemoryMax"),
        ] {
            assert_eq!(
                resource_properties(&full(), version, WeightCurve::Linear),
                vec![
                    (shares.0, PropValue::U64(shares.1)),
                    ("CPUQuotaPeriodUSec", PropValue::U64(100_000)),
                    ("CPUQuotaPerSecUSec", PropValue::U64(500_000)),
                    (memory, PropValue::U64(134_217_728)),
                    ("TasksMax", PropValue::U64(1024)),
                ]
            );
        }
    }

    #[test]
    fn unset_values_are_not_sent_and_minus_one_is_infinity() {
        assert!(resource_properties(
            &ResourceConfig::default(),
            CgroupVersion::V1,
            WeightCurve::Linear
        )
        .is_empty());
        assert_eq!(
            resource_properties(&unlimited(), CgroupVersion::V2, WeightCurve::Linear),
            vec![
                ("CPUQuotaPerSecUSec", PropValue::U64(INFINITY)),
                ("MemoryMax", PropValue::U64(INFINITY)),
                ("TasksMax", PropValue::U64(INFINITY)),
            ]
        );
    }

    #[test]
    fn slice_gets_parent_no_default_deps_accounting_then_resources() {
        let v1 = slice_properties(&pod(), &full(), CgroupVersion::V1, WeightCurve::Linear);
        assert_eq!(
            v1[1],
            (
                "Wants",
                PropValue::StrList(vec!["kubepods-burstable.slice".to_owned()])
            )
        );
        assert_eq!(v1[2], ("DefaultDependencies", PropValue::Bool(false)));
        assert_eq!(
            names(&v1),
            vec![
                "Description",
                "Wants",
                "DefaultDependencies",
                "CPUAccounting",
                "MemoryAccounting",
                "BlockIOAccounting",
                "TasksAccounting",
                "CPUShares",
                "CPUQuotaPeriodUSec",
                "CPUQuotaPerSecUSec",
                "MemoryLimit",
                "TasksMax",
            ]
        );
        let v2 = names(&slice_properties(
            &pod(),
            &full(),
            CgroupVersion::V2,
            WeightCurve::Linear,
        ));
        for v1_only in ["BlockIOAccounting", "CPUShares", "MemoryLimit"] {
            assert!(!v2.contains(&v1_only), "{v1_only} on a v2 unit");
        }
        let top = CgroupName::new(&CgroupName::root(), &["kubepods"]).unwrap_or_default();
        assert_eq!(
            slice_properties(
                &top,
                &ResourceConfig::default(),
                CgroupVersion::V1,
                WeightCurve::Linear
            )[1],
            ("Wants", PropValue::StrList(vec!["-.slice".to_owned()]))
        );
    }
}
