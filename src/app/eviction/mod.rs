//! The eviction manager (upstream's `managerImpl.synchronize` loop): every
//! `--housekeeping-interval` (10 s), and at once when the kernel says a memory cgroup
//! crossed a threshold, it observes the node, asks the domain which conditions hold and
//! what is starved, reclaims on the node first for disk (dead containers, then unused
//! images), and evicts at most one pod per cycle through the pod loop, then waits for it
//! to be killed. Node conditions go to a watch channel (the node status and pod
//! admission read it) and to the log. Image GC runs beside it every 5 minutes.
//!
//! Rooms: `observe` (the stats summary), `reclaim` (node-level reclaim), `image_gc`
//! (image garbage collection). The decisions are `domain::eviction`'s.

pub mod image_gc;
pub mod observe;
pub mod reclaim;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};

use crate::app::container_manager::ContainerManager;
use crate::app::pods::{EvictionHooks, PodStatusStore};
use crate::app::server::shutdown_requested;
use crate::domain::cgroup::CgroupName;
use crate::domain::config::{EvictionSettings, NodeConfig};
use crate::domain::eviction::manager::{
    choose_pod, reclaim_sufficient, synchronize, Eviction, EvictionConfig, EvictionState,
};
use crate::domain::eviction::signals::NodeSummary;
use crate::domain::eviction::thresholds::{
    memcg_usage_threshold, notifiers_due, PressureCondition,
};
use crate::domain::eviction::{Signal, Threshold};
use crate::domain::kuberuntime::requests::RequestContext;
use crate::domain::pod::Pod;
use crate::ports::clock::Clock;
use crate::ports::error::Chain;
use crate::ports::node_stats::{MemoryThresholdNotifier, NodeStats, RuntimeStats, StatsError};
use crate::ports::runtime::RuntimeService;
use image_gc::ImageGc;
use observe::Observer;

/// How long the manager waits for an evicted pod to be killed (upstream's
/// `podCleanupTimeout`) and how often it looks.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);
const CLEANUP_POLL: Duration = Duration::from_millis(100);

/// What one cycle did.
#[derive(Debug, Clone, PartialEq)]
pub enum CycleOutcome {
    /// Nothing is watched (no threshold, no local storage limit).
    Idle,
    /// No pod had to go (nothing starved, or reclaim on the node was enough).
    NoEviction,
    /// These pods were handed to the pod loop for eviction.
    Evicted(Vec<Eviction>),
}

/// The manager's state and what it works through.
pub struct EvictionManager {
    config: EvictionConfig,
    settings: EvictionSettings,
    state: EvictionState,
    observer: Arc<Observer>,
    images: Arc<ImageGc>,
    runtime: Arc<dyn RuntimeService>,
    notifier: Arc<dyn MemoryThresholdNotifier>,
    store: PodStatusStore,
    clock: Arc<dyn Clock>,
    orders: mpsc::Sender<Eviction>,
    conditions: watch::Sender<Vec<PressureCondition>>,
    armed: Vec<JoinHandle<()>>,
    notifiers_set_at: Option<i64>,
    notifiers_unavailable: bool,
    /// The cycle running was woken by a kernel notification.
    crossed: bool,
    crossings_tx: mpsc::Sender<String>,
    crossings: mpsc::Receiver<String>,
}

impl Drop for EvictionManager {
    fn drop(&mut self) {
        for task in self.armed.drain(..) {
            task.abort();
        }
    }
}

/// A threshold watched by the kernel: on the root cgroup for `memory.available`, on
/// `kubepods` for `allocatableMemory.available`.
fn notifier_description(t: &Threshold) -> String {
    let kind = if t.is_hard() { "hard" } else { "soft" };
    let allocatable = if t.signal == Signal::AllocatableMemoryAvailable {
        "allocatable "
    } else {
        ""
    };
    format!("{kind} {allocatable}memory eviction threshold")
}

impl EvictionManager {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: EvictionConfig,
        settings: EvictionSettings,
        observer: Arc<Observer>,
        images: Arc<ImageGc>,
        runtime: Arc<dyn RuntimeService>,
        notifier: Arc<dyn MemoryThresholdNotifier>,
        store: PodStatusStore,
        clock: Arc<dyn Clock>,
        orders: mpsc::Sender<Eviction>,
        conditions: watch::Sender<Vec<PressureCondition>>,
    ) -> Self {
        let (crossings_tx, crossings) = mpsc::channel(16);
        EvictionManager {
            config,
            settings,
            state: EvictionState::default(),
            observer,
            images,
            runtime,
            notifier,
            store,
            clock,
            orders,
            conditions,
            armed: Vec::new(),
            notifiers_set_at: None,
            notifiers_unavailable: false,
            crossed: false,
            crossings_tx,
            crossings,
        }
    }

    /// The state after the last cycle.
    pub fn state(&self) -> &EvictionState {
        &self.state
    }

    /// Pods the kubelet no longer runs: their dead containers and sandboxes may all go.
    fn ended_pods(&self, active: &[Pod]) -> BTreeSet<String> {
        let active: BTreeSet<&str> = active.iter().map(|p| p.metadata.uid.as_str()).collect();
        self.store
            .pod_uids()
            .into_iter()
            .filter(|uid| !active.contains(uid.as_str()))
            .collect()
    }

    /// One cycle: observe, decide, reclaim, evict at most one pod (or every pod over a
    /// local storage limit).
    pub async fn cycle(&mut self) -> CycleOutcome {
        if self.config.is_idle() {
            return CycleOutcome::Idle;
        }
        let pods = self.store.active_pods();
        let now = self.clock.now_unix_nanos();
        let observation = self.observer.observe(&pods, now).await;
        let dedicated = observation.dedicated_image_fs;
        let Some(sync) = synchronize(
            &self.config,
            &self.state,
            &observation.summary,
            &pods,
            dedicated,
            now,
        ) else {
            return CycleOutcome::Idle;
        };
        self.refresh_notifiers(&observation.summary, now).await;
        self.publish(&sync.state.node_conditions);
        self.state = sync.state.clone();
        for pod in &sync.protected {
            error!(%pod, "Eviction manager: cannot evict a critical pod");
        }
        if !sync.local_storage.is_empty() {
            for eviction in &sync.local_storage {
                self.issue(eviction).await;
            }
            return CycleOutcome::Evicted(sync.local_storage);
        }
        let Some(starved) = &sync.starved else {
            debug!("Eviction manager: no resources are starved");
            return CycleOutcome::NoEviction;
        };
        info!(resource = %starved.resource, "Eviction manager: attempting to reclaim");
        if !starved.reclaim.is_empty() {
            let ended = self.ended_pods(&pods);
            reclaim::reclaim(starved.reclaim, self.runtime.as_ref(), &self.images, &ended).await;
            let after = self
                .observer
                .observe(&pods, self.clock.now_unix_nanos())
                .await;
            if reclaim_sufficient(&self.config, &after.summary) {
                info!(resource = %starved.resource, "Eviction manager: able to reduce resource pressure without evicting pods.");
                return CycleOutcome::NoEviction;
            }
        }
        info!(resource = %starved.resource, "Eviction manager: must evict pod(s) to reclaim");
        if pods.is_empty() {
            error!("Eviction manager: eviction thresholds have been met, but no pods are active to evict");
            return CycleOutcome::NoEviction;
        }
        let choice = choose_pod(
            &self.config,
            &sync,
            starved,
            &pods,
            &observation.summary,
            dedicated,
        );
        info!(pods = ?choice.ranked, "Eviction manager: pods ranked for eviction");
        for pod in &choice.protected {
            error!(%pod, "Eviction manager: cannot evict a critical pod");
        }
        match choice.eviction {
            Some(eviction) => {
                self.issue(&eviction).await;
                CycleOutcome::Evicted(vec![eviction])
            }
            None => {
                info!("Eviction manager: unable to evict any pods from the node");
                CycleOutcome::NoEviction
            }
        }
    }

    /// Records the `Evicted` event (in the log) and hands the pod to the pod loop.
    async fn issue(&self, eviction: &Eviction) {
        warn!(
            event = eviction.reason,
            pod = %eviction.pod,
            message = %eviction.message,
            annotations = ?eviction.annotations,
            grace_period_override = eviction.grace_period_override,
            "Evicting pod"
        );
        if self.orders.send(eviction.clone()).await.is_err() {
            warn!(pod = %eviction.pod, "the pod loop has stopped; the eviction is not carried out");
        }
    }

    /// Publishes the node conditions, logging each one that changes.
    fn publish(&self, now: &[PressureCondition]) {
        let before = self.conditions.borrow().clone();
        for condition in PressureCondition::ALL {
            let (was, is) = (before.contains(&condition), now.contains(&condition));
            if was != is {
                info!(condition = %condition, status = if is { "True" } else { "False" }, "node condition changed");
            }
        }
        if before != now {
            self.conditions.send_replace(now.to_vec());
        }
    }

    /// Sets the kernel thresholds again from fresh stats when due ([`notifiers_due`]).
    async fn refresh_notifiers(&mut self, summary: &NodeSummary, now: i64) {
        if !self.settings.kernel_memcg_notification || self.notifiers_unavailable {
            return;
        }
        if !notifiers_due(self.notifiers_set_at, now, self.crossed) {
            return;
        }
        self.notifiers_set_at = Some(now);
        for task in self.armed.drain(..) {
            task.abort();
        }
        let kubepods = self.observer.kubepods();
        for t in &self.config.thresholds {
            let (cgroup, memory) = match t.signal {
                Signal::MemoryAvailable => (CgroupName::root(), summary.memory),
                Signal::AllocatableMemoryAvailable => match &kubepods {
                    Some(k) => (k.clone(), summary.allocatable_memory),
                    None => continue,
                },
                _ => continue,
            };
            let Some(usage) = memory.as_ref().and_then(|m| memcg_usage_threshold(t, m)) else {
                continue;
            };
            let description = notifier_description(t);
            match self.notifier.arm(&cgroup, usage).await {
                Ok(mut crossings) => {
                    debug!(notifier = %description, usage_bytes = usage, "Eviction manager: setting notifier");
                    let tx = self.crossings_tx.clone();
                    self.armed.push(tokio::spawn(async move {
                        while crossings.crossed().await.is_ok() {
                            if tx.send(description.clone()).await.is_err() {
                                return;
                            }
                        }
                    }));
                }
                Err(StatsError::Unsupported(why)) => {
                    info!(%why, "Eviction manager: no kernel memory notifications; memory is observed every housekeeping interval");
                    self.notifiers_unavailable = true;
                    return;
                }
                Err(error) => {
                    info!(notifier = %description, error = %Chain(&error), "Eviction manager: failed to create memory threshold notifier");
                }
            }
        }
    }

    /// Waits until the evicted pods show as Failed (or 30 s pass).
    async fn wait_for_cleanup(&self, evicted: &[Eviction], stop: &mut watch::Receiver<bool>) {
        let deadline = tokio::time::Instant::now() + CLEANUP_TIMEOUT;
        loop {
            let killed = evicted.iter().all(|e| {
                self.store
                    .status_of(&e.pod_uid)
                    .is_none_or(|s| s.is_terminal())
            });
            if killed {
                let pods: Vec<&str> = evicted.iter().map(|e| e.pod.as_str()).collect();
                info!(?pods, "Eviction manager: pods successfully cleaned up");
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                info!("Eviction manager: timed out waiting for pods to be cleaned up");
                return;
            }
            tokio::select! {
                () = shutdown_requested(stop) => return,
                () = tokio::time::sleep(CLEANUP_POLL) => {}
            }
        }
    }

    /// Runs cycles every monitoring period and on each kernel notification, until
    /// `stop`.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        if self.config.is_idle() {
            info!("Eviction manager: no thresholds and no local storage isolation; not started");
            return;
        }
        info!(
            period = ?self.settings.monitoring_period,
            thresholds = self.config.thresholds.len(),
            kernel_memcg_notification = self.settings.kernel_memcg_notification,
            "Eviction manager: started"
        );
        let mut ticker = tokio::time::interval(self.settings.monitoring_period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut again = false;
        loop {
            if !again {
                tokio::select! {
                    () = shutdown_requested(&mut stop) => break,
                    _ = ticker.tick() => {}
                    Some(description) = self.crossings.recv() => {
                        info!("eviction manager: {description} crossed");
                        self.crossed = true;
                    }
                }
            }
            again = false;
            let outcome = self.cycle().await;
            self.crossed = false;
            if let CycleOutcome::Evicted(evicted) = outcome {
                info!(pods = ?evicted.iter().map(|e| e.pod.as_str()).collect::<Vec<_>>(), "Eviction manager: pods evicted, waiting for pod to be cleaned up");
                self.wait_for_cleanup(&evicted, &mut stop).await;
                again = true;
            }
            if *stop.borrow() {
                break;
            }
        }
        info!("Eviction manager: stopped");
    }
}

#[cfg(test)]
mod tests;

/// The ports the eviction manager and image GC read the node through (the composition
/// root picks them).
pub struct EvictionPorts {
    pub node: Arc<dyn NodeStats>,
    pub runtime: Arc<dyn RuntimeStats>,
    pub notifier: Arc<dyn MemoryThresholdNotifier>,
}

/// The running eviction manager and image GC: what the pod loop and the node status
/// take from them, and their tasks.
pub struct RunningEviction {
    /// For the pod loop: the pods to evict and the conditions pods are admitted under.
    pub hooks: EvictionHooks,
    /// The node's pressure conditions, for the node status.
    pub conditions: watch::Receiver<Vec<PressureCondition>>,
    pub tasks: Vec<JoinHandle<()>>,
}

/// What the manager works on besides its ports.
pub struct EvictionInputs {
    pub node: NodeConfig,
    pub requests: RequestContext,
    pub containers: Arc<ContainerManager>,
    pub runtime: Arc<dyn RuntimeService>,
    pub store: PodStatusStore,
    pub clock: Arc<dyn Clock>,
}

/// Starts the eviction manager (every `--housekeeping-interval`) and image GC (every
/// 5 minutes) until `stop`.
pub fn start(
    inputs: EvictionInputs,
    ports: EvictionPorts,
    stop: &watch::Receiver<bool>,
) -> RunningEviction {
    let (orders_tx, orders) = mpsc::channel(16);
    let (conditions_tx, conditions) = watch::channel(Vec::new());
    let observer = Arc::new(Observer {
        stats: ports.node,
        runtime: Arc::clone(&ports.runtime),
        tree: inputs.containers.tree().cloned(),
        memory_capacity_bytes: inputs.requests.memory_capacity_bytes,
        requests: inputs.requests,
    });
    let images = Arc::new(ImageGc::new(
        ports.runtime,
        inputs.store.clone(),
        Arc::clone(&inputs.clock),
        inputs.node.eviction.image_gc,
        inputs.node.eviction.pod_sandbox_image.clone(),
    ));
    let manager = EvictionManager::new(
        inputs.node.eviction_config(),
        inputs.node.eviction.clone(),
        Arc::clone(&observer),
        Arc::clone(&images),
        inputs.runtime,
        ports.notifier,
        inputs.store,
        inputs.clock,
        orders_tx,
        conditions_tx,
    );
    let tasks = vec![
        tokio::spawn(manager.run(stop.clone())),
        tokio::spawn(images.run(observer, image_gc::IMAGE_GC_PERIOD, stop.clone())),
    ];
    RunningEviction {
        hooks: EvictionHooks {
            orders,
            conditions: conditions.clone(),
        },
        conditions,
        tasks,
    }
}
