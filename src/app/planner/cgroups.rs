//! The cgroup tree the container manager would create or update, in the chosen
//! driver's form: cgroupfs paths with the files and values written, or systemd slice
//! units with their properties.

use serde::Serialize;

use crate::domain::cgroup::{
    kubepods_name, kubepods_resource_config, pod_cgroup_name, pod_resource_config, qos_cgroup_name,
    qos_resource_configs, shares_to_weight, CgroupDriver, CgroupName, CgroupSettings,
    ResourceConfig, WeightCurve,
};
use crate::domain::config::model::KubeletConfiguration;
use crate::domain::node::NodeSettings;
use crate::domain::pod::{Pod, QosClass};
use crate::domain::reserved::ENFORCE_PODS;

use super::{CgroupVersion, PodPlan};

/// One value written: a cgroupfs file or a systemd unit property.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupValue {
    pub key: String,
    pub value: String,
}

/// One cgroup of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupEntry {
    /// `node-allocatable`, `qos` or `pod`.
    pub role: String,
    /// Driver-neutral name (`/kubepods/burstable`).
    pub cgroup: String,
    /// The driver's name: a cgroupfs path or a systemd slice unit.
    pub name: String,
    /// The pod's uid, for pod cgroups.
    pub pod: Option<String>,
    pub values: Vec<CgroupValue>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupPlan {
    pub driver: String,
    pub cgroup_version: String,
    pub cgroup_root: String,
    pub entries: Vec<CgroupEntry>,
}

/// A negative limit is "none": v1 memory takes -1, every other file `max`.
fn limit(value: i64, unlimited: &str) -> String {
    if value < 0 {
        unlimited.to_owned()
    } else {
        value.to_string()
    }
}

fn value(key: &str, value: String) -> CgroupValue {
    CgroupValue {
        key: key.to_owned(),
        value,
    }
}

/// The files the cgroupfs driver writes for `r`, with their values, in the order it
/// writes them (the cgroupfs adapter's v1 and v2 rules, weights on its default curve).
fn cgroupfs_values(r: &ResourceConfig, version: CgroupVersion) -> Vec<CgroupValue> {
    let mut out = Vec::new();
    match version {
        CgroupVersion::V1 => {
            if let Some(shares) = r.cpu_shares {
                out.push(value("cpu.shares", shares.to_string()));
            }
            if let Some(period) = r.cpu_period {
                out.push(value("cpu.cfs_period_us", period.to_string()));
            }
            if let Some(quota) = r.cpu_quota {
                out.push(value("cpu.cfs_quota_us", limit(quota, "-1")));
            }
            if let Some(memory) = r.memory_limit {
                out.push(value("memory.limit_in_bytes", limit(memory, "-1")));
            }
            if let Some(pids) = r.pids_limit {
                out.push(value("pids.max", limit(pids, "max")));
            }
        }
        CgroupVersion::V2 => {
            if let Some(shares) = r.cpu_shares {
                let weight = shares_to_weight(shares, WeightCurve::default());
                if weight != 0 {
                    out.push(value("cpu.weight", weight.to_string()));
                }
            }
            if r.cpu_quota.is_some() || r.cpu_period.is_some() {
                let mut max = match r.cpu_quota {
                    Some(q) if q > 0 => q.to_string(),
                    _ => "max".to_owned(),
                };
                if let Some(period) = r.cpu_period {
                    max.push_str(&format!(" {period}"));
                }
                out.push(value("cpu.max", max));
            }
            if let Some(memory) = r.memory_limit {
                out.push(value("memory.max", limit(memory, "max")));
            }
            if let Some(pids) = r.pids_limit {
                out.push(value("pids.max", limit(pids, "max")));
            }
        }
    }
    out
}

fn values(driver: CgroupDriver, r: &ResourceConfig, version: CgroupVersion) -> Vec<CgroupValue> {
    match driver {
        CgroupDriver::Cgroupfs => cgroupfs_values(r, version),
        CgroupDriver::Systemd => systemd_values(r),
    }
}

/// What the systemd driver is asked to set for `r`, as the driver-neutral settings it
/// converts into unit properties. The systemd adapter's property lists are not on the
/// main line yet; they replace these once they land rather than being copied here.
fn systemd_values(r: &ResourceConfig) -> Vec<CgroupValue> {
    let mut out = Vec::new();
    if let Some(shares) = r.cpu_shares {
        out.push(value("cpuShares", shares.to_string()));
    }
    if let Some(period) = r.cpu_period {
        out.push(value("cpuPeriodUs", period.to_string()));
    }
    if let Some(quota) = r.cpu_quota {
        out.push(value("cpuQuotaUs", limit(quota, "max")));
    }
    if let Some(memory) = r.memory_limit {
        out.push(value("memoryLimitBytes", limit(memory, "max")));
    }
    if let Some(pids) = r.pids_limit {
        out.push(value("pidsLimit", limit(pids, "max")));
    }
    out
}

/// The tree for the desired pods; `None` when `cgroupsPerQOS` is off (pods then go
/// where the runtime puts them). Fills each pod plan's `cgroup`; parents come first.
pub fn cgroup_plan(
    c: &KubeletConfiguration,
    settings: &NodeSettings,
    pods: &[&Pod],
    version: CgroupVersion,
    pod_plans: &mut [PodPlan],
    problems: &mut Vec<String>,
) -> Option<CgroupPlan> {
    if !c.cgroups_per_qos {
        return None;
    }
    let Some(driver) = CgroupDriver::parse(&c.cgroup_driver) else {
        problems.push(format!(
            "cgroupDriver (--cgroup-driver) {:?} must be one of \"cgroupfs\" or \"systemd\"",
            c.cgroup_driver
        ));
        return None;
    };
    let kubepods = match kubepods_name(&c.cgroup_root) {
        Ok(name) => name,
        Err(e) => {
            problems.push(format!(
                "cgroupRoot (--cgroup-root) {:?}: {e}",
                c.cgroup_root
            ));
            return None;
        }
    };
    let entry =
        |role: &str, name: &CgroupName, pod: Option<&str>, r: &ResourceConfig| CgroupEntry {
            role: role.to_owned(),
            cgroup: name.to_cgroupfs(),
            name: match driver {
                CgroupDriver::Cgroupfs => name.to_cgroupfs(),
                CgroupDriver::Systemd => name.to_systemd_unit(),
            },
            pod: pod.map(str::to_owned),
            values: values(driver, r, version),
        };
    let enforce_pods = c.enforce_node_allocatable.iter().any(|e| e == ENFORCE_PODS);
    let node = kubepods_resource_config(
        &settings.capacity,
        &settings.kube_reserved,
        &settings.system_reserved,
        enforce_pods,
    );
    let owned: Vec<Pod> = pods.iter().map(|p| (*p).clone()).collect();
    let (burstable, besteffort) = qos_resource_configs(&owned);
    let mut entries = vec![
        entry("node-allocatable", &kubepods, None, &node),
        entry(
            "qos",
            &qos_cgroup_name(&kubepods, QosClass::Burstable),
            None,
            &burstable,
        ),
        entry(
            "qos",
            &qos_cgroup_name(&kubepods, QosClass::BestEffort),
            None,
            &besteffort,
        ),
    ];
    let pod_settings = CgroupSettings {
        cpu_cfs_quota: c.cpu_cfs_quota,
        cpu_cfs_quota_period_us: u64::try_from(c.cpu_cfs_quota_period.as_nanos() / 1_000)
            .unwrap_or(100_000),
        pod_pids_limit: c.pod_pids_limit,
    };
    let by_uid: std::collections::HashMap<&str, &Pod> =
        pods.iter().map(|p| (p.metadata.uid.as_str(), *p)).collect();
    for plan in pod_plans.iter_mut() {
        let Some(pod) = by_uid.get(plan.uid.as_str()) else {
            continue;
        };
        let name = pod_cgroup_name(&kubepods, pod);
        let r = pod_resource_config(pod, &pod_settings);
        plan.cgroup = Some(name.to_driver(driver));
        entries.push(entry("pod", &name, Some(&plan.uid), &r));
    }
    Some(CgroupPlan {
        driver: driver.as_str().to_owned(),
        cgroup_version: version.as_str().to_owned(),
        cgroup_root: c.cgroup_root.clone(),
        entries,
    })
}
