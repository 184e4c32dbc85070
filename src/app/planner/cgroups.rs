//! The cgroup tree the container manager would create or update, in the chosen
//! driver's form: cgroupfs paths with the files and values written, or systemd slice
//! units with their properties.

use serde::Serialize;

use crate::domain::config::model::KubeletConfiguration;
use crate::domain::node::NodeSettings;
use crate::domain::pod::Pod;

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

/// The tree for the desired pods; `None` when `cgroupsPerQOS` is off (pods then go
/// where the runtime puts them). Fills each pod plan's `cgroup`.
pub fn cgroup_plan(
    _c: &KubeletConfiguration,
    _settings: &NodeSettings,
    _pods: &[&Pod],
    _version: CgroupVersion,
    _pod_plans: &mut [PodPlan],
    _problems: &mut Vec<String>,
) -> Option<CgroupPlan> {
    None
}
