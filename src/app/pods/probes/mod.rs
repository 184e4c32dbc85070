//! Probes and lifecycle hooks carried out: the probe manager (one scheduler task for
//! every probe of every pod, handlers run as short tasks, exec bounded in parallel),
//! the handlers run through the runtime port (`exec`) and the prober port (network),
//! and the hooks around a container's start and stop.
//!
//! The decisions are `domain::probe`'s: when a probe runs, what an answer means,
//! which kill a failure calls for. Pod workers feed the manager each sync's runtime
//! view (`observe`) and take readiness from it (`apply_to_status`); the manager pokes
//! a pod's worker when a result changes, and kills a container whose liveness or
//! startup probe failed past its threshold.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::sync::SyncContext;
use crate::app::metrics::{probe_metrics, ProbeLabels};
use crate::app::server::shutdown_requested;
use crate::domain::kuberuntime::runtime::{ContainerState, PodRuntimeStatus};
use crate::domain::kuberuntime::teardown;
use crate::domain::pod::{format_pod, log_ref, Container, Pod};
use crate::domain::probe::spec::{LifecycleHandler, Probe};
use crate::domain::probe::target::{handler_pod_ip, hook_target, probe_target};
use crate::domain::probe::{
    self as decide, first_probe_delay, grace_after_pre_stop, hook_failed_event, killing_event,
    metrics_pod_name, post_start_kill, probe_kill, started_and_ready, ContainerKill,
    HandlerOutcome, HandlerTarget, PodView, ProbeEvent, ProbeKind, ProbeWorker, Tick,
};
use crate::domain::status::ApiPodStatus;
use crate::ports::error::Chain;
use crate::ports::prober::Prober;
use crate::ports::runtime::{RuntimeError, RuntimeService};

/// Exec probes running at once across the node: each is a runtime call and a process
/// in a container.
pub const MAX_PARALLEL_EXEC: usize = 16;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Records an event for a pod's container (logged, and written in connected mode).
pub(super) fn log_event(ctx: &SyncContext, pod: &Pod, container: &str, event: &ProbeEvent) {
    ctx.events
        .container(pod, container, crate::domain::events::from_probe(event));
}

/// The IP handlers without a host go to: the pod's newest ready sandbox's, the node's for
/// a host-network pod (`handler_pod_ip`); empty when none.
fn pod_ip(ctx: &SyncContext, pod: Option<&Pod>, status: &PodRuntimeStatus) -> String {
    kill_ip(ctx, pod, teardown::hooks_sandbox_ip(status))
}

/// Runs a resolved handler: exec in the container, network checks from the node.
pub(super) async fn run_handler(
    runtime: &dyn RuntimeService,
    prober: &dyn Prober,
    container_id: &str,
    target: &HandlerTarget,
    timeout: Duration,
) -> HandlerOutcome {
    match target {
        HandlerTarget::Exec(cmd) => match runtime.exec_sync(container_id, cmd, timeout).await {
            Ok(r) => {
                let mut output = String::from_utf8_lossy(&r.stdout).into_owned();
                output.push_str(&String::from_utf8_lossy(&r.stderr));
                if r.exit_code == 0 {
                    HandlerOutcome::Success(output)
                } else {
                    HandlerOutcome::Failure(output)
                }
            }
            // Upstream's ExecProbeTimeout: a timeout is a failure with this text.
            Err(RuntimeError::DeadlineExceeded { .. }) => {
                HandlerOutcome::Failure(format!("command {:?} timed out", cmd.join(" ")))
            }
            Err(error) => HandlerOutcome::Error(Chain(&error).to_string()),
        },
        HandlerTarget::Http(http) => prober.http_get(http, timeout).await,
        HandlerTarget::Tcp { host, port } => prober.tcp(host, *port, timeout).await,
        HandlerTarget::Grpc {
            host,
            port,
            service,
        } => prober.grpc(host, *port, service, timeout).await,
        HandlerTarget::Sleep(secs) => {
            tokio::time::sleep(Duration::from_secs(u64::try_from(*secs).unwrap_or(0))).await;
            HandlerOutcome::Success(String::new())
        }
    }
}

/// Runs a lifecycle hook of `container` (instance `container_id`); the error in
/// upstream's words.
async fn run_hook(
    ctx: &SyncContext,
    pod: &Pod,
    container: &Container,
    container_id: &str,
    handler: &LifecycleHandler,
    pod_ip: &str,
) -> Result<(), String> {
    let target = hook_target(handler, container, pod_ip).map_err(|e| e.to_string())?;
    if let HandlerTarget::Http(http) = &target {
        return ctx.prober.http_hook(http).await.map_err(|error| {
            format!(
                "HTTP lifecycle hook ({}) for Container {:?} in Pod {:?} failed - error: {}",
                http.path,
                container.name,
                format_pod(pod),
                Chain(&error)
            )
        });
    }
    // Upstream gives exec hooks no timeout of their own; the caller bounds preStop.
    let outcome = run_handler(
        ctx.runtime.as_ref(),
        ctx.prober.as_ref(),
        container_id,
        &target,
        Duration::ZERO,
    )
    .await;
    match (outcome, &target) {
        (HandlerOutcome::Success(_) | HandlerOutcome::Warning(_), _) => Ok(()),
        (HandlerOutcome::Failure(out) | HandlerOutcome::Error(out), HandlerTarget::Exec(cmd)) => {
            Err(format!(
                "Exec lifecycle hook ({cmd:?}) for Container {:?} in Pod {:?} failed - error: command {:?} failed, message: {out:?}",
                container.name,
                format_pod(pod),
                cmd.join(" ")
            ))
        }
        (HandlerOutcome::Failure(out) | HandlerOutcome::Error(out), _) => {
            Err(format!("Cannot run handler: {out}"))
        }
    }
}

/// Runs `container`'s `postStart` hook, if any, after its start. A failure kills the
/// container (event `FailedPostStartHook`) and returns upstream's message.
pub(super) async fn post_start(
    ctx: &SyncContext,
    pod: &Pod,
    container: &Container,
    container_id: &str,
    sandbox_id: &str,
) -> Result<(), String> {
    let Some(hook) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.post_start.as_ref())
    else {
        return Ok(());
    };
    let ip = match hook.http_get.as_ref().filter(|h| h.host.is_empty()) {
        Some(_) => ctx
            .runtime
            .pod_sandbox_status(sandbox_id)
            .await
            .map(|s| s.ip)
            .unwrap_or_default(),
        None => String::new(),
    };
    let Err(message) = run_hook(ctx, pod, container, container_id, hook, &ip).await else {
        return Ok(());
    };
    warn!(container = %container.name, id = container_id, %message, "Failed to execute PostStartHook");
    log_event(ctx, pod, &container.name, &hook_failed_event(true));
    kill_container(
        ctx,
        Some(pod),
        &post_start_kill(pod, container, container_id),
        "",
    )
    .await;
    Err(message)
}

/// Kills a container as upstream's `killContainer`: the `Killing` event, its
/// `preStop` hook (bounded by the grace period, whose time then comes off the grace),
/// then the stop with what is left. `pod` is the spec when known (no hook without it).
pub(super) async fn kill_container(
    ctx: &SyncContext,
    pod: Option<&Pod>,
    kill: &ContainerKill,
    pod_ip: &str,
) {
    let mut grace = kill.grace_period_secs;
    if let Some(pod) = pod {
        log_event(ctx, pod, &kill.container, &killing_event(kill));
        let container = pod
            .spec
            .containers
            .iter()
            .find(|c| c.name == kill.container);
        let hook = container.and_then(|c| {
            c.lifecycle
                .as_ref()
                .and_then(|l| l.pre_stop.as_ref())
                .map(|h| (c, h))
        });
        if let (Some((container, hook)), true) = (hook, grace > 0) {
            debug!(container = %kill.container, "Running preStop hook");
            let started = Instant::now();
            let limit = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
            let run = run_hook(ctx, pod, container, &kill.container_id, hook, pod_ip);
            match tokio::time::timeout(limit, run).await {
                Ok(Ok(())) => debug!(container = %kill.container, "PreStop hook completed"),
                Ok(Err(message)) => {
                    warn!(container = %kill.container, %message, "PreStop hook failed");
                    log_event(ctx, pod, &kill.container, &hook_failed_event(false));
                }
                Err(_) => info!(
                    container = %kill.container,
                    grace_period = grace,
                    "PreStop hook not completed in grace period"
                ),
            }
            let took = i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX);
            grace = grace_after_pre_stop(grace, took);
        }
    }
    info!(container = %kill.container, container_id = %kill.container_id, grace_period = grace, "Killing container with a grace period");
    if let Err(error) = ctx.runtime.stop_container(&kill.container_id, grace).await {
        warn!(container = %kill.container, error = %Chain(&error), "Container termination failed with gracePeriod");
    }
}

/// The kill of a container the pod spec wants stopped for `reason` (deletion, a spec
/// change): the pod's grace, upstream's default message.
pub(super) fn stop_kill(name: &str, id: &str, grace: i64) -> ContainerKill {
    ContainerKill {
        container: name.to_owned(),
        container_id: id.to_owned(),
        message: format!("Stopping container {name}"),
        grace_period_secs: grace,
    }
}

/// The pod IP a kill's hooks use, given the sandbox's.
pub(super) fn kill_ip(ctx: &SyncContext, pod: Option<&Pod>, sandbox_ip: &str) -> String {
    let host_network = pod.is_some_and(|p| p.spec.host_network);
    handler_pod_ip(host_network, sandbox_ip, &ctx.volumes.node_ip())
}

/// The pod IP a kill's hooks use.
pub(super) fn kill_pod_ip(
    ctx: &SyncContext,
    pod: Option<&Pod>,
    status: &PodRuntimeStatus,
) -> String {
    pod_ip(ctx, pod, status)
}

/// One probe of one container and its schedule.
struct Slot {
    container: String,
    worker: ProbeWorker,
    next_run: Instant,
    /// A handler is running; the slot is not due until it answers.
    running: bool,
}

/// The labels of a probe worker's series in `/metrics/probes`.
fn probe_labels(pod: &Pod, container: &str, kind: ProbeKind) -> ProbeLabels {
    ProbeLabels {
        probe_type: kind.name(),
        container: container.to_owned(),
        pod: metrics_pod_name(pod),
        namespace: pod.metadata.namespace.clone(),
        pod_uid: pod.metadata.uid.clone(),
    }
}

/// A worker that stops takes its series with it, as upstream's.
fn forget_series(pod: &Pod, slot: &Slot) {
    probe_metrics().forget(&probe_labels(pod, &slot.container, slot.worker.kind()));
}

/// What the manager knows of one pod.
struct PodProbes {
    pod: Pod,
    runtime: PodRuntimeStatus,
    poke: Arc<Notify>,
    slots: Vec<Slot>,
}

impl PodProbes {
    /// Whether `container`'s startup probe has passed (or it has none), for the
    /// running instance.
    fn started(&self, container: &str) -> bool {
        let running = self
            .runtime
            .find_container(container)
            .is_some_and(|c| c.state == ContainerState::Running);
        let startup = self.result_of(container, ProbeKind::Startup);
        started_and_ready(running, startup, None).0
    }

    /// `None` without such a probe; else its result for the newest instance.
    fn result_of(&self, container: &str, kind: ProbeKind) -> Option<Option<decide::ProbeResult>> {
        let newest = self
            .runtime
            .find_container(container)
            .map(|c| c.id.as_str());
        self.slots
            .iter()
            .find(|s| s.container == container && s.worker.kind() == kind)
            .map(|s| {
                s.worker
                    .result()
                    .filter(|_| Some(s.worker.container_id()) == newest)
            })
    }
}

/// A probe handler to run, taken from a due slot.
struct Run {
    uid: String,
    container: String,
    kind: ProbeKind,
    container_id: String,
    target: Result<HandlerTarget, String>,
    timeout: Duration,
    /// When the probe began, for `prober_probe_duration_seconds`.
    began: std::time::Instant,
}

/// Every probe of every pod; see the module documentation.
pub struct ProbeManager {
    runtime: Arc<dyn RuntimeService>,
    ctx: Arc<SyncContext>,
    exec_permits: Arc<Semaphore>,
    pods: Mutex<HashMap<String, PodProbes>>,
    wake: Notify,
    /// When the manager started: probes first seen within a period of it are spread over
    /// their period (`first_probe_delay`).
    started: Instant,
}

impl ProbeManager {
    pub fn new(ctx: Arc<SyncContext>) -> Arc<Self> {
        Arc::new(Self {
            runtime: Arc::clone(&ctx.runtime),
            ctx,
            exec_permits: Arc::new(Semaphore::new(MAX_PARALLEL_EXEC)),
            pods: Mutex::new(HashMap::new()),
            wake: Notify::new(),
            started: Instant::now(),
        })
    }

    /// A sync's view of `pod`: its spec (probes added or removed with it) and what
    /// the runtime holds. `poke` wakes the pod's worker.
    pub(super) fn observe(&self, pod: &Pod, runtime: &PodRuntimeStatus, poke: &Arc<Notify>) {
        let wanted: Vec<(String, ProbeKind, &Probe)> = pod
            .spec
            .containers
            .iter()
            .flat_map(|c| {
                ProbeKind::ALL
                    .into_iter()
                    .filter_map(move |k| k.of(c).map(|p| (c.name.clone(), k, p)))
            })
            .collect();
        let mut pods = lock(&self.pods);
        if wanted.is_empty() {
            if let Some(gone) = pods.remove(&pod.metadata.uid) {
                gone.slots.iter().for_each(|s| forget_series(&gone.pod, s));
            }
            return;
        }
        let entry = pods
            .entry(pod.metadata.uid.clone())
            .or_insert_with(|| PodProbes {
                pod: pod.clone(),
                runtime: PodRuntimeStatus::default(),
                poke: Arc::clone(poke),
                slots: Vec::new(),
            });
        let now = Instant::now();
        let known = entry.pod.clone();
        entry.slots.retain(|s| {
            let keep = wanted.iter().any(|(c, k, p)| {
                *c == s.container && *k == s.worker.kind() && *p == s.worker.probe()
            });
            if !keep {
                forget_series(&known, s);
            }
            keep
        });
        for (container, kind, probe) in wanted {
            let exists = entry
                .slots
                .iter()
                .any(|s| s.container == container && s.worker.kind() == kind);
            if !exists {
                let worker = ProbeWorker::new(kind, probe.clone());
                let delay = first_probe_delay(
                    self.started.elapsed(),
                    worker.period(),
                    &(pod.metadata.uid.as_str(), container.as_str(), kind.name()),
                );
                entry.slots.push(Slot {
                    container,
                    worker,
                    next_run: now + delay,
                    running: false,
                });
            }
        }
        // A container that just started: its readiness is looked at now rather than a
        // period later.
        for slot in &mut entry.slots {
            if !slot.worker.kind().probes_a_new_container_at_once() {
                continue;
            }
            let newest = runtime
                .find_container(&slot.container)
                .map(|c| c.id.as_str());
            if newest.is_some_and(|id| id != slot.worker.container_id()) && !slot.running {
                slot.next_run = now;
            }
        }
        entry.pod = pod.clone();
        entry.runtime = runtime.clone();
        entry.poke = Arc::clone(poke);
        drop(pods);
        self.wake.notify_one();
    }

    /// The pod is going away: its probes stop (upstream stops liveness at deletion).
    pub(super) fn forget(&self, uid: &str) {
        if let Some(gone) = lock(&self.pods).remove(uid) {
            gone.slots.iter().for_each(|s| forget_series(&gone.pod, s));
        }
    }

    /// Writes `started`, `ready` and the conditions the probes give into `status`.
    pub(super) fn apply_to_status(&self, pod: &Pod, status: &mut ApiPodStatus) {
        let pods = lock(&self.pods);
        let Some(entry) = pods.get(&pod.metadata.uid) else {
            return;
        };
        let states: BTreeMap<String, (bool, bool)> = pod
            .spec
            .containers
            .iter()
            .map(|c| {
                let running = entry
                    .runtime
                    .find_container(&c.name)
                    .is_some_and(|s| s.state == ContainerState::Running);
                let state = started_and_ready(
                    running,
                    entry.result_of(&c.name, ProbeKind::Startup),
                    entry.result_of(&c.name, ProbeKind::Readiness),
                );
                (c.name.clone(), state)
            })
            .collect();
        decide::apply_to_status(pod, status, &states);
    }

    /// Ticks every due slot; returns the handlers to run and when to look next.
    fn due(&self) -> (Vec<Run>, Option<Instant>) {
        let now = Instant::now();
        let now_unix_nanos = self.ctx.clock.now_unix_nanos();
        let mut runs = Vec::new();
        let mut next: Option<Instant> = None;
        let mut pods = lock(&self.pods);
        for (uid, entry) in pods.iter_mut() {
            // Most wakes find one pod due, or none: the others cost a comparison per
            // probe, not their pod's view.
            if !entry.slots.iter().any(|s| !s.running && s.next_run <= now) {
                for slot in entry.slots.iter().filter(|s| !s.running) {
                    next = Some(next.map_or(slot.next_run, |n| n.min(slot.next_run)));
                }
                continue;
            }
            let started: HashMap<String, bool> = entry
                .pod
                .spec
                .containers
                .iter()
                .map(|c| (c.name.clone(), entry.started(&c.name)))
                .collect();
            let ip = pod_ip(&self.ctx, Some(&entry.pod), &entry.runtime);
            let mut stopped = Vec::new();
            for (i, slot) in entry.slots.iter_mut().enumerate() {
                if slot.running {
                    continue;
                }
                if slot.next_run <= now {
                    let container = entry.runtime.find_container(&slot.container);
                    let view = PodView {
                        container,
                        started: started.get(&slot.container).copied().unwrap_or(false),
                        restart_policy: entry.pod.spec.restart_policy,
                        terminating: false,
                        now_unix_nanos,
                    };
                    let period = slot.worker.period();
                    match slot.worker.tick(&view) {
                        Tick::Probe => {
                            let spec = entry
                                .pod
                                .spec
                                .containers
                                .iter()
                                .find(|c| c.name == slot.container);
                            let target = match spec {
                                Some(c) => probe_target(&slot.worker.probe().handler, c, &ip)
                                    .map_err(|e| e.to_string()),
                                None => Err(format!("no container {}", slot.container)),
                            };
                            runs.push(Run {
                                uid: uid.clone(),
                                container: slot.container.clone(),
                                kind: slot.worker.kind(),
                                container_id: slot.worker.container_id().to_owned(),
                                target,
                                timeout: slot.worker.timeout(),
                                began: std::time::Instant::now(),
                            });
                            slot.running = true;
                        }
                        Tick::Skip => {}
                        Tick::Stop => stopped.push(i),
                    }
                    // Periods count from the schedule, not from the answer.
                    while slot.next_run <= now {
                        slot.next_run += period;
                    }
                }
                if !slot.running {
                    next = Some(next.map_or(slot.next_run, |n| n.min(slot.next_run)));
                }
            }
            for i in stopped.into_iter().rev() {
                let slot = entry.slots.remove(i);
                forget_series(&entry.pod, &slot);
            }
        }
        (runs, next)
    }

    /// Records a handler's answer and carries out what it calls for.
    async fn answer(self: Arc<Self>, run: Run, outcome: HandlerOutcome) {
        let effect = {
            let mut pods = lock(&self.pods);
            let Some(entry) = pods.get_mut(&run.uid) else {
                return;
            };
            let Some(slot) = entry
                .slots
                .iter_mut()
                .find(|s| s.container == run.container && s.worker.kind() == run.kind)
            else {
                return;
            };
            slot.running = false;
            // An error is thrown away, as upstream's (no result, no series).
            let result = match outcome {
                HandlerOutcome::Success(_) | HandlerOutcome::Warning(_) => Some("successful"),
                HandlerOutcome::Failure(_) => Some("failed"),
                HandlerOutcome::Error(_) => None,
            };
            if let Some(result) = result {
                probe_metrics().answered(
                    &probe_labels(&entry.pod, &run.container, run.kind),
                    result,
                    run.began.elapsed(),
                );
            }
            let recorded = slot.worker.record(&run.container_id, &outcome);
            let passed =
                recorded.changed && slot.worker.result() == Some(decide::ProbeResult::Success);
            if let Some(next) = run.kind.runs_next_at_once().filter(|_| passed) {
                let now = Instant::now();
                for other in entry
                    .slots
                    .iter_mut()
                    .filter(|s| s.container == run.container && s.worker.kind() == next)
                {
                    other.next_run = other.next_run.min(now);
                }
            }
            if let Some(event) = &recorded.event {
                log_event(&self.ctx, &entry.pod, &run.container, event);
            }
            debug!(pod = %log_ref(&entry.pod), container = %run.container, probe = %run.kind, ?outcome, "probe answered");
            // The pod and its IP only for a kill (its preStop hook): most answers change
            // nothing, and copying the pod for each cost more than the answer itself.
            let kill = recorded
                .kill
                .then(|| {
                    entry
                        .pod
                        .spec
                        .containers
                        .iter()
                        .find(|c| c.name == run.container)
                        .map(|c| {
                            (
                                probe_kill(&entry.pod, c, &run.container_id, run.kind),
                                entry.pod.clone(),
                                pod_ip(&self.ctx, Some(&entry.pod), &entry.runtime),
                            )
                        })
                })
                .flatten();
            (recorded.changed, kill, Arc::clone(&entry.poke))
        };
        self.wake.notify_one();
        let (changed, kill, poke) = effect;
        if let Some((kill, pod, ip)) = kill {
            kill_container(&self.ctx, Some(&pod), &kill, &ip).await;
        }
        if changed {
            poke.notify_one();
        }
    }

    async fn run_one(self: Arc<Self>, run: Run) {
        let outcome = match &run.target {
            Err(error) => HandlerOutcome::Error(error.clone()),
            Ok(target @ HandlerTarget::Exec(_)) => {
                let Ok(_permit) = Arc::clone(&self.exec_permits).acquire_owned().await else {
                    return;
                };
                run_handler(
                    self.runtime.as_ref(),
                    self.ctx.prober.as_ref(),
                    &run.container_id,
                    target,
                    run.timeout,
                )
                .await
            }
            Ok(target) => {
                run_handler(
                    self.runtime.as_ref(),
                    self.ctx.prober.as_ref(),
                    &run.container_id,
                    target,
                    run.timeout,
                )
                .await
            }
        };
        self.answer(run, outcome).await;
    }

    /// The scheduler: sleeps until the next probe is due (or a pod changes), starts
    /// the due handlers as tasks, until `stop`.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            let (runs, next) = self.due();
            for run in runs {
                tokio::spawn(Arc::clone(&self).run_one(run));
            }
            let sleep = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown_requested(&mut stop) => return,
                () = self.wake.notified() => {}
                () = sleep => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
