//! Device topology hints for the topology manager (upstream v1.26 `devicemanager/
//! topology_hints.go`, `generateDeviceTopologyHints`), in the topology manager's own hint
//! types. Not asked yet: the topology manager is not wired into the app.

use std::collections::BTreeSet;

use super::DeviceManagerState;
use crate::domain::resource_managers::topology_manager::bitmask::iterate_bit_masks;
use crate::domain::resource_managers::topology_manager::TopologyHint;

impl DeviceManagerState {
    /// Healthy devices of `resource` no container holds.
    pub fn available_devices(&self, resource: &str) -> BTreeSet<String> {
        let in_use = self.allocated.get(resource);
        self.healthy
            .get(resource)
            .into_iter()
            .flatten()
            .filter(|d| in_use.is_none_or(|u| !u.contains(*d)))
            .cloned()
            .collect()
    }

    /// Every combination of `numa_nodes` on which `request` devices of `resource` can be
    /// found (the `reusable` ones all inside it), preferred when it is as narrow as the
    /// narrowest combination holding `request` devices at all.
    pub fn topology_hints(
        &self,
        resource: &str,
        numa_nodes: &[usize],
        available: &BTreeSet<String>,
        reusable: &BTreeSet<String>,
        request: usize,
    ) -> Vec<TopologyHint> {
        let devices = self.all.get(resource);
        let nodes_of = |id: &str| -> Vec<usize> {
            devices
                .and_then(|d| d.get(id))
                .map(|d| {
                    d.numa_nodes
                        .iter()
                        .filter_map(|n| usize::try_from(*n).ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut min_affinity_size = numa_nodes.len();
        let mut hints = Vec::new();
        iterate_bit_masks(numa_nodes, &mut |mask| {
            let in_mask = devices
                .into_iter()
                .flat_map(|d| d.keys())
                .filter(|id| mask.any_set(&nodes_of(id)))
                .count();
            if in_mask >= request && mask.count() < min_affinity_size {
                min_affinity_size = mask.count();
            }
            let mut matching = 0;
            for id in reusable {
                let nodes = nodes_of(id);
                // A reusable device without topology does not decide the mask.
                if nodes.is_empty() {
                    continue;
                }
                if !mask.any_set(&nodes) {
                    return;
                }
                matching += 1;
            }
            matching += available
                .iter()
                .filter(|id| mask.any_set(&nodes_of(id)))
                .count();
            if matching >= request {
                hints.push(TopologyHint::new(Some(mask), false));
            }
        });
        for hint in &mut hints {
            hint.preferred = hint
                .numa_node_affinity
                .is_some_and(|m| m.count() == min_affinity_size);
        }
        hints
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::devices::{Device, PluginOptions};
    use crate::domain::resource_managers::topology_manager::BitMask;

    fn mask(bits: &[usize]) -> Option<BitMask> {
        BitMask::new(bits).ok()
    }

    fn state(devices: &[(&str, i64)]) -> DeviceManagerState {
        let mut s = DeviceManagerState::default();
        s.plugin_connected("r", PluginOptions::default());
        s.update_devices(
            "r",
            devices
                .iter()
                .map(|(id, node)| Device {
                    id: (*id).into(),
                    healthy: true,
                    numa_nodes: vec![*node],
                })
                .collect(),
        );
        s
    }

    /// Upstream's "Request for 1 device, 1 available device" and "2 devices, one on each
    /// NUMA node" cases (topology_hints_test.go).
    #[test]
    fn hints_follow_upstreams_cases() {
        let s = state(&[("Dev1", 0)]);
        let hints = s.topology_hints("r", &[0, 1], &s.available_devices("r"), &BTreeSet::new(), 1);
        assert_eq!(
            hints,
            vec![
                TopologyHint::new(mask(&[0]), true),
                TopologyHint::new(mask(&[0, 1]), false),
            ]
        );
        let s = state(&[("Dev1", 0), ("Dev2", 1)]);
        let available = s.available_devices("r");
        let one = s.topology_hints("r", &[0, 1], &available, &BTreeSet::new(), 1);
        assert_eq!(
            one,
            vec![
                TopologyHint::new(mask(&[0]), true),
                TopologyHint::new(mask(&[1]), true),
                TopologyHint::new(mask(&[0, 1]), false),
            ]
        );
        let two = s.topology_hints("r", &[0, 1], &available, &BTreeSet::new(), 2);
        assert_eq!(two, vec![TopologyHint::new(mask(&[0, 1]), true)]);
        // A reusable device on node 1 rules node 0 out.
        let reusable = BTreeSet::from(["Dev2".to_owned()]);
        let only_dev1 = BTreeSet::from(["Dev1".to_owned()]);
        let reused = s.topology_hints("r", &[0, 1], &only_dev1, &reusable, 1);
        assert_eq!(
            reused,
            vec![
                TopologyHint::new(mask(&[1]), true),
                TopologyHint::new(mask(&[0, 1]), false),
            ]
        );
    }
}
