//! The node's CPU topology as the CPU manager sees it (upstream v1.26
//! `cpumanager/topology`): every logical CPU with its NUMA node, socket and core, and the
//! counts the allocation arithmetic divides by. Built from plain facts
//! ([`MachineTopology`]); the adapter reads them from sysfs.

use std::collections::BTreeMap;

use crate::domain::units::cpuset::CpuSet;

/// Where one logical CPU sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuInfo {
    pub numa_node: usize,
    pub socket: usize,
    /// The core id, unique on the node (upstream takes the lowest thread id of the core).
    pub core: usize,
}

/// Every logical CPU of a set with its place (upstream's `CPUDetails`). The id lists it
/// returns are [`CpuSet`]s, as upstream returns sets of ids of any kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuDetails(pub BTreeMap<usize, CpuInfo>);

impl CpuDetails {
    /// Only the CPUs in `cpus`.
    pub fn keep_only(&self, cpus: &CpuSet) -> CpuDetails {
        CpuDetails(
            self.0
                .iter()
                .filter(|(cpu, _)| cpus.contains(**cpu))
                .map(|(cpu, info)| (*cpu, *info))
                .collect(),
        )
    }

    fn collect(
        &self,
        keep: impl Fn(&CpuInfo) -> bool,
        pick: impl Fn(usize, &CpuInfo) -> usize,
    ) -> CpuSet {
        self.0
            .iter()
            .filter(|(_, info)| keep(info))
            .map(|(cpu, info)| pick(*cpu, info))
            .collect()
    }

    pub fn numa_nodes(&self) -> CpuSet {
        self.collect(|_| true, |_, i| i.numa_node)
    }

    pub fn numa_nodes_in_sockets(&self, sockets: &[usize]) -> CpuSet {
        self.collect(|i| sockets.contains(&i.socket), |_, i| i.numa_node)
    }

    pub fn sockets(&self) -> CpuSet {
        self.collect(|_| true, |_, i| i.socket)
    }

    pub fn cpus_in_sockets(&self, sockets: &[usize]) -> CpuSet {
        self.collect(|i| sockets.contains(&i.socket), |cpu, _| cpu)
    }

    pub fn sockets_in_numa_nodes(&self, numa_nodes: &[usize]) -> CpuSet {
        self.collect(|i| numa_nodes.contains(&i.numa_node), |_, i| i.socket)
    }

    pub fn cores(&self) -> CpuSet {
        self.collect(|_| true, |_, i| i.core)
    }

    pub fn cores_in_numa_nodes(&self, numa_nodes: &[usize]) -> CpuSet {
        self.collect(|i| numa_nodes.contains(&i.numa_node), |_, i| i.core)
    }

    pub fn cores_in_sockets(&self, sockets: &[usize]) -> CpuSet {
        self.collect(|i| sockets.contains(&i.socket), |_, i| i.core)
    }

    pub fn cpus(&self) -> CpuSet {
        self.0.keys().copied().collect()
    }

    pub fn cpus_in_numa_nodes(&self, numa_nodes: &[usize]) -> CpuSet {
        self.collect(|i| numa_nodes.contains(&i.numa_node), |cpu, _| cpu)
    }

    pub fn cpus_in_cores(&self, cores: &[usize]) -> CpuSet {
        self.collect(|i| cores.contains(&i.core), |cpu, _| cpu)
    }

    /// The place of one CPU.
    pub fn get(&self, cpu: usize) -> Option<&CpuInfo> {
        self.0.get(&cpu)
    }
}

/// The node's CPUs (upstream's `CPUTopology`). The counts are kept as given rather than
/// derived, as upstream's arithmetic (`CPUsPerCore`, `CPUsPerSocket`, sockets versus NUMA
/// nodes) divides by them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuTopology {
    pub num_cpus: usize,
    pub num_cores: usize,
    pub num_sockets: usize,
    pub num_numa_nodes: usize,
    pub cpu_details: CpuDetails,
}

impl CpuTopology {
    /// Logical CPUs per physical core (2 with SMT); 0 without cores.
    pub fn cpus_per_core(&self) -> usize {
        self.num_cpus.checked_div(self.num_cores).unwrap_or(0)
    }

    /// Logical CPUs per socket; 0 without sockets.
    pub fn cpus_per_socket(&self) -> usize {
        self.num_cpus.checked_div(self.num_sockets).unwrap_or(0)
    }

    /// The topology from the machine's facts (upstream's `Discover`, from cAdvisor's
    /// `MachineInfo`): each core's id is the lowest of its threads.
    pub fn discover(machine: &MachineTopology) -> Result<CpuTopology, TopologyError> {
        if machine.num_cpus == 0 {
            return Err(TopologyError::NoCpus);
        }
        let mut details = BTreeMap::new();
        let mut num_cores = 0;
        for node in &machine.numa_nodes {
            num_cores += node.cores.len();
            for core in &node.cores {
                let core_id = unique_core_id(&core.threads)?;
                for cpu in &core.threads {
                    details.insert(
                        *cpu,
                        CpuInfo {
                            numa_node: node.id,
                            socket: core.socket_id,
                            core: core_id,
                        },
                    );
                }
            }
        }
        let cpu_details = CpuDetails(details);
        Ok(CpuTopology {
            num_cpus: machine.num_cpus,
            num_sockets: machine.num_sockets,
            num_cores,
            num_numa_nodes: cpu_details.numa_nodes().len(),
            cpu_details,
        })
    }
}

fn unique_core_id(threads: &[usize]) -> Result<usize, TopologyError> {
    let Some(min) = threads.iter().min() else {
        return Err(TopologyError::NoThreads);
    };
    if CpuSet::new(threads.iter().copied()).len() != threads.len() {
        return Err(TopologyError::DuplicateThreads);
    }
    Ok(*min)
}

/// The machine's CPU facts, as cAdvisor's `MachineInfo` holds them: the logical CPU count,
/// the socket count, and each NUMA node's cores with their threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineTopology {
    /// Logical CPUs (cAdvisor's `NumCores`).
    pub num_cpus: usize,
    pub num_sockets: usize,
    pub numa_nodes: Vec<MachineNumaNode>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineNumaNode {
    pub id: usize,
    pub cores: Vec<MachineCore>,
    /// The node's distance to each NUMA node, by node id (sysfs `distance`); the
    /// topology manager's `prefer-closest-numa-nodes` needs them.
    pub distances: Vec<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineCore {
    pub id: usize,
    pub socket_id: usize,
    /// The logical CPUs of the core.
    pub threads: Vec<usize>,
}

/// One online CPU as sysfs describes it (`cpu<N>/topology/physical_package_id` and
/// `core_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SysfsCpu {
    pub cpu: usize,
    pub socket_id: usize,
    pub core_id: usize,
}

/// One NUMA node as sysfs describes it (`node<N>/cpulist`, `distance`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsNumaNode {
    pub id: usize,
    pub cpus: CpuSet,
    pub distances: Vec<u64>,
}

impl MachineTopology {
    /// The machine's topology from sysfs facts, as cAdvisor groups them: threads with the
    /// same socket and core id form a core, each core in the NUMA node listing its first
    /// thread; without NUMA nodes (a kernel without `CONFIG_NUMA`) every CPU is node 0's.
    pub fn from_sysfs(cpus: &[SysfsCpu], nodes: &[SysfsNumaNode]) -> MachineTopology {
        let fallback = [SysfsNumaNode {
            id: 0,
            cpus: CpuSet::new(cpus.iter().map(|c| c.cpu)),
            distances: Vec::new(),
        }];
        let nodes = if nodes.is_empty() {
            &fallback[..]
        } else {
            nodes
        };
        let numa_nodes = nodes
            .iter()
            .map(|node| {
                let mut cores: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
                for c in cpus.iter().filter(|c| node.cpus.contains(c.cpu)) {
                    cores
                        .entry((c.socket_id, c.core_id))
                        .or_default()
                        .push(c.cpu);
                }
                MachineNumaNode {
                    id: node.id,
                    cores: cores
                        .into_iter()
                        .map(|((socket_id, id), threads)| MachineCore {
                            id,
                            socket_id,
                            threads,
                        })
                        .collect(),
                    distances: node.distances.clone(),
                }
            })
            .collect();
        MachineTopology {
            num_cpus: cpus.len(),
            num_sockets: CpuSet::new(cpus.iter().map(|c| c.socket_id)).len(),
            numa_nodes,
        }
    }
}

/// Why the topology could not be built, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("could not detect number of cpus")]
    NoCpus,
    #[error("no cpus provided")]
    NoThreads,
    #[error("cpus provided are not unique")]
    DuplicateThreads,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::resource_managers::fixtures::*;

    fn ids(v: &[usize]) -> CpuSet {
        CpuSet::new(v.iter().copied())
    }

    fn core(id: usize, socket_id: usize, threads: &[usize]) -> MachineCore {
        MachineCore {
            id,
            socket_id,
            threads: threads.to_vec(),
        }
    }

    // Upstream's TestDiscoverTopology: "OneSocketHT".
    #[test]
    fn discover_builds_one_socket_with_smt() {
        let machine = MachineTopology {
            num_cpus: 8,
            num_sockets: 1,
            numa_nodes: vec![MachineNumaNode {
                id: 0,
                cores: vec![
                    core(0, 0, &[0, 4]),
                    core(1, 0, &[1, 5]),
                    core(2, 0, &[2, 6]),
                    core(3, 0, &[3, 7]),
                ],
                distances: vec![],
            }],
        };
        let topo = CpuTopology::discover(&machine).expect("valid machine");
        assert_eq!(topo.num_cpus, 8);
        assert_eq!(topo.num_sockets, 1);
        assert_eq!(topo.num_cores, 4);
        assert_eq!(topo.num_numa_nodes, 1);
        assert_eq!(topo.cpus_per_core(), 2);
        assert_eq!(topo.cpus_per_socket(), 8);
        assert_eq!(
            topo.cpu_details.get(5),
            Some(&CpuInfo {
                numa_node: 0,
                socket: 0,
                core: 1
            })
        );
    }

    // Upstream's TestDiscoverTopology: "DualSocketNoHT", "DualNumaMultiSocketPerNumaHT"
    // in short: core ids are the lowest thread, NUMA nodes are counted from the CPUs.
    #[test]
    fn discover_takes_the_lowest_thread_as_core_id() {
        let machine = MachineTopology {
            num_cpus: 8,
            num_sockets: 2,
            numa_nodes: vec![
                MachineNumaNode {
                    id: 0,
                    cores: vec![core(0, 0, &[4, 0]), core(1, 0, &[5, 1])],
                    distances: vec![],
                },
                MachineNumaNode {
                    id: 1,
                    cores: vec![core(0, 1, &[6, 2]), core(1, 1, &[3, 7])],
                    distances: vec![],
                },
            ],
        };
        let topo = CpuTopology::discover(&machine).expect("valid machine");
        assert_eq!(topo.num_cores, 4);
        assert_eq!(topo.num_numa_nodes, 2);
        assert_eq!(topo.cpu_details.cores(), ids(&[0, 1, 2, 3]));
        assert_eq!(topo.cpu_details.cpus_in_cores(&[2]), ids(&[2, 6]));
        assert_eq!(
            topo.cpu_details.cpus_in_numa_nodes(&[1]),
            ids(&[2, 3, 6, 7])
        );
    }

    // Upstream's TestDiscoverTopology error cases.
    #[test]
    fn discover_refuses_bad_machines_in_upstream_words() {
        assert_eq!(
            CpuTopology::discover(&MachineTopology::default()).map_err(|e| e.to_string()),
            Err("could not detect number of cpus".to_string())
        );
        let mut machine = MachineTopology {
            num_cpus: 2,
            num_sockets: 1,
            numa_nodes: vec![MachineNumaNode {
                id: 0,
                cores: vec![core(0, 0, &[])],
                distances: vec![],
            }],
        };
        assert_eq!(
            CpuTopology::discover(&machine).map_err(|e| e.to_string()),
            Err("no cpus provided".to_string())
        );
        machine.numa_nodes[0].cores = vec![core(0, 0, &[0, 0])];
        assert_eq!(
            CpuTopology::discover(&machine).map_err(|e| e.to_string()),
            Err("cpus provided are not unique".to_string())
        );
    }

    // The filters upstream's TestCPUDetails* tests cover, on one small table.
    #[test]
    fn cpu_details_filters() {
        let details = CpuDetails(BTreeMap::from([
            (
                0,
                CpuInfo {
                    numa_node: 0,
                    socket: 0,
                    core: 0,
                },
            ),
            (
                1,
                CpuInfo {
                    numa_node: 0,
                    socket: 0,
                    core: 1,
                },
            ),
            (
                2,
                CpuInfo {
                    numa_node: 1,
                    socket: 1,
                    core: 2,
                },
            ),
        ]));
        assert_eq!(details.keep_only(&ids(&[0, 1])).cpus(), ids(&[0, 1]));
        assert_eq!(details.keep_only(&ids(&[0, 1, 5])).cpus(), ids(&[0, 1]));
        assert_eq!(details.keep_only(&ids(&[])).cpus(), ids(&[]));
        assert_eq!(details.numa_nodes(), ids(&[0, 1]));
        assert_eq!(details.numa_nodes_in_sockets(&[0]), ids(&[0]));
        assert_eq!(details.numa_nodes_in_sockets(&[1, 2]), ids(&[1]));
        assert_eq!(details.sockets(), ids(&[0, 1]));
        assert_eq!(details.cpus_in_sockets(&[0]), ids(&[0, 1]));
        assert_eq!(details.cpus_in_sockets(&[1, 2]), ids(&[2]));
        assert_eq!(details.sockets_in_numa_nodes(&[0]), ids(&[0]));
        assert_eq!(details.sockets_in_numa_nodes(&[1, 2]), ids(&[1]));
        assert_eq!(details.cores(), ids(&[0, 1, 2]));
        assert_eq!(details.cores_in_numa_nodes(&[0]), ids(&[0, 1]));
        assert_eq!(details.cores_in_numa_nodes(&[1, 2]), ids(&[2]));
        assert_eq!(details.cores_in_sockets(&[0]), ids(&[0, 1]));
        assert_eq!(details.cores_in_sockets(&[1, 2]), ids(&[2]));
        assert_eq!(details.cpus(), ids(&[0, 1, 2]));
        assert_eq!(details.cpus_in_numa_nodes(&[0]), ids(&[0, 1]));
        assert_eq!(details.cpus_in_numa_nodes(&[1, 2]), ids(&[2]));
        assert_eq!(details.cpus_in_cores(&[0]), ids(&[0]));
        assert_eq!(details.cpus_in_cores(&[1, 2]), ids(&[1, 2]));
    }

    #[test]
    fn per_core_and_per_socket_counts() {
        let topo = topo_dual_socket_ht();
        assert_eq!(topo.cpus_per_core(), 2);
        assert_eq!(topo.cpus_per_socket(), 6);
        assert_eq!(CpuTopology::default().cpus_per_core(), 0);
        assert_eq!(CpuTopology::default().cpus_per_socket(), 0);
    }

    #[test]
    fn sysfs_facts_group_threads_into_cores_and_nodes() {
        // Two sockets, two threads per core, one NUMA node per socket.
        let cpu = |cpu, socket_id, core_id| SysfsCpu {
            cpu,
            socket_id,
            core_id,
        };
        let cpus = [cpu(0, 0, 0), cpu(1, 1, 0), cpu(2, 0, 0), cpu(3, 1, 0)];
        let nodes = [
            SysfsNumaNode {
                id: 0,
                cpus: ids(&[0, 2]),
                distances: vec![10, 20],
            },
            SysfsNumaNode {
                id: 1,
                cpus: ids(&[1, 3]),
                distances: vec![20, 10],
            },
        ];
        let machine = MachineTopology::from_sysfs(&cpus, &nodes);
        assert_eq!(machine.num_cpus, 4);
        assert_eq!(machine.num_sockets, 2);
        assert_eq!(machine.numa_nodes[1].cores[0].threads, vec![1, 3]);
        assert_eq!(machine.numa_nodes[1].distances, vec![20, 10]);
        let topo = CpuTopology::discover(&machine).unwrap_or_default();
        assert_eq!(topo.cpus_per_core(), 2);
        assert_eq!(topo.num_numa_nodes, 2);
        // This VM's shape: no NUMA folder, two single-thread cores.
        let vm = MachineTopology::from_sysfs(&[cpu(0, 0, 0), cpu(1, 0, 1)], &[]);
        assert_eq!(vm.numa_nodes.len(), 1);
        assert_eq!(vm.numa_nodes[0].cores.len(), 2);
        assert_eq!(vm.num_sockets, 1);
    }
}
