//! What the kubelet does with a container's probes and lifecycle hooks, as upstream's
//! prober workers (`pkg/kubelet/prober/worker.go`), prober (`prober.go`), results
//! managers and `killContainer` decide it: when a probe runs, how its answers turn
//! into a result past the thresholds, what a result means for `started`, `ready` and
//! the pod's conditions, and which container is killed, why and with which grace.
//!
//! The spec types (`Probe`, `LifecycleHandler`), their defaults and validation are in
//! `spec`; the app
//! runs the handlers through its ports and feeds the answers back here.

pub mod spec;
pub mod target;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::domain::kuberuntime::runtime::{ContainerState, ContainerStatus};
use crate::domain::pod::{Container, Pod, RestartPolicy};
use crate::domain::probe::spec::Probe;
use crate::domain::status::{pod_conditions, ApiPodStatus};

pub use target::{resolve_port, HandlerTarget, HttpTarget, TargetError};

/// Which of a container's probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 3] = [
        ProbeKind::Startup,
        ProbeKind::Liveness,
        ProbeKind::Readiness,
    ];

    /// The container's probe of this kind.
    pub fn of(self, container: &Container) -> Option<&Probe> {
        match self {
            ProbeKind::Liveness => container.liveness_probe.as_ref(),
            ProbeKind::Readiness => container.readiness_probe.as_ref(),
            ProbeKind::Startup => container.startup_probe.as_ref(),
        }
    }

    /// The result a new container starts with (upstream's `initialValue`): live until
    /// shown otherwise, not ready until shown ready, not known to have started.
    fn initial_result(self) -> ProbeResult {
        match self {
            ProbeKind::Liveness => ProbeResult::Success,
            ProbeKind::Readiness => ProbeResult::Failure,
            ProbeKind::Startup => ProbeResult::Unknown,
        }
    }

    /// Whether a failure past the threshold kills the container.
    pub fn kills(self) -> bool {
        matches!(self, ProbeKind::Liveness | ProbeKind::Startup)
    }

    /// Whether a new container instance is probed at once rather than at the probe's next
    /// tick. Upstream triggers only the readiness probe early (its `manualTriggerCh`), so
    /// a pod turns ready sooner; a probe that kills keeps its cadence, since probing a
    /// process in the first milliseconds of its life fails a server not yet listening and,
    /// with `failureThreshold: 1`, restarts a container upstream would have left alone.
    pub fn probes_a_new_container_at_once(self) -> bool {
        self == ProbeKind::Readiness
    }
}

impl ProbeKind {
    /// Upstream's `probeType.String()`, in logs and the `probe_type` label.
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Startup => "Startup",
        }
    }
}

impl fmt::Display for ProbeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Upstream's start-up spread: a probe first seen within one period of the kubelet's start
/// (a restarted kubelet finds every container at once) waits part of its period first, so
/// the probes of many pods do not all run together. `key` (the pod, container and kind)
/// picks the part through a hash, so the spread needs no random source and a test can
/// predict it.
pub fn first_probe_delay(
    kubelet_age: std::time::Duration,
    period: std::time::Duration,
    key: &impl std::hash::Hash,
) -> std::time::Duration {
    use std::hash::Hasher;
    if kubelet_age >= period {
        return std::time::Duration::ZERO;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    let thousandths = u32::try_from(hasher.finish() % 1000).unwrap_or(0);
    period * thousandths / 1000
}

/// The `pod` label of the probe metrics (upstream's `getPodLabelName`): a generated name
/// loses its random suffix and a Deployment's `pod-template-hash`, so the series of a
/// workload's pods share one name.
pub fn metrics_pod_name(pod: &crate::domain::pod::Pod) -> String {
    let name = &pod.metadata.name;
    if pod.metadata.generate_name.is_empty() {
        return name.clone();
    }
    let mut parts: Vec<&str> = name.split('-').collect();
    parts.pop();
    let mut base = parts.join("-");
    if let Some(hash) = pod.metadata.labels.get("pod-template-hash") {
        base = base.replace(&format!("-{hash}"), "");
    }
    base
}

/// A probe's settled result (upstream's `results.Result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    Unknown,
    Success,
    Failure,
}

/// What one run of a handler answered (upstream's `probe.Result`, its output, and
/// the error when the handler could not run at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerOutcome {
    Success(String),
    /// A success with a warning (an HTTP redirect to another host).
    Warning(String),
    Failure(String),
    /// The handler could not run (a port name not found, the runtime failing the
    /// exec): the result is thrown away, as upstream's worker does.
    Error(String),
}

/// An event for the container, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeEvent {
    /// `Warning` or `Normal`.
    pub event_type: &'static str,
    /// `Unhealthy`, `ProbeWarning`, `Killing`, `FailedPostStartHook`, `FailedPreStopHook`.
    pub reason: &'static str,
    pub message: String,
}

impl ProbeEvent {
    fn warning(reason: &'static str, message: String) -> Self {
        Self {
            event_type: "Warning",
            reason,
            message,
        }
    }
}

/// What a worker does at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Run the handler against this container now.
    Probe,
    /// Nothing to do this period.
    Skip,
    /// The worker is done: the pod is terminating or its container will not run again.
    Stop,
}

/// What a worker sees of the pod at a tick.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    /// The newest instance of the worker's container; `None` before it is created.
    pub container: Option<&'a ContainerStatus>,
    /// Whether the container's startup probe has passed (or it has none).
    pub started: bool,
    pub restart_policy: RestartPolicy,
    /// The pod is being deleted.
    pub terminating: bool,
    pub now_unix_nanos: i64,
}

/// What recording an answer changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The settled result changed: the pod's status (and, for a failing liveness or
    /// startup probe, its containers) must be looked at again.
    pub changed: bool,
    pub event: Option<ProbeEvent>,
    /// The liveness or startup probe failed past its threshold: kill the container.
    pub kill: bool,
}

/// One probe of one container, as upstream's worker keeps it: the settled result for
/// the current container instance and the run of equal answers towards a threshold.
#[derive(Debug, Clone)]
pub struct ProbeWorker {
    kind: ProbeKind,
    probe: Probe,
    container_id: String,
    result: Option<ProbeResult>,
    on_hold: bool,
    last_answer: Option<ProbeResult>,
    answer_run: i32,
}

impl ProbeWorker {
    pub fn new(kind: ProbeKind, probe: Probe) -> Self {
        Self {
            kind,
            probe,
            container_id: String::new(),
            result: None,
            on_hold: false,
            last_answer: None,
            answer_run: 0,
        }
    }

    pub fn kind(&self) -> ProbeKind {
        self.kind
    }

    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// The container instance the result is about; empty before the first one.
    pub fn container_id(&self) -> &str {
        &self.container_id
    }

    /// The settled result for the current instance; `None` before one was seen.
    pub fn result(&self) -> Option<ProbeResult> {
        self.result
    }

    pub fn period(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.probe.period_seconds.max(1)).unwrap_or(1))
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.probe.timeout_seconds.max(1)).unwrap_or(1))
    }

    /// Upstream's `doProbe` up to the handler: follows a new container instance
    /// (resetting the result to the kind's initial value), holds off until the initial
    /// delay has passed and until startup is done (startup probes stop then).
    pub fn tick(&mut self, pod: &PodView<'_>) -> Tick {
        let Some(c) = pod.container.filter(|c| !c.id.is_empty()) else {
            return Tick::Skip;
        };
        if self.container_id != c.id {
            self.container_id = c.id.clone();
            self.result = Some(self.kind.initial_result());
            self.on_hold = false;
            self.last_answer = None;
            self.answer_run = 0;
        }
        if self.on_hold {
            return Tick::Skip;
        }
        if c.state != ContainerState::Running {
            self.result = Some(ProbeResult::Failure);
            // Done when the container exited for good.
            let restarts = pod.restart_policy != RestartPolicy::Never;
            return if c.state != ContainerState::Exited || restarts {
                Tick::Skip
            } else {
                Tick::Stop
            };
        }
        if pod.terminating && self.kind.kills() {
            // A pod shutting down is not killed for failing its liveness probe.
            self.result = Some(ProbeResult::Success);
            return Tick::Stop;
        }
        let running_secs = pod.now_unix_nanos.saturating_sub(c.started_at_nanos) / 1_000_000_000;
        if running_secs < i64::from(self.probe.initial_delay_seconds) {
            return Tick::Skip;
        }
        match (pod.started, self.kind) {
            (true, ProbeKind::Startup) | (false, ProbeKind::Liveness | ProbeKind::Readiness) => {
                Tick::Skip
            }
            _ => Tick::Probe,
        }
    }

    /// Upstream's `prober.probe` and the rest of `doProbe`: the events of an answer,
    /// then the thresholds. `container_id` is the instance the handler ran against; an
    /// answer about an instance that is gone is dropped.
    pub fn record(&mut self, container_id: &str, outcome: &HandlerOutcome) -> Recorded {
        let kind = self.kind;
        let mut recorded = Recorded::default();
        let answer = match outcome {
            HandlerOutcome::Success(_) => ProbeResult::Success,
            HandlerOutcome::Warning(output) => {
                recorded.event = Some(ProbeEvent::warning(
                    "ProbeWarning",
                    format!("{kind} probe warning: {output}"),
                ));
                ProbeResult::Success
            }
            HandlerOutcome::Failure(output) => {
                recorded.event = Some(ProbeEvent::warning(
                    "Unhealthy",
                    format!("{kind} probe failed: {output}"),
                ));
                ProbeResult::Failure
            }
            HandlerOutcome::Error(error) => {
                recorded.event = Some(ProbeEvent::warning(
                    "Unhealthy",
                    format!("{kind} probe errored: {error}"),
                ));
                return recorded;
            }
        };
        if container_id != self.container_id || self.on_hold {
            return recorded;
        }
        if self.last_answer == Some(answer) {
            self.answer_run = self.answer_run.saturating_add(1);
        } else {
            self.last_answer = Some(answer);
            self.answer_run = 1;
        }
        let threshold = match answer {
            ProbeResult::Failure => self.probe.failure_threshold,
            _ => self.probe.success_threshold,
        };
        if self.answer_run < threshold.max(1) {
            return recorded;
        }
        recorded.changed = self.result != Some(answer);
        self.result = Some(answer);
        if kind.kills() && answer == ProbeResult::Failure {
            // Probe no more until a new instance shows up.
            self.on_hold = true;
            self.answer_run = 0;
            recorded.kill = true;
        }
        recorded
    }
}

/// Whether a container has started and is ready, from its probes' results (upstream's
/// `UpdatePodStatus`). Each argument is `None` when the container has no such probe,
/// else the worker's result for the running instance (`None`: none yet).
pub fn started_and_ready(
    running: bool,
    startup: Option<Option<ProbeResult>>,
    readiness: Option<Option<ProbeResult>>,
) -> (bool, bool) {
    let settled = |probe: Option<Option<ProbeResult>>| match probe {
        None => true,
        Some(result) => result == Some(ProbeResult::Success),
    };
    let started = running && settled(startup);
    let ready = started && settled(readiness);
    (started, ready)
}

/// Writes what the probes say (`started`, `ready` by container name, from
/// [`started_and_ready`]) into `status` and recomputes the pod's conditions.
pub fn apply_to_status(
    pod: &Pod,
    status: &mut ApiPodStatus,
    states: &BTreeMap<String, (bool, bool)>,
) {
    for c in &mut status.container_statuses {
        if let Some((started, ready)) = states.get(&c.name) {
            c.started = *started;
            c.ready = *ready;
        }
    }
    status.conditions = pod_conditions(pod, status);
}

/// Why a container is killed, and how (upstream's `killContainer` inputs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerKill {
    pub container: String,
    pub container_id: String,
    /// The `Killing` event's message (upstream's, e.g. `Container app failed liveness
    /// probe, will be restarted`).
    pub message: String,
    pub grace_period_secs: i64,
}

/// The pod's grace period for killing one of its containers.
fn pod_grace_period(pod: &Pod) -> i64 {
    pod.spec.termination_grace_period()
}

/// The kill a liveness or startup failure past its threshold calls for (upstream's
/// `computePodActions` message and `setTerminationGracePeriod`: the probe's own
/// `terminationGracePeriodSeconds` wins over the pod's).
pub fn probe_kill(
    pod: &Pod,
    container: &Container,
    container_id: &str,
    kind: ProbeKind,
) -> ContainerKill {
    let mut message = format!(
        "Container {} failed {} probe",
        container.name,
        kind.to_string().to_lowercase()
    );
    if pod.spec.restart_policy != RestartPolicy::Never {
        message.push_str(", will be restarted");
    }
    let grace_period_secs = kind
        .of(container)
        .and_then(|p| p.termination_grace_period_seconds)
        .unwrap_or_else(|| pod_grace_period(pod));
    ContainerKill {
        container: container.name.clone(),
        container_id: container_id.to_owned(),
        message,
        grace_period_secs,
    }
}

/// The kill of a container whose `postStart` hook failed (upstream: message
/// `FailedPostStartHook`, the pod's grace).
pub fn post_start_kill(pod: &Pod, container: &Container, container_id: &str) -> ContainerKill {
    ContainerKill {
        container: container.name.clone(),
        container_id: container_id.to_owned(),
        message: "FailedPostStartHook".to_owned(),
        grace_period_secs: pod_grace_period(pod),
    }
}

/// The `Killing` event of `kill`.
pub fn killing_event(kill: &ContainerKill) -> ProbeEvent {
    ProbeEvent {
        event_type: "Normal",
        reason: "Killing",
        message: kill.message.clone(),
    }
}

/// The event of a failed hook; the hook's output stays out of it so secrets do not
/// leak (upstream's words).
pub fn hook_failed_event(post_start: bool) -> ProbeEvent {
    if post_start {
        ProbeEvent::warning("FailedPostStartHook", "PostStartHook failed".to_owned())
    } else {
        ProbeEvent::warning("FailedPreStopHook", "PreStopHook failed".to_owned())
    }
}

/// Upstream's minimal shutdown window left after a `preStop` hook: a container is
/// always given this long before SIGKILL.
pub const MINIMUM_GRACE_PERIOD_SECS: i64 = 2;

/// The grace left for the stop itself once a `preStop` hook took `hook_secs` (whole
/// seconds, as upstream counts) of `grace_secs`.
pub fn grace_after_pre_stop(grace_secs: i64, hook_secs: i64) -> i64 {
    grace_secs
        .saturating_sub(hook_secs)
        .max(MINIMUM_GRACE_PERIOD_SECS)
}

#[cfg(test)]
mod tests;
