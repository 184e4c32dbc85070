//! The CPU manager (upstream v1.26 `cpumanager/cpu_manager.go`) as one value: the static
//! policy, its state, the topology manager that admits over its hints, and what was last
//! sent to each container. The app feeds it the active pods and the running containers
//! and carries out what it answers: the cpuset a container is created with, the
//! `UpdateContainerResources` calls of the reconcile loop, the checkpoint to write.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::policy_static::{num_reserved_cpus, ReservationError, StaticPolicy, StaticPolicyError};
use super::policy_static::{StaticPolicyHintProvider, POLICY_STATIC};
use super::state::{restore_state_from_file, CpuManagerState, StateRestoreError};
use super::topology::{CpuTopology, MachineTopology, TopologyError};
use super::topology_manager::{
    HintProvider, NumaNode, TopologyHint, TopologyManager, TopologyManagerError,
};
use super::OptionGates;
use crate::domain::admission::Rejection;
use crate::domain::devices::topology_hints::{DeviceHintProvider, DevicePlanProvider};
use crate::domain::devices::DeviceManagerState;
use crate::domain::node::reserved::ResourceList;
use crate::domain::pod::Pod;
use crate::domain::units::cpuset::CpuSet;

/// `cpuManagerPolicy`'s other value: no exclusive CPUs, no cpuset set.
pub const POLICY_NONE: &str = "none";
/// `cpuManagerReconcilePeriod`'s default.
pub const DEFAULT_RECONCILE_PERIOD: Duration = Duration::from_secs(10);

/// The CPU and topology managers' configuration, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuManagerSettings {
    /// `cpuManagerPolicy`: `none` or `static`.
    pub policy: String,
    pub policy_options: BTreeMap<String, String>,
    pub reconcile_period: Duration,
    pub topology_policy: String,
    pub topology_scope: String,
    pub topology_options: BTreeMap<String, String>,
}

impl Default for CpuManagerSettings {
    fn default() -> Self {
        CpuManagerSettings {
            policy: POLICY_NONE.into(),
            policy_options: BTreeMap::new(),
            reconcile_period: DEFAULT_RECONCILE_PERIOD,
            topology_policy: super::topology_manager::policy::POLICY_NONE.into(),
            topology_scope: super::topology_manager::CONTAINER_TOPOLOGY_SCOPE.into(),
            topology_options: BTreeMap::new(),
        }
    }
}

impl CpuManagerSettings {
    /// Whether the static policy runs (the only one with any effect).
    pub fn is_static(&self) -> bool {
        self.policy == POLICY_STATIC
    }
}

/// Why the CPU manager could not start, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuManagerError {
    #[error("unknown policy: \"{0}\"")]
    UnknownPolicy(String),
    #[error("failed to initialize topology manager")]
    TopologyManager(#[source] TopologyManagerError),
    #[error("failed to discover the CPU topology")]
    Topology(#[source] TopologyError),
    #[error(transparent)]
    Reservation(#[from] ReservationError),
    #[error("new static policy error")]
    Policy(#[source] StaticPolicyError),
    #[error(transparent)]
    Restore(#[from] StateRestoreError),
    /// Upstream's `Start`: the restored state does not fit the machine or the reservation.
    #[error("start cpu manager error")]
    Start(#[source] StaticPolicyError),
}

/// A pod container the CPU manager knows of (pod UID, container name).
pub type ContainerKey = (String, String);

/// A running container as the runtime lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningContainer {
    pub pod_uid: String,
    pub name: String,
    pub id: String,
}

/// The static CPU manager with its topology manager.
#[derive(Debug, Clone)]
pub struct CpuManager {
    policy: StaticPolicy,
    state: CpuManagerState,
    topology: TopologyManager,
    /// What each container was last given (upstream's `lastUpdateState`): the reconcile
    /// loop updates only a container whose set changed since.
    last_update: BTreeMap<ContainerKey, CpuSet>,
    state_path: String,
    /// The machine's NUMA node ids, for the device manager's hints.
    numa_nodes: Vec<usize>,
}

/// The topology manager for the settings on this machine (upstream builds it whatever
/// the CPU policy).
pub fn topology_manager(
    settings: &CpuManagerSettings,
    machine: &MachineTopology,
    gates: OptionGates,
) -> Result<TopologyManager, CpuManagerError> {
    let nodes: Vec<NumaNode> = machine
        .numa_nodes
        .iter()
        .map(|n| NumaNode {
            id: n.id,
            distances: n.distances.clone(),
        })
        .collect();
    TopologyManager::new(
        &nodes,
        &settings.topology_policy,
        &settings.topology_scope,
        &settings.topology_options,
        gates,
    )
    .map_err(CpuManagerError::TopologyManager)
}

impl CpuManager {
    /// The manager for the `static` policy (upstream's `NewManager` and `Start`), or
    /// `None` for `none`. `reservation` is the node allocatable reservation (kube- plus
    /// system-reserved, hard eviction), `reserved_cpus` `reservedSystemCPUs`, `checkpoint`
    /// the state file's contents when there is one, at `state_path`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        settings: &CpuManagerSettings,
        machine: &MachineTopology,
        reservation: &ResourceList,
        reserved_cpus: Option<&CpuSet>,
        cpu_gates: OptionGates,
        topology_gates: OptionGates,
        checkpoint: Option<&str>,
        state_path: &str,
    ) -> Result<Option<CpuManager>, CpuManagerError> {
        let topology = topology_manager(settings, machine, topology_gates)?;
        match settings.policy.as_str() {
            POLICY_NONE => return Ok(None),
            POLICY_STATIC => {}
            other => return Err(CpuManagerError::UnknownPolicy(other.to_string())),
        }
        let cpu_topology = CpuTopology::discover(machine).map_err(CpuManagerError::Topology)?;
        let num_reserved = num_reserved_cpus(reservation)?;
        let policy = StaticPolicy::new(
            cpu_topology,
            num_reserved,
            reserved_cpus.unwrap_or(&CpuSet::default()),
            &settings.topology_policy,
            &settings.policy_options,
            cpu_gates,
        )
        .map_err(CpuManagerError::Policy)?;
        let mut state =
            restore_state_from_file(checkpoint, POLICY_STATIC, &BTreeMap::new(), state_path)?;
        policy.start(&mut state).map_err(CpuManagerError::Start)?;
        Ok(Some(CpuManager {
            policy,
            state,
            topology,
            last_update: BTreeMap::new(),
            state_path: state_path.to_string(),
            numa_nodes: machine.numa_nodes.iter().map(|n| n.id).collect(),
        }))
    }

    pub fn state_path(&self) -> &str {
        &self.state_path
    }

    /// The `cpu_manager_state` file's contents for the current state.
    pub fn checkpoint(&self) -> String {
        self.state.to_checkpoint(POLICY_STATIC)
    }

    pub fn state(&self) -> &CpuManagerState {
        &self.state
    }

    /// The shared pool: every CPU no container holds exclusively (the reserved included).
    pub fn shared_pool(&self) -> &CpuSet {
        self.state.get_default_cpu_set()
    }

    /// CPUs that may be handed out exclusively (upstream's `GetAllocatableCPUs`).
    pub fn allocatable_cpus(&self) -> CpuSet {
        self.policy.allocatable_cpus()
    }

    /// The container's exclusive CPUs, if any (the pod resources API's `cpu_ids`).
    pub fn exclusive_cpus(&self, pod_uid: &str, container: &str) -> Option<&CpuSet> {
        self.state.get_cpu_set(pod_uid, container)
    }

    /// The cpuset a container is created with (upstream's `PreCreateContainer`): its
    /// exclusive CPUs, else the shared pool.
    pub fn container_cpuset(&self, pod_uid: &str, container: &str) -> CpuSet {
        self.state
            .get_cpu_set_or_default(pod_uid, container)
            .clone()
    }

    /// Gives back the CPUs of containers no active pod has (upstream's
    /// `removeStaleState`); whether the state changed.
    pub fn remove_stale_state(&mut self, active: &BTreeSet<ContainerKey>) -> bool {
        let stale: Vec<ContainerKey> = self
            .state
            .get_cpu_assignments()
            .iter()
            .flat_map(|(pod, containers)| {
                containers
                    .keys()
                    .map(move |name| (pod.clone(), name.clone()))
            })
            .filter(|key| !active.contains(key))
            .collect();
        for (pod, name) in &stale {
            self.policy.remove_container(&mut self.state, pod, name);
            self.last_update.remove(&(pod.clone(), name.clone()));
        }
        !stale.is_empty()
    }

    /// Admits the pod through the topology manager, which merges the static policy's CPU
    /// hints with the device manager's (`devices`: the devices the pod's containers were
    /// given, so the CPUs follow their NUMA nodes) and has the static policy allocate
    /// each container's CPUs (upstream's topology admit handler); stale assignments of
    /// pods not in `active` are given back first. On a refusal the pod's containers hold
    /// no CPUs.
    pub fn admit(
        &mut self,
        pod: &Pod,
        active: Option<&BTreeSet<ContainerKey>>,
        devices: Option<&DeviceManagerState>,
    ) -> AdmitOutcome {
        match devices {
            Some(state) => {
                let mut hints = DeviceHintProvider {
                    state,
                    numa_nodes: self.numa_nodes.clone(),
                };
                self.admit_with(pod, active, Some(&mut hints))
            }
            None => self.admit_with(pod, active, None),
        }
    }

    /// The affinity the topology manager chooses for each container of `pod`, from a
    /// trial admission on copies of this state and of the devices' (`devices`, before
    /// the pod's are given), which the device manager then takes its devices within
    /// (upstream admits through the topology manager before any device is allocated).
    ///
    /// # Errors
    /// The refusal the admission would give (`TopologyAffinityError`, ...).
    pub fn device_affinities(
        &self,
        pod: &Pod,
        active: Option<&BTreeSet<ContainerKey>>,
        devices: &DeviceManagerState,
    ) -> Result<BTreeMap<String, TopologyHint>, Rejection> {
        let mut trial = self.clone();
        let mut plan = DevicePlanProvider::new(devices.clone(), self.numa_nodes.clone());
        trial.admit_with(pod, active, Some(&mut plan)).result?;
        Ok(plan.affinities)
    }

    fn admit_with(
        &mut self,
        pod: &Pod,
        active: Option<&BTreeSet<ContainerKey>>,
        devices: Option<&mut dyn HintProvider>,
    ) -> AdmitOutcome {
        let mut changed = active.is_some_and(|a| self.remove_stale_state(a));
        let before = self.state.clone();
        let result = {
            let mut cpus = StaticPolicyHintProvider {
                policy: &mut self.policy,
                state: &mut self.state,
            };
            let mut providers: Vec<&mut dyn HintProvider> = vec![&mut cpus];
            if let Some(d) = devices {
                providers.push(d);
            }
            self.topology.admit(pod, &mut providers)
        };
        if result.is_err() {
            // Upstream leaves a refused pod's earlier containers allocated until the stale
            // state goes; giving them back at once frees them for the next pod.
            let uid = &pod.metadata.uid;
            let names: Vec<String> = self
                .state
                .get_cpu_assignments()
                .get(uid)
                .map(|c| c.keys().cloned().collect())
                .unwrap_or_default();
            for name in names {
                if before.get_cpu_set(uid, &name).is_none() {
                    self.policy.remove_container(&mut self.state, uid, &name);
                }
            }
        }
        changed |= self.state != before;
        AdmitOutcome { result, changed }
    }

    /// The containers whose cpuset differs from what they were last given (upstream's
    /// `reconcileState`), with the set each must get. Call [`CpuManager::updated`] after
    /// each update that succeeded.
    pub fn reconcile(&self, running: &[RunningContainer]) -> Vec<(RunningContainer, CpuSet)> {
        running
            .iter()
            .filter_map(|c| {
                let want = self.container_cpuset(&c.pod_uid, &c.name);
                if want.is_empty() {
                    return None;
                }
                let key = (c.pod_uid.clone(), c.name.clone());
                (self.last_update.get(&key) != Some(&want)).then(|| (c.clone(), want))
            })
            .collect()
    }

    /// Records that the container now runs on `cpus`.
    pub fn updated(&mut self, pod_uid: &str, container: &str, cpus: CpuSet) {
        self.last_update
            .insert((pod_uid.to_string(), container.to_string()), cpus);
    }
}

/// The admission's verdict and whether the state changed (the checkpoint to write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitOutcome {
    pub result: Result<(), Rejection>,
    pub changed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::fixtures::container;
    use crate::domain::resource_managers::topology::SysfsCpu;
    use crate::domain::units::quantity::Quantity;

    fn two_cpus() -> MachineTopology {
        let cpu = |cpu, core_id| SysfsCpu {
            cpu,
            socket_id: 0,
            core_id,
        };
        MachineTopology::from_sysfs(&[cpu(0, 0), cpu(1, 1)], &[])
    }

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn reservation(cpu: &str) -> ResourceList {
        [("cpu".to_string(), q(cpu))].into()
    }

    fn static_settings() -> CpuManagerSettings {
        CpuManagerSettings {
            policy: POLICY_STATIC.into(),
            ..CpuManagerSettings::default()
        }
    }

    fn build(
        settings: &CpuManagerSettings,
        reservation: &ResourceList,
        reserved_cpus: Option<&CpuSet>,
        checkpoint: Option<&str>,
    ) -> Result<Option<CpuManager>, CpuManagerError> {
        CpuManager::new(
            settings,
            &two_cpus(),
            reservation,
            reserved_cpus,
            OptionGates::CPU_MANAGER_DEFAULT,
            OptionGates::TOPOLOGY_MANAGER_DEFAULT,
            checkpoint,
            "/var/lib/kubelet/cpu_manager_state",
        )
    }

    fn manager(checkpoint: Option<&str>) -> Result<Option<CpuManager>, CpuManagerError> {
        build(
            &static_settings(),
            &reservation("1"),
            Some(&CpuSet::new([0])),
            checkpoint,
        )
    }

    fn started() -> CpuManager {
        match manager(None) {
            Ok(Some(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    fn pod(uid: &str, cpu_request: &str, cpu_limit: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.uid = uid.into();
        let res = |cpu: &str| -> BTreeMap<String, Quantity> {
            [("cpu".into(), q(cpu)), ("memory".into(), q("100Mi"))].into()
        };
        pod.spec
            .containers
            .push(container("c", res(cpu_request), res(cpu_limit)));
        pod
    }

    fn active(uids: &[&str]) -> BTreeSet<ContainerKey> {
        uids.iter().map(|u| ((*u).into(), "c".into())).collect()
    }

    #[test]
    fn none_policy_builds_nothing_and_unknown_policies_are_refused() {
        let none = build(
            &CpuManagerSettings::default(),
            &ResourceList::new(),
            None,
            None,
        );
        assert!(matches!(none, Ok(None)));
        let bad = CpuManagerSettings {
            policy: "dynamic".into(),
            ..CpuManagerSettings::default()
        };
        let err = build(&bad, &ResourceList::new(), None, None);
        assert_eq!(
            err.err().map(|e| e.to_string()),
            Some("unknown policy: \"dynamic\"".into())
        );
    }

    #[test]
    fn static_policy_needs_a_cpu_reservation() {
        let err = build(&static_settings(), &reservation("0"), None, None);
        assert_eq!(
            err.err().map(|e| e.to_string()),
            Some("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero".into())
        );
    }

    #[test]
    fn a_guaranteed_container_gets_cpu_1_and_the_shared_pool_shrinks_then_grows() {
        let mut m = started();
        assert_eq!(m.allocatable_cpus(), CpuSet::new([1]));
        let outcome = m.admit(&pod("g", "1", "1"), Some(&active(&[])), None);
        assert_eq!(outcome.result, Ok(()));
        assert!(outcome.changed);
        assert_eq!(m.container_cpuset("g", "c"), CpuSet::new([1]));
        // Burstable and fractional Guaranteed containers run on the shared pool.
        assert!(m.admit(&pod("b", "100m", "1"), None, None).result.is_ok());
        assert!(m
            .admit(&pod("f", "500m", "500m"), None, None)
            .result
            .is_ok());
        assert_eq!(m.container_cpuset("b", "c"), CpuSet::new([0]));
        assert_eq!(m.container_cpuset("f", "c"), CpuSet::new([0]));
        // A second exclusive CPU is not there: upstream's unexpected admission error.
        let refused = m.admit(&pod("g2", "1", "1"), None, None);
        assert_eq!(
            refused.result,
            Err(Rejection {
                reason: "UnexpectedAdmissionError".into(),
                message: "Allocate failed due to not enough cpus available to satisfy request, which is unexpected".into(),
            })
        );
        assert!(!refused.changed);
        // Pod g gone: CPU 1 goes back to the shared pool.
        assert!(m.remove_stale_state(&active(&["b", "f"])));
        assert_eq!(m.shared_pool(), &CpuSet::new([0, 1]));
        assert_eq!(m.container_cpuset("b", "c"), CpuSet::new([0, 1]));
    }

    #[test]
    fn reconcile_updates_only_containers_whose_set_changed() {
        let mut m = started();
        let running = |uid: &str| RunningContainer {
            pod_uid: uid.into(),
            name: "c".into(),
            id: format!("id-{uid}"),
        };
        assert!(m.admit(&pod("b", "100m", "1"), None, None).result.is_ok());
        let first = m.reconcile(&[running("b")]);
        assert_eq!(first, vec![(running("b"), CpuSet::new([0, 1]))]);
        m.updated("b", "c", CpuSet::new([0, 1]));
        assert!(m.reconcile(&[running("b")]).is_empty());
        assert!(m.admit(&pod("g", "1", "1"), None, None).result.is_ok());
        let after = m.reconcile(&[running("b"), running("g")]);
        assert_eq!(
            after,
            vec![
                (running("b"), CpuSet::new([0])),
                (running("g"), CpuSet::new([1]))
            ]
        );
    }

    #[test]
    fn the_checkpoint_round_trips_and_a_bad_one_refuses_to_start() {
        let mut m = started();
        assert!(m.admit(&pod("g", "1", "1"), None, None).result.is_ok());
        let text = m.checkpoint();
        let again = match manager(Some(&text)) {
            Ok(Some(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(again.exclusive_cpus("g", "c"), Some(&CpuSet::new([1])));
        assert_eq!(again.shared_pool(), &CpuSet::new([0]));
        let tampered = text.replace("\"1\"", "\"0\"");
        let err = manager(Some(&tampered)).err().map(|e| e.to_string());
        assert_eq!(
            err,
            Some("could not restore state from checkpoint: checkpoint is corrupted, please drain this node and delete the CPU manager checkpoint file \"/var/lib/kubelet/cpu_manager_state\" before restarting Kubelet".into())
        );
        let other_policy = CpuManagerState::default().to_checkpoint("none");
        let err = manager(Some(&other_policy)).err().map(|e| e.to_string());
        assert_eq!(
            err,
            Some("could not restore state from checkpoint: configured policy \"static\" differs from state checkpoint policy \"none\", please drain this node and delete the CPU manager checkpoint file \"/var/lib/kubelet/cpu_manager_state\" before restarting Kubelet".into())
        );
    }

    #[test]
    fn every_topology_policy_admits_on_one_numa_node() {
        for policy in ["none", "best-effort", "restricted", "single-numa-node"] {
            for scope in ["container", "pod"] {
                let settings = CpuManagerSettings {
                    topology_policy: policy.into(),
                    topology_scope: scope.into(),
                    ..static_settings()
                };
                let mut m = match build(&settings, &reservation("1"), None, None) {
                    Ok(Some(m)) => m,
                    other => panic!("{policy} {scope}: {other:?}"),
                };
                let outcome = m.admit(&pod("g", "1", "1"), None, None);
                assert_eq!(outcome.result, Ok(()), "{policy} {scope}");
                assert_eq!(m.container_cpuset("g", "c"), CpuSet::new([1]));
            }
        }
    }

    /// Four single-thread cores, two per NUMA node (0-1, 2-3), CPU 0 reserved.
    fn two_numa_manager(policy: &str) -> CpuManager {
        let machine = super::super::fixtures::two_numa_nodes();
        let settings = CpuManagerSettings {
            topology_policy: policy.into(),
            ..static_settings()
        };
        let m = CpuManager::new(
            &settings,
            &machine,
            &reservation("1"),
            Some(&CpuSet::new([0])),
            OptionGates::CPU_MANAGER_DEFAULT,
            OptionGates::TOPOLOGY_MANAGER_DEFAULT,
            None,
            "/var/lib/kubelet/cpu_manager_state",
        );
        let Ok(Some(m)) = m else { panic!("{m:?}") };
        m
    }

    /// `example.com/gpu`'s devices (id, NUMA node), none given yet.
    fn gpus(devices: &[(&str, i64)]) -> DeviceManagerState {
        use crate::domain::devices::{Device, PluginOptions};
        let mut state = DeviceManagerState::default();
        state.plugin_connected("example.com/gpu", PluginOptions::default());
        state.update_devices(
            "example.com/gpu",
            devices
                .iter()
                .map(|(id, n)| Device {
                    id: (*id).into(),
                    healthy: true,
                    numa_nodes: vec![*n],
                })
                .collect(),
        );
        state
    }

    /// [`two_numa_manager`]; the pod `uid`'s container `c` asks for one CPU and holds
    /// `devices` (id, NUMA node) of `example.com/gpu`.
    fn with_devices(
        policy: &str,
        uid: &str,
        devices: &[(&str, i64)],
    ) -> (CpuManager, Pod, DeviceManagerState) {
        use crate::domain::devices::ContainerAllocateResponse;
        let m = two_numa_manager(policy);
        let mut state = gpus(devices);
        let ids: Vec<String> = devices.iter().map(|(id, _)| (*id).to_string()).collect();
        let limits: BTreeMap<String, Quantity> = [
            ("cpu".to_string(), q("1")),
            ("memory".to_string(), q("100Mi")),
            ("example.com/gpu".to_string(), q(&ids.len().to_string())),
        ]
        .into();
        state.commit(
            uid,
            "c",
            "example.com/gpu",
            &ids,
            ContainerAllocateResponse::default(),
            Vec::new(),
        );
        let mut pod = Pod::default();
        pod.metadata.uid = uid.into();
        pod.spec
            .containers
            .push(container("c", limits.clone(), limits));
        (m, pod, state)
    }

    // The device manager's hints join the CPU hints: the CPU follows the device's NUMA
    // node, and a policy that wants one node refuses devices spread over two.
    #[test]
    fn device_hints_align_the_cpus_or_refuse_the_pod() {
        let (mut m, pod, devices) = with_devices("best-effort", "g", &[("gpu1", 1)]);
        assert_eq!(m.admit(&pod, None, Some(&devices)).result, Ok(()));
        assert_eq!(m.container_cpuset("g", "c"), CpuSet::new([2]));
        let (mut m, pod, _) = with_devices("best-effort", "g", &[("gpu1", 1)]);
        assert_eq!(m.admit(&pod, None, None).result, Ok(()));
        assert_eq!(
            m.container_cpuset("g", "c"),
            CpuSet::new([1]),
            "no device hints"
        );
        let (mut m, pod, devices) =
            with_devices("single-numa-node", "g", &[("gpu0", 0), ("gpu1", 1)]);
        let refused = m.admit(&pod, None, Some(&devices));
        assert_eq!(
            refused.result,
            Err(super::super::topology_manager::topology_affinity_error())
        );
        assert_eq!(m.exclusive_cpus("g", "c"), None);
    }

    /// Upstream admits through the topology manager before any device is given: the
    /// trial's affinity is where the CPUs fit, and the device is taken there, not the
    /// first one free; a second container's hints see the first one's device taken.
    #[test]
    fn the_trial_admission_gives_each_container_its_affinity_for_the_devices() {
        let m = two_numa_manager("single-numa-node");
        let devices = gpus(&[("gpu0", 0), ("gpu1", 1)]);
        let limits = |cpu: &str, gpus: &str| -> BTreeMap<String, Quantity> {
            [
                ("cpu".to_string(), q(cpu)),
                ("memory".to_string(), q("100Mi")),
                ("example.com/gpu".to_string(), q(gpus)),
            ]
            .into()
        };
        let mut pod = Pod::default();
        pod.metadata.uid = "p".into();
        // Two CPUs fit node 1 alone (CPU 0 is reserved).
        pod.spec
            .containers
            .push(container("c", limits("2", "1"), limits("2", "1")));
        let affinities = m.device_affinities(&pod, None, &devices).expect("admitted");
        let node1 = affinities.get("c").and_then(|h| h.numa_node_affinity);
        assert_eq!(node1.map(|m| m.bits()), Some(vec![1]));
        let available = devices.available_devices("example.com/gpu");
        let split = devices.filter_by_affinity("example.com/gpu", &available, affinities.get("c"));
        assert_eq!(
            split.order(1, &[]).first().map(String::as_str),
            Some("gpu1")
        );
        assert_eq!(m.exclusive_cpus("p", "c"), None, "the trial gave no CPU");

        // Shared-pool containers give no CPU hint: the devices alone decide, and the
        // second sees the first's device taken.
        let mut two = Pod::default();
        two.metadata.uid = "q".into();
        two.spec.containers = vec![
            container("a", limits("500m", "1"), limits("500m", "1")),
            container("b", limits("500m", "1"), limits("500m", "1")),
        ];
        let affinities = m.device_affinities(&two, None, &devices).expect("admitted");
        let node_of = |name: &str| {
            affinities
                .get(name)
                .and_then(|h| h.numa_node_affinity)
                .map(|m| m.bits())
        };
        let (a, b) = (node_of("a"), node_of("b"));
        assert!(a.is_some() && b.is_some() && a != b, "{a:?} {b:?}");
    }
}
