//! The cgroup tree the container manager would create or update, in the chosen
//! driver's form: cgroupfs paths with the files and values written, or systemd slice
//! units with their properties.

use serde::Serialize;

use crate::domain::cgroup::{
    cgroupfs_files, kubepods_name, kubepods_resource_config, pod_cgroup_name, pod_resource_config,
    qos_cgroup_name, qos_resource_configs, slice_properties, CgroupDriver, CgroupName,
    CgroupSettings, CgroupVersion, PropValue, ResourceConfig, WeightCurve,
};
use crate::domain::config::model::KubeletConfiguration;
use crate::domain::node::reserved::ENFORCE_PODS;
use crate::domain::node::NodeSettings;
use crate::domain::pod::{Pod, QosClass};

use super::PodPlan;

/// One value written: a cgroupfs file and its text (always a string), or a systemd
/// unit property and its D-Bus value (boolean, number, string or string list).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupValue {
    pub key: String,
    pub value: PropValue,
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

/// What the driver writes for a cgroup: the cgroupfs files, or the properties a new
/// slice unit is started with (v2 weights on `curve`, as `--cpu-weight-curve` says).
fn values(
    driver: CgroupDriver,
    name: &CgroupName,
    r: &ResourceConfig,
    version: CgroupVersion,
    curve: WeightCurve,
) -> Vec<CgroupValue> {
    match driver {
        CgroupDriver::Cgroupfs => cgroupfs_files(r, version, curve)
            .into_iter()
            .map(|(file, value)| CgroupValue {
                key: file.to_owned(),
                value: PropValue::Str(value),
            })
            .collect(),
        CgroupDriver::Systemd => slice_properties(name, r, version, curve)
            .into_iter()
            .map(|(key, value)| CgroupValue {
                key: key.to_owned(),
                value,
            })
            .collect(),
    }
}

/// The tree for the desired pods; `None` when `cgroupsPerQOS` is off (pods then go
/// where the runtime puts them). Fills each pod plan's `cgroup`; parents come first.
pub fn cgroup_plan(
    c: &KubeletConfiguration,
    settings: &NodeSettings,
    pods: &[&Pod],
    version: CgroupVersion,
    curve: WeightCurve,
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
            values: values(driver, name, r, version, curve),
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
