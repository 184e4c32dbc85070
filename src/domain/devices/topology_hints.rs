//! Device topology hints for the topology manager (upstream v1.26 `devicemanager/
//! topology_hints.go`: `GetTopologyHints`, `GetPodTopologyHints`,
//! `generateDeviceTopologyHints`), in the topology manager's own hint types, and the
//! device manager as one of its hint providers ([`DeviceHintProvider`]).

use std::collections::{BTreeMap, BTreeSet};

use super::DeviceManagerState;
use crate::domain::admission::Rejection;
use crate::domain::pod::{Container, Pod};
use crate::domain::resource_managers::topology_manager::bitmask::iterate_bit_masks;
use crate::domain::resource_managers::topology_manager::{
    HintProvider, ProviderHints, TopologyHint,
};

impl DeviceManagerState {
    /// Whether any device of `resource` reports NUMA nodes (upstream's
    /// `deviceHasTopologyAlignment`); without, the resource has no preference.
    pub fn has_topology_alignment(&self, resource: &str) -> bool {
        self.all
            .get(resource)
            .is_some_and(|devices| devices.values().any(|d| !d.numa_nodes.is_empty()))
    }

    /// The container's device hints (upstream's `GetTopologyHints`): per device plugin
    /// resource of its limits, `None` (no preference) without topology; the hints of the
    /// devices it already holds (a restart), none placeable (`Some(vec![])`) when it holds
    /// another count or too few are free; else every mask `request` devices fit in,
    /// `reusable` (the pod's init containers' devices, by resource) counted first.
    pub fn get_topology_hints(
        &self,
        pod_uid: &str,
        container: &Container,
        numa_nodes: &[usize],
        reusable: &BTreeMap<String, BTreeSet<String>>,
    ) -> ProviderHints {
        let none = BTreeSet::new();
        self.container_requests(container)
            .into_iter()
            .map(|(resource, requested)| {
                let reusable = reusable.get(&resource).unwrap_or(&none);
                let held = self
                    .container_devices(pod_uid, &container.name, &resource)
                    .map(|d| d.ids())
                    .unwrap_or_default();
                let hints = self.resource_hints(&resource, numa_nodes, &held, reusable, requested);
                (resource, hints)
            })
            .collect()
    }

    /// The pod's device hints (upstream's `GetPodTopologyHints`): as
    /// [`DeviceManagerState::get_topology_hints`] for the pod's whole request per
    /// resource ([`DeviceManagerState::pod_device_request`]), with what the pod holds.
    pub fn get_pod_topology_hints(&self, pod: &Pod, numa_nodes: &[usize]) -> ProviderHints {
        let none = BTreeSet::new();
        self.pod_device_request(pod)
            .into_iter()
            .map(|(resource, requested)| {
                let held: BTreeSet<String> = pod
                    .spec
                    .init_containers
                    .iter()
                    .chain(&pod.spec.containers)
                    .filter_map(|c| self.container_devices(&pod.metadata.uid, &c.name, &resource))
                    .flat_map(|d| d.ids())
                    .collect();
                let hints = self.resource_hints(&resource, numa_nodes, &held, &none, requested);
                (resource, hints)
            })
            .collect()
    }

    /// One resource's hints for `requested` devices, `held` the devices already given.
    fn resource_hints(
        &self,
        resource: &str,
        numa_nodes: &[usize],
        held: &BTreeSet<String>,
        reusable: &BTreeSet<String>,
        requested: usize,
    ) -> Option<Vec<TopologyHint>> {
        if !self.has_topology_alignment(resource) {
            return None;
        }
        // Held devices (after a restart) give the same hints again, if the count agrees.
        if !held.is_empty() {
            if held.len() != requested {
                return Some(Vec::new());
            }
            return Some(self.topology_hints(
                resource,
                numa_nodes,
                held,
                &BTreeSet::new(),
                requested,
            ));
        }
        let available = self.available_devices(resource);
        if available.union(reusable).count() < requested {
            return Some(Vec::new());
        }
        Some(self.topology_hints(resource, numa_nodes, &available, reusable, requested))
    }

    /// The pod's request per device plugin resource (upstream's `getPodDeviceRequest`):
    /// the larger of the largest init container's and the app containers' sum.
    pub fn pod_device_request(&self, pod: &Pod) -> BTreeMap<String, usize> {
        let mut init: BTreeMap<String, usize> = BTreeMap::new();
        for c in &pod.spec.init_containers {
            for (resource, n) in self.container_requests(c) {
                let max = init.entry(resource).or_default();
                *max = (*max).max(n);
            }
        }
        let mut app: BTreeMap<String, usize> = BTreeMap::new();
        for c in &pod.spec.containers {
            for (resource, n) in self.container_requests(c) {
                *app.entry(resource).or_default() += n;
            }
        }
        for (resource, n) in init {
            let total = app.entry(resource).or_default();
            *total = (*total).max(n);
        }
        app
    }

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

/// The device manager as a hint provider of the topology manager. It gives hints only:
/// the devices are taken afterwards by the device manager's own admission (it asks the
/// plugins, which the domain does not), so `allocate` has nothing to do.
pub struct DeviceHintProvider<'a> {
    pub state: &'a DeviceManagerState,
    /// The machine's NUMA node ids.
    pub numa_nodes: Vec<usize>,
}

impl HintProvider for DeviceHintProvider<'_> {
    fn get_topology_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        let is_init = pod
            .spec
            .init_containers
            .iter()
            .any(|c| c.name == container.name);
        let reusable = if is_init {
            BTreeMap::new()
        } else {
            self.state.reusable_for(pod)
        };
        self.state
            .get_topology_hints(&pod.metadata.uid, container, &self.numa_nodes, &reusable)
    }

    fn get_pod_topology_hints(&self, pod: &Pod) -> ProviderHints {
        self.state.get_pod_topology_hints(pod, &self.numa_nodes)
    }

    fn allocate(&mut self, _: &Pod, _: &Container, _: &TopologyHint) -> Result<(), Rejection> {
        Ok(())
    }
}

/// The device manager in the topology manager's trial admission, before the plugins are
/// asked: the hints of [`DeviceHintProvider`] on its own copy of the state, in which
/// `allocate` takes the devices each container would get within its affinity, so the
/// later containers' hints see them taken. It keeps each container's affinity, within
/// which the device manager then allocates for real.
pub struct DevicePlanProvider {
    state: DeviceManagerState,
    numa_nodes: Vec<usize>,
    /// Container name: the affinity the topology manager chose for it.
    pub affinities: BTreeMap<String, TopologyHint>,
}

impl DevicePlanProvider {
    pub fn new(state: DeviceManagerState, numa_nodes: Vec<usize>) -> Self {
        DevicePlanProvider {
            state,
            numa_nodes,
            affinities: BTreeMap::new(),
        }
    }

    fn hints(&self) -> DeviceHintProvider<'_> {
        DeviceHintProvider {
            state: &self.state,
            numa_nodes: self.numa_nodes.clone(),
        }
    }
}

impl HintProvider for DevicePlanProvider {
    fn get_topology_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.hints().get_topology_hints(pod, container)
    }

    fn get_pod_topology_hints(&self, pod: &Pod) -> ProviderHints {
        self.hints().get_pod_topology_hints(pod)
    }

    fn allocate(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), Rejection> {
        self.affinities.insert(container.name.clone(), *affinity);
        // A container the devices cannot be planned for is refused by the allocation
        // itself, in upstream's words; the trial only chooses affinities.
        let _ = self.state.plan_container(pod, container, affinity);
        Ok(())
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

/// Upstream's `topology_hints_test.go` cases (`getCommonTestCases`,
/// `getPodScopeTestCases`, `TestGetPodDeviceRequest`) on two NUMA nodes.
#[cfg(test)]
mod upstream_cases {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::devices::{ContainerAllocateResponse, Device, PluginOptions};
    use crate::domain::pod::fixtures::container;
    use crate::domain::resource_managers::topology_manager::BitMask;
    use crate::domain::units::quantity::Quantity;

    const NUMA: [usize; 2] = [0, 1];

    fn h(bits: &[usize], preferred: bool) -> TopologyHint {
        TopologyHint::new(BitMask::new(bits).ok(), preferred)
    }

    /// A device on a NUMA node, or without topology.
    fn dev(id: &str, node: Option<i64>) -> Device {
        Device {
            id: id.into(),
            healthy: true,
            numa_nodes: node.into_iter().collect(),
        }
    }

    fn numa(id: &str, node: i64) -> Device {
        dev(id, Some(node))
    }

    fn four() -> Vec<Device> {
        vec![
            numa("Dev1", 0),
            numa("Dev2", 0),
            numa("Dev3", 1),
            numa("Dev4", 1),
        ]
    }

    fn interleaved() -> Vec<Device> {
        vec![
            numa("Dev1", 0),
            numa("Dev2", 1),
            numa("Dev3", 0),
            numa("Dev4", 1),
        ]
    }

    fn c(name: &str, limits: &[(&str, i64)]) -> Container {
        let limits: BTreeMap<String, Quantity> = limits
            .iter()
            .map(|(r, n)| {
                (
                    (*r).to_owned(),
                    Quantity::new(*n, crate::domain::units::quantity::Format::DecimalSI),
                )
            })
            .collect();
        container(name, limits.clone(), limits)
    }

    fn pod(init: Vec<Container>, containers: Vec<Container>) -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = "fakePod".into();
        p.spec.init_containers = init;
        p.spec.containers = containers;
        p
    }

    /// Devices per resource, then (pod, container, resource, ids) already allocated.
    fn state(
        devices: Vec<(&str, Vec<Device>)>,
        allocated: &[(&str, &str, &str, &[&str])],
    ) -> DeviceManagerState {
        let mut s = DeviceManagerState::default();
        for (resource, devices) in devices {
            s.plugin_connected(resource, PluginOptions::default());
            s.update_devices(resource, devices);
        }
        for (pod, container, resource, ids) in allocated {
            let ids: Vec<String> = ids.iter().map(|i| (*i).to_owned()).collect();
            s.commit(
                pod,
                container,
                resource,
                &ids,
                ContainerAllocateResponse::default(),
                Vec::new(),
            );
        }
        s
    }

    fn sorted(hints: ProviderHints) -> ProviderHints {
        hints
            .into_iter()
            .map(|(r, hints)| {
                let hints = hints.map(|mut v| {
                    v.sort_by(TopologyHint::ordering);
                    v
                });
                (r, hints)
            })
            .collect()
    }

    fn expect(pairs: Vec<(&str, Option<Vec<TopologyHint>>)>) -> ProviderHints {
        sorted(pairs.into_iter().map(|(r, h)| (r.to_owned(), h)).collect())
    }

    struct Case {
        description: &'static str,
        pod: Pod,
        state: DeviceManagerState,
        expected: ProviderHints,
    }

    fn common_cases() -> Vec<Case> {
        let one = |r: &str, n| pod(Vec::new(), vec![c("fakeContainer", &[(r, n)])]);
        let either = || vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)];
        vec![
            Case {
                description: "Single Request, no alignment",
                pod: one("testdevice", 1),
                state: state(
                    vec![("testdevice", vec![dev("Dev1", None), dev("Dev2", None)])],
                    &[],
                ),
                expected: expect(vec![("testdevice", None)]),
            },
            Case {
                description: "Single Request, only one with alignment",
                pod: one("testdevice", 1),
                state: state(
                    vec![("testdevice", vec![dev("Dev1", None), numa("Dev2", 1)])],
                    &[],
                ),
                expected: expect(vec![(
                    "testdevice",
                    Some(vec![h(&[1], true), h(&[0, 1], false)]),
                )]),
            },
            Case {
                description: "Single Request, one device per socket",
                pod: one("testdevice", 1),
                state: state(
                    vec![("testdevice", vec![numa("Dev1", 0), numa("Dev2", 1)])],
                    &[],
                ),
                expected: expect(vec![("testdevice", Some(either()))]),
            },
            Case {
                description: "Request for 2, one device per socket",
                pod: one("testdevice", 2),
                state: state(
                    vec![("testdevice", vec![numa("Dev1", 0), numa("Dev2", 1)])],
                    &[],
                ),
                expected: expect(vec![("testdevice", Some(vec![h(&[0, 1], true)]))]),
            },
            Case {
                description: "Request for 2, 2 devices per socket",
                pod: one("testdevice", 2),
                state: state(vec![("testdevice", interleaved())], &[]),
                expected: expect(vec![("testdevice", Some(either()))]),
            },
            Case {
                description: "Request for 2, optimal on 1 NUMA node, forced cross-NUMA",
                pod: one("testdevice", 2),
                state: state(
                    vec![("testdevice", interleaved())],
                    &[(
                        "fakePod",
                        "fakeOtherContainer",
                        "testdevice",
                        &["Dev1", "Dev2"],
                    )],
                ),
                expected: expect(vec![("testdevice", Some(vec![h(&[0, 1], false)]))]),
            },
            Case {
                description: "2 device types, mixed configuration",
                pod: pod(
                    Vec::new(),
                    vec![c(
                        "fakeContainer",
                        &[("testdevice1", 2), ("testdevice2", 1)],
                    )],
                ),
                state: state(
                    vec![
                        ("testdevice1", interleaved()),
                        ("testdevice2", vec![numa("Dev1", 0)]),
                    ],
                    &[],
                ),
                expected: expect(vec![
                    ("testdevice1", Some(either())),
                    ("testdevice2", Some(vec![h(&[0], true), h(&[0, 1], false)])),
                ]),
            },
            Case {
                description: "Single device type, more requested than available",
                pod: one("testdevice", 6),
                state: state(vec![("testdevice", four())], &[]),
                expected: expect(vec![("testdevice", Some(Vec::new()))]),
            },
            Case {
                description: "Single device type, all already allocated to container",
                pod: one("testdevice", 2),
                state: state(
                    vec![("testdevice", vec![numa("Dev1", 0), numa("Dev2", 0)])],
                    &[("fakePod", "fakeContainer", "testdevice", &["Dev1", "Dev2"])],
                ),
                expected: expect(vec![(
                    "testdevice",
                    Some(vec![h(&[0], true), h(&[0, 1], false)]),
                )]),
            },
            Case {
                description:
                    "Single device type, less already allocated to container than requested",
                pod: one("testdevice", 4),
                state: state(
                    vec![("testdevice", four())],
                    &[("fakePod", "fakeContainer", "testdevice", &["Dev1", "Dev2"])],
                ),
                expected: expect(vec![("testdevice", Some(Vec::new()))]),
            },
            Case {
                description:
                    "Single device type, more already allocated to container than requested",
                pod: one("testdevice", 2),
                state: state(
                    vec![("testdevice", four())],
                    &[(
                        "fakePod",
                        "fakeContainer",
                        "testdevice",
                        &["Dev1", "Dev2", "Dev3", "Dev4"],
                    )],
                ),
                expected: expect(vec![("testdevice", Some(Vec::new()))]),
            },
        ]
    }

    fn pod_scope_cases() -> Vec<Case> {
        let either = || vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)];
        let both = |r1: i64, r2: i64| vec![("testdevice1", r1), ("testdevice2", r2)];
        let two_types = |allocated: &[(&str, &str, &str, &[&str])]| {
            state(
                vec![("testdevice1", four()), ("testdevice2", four())],
                allocated,
            )
        };
        let both_either = || {
            expect(vec![
                ("testdevice1", Some(either())),
                ("testdevice2", Some(either())),
            ])
        };
        vec![
            Case {
                description: "2 device types, user container only",
                pod: pod(
                    Vec::new(),
                    vec![
                        c("fakeContainer1", &[("testdevice1", 2)]),
                        c("fakeContainer2", &[("testdevice2", 2)]),
                        c("fakeContainer3", &[("notRegistered", 2)]),
                    ],
                ),
                state: two_types(&[]),
                expected: both_either(),
            },
            Case {
                description:
                    "2 device types, request resources for init containers and user container",
                pod: pod(
                    vec![c("init1", &both(1, 1)), c("init2", &both(1, 2))],
                    vec![
                        c("fakeContainer1", &both(1, 1)),
                        c("fakeContainer2", &both(1, 1)),
                        c("fakeContainer3", &[("notRegistered", 1)]),
                    ],
                ),
                state: two_types(&[]),
                expected: both_either(),
            },
            Case {
                description:
                    "2 device types, user container only, optimal on 1 NUMA node, forced cross-NUMA",
                pod: pod(
                    Vec::new(),
                    vec![
                        c("fakeContainer1", &both(1, 1)),
                        c("fakeContainer2", &both(1, 1)),
                        c("fakeContainer3", &[("notRegistered", 1)]),
                    ],
                ),
                state: two_types(&[
                    (
                        "fakeOtherPod",
                        "fakeOtherContainer",
                        "testdevice1",
                        &["Dev1", "Dev3"],
                    ),
                    (
                        "fakeOtherPod",
                        "fakeOtherContainer",
                        "testdevice2",
                        &["Dev1", "Dev3"],
                    ),
                ]),
                expected: expect(vec![
                    ("testdevice1", Some(vec![h(&[0, 1], false)])),
                    ("testdevice2", Some(vec![h(&[0, 1], false)])),
                ]),
            },
        ]
    }

    /// Each case's hints from the device manager as a hint provider, as `hints_of` asks.
    fn check(cases: Vec<Case>, hints_of: &dyn Fn(&DeviceHintProvider, &Pod) -> ProviderHints) {
        for case in cases {
            let provider = DeviceHintProvider {
                state: &case.state,
                numa_nodes: NUMA.to_vec(),
            };
            let hints = hints_of(&provider, &case.pod);
            assert_eq!(sorted(hints), case.expected, "{}", case.description);
        }
    }

    // TestGetTopologyHints: the first container's hints.
    #[test]
    fn container_hints_match_upstream() {
        check(common_cases(), &|p, pod| {
            p.get_topology_hints(pod, &pod.spec.containers[0])
        });
    }

    // TestGetPodTopologyHints: the common cases and the pod scope's.
    #[test]
    fn pod_hints_match_upstream() {
        let cases = common_cases()
            .into_iter()
            .chain(pod_scope_cases())
            .collect();
        check(cases, &|p, pod| p.get_pod_topology_hints(pod));
    }

    // TestGetPodDeviceRequest: the largest init container against the app containers' sum.
    #[test]
    fn pod_device_request_is_the_larger_of_init_and_app() {
        let s = state(
            vec![("gpu", four()), ("nic", four()), ("fpga", four())],
            &[],
        );
        assert!(s
            .pod_device_request(&pod(Vec::new(), Vec::new()))
            .is_empty());
        let p = pod(
            vec![
                c("i1", &[("gpu", 2), ("nic", 1), ("fpga", 3)]),
                c("i2", &[("gpu", 3), ("nic", 1)]),
            ],
            vec![
                c("a1", &[("gpu", 1), ("nic", 2)]),
                c("a2", &[("gpu", 1), ("nic", 2), ("unknown", 5)]),
            ],
        );
        assert_eq!(
            s.pod_device_request(&p),
            [
                ("fpga".to_owned(), 3),
                ("gpu".to_owned(), 3),
                ("nic".to_owned(), 4)
            ]
            .into()
        );
    }
}
