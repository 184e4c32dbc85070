//! Devices chosen within the topology manager's affinity (upstream v1.26
//! `devicemanager/manager.go`: `filterByAffinity` and the order `devicesToAllocate`
//! takes devices in), and the trial allocation that gives the topology manager's trial
//! admission the devices each container would take.

use std::collections::{BTreeMap, BTreeSet};

use super::{AllocateError, AllocationNeed, ContainerAllocateResponse, DeviceManagerState};
use crate::domain::pod::{Container, Pod};
use crate::domain::resource_managers::topology_manager::TopologyHint;

/// The available devices of a resource split by the container's affinity: those on a
/// NUMA node of it, those on other nodes only, and those without topology.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AffinitySplit {
    pub aligned: BTreeSet<String>,
    pub unaligned: BTreeSet<String>,
    pub no_affinity: BTreeSet<String>,
}

/// What the plugin's `GetPreferredAllocation` is asked: the devices offered and those the
/// answer must include.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferenceRequest {
    pub offered: Vec<String>,
    pub must_include: Vec<String>,
}

impl AffinitySplit {
    fn available(&self) -> impl Iterator<Item = &String> {
        self.aligned
            .iter()
            .chain(&self.unaligned)
            .chain(&self.no_affinity)
    }

    /// Whether the aligned devices alone hold more than `needed`, so the plugin chooses
    /// among them (upstream's `needed < aligned.Len()`).
    fn chosen_within_aligned(&self, needed: usize) -> bool {
        needed < self.aligned.len()
    }

    /// The plugin's question, `None` when the aligned devices settle the choice: among
    /// the aligned devices when they are more than needed; else among every available
    /// one, the aligned ones (all taken first) included.
    pub fn preference_request(
        &self,
        reused: &[String],
        needed: usize,
    ) -> Option<PreferenceRequest> {
        if self.chosen_within_aligned(needed) {
            return Some(PreferenceRequest {
                offered: self.aligned.iter().chain(reused).cloned().collect(),
                must_include: reused.to_vec(),
            });
        }
        (needed > self.aligned.len()).then(|| PreferenceRequest {
            offered: self.available().chain(reused).cloned().collect(),
            must_include: reused.iter().chain(&self.aligned).cloned().collect(),
        })
    }

    /// The devices in the order they are taken: within the aligned ones the plugin's
    /// preferred first; else every aligned one (the affinity honoured as far as it
    /// goes), then the plugin's preferred, then the unaligned, then those without
    /// topology.
    pub fn order(&self, needed: usize, preferred: &[String]) -> Vec<String> {
        if self.chosen_within_aligned(needed) {
            return preferred
                .iter()
                .filter(|d| self.aligned.contains(*d))
                .chain(&self.aligned)
                .cloned()
                .collect();
        }
        let available: BTreeSet<&String> = self.available().collect();
        self.aligned
            .iter()
            .chain(preferred.iter().filter(|d| available.contains(d)))
            .chain(&self.unaligned)
            .chain(&self.no_affinity)
            .cloned()
            .collect()
    }
}

impl DeviceManagerState {
    /// Upstream's `filterByAffinity`: without an affinity, or for a resource whose
    /// devices report no NUMA node, every device is without affinity; else a device on
    /// any node of the affinity is aligned, one on other nodes only unaligned.
    pub fn filter_by_affinity(
        &self,
        resource: &str,
        available: &BTreeSet<String>,
        affinity: Option<&TopologyHint>,
    ) -> AffinitySplit {
        let mask = affinity.and_then(|a| a.numa_node_affinity);
        let Some(mask) = mask.filter(|_| self.has_topology_alignment(resource)) else {
            return AffinitySplit {
                no_affinity: available.clone(),
                ..AffinitySplit::default()
            };
        };
        let mut split = AffinitySplit::default();
        for id in available {
            let nodes: Vec<i64> = self
                .all
                .get(resource)
                .and_then(|d| d.get(id))
                .map(|d| d.numa_nodes.clone())
                .unwrap_or_default();
            let in_affinity = nodes
                .iter()
                .any(|n| usize::try_from(*n).is_ok_and(|n| mask.is_set(n)));
            let side = if nodes.is_empty() {
                &mut split.no_affinity
            } else if in_affinity {
                &mut split.aligned
            } else {
                &mut split.unaligned
            };
            side.insert(id.clone());
        }
        split
    }

    /// The devices the pod's init containers hold, less those its app containers took
    /// over (upstream's `devicesToReuse`): what `container` takes first.
    pub fn reusable_for(&self, pod: &Pod) -> BTreeMap<String, BTreeSet<String>> {
        let uid = &pod.metadata.uid;
        let mut reusable: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for c in &pod.spec.init_containers {
            for (resource, held) in self.devices_of(uid, &c.name) {
                reusable.entry(resource).or_default().extend(held.ids());
            }
        }
        for c in &pod.spec.containers {
            for (resource, held) in self.devices_of(uid, &c.name) {
                if let Some(left) = reusable.get_mut(&resource) {
                    left.retain(|d| !held.ids().contains(d));
                }
            }
        }
        reusable
    }

    /// What `container` still needs of `resource` (upstream's `devicesToAllocate` up to
    /// the plugin's preference): `None` when it needs nothing, else the devices it
    /// reuses, how many more, and the free ones split by `affinity`.
    ///
    /// # Errors
    /// What the allocation refuses ([`AllocateError`]).
    pub fn allocation_step(
        &self,
        pod_uid: &str,
        container: &str,
        resource: &str,
        required: usize,
        reusable: &BTreeMap<String, BTreeSet<String>>,
        affinity: Option<&TopologyHint>,
    ) -> Result<Option<AllocationStep>, AllocateError> {
        let none = BTreeSet::new();
        let need = self.devices_to_allocate(
            pod_uid,
            container,
            resource,
            required,
            reusable.get(resource).unwrap_or(&none),
        )?;
        let AllocationNeed::Devices {
            reused,
            available,
            needed,
        } = need
        else {
            return Ok(None);
        };
        let split = self.filter_by_affinity(resource, &available, affinity);
        Ok(Some(AllocationStep {
            reused,
            available,
            needed,
            split,
        }))
    }

    /// Takes, in this state, the devices `container` would get within `affinity` as the
    /// allocation takes them, without the plugin's preference (which only the plugin
    /// knows): the topology manager's trial admission, so that the later containers'
    /// hints see them taken.
    ///
    /// # Errors
    /// What the allocation would refuse ([`AllocateError`]).
    pub fn plan_container(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), AllocateError> {
        let uid = &pod.metadata.uid;
        let reusable = self.reusable_for(pod);
        for (resource, required) in self.container_requests(container) {
            let Some(step) = self.allocation_step(
                uid,
                &container.name,
                &resource,
                required,
                &reusable,
                Some(affinity),
            )?
            else {
                continue;
            };
            let ids = step.take(self, &resource, &[])?;
            self.commit(
                uid,
                &container.name,
                &resource,
                &ids,
                ContainerAllocateResponse::default(),
                Vec::new(),
            );
        }
        Ok(())
    }
}

/// A container's need of one resource, the free devices split by its affinity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocationStep {
    pub reused: Vec<String>,
    pub available: BTreeSet<String>,
    pub needed: usize,
    pub split: AffinitySplit,
}

impl AllocationStep {
    /// The plugin's question, `None` when it is not to be asked.
    pub fn preference_request(&self) -> Option<PreferenceRequest> {
        self.split.preference_request(&self.reused, self.needed)
    }

    /// Takes the devices in `state`, the plugin's `preferred` ones where the order
    /// allows; marked held until committed or released.
    ///
    /// # Errors
    /// [`AllocateError::LessThanRequired`].
    pub fn take(
        &self,
        state: &mut DeviceManagerState,
        resource: &str,
        preferred: &[String],
    ) -> Result<Vec<String>, AllocateError> {
        let order = self.split.order(self.needed, preferred);
        state.take(resource, &self.reused, &self.available, self.needed, &order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::devices::{Device, PluginOptions};
    use crate::domain::pod::fixtures::container;
    use crate::domain::resource_managers::topology_manager::BitMask;
    use crate::domain::units::quantity::{Format, Quantity};

    const R: &str = "res1";

    fn ids(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|d| (*d).to_owned()).collect()
    }

    fn on_nodes(devices: &[(&str, &[i64])]) -> DeviceManagerState {
        let mut s = DeviceManagerState::default();
        s.plugin_connected(R, PluginOptions::default());
        s.update_devices(
            R,
            devices
                .iter()
                .map(|(id, nodes)| Device {
                    id: (*id).into(),
                    healthy: true,
                    numa_nodes: nodes.to_vec(),
                })
                .collect(),
        );
        s
    }

    fn affinity(nodes: &[usize]) -> TopologyHint {
        TopologyHint::new(BitMask::new(nodes).ok(), true)
    }

    /// Upstream's `TestFilterByAffinity` (manager_test.go): the affinity is node 2; a
    /// device on nodes 1 and 2 is aligned.
    #[test]
    fn devices_split_by_affinity_as_upstreams_test() {
        let s = on_nodes(&[
            ("dev1", &[1]),
            ("dev2", &[1, 2]),
            ("dev3", &[2]),
            ("dev4", &[2]),
            ("dev5", &[]),
        ]);
        let hint = affinity(&[2]);
        for (available, aligned, unaligned) in [
            (&["dev1", "dev2"][..], &["dev2"][..], &["dev1"][..]),
            (
                &["dev1", "dev2", "dev3", "dev4"][..],
                &["dev2", "dev3", "dev4"][..],
                &["dev1"][..],
            ),
        ] {
            let split = s.filter_by_affinity(R, &ids(available), Some(&hint));
            assert_eq!(split.aligned, ids(aligned), "{available:?}");
            assert_eq!(split.unaligned, ids(unaligned), "{available:?}");
            assert!(split.no_affinity.is_empty(), "{available:?}");
        }
        let with_untopologied = s.filter_by_affinity(R, &ids(&["dev1", "dev5"]), Some(&hint));
        assert_eq!(with_untopologied.no_affinity, ids(&["dev5"]));
        // No affinity, or a resource without topology: every device is without affinity.
        let everything = ids(&["dev1", "dev3"]);
        let none = s.filter_by_affinity(R, &everything, None);
        assert_eq!(none.no_affinity, everything);
        let anywhere = s.filter_by_affinity(R, &everything, Some(&TopologyHint::default()));
        assert_eq!(anywhere.no_affinity, everything);
        let flat = on_nodes(&[("a", &[]), ("b", &[])]);
        assert_eq!(
            flat.filter_by_affinity(R, &ids(&["a", "b"]), Some(&hint))
                .no_affinity,
            ids(&["a", "b"])
        );
    }

    /// Upstream's `devicesToAllocate` order: the plugin chooses among the aligned devices
    /// when they are more than needed; else every aligned one first, then its choice
    /// among all, then the unaligned, then those without topology.
    #[test]
    fn the_plugin_chooses_within_the_aligned_devices_when_they_suffice() {
        let split = AffinitySplit {
            aligned: ids(&["a1", "a2", "a3"]),
            unaligned: ids(&["u1"]),
            no_affinity: ids(&["n1"]),
        };
        let reused = vec!["r".to_owned()];
        assert_eq!(
            split.preference_request(&reused, 2),
            Some(PreferenceRequest {
                offered: vec!["a1".into(), "a2".into(), "a3".into(), "r".into()],
                must_include: vec!["r".into()],
            })
        );
        let preferred = vec!["u1".to_owned(), "a3".to_owned()];
        assert_eq!(&split.order(2, &preferred)[..2], ["a3", "a1"]);
        // As many as the aligned hold: they settle it, the plugin is not asked.
        assert_eq!(split.preference_request(&reused, 3), None);
        assert_eq!(&split.order(3, &[])[..3], ["a1", "a2", "a3"]);
        // More: the aligned first, then the plugin's choice among every device.
        let question = split.preference_request(&reused, 5);
        assert_eq!(
            question.map(|q| q.must_include),
            Some(vec!["r".into(), "a1".into(), "a2".into(), "a3".into()])
        );
        assert_eq!(
            split.order(5, &["n1".to_owned()]),
            ["a1", "a2", "a3", "n1", "u1", "n1"]
        );
    }

    /// The trial allocation takes what the allocation would: an app container first
    /// takes over its init container's devices, then aligned ones.
    #[test]
    fn the_trial_takes_init_devices_over_then_aligned_ones() {
        let mut s = on_nodes(&[("d0", &[0]), ("d1", &[1]), ("d2", &[1])]);
        let limit = |n: i64| -> BTreeMap<String, Quantity> {
            [(R.to_owned(), Quantity::new(n, Format::DecimalSI))].into()
        };
        let mut pod = Pod::default();
        pod.metadata.uid = "p".into();
        pod.spec.init_containers = vec![container("init", limit(1), limit(1))];
        pod.spec.containers = vec![container("app", limit(2), limit(2))];
        let node1 = affinity(&[1]);
        s.plan_container(&pod, &pod.spec.init_containers[0], &node1)
            .expect("the init container planned");
        let init_held = s.devices_of("p", "init")[0].1.ids();
        assert_eq!(init_held, ids(&["d1"]));
        s.plan_container(&pod, &pod.spec.containers[0], &node1)
            .expect("the app container planned");
        assert_eq!(s.devices_of("p", "app")[0].1.ids(), ids(&["d1", "d2"]));
        assert_eq!(s.reusable_for(&pod).get(R), Some(&BTreeSet::new()));
    }
}
