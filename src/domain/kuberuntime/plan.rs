//! The sync plan: everything one pod sync does, decided at once.
//!
//! [`plan_pod_sync`] wraps [`compute_pod_actions`] with the rest of upstream's
//! `SyncPod` decisions: whether a pod kill has anything left to kill, the sandbox
//! config (with the pod's cgroup parent), crash-loop back-off (derived from the
//! runtime's record, see `backoff`), the image decision (present, pull, held by pull
//! back-off, `ErrImageNeverPull`), and the config of every container to start (or why
//! it cannot be built). The caller gathers the inputs (runtime status, which images
//! are present, the in-memory pull back-off, the time, the cgroup parent), carries the
//! plan out, and records what happened; the dry-run planner prints the same plan.

use super::runtime_class::{runtime_handler, RuntimeClassError};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::domain::kuberuntime::actions::{
    compute_pod_actions, ContainerToKill, KillReason, PodActions,
};
use crate::domain::kuberuntime::backoff::{restart_backoff, BackoffPolicy, RestartBackoff};
use crate::domain::kuberuntime::dns::DnsWarning;
use crate::domain::kuberuntime::requests::{
    apply_image, container_config_and_skipped_env, empty_dir_setups, pod_dir, pod_log_dir,
    sandbox_config, sandbox_dns, sandbox_hostname, ContainerConfig, FqdnTooLong, NamespaceMode,
    RequestContext, RequestError, SandboxConfig,
};
use crate::domain::kuberuntime::runtime::{
    ContainerState, ImageInfo, ImageUser, PodRuntimeStatus, SandboxState,
};
use crate::domain::pod::{container_hash, format_pod, Container, ContainerKind, ImageAction, Pod};
use crate::domain::securitycontext::{self, Rejection, VolumeSetup};
use crate::domain::status::Waiting;
use crate::domain::units::duration::GoDuration;
use crate::domain::volumes::env::SkippedKeys;

/// When to look again at a container held for a reason with no back-off of its own
/// (a config error, a missing image with pull policy `Never`, an image status error).
pub const RETRY_AFTER_ERROR: Duration = Duration::from_secs(2);

/// What the image service said about an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImagePresence {
    Present(ImageFacts),
    Absent,
    /// The status call failed; the reason as the runtime gave it.
    Unknown(String),
}

/// What a container's request takes from its image: the id to create it from and the
/// user it runs as (from `ImageStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFacts {
    /// Empty when not known (a snapshot without it): the container is created from the
    /// image's name.
    pub id: String,
    pub user: ImageUser,
}

impl ImageFacts {
    pub fn of(info: &ImageInfo) -> ImageFacts {
        ImageFacts {
            id: info.id.clone(),
            user: info.user(),
        }
    }
}

/// What a pod sync is planned from.
#[derive(Debug, Clone, Copy)]
pub struct SyncInputs<'a> {
    pub pod: &'a Pod,
    /// What the runtime holds for the pod.
    pub runtime: &'a PodRuntimeStatus,
    /// The presence of the images [`images_to_inspect`] named; an image missing here
    /// counts as not inspected.
    pub images: &'a BTreeMap<String, ImagePresence>,
    /// Images whose pull for this pod is in back-off, with the wait left (the runtime
    /// records no failed pull, so the caller keeps this in memory).
    pub image_backoff: &'a BTreeMap<String, Duration>,
    /// Wall-clock time, nanoseconds since the Unix epoch (the runtime's exit times are).
    pub now_unix_nanos: i64,
    pub requests: &'a RequestContext,
    /// The pod's cgroup in the driver's spelling; empty: the runtime's default.
    pub cgroup_parent: &'a str,
    /// The API objects, facts and service links the environment is made from.
    pub pod_inputs: &'a crate::domain::volumes::PodInputs,
}

/// A sandbox to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxCreation {
    pub attempt: u32,
    pub reason: String,
    /// Folders to create first: the pod's log folder (the runtime writes there but
    /// does not create it) and the pod's own folder under the root directory (its
    /// managed `/etc/hosts` and termination-message files go there, volumes or not, as
    /// upstream's `makePodDataDirs` makes it).
    pub directories: Vec<PathBuf>,
    /// The pod's emptyDir volumes, with their mode and `fsGroup` ownership.
    pub volumes: Vec<VolumeSetup>,
    /// What the pod's DNS configuration could not honour, to report.
    pub dns_warnings: Vec<DnsWarning>,
    /// Why the sandbox cannot be created (its RuntimeClass, its FQDN): it is not.
    pub config_error: Option<SandboxConfigError>,
}

/// Why the kubelet cannot make a sandbox's config (upstream's `createPodSandbox`
/// failing before the runtime is called).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxConfigError {
    #[error(transparent)]
    RuntimeClass(#[from] RuntimeClassError),
    #[error(transparent)]
    Fqdn(#[from] FqdnTooLong),
}

/// The first reason the pod's sandbox config cannot be made, in upstream's order.
fn sandbox_config_error(
    inputs: &SyncInputs<'_>,
    handler: &Result<String, RuntimeClassError>,
) -> Option<SandboxConfigError> {
    let pod = inputs.pod;
    if let Err(e) = handler {
        return Some(e.clone().into());
    }
    if !pod.spec.host_network {
        if let Err(e) = sandbox_hostname(inputs.requests, pod) {
            return Some(e.into());
        }
    }
    None
}

/// A container that cannot start now, with the status it shows and when to look again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub waiting: Waiting,
    pub retry_after: Duration,
}

impl Held {
    /// Held by an error rather than a back-off (which has its own wait): upstream's sync
    /// returns the error and its pod worker backs off, so the error is not logged and
    /// evented again every 2 s.
    pub fn is_error(&self) -> bool {
        self.retry_after == RETRY_AFTER_ERROR
    }
}

/// A container instance to create and start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartContainer {
    /// Pull `config.image` first.
    pub pull_image: bool,
    pub config: ContainerConfig,
    /// `envFrom` keys left out of the environment as invalid names (a warning event).
    pub skipped_env: Vec<SkippedKeys>,
}

/// `Start` is shared, not copied, by the sync's steps: a container's config may carry
/// 100,000 variables, and a copy of it per step was about a second of allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerAction {
    Start(std::sync::Arc<StartContainer>),
    Held(Held),
}

/// The plan for one container `compute_pod_actions` wants started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPlan {
    /// Which of the pod's lists `index` is into.
    pub kind: ContainerKind,
    pub index: usize,
    pub name: String,
    pub image: String,
    /// Why it is started, for logs and the planner.
    pub reason: String,
    pub action: ContainerAction,
}

impl ContainerPlan {
    pub fn held(&self) -> Option<&Held> {
        match &self.action {
            ContainerAction::Held(held) => Some(held),
            ContainerAction::Start(_) => None,
        }
    }

    /// The image to pull before starting, if any.
    pub fn pull(&self) -> Option<&str> {
        match &self.action {
            ContainerAction::Start(start) if start.pull_image => Some(&start.config.image),
            _ => None,
        }
    }
}

/// Everything one sync does; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncPlan {
    /// `compute_pod_actions`' answer the plan is built on (for logs and reasons).
    pub actions: PodActions,
    /// Stop every container and ready sandbox of the pod first; only set when the
    /// runtime holds something to stop.
    pub kill_pod: Option<KillReason>,
    /// Containers to stop one by one (never together with `kill_pod`).
    pub kill_containers: Vec<ContainerToKill>,
    /// The pod is killed and not run again (finished, or not allowed to restart).
    pub kill_only: bool,
    pub create_sandbox: Option<SandboxCreation>,
    /// The sandbox to start containers in when none is created.
    pub sandbox_id: String,
    /// The sandbox's config, cgroup parent included: created from when
    /// `create_sandbox`, and what containers are created against either way. Left
    /// empty (default) when the sync neither creates a sandbox nor starts a container.
    pub sandbox: SandboxConfig,
    /// Ephemeral containers to start, before the init containers (upstream's order: a
    /// failing init container does not keep a debugger out).
    pub ephemeral_containers: Vec<ContainerPlan>,
    /// Init containers to start, in order; a sync stops at the first that does not start.
    pub init_containers: Vec<ContainerPlan>,
    pub containers: Vec<ContainerPlan>,
    /// Sync again after this long: the earliest end of a hold.
    pub resync_after: Option<Duration>,
    /// The node refuses to run the pod (sysctls, AppArmor): nothing is started, and
    /// what runs is stopped. The pod's status shows it `Failed` with this reason.
    pub rejected: Option<Rejection>,
    /// Fields of a pod that was already running when they appeared, which the node
    /// cannot honour: it runs on, and each sync warns about them.
    pub unhonoured: Option<Rejection>,
}

impl SyncPlan {
    /// True when the sync has nothing to do (beyond collecting garbage).
    pub fn is_empty(&self) -> bool {
        self.rejected.is_none()
            && self.kill_pod.is_none()
            && self.kill_containers.is_empty()
            && self.create_sandbox.is_none()
            && self.ephemeral_containers.is_empty()
            && self.init_containers.is_empty()
            && self.containers.is_empty()
    }

    /// Every container plan in start order: ephemeral, init, then regular containers.
    pub fn steps(&self) -> impl Iterator<Item = &ContainerPlan> {
        self.ephemeral_containers
            .iter()
            .chain(&self.init_containers)
            .chain(&self.containers)
    }

    /// The images to pull, each once, in start order, with the containers waiting for it.
    pub fn image_pulls(&self) -> Vec<(String, Vec<String>)> {
        let mut pulls: Vec<(String, Vec<String>)> = Vec::new();
        for step in self.steps() {
            let Some(image) = step.pull() else {
                continue;
            };
            match pulls.iter_mut().find(|(i, _)| i == image) {
                Some((_, names)) => names.push(step.name.clone()),
                None => pulls.push((image.to_owned(), vec![step.name.clone()])),
            }
        }
        pulls
    }
}

/// Whether a pod kill has anything to do: a container not yet exited or a ready
/// sandbox (what stopping a pod stops).
pub fn something_left_to_kill(status: &PodRuntimeStatus) -> bool {
    status
        .containers
        .iter()
        .any(|c| c.state != ContainerState::Exited)
        || status
            .sandboxes
            .iter()
            .any(|s| s.state == SandboxState::Ready)
}

/// A container `compute_pod_actions` wants started, before its image is considered.
struct Candidate<'p> {
    kind: ContainerKind,
    index: usize,
    container: &'p Container,
    reason: String,
    restart_count: u32,
    backoff: RestartBackoff,
}

/// The containers to start in start order (ephemeral, init, regular), with their
/// crash-loop back-off.
fn candidates<'p>(
    pod: &'p Pod,
    runtime: &PodRuntimeStatus,
    actions: &PodActions,
) -> Vec<Candidate<'p>> {
    if actions.kill_pod && !actions.create_sandbox {
        return Vec::new();
    }
    let wanted = actions
        .ephemeral_containers_to_start
        .iter()
        .map(|&i| {
            (
                ContainerKind::Ephemeral,
                i,
                "ephemeral container due".to_owned(),
            )
        })
        .chain(
            actions
                .init_containers_to_start
                .iter()
                .map(|&i| (ContainerKind::Init, i, "init container due".to_owned())),
        )
        .chain(
            actions
                .containers_to_start
                .iter()
                .map(|s| (ContainerKind::Regular, s.index, s.reason.clone())),
        );
    wanted
        .filter_map(|(kind, index, reason)| {
            let container = pod.spec.container(kind, index)?;
            let newest = runtime.find_container(&container.name);
            Some(Candidate {
                kind,
                index,
                container,
                reason,
                restart_count: newest.map_or(0, |c| c.attempt.saturating_add(1)),
                backoff: restart_backoff(
                    BackoffPolicy::CRASH_LOOP,
                    newest,
                    container_hash(container),
                ),
            })
        })
        .collect()
}

/// The images whose presence [`plan_pod_sync`] needs: those of the containers it would
/// start and that crash-loop back-off does not hold, each once.
pub fn images_to_inspect(
    pod: &Pod,
    runtime: &PodRuntimeStatus,
    now_unix_nanos: i64,
) -> Vec<String> {
    let actions = compute_pod_actions(pod, runtime);
    let mut images: Vec<String> = Vec::new();
    for c in candidates(pod, runtime, &actions) {
        if c.backoff.remaining(now_unix_nanos).is_none() && !images.contains(&c.container.image) {
            images.push(c.container.image.clone());
        }
    }
    images
}

fn held(reason: &str, message: String, retry_after: Duration) -> ContainerAction {
    ContainerAction::Held(Held {
        waiting: Waiting::new(reason, message),
        retry_after,
    })
}

/// Upstream's order: crash-loop back-off, then the image (`EnsureImageExists`), then
/// the config. A config that cannot be built holds the container without pulling its
/// image (upstream pulls first and fails after; the pull would be for nothing).
fn plan_container(inputs: &SyncInputs<'_>, c: Candidate<'_>) -> ContainerPlan {
    let container = c.container;
    let image = container.image.as_str();
    let action = if let Some(remaining) = c.backoff.remaining(inputs.now_unix_nanos) {
        let delay =
            GoDuration::from_nanos(i64::try_from(c.backoff.delay.as_nanos()).unwrap_or(i64::MAX));
        held(
            "CrashLoopBackOff",
            format!(
                "back-off {delay} restarting failed container={} pod={}",
                container.name,
                format_pod(inputs.pod)
            ),
            remaining,
        )
    } else {
        plan_image_and_config(inputs, &c)
    };
    ContainerPlan {
        kind: c.kind,
        index: c.index,
        name: container.name.clone(),
        image: image.to_owned(),
        reason: c.reason,
        action,
    }
}

fn plan_image_and_config(inputs: &SyncInputs<'_>, c: &Candidate<'_>) -> ContainerAction {
    let image = c.container.image.as_str();
    // Upstream's `applyDefaultImageTag`, before the image is inspected or pulled.
    if let Err(e) = super::image_reference::parse_normalized(image) {
        return held(
            "InvalidImageName",
            format!("Failed to apply default image tag {image:?}: couldn't parse image reference {image:?}: {e}"),
            RETRY_AFTER_ERROR,
        );
    }
    let facts = match inputs.images.get(image) {
        Some(ImagePresence::Present(facts)) => Some(facts),
        Some(ImagePresence::Absent) => None,
        Some(ImagePresence::Unknown(reason)) => {
            return held(
                "ErrImageInspect",
                format!("Failed to inspect image {image:?}: {reason}"),
                RETRY_AFTER_ERROR,
            )
        }
        None => {
            return held(
                "ErrImageInspect",
                format!("Failed to inspect image {image:?}: its status was not read"),
                RETRY_AFTER_ERROR,
            )
        }
    };
    let pull_image = match c.container.pull_policy().image_action(facts.is_some()) {
        ImageAction::UsePresent => false,
        ImageAction::NeverPullMissing => {
            return held(
                "ErrImageNeverPull",
                format!("Container image {image:?} is not present with pull policy of Never"),
                RETRY_AFTER_ERROR,
            )
        }
        ImageAction::Pull => {
            if let Some(&remaining) = inputs.image_backoff.get(image) {
                return held(
                    "ImagePullBackOff",
                    format!("Back-off pulling image {image:?}"),
                    remaining,
                );
            }
            true
        }
    };
    let mut pod_inputs = inputs.pod_inputs.clone();
    if pod_inputs.facts.pod_ip.is_empty() {
        // The sandbox's IP, once it has one (status.podIP).
        if let Some(sandbox) = inputs
            .runtime
            .sandboxes
            .iter()
            .find(|s| s.state == SandboxState::Ready)
        {
            pod_inputs.facts.pod_ip = sandbox.ip.clone();
        }
    }
    let config = container_config_and_skipped_env(
        inputs.requests,
        inputs.pod,
        c.container,
        c.restart_count,
        c.backoff.next_step,
        &pod_inputs,
    )
    .and_then(|(mut config, skipped_env)| {
        join_target_namespace(inputs, c, &mut config)?;
        // A pulled image is inspected after its pull (`complete_after_pull`).
        match facts.filter(|_| !pull_image) {
            Some(facts) => {
                apply_image(&mut config, inputs.pod, c.container, &facts.id, &facts.user)
                    .map(|()| (config, skipped_env))
            }
            None => Ok((config, skipped_env)),
        }
    });
    match config {
        Ok((config, skipped_env)) => ContainerAction::Start(std::sync::Arc::new(StartContainer {
            pull_image,
            config,
            skipped_env,
        })),
        Err(e) => ContainerAction::Held(config_error(e)),
    }
}

/// An ephemeral container with a target joins the target's process namespace (upstream's
/// `getTargetID`: the target's newest instance, whatever its state), unless the pod
/// shares one namespace already.
fn join_target_namespace(
    inputs: &SyncInputs<'_>,
    c: &Candidate<'_>,
    config: &mut ContainerConfig,
) -> Result<(), RequestError> {
    if c.kind != ContainerKind::Ephemeral {
        return Ok(());
    }
    // Its own refused fields (the pod runs on with them, warned about) hold it.
    let prefix = format!("spec.ephemeralContainers[{}].", c.index);
    let refused: Vec<String> = inputs
        .pod
        .spec
        .refused_fields
        .iter()
        .filter(|r| r.path.starts_with(&prefix))
        .map(ToString::to_string)
        .collect();
    if !refused.is_empty() {
        return Err(RequestError::RefusedFields(refused.join("; ")));
    }
    let Some(target) = inputs
        .pod
        .spec
        .ephemeral_containers
        .get(c.index)
        .map(|e| e.target_container_name.as_str())
        .filter(|t| !t.is_empty())
    else {
        return Ok(());
    };
    let instance = inputs
        .runtime
        .find_container(target)
        .ok_or_else(|| RequestError::TargetNotFound(target.to_owned()))?;
    let namespaces = &mut config.security.namespace_options;
    if namespaces.pid == NamespaceMode::Container {
        namespaces.pid = NamespaceMode::Target;
        namespaces.target_id.clone_from(&instance.id);
    }
    Ok(())
}

/// Upstream's `CreateContainerConfigError`.
fn config_error(e: RequestError) -> Held {
    Held {
        waiting: Waiting::new("CreateContainerConfigError", e.to_string()),
        retry_after: RETRY_AFTER_ERROR,
    }
}

/// Completes the request of a container whose image was just pulled, with what the
/// image service now says about it (the id and user; `runAsNonRoot` checked). The
/// `Held` is upstream's `CreateContainerConfigError`.
pub fn complete_after_pull(
    pod: &Pod,
    kind: ContainerKind,
    index: usize,
    config: &ContainerConfig,
    facts: &ImageFacts,
) -> Result<ContainerConfig, Held> {
    let mut config = config.clone();
    if let Some(container) = pod.spec.container(kind, index) {
        apply_image(&mut config, pod, container, &facts.id, &facts.user).map_err(config_error)?;
    }
    Ok(config)
}

/// The plan for a pod the node refuses: stop whatever of it runs, start nothing.
fn rejected_plan(inputs: &SyncInputs<'_>, rejection: Rejection) -> SyncPlan {
    let mut actions = compute_pod_actions(inputs.pod, inputs.runtime);
    let reason = KillReason::Rejected {
        reason: rejection.reason.clone(),
        message: rejection.message.clone(),
    };
    actions.kill_pod = true;
    actions.kill_pod_reason = Some(reason.clone());
    actions.create_sandbox = false;
    actions.init_containers_to_start.clear();
    actions.containers_to_start.clear();
    actions.containers_to_kill.clear();
    actions.ephemeral_containers_to_start.clear();
    SyncPlan {
        kill_pod: something_left_to_kill(inputs.runtime).then_some(reason),
        kill_containers: Vec::new(),
        kill_only: true,
        create_sandbox: None,
        sandbox_id: String::new(),
        sandbox: SandboxConfig::default(),
        ephemeral_containers: Vec::new(),
        init_containers: Vec::new(),
        containers: Vec::new(),
        resync_after: None,
        rejected: Some(rejection),
        unhonoured: None,
        actions,
    }
}

/// Plans one sync of `inputs.pod`; see the module documentation.
pub fn plan_pod_sync(inputs: &SyncInputs<'_>) -> SyncPlan {
    let pod = inputs.pod;
    // A field the node cannot honour refuses a new pod. A pod already running when the
    // field appears (an update such as `kubectl debug`'s ephemeral container, or a pod
    // adopted from another kubelet in a swap) runs on, warned about: stopping it would do
    // more harm than the field's absence.
    let mut unhonoured = None;
    if let Err(rejection) = crate::domain::pod::fields::admit(pod) {
        if !something_left_to_kill(inputs.runtime) {
            return rejected_plan(inputs, rejection);
        }
        unhonoured = Some(rejection);
    }
    if let Err(rejection) = securitycontext::admit(pod, &inputs.requests.security) {
        return rejected_plan(inputs, rejection);
    }
    let actions = compute_pod_actions(pod, inputs.runtime);
    let kill_pod = (actions.kill_pod && something_left_to_kill(inputs.runtime))
        .then(|| actions.kill_pod_reason.clone())
        .flatten();
    let kill_containers = if actions.kill_pod {
        Vec::new()
    } else {
        actions.containers_to_kill.clone()
    };
    let handler = runtime_handler(pod, &inputs.pod_inputs.objects);
    let create_sandbox = actions.create_sandbox.then(|| SandboxCreation {
        attempt: actions.attempt,
        reason: actions.create_sandbox_reason.clone().unwrap_or_default(),
        directories: vec![
            pod_log_dir(inputs.requests, pod),
            pod_dir(inputs.requests, &pod.metadata.uid),
        ],
        volumes: empty_dir_setups(inputs.requests, pod),
        dns_warnings: sandbox_dns(inputs.requests, pod).warnings,
        config_error: sandbox_config_error(inputs, &handler),
    });
    let mut ephemeral_containers = Vec::new();
    let mut init_containers = Vec::new();
    let mut containers = Vec::new();
    for candidate in candidates(pod, inputs.runtime, &actions) {
        let list = match candidate.kind {
            ContainerKind::Ephemeral => &mut ephemeral_containers,
            ContainerKind::Init => &mut init_containers,
            ContainerKind::Regular => &mut containers,
        };
        list.push(plan_container(inputs, candidate));
    }
    let resync_after = ephemeral_containers
        .iter()
        .chain(&init_containers)
        .chain(&containers)
        .filter_map(|c| c.held().map(|h| h.retry_after))
        .min();
    // Most syncs of a running pod start nothing: no config to build then.
    let starts_any =
        !(ephemeral_containers.is_empty() && init_containers.is_empty() && containers.is_empty());
    let sandbox = if create_sandbox.is_some() || starts_any {
        SandboxConfig {
            runtime_handler: handler.clone().unwrap_or_default(),
            ..sandbox_config(inputs.requests, pod, actions.attempt, inputs.cgroup_parent)
        }
    } else {
        SandboxConfig::default()
    };
    SyncPlan {
        kill_only: actions.kill_pod && !actions.create_sandbox,
        sandbox,
        sandbox_id: if actions.create_sandbox {
            String::new()
        } else {
            actions.sandbox_id.clone()
        },
        kill_pod,
        kill_containers,
        create_sandbox,
        ephemeral_containers,
        init_containers,
        containers,
        resync_after,
        rejected: None,
        unhonoured,
        actions,
    }
}

#[cfg(test)]
mod tests;
