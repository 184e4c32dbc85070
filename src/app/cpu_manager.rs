//! The CPU manager (upstream v1.26 `cm/cpumanager` with the `static` policy): built at
//! start-up from the machine's topology and the `cpu_manager_state` checkpoint, it gives
//! a Guaranteed pod's integer-CPU containers exclusive CPUs at admission, a container its
//! cpuset at creation, and every running container its current set in the reconcile loop
//! (`UpdateContainerResources`). Every decision is `domain::resource_managers::cpu_manager`'s;
//! the checkpoint goes through `ports::device_plugins` (the resource managers' checkpoint
//! files), the topology through `ports::machine`, the updates through `ports::runtime`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::domain::admission::Rejection;
use crate::domain::config::resolved::NodeConfig;
use crate::domain::devices::DeviceManagerState;
use crate::domain::kuberuntime::labels::{CONTAINER_NAME_LABEL, POD_UID_LABEL};
use crate::domain::kuberuntime::runtime::{ContainerFilter, ContainerState};
use crate::domain::node::allocatable::node_allocatable_reservation;
use crate::domain::pod::{log_ref, Pod};
use crate::domain::resource_managers::cpu_manager::{
    ContainerKey, CpuManager as Decisions, CpuManagerError, RunningContainer,
};
use crate::domain::resource_managers::device_topology::DeviceTopology;
use crate::domain::resource_managers::state::CPU_MANAGER_STATE_FILE_NAME;
use crate::domain::resource_managers::topology_manager::TopologyHint;
use crate::domain::resource_managers::OptionGates;
use crate::ports::device_plugins::{DevicePluginError, DevicePlugins};
use crate::ports::error::Chain;
use crate::ports::machine::{MachineInfoError, MachineInfoProvider};
use crate::ports::runtime::RuntimeService;

/// Why the CPU manager could not start: the kubelet exits, as upstream's
/// `NewContainerManager` fails.
#[derive(Debug, thiserror::Error)]
pub enum CpuManagerStartError {
    #[error("failed to read the machine's CPU topology")]
    Topology(#[source] MachineInfoError),
    #[error("failed to read the CPU manager checkpoint")]
    Read(#[source] DevicePluginError),
    #[error("failed to write the CPU manager checkpoint")]
    Write(#[source] DevicePluginError),
    #[error("failed to initialize cpu manager")]
    Manager(#[source] CpuManagerError),
}

pub struct CpuManager {
    decisions: Mutex<Decisions>,
    files: Arc<dyn DevicePlugins>,
    path: PathBuf,
    reconcile_period: Duration,
    /// The containers of the active pods; `None` until every pod source has spoken (no
    /// assignment is stale before that).
    active: Mutex<Option<BTreeSet<ContainerKey>>>,
}

impl std::fmt::Debug for CpuManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuManager")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The keys of every container (init and app) of these pods.
pub fn container_keys<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> BTreeSet<ContainerKey> {
    pods.into_iter()
        .flat_map(|p| {
            p.spec
                .init_containers
                .iter()
                .chain(&p.spec.containers)
                .map(|c| (p.metadata.uid.clone(), c.name.clone()))
        })
        .collect()
}

/// The topology manager's policy option gates.
fn topology_gates(node: &NodeConfig) -> OptionGates {
    OptionGates {
        alpha: node
            .feature_gates
            .enabled("TopologyManagerPolicyAlphaOptions"),
        beta: node
            .feature_gates
            .enabled("TopologyManagerPolicyBetaOptions"),
    }
}

/// The topology manager over the devices alone, when the CPU manager does not run it
/// (`cpuManagerPolicy: none` with a topology policy other than `none`).
///
/// # Errors
/// [`CpuManagerStartError`].
pub fn device_topology(
    node: &NodeConfig,
    machine: &dyn MachineInfoProvider,
) -> Result<Option<DeviceTopology>, CpuManagerStartError> {
    let settings = &node.cpu_manager;
    if settings.is_static() {
        return Ok(None);
    }
    let topology = machine
        .cpu_topology()
        .map_err(CpuManagerStartError::Topology)?;
    let aligner = DeviceTopology::new(settings, &topology, topology_gates(node))
        .map_err(CpuManagerStartError::Manager)?;
    if aligner.is_some() {
        info!(topology_manager_policy = %settings.topology_policy, scope = %settings.topology_scope, "Starting the topology manager over the devices (cpuManagerPolicy none)");
    }
    Ok(aligner)
}

impl CpuManager {
    /// The manager for `node.cpu_manager` (upstream's `NewManager` and `Start`); `None`
    /// with the `none` policy. The checkpoint is read (a bad one, or one of another
    /// policy, refuses the start in upstream's words) and written back.
    ///
    /// # Errors
    /// [`CpuManagerStartError`].
    pub fn start(
        node: &NodeConfig,
        root_dir: &Path,
        machine: &dyn MachineInfoProvider,
        files: Arc<dyn DevicePlugins>,
    ) -> Result<Option<Arc<CpuManager>>, CpuManagerStartError> {
        let settings = &node.cpu_manager;
        let topology = machine
            .cpu_topology()
            .map_err(CpuManagerStartError::Topology)?;
        let path = root_dir.join(CPU_MANAGER_STATE_FILE_NAME);
        let checkpoint = if settings.is_static() {
            files
                .read_checkpoint(&path)
                .map_err(CpuManagerStartError::Read)?
        } else {
            None
        };
        let reservation = node_allocatable_reservation(
            &node.node.capacity,
            &node.node.system_reserved,
            &node.node.kube_reserved,
            &node.node.hard_thresholds,
        );
        let decisions = Decisions::new(
            settings,
            &topology,
            &reservation,
            node.node.reserved_cpus.as_ref(),
            OptionGates::cpu_manager(&node.feature_gates),
            topology_gates(node),
            checkpoint.as_deref(),
            &path.display().to_string(),
        )
        .map_err(CpuManagerStartError::Manager)?;
        let Some(decisions) = decisions else {
            return Ok(None);
        };
        files
            .write_checkpoint(&path, &decisions.checkpoint())
            .map_err(CpuManagerStartError::Write)?;
        info!(
            policy = %settings.policy,
            reserved = %node.node.reserved_cpus.as_ref().map(ToString::to_string).unwrap_or_default(),
            shared = %decisions.shared_pool(),
            topology_manager_policy = %settings.topology_policy,
            scope = %settings.topology_scope,
            "Starting CPU manager"
        );
        Ok(Some(Arc::new(CpuManager {
            decisions: Mutex::new(decisions),
            files,
            path,
            reconcile_period: settings.reconcile_period,
            active: Mutex::new(None),
        })))
    }

    fn write_checkpoint(&self, decisions: &Decisions) {
        if let Err(e) = self
            .files
            .write_checkpoint(&self.path, &decisions.checkpoint())
        {
            error!(err = %Chain(&e), path = %self.path.display(), "Failed to write the CPU manager checkpoint");
        }
    }

    /// The containers of the pods the pod loop runs now (`None` before every source
    /// spoke).
    pub fn set_active(&self, active: Option<BTreeSet<ContainerKey>>) {
        *lock(&self.active) = active;
    }

    /// Upstream's topology manager admit handler with the CPU manager and the device
    /// manager (`devices`, its state after the pod's devices were given) as its hint
    /// providers: the pod's integer-CPU containers of a Guaranteed pod get their CPUs, or
    /// the pod is refused. `active`: the containers of every pod wanted (this one's
    /// included), `None` while the sources have not all spoken.
    pub fn admit(
        &self,
        pod: &Pod,
        active: Option<&BTreeSet<ContainerKey>>,
        devices: Option<&DeviceManagerState>,
    ) -> Result<(), Rejection> {
        // The reconcile loop must not take the new pod's CPUs for stale before the pod
        // loop publishes it as active.
        if let Some(known) = lock(&self.active).as_mut() {
            known.extend(container_keys([pod]));
        }
        let mut decisions = lock(&self.decisions);
        let outcome = decisions.admit(pod, active, devices);
        if outcome.changed {
            self.write_checkpoint(&decisions);
        }
        if let Err(rejection) = &outcome.result {
            warn!(pod = %log_ref(pod), reason = %rejection.reason, message = %rejection.message, "CPU manager refused the pod");
        }
        outcome.result
    }

    /// The topology manager's affinity for each container of `pod`, from a trial
    /// admission over the devices' state before the pod's are given: the device manager
    /// takes its devices within it.
    ///
    /// # Errors
    /// The refusal the admission would give; then no device is given.
    pub fn device_affinities(
        &self,
        pod: &Pod,
        active: Option<&BTreeSet<ContainerKey>>,
        devices: &DeviceManagerState,
    ) -> Result<BTreeMap<String, TopologyHint>, Rejection> {
        lock(&self.decisions).device_affinities(pod, active, devices)
    }

    /// The cpuset the container is created with (upstream's `PreCreateContainer`).
    pub fn container_cpuset(&self, pod_uid: &str, container: &str) -> String {
        lock(&self.decisions)
            .container_cpuset(pod_uid, container)
            .to_string()
    }

    /// The container's exclusive CPUs (the pod resources API's `cpu_ids`).
    pub fn exclusive_cpus(&self, pod_uid: &str, container: &str) -> Vec<i64> {
        lock(&self.decisions)
            .exclusive_cpus(pod_uid, container)
            .map(|cpus| cpus.iter().filter_map(|c| i64::try_from(c).ok()).collect())
            .unwrap_or_default()
    }

    /// CPUs that may be handed out exclusively (`GetAllocatableResources`).
    pub fn allocatable_cpus(&self) -> Vec<i64> {
        lock(&self.decisions)
            .allocatable_cpus()
            .iter()
            .filter_map(|c| i64::try_from(c).ok())
            .collect()
    }

    /// One round of upstream's `reconcileState`: stale assignments given back (the
    /// checkpoint written), then each running container whose set changed updated.
    pub async fn reconcile_once(&self, runtime: &dyn RuntimeService) {
        let active = lock(&self.active).clone();
        if let Some(active) = &active {
            let mut decisions = lock(&self.decisions);
            if decisions.remove_stale_state(active) {
                self.write_checkpoint(&decisions);
            }
        }
        let filter = ContainerFilter {
            state: Some(ContainerState::Running),
            ..ContainerFilter::default()
        };
        let listed = match runtime.list_containers(&filter).await {
            Ok(listed) => listed,
            Err(e) => {
                warn!(err = %Chain(&e), "ReconcileState: cannot list the containers");
                return;
            }
        };
        let running: Vec<RunningContainer> = listed
            .into_iter()
            .filter_map(|entry| {
                Some(RunningContainer {
                    pod_uid: entry.labels.get(POD_UID_LABEL)?.clone(),
                    name: entry.labels.get(CONTAINER_NAME_LABEL)?.clone(),
                    id: entry.status.id,
                })
            })
            // Only the active pods' containers, once known (a removed pod's last
            // container may still run while it stops).
            .filter(|c| {
                active
                    .as_ref()
                    .is_none_or(|a| a.contains(&(c.pod_uid.clone(), c.name.clone())))
            })
            .collect();
        let updates = lock(&self.decisions).reconcile(&running);
        for (container, cpus) in updates {
            let set = cpus.to_string();
            match runtime.update_container_cpuset(&container.id, &set).await {
                Ok(()) => {
                    info!(pod_uid = %container.pod_uid, container = %container.name, container_id = %container.id, cpuset = %set, "ReconcileState: updated the container's cpuset");
                    lock(&self.decisions).updated(&container.pod_uid, &container.name, cpus);
                }
                Err(e) => {
                    error!(pod_uid = %container.pod_uid, container = %container.name, container_id = %container.id, cpuset = %set, err = %Chain(&e), "ReconcileState: failed to update container");
                }
            }
        }
    }

    /// The reconcile loop, every `cpuManagerReconcilePeriod`, until shutdown.
    pub async fn run(
        self: Arc<Self>,
        runtime: Arc<dyn RuntimeService>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(self.reconcile_period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.reconcile_once(runtime.as_ref()).await,
                _ = shutdown.changed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::runtime::FakeRuntime;
    use crate::adapters::fake::{FakeDevicePlugins, FakeMachine};
    use crate::domain::pod::fixtures::container;
    use crate::domain::units::quantity::Quantity;

    fn node(reserved_cpus: &str) -> NodeConfig {
        let reserved = format!("--reserved-cpus={reserved_cpus}");
        crate::app::test_support::resolved(&["--cpu-manager-policy=static", &reserved]).node
    }

    fn pod(uid: &str, cpu: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.uid = uid.into();
        pod.metadata.name = uid.into();
        let q = |s: &str| Quantity::parse(s).unwrap_or_else(|e| panic!("{e}"));
        let res = [
            ("cpu".to_string(), q(cpu)),
            ("memory".to_string(), q("64Mi")),
        ];
        pod.spec.containers.push(container(
            "c",
            res.clone().into_iter().collect(),
            res.into_iter().collect(),
        ));
        pod
    }

    #[tokio::test]
    async fn admission_creation_reconcile_and_restart() {
        let files = FakeDevicePlugins::default();
        let root = Path::new("/root-dir");
        let start = || {
            CpuManager::start(
                &node("0"),
                root,
                &FakeMachine::default(),
                Arc::new(files.clone()),
            )
            .unwrap_or_else(|e| panic!("{}", Chain(&e)))
            .unwrap_or_else(|| panic!("static policy"))
        };
        let m = start();
        let state_file = root.join("cpu_manager_state");
        assert!(files.checkpoint_at(&state_file).is_some());
        let g = pod("g", "1");
        let active = container_keys([&g]);
        assert_eq!(m.admit(&g, Some(&active), None), Ok(()));
        assert_eq!(m.container_cpuset("g", "c"), "1");
        assert_eq!(m.container_cpuset("b", "c"), "0");
        assert_eq!(m.exclusive_cpus("g", "c"), vec![1]);
        assert_eq!(m.allocatable_cpus(), vec![1]);
        let refused = m.admit(&pod("g2", "1"), Some(&active), None);
        assert_eq!(
            refused.map_err(|r| r.reason),
            Err("UnexpectedAdmissionError".to_string())
        );
        let text = files.checkpoint_at(&state_file).unwrap_or_default();
        assert!(text.contains(r#""entries":{"g":{"c":"1"}}"#), "{text}");
        // A restarted manager keeps pod g's CPU.
        let again = start();
        assert_eq!(again.exclusive_cpus("g", "c"), vec![1]);
        // Reconcile: nothing runs, nothing is updated; pod g gone gives CPU 1 back.
        let runtime = FakeRuntime::new();
        again.set_active(Some(BTreeSet::new()));
        again.reconcile_once(&runtime).await;
        assert_eq!(again.container_cpuset("x", "c"), "0-1");
        let text = files.checkpoint_at(&state_file).unwrap_or_default();
        assert!(text.contains(r#""defaultCpuSet":"0-1""#), "{text}");
        assert!(runtime
            .journal()
            .iter()
            .all(|c| !c.starts_with("UpdateContainerResources")));
    }

    #[test]
    fn a_checkpoint_of_another_policy_refuses_the_start() {
        let files = FakeDevicePlugins::default();
        let root = Path::new("/root-dir");
        files.set_checkpoint(
            &root.join("cpu_manager_state"),
            r#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#,
        );
        let err = CpuManager::start(
            &node("0"),
            root,
            &FakeMachine::default(),
            Arc::new(files.clone()),
        )
        .err()
        .map(|e| Chain(&e).to_string());
        let err = err.unwrap_or_default();
        assert!(
            err.starts_with(
                "failed to initialize cpu manager: could not restore state from checkpoint: "
            ),
            "{err}"
        );
        assert!(err.contains("please drain this node and delete the CPU manager checkpoint file \"/root-dir/cpu_manager_state\" before restarting Kubelet"), "{err}");
    }
}
