//! Unit properties for the kubelet's slices, built as plain values so the rules can be
//! tested without a bus. The names and conversions follow runc's systemd driver
//! (`libcontainer/cgroups/systemd`), which upstream's kubelet uses.

use std::path::Path;

use crate::domain::cgroup::{CgroupName, ResourceConfig};

/// systemd's `USEC_INFINITY` / `CGROUP_LIMIT_MAX`: "no limit" for every u64 property below.
pub const INFINITY: u64 = u64::MAX;

/// cpu.cfs_period_us when none is given (the kernel's and runc's default).
pub const DEFAULT_CPU_PERIOD_US: u64 = 100_000;

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

/// Which cgroup version's property names a unit gets. Decided once per manager: once a unit
/// has a v2 name (`CPUWeight`, `MemoryMax`), systemd silently ignores the v1 one
/// (`CPUShares`, `MemoryLimit`) on it, so the two are never mixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    /// v2 when `root` (normally /sys/fs/cgroup) is itself a cgroup2 mount (it holds
    /// `cgroup.controllers`) and there is no v1 cpu hierarchy beside it; a hybrid host
    /// (v1 controllers, cgroup2 at `unified/`) is v1.
    pub fn detect(root: &Path) -> Self {
        let unified = root.join("cgroup.controllers").is_file();
        let v1_cpu =
            root.join("cpu/cpu.shares").is_file() || root.join("cpu,cpuacct/cpu.shares").is_file();
        if unified && !v1_cpu {
            Self::V2
        } else {
            Self::V1
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
        _ => DEFAULT_CPU_PERIOD_US,
    };
    let per_sec = (quota as u64).saturating_mul(1_000_000) / period;
    if per_sec.is_multiple_of(10_000) {
        per_sec
    } else {
        (per_sec / 10_000 + 1) * 10_000
    }
}

/// cpu.shares → cpu.weight, the conversion runc and the kubelet use on cgroup v2
/// ([2, 262144] onto [1, 10000]).
pub fn cpu_shares_to_weight(shares: u64) -> u64 {
    let shares = shares.clamp(2, 262_144);
    1 + ((shares - 2) * 9999) / 262_142
}

/// A limit where -1 (or any negative value) means none.
fn limit(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(INFINITY)
}

/// The resource properties for `resources`; settings left `None` are not sent, so
/// systemd keeps what the unit has.
pub fn resource_properties(resources: &ResourceConfig, version: CgroupVersion) -> Vec<Property> {
    let mut props = Vec::new();
    if let Some(shares) = resources.cpu_shares.filter(|s| *s > 0) {
        props.push(match version {
            CgroupVersion::V1 => ("CPUShares", PropValue::U64(shares)),
            CgroupVersion::V2 => ("CPUWeight", PropValue::U64(cpu_shares_to_weight(shares))),
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
        props.push((name, PropValue::U64(limit(memory))));
    }
    if let Some(pids) = resources.pids_limit.filter(|p| *p != 0) {
        props.push(("TasksMax", PropValue::U64(limit(pids))));
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
    props.extend(resource_properties(resources, version));
    props
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn shares_to_weight_matches_runc() {
        assert_eq!(cpu_shares_to_weight(2), 1);
        assert_eq!(cpu_shares_to_weight(1024), 39);
        assert_eq!(cpu_shares_to_weight(256), 10);
        assert_eq!(cpu_shares_to_weight(262_144), 10_000);
        assert_eq!(cpu_shares_to_weight(1), 1);
    }

    #[test]
    fn v1_uses_v1_names_only() {
        let props = resource_properties(&full(), CgroupVersion::V1);
        assert_eq!(
            props,
            vec![
                ("CPUShares", PropValue::U64(256)),
                ("CPUQuotaPeriodUSec", PropValue::U64(100_000)),
                ("CPUQuotaPerSecUSec", PropValue::U64(500_000)),
                ("MemoryLimit", PropValue::U64(134_217_728)),
                ("TasksMax", PropValue::U64(1024)),
            ]
        );
    }

    #[test]
    fn v2_uses_v2_names_only() {
        let props = resource_properties(&full(), CgroupVersion::V2);
        assert_eq!(
            props,
            vec![
                ("CPUWeight", PropValue::U64(10)),
                ("CPUQuotaPeriodUSec", PropValue::U64(100_000)),
                ("CPUQuotaPerSecUSec", PropValue::U64(500_000)),
                ("MemoryMax", PropValue::U64(134_217_728)),
                ("TasksMax", PropValue::U64(1024)),
            ]
        );
    }

    #[test]
    fn unset_values_are_not_sent_and_minus_one_is_infinity() {
        assert!(resource_properties(&ResourceConfig::default(), CgroupVersion::V1).is_empty());
        let unlimited = ResourceConfig {
            cpu_quota: Some(-1),
            memory_limit: Some(-1),
            pids_limit: Some(-1),
            ..ResourceConfig::default()
        };
        assert_eq!(
            resource_properties(&unlimited, CgroupVersion::V2),
            vec![
                ("CPUQuotaPerSecUSec", PropValue::U64(INFINITY)),
                ("MemoryMax", PropValue::U64(INFINITY)),
                ("TasksMax", PropValue::U64(INFINITY)),
            ]
        );
    }

    #[test]
    fn slice_gets_parent_no_default_deps_accounting_then_resources() {
        let v1 = slice_properties(&pod(), &full(), CgroupVersion::V1);
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
        let v2 = names(&slice_properties(&pod(), &full(), CgroupVersion::V2));
        for v1_only in ["BlockIOAccounting", "CPUShares", "MemoryLimit"] {
            assert!(!v2.contains(&v1_only), "{v1_only} on a v2 unit");
        }
        let top = CgroupName::new(&CgroupName::root(), &["kubepods"]).unwrap_or_default();
        assert_eq!(
            slice_properties(&top, &ResourceConfig::default(), CgroupVersion::V1)[1],
            ("Wants", PropValue::StrList(vec!["-.slice".to_owned()]))
        );
    }

    #[test]
    fn version_detection() {
        let Ok(dir) = tempfile::tempdir() else {
            panic!("tempdir")
        };
        // hybrid: v1 cpu hierarchy present
        std::fs::create_dir_all(dir.path().join("cpu")).ok();
        std::fs::write(dir.path().join("cpu/cpu.shares"), "1024").ok();
        std::fs::write(dir.path().join("cgroup.controllers"), "").ok();
        assert_eq!(CgroupVersion::detect(dir.path()), CgroupVersion::V1);
        std::fs::remove_file(dir.path().join("cpu/cpu.shares")).ok();
        assert_eq!(CgroupVersion::detect(dir.path()), CgroupVersion::V2);
        std::fs::remove_file(dir.path().join("cgroup.controllers")).ok();
        assert_eq!(CgroupVersion::detect(dir.path()), CgroupVersion::V1);
    }
}
