//! The cgroup tree the container manager would create or update, in the chosen
//! driver's form: cgroupfs paths with the files and values written, or systemd slice
//! units with their properties.

use serde::Serialize;

use crate::domain::cgroup::tree::PlannedCgroup;
use crate::domain::cgroup::{
    cgroupfs_files, slice_properties, CgroupDriver, CgroupName, CgroupVersion, PropValue,
    ResourceConfig, WeightCurve,
};
use crate::domain::config::NodeConfig;
use crate::domain::pod::Pod;

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
    node: &NodeConfig,
    pods: &[&Pod],
    version: CgroupVersion,
    curve: WeightCurve,
    pod_plans: &mut [PodPlan],
) -> Option<CgroupPlan> {
    let tree = node.cgroup_tree.as_ref()?;
    let driver = node.cgroup_driver;
    let entry = |planned: &PlannedCgroup, pod: Option<&str>| CgroupEntry {
        role: planned.role.as_str().to_owned(),
        cgroup: planned.name.to_cgroupfs(),
        name: match driver {
            CgroupDriver::Cgroupfs => planned.name.to_cgroupfs(),
            CgroupDriver::Systemd => planned.name.to_systemd_unit(),
        },
        pod: pod.map(str::to_owned),
        values: values(driver, &planned.name, &planned.resources, version, curve),
    };
    let mut entries: Vec<CgroupEntry> = tree
        .node_level(&node.node, pods.iter().copied())
        .iter()
        .map(|planned| entry(planned, None))
        .collect();
    let by_uid: std::collections::HashMap<&str, &Pod> =
        pods.iter().map(|p| (p.metadata.uid.as_str(), *p)).collect();
    for plan in pod_plans.iter_mut() {
        let Some(pod) = by_uid.get(plan.uid.as_str()) else {
            continue;
        };
        let planned = tree.pod(pod);
        plan.cgroup = Some(planned.name.to_driver(driver));
        entries.push(entry(&planned, Some(&plan.uid)));
    }
    Some(CgroupPlan {
        driver: driver.as_str().to_owned(),
        cgroup_version: version.as_str().to_owned(),
        cgroup_root: node.cgroup_root.clone(),
        entries,
    })
}
