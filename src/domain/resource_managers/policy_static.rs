//! The CPU manager's `static` policy (upstream v1.26 `policy_static.go`): containers of
//! Guaranteed pods that request a whole number of CPUs get CPUs of their own; everything
//! else runs on the shared pool.
//!
//! The sets it keeps: the *shared* (default) set, all CPUs at first, shrinking and
//! growing as exclusive sets are handed out and given back; the *reserved* set, part of
//! the shared set never handed out (`reservedSystemCPUs`, or as many CPUs as
//! kube-reserved + system-reserved CPU, taken by topology); the *assignable* set, shared
//! minus reserved; and the exclusive assignments in [`CpuManagerState`].

use std::collections::BTreeMap;

use super::cpu_assignment::{
    take_by_topology_numa_distributed, take_by_topology_numa_packed, CpuAssignmentError,
};
use super::policy_options::{
    validate_static_policy_options, PolicyOptionError, StaticPolicyOptions,
};
use super::state::CpuManagerState;
use super::topology::CpuTopology;
use super::topology_manager::bitmask::{iterate_bit_masks, BitMask};
use super::topology_manager::{
    unexpected_admission_error, HintProvider, ProviderHints, TopologyHint,
};
use super::OptionGates;
use crate::domain::admission::Rejection;
use crate::domain::node::reserved::ResourceList;
use crate::domain::pod::qos::qos_class;
use crate::domain::pod::{Container, Pod, QosClass};
use crate::domain::units::cpuset::CpuSet;

/// The policy's name, in the checkpoint and in `cpuManagerPolicy`.
pub const POLICY_STATIC: &str = "static";
/// The admission failure reason of [`AllocateError::SmtAlignment`].
pub const ERROR_SMT_ALIGNMENT: &str = "SMTAlignmentError";
/// The resource name of the CPU hints.
pub const RESOURCE_CPU: &str = "cpu";

/// Why the policy could not be built or started, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaticPolicyError {
    #[error(transparent)]
    Options(#[from] PolicyOptionError),
    #[error("[cpumanager] unable to reserve the required amount of CPUs (size of {reserved} did not equal {num_reserved_cpus})")]
    UnableToReserve {
        reserved: CpuSet,
        num_reserved_cpus: usize,
    },
    #[error("default cpuset cannot be empty")]
    EmptyDefaultCpuSet,
    #[error("not all reserved cpus: \"{reserved}\" are present in defaultCpuSet: \"{default}\"")]
    ReservedNotInDefault { reserved: CpuSet, default: CpuSet },
    #[error("pod: {pod}, container: {container} cpuset: \"{cpus}\" overlaps with default cpuset \"{default}\"")]
    AssignmentOverlapsDefault {
        pod: String,
        container: String,
        cpus: CpuSet,
        default: CpuSet,
    },
    #[error(
        "current set of available CPUs \"{current}\" doesn't match with CPUs in state \"{state}\""
    )]
    CpusChanged { current: CpuSet, state: CpuSet },
}

/// Why the CPU reservation does not allow the static policy (upstream's `NewManager`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    /// Upstream's node allocatable reservation leaves a zero sum out, so a node that
    /// reserves no CPU meets this message.
    #[error("[cpumanager] unable to determine reserved CPU resources for static policy")]
    Unknown,
    #[error("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero")]
    Zero,
}

/// Why a container's CPUs could not be allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    /// With `full-pcpus-only`, a request that would split a core (upstream's wording,
    /// "multiple cpus" without "of", kept).
    #[error("SMT Alignment Error: requested {requested_cpus} cpus not multiple cpus per core = {cpus_per_core}")]
    SmtAlignment {
        requested_cpus: usize,
        cpus_per_core: usize,
    },
    #[error(transparent)]
    Assignment(#[from] CpuAssignmentError),
}

impl AllocateError {
    /// The pod's admission failure (upstream's `GetPodAdmitResult`): the SMT error has its
    /// own reason; any other is unexpected.
    pub fn to_rejection(&self) -> Rejection {
        match self {
            AllocateError::SmtAlignment { .. } => Rejection {
                reason: ERROR_SMT_ALIGNMENT.to_string(),
                message: self.to_string(),
            },
            AllocateError::Assignment(e) => unexpected_admission_error(e),
        }
    }
}

/// How many CPUs to reserve from the node's allocatable reservation (the sum of
/// kube-reserved and system-reserved, as `node::allocatable::node_allocatable_reservation`
/// computes it, which leaves a zero sum out): the CPU quantity rounded up.
pub fn num_reserved_cpus(
    node_allocatable_reservation: &ResourceList,
) -> Result<usize, ReservationError> {
    let cpu = node_allocatable_reservation
        .get(RESOURCE_CPU)
        .ok_or(ReservationError::Unknown)?;
    if cpu.is_zero() {
        return Err(ReservationError::Zero);
    }
    let milli = cpu.milli_value().max(0);
    Ok(usize::try_from(milli.div_euclid(1000) + i64::from(milli % 1000 != 0)).unwrap_or(0))
}

/// The static policy (upstream's `staticPolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticPolicy {
    topology: CpuTopology,
    reserved: CpuSet,
    /// Pod UID: CPUs its init containers had, which its next containers may take again.
    cpus_to_reuse: BTreeMap<String, CpuSet>,
    options: StaticPolicyOptions,
}

impl StaticPolicy {
    /// The policy for this machine (upstream's `NewStaticPolicy`): the options are parsed
    /// and checked against the machine and the topology manager's policy, and the reserved
    /// set is `reserved_cpus` when given, else `num_reserved_cpus` CPUs taken by topology
    /// (the lowest cores first).
    pub fn new(
        topology: CpuTopology,
        num_reserved_cpus: usize,
        reserved_cpus: &CpuSet,
        topology_manager_policy: &str,
        policy_options: &BTreeMap<String, String>,
        gates: OptionGates,
    ) -> Result<StaticPolicy, StaticPolicyError> {
        let options = StaticPolicyOptions::new(policy_options, gates)?;
        validate_static_policy_options(&options, &topology, topology_manager_policy)?;
        let mut policy = StaticPolicy {
            topology,
            reserved: CpuSet::default(),
            cpus_to_reuse: BTreeMap::new(),
            options,
        };
        let reserved = if reserved_cpus.is_empty() {
            let all = policy.topology.cpu_details.cpus();
            // An error leaves the set empty; the size check below reports it.
            policy
                .take_by_topology(&all, num_reserved_cpus)
                .unwrap_or_default()
        } else {
            reserved_cpus.clone()
        };
        if reserved.len() != num_reserved_cpus {
            return Err(StaticPolicyError::UnableToReserve {
                reserved,
                num_reserved_cpus,
            });
        }
        policy.reserved = reserved;
        Ok(policy)
    }

    pub fn name(&self) -> &'static str {
        POLICY_STATIC
    }

    pub fn options(&self) -> &StaticPolicyOptions {
        &self.options
    }

    pub fn topology(&self) -> &CpuTopology {
        &self.topology
    }

    /// CPUs never handed out exclusively.
    pub fn reserved(&self) -> &CpuSet {
        &self.reserved
    }

    /// Checks a restored state, or fills an empty one with every CPU (upstream's `Start`
    /// and `validateState`). An error means the node must be drained and the state file
    /// removed.
    pub fn start(&self, state: &mut CpuManagerState) -> Result<(), StaticPolicyError> {
        let default = state.get_default_cpu_set().clone();
        let all_cpus = self.topology.cpu_details.cpus();
        if default.is_empty() {
            if !state.get_cpu_assignments().is_empty() {
                return Err(StaticPolicyError::EmptyDefaultCpuSet);
            }
            state.set_default_cpu_set(all_cpus);
            return Ok(());
        }
        // Reserved CPUs missing from the shared set: the reservation grew, or the file was
        // edited.
        if !self.reserved.is_subset_of(&default) {
            return Err(StaticPolicyError::ReservedNotInDefault {
                reserved: self.reserved.clone(),
                default,
            });
        }
        let mut known = default.clone();
        for (pod, containers) in state.get_cpu_assignments() {
            for (container, cpus) in containers {
                if cpus.iter().any(|c| default.contains(c)) {
                    return Err(StaticPolicyError::AssignmentOverlapsDefault {
                        pod: pod.clone(),
                        container: container.clone(),
                        cpus: cpus.clone(),
                        default,
                    });
                }
                known = known.union(cpus);
            }
        }
        // CPUs went offline (or came online) while the kubelet was down.
        if known != all_cpus {
            return Err(StaticPolicyError::CpusChanged {
                current: all_cpus,
                state: known,
            });
        }
        Ok(())
    }

    /// Every CPU but the reserved ones (upstream's `GetAllocatableCPUs`).
    pub fn allocatable_cpus(&self) -> CpuSet {
        self.topology.cpu_details.cpus().difference(&self.reserved)
    }

    /// The shared set minus the reserved CPUs (upstream's `GetAvailableCPUs`).
    pub fn available_cpus(&self, state: &CpuManagerState) -> CpuSet {
        state.get_default_cpu_set().difference(&self.reserved)
    }

    fn update_cpus_to_reuse(&mut self, pod: &Pod, container: &Container, cpus: &CpuSet) {
        let uid = pod.metadata.uid.clone();
        // Only the pod being admitted keeps reusable CPUs.
        self.cpus_to_reuse.retain(|pod_uid, _| *pod_uid == uid);
        let reuse = self.cpus_to_reuse.entry(uid).or_default();
        let is_init = pod
            .spec
            .init_containers
            .iter()
            .any(|c| c.name == container.name);
        *reuse = if is_init {
            reuse.union(cpus)
        } else {
            reuse.difference(cpus)
        };
    }

    /// Gives the container exclusive CPUs when it is entitled to them, within the
    /// topology manager's `affinity` where it can (upstream's `Allocate`; idempotent).
    pub fn allocate(
        &mut self,
        state: &mut CpuManagerState,
        pod: &Pod,
        container: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), AllocateError> {
        let num_cpus = self.guaranteed_cpus(pod, container);
        if num_cpus == 0 {
            return Ok(());
        }
        let per_core = self.topology.cpus_per_core();
        if self.options.full_physical_cpus_only
            && (per_core == 0 || !num_cpus.is_multiple_of(per_core))
        {
            return Err(AllocateError::SmtAlignment {
                requested_cpus: num_cpus,
                cpus_per_core: per_core,
            });
        }
        if let Some(cpus) = state
            .get_cpu_set(&pod.metadata.uid, &container.name)
            .cloned()
        {
            self.update_cpus_to_reuse(pod, container, &cpus);
            return Ok(());
        }
        let reusable = self
            .cpus_to_reuse
            .get(&pod.metadata.uid)
            .cloned()
            .unwrap_or_default();
        let cpus = self.allocate_cpus(state, num_cpus, affinity.numa_node_affinity, &reusable)?;
        state.set_cpu_set(&pod.metadata.uid, &container.name, cpus.clone());
        self.update_cpus_to_reuse(pod, container, &cpus);
        Ok(())
    }

    /// Gives the container's exclusive CPUs back to the shared set, except those a
    /// sibling container of the pod still holds (upstream's `RemoveContainer`).
    pub fn remove_container(
        &self,
        state: &mut CpuManagerState,
        pod_uid: &str,
        container_name: &str,
    ) {
        let in_use: CpuSet = state
            .get_cpu_assignments()
            .get(pod_uid)
            .map(|containers| {
                containers
                    .iter()
                    .filter(|(name, _)| name.as_str() != container_name)
                    .fold(CpuSet::default(), |acc, (_, cpus)| acc.union(cpus))
            })
            .unwrap_or_default();
        if let Some(to_release) = state.get_cpu_set(pod_uid, container_name).cloned() {
            state.delete(pod_uid, container_name);
            let released = to_release.difference(&in_use);
            let default = state.get_default_cpu_set().union(&released);
            state.set_default_cpu_set(default);
        }
    }

    fn allocate_cpus(
        &self,
        state: &mut CpuManagerState,
        num_cpus: usize,
        numa_affinity: Option<BitMask>,
        reusable: &CpuSet,
    ) -> Result<CpuSet, AllocateError> {
        let allocatable = self.available_cpus(state).union(reusable);
        let mut result = CpuSet::default();
        if let Some(affinity) = numa_affinity {
            let aligned = self.aligned_cpus(affinity, &allocatable);
            let count = aligned.len().min(num_cpus);
            result = result.union(&self.take_by_topology(&aligned, count)?);
        }
        let remaining = self.take_by_topology(
            &allocatable.difference(&result),
            num_cpus.saturating_sub(result.len()),
        )?;
        result = result.union(&remaining);
        let default = state.get_default_cpu_set().difference(&result);
        state.set_default_cpu_set(default);
        Ok(result)
    }

    /// How many exclusive CPUs the container gets: its CPU request when the pod is
    /// Guaranteed and the request is a whole number, else 0.
    pub fn guaranteed_cpus(&self, pod: &Pod, container: &Container) -> usize {
        if qos_class(&pod.spec) != QosClass::Guaranteed {
            return 0;
        }
        let Some(cpu) = container.resources.requests.get(RESOURCE_CPU) else {
            return 0;
        };
        if cpu.value().saturating_mul(1000) != cpu.milli_value() {
            return 0;
        }
        usize::try_from(cpu.value()).unwrap_or(0)
    }

    /// The pod's exclusive CPUs: the most any init container needs, or the sum of its
    /// containers' if more (upstream's `podGuaranteedCPUs`).
    pub fn pod_guaranteed_cpus(&self, pod: &Pod) -> usize {
        let has_request = |c: &&Container| c.resources.requests.contains_key(RESOURCE_CPU);
        let init = pod
            .spec
            .init_containers
            .iter()
            .filter(has_request)
            .map(|c| self.guaranteed_cpus(pod, c))
            .max()
            .unwrap_or(0);
        let app: usize = pod
            .spec
            .containers
            .iter()
            .filter(has_request)
            .map(|c| self.guaranteed_cpus(pod, c))
            .sum();
        init.max(app)
    }

    fn take_by_topology(
        &self,
        available: &CpuSet,
        num_cpus: usize,
    ) -> Result<CpuSet, CpuAssignmentError> {
        if self.options.distribute_cpus_across_numa {
            let group = if self.options.full_physical_cpus_only {
                self.topology.cpus_per_core()
            } else {
                1
            };
            return take_by_topology_numa_distributed(&self.topology, available, num_cpus, group);
        }
        take_by_topology_numa_packed(&self.topology, available, num_cpus)
    }

    /// The container's CPU hints (upstream's `GetTopologyHints`): none (no preference)
    /// when it gets no exclusive CPUs; the hints of its CPUs when it has them already (an
    /// empty list, "fits nowhere", when their number differs from the request).
    pub fn get_topology_hints(
        &self,
        state: &CpuManagerState,
        pod: &Pod,
        container: &Container,
    ) -> ProviderHints {
        let requested = self.guaranteed_cpus(pod, container);
        if requested == 0 {
            return ProviderHints::new();
        }
        let hints = match state.get_cpu_set(&pod.metadata.uid, &container.name) {
            Some(allocated) if allocated.len() != requested => Vec::new(),
            Some(allocated) => {
                self.generate_cpu_topology_hints(allocated, &CpuSet::default(), requested)
            }
            None => {
                let reusable = self
                    .cpus_to_reuse
                    .get(&pod.metadata.uid)
                    .cloned()
                    .unwrap_or_default();
                self.generate_cpu_topology_hints(&self.available_cpus(state), &reusable, requested)
            }
        };
        ProviderHints::from([(RESOURCE_CPU.to_string(), Some(hints))])
    }

    /// The pod's CPU hints (upstream's `GetPodTopologyHints`), counting CPUs its
    /// containers hold already.
    pub fn get_pod_topology_hints(&self, state: &CpuManagerState, pod: &Pod) -> ProviderHints {
        let requested = self.pod_guaranteed_cpus(pod);
        if requested == 0 {
            return ProviderHints::new();
        }
        let cpu_hints = |hints| ProviderHints::from([(RESOURCE_CPU.to_string(), Some(hints))]);
        let mut assigned = CpuSet::default();
        for container in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
            let by_container = self.guaranteed_cpus(pod, container);
            if let Some(allocated) = state.get_cpu_set(&pod.metadata.uid, &container.name) {
                if allocated.len() != by_container {
                    return cpu_hints(Vec::new());
                }
                assigned = assigned.union(allocated);
            }
        }
        if assigned.len() == requested {
            return cpu_hints(self.generate_cpu_topology_hints(
                &assigned,
                &CpuSet::default(),
                requested,
            ));
        }
        let reusable = self
            .cpus_to_reuse
            .get(&pod.metadata.uid)
            .cloned()
            .unwrap_or_default()
            .union(&assigned);
        cpu_hints(self.generate_cpu_topology_hints(
            &self.available_cpus(state),
            &reusable,
            requested,
        ))
    }

    fn numa_of(&self, cpu: usize) -> usize {
        self.topology
            .cpu_details
            .get(cpu)
            .map_or(0, |i| i.numa_node)
    }

    /// One hint per combination of NUMA nodes that could hold the request with every
    /// reusable CPU; preferred are those as narrow as the narrowest combination that the
    /// machine could ever fit it in (upstream's `generateCPUTopologyHints`).
    fn generate_cpu_topology_hints(
        &self,
        available: &CpuSet,
        reusable: &CpuSet,
        request: usize,
    ) -> Vec<TopologyHint> {
        let numa_nodes: Vec<usize> = self.topology.cpu_details.numa_nodes().iter().collect();
        let mut min_affinity_size = numa_nodes.len();
        let mut hints = Vec::new();
        iterate_bit_masks(&numa_nodes, &mut |mask| {
            let cpus_in_mask = self
                .topology
                .cpu_details
                .cpus_in_numa_nodes(&mask.bits())
                .len();
            if cpus_in_mask >= request && mask.count() < min_affinity_size {
                min_affinity_size = mask.count();
            }
            if reusable.iter().any(|c| !mask.is_set(self.numa_of(c))) {
                return;
            }
            let matching = reusable.len()
                + available
                    .iter()
                    .filter(|c| mask.is_set(self.numa_of(*c)))
                    .count();
            if matching < request {
                return;
            }
            hints.push(TopologyHint::new(Some(mask), false));
        });
        for hint in &mut hints {
            let count = hint.numa_node_affinity.map_or(0, |m| m.count());
            if (self.options.align_by_socket
                && self.is_hint_socket_aligned(hint, min_affinity_size))
                || count == min_affinity_size
            {
                hint.preferred = true;
            }
        }
        hints
    }

    /// Whether the hint's NUMA nodes span no more sockets than the request needs at
    /// least (`align-by-socket`).
    fn is_hint_socket_aligned(&self, hint: &TopologyHint, min_affinity_size: usize) -> bool {
        let Some(numa_nodes_per_socket) = self
            .topology
            .num_numa_nodes
            .checked_div(self.topology.num_sockets)
            .filter(|n| *n > 0)
        else {
            return false;
        };
        let bits = hint
            .numa_node_affinity
            .map(|m| m.bits())
            .unwrap_or_default();
        let min_sockets = min_affinity_size.div_ceil(numa_nodes_per_socket);
        self.topology.cpu_details.sockets_in_numa_nodes(&bits).len() == min_sockets
    }

    /// The allocatable CPUs within the affinity's NUMA nodes, or within their sockets
    /// with `align-by-socket` (upstream's `getAlignedCPUs`).
    fn aligned_cpus(&self, affinity: BitMask, allocatable: &CpuSet) -> CpuSet {
        let bits = affinity.bits();
        let within = if self.options.align_by_socket {
            let sockets: Vec<usize> = self
                .topology
                .cpu_details
                .sockets_in_numa_nodes(&bits)
                .iter()
                .collect();
            self.topology.cpu_details.cpus_in_sockets(&sockets)
        } else {
            self.topology.cpu_details.cpus_in_numa_nodes(&bits)
        };
        CpuSet::new(allocatable.iter().filter(|c| within.contains(*c)))
    }
}

/// The static policy with its state as the topology manager's hint provider (upstream's
/// CPU manager in that role).
pub struct StaticPolicyHintProvider<'a> {
    pub policy: &'a mut StaticPolicy,
    pub state: &'a mut CpuManagerState,
}

impl HintProvider for StaticPolicyHintProvider<'_> {
    fn get_topology_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.policy.get_topology_hints(self.state, pod, container)
    }

    fn get_pod_topology_hints(&self, pod: &Pod) -> ProviderHints {
        self.policy.get_pod_topology_hints(self.state, pod)
    }

    fn allocate(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), Rejection> {
        self.policy
            .allocate(self.state, pod, container, affinity)
            .map_err(|e| e.to_rejection())
    }
}

#[cfg(test)]
mod tests {
    //! Upstream v1.26's policy_static_test.go tables (generated from its source) and
    //! topology_hints_test.go cases.
    use super::*;
    use crate::domain::pod::fixtures::{container, list};
    use crate::domain::resource_managers::fixtures::*;
    use crate::domain::resource_managers::policy_options::*;
    use crate::domain::resource_managers::state::ContainerCpuAssignments;

    fn set(cpus: &[usize]) -> CpuSet {
        CpuSet::new(cpus.iter().copied())
    }

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn assignments(rows: Vec<(&str, &str, CpuSet)>) -> ContainerCpuAssignments {
        let mut a = ContainerCpuAssignments::new();
        for (pod, container, cpus) in rows {
            a.entry(pod.to_string())
                .or_default()
                .insert(container.to_string(), cpus);
        }
        a
    }

    fn cpus_in_socket(topo: &CpuTopology, socket: Option<usize>) -> CpuSet {
        topo.cpu_details
            .0
            .iter()
            .filter(|(_, info)| socket.is_none_or(|s| info.socket == s))
            .map(|(cpu, _)| *cpu)
            .collect()
    }

    fn large_topo_cpu_set() -> CpuSet {
        cpus_in_socket(topo_quad_socket_four_way_ht(), None)
    }

    fn large_topo_sock0_cpu_set() -> CpuSet {
        cpus_in_socket(topo_quad_socket_four_way_ht(), Some(0))
    }

    fn large_topo_sock1_cpu_set() -> CpuSet {
        cpus_in_socket(topo_quad_socket_four_way_ht(), Some(1))
    }

    /// Upstream's `makePod`: one container requesting and limiting CPU and 1G memory.
    fn make_pod(pod_uid: &str, container_name: &str, cpu_request: &str, cpu_limit: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.uid = pod_uid.to_string();
        pod.spec.containers = vec![container(
            container_name,
            list(cpu_request, "1G"),
            list(cpu_limit, "1G"),
        )];
        pod
    }

    /// Upstream's `makeMultiContainerPod`.
    fn make_multi_container_pod(init: &[(&str, &str)], app: &[(&str, &str)]) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = "pod".into();
        pod.metadata.uid = "podUID".into();
        let make = |prefix: &str, (i, (request, limit)): (usize, &(&str, &str))| {
            container(
                &format!("{prefix}-{i}"),
                list(request, "1G"),
                list(limit, "1G"),
            )
        };
        pod.spec.init_containers = init
            .iter()
            .enumerate()
            .map(|c| make("initContainer", c))
            .collect();
        pod.spec.containers = app
            .iter()
            .enumerate()
            .map(|c| make("appContainer", c))
            .collect();
        pod
    }

    /// Upstream's `staticPolicyTest` (and `staticPolicyTestWithResvList`).
    struct StaticPolicyTest {
        description: &'static str,
        topo: &'static CpuTopology,
        num_reserved_cpus: usize,
        reserved: CpuSet,
        pod_uid: &'static str,
        options: BTreeMap<String, String>,
        container_name: &'static str,
        st_assignments: ContainerCpuAssignments,
        st_default_cpu_set: CpuSet,
        pod: Option<Pod>,
        topology_hint: Option<TopologyHint>,
        exp_err: Option<&'static str>,
        exp_new_err: Option<&'static str>,
        exp_cpu_alloc: bool,
        exp_cset: CpuSet,
    }

    impl Default for StaticPolicyTest {
        fn default() -> Self {
            StaticPolicyTest {
                description: "",
                topo: topo_single_socket_ht(),
                num_reserved_cpus: 0,
                reserved: CpuSet::default(),
                pod_uid: "",
                options: BTreeMap::new(),
                container_name: "",
                st_assignments: ContainerCpuAssignments::new(),
                st_default_cpu_set: CpuSet::default(),
                pod: None,
                topology_hint: None,
                exp_err: None,
                exp_new_err: None,
                exp_cpu_alloc: false,
                exp_cset: CpuSet::default(),
            }
        }
    }

    const ALL_GATES: OptionGates = OptionGates {
        alpha: true,
        beta: true,
    };

    fn new_policy(tc: &StaticPolicyTest) -> Result<StaticPolicy, StaticPolicyError> {
        StaticPolicy::new(
            tc.topo.clone(),
            tc.num_reserved_cpus,
            &tc.reserved,
            "none",
            &tc.options,
            ALL_GATES,
        )
    }

    fn state_of(tc: &StaticPolicyTest) -> CpuManagerState {
        CpuManagerState::new(tc.st_default_cpu_set.clone(), tc.st_assignments.clone())
    }

    #[test]
    fn static_policy_name() {
        let policy = StaticPolicy::new(
            topo_single_socket_ht().clone(),
            1,
            &CpuSet::default(),
            "none",
            &BTreeMap::new(),
            ALL_GATES,
        )
        .expect("valid policy");
        assert_eq!(policy.name(), "static");
    }

    // TestStaticPolicyStart.
    #[test]
    fn static_policy_start() {
        let cases = vec![
        StaticPolicyTest {
            description: "non-corrupted state",
            topo: topo_dual_socket_ht(),
            st_assignments: assignments(vec![("fakePod", "0", set(&[0]))]),
            st_default_cpu_set: set(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            exp_cset: set(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "empty cpuset",
            topo: topo_dual_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[]),
            exp_cset: set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "reserved cores 0 & 6 are not present in available cpuset",
            topo: topo_dual_socket_ht(),
            num_reserved_cpus: 2,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[0, 1]),
            exp_err: Some("not all reserved cpus: \"0,6\" are present in defaultCpuSet: \"0-1\""),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "assigned core 2 is still present in available cpuset",
            topo: topo_dual_socket_ht(),
            st_assignments: assignments(vec![("fakePod", "0", set(&[0, 1, 2]))]),
            st_default_cpu_set: set(&[2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            exp_err: Some("pod: fakePod, container: 0 cpuset: \"0-2\" overlaps with default cpuset \"2-11\""),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "core 12 is not present in topology but is in state cpuset",
            topo: topo_dual_socket_ht(),
            st_assignments: assignments(vec![("fakePod", "0", set(&[0, 1, 2])), ("fakePod", "1", set(&[3, 4]))]),
            st_default_cpu_set: set(&[5, 6, 7, 8, 9, 10, 11, 12]),
            exp_err: Some("current set of available CPUs \"0-11\" doesn't match with CPUs in state \"0-12\""),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "core 11 is present in topology but is not in state cpuset",
            topo: topo_dual_socket_ht(),
            st_assignments: assignments(vec![("fakePod", "0", set(&[0, 1, 2])), ("fakePod", "1", set(&[3, 4]))]),
            st_default_cpu_set: set(&[5, 6, 7, 8, 9, 10]),
            exp_err: Some("current set of available CPUs \"0-11\" doesn't match with CPUs in state \"0-10\""),
            ..Default::default()
        },
        ];
        for tc in cases {
            let policy = new_policy(&tc).expect("valid policy");
            let mut st = state_of(&tc);
            let result = policy.start(&mut st).map_err(|e| e.to_string());
            assert_eq!(
                result.clone().err().as_deref(),
                tc.exp_err,
                "{}",
                tc.description
            );
            if result.is_ok() {
                assert_eq!(st.get_default_cpu_set(), &tc.exp_cset, "{}", tc.description);
            }
        }
    }

    fn run_static_policy_test_case(tc: &StaticPolicyTest) {
        let mut policy = new_policy(tc).expect("valid policy");
        let mut st = state_of(tc);
        let pod = tc.pod.as_ref().expect("a pod");
        let container = &pod.spec.containers[0];
        let hint = tc.topology_hint.unwrap_or_default();
        let result = policy
            .allocate(&mut st, pod, container, &hint)
            .map_err(|e| e.to_string());
        assert_eq!(result.err().as_deref(), tc.exp_err, "{}", tc.description);
        let found = st.get_cpu_set(&pod.metadata.uid, &container.name);
        if tc.exp_cpu_alloc {
            let cpus = found.unwrap_or_else(|| panic!("{}: no assignment", tc.description));
            assert_eq!(cpus, &tc.exp_cset, "{}", tc.description);
            assert!(
                cpus.iter().all(|c| !st.get_default_cpu_set().contains(c)),
                "{}: overlaps shared",
                tc.description
            );
        } else {
            assert_eq!(found, None, "{}", tc.description);
        }
    }

    // TestStaticPolicyAdd: the options-insensitive cases with and without
    // full-pcpus-only, the default-options, SMT-alignment and align-by-socket cases.
    #[test]
    fn static_policy_add() {
        let insensitive = vec![
        StaticPolicyTest {
            description: "GuPodSingleCore, SingleSocketHT, ExpectError",
            topo: topo_single_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[0, 1, 2, 3, 4, 5, 6, 7]),
            pod: Some(make_pod("fakePod", "fakeContainer2", "8000m", "8000m")),
            exp_err: Some("not enough cpus available to satisfy request"),
            exp_cpu_alloc: false,
            exp_cset: set(&[]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore",
            topo: topo_single_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", set(&[2, 3, 6, 7]))]),
            st_default_cpu_set: set(&[0, 1, 4, 5]),
            pod: Some(make_pod("fakePod", "fakeContainer3", "2000m", "2000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[1, 5]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, SingleSocketHT, ExpectSameAllocation",
            topo: topo_single_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![("fakePod", "fakeContainer3", set(&[2, 3, 6, 7]))]),
            st_default_cpu_set: set(&[0, 1, 4, 5]),
            pod: Some(make_pod("fakePod", "fakeContainer3", "4000m", "4000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[2, 3, 6, 7]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket",
            topo: topo_dual_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", set(&[2]))]),
            st_default_cpu_set: set(&[0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            pod: Some(make_pod("fakePod", "fakeContainer3", "6000m", "6000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[1, 3, 5, 7, 9, 11]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores",
            topo: topo_dual_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", set(&[1, 5]))]),
            st_default_cpu_set: set(&[0, 2, 3, 4, 6, 7, 8, 9, 10, 11]),
            pod: Some(make_pod("fakePod", "fakeContainer3", "6000m", "6000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[2, 3, 4, 8, 9, 10]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, DualSocketNoHT, ExpectAllocOneSocket",
            topo: topo_dual_socket_no_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", set(&[]))]),
            st_default_cpu_set: set(&[0, 1, 3, 4, 5, 6, 7]),
            pod: Some(make_pod("fakePod", "fakeContainer1", "4000m", "4000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[4, 5, 6, 7]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, DualSocketNoHT, ExpectAllocFourCores",
            topo: topo_dual_socket_no_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", set(&[4, 5]))]),
            st_default_cpu_set: set(&[0, 1, 3, 6, 7]),
            pod: Some(make_pod("fakePod", "fakeContainer1", "4000m", "4000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[1, 3, 6, 7]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocketOneCore",
            topo: topo_dual_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", set(&[2]))]),
            st_default_cpu_set: set(&[0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            pod: Some(make_pod("fakePod", "fakeContainer3", "8000m", "8000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[1, 3, 4, 5, 7, 9, 10, 11]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "NonGuPod, SingleSocketHT, NoAlloc",
            topo: topo_single_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[0, 1, 2, 3, 4, 5, 6, 7]),
            pod: Some(make_pod("fakePod", "fakeContainer1", "1000m", "2000m")),
            exp_err: None,
            exp_cpu_alloc: false,
            exp_cset: set(&[]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodNonIntegerCore, SingleSocketHT, NoAlloc",
            topo: topo_single_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[0, 1, 2, 3, 4, 5, 6, 7]),
            pod: Some(make_pod("fakePod", "fakeContainer4", "977m", "977m")),
            exp_err: None,
            exp_cpu_alloc: false,
            exp_cset: set(&[]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, SingleSocketHT, NoAllocExpectError",
            topo: topo_single_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", set(&[1, 2, 3, 4, 5, 6]))]),
            st_default_cpu_set: set(&[0, 7]),
            pod: Some(make_pod("fakePod", "fakeContainer5", "2000m", "2000m")),
            exp_err: Some("not enough cpus available to satisfy request"),
            exp_cpu_alloc: false,
            exp_cset: set(&[]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, DualSocketHT, NoAllocExpectError",
            topo: topo_dual_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", set(&[1, 2, 3]))]),
            st_default_cpu_set: set(&[0, 4, 5, 6, 7, 8, 9, 10, 11]),
            pod: Some(make_pod("fakePod", "fakeContainer5", "10000m", "10000m")),
            exp_err: Some("not enough cpus available to satisfy request"),
            exp_cpu_alloc: false,
            exp_cset: set(&[]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocSock0",
            topo: topo_quad_socket_four_way_ht(),
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", set(&[3, 11, 4, 5, 6, 7]))]),
            st_default_cpu_set: large_topo_cpu_set().difference(&set(&[3, 11, 4, 5, 6, 7])),
            pod: Some(make_pod("fakePod", "fakeContainer5", "72000m", "72000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: large_topo_sock0_cpu_set(),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllFullCoresFromThreeSockets",
            topo: topo_quad_socket_four_way_ht(),
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", large_topo_cpu_set().difference(&set(&[1, 25, 13, 38, 2, 9, 11, 35, 23, 48, 12, 51, 53, 173, 113, 233, 54, 61])))]),
            st_default_cpu_set: set(&[1, 25, 13, 38, 2, 9, 11, 35, 23, 48, 12, 51, 53, 173, 113, 233, 54, 61]),
            pod: Some(make_pod("fakePod", "fakeCcontainer5", "12000m", "12000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[1, 25, 13, 38, 11, 35, 23, 48, 53, 173, 113, 233]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllSock1+FullCore",
            topo: topo_quad_socket_four_way_ht(),
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", large_topo_cpu_set().difference(&large_topo_sock1_cpu_set().union(&set(&[10, 34, 22, 47, 53, 173, 61, 181, 108, 228, 115, 235]))))]),
            st_default_cpu_set: large_topo_sock1_cpu_set().union(&set(&[10, 34, 22, 47, 53, 173, 61, 181, 108, 228, 115, 235])),
            pod: Some(make_pod("fakePod", "fakeContainer5", "76000m", "76000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: large_topo_sock1_cpu_set().union(&set(&[10, 34, 22, 47])),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, topoQuadSocketFourWayHT, NoAlloc",
            topo: topo_quad_socket_four_way_ht(),
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", large_topo_cpu_set().difference(&set(&[10, 11, 53, 37, 55, 67, 52])))]),
            st_default_cpu_set: set(&[10, 11, 53, 37, 55, 67, 52]),
            pod: Some(make_pod("fakePod", "fakeContainer5", "76000m", "76000m")),
            exp_err: Some("not enough cpus available to satisfy request"),
            exp_cpu_alloc: false,
            exp_cset: set(&[]),
            ..Default::default()
        },
        ];
        for tc in insensitive {
            for options in [opts(&[]), opts(&[(FULL_PCPUS_ONLY_OPTION, "true")])] {
                let tc = StaticPolicyTest {
                    options,
                    ..tc.clone_case()
                };
                run_static_policy_test_case(&tc);
            }
        }
        let rest = vec![
        StaticPolicyTest {
            description: "GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU",
            topo: topo_single_socket_ht(),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[0, 1, 2, 3, 4, 5, 6, 7]),
            pod: Some(make_pod("fakePod", "fakeContainer2", "1000m", "1000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[4]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocCPUs",
            topo: topo_quad_socket_four_way_ht(),
            st_assignments: assignments(vec![("fakePod", "fakeContainer100", large_topo_cpu_set().difference(&set(&[10, 11, 53, 37, 55, 67, 52])))]),
            st_default_cpu_set: set(&[10, 11, 53, 67, 52]),
            pod: Some(make_pod("fakePod", "fakeContainer5", "5000m", "5000m")),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[10, 11, 53, 67, 52]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU",
            topo: topo_single_socket_ht(),
            options: opts(&[(FULL_PCPUS_ONLY_OPTION, "true")]),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[0, 1, 2, 3, 4, 5, 6, 7]),
            pod: Some(make_pod("fakePod", "fakeContainer2", "1000m", "1000m")),
            exp_err: Some("SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2"),
            exp_cpu_alloc: false,
            exp_cset: set(&[]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocOneCPUs",
            topo: topo_quad_socket_four_way_ht(),
            options: opts(&[(FULL_PCPUS_ONLY_OPTION, "true")]),
            num_reserved_cpus: 8,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: large_topo_cpu_set(),
            pod: Some(make_pod("fakePod", "fakeContainer15", "15000m", "15000m")),
            exp_err: Some("SMT Alignment Error: requested 15 cpus not multiple cpus per core = 4"),
            exp_cpu_alloc: false,
            exp_cset: set(&[]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "Align by socket: true, cpu's within same socket of numa in hint are part of allocation",
            topo: topo_dual_socket_multi_numa_per_socket_ht(),
            options: opts(&[(ALIGN_BY_SOCKET_OPTION, "true")]),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[2, 11, 21, 22]),
            pod: Some(make_pod("fakePod", "fakeContainer2", "2000m", "2000m")),
            topology_hint: Some(TopologyHint::new(BitMask::new(&[0, 2]).ok(), true)),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[2, 11]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "Align by socket: false, cpu's are taken strictly from NUMA nodes in hint",
            topo: topo_dual_socket_multi_numa_per_socket_ht(),
            options: opts(&[(ALIGN_BY_SOCKET_OPTION, "false")]),
            num_reserved_cpus: 1,
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[2, 11, 21, 22]),
            pod: Some(make_pod("fakePod", "fakeContainer2", "2000m", "2000m")),
            topology_hint: Some(TopologyHint::new(BitMask::new(&[0, 2]).ok(), true)),
            exp_err: None,
            exp_cpu_alloc: true,
            exp_cset: set(&[2, 21]),
            ..Default::default()
        },
        ];
        for tc in rest {
            run_static_policy_test_case(&tc);
        }
    }

    impl StaticPolicyTest {
        fn clone_case(&self) -> StaticPolicyTest {
            StaticPolicyTest {
                description: self.description,
                topo: self.topo,
                num_reserved_cpus: self.num_reserved_cpus,
                reserved: self.reserved.clone(),
                pod_uid: self.pod_uid,
                options: self.options.clone(),
                container_name: self.container_name,
                st_assignments: self.st_assignments.clone(),
                st_default_cpu_set: self.st_default_cpu_set.clone(),
                pod: self.pod.clone(),
                topology_hint: self.topology_hint,
                exp_err: self.exp_err,
                exp_new_err: self.exp_new_err,
                exp_cpu_alloc: self.exp_cpu_alloc,
                exp_cset: self.exp_cset.clone(),
            }
        }
    }

    // TestStaticPolicyReuseCPUs: an init container's CPUs go to the app container.
    #[test]
    fn static_policy_reuse_cpus() {
        let tc = StaticPolicyTest {
            description: "SingleSocketHT, DeAllocOneInitContainer",
            topo: topo_single_socket_ht(),
            container_name: "initContainer-0",
            st_default_cpu_set: set(&[0, 1, 2, 3, 4, 5, 6, 7]),
            ..Default::default()
        };
        let pod = make_multi_container_pod(&[("4000m", "4000m")], &[("2000m", "2000m")]);
        let mut policy = new_policy(&tc).expect("valid policy");
        let mut st = state_of(&tc);
        for container in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
            policy
                .allocate(&mut st, &pod, container, &TopologyHint::default())
                .expect("allocated");
        }
        assert_eq!(st.get_default_cpu_set(), &set(&[2, 3, 6, 7]));
        policy.remove_container(&mut st, &pod.metadata.uid, tc.container_name);
        assert_eq!(st.get_default_cpu_set(), &set(&[1, 2, 3, 5, 6, 7]));
        assert_eq!(st.get_cpu_set(&pod.metadata.uid, tc.container_name), None);
    }

    // TestStaticPolicyRemove.
    #[test]
    fn static_policy_remove() {
        let cases = vec![
            StaticPolicyTest {
                description: "SingleSocketHT, DeAllocOneContainer",
                topo: topo_single_socket_ht(),
                pod_uid: "fakePod",
                container_name: "fakeContainer1",
                st_assignments: assignments(vec![("fakePod", "fakeContainer1", set(&[1, 2, 3]))]),
                st_default_cpu_set: set(&[4, 5, 6, 7]),
                exp_cset: set(&[1, 2, 3, 4, 5, 6, 7]),
                ..Default::default()
            },
            StaticPolicyTest {
                description: "SingleSocketHT, DeAllocOneContainer, BeginEmpty",
                topo: topo_single_socket_ht(),
                pod_uid: "fakePod",
                container_name: "fakeContainer1",
                st_assignments: assignments(vec![
                    ("fakePod", "fakeContainer1", set(&[1, 2, 3])),
                    ("fakePod", "fakeContainer2", set(&[4, 5, 6, 7])),
                ]),
                st_default_cpu_set: set(&[]),
                exp_cset: set(&[1, 2, 3]),
                ..Default::default()
            },
            StaticPolicyTest {
                description: "SingleSocketHT, DeAllocTwoContainer",
                topo: topo_single_socket_ht(),
                pod_uid: "fakePod",
                container_name: "fakeContainer1",
                st_assignments: assignments(vec![
                    ("fakePod", "fakeContainer1", set(&[1, 3, 5])),
                    ("fakePod", "fakeContainer2", set(&[2, 4])),
                ]),
                st_default_cpu_set: set(&[6, 7]),
                exp_cset: set(&[1, 3, 5, 6, 7]),
                ..Default::default()
            },
            StaticPolicyTest {
                description: "SingleSocketHT, NoDeAlloc",
                topo: topo_single_socket_ht(),
                pod_uid: "fakePod",
                container_name: "fakeContainer2",
                st_assignments: assignments(vec![("fakePod", "fakeContainer1", set(&[1, 3, 5]))]),
                st_default_cpu_set: set(&[2, 4, 6, 7]),
                exp_cset: set(&[2, 4, 6, 7]),
                ..Default::default()
            },
        ];
        for tc in cases {
            let policy = new_policy(&tc).expect("valid policy");
            let mut st = state_of(&tc);
            policy.remove_container(&mut st, tc.pod_uid, tc.container_name);
            assert_eq!(st.get_default_cpu_set(), &tc.exp_cset, "{}", tc.description);
            assert_eq!(
                st.get_cpu_set(tc.pod_uid, tc.container_name),
                None,
                "{}",
                tc.description
            );
        }
    }

    // TestTopologyAwareAllocateCPUs.
    #[test]
    fn topology_aware_allocate_cpus() {
        let all = set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        let mask = |bits: &[usize]| BitMask::new(bits).ok();
        let cases = [
            ("Request 2 CPUs, No BitMask", 2, None, set(&[0, 6])),
            (
                "Request 2 CPUs, BitMask on Socket 0",
                2,
                mask(&[0]),
                set(&[0, 6]),
            ),
            (
                "Request 2 CPUs, BitMask on Socket 1",
                2,
                mask(&[1]),
                set(&[1, 7]),
            ),
            (
                "Request 8 CPUs, BitMask on Socket 0",
                8,
                mask(&[0]),
                set(&[0, 6, 2, 8, 4, 10, 1, 7]),
            ),
            (
                "Request 8 CPUs, BitMask on Socket 1",
                8,
                mask(&[1]),
                set(&[1, 7, 3, 9, 5, 11, 0, 6]),
            ),
        ];
        for (description, requested, socket_mask, expected) in cases {
            let policy = StaticPolicy::new(
                topo_dual_socket_ht().clone(),
                0,
                &CpuSet::default(),
                "none",
                &BTreeMap::new(),
                ALL_GATES,
            )
            .expect("valid policy");
            let mut st = CpuManagerState::new(all.clone(), ContainerCpuAssignments::new());
            policy.start(&mut st).expect("valid state");
            let cpus = policy
                .allocate_cpus(&mut st, requested, socket_mask, &CpuSet::default())
                .expect("allocated");
            assert_eq!(cpus, expected, "{description}");
        }
    }

    // TestStaticPolicyStartWithResvList.
    #[test]
    fn static_policy_start_with_reserved_list() {
        let cases = vec![
        StaticPolicyTest {
            description: "empty cpuset",
            topo: topo_dual_socket_ht(),
            num_reserved_cpus: 2,
            reserved: set(&[0, 1]),
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[]),
            exp_cset: set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "reserved cores 0 & 1 are not present in available cpuset",
            topo: topo_dual_socket_ht(),
            num_reserved_cpus: 2,
            reserved: set(&[0, 1]),
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[2, 3, 4, 5]),
            exp_err: Some("not all reserved cpus: \"0-1\" are present in defaultCpuSet: \"2-5\""),
            ..Default::default()
        },
        StaticPolicyTest {
            description: "inconsistency between numReservedCPUs and reserved",
            topo: topo_dual_socket_ht(),
            num_reserved_cpus: 1,
            reserved: set(&[0, 1]),
            st_assignments: assignments(vec![]),
            st_default_cpu_set: set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            exp_new_err: Some("[cpumanager] unable to reserve the required amount of CPUs (size of 0-1 did not equal 1)"),
            ..Default::default()
        },
        ];
        for tc in cases {
            let policy = match new_policy(&tc) {
                Ok(policy) => {
                    assert_eq!(tc.exp_new_err, None, "{}", tc.description);
                    policy
                }
                Err(e) => {
                    assert_eq!(
                        Some(e.to_string().as_str()),
                        tc.exp_new_err,
                        "{}",
                        tc.description
                    );
                    continue;
                }
            };
            let mut st = state_of(&tc);
            let result = policy.start(&mut st).map_err(|e| e.to_string());
            assert_eq!(
                result.clone().err().as_deref(),
                tc.exp_err,
                "{}",
                tc.description
            );
            if result.is_ok() {
                assert_eq!(st.get_default_cpu_set(), &tc.exp_cset, "{}", tc.description);
            }
        }
    }

    // TestStaticPolicyAddWithResvList.
    #[test]
    fn static_policy_add_with_reserved_list() {
        let cases = vec![
            StaticPolicyTest {
                description: "GuPodSingleCore, SingleSocketHT, ExpectError",
                topo: topo_single_socket_ht(),
                num_reserved_cpus: 1,
                reserved: set(&[0]),
                st_assignments: assignments(vec![]),
                st_default_cpu_set: set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                pod: Some(make_pod("fakePod", "fakeContainer2", "8000m", "8000m")),
                exp_err: Some("not enough cpus available to satisfy request"),
                exp_cpu_alloc: false,
                exp_cset: set(&[]),
                ..Default::default()
            },
            StaticPolicyTest {
                description: "GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU",
                topo: topo_single_socket_ht(),
                num_reserved_cpus: 2,
                reserved: set(&[0, 1]),
                st_assignments: assignments(vec![]),
                st_default_cpu_set: set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                pod: Some(make_pod("fakePod", "fakeContainer2", "1000m", "1000m")),
                exp_err: None,
                exp_cpu_alloc: true,
                exp_cset: set(&[4]),
                ..Default::default()
            },
            StaticPolicyTest {
                description: "GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore",
                topo: topo_single_socket_ht(),
                num_reserved_cpus: 2,
                reserved: set(&[0, 1]),
                st_assignments: assignments(vec![(
                    "fakePod",
                    "fakeContainer100",
                    set(&[2, 3, 6, 7]),
                )]),
                st_default_cpu_set: set(&[0, 1, 4, 5]),
                pod: Some(make_pod("fakePod", "fakeContainer3", "2000m", "2000m")),
                exp_err: None,
                exp_cpu_alloc: true,
                exp_cset: set(&[4, 5]),
                ..Default::default()
            },
        ];
        for tc in cases {
            run_static_policy_test_case(&tc);
        }
    }

    type OptionCase = (
        &'static str,
        &'static [(&'static str, &'static str)],
        Option<StaticPolicyOptions>,
    );

    // TestStaticPolicyOptions.
    #[test]
    fn static_policy_options() {
        let gates = OptionGates::CPU_MANAGER_DEFAULT;
        let cases: [OptionCase; 6] = [
            ("empty args", &[], Some(StaticPolicyOptions::default())),
            ("bad single arg", &[("badValue1", "")], None),
            (
                "bad multiple arg",
                &[("badValue1", ""), ("badvalue2", "aaaa")],
                None,
            ),
            (
                "good arg",
                &[(FULL_PCPUS_ONLY_OPTION, "true")],
                Some(StaticPolicyOptions {
                    full_physical_cpus_only: true,
                    ..Default::default()
                }),
            ),
            (
                "good arg, bad value",
                &[(FULL_PCPUS_ONLY_OPTION, "enabled!")],
                None,
            ),
            (
                "bad arg intermixed",
                &[(FULL_PCPUS_ONLY_OPTION, "1"), ("badvalue2", "lorem ipsum")],
                None,
            ),
        ];
        for (description, pairs, expected) in cases {
            assert_eq!(
                StaticPolicyOptions::new(&opts(pairs), gates).ok(),
                expected,
                "{description}"
            );
        }
    }

    // cpu_manager.go NewManager: the reservation the static policy needs.
    #[test]
    fn num_reserved_cpus_from_the_reservation() {
        use crate::domain::pod::fixtures::q;
        let reservation = |cpu: Option<&str>| -> ResourceList {
            cpu.map(|c| ("cpu".to_string(), q(c))).into_iter().collect()
        };
        assert_eq!(num_reserved_cpus(&reservation(Some("1"))), Ok(1));
        assert_eq!(num_reserved_cpus(&reservation(Some("1500m"))), Ok(2));
        assert_eq!(num_reserved_cpus(&reservation(Some("100m"))), Ok(1));
        assert_eq!(num_reserved_cpus(&reservation(Some("3"))), Ok(3));
        assert_eq!(
            num_reserved_cpus(&reservation(None)).map_err(|e| e.to_string()),
            Err(
                "[cpumanager] unable to determine reserved CPU resources for static policy"
                    .to_string()
            )
        );
        assert_eq!(
            num_reserved_cpus(&reservation(Some("0"))).map_err(|e| e.to_string()),
            Err("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero".to_string())
        );
        // Reserved CPUs are taken by topology, lowest cores first: 2 on topoDualSocketHT
        // are core 0's threads.
        let policy = StaticPolicy::new(
            topo_dual_socket_ht().clone(),
            2,
            &CpuSet::default(),
            "none",
            &BTreeMap::new(),
            ALL_GATES,
        )
        .expect("valid policy");
        assert_eq!(policy.reserved(), &set(&[0, 6]));
        assert_eq!(
            policy.allocatable_cpus(),
            set(&[1, 2, 3, 4, 5, 7, 8, 9, 10, 11])
        );
    }

    #[test]
    fn allocation_errors_become_admission_rejections() {
        let smt = AllocateError::SmtAlignment {
            requested_cpus: 3,
            cpus_per_core: 2,
        };
        assert_eq!(smt.to_rejection().reason, "SMTAlignmentError");
        assert_eq!(
            smt.to_rejection().message,
            "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"
        );
        let other = AllocateError::Assignment(CpuAssignmentError::NotEnoughCpus);
        assert_eq!(other.to_rejection().reason, "UnexpectedAdmissionError");
        assert_eq!(
            other.to_rejection().message,
            "Allocate failed due to not enough cpus available to satisfy request, which is unexpected"
        );
    }

    /// topology_hints_test.go `returnMachineInfo`: two NUMA nodes of three SMT cores.
    fn hints_machine() -> CpuTopology {
        use crate::domain::resource_managers::topology::{
            MachineCore, MachineNumaNode, MachineTopology,
        };
        let core = |id, socket_id, threads: [usize; 2]| MachineCore {
            id,
            socket_id,
            threads: threads.to_vec(),
        };
        let machine = MachineTopology {
            num_cpus: 12,
            num_sockets: 0,
            numa_nodes: vec![
                MachineNumaNode {
                    id: 0,
                    cores: vec![core(0, 0, [0, 6]), core(1, 0, [1, 7]), core(2, 0, [2, 8])],
                    distances: vec![],
                },
                MachineNumaNode {
                    id: 1,
                    cores: vec![core(0, 1, [3, 9]), core(1, 1, [4, 10]), core(2, 1, [5, 11])],
                    distances: vec![],
                },
            ],
        };
        CpuTopology::discover(&machine).expect("valid machine")
    }

    fn sorted(mut hints: Vec<TopologyHint>) -> Vec<TopologyHint> {
        hints.sort_by(TopologyHint::ordering);
        hints
    }

    type HintCase<'a> = (
        &'static str,
        &'a Pod,
        ContainerCpuAssignments,
        CpuSet,
        Option<Vec<TopologyHint>>,
    );

    // topology_hints_test.go TestGetTopologyHints (returnTestCases).
    #[test]
    fn get_topology_hints_cases() {
        let first = BitMask::new(&[0]).ok();
        let second = BitMask::new(&[1]).ok();
        let cross = BitMask::new(&[0, 1]).ok();
        let h = TopologyHint::new;
        let pod2 = make_pod("fakePod", "fakeContainer", "2", "2");
        let pod5 = make_pod("fakePod", "fakeContainer", "5", "5");
        let pod7 = make_pod("fakePod", "fakeContainer", "7", "7");
        let pod11 = make_pod("fakePod", "fakeContainer", "11", "11");
        let free = set(&[2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        let held = |cpus: &[usize]| assignments(vec![("fakePod", "fakeContainer", set(cpus))]);
        let none = ContainerCpuAssignments::new;
        let cases: Vec<HintCase> = vec![
            (
                "Request 2 CPUs, 4 available on NUMA 0, 6 available on NUMA 1",
                &pod2,
                none(),
                free.clone(),
                Some(vec![h(first, true), h(second, true), h(cross, false)]),
            ),
            (
                "Request 5 CPUs, 4 available on NUMA 0, 6 available on NUMA 1",
                &pod5,
                none(),
                free.clone(),
                Some(vec![h(second, true), h(cross, false)]),
            ),
            (
                "Request 7 CPUs, 4 available on NUMA 0, 6 available on NUMA 1",
                &pod7,
                none(),
                free.clone(),
                Some(vec![h(cross, true)]),
            ),
            (
                "Request 11 CPUs, 4 available on NUMA 0, 6 available on NUMA 1",
                &pod11,
                none(),
                free.clone(),
                Some(vec![]),
            ),
            (
                "Request 2 CPUs, 1 available on NUMA 0, 1 available on NUMA 1",
                &pod2,
                none(),
                set(&[0, 3]),
                Some(vec![h(cross, false)]),
            ),
            (
                "Request more CPUs than available",
                &pod5,
                none(),
                set(&[0, 1, 2, 3]),
                Some(vec![]),
            ),
            (
                "Regenerate Single-Node NUMA Hints if already allocated 1/2",
                &pod2,
                held(&[0, 6]),
                CpuSet::default(),
                Some(vec![h(first, true), h(cross, false)]),
            ),
            (
                "Regenerate Single-Node NUMA Hints if already allocated 2/2",
                &pod2,
                held(&[3, 9]),
                CpuSet::default(),
                Some(vec![h(second, true), h(cross, false)]),
            ),
            (
                "Regenerate Cross-NUMA Hints if already allocated",
                &pod11,
                held(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
                CpuSet::default(),
                Some(vec![h(cross, true)]),
            ),
            (
                "Requested less than already allocated",
                &pod2,
                held(&[0, 6, 3, 9]),
                CpuSet::default(),
                Some(vec![]),
            ),
            (
                "Requested more than already allocated",
                &pod11,
                held(&[0, 6, 3, 9]),
                CpuSet::default(),
                Some(vec![]),
            ),
        ];
        let policy = StaticPolicy::new(
            hints_machine(),
            0,
            &CpuSet::default(),
            "none",
            &BTreeMap::new(),
            ALL_GATES,
        )
        .expect("valid policy");
        for (name, pod, held, default, expected) in cases {
            let st = CpuManagerState::new(default, held);
            let hints = policy.get_topology_hints(&st, pod, &pod.spec.containers[0]);
            let got = hints.get(RESOURCE_CPU).cloned().flatten().map(sorted);
            assert_eq!(got, expected.map(sorted), "{name}");
        }
        // A container with no exclusive CPUs has no preference at all.
        let burstable = make_pod("fakePod", "fakeContainer", "1", "2");
        let st = CpuManagerState::new(free, none());
        assert!(policy
            .get_topology_hints(&st, &burstable, &burstable.spec.containers[0])
            .is_empty());
    }

    // topology_hints_test.go TestGetPodTopologyHints, on the same cases: one container,
    // so the pod's hints are the container's.
    #[test]
    fn get_pod_topology_hints_match_the_container_hints_for_one_container() {
        let policy = StaticPolicy::new(
            hints_machine(),
            0,
            &CpuSet::default(),
            "none",
            &BTreeMap::new(),
            ALL_GATES,
        )
        .expect("valid policy");
        for (request, default) in [
            ("2", set(&[2, 3, 4, 5, 6, 7, 8, 9, 10, 11])),
            ("5", set(&[0, 1, 2, 3])),
            ("7", set(&[0, 3])),
        ] {
            let pod = make_pod("fakePod", "fakeContainer", request, request);
            let st = CpuManagerState::new(default, ContainerCpuAssignments::new());
            assert_eq!(
                policy.get_pod_topology_hints(&st, &pod),
                policy.get_topology_hints(&st, &pod, &pod.spec.containers[0]),
                "{request}"
            );
        }
    }

    // topology_hints_test.go TestPodGuaranteedCPUs.
    #[test]
    fn pod_guaranteed_cpus_cases() {
        let policy = StaticPolicy::new(
            hints_machine(),
            0,
            &CpuSet::default(),
            "none",
            &BTreeMap::new(),
            ALL_GATES,
        )
        .expect("valid policy");
        let zero: &[(&str, &str)] = &[("0", "0")];
        let two: &[(&str, &str)] = &[("2", "2")];
        let five: &[(&str, &str)] = &[("5", "5")];
        let multi: &[(&str, &str)] = &[("2", "2"), ("4", "4")];
        let cases = [
            ("TestCase01: if requestedCPU == 0, Pod is not Guaranteed Qos", zero, zero, 0),
            ("TestCase02: if requestedCPU == 0, Pod is not Guaranteed Qos", zero, two, 0),
            ("TestCase03: if requestedCPU == 0, Pod is not Guaranteed Qos", two, zero, 0),
            ("TestCase04: Guaranteed Pod requests 2 CPUs", two, two, 2),
            ("TestCase05: Guaranteed Pod requests 5 CPUs", five, five, 5),
            ("TestCase06: The number of CPUs requested By app is bigger than the number of CPUs requested by init", two, five, 5),
            ("TestCase07: The number of CPUs requested By init is bigger than the number of CPUs requested by app", five, two, 5),
            ("TestCase08: Sum of CPUs requested by multiple containers", multi, multi, 6),
        ];
        for (name, init, app, expected) in cases {
            let pod = make_multi_container_pod(init, app);
            assert_eq!(policy.pod_guaranteed_cpus(&pod), expected, "{name}");
        }
    }

    // The static policy as the topology manager's hint provider: admission under
    // single-numa-node aligns the container's CPUs to the chosen node.
    #[test]
    fn admission_through_the_topology_manager_aligns_cpus() {
        use crate::domain::resource_managers::topology_manager::{
            NumaInfo, Policy, PolicyOptions, Scope, TopologyManager,
        };
        let mut policy = StaticPolicy::new(
            hints_machine(),
            1,
            &CpuSet::default(),
            "single-numa-node",
            &BTreeMap::new(),
            ALL_GATES,
        )
        .expect("valid policy");
        let mut st = CpuManagerState::default();
        policy.start(&mut st).expect("fresh state");
        let numa_info = NumaInfo {
            nodes: vec![0, 1],
            numa_distances: BTreeMap::new(),
        };
        let mut manager = TopologyManager::with_policy(
            Policy::SingleNumaNode {
                numa_info,
                opts: PolicyOptions::default(),
            },
            Scope::Container,
        );
        let pod = make_pod("uid-1", "app", "4", "4");
        let mut provider = StaticPolicyHintProvider {
            policy: &mut policy,
            state: &mut st,
        };
        // Both nodes fit four CPUs (node 0 without the reserved CPU 0): the lower wins,
        // and its two free whole cores are taken.
        manager
            .admit(&pod, &mut [&mut provider])
            .expect("fits on one NUMA node");
        assert_eq!(st.get_cpu_set("uid-1", "app"), Some(&set(&[1, 2, 7, 8])));
        assert_eq!(
            manager.get_affinity("uid-1", "app").numa_node_affinity,
            BitMask::new(&[0]).ok()
        );
        // Seven more CPUs fit on no single node: refused.
        let big = make_pod("uid-2", "app", "7", "7");
        let mut provider = StaticPolicyHintProvider {
            policy: &mut policy,
            state: &mut st,
        };
        let rejection = manager
            .admit(&big, &mut [&mut provider])
            .expect_err("no single node");
        assert_eq!(rejection.reason, "TopologyAffinityError");
    }
}
