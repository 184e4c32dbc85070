//! The topology manager (upstream v1.26 `pkg/kubelet/cm/topologymanager`): at pod
//! admission it asks every hint provider (the CPU manager, and later the device and
//! memory managers) where each container's resources could come from, merges their hints
//! with the configured policy, refuses the pod when the policy says so
//! (`TopologyAffinityError`), remembers the chosen affinity per container and has the
//! providers allocate with it. The scope says whether hints are merged per container or
//! once for the whole pod.

pub mod bitmask;
pub mod hint;
pub mod numa_info;
pub mod policy;

use std::collections::BTreeMap;

use crate::domain::admission::Rejection;
use crate::domain::pod::{Container, Pod};
use crate::domain::resource_managers::OptionGates;

pub use bitmask::BitMask;
pub use hint::{ProviderHints, TopologyHint};
pub use numa_info::NumaInfo;
pub use policy::{Policy, PolicyOptions};

/// More NUMA nodes than this make the merge (every permutation of hints) too costly;
/// upstream refuses such machines for every policy but `none`.
pub const MAX_ALLOWABLE_NUMA_NODES: usize = 8;

/// The admission failure reason when the policy refuses the merged hint.
pub const ERROR_TOPOLOGY_AFFINITY: &str = "TopologyAffinityError";
/// The message that goes with [`ERROR_TOPOLOGY_AFFINITY`].
pub const TOPOLOGY_AFFINITY_MESSAGE: &str = "Resources cannot be allocated with Topology locality";
/// The reason of an allocation error that carries none of its own.
pub const ERROR_REASON_UNEXPECTED: &str = "UnexpectedAdmissionError";

pub const CONTAINER_TOPOLOGY_SCOPE: &str = "container";
pub const POD_TOPOLOGY_SCOPE: &str = "pod";

/// Why the topology manager could not be built, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyManagerError {
    #[error("unknown Topology Manager Policy option: {}", crate::domain::units::go_quote(.0))]
    UnknownOption(String),
    #[error(
        "Topology Manager Policy Alpha-level Options not enabled, but option {} provided",
        crate::domain::units::go_quote(.0)
    )]
    AlphaOptionsDisabled(String),
    #[error("bad value for option {}: {reason}", crate::domain::units::go_quote(.option))]
    BadOptionValue { option: String, reason: String },
    #[error("cannot discover NUMA topology: error getting NUMA distances from cadvisor")]
    NoNumaDistances,
    #[error("unsupported on machines with more than {MAX_ALLOWABLE_NUMA_NODES} NUMA Nodes")]
    TooManyNumaNodes,
    #[error("unknown policy: \"{0}\"")]
    UnknownPolicy(String),
    #[error("unknown scope: \"{0}\"")]
    UnknownScope(String),
}

/// One NUMA node as the machine reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaNode {
    pub id: usize,
    /// Distances to every node by node id; empty when unknown.
    pub distances: Vec<u64>,
}

/// Whether hints are merged per container or once for the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Container,
    Pod,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Container => CONTAINER_TOPOLOGY_SCOPE,
            Scope::Pod => POD_TOPOLOGY_SCOPE,
        }
    }
}

/// A resource manager the topology manager consults (upstream's `HintProvider`).
pub trait HintProvider {
    /// Where the container's resources could come from.
    fn get_topology_hints(&self, pod: &Pod, container: &Container) -> ProviderHints;
    /// Where the whole pod's resources could come from.
    fn get_pod_topology_hints(&self, pod: &Pod) -> ProviderHints;
    /// Allocates the container's resources within `affinity` (the merged hint); the
    /// rejection carries the provider's reason, or [`unexpected_admission_error`].
    fn allocate(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), Rejection>;
}

/// The rejection for an allocation error that has no reason of its own (upstream's
/// `unexpectedAdmissionError`).
pub fn unexpected_admission_error(err: &dyn std::fmt::Display) -> Rejection {
    Rejection {
        reason: ERROR_REASON_UNEXPECTED.to_string(),
        message: format!("Allocate failed due to {err}, which is unexpected"),
    }
}

/// The rejection when the policy refuses the merged hint.
pub fn topology_affinity_error() -> Rejection {
    Rejection {
        reason: ERROR_TOPOLOGY_AFFINITY.to_string(),
        message: TOPOLOGY_AFFINITY_MESSAGE.to_string(),
    }
}

/// The topology manager's state: its policy and scope, the affinity chosen for each
/// admitted container, and which container ids belong to which pod container.
#[derive(Debug, Clone, PartialEq)]
pub struct TopologyManager {
    policy: Policy,
    scope: Scope,
    /// Pod UID, container name: the merged hint chosen at admission.
    pod_topology_hints: BTreeMap<String, BTreeMap<String, TopologyHint>>,
    /// Container id: (pod UID, container name).
    pod_map: BTreeMap<String, (String, String)>,
}

impl TopologyManager {
    /// The manager for `topologyManagerPolicy`, `topologyManagerScope` and
    /// `topologyManagerPolicyOptions` on a machine with these NUMA nodes (upstream's
    /// `NewManager`).
    pub fn new(
        numa_nodes: &[NumaNode],
        policy_name: &str,
        scope_name: &str,
        policy_options: &BTreeMap<String, String>,
        gates: OptionGates,
    ) -> Result<TopologyManager, TopologyManagerError> {
        let opts = PolicyOptions::new(policy_options, gates)?;
        let mut numa_info = NumaInfo::default();
        for node in numa_nodes {
            numa_info.nodes.push(node.id);
            let distances = if opts.prefer_closest_numa {
                if node.distances.is_empty() {
                    return Err(TopologyManagerError::NoNumaDistances);
                }
                node.distances.clone()
            } else {
                Vec::new()
            };
            numa_info.numa_distances.insert(node.id, distances);
        }
        if policy_name != policy::POLICY_NONE && numa_info.nodes.len() > MAX_ALLOWABLE_NUMA_NODES {
            return Err(TopologyManagerError::TooManyNumaNodes);
        }
        let policy = match policy_name {
            policy::POLICY_NONE => Policy::None,
            policy::POLICY_BEST_EFFORT => Policy::BestEffort { numa_info, opts },
            policy::POLICY_RESTRICTED => Policy::Restricted { numa_info, opts },
            policy::POLICY_SINGLE_NUMA_NODE => Policy::SingleNumaNode { numa_info, opts },
            other => return Err(TopologyManagerError::UnknownPolicy(other.to_string())),
        };
        let scope = match scope_name {
            CONTAINER_TOPOLOGY_SCOPE => Scope::Container,
            POD_TOPOLOGY_SCOPE => Scope::Pod,
            other => return Err(TopologyManagerError::UnknownScope(other.to_string())),
        };
        Ok(TopologyManager::with_policy(policy, scope))
    }

    /// A manager with this policy and scope and nothing admitted yet.
    pub fn with_policy(policy: Policy, scope: Scope) -> TopologyManager {
        TopologyManager {
            policy,
            scope,
            pod_topology_hints: BTreeMap::new(),
            pod_map: BTreeMap::new(),
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The hint chosen for the container at admission; "anywhere", not preferred, when
    /// none was (upstream's `GetAffinity`).
    pub fn get_affinity(&self, pod_uid: &str, container_name: &str) -> TopologyHint {
        self.pod_topology_hints
            .get(pod_uid)
            .and_then(|c| c.get(container_name))
            .copied()
            .unwrap_or_default()
    }

    fn set_topology_hints(&mut self, pod_uid: &str, container_name: &str, hint: TopologyHint) {
        self.pod_topology_hints
            .entry(pod_uid.to_string())
            .or_default()
            .insert(container_name.to_string(), hint);
    }

    /// Records that the runtime created `container_id` for this pod container.
    pub fn add_container(&mut self, pod_uid: &str, container_name: &str, container_id: &str) {
        self.pod_map.insert(
            container_id.to_string(),
            (pod_uid.to_string(), container_name.to_string()),
        );
    }

    /// Forgets a removed container, and its pod container's hint once no other
    /// container id is left for it.
    pub fn remove_container(&mut self, container_id: &str) {
        let Some((pod_uid, container_name)) = self.pod_map.remove(container_id) else {
            return;
        };
        let still_there = self
            .pod_map
            .values()
            .any(|(p, c)| *p == pod_uid && *c == container_name);
        if still_there {
            return;
        }
        if let Some(containers) = self.pod_topology_hints.get_mut(&pod_uid) {
            containers.remove(&container_name);
            if containers.is_empty() {
                self.pod_topology_hints.remove(&pod_uid);
            }
        }
    }

    /// Admits the pod or refuses it (upstream's `Admit` of the container or pod scope):
    /// merges the providers' hints, refuses with `TopologyAffinityError` when the policy
    /// does, records each container's hint and has every provider allocate, init
    /// containers first. With the `none` policy only the allocations happen.
    pub fn admit(
        &mut self,
        pod: &Pod,
        providers: &mut [&mut dyn HintProvider],
    ) -> Result<(), Rejection> {
        let containers: Vec<&Container> = pod
            .spec
            .init_containers
            .iter()
            .chain(&pod.spec.containers)
            .collect();
        if self.policy == Policy::None {
            for container in containers {
                let affinity = self.get_affinity(&pod.metadata.uid, &container.name);
                allocate_aligned_resources(providers, pod, container, &affinity)?;
            }
            return Ok(());
        }
        match self.scope {
            Scope::Container => {
                for container in containers {
                    let hints: Vec<ProviderHints> = providers
                        .iter()
                        .map(|p| p.get_topology_hints(pod, container))
                        .collect();
                    let (best, admit) = self.policy.merge(&hints);
                    if !admit {
                        return Err(topology_affinity_error());
                    }
                    self.set_topology_hints(&pod.metadata.uid, &container.name, best);
                    allocate_aligned_resources(providers, pod, container, &best)?;
                }
            }
            Scope::Pod => {
                let hints: Vec<ProviderHints> = providers
                    .iter()
                    .map(|p| p.get_pod_topology_hints(pod))
                    .collect();
                let (best, admit) = self.policy.merge(&hints);
                if !admit {
                    return Err(topology_affinity_error());
                }
                for container in containers {
                    self.set_topology_hints(&pod.metadata.uid, &container.name, best);
                    allocate_aligned_resources(providers, pod, container, &best)?;
                }
            }
        }
        Ok(())
    }
}

fn allocate_aligned_resources(
    providers: &mut [&mut dyn HintProvider],
    pod: &Pod,
    container: &Container,
    affinity: &TopologyHint,
) -> Result<(), Rejection> {
    for provider in providers.iter_mut() {
        provider.allocate(pod, container, affinity)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
