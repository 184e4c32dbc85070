//! The pod loop: sources feed the pod manager; one worker per pod syncs it (a pod's
//! syncs never overlap, pods sync in parallel up to a bound); the PLEG relists the
//! runtime every second and wakes the workers of pods that changed; pods the runtime
//! holds that no source wants are terminated once every source has spoken.
//!
//! Rooms: `manager` (the sources' sets merged), `worker` (one per pod), `pleg`
//! (container events), `runtime_state` (what the runtime holds, relists), `sync`
//! (one sync carried out), `volume_manager` (the objects volumes hold, their set-up),
//! `volumes` (the pod files port off the async runtime, hostPath checks), `status` (the
//! status manager behind `/pods`), `probes` (probes and lifecycle hooks), `run_once`,
//! `events` (pod events to the log and the recorder), `mirror` (mirror pods in the API).

pub mod api_source;
pub mod api_status;
pub mod events;
pub mod manager;
pub mod mirror;
pub mod pleg;
pub mod probes;
mod pulls;
pub mod run_once;
pub mod runtime_state;
pub mod status;
pub mod sync;
pub mod sync_loop_health;
pub mod terminate;
pub mod userns;
pub mod volume_manager;
pub mod volumes;
pub mod volumes_in_use;
mod worker;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify, Semaphore};
use tracing::{debug, info, warn};

use crate::app::node::ConnectedNode;
use crate::app::server::shutdown_requested;
use crate::domain::admission::{admit_new_pods, by_creation, NodeInfo, Rejection};
use crate::domain::events as pod_events;
use crate::domain::eviction::manager::Eviction;
use crate::domain::eviction::thresholds::PressureCondition;
use crate::domain::kuberuntime::pleg::{
    pleg_event_text, pleg_events, PlegEventType, RelistCadence,
};
use crate::domain::pod::{log_ref, Pod};
use crate::domain::resource_managers::device_topology::DeviceTopology;
use crate::domain::status::rejected_pod_status;
use crate::ports::error::Chain;
use crate::ports::pod_source::{PodSetUpdate, PodSource};
use manager::{PodChange, PodManager};
use pleg::{forward_container_events, PlegHealth, RuntimeSignal};
use runtime_state::{changed_pods, relist, PodFingerprint};
use sync::SyncContext;
use sync_loop_health::SyncLoopHealth;
use worker::{worker_loop, Desired, RelistWake, Worker, WorkerShared};

pub use status::PodStatusStore;

/// How the loop paces itself.
#[derive(Debug, Clone, Copy)]
pub struct LoopSettings {
    /// The PLEG's relist period (upstream: 1 s).
    pub relist_period: Duration,
    /// Every pod is synced at least this often (`syncFrequency`, 1 m).
    pub resync_period: Duration,
    /// Pods syncing at the same time.
    pub max_parallel_syncs: usize,
    /// `EventedPLEG`: the relist slows while the runtime's events stream.
    pub evented_pleg: bool,
}

impl Default for LoopSettings {
    fn default() -> Self {
        Self {
            relist_period: Duration::from_secs(1),
            resync_period: Duration::from_secs(60),
            max_parallel_syncs: 8,
            evented_pleg: false,
        }
    }
}

/// How the eviction manager reaches the loop: the pods to evict, and the node
/// conditions new pods are admitted under.
pub struct EvictionHooks {
    pub orders: mpsc::Receiver<Eviction>,
    pub conditions: watch::Receiver<Vec<PressureCondition>>,
}

async fn next_order(hooks: &mut Option<EvictionHooks>) -> Option<Eviction> {
    match hooks {
        Some(hooks) => hooks.orders.recv().await,
        None => std::future::pending().await,
    }
}

/// The loop's state; see the module documentation.
pub struct PodLoop {
    shared: Arc<WorkerShared>,
    settings: LoopSettings,
    manager: PodManager,
    workers: HashMap<String, Worker>,
    done: mpsc::UnboundedReceiver<String>,
    last_relist: BTreeMap<String, PodFingerprint>,
    stale_cgroups_checked: bool,
    pleg: Arc<PlegHealth>,
    sync_loop: Arc<SyncLoopHealth>,
    /// Relists failed in a row, so an outage logs its first failure, one line a minute,
    /// and its end, not one line a second.
    relist_failures: u64,
    eviction: Option<EvictionHooks>,
    /// Pods evicted or refused admission: they stay Failed while their source keeps them.
    terminal: BTreeSet<String>,
    /// Where the static pods are published for their mirror pods (connected mode).
    static_pods: Option<watch::Sender<Vec<crate::domain::pod::Pod>>>,
    /// Pods being deleted in the API, terminated or being terminated: never run again.
    deleting: BTreeSet<String>,
    /// What node admission knows of the node before it is registered (standalone);
    /// without it (tests of the loop alone) pods are not checked against the node.
    node_info: Option<NodeInfo>,
    /// The registered node (connected mode): the API pods' clients and the node's facts.
    connected: Option<watch::Receiver<Option<ConnectedNode>>>,
    /// The device plugins' devices, allocated at admission.
    devices: Option<Arc<crate::app::devices::DeviceManager>>,
    /// The static CPU manager's exclusive CPUs, allocated at admission.
    cpus: Option<Arc<crate::app::cpu_manager::CpuManager>>,
    /// The topology manager over the devices alone (`cpuManagerPolicy: none`).
    device_topology: Option<Arc<DeviceTopology>>,
    /// Every source has sent its pods: the devices of pods none wants may be freed.
    sources_ready: bool,
    /// The active pods last told to the CPU and device managers.
    published: BTreeSet<String>,
}

/// Failed relists between two log lines while the runtime stays unreachable (a minute at
/// the default period).
const RELIST_FAILURES_PER_LOG: u64 = 60;

impl PodLoop {
    pub fn new(ctx: Arc<SyncContext>, store: PodStatusStore, settings: LoopSettings) -> Self {
        let (done_tx, done) = mpsc::unbounded_channel();
        let pleg = PlegHealth::new(Arc::clone(&ctx.clock));
        let sync_loop = SyncLoopHealth::new(Arc::clone(&ctx.clock), settings.resync_period);
        Self {
            shared: Arc::new(WorkerShared {
                store,
                permits: Arc::new(Semaphore::new(settings.max_parallel_syncs.max(1))),
                done: done_tx,
                resync: settings.resync_period,
                probes: probes::ProbeManager::new(Arc::clone(&ctx)),
                ctx,
            }),
            settings,
            manager: PodManager::new(),
            workers: HashMap::new(),
            done,
            last_relist: BTreeMap::new(),
            stale_cgroups_checked: false,
            pleg,
            sync_loop,
            relist_failures: 0,
            eviction: None,
            terminal: BTreeSet::new(),
            static_pods: None,
            deleting: BTreeSet::new(),
            node_info: None,
            connected: None,
            devices: None,
            cpus: None,
            device_topology: None,
            sources_ready: false,
            published: BTreeSet::new(),
        }
    }

    /// Allocates the device plugins' devices at admission (upstream's resource allocator
    /// admit handler, before the predicates).
    pub fn with_devices(mut self, devices: Arc<crate::app::devices::DeviceManager>) -> Self {
        self.devices = Some(devices);
        self
    }

    /// Devices are aligned by the topology manager without the CPU manager.
    pub fn with_device_topology(mut self, aligner: Arc<DeviceTopology>) -> Self {
        self.device_topology = Some(aligner);
        self
    }

    /// Allocates exclusive CPUs at admission (upstream's topology manager admit handler).
    pub fn with_cpu_manager(mut self, cpus: Arc<crate::app::cpu_manager::CpuManager>) -> Self {
        self.cpus = Some(cpus);
        self
    }

    /// Admits new pods against `node` (name, allocatable) until the node is registered.
    pub fn with_node_info(mut self, node: NodeInfo) -> Self {
        self.node_info = Some(node);
        self
    }

    /// Connected mode: statuses are written to the API once the node is registered, and
    /// admission reads the Node's labels and taints.
    pub fn with_connected(mut self, connected: watch::Receiver<Option<ConnectedNode>>) -> Self {
        // The status writer will take every change, from the first.
        self.shared.store.track_changes();
        self.connected = Some(connected);
        self
    }

    /// What admission knows of the node now, with the device plugins' resources.
    fn node_info(&self) -> Option<NodeInfo> {
        let mut info = self.node_info_without_devices();
        if let (Some(info), Some(devices)) = (info.as_mut(), &self.devices) {
            devices.admission_allocatable(&mut info.allocatable);
        }
        info
    }

    fn node_info_without_devices(&self) -> Option<NodeInfo> {
        let base = self.node_info.clone();
        let Some(connected) = &self.connected else {
            return base;
        };
        match &*connected.borrow() {
            Some(c) => Some(NodeInfo {
                name: c.node_name.clone(),
                labels: c.node.metadata.labels.clone(),
                allocatable: if c.allocatable.is_empty() {
                    base.map(|b| b.allocatable).unwrap_or_default()
                } else {
                    c.allocatable.clone()
                },
                taints: c.node.spec.taints.clone(),
            }),
            None => base,
        }
    }

    /// The domain's admission of the pods not seen before (in creation order, the
    /// pressure admission first, then the node's, beside the active pods); the verdict
    /// of each by uid.
    fn admit_new(
        &self,
        upserts: &[PodChange],
        refused: &HashMap<String, Rejection>,
    ) -> HashMap<String, Result<(), Rejection>> {
        let new: Vec<&Pod> = upserts
            .iter()
            .filter_map(|c| match c {
                PodChange::Upsert(pod) => Some(&**pod),
                PodChange::Remove { .. } => None,
            })
            .filter(|p| {
                let uid = &p.metadata.uid;
                !p.is_being_deleted()
                    && !self.workers.contains_key(uid)
                    && !self.terminal.contains(uid)
                    && !self.deleting.contains(uid)
                    && !refused.contains_key(uid)
            })
            .collect();
        let refused = refused.iter().map(|(uid, r)| (uid.clone(), Err(r.clone())));
        if new.is_empty() {
            return refused.collect();
        }
        let active: Vec<Pod> = self
            .manager
            .pods()
            .into_iter()
            .filter(|p| {
                let uid = &p.metadata.uid;
                self.workers.contains_key(uid)
                    && !self.terminal.contains(uid)
                    && !self.deleting.contains(uid)
            })
            .collect();
        let pressure = self
            .eviction
            .as_ref()
            .map(|hooks| hooks.conditions.borrow().clone())
            .unwrap_or_default();
        admit_new_pods(new, &active, self.node_info().as_ref(), &pressure)
            .into_iter()
            .map(|(pod, verdict)| (pod.metadata.uid.clone(), verdict))
            .chain(refused)
            .collect()
    }

    /// The pods with workers that are not refused, evicted or being deleted.
    fn active_uids(&self) -> BTreeSet<String> {
        self.workers
            .keys()
            .filter(|uid| self.is_active(uid))
            .cloned()
            .collect()
    }

    /// Upstream's active pod: not refused, evicted or being deleted, and not finished (a
    /// pod whose phase is Succeeded or Failed runs nothing more: its exclusive CPUs and
    /// devices go back).
    fn is_active(&self, uid: &str) -> bool {
        !self.terminal.contains(uid)
            && !self.deleting.contains(uid)
            && !self
                .shared
                .store
                .status_of(uid)
                .is_some_and(|status| status.is_terminal())
    }

    /// Upstream's resource allocator admission, after the eviction admission and before
    /// the predicates: each new pod asking for a device plugin's resource gets its
    /// devices, then (the topology manager's admit handler) a Guaranteed pod's
    /// integer-CPU containers their exclusive CPUs, in creation order, or the pod is
    /// refused (`UnexpectedAdmissionError`).
    async fn allocate_devices(&self, upserts: &[PodChange]) -> HashMap<String, Rejection> {
        if self.devices.is_none() && self.cpus.is_none() {
            return HashMap::new();
        }
        // Upstream's active pods: every pod the sources want that is not refused, evicted
        // or being deleted, this batch's included (a restart admits them again one by
        // one, and the devices of the later ones must not be freed meanwhile); and only
        // once every source has spoken, as upstream's `sourcesReady`.
        let wanted_pods: Vec<Pod> = self
            .manager
            .pods()
            .into_iter()
            .filter(|p| self.is_active(&p.metadata.uid))
            .collect();
        let wanted: BTreeSet<String> = wanted_pods.iter().map(|p| p.metadata.uid.clone()).collect();
        let active = self.sources_ready.then_some(&wanted);
        let wanted_containers = crate::app::cpu_manager::container_keys(&wanted_pods);
        let active_containers = self.sources_ready.then_some(&wanted_containers);
        // Upstream's eviction admission comes first: a pod it refuses gets no device
        // (`admit_new` refuses it with the pressure's reason).
        let pressure = self
            .eviction
            .as_ref()
            .map(|hooks| hooks.conditions.borrow().clone())
            .unwrap_or_default();
        let mut refused = HashMap::new();
        for change in upserts {
            let PodChange::Upsert(pod) = change else {
                continue;
            };
            let uid = &pod.metadata.uid;
            if pod.is_being_deleted()
                || self.workers.contains_key(uid)
                || self.terminal.contains(uid)
                || self.deleting.contains(uid)
                || crate::domain::eviction::admission::admit(pod, &pressure).is_err()
            {
                continue;
            }
            if let Some(devices) = &self.devices {
                // Upstream admits through the topology manager before any device is
                // given: its trial gives each container's affinity, the devices are
                // taken within it, then the CPUs (the devices' hints agreeing).
                let aligned = self.cpus.is_some() || self.device_topology.is_some();
                let affinities = if aligned && devices.wants_devices(pod) {
                    // Stranded devices freed first, as upstream before its hints.
                    if let Some(active) = active {
                        devices.free_inactive(active, Some(uid));
                    }
                    let state = devices.state_snapshot();
                    match (&self.cpus, &self.device_topology) {
                        (Some(cpus), _) => cpus.device_affinities(pod, active_containers, &state),
                        (None, Some(aligner)) => aligner.admit(pod, &state),
                        (None, None) => Ok(std::collections::BTreeMap::new()),
                    }
                } else {
                    Ok(std::collections::BTreeMap::new())
                };
                let given = match affinities {
                    Ok(affinities) => devices.allocate_pod_within(pod, active, &affinities).await,
                    Err(rejection) => Err(rejection),
                };
                if let Err(rejection) = given {
                    refused.insert(uid.clone(), rejection);
                    continue;
                }
            }
            if let Some(cpus) = &self.cpus {
                // The devices just given: their NUMA hints join the CPU hints.
                let devices = self.devices.as_ref().map(|d| d.state_snapshot());
                if let Err(rejection) = cpus.admit(pod, active_containers, devices.as_ref()) {
                    refused.insert(uid.clone(), rejection);
                }
            }
        }
        refused
    }

    /// Tells the device and CPU managers the pods that run (the pod resources API lists
    /// them; the CPUs of the others go back to the shared pool).
    fn publish_active_pods(&mut self) {
        let active = self.active_uids();
        let pods: Vec<&Pod> = active
            .iter()
            .filter_map(|uid| self.manager.get(uid))
            .collect();
        if let Some(cpus) = &self.cpus {
            let keys = crate::app::cpu_manager::container_keys(pods.iter().copied());
            cpus.set_active(self.sources_ready.then_some(keys));
        }
        if let Some(devices) = &self.devices {
            devices.set_active_pods(
                pods.iter()
                    .map(|p| crate::app::devices::ActivePod::of(p))
                    .collect(),
            );
        }
        self.published = active;
    }

    /// A pod refused admission: its event and Failed status; it stays so while its
    /// source keeps it.
    fn reject(&mut self, pod: &Pod, rejection: &Rejection) {
        self.shared.ctx.events.pod(
            pod,
            pod_events::refused_or_evicted(&rejection.reason, &rejection.message),
        );
        self.shared.store.set(
            pod,
            rejected_pod_status(&rejection.reason, &rejection.message),
        );
        self.terminal.insert(pod.metadata.uid.clone());
    }

    /// A pod being deleted in the API: terminated with the deletion's grace period, its
    /// final status written, then deleted there. A force deletion (grace 0) kills at once.
    fn delete(&mut self, pod: Box<Pod>) {
        let uid = pod.metadata.uid.clone();
        if !self.deleting.insert(uid.clone()) {
            return;
        }
        info!(pod = %log_ref(&pod), %uid, grace_period_secs = pod.termination_grace_period(), "pod is being deleted in the API");
        if pod.metadata.deletion_grace_period_seconds == Some(0) {
            self.dispatch(&uid, Desired::Terminate(Some(pod)));
            return;
        }
        if self.terminal.contains(&uid) && !self.workers.contains_key(&uid) {
            // Refused or evicted: nothing runs; the final status is the one it has.
            if let Some(status) = self.shared.store.status_of(&uid) {
                self.shared.store.set_final(&pod, status);
            }
            return;
        }
        self.dispatch(&uid, Desired::Delete(pod));
    }

    /// The relist's health, for `/healthz`.
    pub fn pleg_health(&self) -> Arc<PlegHealth> {
        Arc::clone(&self.pleg)
    }

    /// When the loop last came round, for the kubelet API's `/healthz`.
    pub fn sync_loop_health(&self) -> Arc<SyncLoopHealth> {
        Arc::clone(&self.sync_loop)
    }

    /// Takes evictions from the eviction manager and admits new pods under its node
    /// conditions.
    pub fn with_eviction(mut self, hooks: EvictionHooks) -> Self {
        self.eviction = Some(hooks);
        self
    }

    /// Publishes the static pods to `tx` after every change (for their mirror pods).
    pub fn with_static_pods(mut self, tx: watch::Sender<Vec<crate::domain::pod::Pod>>) -> Self {
        self.static_pods = Some(tx);
        self
    }

    /// Hands an eviction to the pod's worker; the pod then stays Failed.
    fn evict(&mut self, eviction: Eviction) {
        let uid = eviction.pod_uid.clone();
        let Some(pod) = self.manager.get(&uid).cloned() else {
            warn!(%uid, "eviction of a pod that is no longer desired; ignored");
            return;
        };
        // Upstream records the event before the pod is killed (the manager logged it).
        self.shared.ctx.events.pod_annotated(
            &pod,
            pod_events::refused_or_evicted(eviction.reason, &eviction.message),
            eviction.annotations.clone(),
        );
        self.terminal.insert(uid.clone());
        self.dispatch(&uid, Desired::Evict(Box::new(pod), Box::new(eviction)));
    }

    fn dispatch(&mut self, uid: &str, desired: Desired) {
        if let Some(worker) = self.workers.get(uid) {
            worker.desired.send_replace(desired);
            return;
        }
        let (tx, rx) = watch::channel(desired);
        let poke = Arc::new(Notify::new());
        let relisted = Arc::new(RelistWake::default());
        let task = tokio::spawn(worker_loop(
            uid.to_owned(),
            Arc::clone(&self.shared),
            rx,
            Arc::clone(&poke),
            Arc::clone(&relisted),
        ));
        self.workers.insert(
            uid.to_owned(),
            Worker {
                desired: tx,
                poke,
                relisted,
                task,
            },
        );
    }

    async fn apply(&mut self, update: PodSetUpdate) {
        let changes = self.manager.apply(update);
        if changes.is_empty() {
            return;
        }
        if let Some(tx) = &self.static_pods {
            let pods: Vec<_> = self
                .manager
                .pods()
                .into_iter()
                .filter(crate::domain::pod::mirror::is_static)
                .collect();
            tx.send_if_modified(|current| {
                let changed = *current != pods;
                *current = pods;
                changed
            });
        }
        // The QoS cgroups follow the desired pods (burstable shares sum their requests).
        if let Err(error) = self
            .shared
            .ctx
            .containers
            .update_qos(&self.manager.pods())
            .await
        {
            warn!(error = %Chain(&error), "failed to update the QoS cgroups");
        }
        let (mut upserts, removals): (Vec<PodChange>, Vec<PodChange>) = changes
            .into_iter()
            .partition(|c| matches!(c, PodChange::Upsert(_)));
        // Started in the order they were admitted.
        upserts.sort_by(|a, b| match (a, b) {
            (PodChange::Upsert(a), PodChange::Upsert(b)) => by_creation(a, b),
            _ => std::cmp::Ordering::Equal,
        });
        let refused = self.allocate_devices(&upserts).await;
        let verdicts = self.admit_new(&upserts, &refused);
        for change in upserts.into_iter().chain(removals) {
            match change {
                PodChange::Upsert(pod) => {
                    let uid = pod.metadata.uid.clone();
                    if pod.is_being_deleted() {
                        self.delete(pod);
                        continue;
                    }
                    if self.terminal.contains(&uid) || self.deleting.contains(&uid) {
                        debug!(%uid, "pod was evicted, refused or deleted; it stays so");
                        continue;
                    }
                    if let Some(Err(rejection)) = verdicts.get(&uid) {
                        self.reject(&pod, rejection);
                        continue;
                    }
                    self.dispatch(&uid, Desired::Run(pod));
                }
                PodChange::Remove { uid, last } => {
                    info!(pod = %log_ref(&last), %uid, "pod removed from its source");
                    self.terminal.remove(&uid);
                    self.deleting.remove(&uid);
                    self.dispatch(&uid, Desired::Terminate(Some(last)));
                }
            }
        }
    }

    fn worker_done(&mut self, uid: &str) {
        self.workers.remove(uid);
        // Re-added while it was being terminated: run it again.
        if self.terminal.contains(uid) || self.deleting.contains(uid) {
            return;
        }
        if let Some(pod) = self.manager.get(uid).cloned() {
            self.dispatch(uid, Desired::Run(Box::new(pod)));
        }
    }

    /// One PLEG pass: wake the workers of changed pods; terminate unwanted pods once
    /// `sources_ready`.
    async fn relist(&mut self, sources_ready: bool) {
        let started = std::time::Instant::now();
        let result = relist(self.shared.ctx.runtime.as_ref()).await;
        crate::app::metrics::kubelet_metrics()
            .pleg_relist_duration
            .observe(started.elapsed().as_secs_f64());
        let now = match result {
            Ok(now) => now,
            Err(error) => {
                if self.relist_failures.is_multiple_of(RELIST_FAILURES_PER_LOG) {
                    warn!(error = %Chain(&error), failures = self.relist_failures + 1, "PLEG relist failed");
                }
                self.relist_failures += 1;
                return;
            }
        };
        self.pleg.relisted();
        if self.relist_failures > 0 {
            info!(
                failures = self.relist_failures,
                "PLEG relist succeeded again"
            );
            self.relist_failures = 0;
        }
        for uid in changed_pods(&self.last_relist, &now) {
            if let Some(pod) = self.manager.get(&uid) {
                let none = PodFingerprint::new();
                let (before, after) = (
                    self.last_relist.get(&uid).unwrap_or(&none),
                    now.get(&uid).unwrap_or(&none),
                );
                // Upstream's sync loop logs every event but a removal, for wanted pods.
                for (id, kind) in pleg_events(before, after) {
                    if kind != PlegEventType::ContainerRemoved {
                        let event = pleg_event_text(&uid, kind, &id);
                        debug!(pod = %log_ref(pod), event, "SyncLoop (PLEG): event for pod");
                    }
                }
            }
            if let Some(worker) = self.workers.get(&uid) {
                let fingerprint = now.get(&uid).cloned().unwrap_or_default();
                worker.relisted.changed(started, fingerprint);
            }
        }
        if sources_ready && !self.stale_cgroups_checked {
            // Once, when every source has spoken: cgroups of pods that are neither
            // wanted nor in the runtime were left by a kubelet that was killed.
            self.stale_cgroups_checked = true;
            let keep: BTreeSet<String> = now
                .keys()
                .cloned()
                .chain(self.workers.keys().cloned())
                .chain(self.manager.pods().into_iter().map(|p| p.metadata.uid))
                .collect();
            self.shared.ctx.containers.remove_stale_pods(&keep).await;
        }
        if sources_ready {
            self.remove_orphaned_pod_dirs(&now).await;
        }
        if sources_ready {
            let orphans: Vec<String> = now
                .keys()
                .filter(|uid| !self.manager.contains(uid) && !self.workers.contains_key(*uid))
                .cloned()
                .collect();
            for uid in orphans {
                info!(%uid, "the runtime holds a pod no source wants; terminating it");
                self.dispatch(&uid, Desired::Terminate(None));
            }
        }
        self.last_relist = now;
    }

    /// Folders under `<root-dir>/pods` of pods that are neither wanted, nor being
    /// worked on, nor in the runtime (left by a kubelet killed between a pod's volume
    /// set-up and its sandbox, or during its teardown): their mounts (tmpfs volumes) are
    /// unmounted and the folders removed (upstream's `cleanupOrphanedPodDirs`).
    async fn remove_orphaned_pod_dirs<V>(&self, runtime: &std::collections::BTreeMap<String, V>) {
        let ctx = &self.shared.ctx;
        let pods_dir = ctx.requests.root_dir.join("pods");
        let found = {
            let pods_dir = pods_dir.clone();
            volumes::off_runtime(&ctx.volumes.files(), move |f| f.list_dir(&pods_dir)).await
        };
        let found = match found {
            Ok(found) => found,
            Err(error) => {
                debug!(error = %Chain(&error), "cannot list the pod folders");
                return;
            }
        };
        let keep: BTreeSet<String> = runtime
            .keys()
            .cloned()
            .chain(self.workers.keys().cloned())
            .chain(self.manager.pods().into_iter().map(|p| p.metadata.uid))
            .collect();
        for uid in crate::domain::kuberuntime::gc::orphaned_pod_dirs(&found, &keep) {
            let dir = pods_dir.join(&uid);
            info!(%uid, dir = %dir.display(), "removing the folder of an orphaned pod");
            if !terminate::remove_pod_dir(ctx, dir).await {
                warn!(%uid, "failed to remove the folder of an orphaned pod");
            }
        }
    }

    /// Runs until `stop` turns true. Pods keep running when the kubelet stops, as
    /// upstream's do: a restarted kubelet adopts them.
    pub async fn run(mut self, sources: Vec<Box<dyn PodSource>>, mut stop: watch::Receiver<bool>) {
        let (update_tx, mut updates) = mpsc::channel::<PodSetUpdate>(16);
        let expected = sources.len();
        let mut feeders = Vec::new();
        for mut source in sources {
            let tx = update_tx.clone();
            feeders.push(tokio::spawn(async move {
                while let Some(update) = source.next().await {
                    if tx.send(update).await.is_err() {
                        return;
                    }
                }
            }));
        }
        drop(update_tx);
        let (event_tx, mut events) = mpsc::channel::<RuntimeSignal>(64);
        let event_feeder = tokio::spawn(forward_container_events(
            Arc::clone(&self.shared.ctx.runtime),
            event_tx,
            crate::domain::kuberuntime::pleg::EVENT_STREAM_RETRY_DELAY,
        ));
        let prober = tokio::spawn(Arc::clone(&self.shared.probes).run(stop.clone()));
        let writer = self.connected.clone().map(|connected| {
            tokio::spawn(api_status::run_status_writer(
                self.shared.store.clone(),
                connected,
                stop.clone(),
            ))
        });
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut sources_open = true;
        let mut ticker = tokio::time::interval(self.settings.relist_period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        info!(sources = expected, "pod loop started");
        loop {
            // Before and after each round, as upstream's `syncLoopMonitor`: a round that
            // hangs leaves the entry old.
            self.sync_loop.entered();
            tokio::select! {
                () = shutdown_requested(&mut stop) => break,
                update = updates.recv(), if sources_open => match update {
                    Some(update) => {
                        seen.insert(update.source.clone());
                        self.sources_ready = seen.len() >= expected;
                        self.apply(update).await;
                        self.publish_active_pods();
                    }
                    None => sources_open = false,
                },
                Some(uid) = self.done.recv() => {
                    self.worker_done(&uid);
                    self.publish_active_pods();
                }
                Some(eviction) = next_order(&mut self.eviction) => self.evict(eviction),
                Some(signal) = events.recv() => match signal {
                    RuntimeSignal::Pod(uid) => {
                        if let Some(worker) = self.workers.get(&uid) {
                            worker.poke.notify_one();
                        }
                    }
                    RuntimeSignal::Streaming(streaming) => {
                        let cadence = RelistCadence::choose(
                            self.settings.evented_pleg,
                            streaming,
                            self.settings.relist_period,
                        );
                        if cadence.period != ticker.period() {
                            info!(period = ?cadence.period, threshold = ?cadence.threshold, events = streaming, "the PLEG's relist period changes (EventedPLEG)");
                            // A lost stream relists at once: an event may be missing.
                            ticker = tokio::time::interval_at(
                                tokio::time::Instant::now() + if streaming { cadence.period } else { Duration::ZERO },
                                cadence.period,
                            );
                            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                            self.pleg.set_threshold(cadence.threshold);
                        }
                    }
                },
                _ = ticker.tick() => {
                    let ready = seen.len() >= expected;
                    self.relist(ready).await;
                    // A pod that finished since is no longer active.
                    if self.active_uids() != self.published {
                        self.publish_active_pods();
                    }
                }
            }
            self.sync_loop.entered();
        }
        for feeder in feeders {
            feeder.abort();
        }
        event_feeder.abort();
        prober.abort();
        if let Some(writer) = writer {
            writer.abort();
        }
        for (_, worker) in self.workers.drain() {
            worker.task.abort();
        }
        info!("pod loop stopped; pods keep running");
    }
}

#[cfg(test)]
mod tests;
