//! Carrying out one pod's sync: read what the runtime holds, decide with the domain's
//! `compute_pod_actions`, then kill, create the sandbox, pull images, start containers
//! (crash-loop back-off applied), and collect dead containers. Also termination.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::app::container_manager::ContainerManager;
use crate::app::pods::runtime_state::{pod_runtime_view, PodRuntimeView};
use crate::domain::kuberuntime::actions::compute_pod_actions;
use crate::domain::kuberuntime::backoff::{crash_loop_key, BackoffPolicy, CrashLoopBackoff};
use crate::domain::kuberuntime::gc::{
    dead_containers, dead_sandboxes, DEAD_CONTAINERS_PER_CONTAINER,
};
use crate::domain::kuberuntime::requests::{
    container_config, empty_dir_paths, pod_dir, pod_log_dir, sandbox_config, sandbox_dns,
    RequestContext, SandboxConfig,
};
use crate::domain::kuberuntime::runtime::{ContainerState, PodRuntimeStatus, SandboxState};
use crate::domain::pod::{container_hash, full_name, Container, ImageAction, Pod};
use crate::domain::status::Waiting;
use crate::domain::units::duration::GoDuration;
use crate::ports::clock::Clock;
use crate::ports::runtime::{ImageService, RuntimeError, RuntimeService};

/// Grace period for pods whose spec is unknown (found in the runtime after a restart).
const DEFAULT_GRACE_SECS: i64 = 30;
/// Retry delay after a sync failed for a reason with no back-off of its own.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(2);

/// What a sync needs from the world, shared by every pod worker.
pub struct SyncContext {
    pub runtime: Arc<dyn RuntimeService>,
    pub images: Arc<dyn ImageService>,
    pub clock: Arc<dyn Clock>,
    pub requests: RequestContext,
    /// Prefix of container ids in the API status (`containerd`).
    pub runtime_name: String,
    pub crash_backoff: Mutex<CrashLoopBackoff>,
    pub image_backoff: Mutex<CrashLoopBackoff>,
    /// The pods' cgroups.
    pub containers: Arc<ContainerManager>,
}

impl SyncContext {
    pub fn new(
        runtime: Arc<dyn RuntimeService>,
        images: Arc<dyn ImageService>,
        clock: Arc<dyn Clock>,
        requests: RequestContext,
        runtime_name: String,
        containers: Arc<ContainerManager>,
    ) -> Self {
        Self {
            runtime,
            images,
            clock,
            requests,
            runtime_name,
            crash_backoff: Mutex::new(CrashLoopBackoff::new(BackoffPolicy::CRASH_LOOP)),
            image_backoff: Mutex::new(CrashLoopBackoff::new(BackoffPolicy::CRASH_LOOP)),
            containers,
        }
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.clock.monotonic_nanos())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Back-off tables stay usable after a panic elsewhere; they hold plain data.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one sync found and decided, for the status manager and the worker.
#[derive(Debug, Clone, Default)]
pub struct SyncOutcome {
    /// The runtime's view at the start of the sync.
    pub runtime: PodRuntimeStatus,
    /// Containers held back, with why.
    pub waiting: BTreeMap<String, Waiting>,
    /// Sync again after this long (a back-off ends, a retry is due).
    pub retry_after: Option<Duration>,
}

impl SyncOutcome {
    fn retry(&mut self, after: Duration) {
        self.retry_after = Some(self.retry_after.map_or(after, |d| d.min(after)));
    }
}

/// One container that could not be started now.
struct Held {
    waiting: Waiting,
    retry_after: Duration,
}

/// Syncs `pod` once: brings the runtime in line with its spec as far as possible now.
pub async fn sync_pod(ctx: &SyncContext, pod: &Pod) -> SyncOutcome {
    let uid = &pod.metadata.uid;
    let mut outcome = SyncOutcome::default();
    let view = match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
        Ok(view) => view,
        Err(error) => {
            warn!(%error, "cannot read the pod's runtime status; retrying");
            outcome.retry(RETRY_AFTER_ERROR);
            return outcome;
        }
    };
    outcome.runtime = view.status.clone();
    let actions = compute_pod_actions(pod, &view.status);
    if actions.is_empty() {
        collect_dead(ctx, &view).await;
        return outcome;
    }
    debug!(?actions, "pod actions");
    let grace = pod.spec.termination_grace_period();
    if actions.kill_pod {
        let reason = actions
            .kill_pod_reason
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let anything_left = !view.status.sandboxes.is_empty() || !view.status.containers.is_empty();
        if anything_left {
            info!(%reason, "killing pod");
            stop_pod(ctx, &view.status, grace).await;
        }
        if !actions.create_sandbox {
            return outcome;
        }
    } else {
        for kill in &actions.containers_to_kill {
            info!(container = %kill.name, id = %kill.id, reason = %kill.reason, "killing container");
            if let Err(error) = ctx.runtime.stop_container(&kill.id, grace).await {
                warn!(container = %kill.name, %error, "failed to stop container");
            }
        }
    }

    // The pod's cgroup exists before its sandbox is asked for (upstream EnsureExists).
    if let Err(error) = ctx.containers.ensure_pod(pod).await {
        warn!(%error, "failed to create the pod's cgroup; retrying");
        outcome.retry(RETRY_AFTER_ERROR);
        return outcome;
    }
    let mut sandbox = sandbox_config(&ctx.requests, pod, actions.attempt);
    sandbox.cgroup_parent = ctx.containers.cgroup_parent(pod);
    let sandbox_id = if actions.create_sandbox {
        let reason = actions.create_sandbox_reason.clone().unwrap_or_default();
        match create_sandbox(ctx, pod, &sandbox).await {
            Ok(id) => {
                info!(sandbox = %id, attempt = actions.attempt, %reason, "created pod sandbox");
                id
            }
            Err(error) => {
                warn!(%error, "failed to create pod sandbox; retrying");
                outcome.retry(RETRY_AFTER_ERROR);
                return outcome;
            }
        }
    } else {
        actions.sandbox_id.clone()
    };

    // Init containers run one at a time: a failure stops the sync here.
    for &index in &actions.init_containers_to_start {
        let Some(container) = pod.spec.init_containers.get(index) else {
            continue;
        };
        if let Err(held) =
            start_container(ctx, pod, container, &view.status, &sandbox_id, &sandbox).await
        {
            outcome.waiting.insert(container.name.clone(), held.waiting);
            outcome.retry(held.retry_after);
            return outcome;
        }
    }
    for start in &actions.containers_to_start {
        let Some(container) = pod.spec.containers.get(start.index) else {
            continue;
        };
        debug!(container = %container.name, reason = %start.reason, "starting container");
        if let Err(held) =
            start_container(ctx, pod, container, &view.status, &sandbox_id, &sandbox).await
        {
            outcome.waiting.insert(container.name.clone(), held.waiting);
            outcome.retry(held.retry_after);
        }
    }
    collect_dead(ctx, &view).await;
    outcome
}

async fn create_sandbox(
    ctx: &SyncContext,
    pod: &Pod,
    sandbox: &SandboxConfig,
) -> Result<String, String> {
    for warning in sandbox_dns(&ctx.requests, pod).warnings {
        warn!(%warning, "pod DNS configuration");
    }
    // The runtime writes container logs under this folder but does not create it.
    let mut dirs = vec![pod_log_dir(&ctx.requests, pod)];
    dirs.extend(empty_dir_paths(&ctx.requests, pod));
    for dir in dirs {
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    ctx.runtime
        .run_pod_sandbox(sandbox)
        .await
        .map_err(|e| e.to_string())
}

/// Starts one container: back-off check, image, create, start.
async fn start_container(
    ctx: &SyncContext,
    pod: &Pod,
    container: &Container,
    status: &PodRuntimeStatus,
    sandbox_id: &str,
    sandbox: &SandboxConfig,
) -> Result<(), Held> {
    let previous = status.find_container(&container.name);
    if previous.is_some_and(|p| p.state == ContainerState::Exited) {
        let key = crash_loop_key(
            &pod.metadata.uid,
            &container.name,
            container_hash(container),
        );
        let now = ctx.now();
        let mut backoff = lock(&ctx.crash_backoff);
        if let Some(remaining) = backoff.in_backoff(&key, now) {
            let delay = backoff.current_delay(&key).unwrap_or(remaining);
            let message = format!(
                "back-off {} restarting failed container={} pod={}",
                GoDuration::from_nanos(i64::try_from(delay.as_nanos()).unwrap_or(i64::MAX)),
                container.name,
                full_name(pod)
            );
            debug!(container = %container.name, remaining_ms = remaining.as_millis() as u64, "in crash-loop back-off");
            return Err(Held {
                waiting: Waiting::new("CrashLoopBackOff", message),
                retry_after: remaining,
            });
        }
        backoff.record_failure(&key, now);
    }
    ensure_image(ctx, pod, container).await?;
    let restart_count = previous.map_or(0, |p| p.attempt.saturating_add(1));
    let config =
        container_config(&ctx.requests, pod, container, restart_count).map_err(|e| Held {
            waiting: Waiting::new("CreateContainerConfigError", e.to_string()),
            retry_after: RETRY_AFTER_ERROR,
        })?;
    let held = |reason: &str, e: RuntimeError| {
        warn!(container = %container.name, error = %e, reason, "container not started");
        Held {
            waiting: Waiting::new(reason, e.to_string()),
            retry_after: RETRY_AFTER_ERROR,
        }
    };
    let id = ctx
        .runtime
        .create_container(sandbox_id, &config, sandbox)
        .await
        .map_err(|e| held("CreateContainerError", e))?;
    ctx.runtime
        .start_container(&id)
        .await
        .map_err(|e| held("RunContainerError", e))?;
    info!(container = %container.name, %id, restart_count, "started container");
    Ok(())
}

/// Makes sure the container's image is present, pulling it when the pull policy says
/// so, with back-off between failed pulls (upstream's EnsureImageExists).
async fn ensure_image(ctx: &SyncContext, pod: &Pod, container: &Container) -> Result<(), Held> {
    let image = container.image.as_str();
    let present = ctx.images.image_status(image).await.map_err(|e| Held {
        waiting: Waiting::new(
            "ErrImageInspect",
            format!("Failed to inspect image {image:?}: {e}"),
        ),
        retry_after: RETRY_AFTER_ERROR,
    })?;
    match container.pull_policy().image_action(present.is_some()) {
        ImageAction::UsePresent => return Ok(()),
        ImageAction::NeverPullMissing => {
            return Err(Held {
                waiting: Waiting::new(
                    "ErrImageNeverPull",
                    format!("Container image {image:?} is not present with pull policy of Never"),
                ),
                retry_after: RETRY_AFTER_ERROR,
            })
        }
        ImageAction::Pull => {}
    }
    let key = format!("{}_{image}", pod.metadata.uid);
    let now = ctx.now();
    if let Some(remaining) = lock(&ctx.image_backoff).in_backoff(&key, now) {
        return Err(Held {
            waiting: Waiting::new(
                "ImagePullBackOff",
                format!("Back-off pulling image {image:?}"),
            ),
            retry_after: remaining,
        });
    }
    info!(container = %container.name, image, "pulling image");
    match ctx.images.pull_image(image).await {
        Ok(reference) => {
            info!(image, %reference, "pulled image");
            lock(&ctx.image_backoff).reset(&key);
            Ok(())
        }
        Err(error) => {
            let mut backoff = lock(&ctx.image_backoff);
            backoff.record_failure(&key, now);
            // Look again soon: the status then says ImagePullBackOff until the next pull.
            let retry_after = backoff
                .current_delay(&key)
                .map_or(RETRY_AFTER_ERROR, |d| d.min(RETRY_AFTER_ERROR));
            warn!(container = %container.name, image, %error, "failed to pull image");
            Err(Held {
                waiting: Waiting::new(
                    "ErrImagePull",
                    format!("Failed to pull image {image:?}: {error}"),
                ),
                retry_after,
            })
        }
    }
}

/// Stops every live container (in parallel, each with the grace period) and then
/// every ready sandbox of the pod.
async fn stop_pod(ctx: &SyncContext, status: &PodRuntimeStatus, grace_secs: i64) {
    let mut stops = JoinSet::new();
    for c in status
        .containers
        .iter()
        .filter(|c| c.state != ContainerState::Exited)
    {
        let runtime = Arc::clone(&ctx.runtime);
        let (id, name) = (c.id.clone(), c.name.clone());
        stops.spawn(async move {
            if let Err(error) = runtime.stop_container(&id, grace_secs).await {
                warn!(container = %name, %id, %error, "failed to stop container");
            }
        });
    }
    while stops.join_next().await.is_some() {}
    for s in status
        .sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::Ready)
    {
        if let Err(error) = ctx.runtime.stop_pod_sandbox(&s.id).await {
            warn!(sandbox = %s.id, %error, "failed to stop pod sandbox");
        }
    }
}

/// Terminates a pod that is no longer desired: stops it with its grace period, then
/// removes its containers, sandboxes, volumes folder and logs. `pod` is its last spec
/// when known. Returns whether everything was removed.
pub async fn terminate_pod(ctx: &SyncContext, uid: &str, pod: Option<&Pod>) -> bool {
    let view = match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
        Ok(view) => view,
        Err(error) => {
            warn!(%error, "cannot read the pod's runtime status to terminate it");
            return false;
        }
    };
    let grace = pod.map_or(DEFAULT_GRACE_SECS, |p| p.spec.termination_grace_period());
    info!(grace_period_secs = grace, "terminating pod");
    stop_pod(ctx, &view.status, grace).await;
    let mut clean = true;
    for c in &view.status.containers {
        if let Err(error) = ctx.runtime.remove_container(&c.id).await {
            warn!(container = %c.name, id = %c.id, %error, "failed to remove container");
            clean = false;
        }
    }
    for s in &view.status.sandboxes {
        if let Err(error) = ctx.runtime.remove_pod_sandbox(&s.id).await {
            warn!(sandbox = %s.id, %error, "failed to remove pod sandbox");
            clean = false;
        }
    }
    // Only now that its containers are gone may the pod's cgroup go.
    if clean {
        if let Err(error) = ctx.containers.remove_pod(uid).await {
            warn!(%error, "failed to remove the pod's cgroup");
            clean = false;
        }
    }
    let mut dirs = vec![pod_dir(&ctx.requests, uid)];
    if let Some(pod) = pod {
        dirs.push(pod_log_dir(&ctx.requests, pod));
    }
    for dir in dirs {
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => warn!(dir = %dir.display(), %error, "failed to remove pod folder"),
        }
    }
    if let Some(pod) = pod {
        let mut backoff = lock(&ctx.crash_backoff);
        for c in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
            backoff.reset(&crash_loop_key(uid, &c.name, container_hash(c)));
        }
    }
    info!(removed = clean, "pod terminated");
    clean
}

/// Removes exited instances beyond the newest per container, and sandboxes that are
/// neither the newest nor hold a container any more (upstream's container GC, per pod).
async fn collect_dead(ctx: &SyncContext, view: &PodRuntimeView) {
    let status = &view.status;
    let mut removed = BTreeSet::new();
    for c in dead_containers(status, DEAD_CONTAINERS_PER_CONTAINER) {
        match ctx.runtime.remove_container(&c.id).await {
            Ok(()) => {
                debug!(container = %c.name, id = %c.id, attempt = c.attempt, "removed dead container");
                removed.insert(c.id.as_str());
            }
            Err(error) => {
                warn!(container = %c.name, id = %c.id, %error, "failed to remove dead container")
            }
        }
    }
    let in_use: BTreeSet<&str> = view
        .sandbox_of
        .iter()
        .filter(|(container, _)| !removed.contains(container.as_str()))
        .map(|(_, sandbox)| sandbox.as_str())
        .collect();
    for s in dead_sandboxes(status, &in_use) {
        match ctx.runtime.remove_pod_sandbox(&s.id).await {
            Ok(()) => debug!(sandbox = %s.id, "removed dead sandbox"),
            Err(error) => warn!(sandbox = %s.id, %error, "failed to remove dead sandbox"),
        }
    }
}
