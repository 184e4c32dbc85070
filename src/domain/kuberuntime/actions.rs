//! What to do to bring a pod's runtime state in line with its spec.
//!
//! [`compute_pod_actions`] is the pure core of a pod sync: given the desired
//! pod and what the runtime reports, it decides whether the sandbox must be
//! (re)created, which containers to kill and which to start. The caller
//! carries the actions out; crash-loop back-off is applied by the caller
//! when it starts containers (see `backoff`).
//!
//! The decision rules follow the upstream kubelet's `computePodActions` with
//! the sidecar-aware init container handling (the path upstream takes for
//! all pods once legacy sidecar handling is gone). Not modelled here:
//! liveness/startup probe results, in-place resize and deletion timestamps;
//! callers handle pod termination separately.

use std::fmt;

use crate::domain::kuberuntime::runtime::{
    ContainerState, ContainerStatus, PodRuntimeStatus, SandboxState,
};
use crate::domain::pod::{container_hash, container_hash_matches, Container, Pod, RestartPolicy};

/// Why a container, or the whole pod, is to be killed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillReason {
    /// The running container was created from a different spec.
    SpecChanged { old_hash: u64, new_hash: u64 },
    /// The runtime cannot tell whether the container runs; kill it before
    /// starting a replacement so two copies never run side by side.
    UnknownState,
    /// The pod sandbox has to be replaced; everything in it goes.
    SandboxChanged,
    /// The sandbox is gone and the restart policy does not allow the pod to
    /// run again, so only cleanup remains.
    RestartPolicyDoesNotAllow,
    /// An init container failed and the restart policy is `Never`.
    InitContainerFailed { name: String },
    /// No container is running or due to start: the pod has finished.
    NothingToKeep,
    /// The pod is being deleted (set by callers; never computed here).
    PodTerminating,
    /// The node refuses to run the pod (an admission check; set by the sync plan).
    Rejected { reason: String, message: String },
}

impl fmt::Display for KillReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SpecChanged { old_hash, new_hash } => write!(
                f,
                "The container definition changed (hash {old_hash:x} -> {new_hash:x}), it will be restarted."
            ),
            Self::UnknownState => f.write_str(
                "The container is in an unknown state; it is killed before being started again.",
            ),
            Self::SandboxChanged => {
                f.write_str("The pod sandbox changed; it will be killed and re-created.")
            }
            Self::RestartPolicyDoesNotAllow => f.write_str(
                "The pod sandbox is gone and the restart policy does not allow running the pod again.",
            ),
            Self::InitContainerFailed { name } => write!(
                f,
                "Init container {name} failed and the restart policy is Never."
            ),
            Self::NothingToKeep => {
                f.write_str("No container is running or due to start, so the pod is done.")
            }
            Self::PodTerminating => f.write_str("The pod is being terminated."),
            Self::Rejected { reason, message } => {
                write!(f, "The node rejected the pod ({reason}): {message}")
            }
        }
    }
}

/// A container instance to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerToKill {
    /// Runtime id of the instance.
    pub id: String,
    pub name: String,
    pub reason: KillReason,
}

/// A regular container to (re)start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerToStart {
    /// Index into `pod.spec.containers`.
    pub index: usize,
    pub name: String,
    /// Human-readable cause, for events and logs.
    pub reason: String,
}

/// The outcome of one sync decision.
///
/// Init containers are reported as a list (`init_containers_to_start`, in
/// spec order) rather than a single "next" one: plain init containers still
/// run one at a time, so the list then holds at most one index, but sidecars
/// (init containers with restart policy `Always`) may need restarting while
/// a later init container is also due.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodActions {
    /// Stop every container and the sandbox before anything else.
    pub kill_pod: bool,
    /// Why `kill_pod` is set.
    pub kill_pod_reason: Option<KillReason>,
    /// Create a new sandbox (after killing the pod).
    pub create_sandbox: bool,
    /// Why `create_sandbox` was considered.
    pub create_sandbox_reason: Option<String>,
    /// The current sandbox: the one to start containers in when no new
    /// sandbox is created. Empty if there is none worth keeping.
    pub sandbox_id: String,
    /// Attempt number for a sandbox created now (or the current one's).
    pub attempt: u32,
    /// Indices into `pod.spec.init_containers`, in start order.
    pub init_containers_to_start: Vec<usize>,
    /// Regular containers to start, in spec order.
    pub containers_to_start: Vec<ContainerToStart>,
    /// Instances to kill individually (only meaningful when `!kill_pod`).
    pub containers_to_kill: Vec<ContainerToKill>,
    /// Indices into `pod.spec.ephemeral_containers` never started yet: started in the
    /// running sandbox whether initialization is done or not, never again once they ran.
    pub ephemeral_containers_to_start: Vec<usize>,
}

impl PodActions {
    /// True when the sync has nothing to do.
    pub fn is_empty(&self) -> bool {
        !self.kill_pod
            && !self.create_sandbox
            && self.init_containers_to_start.is_empty()
            && self.containers_to_start.is_empty()
            && self.containers_to_kill.is_empty()
            && self.ephemeral_containers_to_start.is_empty()
    }

    /// Indices of the regular containers to start.
    pub fn container_indices_to_start(&self) -> Vec<usize> {
        self.containers_to_start.iter().map(|c| c.index).collect()
    }

    fn start(&mut self, index: usize, container: &Container, reason: impl Into<String>) {
        self.containers_to_start.push(ContainerToStart {
            index,
            name: container.name.clone(),
            reason: reason.into(),
        });
    }
}

/// True for an init container that keeps running beside the app (sidecar).
pub fn is_sidecar(container: &Container) -> bool {
    container.restart_policy == Some(RestartPolicy::Always)
}

/// Whether a container whose latest instance is `status` should be started
/// again under restart policy `policy` (upstream ShouldContainerBeRestarted).
///
/// A container-level restart policy, when set, overrides the pod's: that is
/// how sidecars (`Always`) keep running in a `Never` pod.
pub fn should_restart(
    container: &Container,
    status: &ContainerStatus,
    policy: RestartPolicy,
) -> bool {
    match status.state {
        ContainerState::Running => false,
        // Never actually ran, or we cannot tell: start it (again).
        ContainerState::Created | ContainerState::Unknown => true,
        ContainerState::Exited => match container.restart_policy.unwrap_or(policy) {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => status.exit_code != 0,
            RestartPolicy::Never => false,
        },
    }
}

struct SandboxDecision {
    create: bool,
    attempt: u32,
    keep_id: String,
    reason: Option<String>,
}

/// Decides whether the pod needs a new sandbox (upstream PodSandboxChanged).
fn sandbox_decision(pod: &Pod, status: &PodRuntimeStatus) -> SandboxDecision {
    let Some(latest) = status.sandboxes.first() else {
        return SandboxDecision {
            create: true,
            attempt: 0,
            keep_id: String::new(),
            reason: Some("no sandbox exists for the pod".into()),
        };
    };
    // Attempts are numbered past the highest one ever used, not just the
    // latest, so a re-created sandbox never reuses a name.
    let max_attempt = status
        .sandboxes
        .iter()
        .map(|s| s.attempt)
        .max()
        .unwrap_or(0);
    let next = max_attempt.saturating_add(1);
    let replace = |keep_id: String, why: String| SandboxDecision {
        create: true,
        attempt: next,
        keep_id,
        reason: Some(why),
    };
    let ready = status
        .sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::Ready)
        .count();
    if ready > 1 {
        return replace(
            latest.id.clone(),
            format!("{ready} sandboxes are ready; reconciling to one"),
        );
    }
    if latest.state != SandboxState::Ready {
        return replace(latest.id.clone(), "the latest sandbox is not ready".into());
    }
    if latest.host_network != pod.spec.host_network {
        // The old sandbox lives in the wrong network namespace; it is not
        // worth keeping even as a reference.
        return replace(
            String::new(),
            "the pod's host network setting changed".into(),
        );
    }
    if !pod.spec.host_network && latest.ip.is_empty() {
        return replace(latest.id.clone(), "the sandbox has no IP address".into());
    }
    SandboxDecision {
        create: false,
        attempt: max_attempt,
        keep_id: latest.id.clone(),
        reason: None,
    }
}

/// Failed as an init container: non-zero exit, OOM kill, or unknown state.
fn init_container_failed(status: &ContainerStatus) -> bool {
    status.reason == "OOMKilled"
        || (status.state == ContainerState::Exited && status.exit_code != 0)
        || status.state == ContainerState::Unknown
}

fn container_succeeded(status: Option<&ContainerStatus>) -> bool {
    matches!(status, Some(s) if s.state != ContainerState::Running && s.exit_code == 0)
}

/// Any regular container was ever created, so initialization completed at
/// some point (init container records may since have been removed).
fn any_regular_container_created(pod: &Pod, status: &PodRuntimeStatus) -> bool {
    pod.spec.containers.iter().any(|c| {
        matches!(
            status.find_container(&c.name).map(|s| s.state),
            Some(ContainerState::Created | ContainerState::Running | ContainerState::Exited)
        )
    })
}

fn never_started_reason(c: &Container) -> String {
    format!("container {} has not been started yet", c.name)
}

/// Computes what a sync must do for `pod` given the runtime's `status`.
pub fn compute_pod_actions(pod: &Pod, status: &PodRuntimeStatus) -> PodActions {
    let policy = pod.spec.restart_policy;
    let sandbox = sandbox_decision(pod, status);
    let mut actions = PodActions {
        kill_pod: sandbox.create,
        kill_pod_reason: sandbox.create.then_some(KillReason::SandboxChanged),
        create_sandbox: sandbox.create,
        create_sandbox_reason: sandbox.reason,
        sandbox_id: sandbox.keep_id,
        attempt: sandbox.attempt,
        ..PodActions::default()
    };

    if sandbox.create {
        plan_fresh_sandbox(pod, status, &mut actions);
        return actions;
    }
    // Any record of the container, in any sandbox, means it ran: ephemeral containers
    // are never restarted.
    actions.ephemeral_containers_to_start = pod
        .spec
        .ephemeral_containers
        .iter()
        .enumerate()
        .filter(|(_, e)| status.find_container(&e.container.name).is_none())
        .map(|(i, _)| i)
        .collect();

    let initialized = plan_init_containers(pod, status, &mut actions);
    if actions.kill_pod || !initialized {
        // Regular containers wait until initialization has completed.
        return actions;
    }

    let mut keep = 0usize;
    for (index, container) in pod.spec.containers.iter().enumerate() {
        let Some(current) = status.find_container(&container.name) else {
            actions.start(index, container, never_started_reason(container));
            continue;
        };
        if current.state != ContainerState::Running {
            if should_restart(container, current, policy) {
                let reason = match current.state {
                    ContainerState::Created => {
                        format!("container {} was created but never started", container.name)
                    }
                    ContainerState::Unknown => {
                        format!("container {} is in an unknown state", container.name)
                    }
                    _ => format!(
                        "container {} exited with code {} and restart policy {:?} restarts it",
                        container.name,
                        current.exit_code,
                        container.restart_policy.unwrap_or(policy)
                    ),
                };
                actions.start(index, container, reason);
                if current.state == ContainerState::Unknown {
                    actions.containers_to_kill.push(ContainerToKill {
                        id: current.id.clone(),
                        name: current.name.clone(),
                        reason: KillReason::UnknownState,
                    });
                }
            }
            continue;
        }
        // The hash is costly (upstream's spew of the whole spec): worked out again only
        // for a container whose spec changed.
        if !container_hash_matches(container, current.hash) {
            let wanted = container_hash(container);
            // A changed definition is applied whatever the restart policy.
            actions.start(
                index,
                container,
                format!("container {} definition changed", container.name),
            );
            actions.containers_to_kill.push(ContainerToKill {
                id: current.id.clone(),
                name: current.name.clone(),
                reason: KillReason::SpecChanged {
                    old_hash: current.hash,
                    new_hash: wanted,
                },
            });
            continue;
        }
        keep += 1;
    }

    if keep == 0 && actions.containers_to_start.is_empty() {
        actions.kill_pod = true;
        actions.kill_pod_reason = Some(KillReason::NothingToKeep);
        // Sidecars alone must not keep a finished pod alive.
        actions.init_containers_to_start.clear();
    }
    actions
}

/// Fills in the plan when the sandbox is (re)created: everything restarts
/// from the beginning, unless the restart policy says the pod is done.
fn plan_fresh_sandbox(pod: &Pod, status: &PodRuntimeStatus, actions: &mut PodActions) {
    let policy = pod.spec.restart_policy;
    // With `Never`, a pod that already ran something in a previous sandbox
    // is finished; only cleanup remains. If no container record exists at
    // all, nothing ever started (e.g. sandbox creation kept failing), so
    // trying again is still allowed.
    if policy == RestartPolicy::Never && actions.attempt != 0 && !status.containers.is_empty() {
        actions.create_sandbox = false;
        actions.kill_pod_reason = Some(KillReason::RestartPolicyDoesNotAllow);
        return;
    }

    let to_start: Vec<usize> = pod
        .spec
        .containers
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            !(policy == RestartPolicy::OnFailure
                && container_succeeded(status.find_container(&c.name)))
        })
        .map(|(i, _)| i)
        .collect();

    if to_start.is_empty() && any_regular_container_created(pod, status) {
        // Initialized before and every container already succeeded.
        actions.create_sandbox = false;
        actions.kill_pod_reason = Some(KillReason::RestartPolicyDoesNotAllow);
        return;
    }

    if !pod.spec.init_containers.is_empty() {
        // Init containers run again in a new sandbox; regular containers
        // follow once they complete.
        actions.init_containers_to_start = vec![0];
        return;
    }
    for index in to_start {
        let container = &pod.spec.containers[index];
        actions.start(
            index,
            container,
            format!("container {} starts in a new pod sandbox", container.name),
        );
    }
}

/// Plans init containers and reports whether initialization is complete.
///
/// Walks the init containers from last to first: completed init containers
/// may have been garbage-collected, so the furthest one with a record is the
/// best evidence of progress. Everything before a container that has run is
/// "previously initialized"; of those only sidecars need attention.
fn plan_init_containers(pod: &Pod, status: &PodRuntimeStatus, actions: &mut PodActions) -> bool {
    let inits = &pod.spec.init_containers;
    let Some(last) = inits.len().checked_sub(1) else {
        return true;
    };
    let restart_on_failure = pod.spec.restart_policy != RestartPolicy::Never;

    // A created or running app container proves initialization finished in
    // this sandbox. Exited ones do not: after a node reboot they belong to a
    // previous sandbox.
    let mut initialized = pod.spec.containers.iter().any(|c| {
        matches!(
            status.find_container(&c.name).map(|s| s.state),
            Some(ContainerState::Created | ContainerState::Running)
        )
    });
    let mut previously_initialized = initialized;
    let mut starts: Vec<usize> = Vec::new();
    let mut kills: Vec<ContainerToKill> = Vec::new();
    let kill = |s: &ContainerStatus, reason: KillReason| ContainerToKill {
        id: s.id.clone(),
        name: s.name.clone(),
        reason,
    };

    for (i, container) in inits.iter().enumerate().rev() {
        let sidecar = is_sidecar(container);
        let Some(current) = status.find_container(&container.name) else {
            // The record vanished after the pod got past this point: a
            // sidecar must be running again, a plain init container is done.
            if previously_initialized && sidecar {
                starts.push(i);
            }
            continue;
        };
        if previously_initialized && !sidecar {
            continue;
        }
        match current.state {
            // Start failed half-way (create succeeded, start did not).
            ContainerState::Created => starts.push(i),
            ContainerState::Running => {
                if sidecar {
                    if i == last {
                        initialized = true;
                    } else if !previously_initialized {
                        starts.push(i + 1);
                    }
                    if !container_hash_matches(container, current.hash) {
                        let wanted = container_hash(container);
                        kills.push(kill(
                            current,
                            KillReason::SpecChanged {
                                old_hash: current.hash,
                                new_hash: wanted,
                            },
                        ));
                        starts.push(i);
                    }
                }
                // A plain init container still running: wait for it.
            }
            ContainerState::Exited => {
                if sidecar {
                    starts.push(i);
                } else if init_container_failed(current) {
                    if !restart_on_failure {
                        fail_init(actions, container);
                        return false;
                    }
                    starts.push(i);
                } else if i == last {
                    initialized = true;
                } else {
                    starts.push(i + 1);
                }
            }
            ContainerState::Unknown => {
                if !sidecar && !restart_on_failure {
                    fail_init(actions, container);
                    return false;
                }
                kills.push(kill(current, KillReason::UnknownState));
                starts.push(i);
            }
        }
        previously_initialized = true;
    }

    if !previously_initialized {
        // Nothing has run yet.
        starts.push(0);
    }
    // Collected back to front; start in spec order.
    starts.reverse();
    kills.reverse();
    actions.init_containers_to_start = starts;
    actions.containers_to_kill.extend(kills);
    initialized
}

fn fail_init(actions: &mut PodActions, container: &Container) {
    actions.kill_pod = true;
    actions.kill_pod_reason = Some(KillReason::InitContainerFailed {
        name: container.name.clone(),
    });
    actions.init_containers_to_start.clear();
}

/// Pod phase as reported to the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl fmt::Display for PodPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Unknown => "Unknown",
        })
    }
}

/// How one container looks in the API status, reduced to what the phase
/// needs. Mirrors how the kubelet converts runtime records: no record or a
/// created/unknown instance shows as waiting, an exited one as terminated,
/// and a waiting container that exited before carries that termination.
enum ApiState {
    Running,
    Terminated { exit_code: i32 },
    WaitingAfterExit,
    Waiting,
}

fn api_state(status: &PodRuntimeStatus, name: &str) -> ApiState {
    match status.find_container(name) {
        None => ApiState::Waiting,
        Some(s) => match s.state {
            ContainerState::Running => ApiState::Running,
            ContainerState::Exited => ApiState::Terminated {
                exit_code: s.exit_code,
            },
            ContainerState::Created | ContainerState::Unknown => {
                if status.has_exited_instance(name) {
                    ApiState::WaitingAfterExit
                } else {
                    ApiState::Waiting
                }
            }
        },
    }
}

/// The pod phase for `pod` given the runtime status (upstream getPhase, for
/// a pod that is not being terminated).
pub fn pod_phase(pod: &Pod, status: &PodRuntimeStatus) -> PodPhase {
    let spec = &pod.spec;
    let mut pending_init = 0usize;
    let mut failed_init = 0usize;
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0usize, 0usize, 0usize, 0usize);

    for c in &spec.init_containers {
        let state = api_state(status, &c.name);
        if is_sidecar(c) {
            // Sidecars count like app containers, except that a stopped one
            // says nothing about the pod's outcome.
            match state {
                ApiState::Running => running += 1,
                ApiState::Terminated { .. } | ApiState::WaitingAfterExit => {}
                ApiState::Waiting => {
                    pending_init += 1;
                    waiting += 1;
                }
            }
            continue;
        }
        match state {
            ApiState::Running | ApiState::Waiting => pending_init += 1,
            ApiState::Terminated { exit_code } => {
                if exit_code != 0 {
                    failed_init += 1;
                }
            }
            // The last exit code of a restarting init container is not
            // tracked here; one that had to restart did fail.
            ApiState::WaitingAfterExit => failed_init += 1,
        }
    }

    let mut any_regular_started = false;
    for c in &spec.containers {
        match api_state(status, &c.name) {
            ApiState::Running => {
                running += 1;
                any_regular_started = true;
            }
            ApiState::Terminated { exit_code } => {
                stopped += 1;
                any_regular_started = true;
                if exit_code == 0 {
                    succeeded += 1;
                }
            }
            ApiState::WaitingAfterExit => {
                stopped += 1;
                any_regular_started = true;
            }
            ApiState::Waiting => waiting += 1,
        }
    }

    if failed_init > 0 && spec.restart_policy == RestartPolicy::Never {
        return PodPhase::Failed;
    }
    // A restarting sidecar does not send an initialized pod back to Pending.
    if (pending_init > 0 && !any_regular_started) || waiting > 0 {
        return PodPhase::Pending;
    }
    if running > 0 {
        return PodPhase::Running;
    }
    if stopped > 0 {
        return match spec.restart_policy {
            // Everything is between restarts.
            RestartPolicy::Always => PodPhase::Running,
            _ if stopped == succeeded => PodPhase::Succeeded,
            RestartPolicy::Never => PodPhase::Failed,
            // OnFailure with a failure: it is being restarted.
            RestartPolicy::OnFailure => PodPhase::Running,
        };
    }
    PodPhase::Pending
}

#[cfg(test)]
mod tests {
    //! Decision tables ported from the upstream kubelet's computePodActions
    //! tests (plain, init-container and sidecar variants) plus getPhase rules.
    //! Probe-driven cases are left out: probe results are not an input yet.
    use super::*;
    use crate::domain::kuberuntime::runtime::SandboxStatus;
    use crate::domain::pod::{ObjectMeta, PodSpec};

    fn container(name: &str, image: &str) -> Container {
        Container {
            name: name.into(),
            image: image.into(),
            ..Default::default()
        }
    }

    fn sidecar(name: &str) -> Container {
        Container {
            restart_policy: Some(RestartPolicy::Always),
            ..container(name, "bar-image")
        }
    }

    fn instance(id: &str, c: &Container, state: ContainerState) -> ContainerStatus {
        ContainerStatus {
            hash: container_hash(c),
            image: c.image.clone(),
            ..ContainerStatus::new(id, &c.name, state)
        }
    }

    /// Three running app containers in one ready sandbox.
    fn base() -> (Pod, PodRuntimeStatus) {
        let pod = Pod {
            metadata: ObjectMeta {
                uid: "12345678".into(),
                name: "foo".into(),
                namespace: "foo-ns".into(),
                ..Default::default()
            },
            spec: PodSpec {
                containers: vec![
                    container("foo1", "busybox"),
                    container("foo2", "busybox"),
                    container("foo3", "busybox"),
                ],
                ..Default::default()
            },
        };
        let containers = pod
            .spec
            .containers
            .iter()
            .enumerate()
            .map(|(i, c)| instance(&format!("id{}", i + 1), c, ContainerState::Running))
            .collect();
        let status = PodRuntimeStatus {
            uid: pod.metadata.uid.clone(),
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            sandboxes: vec![SandboxStatus {
                id: "sandboxID".into(),
                attempt: 0,
                state: SandboxState::Ready,
                created_at_nanos: 0,
                host_network: false,
                ip: "10.0.0.1".into(),
            }],
            containers,
        };
        (pod, status)
    }

    /// Three plain init containers that all exited 0; no app container yet.
    fn base_with_init() -> (Pod, PodRuntimeStatus) {
        let (mut pod, mut status) = base();
        pod.spec.init_containers = vec![
            container("init1", "bar-image"),
            container("init2", "bar-image"),
            container("init3", "bar-image"),
        ];
        status.containers = pod
            .spec
            .init_containers
            .iter()
            .enumerate()
            .map(|(i, c)| instance(&format!("initid{}", i + 1), c, ContainerState::Exited))
            .collect();
        (pod, status)
    }

    /// Three running sidecars; no app container yet.
    fn base_with_sidecars() -> (Pod, PodRuntimeStatus) {
        let (mut pod, mut status) = base();
        pod.spec.init_containers = vec![
            sidecar("restartable-init-1"),
            sidecar("restartable-init-2"),
            sidecar("restartable-init-3"),
        ];
        status.containers = pod
            .spec
            .init_containers
            .iter()
            .enumerate()
            .map(|(i, c)| instance(&format!("initid{}", i + 1), c, ContainerState::Running))
            .collect();
        (pod, status)
    }

    /// The fields the upstream tables compare (reasons are not compared).
    #[derive(Debug, PartialEq, Eq, Clone)]
    struct Want {
        kill_pod: bool,
        create_sandbox: bool,
        sandbox_id: String,
        attempt: u32,
        init: Vec<usize>,
        start: Vec<usize>,
        kill: Vec<String>,
    }

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    fn no_action() -> Want {
        Want {
            kill_pod: false,
            create_sandbox: false,
            sandbox_id: "sandboxID".into(),
            attempt: 0,
            init: vec![],
            start: vec![],
            kill: vec![],
        }
    }

    fn start(idx: &[usize]) -> Want {
        Want {
            start: idx.to_vec(),
            ..no_action()
        }
    }

    fn init(idx: &[usize]) -> Want {
        Want {
            init: idx.to_vec(),
            ..no_action()
        }
    }

    fn recreate(attempt: u32) -> Want {
        Want {
            kill_pod: true,
            create_sandbox: true,
            attempt,
            ..no_action()
        }
    }

    fn kill_pod_only(attempt: u32) -> Want {
        Want {
            kill_pod: true,
            attempt,
            ..no_action()
        }
    }

    fn observed(a: &PodActions) -> Want {
        let mut kill: Vec<String> = a.containers_to_kill.iter().map(|k| k.id.clone()).collect();
        kill.sort_unstable();
        Want {
            kill_pod: a.kill_pod,
            create_sandbox: a.create_sandbox,
            sandbox_id: a.sandbox_id.clone(),
            attempt: a.attempt,
            init: a.init_containers_to_start.clone(),
            start: a.container_indices_to_start(),
            kill,
        }
    }

    type PodFn = fn(&mut Pod);
    type StatusFn = fn(&mut PodRuntimeStatus);
    /// (description, pod restart policy, pod tweak, status tweak, expectation)
    type Case = (
        &'static str,
        Option<RestartPolicy>,
        Option<PodFn>,
        StatusFn,
        Want,
    );

    fn policy(p: RestartPolicy) -> impl Fn(&mut Pod) {
        move |pod: &mut Pod| pod.spec.restart_policy = p
    }

    fn exit(status: &mut PodRuntimeStatus, i: usize, code: i32) {
        status.containers[i].state = ContainerState::Exited;
        status.containers[i].exit_code = code;
    }

    fn sandbox_not_ready(status: &mut PodRuntimeStatus) {
        status.sandboxes[0].state = SandboxState::NotReady;
    }

    fn run_table(base: fn() -> (Pod, PodRuntimeStatus), cases: Vec<Case>) -> usize {
        let mut failures = Vec::new();
        let n = cases.len();
        for (desc, restart, mutate_pod, mutate_status, want) in cases {
            let (mut pod, mut status) = base();
            if let Some(p) = restart {
                policy(p)(&mut pod);
            }
            if let Some(f) = mutate_pod {
                f(&mut pod);
            }
            mutate_status(&mut status);
            let got = observed(&compute_pod_actions(&pod, &status));
            if got != want {
                failures.push(format!("{desc}:\n  want {want:?}\n  got  {got:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        n
    }

    use RestartPolicy::{Always, Never, OnFailure};

    #[test]
    fn compute_pod_actions_table() {
        let cases: Vec<Case> = vec![
            ("everything is good; do nothing", None, None, |_| {}, no_action()),
            (
                "start pod sandbox and all containers for a new pod",
                None,
                None,
                |s| {
                    s.sandboxes.clear();
                    s.containers.clear();
                },
                Want {
                    sandbox_id: String::new(),
                    start: vec![0, 1, 2],
                    ..recreate(0)
                },
            ),
            (
                "restart exited containers if RestartPolicy == Always",
                Some(Always),
                None,
                |s| {
                    exit(s, 0, 0);
                    exit(s, 1, 111);
                },
                start(&[0, 1]),
            ),
            (
                "restart failed containers if RestartPolicy == OnFailure",
                Some(OnFailure),
                None,
                |s| {
                    exit(s, 0, 0);
                    exit(s, 1, 111);
                },
                start(&[1]),
            ),
            (
                "restart created but not started containers if RestartPolicy == OnFailure",
                Some(OnFailure),
                None,
                |s| {
                    exit(s, 0, 0);
                    s.containers[1].state = ContainerState::Created;
                },
                start(&[1]),
            ),
            (
                "don't restart containers if RestartPolicy == Never",
                Some(Never),
                None,
                |s| {
                    exit(s, 0, 0);
                    exit(s, 1, 111);
                },
                no_action(),
            ),
            (
                "kill pod and recreate everything if the sandbox is dead, RestartPolicy == Always",
                Some(Always),
                None,
                sandbox_not_ready,
                Want {
                    start: vec![0, 1, 2],
                    ..recreate(1)
                },
            ),
            (
                "kill pod and recreate all but the succeeded container if the sandbox is dead, OnFailure",
                Some(OnFailure),
                None,
                |s| {
                    sandbox_not_ready(s);
                    exit(s, 1, 0);
                },
                Want {
                    start: vec![0, 2],
                    ..recreate(1)
                },
            ),
            (
                "kill pod and recreate all containers if the sandbox has no IP",
                None,
                None,
                |s| s.sandboxes[0].ip.clear(),
                Want {
                    start: vec![0, 1, 2],
                    ..recreate(1)
                },
            ),
            (
                "kill and recreate the container if its spec changed",
                Some(Always),
                None,
                |s| s.containers[1].hash = 432_423_432,
                Want {
                    kill: ids(&["id2"]),
                    ..start(&[1])
                },
            ),
            (
                "no new sandbox for a Never pod whose containers all exited",
                Some(Never),
                None,
                |s| {
                    sandbox_not_ready(s);
                    s.sandboxes[0].attempt = 1;
                    for i in 0..3 {
                        exit(s, i, 0);
                    }
                },
                kill_pod_only(2),
            ),
            (
                "no new sandbox for an OnFailure pod whose containers all succeeded",
                Some(OnFailure),
                None,
                |s| {
                    sandbox_not_ready(s);
                    s.sandboxes[0].attempt = 1;
                    for i in 0..3 {
                        exit(s, i, 0);
                    }
                },
                kill_pod_only(2),
            ),
            (
                "new sandbox for a Never pod whose containers were never created",
                Some(Never),
                None,
                |s| {
                    sandbox_not_ready(s);
                    s.sandboxes[0].attempt = 2;
                    s.containers.clear();
                },
                Want {
                    start: vec![0, 1, 2],
                    ..recreate(3)
                },
            ),
            (
                "kill and recreate the container if it is in unknown state",
                Some(Never),
                None,
                |s| s.containers[1].state = ContainerState::Unknown,
                Want {
                    kill: ids(&["id2"]),
                    ..start(&[1])
                },
            ),
            (
                "restart the container if it is in created state",
                Some(Never),
                None,
                |s| s.containers[1].state = ContainerState::Created,
                start(&[1]),
            ),
            (
                // From the ephemeral-container table, without the ephemeral one.
                "kill pod if all containers exited and none may restart",
                Some(Never),
                None,
                |s| {
                    for i in 0..3 {
                        exit(s, i, 0);
                    }
                },
                kill_pod_only(0),
            ),
            // Local additions.
            (
                "host network change recreates the sandbox without keeping the old one",
                None,
                Some(|p| p.spec.host_network = true),
                |_| {},
                Want {
                    sandbox_id: String::new(),
                    start: vec![0, 1, 2],
                    ..recreate(1)
                },
            ),
            (
                "several ready sandboxes are reconciled; attempt follows the highest",
                None,
                None,
                |s| {
                    let mut older = s.sandboxes[0].clone();
                    older.id = "older".into();
                    older.attempt = 4;
                    s.sandboxes.push(older);
                },
                Want {
                    start: vec![0, 1, 2],
                    ..recreate(5)
                },
            ),
            (
                "host network pod needs no IP",
                None,
                Some(|p| p.spec.host_network = true),
                |s| {
                    s.sandboxes[0].host_network = true;
                    s.sandboxes[0].ip.clear();
                },
                no_action(),
            ),
            (
                "a missing container is started",
                Some(Never),
                None,
                |s| {
                    s.containers.remove(2);
                },
                start(&[2]),
            ),
        ];
        assert_eq!(run_table(base, cases), 20);
    }

    #[test]
    fn compute_pod_actions_with_init_containers_table() {
        let cases: Vec<Case> = vec![
            (
                "initialization completed; start all containers",
                None,
                None,
                |_| {},
                start(&[0, 1, 2]),
            ),
            (
                "no init containers have been started; start the first one",
                None,
                None,
                |s| s.containers.clear(),
                init(&[0]),
            ),
            (
                "initialization in progress; do nothing",
                Some(Always),
                None,
                |s| s.containers[2].state = ContainerState::Running,
                no_action(),
            ),
            (
                "kill pod and restart the first init container if the sandbox is dead",
                Some(Always),
                None,
                sandbox_not_ready,
                Want {
                    init: vec![0],
                    ..recreate(1)
                },
            ),
            (
                "initialization failed; restart the last init container if Always",
                Some(Always),
                None,
                |s| s.containers[2].exit_code = 137,
                init(&[2]),
            ),
            (
                "initialization failed; restart the last init container if OnFailure",
                Some(OnFailure),
                None,
                |s| s.containers[2].exit_code = 137,
                init(&[2]),
            ),
            (
                "initialization failed; kill pod if Never",
                Some(Never),
                None,
                |s| s.containers[2].exit_code = 137,
                kill_pod_only(0),
            ),
            (
                "init container state unknown; kill and recreate it if Always",
                Some(Always),
                None,
                |s| s.containers[2].state = ContainerState::Unknown,
                Want {
                    kill: ids(&["initid3"]),
                    ..init(&[2])
                },
            ),
            (
                "init container state unknown; kill and recreate it if OnFailure",
                Some(OnFailure),
                None,
                |s| s.containers[2].state = ContainerState::Unknown,
                Want {
                    kill: ids(&["initid3"]),
                    ..init(&[2])
                },
            ),
            (
                "init container state unknown; kill pod if Never",
                Some(Never),
                None,
                |s| s.containers[2].state = ContainerState::Unknown,
                kill_pod_only(0),
            ),
            (
                "sandbox not ready, init containers ran, Never; kill pod only",
                Some(Never),
                None,
                sandbox_not_ready,
                kill_pod_only(1),
            ),
            (
                "sandbox not ready, Never, no visible init containers; create a new sandbox",
                Some(Never),
                None,
                |s| {
                    sandbox_not_ready(s);
                    s.containers.clear();
                },
                Want {
                    init: vec![0],
                    ..recreate(1)
                },
            ),
            (
                "sandbox not ready, init container failed, OnFailure; create a new sandbox",
                Some(OnFailure),
                None,
                |s| {
                    sandbox_not_ready(s);
                    s.containers[2].exit_code = 137;
                },
                Want {
                    init: vec![0],
                    ..recreate(1)
                },
            ),
            (
                "earlier init statuses missing but the last one runs; don't restart earlier ones",
                Some(Always),
                None,
                |s| {
                    s.containers[2].state = ContainerState::Running;
                    s.containers.drain(..2);
                },
                no_action(),
            ),
            (
                "an init container stuck in created state is restarted",
                Some(Always),
                None,
                |s| s.containers[2].state = ContainerState::Created,
                init(&[2]),
            ),
            // Local additions.
            (
                "first init container succeeded; start the second",
                None,
                None,
                |s| s.containers.truncate(1),
                init(&[1]),
            ),
            (
                "an OOM-killed init container counts as failed even with exit code 0",
                Some(Never),
                None,
                |s| s.containers[2].reason = "OOMKilled".into(),
                kill_pod_only(0),
            ),
            (
                "app containers running; init containers are not looked at again",
                Some(Never),
                None,
                |s| {
                    s.containers[0].exit_code = 1;
                    let (pod, _) = base_with_init();
                    for (i, c) in pod.spec.containers.iter().enumerate() {
                        s.containers.push(instance(
                            &format!("id{}", i + 1),
                            c,
                            ContainerState::Running,
                        ));
                    }
                },
                no_action(),
            ),
        ];
        assert_eq!(run_table(base_with_init, cases), 18);
    }

    fn add_running_apps(s: &mut PodRuntimeStatus, state: ContainerState) {
        let (pod, _) = base_with_sidecars();
        for (i, c) in pod.spec.containers.iter().enumerate() {
            s.containers
                .push(instance(&format!("id{}", i + 1), c, state));
        }
    }

    #[test]
    fn compute_pod_actions_with_sidecars_table() {
        let cases: Vec<Case> = vec![
            (
                "initialization completed; start all containers",
                None,
                None,
                |_| {},
                start(&[0, 1, 2]),
            ),
            (
                "no init containers have been started; start the first one",
                None,
                None,
                |s| s.containers.clear(),
                init(&[0]),
            ),
            (
                "an init container is stuck in the created state; restart it",
                Some(Always),
                None,
                |s| s.containers[2].state = ContainerState::Created,
                init(&[2]),
            ),
            (
                "restartable init container has started; start the next",
                Some(Always),
                None,
                |s| s.containers.truncate(1),
                init(&[1]),
            ),
            (
                "second sidecar up (probes passed); start the next",
                Some(Always),
                None,
                |s| s.containers.truncate(2),
                init(&[2]),
            ),
            (
                "kill and recreate the sidecar if its definition changes",
                Some(Always),
                Some(|p| p.spec.init_containers[2].image = "foo-image".into()),
                |_| {},
                Want {
                    init: vec![2],
                    kill: ids(&["initid3"]),
                    start: vec![0, 1, 2],
                    ..no_action()
                },
            ),
            (
                "restart terminated sidecar and the next init container",
                Some(Always),
                None,
                |s| {
                    s.containers[0].state = ContainerState::Exited;
                    s.containers[2].state = ContainerState::Exited;
                },
                init(&[0, 2]),
            ),
            (
                "restart terminated sidecar and regular containers",
                Some(Always),
                None,
                |s| s.containers[0].state = ContainerState::Exited,
                Want {
                    init: vec![0],
                    start: vec![0, 1, 2],
                    ..no_action()
                },
            ),
            (
                "sandbox not ready, sidecar failed, Never; kill pod only",
                Some(Never),
                None,
                |s| {
                    sandbox_not_ready(s);
                    exit(s, 2, 137);
                },
                kill_pod_only(1),
            ),
            (
                "sandbox not ready, Never, no visible sidecars; create a new sandbox",
                Some(Never),
                None,
                |s| {
                    sandbox_not_ready(s);
                    s.containers.clear();
                },
                Want {
                    init: vec![0],
                    ..recreate(1)
                },
            ),
            (
                "sandbox not ready, sidecar failed, OnFailure; create a new sandbox",
                Some(OnFailure),
                None,
                |s| {
                    sandbox_not_ready(s);
                    exit(s, 2, 137);
                },
                Want {
                    init: vec![0],
                    ..recreate(1)
                },
            ),
            (
                "sandbox not ready, sidecar failed, Always; create a new sandbox",
                Some(Always),
                None,
                |s| {
                    sandbox_not_ready(s);
                    exit(s, 2, 137);
                },
                Want {
                    init: vec![0],
                    ..recreate(1)
                },
            ),
            (
                "initialization failed; restart the last sidecar even if Never",
                Some(Never),
                None,
                |s| exit(s, 2, 137),
                init(&[2]),
            ),
            (
                "sidecar state unknown; kill and recreate it even if Never",
                Some(Never),
                None,
                |s| s.containers[2].state = ContainerState::Unknown,
                Want {
                    kill: ids(&["initid3"]),
                    ..init(&[2])
                },
            ),
            (
                "restart sidecar if regular containers are running even if Never",
                Some(Never),
                None,
                |s| {
                    exit(s, 2, 137);
                    add_running_apps(s, ContainerState::Running);
                },
                init(&[2]),
            ),
            (
                "kill the pod if all main containers succeeded and Never",
                Some(Never),
                None,
                |s| add_running_apps(s, ContainerState::Exited),
                kill_pod_only(0),
            ),
            (
                "earlier sidecar statuses missing but the last runs; restart them and the apps",
                Some(Always),
                None,
                |s| {
                    s.containers.drain(..2);
                },
                Want {
                    init: vec![0, 1],
                    start: vec![0, 1, 2],
                    ..no_action()
                },
            ),
        ];
        assert_eq!(run_table(base_with_sidecars, cases), 17);
    }

    #[test]
    fn empty_actions_and_reasons() {
        let (pod, status) = base();
        let a = compute_pod_actions(&pod, &status);
        assert!(a.is_empty());
        assert_eq!(a.kill_pod_reason, None);
        assert_eq!(a.create_sandbox_reason, None);

        let mut gone = status.clone();
        gone.sandboxes.clear();
        let a = compute_pod_actions(&pod, &gone);
        assert!(!a.is_empty());
        assert_eq!(a.kill_pod_reason, Some(KillReason::SandboxChanged));
        assert_eq!(
            a.create_sandbox_reason.as_deref(),
            Some("no sandbox exists for the pod")
        );
        assert_eq!(a.containers_to_start[1].name, "foo2");

        let mut changed = status;
        changed.containers[0].hash = 1;
        let a = compute_pod_actions(&pod, &changed);
        let k = &a.containers_to_kill[0];
        assert_eq!((k.id.as_str(), k.name.as_str()), ("id1", "foo1"));
        assert!(matches!(
            k.reason,
            KillReason::SpecChanged { old_hash: 1, .. }
        ));
        assert!(k.reason.to_string().contains("definition changed"));
        assert!(a.containers_to_start[0]
            .reason
            .contains("definition changed"));
    }

    #[test]
    fn init_failure_with_never_names_the_container() {
        let (mut pod, mut status) = base_with_init();
        pod.spec.restart_policy = Never;
        status.containers[1].exit_code = 2;
        status.containers.truncate(2);
        let a = compute_pod_actions(&pod, &status);
        assert!(a.kill_pod);
        assert_eq!(
            a.kill_pod_reason,
            Some(KillReason::InitContainerFailed {
                name: "init2".into()
            })
        );
        assert_eq!(
            a.kill_pod_reason.map(|r| r.to_string()).as_deref(),
            Some("Init container init2 failed and the restart policy is Never.")
        );
    }

    #[test]
    fn every_kill_reason_reads_as_a_sentence() {
        for r in [
            KillReason::SpecChanged {
                old_hash: 1,
                new_hash: 2,
            },
            KillReason::UnknownState,
            KillReason::SandboxChanged,
            KillReason::RestartPolicyDoesNotAllow,
            KillReason::InitContainerFailed { name: "x".into() },
            KillReason::NothingToKeep,
            KillReason::PodTerminating,
        ] {
            let s = r.to_string();
            assert!(s.ends_with('.'), "{s}");
            assert!(s.starts_with(char::is_uppercase), "{s}");
        }
    }

    #[test]
    fn should_restart_table() {
        use ContainerState::{Created, Exited, Running, Unknown};
        let plain = container("c", "img");
        let side = sidecar("s");
        // (container, state, exit code, pod policy, want)
        let cases = [
            (&plain, Running, 0, Always, false),
            (&plain, Created, 0, Never, true),
            (&plain, Unknown, 0, Never, true),
            (&plain, Exited, 0, Always, true),
            (&plain, Exited, 1, Always, true),
            (&plain, Exited, 0, OnFailure, false),
            (&plain, Exited, 1, OnFailure, true),
            (&plain, Exited, 0, Never, false),
            (&plain, Exited, 1, Never, false),
            (&side, Exited, 0, Never, true),
            (&side, Running, 0, Never, false),
        ];
        for (c, state, code, pod_policy, want) in cases {
            let s = ContainerStatus {
                exit_code: code,
                ..ContainerStatus::new("id", &c.name, state)
            };
            assert_eq!(
                should_restart(c, &s, pod_policy),
                want,
                "{} {state:?} exit {code} {pod_policy:?}",
                c.name
            );
        }
    }

    fn phase_of(
        base: fn() -> (Pod, PodRuntimeStatus),
        restart: RestartPolicy,
        f: impl FnOnce(&mut PodRuntimeStatus),
    ) -> PodPhase {
        let (mut pod, mut status) = base();
        pod.spec.restart_policy = restart;
        f(&mut status);
        pod_phase(&pod, &status)
    }

    fn restarting(s: &mut PodRuntimeStatus, i: usize) {
        // Latest attempt created after an exited one: waiting to restart.
        let mut next = s.containers[i].clone();
        s.containers[i].state = ContainerState::Exited;
        s.containers[i].exit_code = 1;
        next.id.push_str("-1");
        next.attempt = 1;
        next.created_at_nanos = 10;
        next.state = ContainerState::Created;
        s.containers.push(next);
    }

    #[test]
    fn pod_phase_regular_containers() {
        use PodPhase::*;
        assert_eq!(phase_of(base, Always, |_| {}), Running);
        assert_eq!(phase_of(base, Always, |s| s.containers.clear()), Pending);
        assert_eq!(
            phase_of(base, Always, |s| {
                s.containers.pop();
            }),
            Pending,
            "one container not yet created"
        );
        assert_eq!(
            phase_of(base, Always, |s| s.containers[0].state =
                ContainerState::Created),
            Pending
        );
        for p in [Always, OnFailure, Never] {
            assert_eq!(phase_of(base, p, |s| exit(s, 0, 1)), Running, "{p:?}");
        }
        assert_eq!(
            phase_of(base, Always, |s| (0..3).for_each(|i| exit(s, i, 0))),
            Running
        );
        assert_eq!(
            phase_of(base, OnFailure, |s| (0..3).for_each(|i| exit(s, i, 0))),
            Succeeded
        );
        assert_eq!(
            phase_of(base, Never, |s| (0..3).for_each(|i| exit(s, i, 0))),
            Succeeded
        );
        assert_eq!(
            phase_of(base, Never, |s| (0..3).for_each(|i| exit(s, i, i as i32))),
            Failed
        );
        assert_eq!(
            phase_of(base, OnFailure, |s| (0..3)
                .for_each(|i| exit(s, i, i as i32))),
            Running
        );
        assert_eq!(
            phase_of(base, Always, |s| restarting(s, 1)),
            Running,
            "crash-looping container with others running"
        );
        assert_eq!(
            phase_of(base, Always, |s| {
                exit(s, 0, 0);
                exit(s, 2, 0);
                restarting(s, 1);
            }),
            Running,
            "all stopped, Always"
        );
    }

    #[test]
    fn pod_phase_init_containers() {
        use PodPhase::*;
        assert_eq!(
            phase_of(base_with_init, Always, |_| {}),
            Pending,
            "apps not created yet"
        );
        assert_eq!(
            phase_of(base_with_init, Always, |s| s.containers.clear()),
            Pending
        );
        assert_eq!(
            phase_of(base_with_init, Never, |s| s.containers[2].state =
                ContainerState::Running),
            Pending
        );
        assert_eq!(
            phase_of(base_with_init, Never, |s| s.containers[1].exit_code = 1),
            Failed
        );
        assert_eq!(
            phase_of(base_with_init, OnFailure, |s| s.containers[1].exit_code = 1),
            Pending
        );
        assert_eq!(
            phase_of(base_with_init, Never, |s| restarting(s, 2)),
            Failed
        );
        assert_eq!(
            phase_of(base_with_init, Always, |s| restarting(s, 2)),
            Pending
        );
        assert_eq!(
            phase_of(base_with_init, Always, |s| {
                let (pod, _) = base();
                for c in &pod.spec.containers {
                    s.containers
                        .push(instance(&c.name, c, ContainerState::Running));
                }
            }),
            Running
        );
    }

    #[test]
    fn pod_phase_sidecars() {
        use PodPhase::*;
        assert_eq!(
            phase_of(base_with_sidecars, Always, |_| {}),
            Pending,
            "apps not created yet"
        );
        assert_eq!(
            phase_of(base_with_sidecars, Never, |s| add_running_apps(
                s,
                ContainerState::Running
            )),
            Running
        );
        assert_eq!(
            phase_of(base_with_sidecars, Never, |s| {
                add_running_apps(s, ContainerState::Running);
                restarting(s, 0);
            }),
            Running,
            "restarting sidecar does not make an initialized pod Pending"
        );
        assert_eq!(
            phase_of(base_with_sidecars, Never, |s| {
                add_running_apps(s, ContainerState::Exited);
                (0..3).for_each(|i| exit(s, i, 137));
            }),
            Succeeded,
            "stopped sidecars do not count against the outcome"
        );
        assert_eq!(
            phase_of(base_with_sidecars, Never, |s| s.containers.truncate(1)),
            Pending,
            "later sidecars not started"
        );
    }
}
