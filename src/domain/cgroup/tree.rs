//! The kubelet's cgroup tree as one decision: which cgroups exist under `--cgroup-root`
//! (`kubepods`, its QoS children, one per pod) and the resources each gets. The container
//! manager creates what this says; the planner prints the same entries.

use crate::domain::node::NodeSettings;
use crate::domain::pod::{Pod, QosClass};

use super::{
    kubepods_resource_config, pod_cgroup_name, pod_resource_config, qos_cgroup_name,
    qos_resource_configs, CgroupName, CgroupSettings, ResourceConfig, POD_CGROUP_PREFIX,
};

/// The tree's shape, fixed by the configuration (`cgroupsPerQOS`, `cgroupRoot`,
/// `enforceNodeAllocatable`, the CFS and pid settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupTree {
    /// `<cgroupRoot>/kubepods`.
    pub kubepods: CgroupName,
    /// `enforceNodeAllocatable` holds `pods`: `kubepods` gets node allocatable as limits.
    pub enforce_pods: bool,
    pub pod_settings: CgroupSettings,
}

/// What a cgroup of the tree is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupRole {
    NodeAllocatable,
    Qos(QosClass),
    Pod,
}

impl CgroupRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NodeAllocatable => "node-allocatable",
            Self::Qos(_) => "qos",
            Self::Pod => "pod",
        }
    }
}

/// One cgroup with the resources it is created (or updated) with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCgroup {
    pub role: CgroupRole,
    pub name: CgroupName,
    pub resources: ResourceConfig,
}

impl CgroupTree {
    /// `kubepods` with node allocatable (as limits only when enforced on pods).
    pub fn kubepods(&self, node: &NodeSettings) -> PlannedCgroup {
        PlannedCgroup {
            role: CgroupRole::NodeAllocatable,
            name: self.kubepods.clone(),
            resources: kubepods_resource_config(
                &node.capacity,
                &node.kube_reserved,
                &node.system_reserved,
                self.enforce_pods,
            ),
        }
    }

    /// `kubepods/burstable` and `kubepods/besteffort` for the pods now desired (burstable
    /// shares follow the burstable pods' requests).
    pub fn qos<'a>(&self, pods: impl IntoIterator<Item = &'a Pod>) -> [PlannedCgroup; 2] {
        let (burstable, besteffort) = qos_resource_configs(pods);
        [
            (QosClass::Burstable, burstable),
            (QosClass::BestEffort, besteffort),
        ]
        .map(|(qos, resources)| PlannedCgroup {
            role: CgroupRole::Qos(qos),
            name: qos_cgroup_name(&self.kubepods, qos),
            resources,
        })
    }

    /// The node-level part, parents first: `kubepods`, then its QoS children.
    pub fn node_level<'a>(
        &self,
        node: &NodeSettings,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) -> Vec<PlannedCgroup> {
        let mut out = vec![self.kubepods(node)];
        out.extend(self.qos(pods));
        out
    }

    /// The pod's own cgroup, under its QoS class's.
    pub fn pod(&self, pod: &Pod) -> PlannedCgroup {
        PlannedCgroup {
            role: CgroupRole::Pod,
            name: pod_cgroup_name(&self.kubepods, pod),
            resources: pod_resource_config(pod, &self.pod_settings),
        }
    }

    /// The cgroups pod cgroups live in: `kubepods` (Guaranteed) and the QoS ones.
    pub fn pod_parents(&self) -> [CgroupName; 3] {
        [
            self.kubepods.clone(),
            qos_cgroup_name(&self.kubepods, QosClass::Burstable),
            qos_cgroup_name(&self.kubepods, QosClass::BestEffort),
        ]
    }

    /// Every place the cgroup of a pod with `uid` may be, when only its uid is known.
    pub fn pod_candidates(&self, uid: &str) -> Vec<CgroupName> {
        let leaf = format!("{POD_CGROUP_PREFIX}{uid}");
        self.pod_parents()
            .iter()
            .filter_map(|parent| CgroupName::new(parent, &[leaf.as_str()]).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::cgroup::kubepods_name;
    use crate::domain::pod::{Container, ObjectMeta, PodSpec, ResourceRequirements};
    use crate::domain::units::quantity::Quantity;
    use std::collections::BTreeMap;

    fn tree() -> CgroupTree {
        CgroupTree {
            kubepods: kubepods_name("/").expect("valid root"),
            enforce_pods: true,
            pod_settings: CgroupSettings::default(),
        }
    }

    fn burstable_pod(uid: &str, cpu: &str) -> Pod {
        let requests = BTreeMap::from([("cpu".to_string(), Quantity::parse(cpu).expect("cpu"))]);
        Pod {
            metadata: ObjectMeta {
                uid: uid.into(),
                name: uid.into(),
                ..ObjectMeta::default()
            },
            spec: PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: ResourceRequirements {
                        requests,
                        ..ResourceRequirements::default()
                    },
                    ..Container::default()
                }],
                ..PodSpec::default()
            },
        }
    }

    #[test]
    fn the_node_level_comes_parents_first_and_burstable_shares_follow_the_pods() {
        let pods = [burstable_pod("a", "500m"), burstable_pod("b", "250m")];
        let level = tree().node_level(&NodeSettings::default(), &pods);
        let names: Vec<String> = level.iter().map(|c| c.name.to_cgroupfs()).collect();
        assert_eq!(
            names,
            ["/kubepods", "/kubepods/burstable", "/kubepods/besteffort"]
        );
        // 750m of requests: 768 shares.
        assert_eq!(level[1].resources.cpu_shares, Some(768));
        assert_eq!(level[2].resources.cpu_shares, Some(2));
    }

    #[test]
    fn a_pod_cgroup_sits_under_its_qos_class_and_is_found_by_uid_alone() {
        let t = tree();
        let pod = burstable_pod("1234", "100m");
        let planned = t.pod(&pod);
        assert_eq!(planned.role, CgroupRole::Pod);
        assert_eq!(planned.name.to_cgroupfs(), "/kubepods/burstable/pod1234");
        assert!(t.pod_candidates("1234").contains(&planned.name));
        assert_eq!(t.pod_candidates("1234").len(), 3);
    }
}
