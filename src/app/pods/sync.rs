//! Carrying out one pod's sync: read what the runtime holds and which images are
//! present, ask the domain for the sync plan (`plan_pod_sync`), then carry it out
//! (kill, create the sandbox, pull images, create and start containers), record what
//! happened (pull failures feed the pull back-off), and collect dead containers.
//! Also termination.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tracing::{debug, info, warn};

use super::events::PodEventSink;
use super::probes;
use super::volumes::{off_runtime, FilesError};
use crate::app::container_manager::ContainerManager;
use crate::app::pods::runtime_state::{image_presence, pod_runtime_view, PodRuntimeView};
use crate::domain::events as pod_events;
use crate::domain::kuberuntime::backoff::{image_pull_key, Backoff, BackoffPolicy};
use crate::domain::kuberuntime::credentials::{pod_keyring, AuthConfig, Keyring};
use crate::domain::kuberuntime::gc::{
    dead_containers, dead_sandboxes, DEAD_CONTAINERS_PER_CONTAINER,
};
use crate::domain::kuberuntime::log_rotation::belongs_to_instance;
use crate::domain::kuberuntime::plan::{
    complete_after_pull, images_to_inspect, plan_pod_sync, ContainerAction, ContainerPlan, Held,
    ImageFacts, SandboxCreation, SyncInputs, RETRY_AFTER_ERROR,
};
use crate::domain::kuberuntime::requests::{
    pod_dir, pod_log_dir, pod_log_dir_of, ContainerConfig, RequestContext, SandboxConfig,
};
use crate::domain::kuberuntime::runtime::{
    ContainerState, ContainerStatus, PodRuntimeStatus, SandboxState, SandboxStatus,
};
use crate::domain::kuberuntime::teardown::{self, Stopping, TerminationPlan};
use crate::domain::kuberuntime::termination;
use crate::domain::pod::Pod;
use crate::domain::securitycontext::Rejection;
use crate::domain::status::Waiting;
use crate::domain::units::duration::GoDuration;
use crate::ports::clock::Clock;
use crate::ports::error::Chain;
use crate::ports::prober::{NoProber, Prober};
use crate::ports::runtime::{ImageService, RuntimeError, RuntimeService};

/// What a sync needs from the world, shared by every pod worker.
pub struct SyncContext {
    pub runtime: Arc<dyn RuntimeService>,
    pub images: Arc<dyn ImageService>,
    pub clock: Arc<dyn Clock>,
    pub requests: RequestContext,
    /// Prefix of container ids in the API status (`containerd`).
    pub runtime_name: String,
    /// Failed pulls per pod and image (the runtime records none, so this is kept in
    /// memory; crash-loop back-off is derived from the runtime's record instead).
    pub image_backoff: Mutex<Backoff>,
    /// The pods' cgroups.
    pub containers: Arc<ContainerManager>,
    /// Network probes and hooks (HTTP, TCP, gRPC); exec goes through `runtime`.
    pub prober: Arc<dyn Prober>,
    /// Pod events: logged, and written once connected.
    pub events: PodEventSink,
    /// ConfigMaps, Secrets, tokens and the volumes made from them.
    pub volumes: Arc<super::volume_manager::VolumeManager>,
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
            clock: clock.clone(),
            requests,
            runtime_name,
            image_backoff: Mutex::new(Backoff::new(BackoffPolicy::CRASH_LOOP)),
            containers,
            prober: Arc::new(NoProber),
            events: PodEventSink::new(),
            // Refuses every file operation until `with_volumes` gives the real one.
            volumes: Arc::new(super::volume_manager::VolumeManager::standalone(
                clock,
                Arc::new(crate::ports::pod_files::NoPodFiles),
            )),
        }
    }

    /// With `events` as the pod events' sink (shared with the node agent's recorder).
    pub fn with_events(mut self, events: PodEventSink) -> Self {
        self.events = events;
        self
    }

    /// With a volume manager that reads API objects (without one, references to them fail
    /// as upstream's "no kubeClient defined").
    pub fn with_volumes(mut self, volumes: Arc<super::volume_manager::VolumeManager>) -> Self {
        self.volumes = volumes;
        self
    }

    /// With `prober` for network probes and hooks (without one they answer an error).
    pub fn with_prober(mut self, prober: Arc<dyn Prober>) -> Self {
        self.prober = prober;
        self
    }

    /// Monotonic time, for the in-memory pull back-off.
    fn monotonic(&self) -> Duration {
        Duration::from_nanos(self.clock.monotonic_nanos())
    }

    /// The images of `pod` whose pull is in back-off now, with the wait left.
    fn pulls_in_backoff(&self, pod_uid: &str, images: &[String]) -> BTreeMap<String, Duration> {
        let now = self.monotonic();
        let table = lock(&self.image_backoff);
        images
            .iter()
            .filter_map(|image| {
                let left = table.in_backoff(&image_pull_key(pod_uid, image), now)?;
                Some((image.clone(), left))
            })
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Back-off tables stay usable after a panic elsewhere; they hold plain data.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one sync found and decided, for the status manager and the worker.
#[derive(Debug, Clone, Default)]
pub struct SyncOutcome {
    /// The runtime's view: at the end of a sync that created a sandbox or started a
    /// container, at its start otherwise.
    pub runtime: PodRuntimeStatus,
    /// Containers held back, with why.
    pub waiting: BTreeMap<String, Waiting>,
    /// Sync again after this long (a back-off ends, a retry is due).
    pub retry_after: Option<Duration>,
    /// The node refuses to run the pod.
    pub rejected: Option<Rejection>,
    /// The sync stopped on a failed runtime call, cgroup or folder; the worker backs off
    /// (`BackoffPolicy::SYNC_ERROR`) while this repeats.
    pub failed: bool,
    /// The sync left nothing for a next sync on the same runtime state: it only added (or
    /// had nothing to do), did not fail, and everything is live. After one that killed or
    /// replaced a sandbox, the next sync removes what is left dead (an old sandbox), so a
    /// relist must wake it.
    pub settled: bool,
}

impl SyncOutcome {
    fn retry(&mut self, after: Duration) {
        self.retry_after = Some(self.retry_after.map_or(after, |d| d.min(after)));
    }

    fn hold(&mut self, container: &str, held: Held) {
        self.failed |= held.is_error();
        self.waiting.insert(container.to_owned(), held.waiting);
        self.retry(held.retry_after);
    }
}

/// Held for a runtime call that failed, to try again soon.
fn failed(container: &str, reason: &str, message: String) -> Held {
    warn!(container, %message, reason, "container not started");
    Held {
        waiting: Waiting::new(reason, message),
        retry_after: RETRY_AFTER_ERROR,
    }
}

/// Syncs `pod` once: brings the runtime in line with its spec as far as possible now.
pub async fn sync_pod(ctx: &SyncContext, pod: &Pod) -> SyncOutcome {
    let uid = &pod.metadata.uid;
    let mut outcome = SyncOutcome::default();
    let mut view = match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
        Ok(view) => view,
        Err(error) => {
            warn!(error = %Chain(&error), "cannot read the pod's runtime status; retrying");
            outcome.failed = true;
            outcome.retry(RETRY_AFTER_ERROR);
            return outcome;
        }
    };
    read_termination_messages(ctx, pod, &mut view.status.containers).await;
    outcome.runtime = view.status.clone();
    let now_unix_nanos = ctx.clock.now_unix_nanos();
    let wanted = images_to_inspect(pod, &view.status, now_unix_nanos);
    let images = image_presence(ctx.images.as_ref(), &wanted).await;
    let image_backoff = ctx.pulls_in_backoff(uid, &wanted);
    let cgroup_parent = ctx.containers.cgroup_parent(pod);
    let pod_inputs = ctx.volumes.inputs(pod).await;
    let plan = plan_pod_sync(&SyncInputs {
        pod,
        runtime: &view.status,
        images: &images,
        image_backoff: &image_backoff,
        now_unix_nanos,
        requests: &ctx.requests,
        cgroup_parent: &cgroup_parent,
        pod_inputs: &pod_inputs,
    });
    // Volumes are set up on every sync, so object updates reach running containers.
    let failed_mounts = if plan.kill_only || plan.rejected.is_some() {
        Vec::new()
    } else {
        let all = plan.create_sandbox.is_some();
        ctx.volumes
            .set_up_volumes(&ctx.requests, pod, &pod_inputs, all)
            .await
    };
    if let Some(refresh) = ctx.volumes.next_refresh(uid) {
        outcome.retry(refresh);
    }
    if plan.create_sandbox.is_none() {
        // A running pod's volume that could not be refreshed keeps its last contents; the
        // failure is the pod's event, as upstream's reconciler reports it.
        for f in &failed_mounts {
            warn!(message = %f.message, "a running pod's volume could not be refreshed");
            ctx.events.pod(pod, pod_events::failed_mount(&f.message));
        }
    }
    if !failed_mounts.is_empty() && plan.create_sandbox.is_some() {
        // No sandbox until every volume is there (upstream's WaitForAttachAndMount).
        let message = failed_mounts
            .iter()
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        for f in &failed_mounts {
            ctx.events.pod(pod, pod_events::failed_mount(&f.message));
        }
        // A failed sync: the worker backs off (2 s doubling to 10 s) while it repeats,
        // rather than set up, fail and record every 2 s.
        outcome.failed = true;
        for c in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
            outcome.hold(
                &c.name,
                Held {
                    waiting: Waiting::new("ContainerCreating", message.clone()),
                    retry_after: RETRY_AFTER_ERROR,
                },
            );
        }
        return outcome;
    }
    if plan.is_empty() {
        collect_dead(ctx, &view).await;
        outcome.settled = outcome.runtime.all_live();
        return outcome;
    }
    debug!(actions = ?plan.actions, "pod sync plan");
    if let Some(rejection) = &plan.rejected {
        warn!(reason = %rejection.reason, message = %rejection.message, "pod rejected");
        outcome.rejected = Some(rejection.clone());
    }
    let grace = teardown::grace_period(Some(pod), &view.status, Stopping::Spec);
    if let Some(reason) = &plan.kill_pod {
        info!(%reason, "killing pod");
        let stop = teardown::termination_plan(Some(pod), &view.status, Stopping::Spec);
        stop_pod(ctx, Some(pod), &view.status, &stop).await;
    }
    for kill in &plan.kill_containers {
        info!(container = %kill.name, id = %kill.id, reason = %kill.reason, "killing container");
        let mut stop = probes::stop_kill(&kill.name, &kill.id, grace);
        stop.message = kill.reason.to_string();
        probes::kill_container(
            ctx,
            Some(pod),
            &stop,
            &probes::kill_pod_ip(ctx, Some(pod), &view.status),
        )
        .await;
    }
    if plan.kill_only {
        return outcome;
    }

    // The pod's cgroup exists before its sandbox is asked for (upstream EnsureExists).
    if let Err(error) = ctx.containers.ensure_pod(pod).await {
        warn!(error = %Chain(&error), "failed to create the pod's cgroup; retrying");
        outcome.failed = true;
        outcome.retry(RETRY_AFTER_ERROR);
        return outcome;
    }
    if plan.create_sandbox.is_some() && !view.status.sandboxes.is_empty() {
        ctx.events.pod(pod, pod_events::sandbox_changed());
    }
    let mut plan = plan;
    let mut new_sandbox = None;
    let mut sandbox_ip = view
        .status
        .sandboxes
        .iter()
        .find(|s| s.state == SandboxState::Ready)
        .map(|s| s.ip.clone())
        .unwrap_or_default();
    let sandbox_id = match &plan.create_sandbox {
        Some(creation) => match create_sandbox(ctx, creation, &plan.sandbox).await {
            Ok(id) => {
                info!(sandbox = %id, attempt = creation.attempt, reason = %creation.reason, "created pod sandbox");
                // The containers' configs were planned before the sandbox had an IP: plan
                // them again with it (status.podIP in env and the managed /etc/hosts), as
                // upstream makes them from the new sandbox's status.
                let ip = match ctx.runtime.pod_sandbox_status(&id).await {
                    Ok(status) => {
                        let ip = status.ip.clone();
                        new_sandbox = Some(status);
                        ip
                    }
                    Err(error) => {
                        warn!(sandbox = %id, error = %Chain(&error), "cannot read the new sandbox's IP");
                        String::new()
                    }
                };
                sandbox_ip.clone_from(&ip);
                if !ip.is_empty() && pod_inputs.facts.pod_ip.is_empty() {
                    let mut with_ip = pod_inputs.clone();
                    with_ip.facts.pod_ip = ip;
                    let again = plan_pod_sync(&SyncInputs {
                        pod,
                        runtime: &view.status,
                        images: &images,
                        image_backoff: &image_backoff,
                        now_unix_nanos,
                        requests: &ctx.requests,
                        cgroup_parent: &cgroup_parent,
                        pod_inputs: &with_ip,
                    });
                    plan.init_containers = again.init_containers;
                    plan.containers = again.containers;
                }
                id
            }
            Err(error) => {
                warn!(error = %Chain(&error), "failed to create pod sandbox; retrying");
                ctx.events.pod(
                    pod,
                    pod_events::failed_create_sandbox(&Chain(&error).to_string()),
                );
                outcome.failed = true;
                outcome.retry(RETRY_AFTER_ERROR);
                return outcome;
            }
        },
        None => plan.sandbox_id.clone(),
    };

    let starts = plan
        .init_containers
        .iter()
        .chain(&plan.containers)
        .any(|step| matches!(step.action, ContainerAction::Start(_)));
    if starts {
        write_hosts_file(
            ctx,
            pod,
            &sandbox_ip,
            &pod_inputs.facts.host_ip,
            &plan.sandbox,
        )
        .await;
    }
    let (keyring, missing) = pod_keyring(pod, &pod_inputs.objects);
    if starts && !missing.is_empty() {
        warn!(secrets = ?missing, "Unable to retrieve some image pull secrets; attempting to pull the image may not succeed.");
    }
    let mut pulls = BTreeMap::new();
    let mut started = Vec::new();
    // Init containers run one at a time: one that does not start stops the sync here.
    for step in &plan.init_containers {
        let target = Target {
            pod,
            init: true,
            sandbox_id: &sandbox_id,
            sandbox: &plan.sandbox,
            keyring: &keyring,
        };
        if let Err(held) = carry_out(ctx, &target, step, &mut pulls, &mut started).await {
            outcome.hold(&step.name, held);
            return outcome;
        }
    }
    for step in &plan.containers {
        let target = Target {
            pod,
            init: false,
            sandbox_id: &sandbox_id,
            sandbox: &plan.sandbox,
            keyring: &keyring,
        };
        if let Err(held) = carry_out(ctx, &target, step, &mut pulls, &mut started).await {
            outcome.hold(&step.name, held);
        }
    }
    if starts || plan.create_sandbox.is_some() {
        let killed = plan.kill_pod.is_some() || !plan.kill_containers.is_empty();
        let created = SyncCreated {
            sandbox: new_sandbox,
            sandbox_asked: plan.create_sandbox.is_some(),
            containers: started,
        };
        see_what_the_sync_did(ctx, pod, &mut outcome, (!killed).then_some(created)).await;
    }
    outcome.settled = !outcome.failed
        && plan.kill_pod.is_none()
        && plan.kill_containers.is_empty()
        && outcome.waiting.is_empty()
        && outcome.runtime.all_live();
    collect_dead(ctx, &view).await;
    outcome
}

/// What a sync created: the sandbox's status as read after its creation, and the ids of
/// the containers it started.
struct SyncCreated {
    sandbox: Option<SandboxStatus>,
    sandbox_asked: bool,
    containers: Vec<String>,
}

/// The status shows what this sync did (the sandbox and the containers it started), so
/// `Running` reaches the API in this sync's write and not a relist later: one status write
/// where upstream makes two (`Pending` from the sync's start, then `Running`).
///
/// When the sync only added (`created` is given: it killed nothing), the view from its
/// start gains the new sandbox's status, read already, and one status call per started
/// container, where listing the pod again would cost four calls or more: containerd's CPU
/// is what many pods starting at once wait for. Otherwise, or when a read fails, the pod
/// is read again whole. A failed read keeps the view from the sync's start; the next
/// relist corrects it.
async fn see_what_the_sync_did(
    ctx: &SyncContext,
    pod: &Pod,
    outcome: &mut SyncOutcome,
    created: Option<SyncCreated>,
) {
    if let Some(created) = created.filter(|c| c.sandbox.is_some() || !c.sandbox_asked) {
        let mut after = outcome.runtime.clone();
        let first_started = after.containers.len();
        let mut complete = true;
        for id in &created.containers {
            match ctx.runtime.container_status(id).await {
                Ok(status) => after.containers.push(status),
                Err(error) => {
                    debug!(container = %id, error = %Chain(&error), "cannot read a started container's status");
                    complete = false;
                    break;
                }
            }
        }
        if complete {
            if let Some(sandbox) = created.sandbox {
                after.sandboxes.push(sandbox);
                after
                    .sandboxes
                    .sort_by_key(|s| std::cmp::Reverse((s.created_at_nanos, s.attempt)));
            }
            // A container that exits at once is already Exited here; a terminal pod's
            // status is not read again, so its message must be read now (the others'
            // were read at the sync's start).
            read_termination_messages(ctx, pod, &mut after.containers[first_started..]).await;
            outcome.runtime = after;
            return;
        }
    }
    match pod_runtime_view(ctx.runtime.as_ref(), &pod.metadata.uid).await {
        Ok(mut after) => {
            read_termination_messages(ctx, pod, &mut after.status.containers).await;
            outcome.runtime = after.status;
        }
        Err(error) => {
            debug!(error = %Chain(&error), "cannot read the pod's runtime status after its sync")
        }
    }
}

/// Writes the pod's managed `/etc/hosts` (the domain decides its content) before its
/// containers are created with it mounted; a failure shows as their creation error.
async fn write_hosts_file(
    ctx: &SyncContext,
    pod: &Pod,
    sandbox_ip: &str,
    host_ip: &str,
    sandbox: &SandboxConfig,
) {
    use crate::domain::kuberuntime::hosts::{etc_hosts_file, hosts_ip, HostsFile, ETC_HOSTS_PATH};
    let ip = hosts_ip(pod, sandbox_ip, host_ip);
    let Some(file) = HostsFile::of(&ctx.requests, pod, ip, &sandbox.hostname) else {
        return;
    };
    let files = ctx.volumes.files();
    let node_hosts = match &file {
        HostsFile::FromNode { .. } => {
            match off_runtime(&files, |f| f.read(Path::new(ETC_HOSTS_PATH))).await {
                Ok(Some(data)) => String::from_utf8_lossy(&data).into_owned(),
                Ok(None) => {
                    warn!("cannot read the node's /etc/hosts for a host-network pod: missing");
                    String::new()
                }
                Err(error) => {
                    warn!(error = %Chain(&error), "cannot read the node's /etc/hosts for a host-network pod");
                    String::new()
                }
            }
        }
        HostsFile::Managed(_) => String::new(),
    };
    let path = etc_hosts_file(&ctx.requests, &pod.metadata.uid);
    let content = file.content(&node_hosts);
    if let Err(error) = off_runtime(&files, move |f| f.write_file(&path, content.as_bytes())).await
    {
        warn!(error = %Chain(&error), "cannot write the pod's hosts file");
    }
}

/// Why a pod's sandbox was not created.
#[derive(Debug, thiserror::Error)]
enum SandboxError {
    /// Its folders or emptyDir volumes.
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

async fn create_sandbox(
    ctx: &SyncContext,
    creation: &SandboxCreation,
    sandbox: &SandboxConfig,
) -> Result<String, SandboxError> {
    for warning in &creation.dns_warnings {
        warn!(%warning, "pod DNS configuration");
    }
    let directories = creation.directories.clone();
    let volumes = creation.volumes.clone();
    off_runtime(&ctx.volumes.files(), move |files| {
        for dir in &directories {
            files.create_dir_all(dir, None)?;
        }
        volumes.iter().try_for_each(|v| files.set_up_empty_dir(v))
    })
    .await?;
    Ok(ctx.runtime.run_pod_sandbox(sandbox).await?)
}

/// Where a container plan is carried out: its pod, whether it is an init container, and
/// the sandbox it goes into.
struct Target<'a> {
    pod: &'a Pod,
    init: bool,
    sandbox_id: &'a str,
    sandbox: &'a SandboxConfig,
    /// Registry credentials from the pod's pull secrets.
    keyring: &'a Keyring,
}

/// Carries out one container's plan: held as planned, or pull (once per image and
/// sync; then the request is completed with the pulled image's id and user), create
/// and start.
async fn carry_out(
    ctx: &SyncContext,
    target: &Target<'_>,
    step: &ContainerPlan,
    pulls: &mut BTreeMap<String, Result<(), Held>>,
    started: &mut Vec<String>,
) -> Result<(), Held> {
    let (sandbox_id, sandbox) = (target.sandbox_id, target.sandbox);
    let start = match &step.action {
        ContainerAction::Held(held) => {
            debug!(container = %step.name, reason = %held.waiting.reason, message = %held.waiting.message, "container held");
            for event in pod_events::held_events(target.pod, &step.name, &step.image, held) {
                ctx.events.container(target.pod, &step.name, event);
            }
            return Err(held.clone());
        }
        ContainerAction::Start(start) => start,
    };
    debug!(container = %step.name, reason = %step.reason, "starting container");
    for skipped in &start.skipped_env {
        ctx.events
            .pod(target.pod, pod_events::invalid_env_names(skipped));
    }
    if start.pull_image {
        let result = match pulls.get(&start.config.image) {
            Some(done) => done.clone(),
            None => {
                let result = pull_image(
                    ctx,
                    target.pod,
                    &step.name,
                    &start.config.image,
                    target.keyring,
                )
                .await;
                pulls.insert(start.config.image.clone(), result.clone());
                result
            }
        };
        if let Err(held) = result {
            ctx.events.container(
                target.pod,
                &step.name,
                pod_events::container_error(&held.waiting.reason),
            );
            return Err(held);
        }
    } else {
        ctx.events.container(
            target.pod,
            &step.name,
            // The spec's image, as upstream words it (the config may name the image id).
            pod_events::already_present(&step.image),
        );
    }
    let pulled;
    let config = if start.pull_image {
        let image = &start.config.image;
        let facts = match ctx.images.image_status(image).await {
            Ok(Some(info)) => ImageFacts::of(&info),
            Ok(None) => {
                return Err(failed(
                    &step.name,
                    "ErrImageInspect",
                    format!("Failed to inspect image {image:?}: not present after its pull"),
                ))
            }
            Err(e) => {
                return Err(failed(
                    &step.name,
                    "ErrImageInspect",
                    format!("Failed to inspect image {image:?}: {e}"),
                ))
            }
        };
        pulled = complete_after_pull(target.pod, step.index, target.init, &start.config, &facts)
            .inspect_err(|held| {
                for event in pod_events::held_events(target.pod, &step.name, &step.image, held) {
                    ctx.events.container(target.pod, &step.name, event);
                }
            })?;
        &pulled
    } else {
        &start.config
    };
    let record = |event| ctx.events.container(target.pod, &step.name, event);
    if let Some(spec) = spec_of(target, step) {
        if let Some(mount) =
            termination::message_mount(&ctx.requests, target.pod, spec, config.attempt)
        {
            // The message file is a bind-mounted file: it exists, writable by any user.
            if let Err(e) = create_message_file(ctx, Path::new(&mount.host_path)).await {
                let message = format!("cannot create {}: {}", mount.host_path, io_cause(&e));
                record(pod_events::container_error(&message));
                return Err(failed(&step.name, "CreateContainerError", message));
            }
        }
    }
    bind_sub_paths(ctx, &step.name, config)
        .await
        .inspect_err(|held| {
            record(pod_events::container_error(&held.waiting.message));
        })?;
    let id = match ctx
        .runtime
        .create_container(sandbox_id, config, sandbox)
        .await
    {
        Ok(id) => id,
        Err(e) => {
            let message = Chain(&e).to_string();
            record(pod_events::container_error(&message));
            return Err(failed(&step.name, "CreateContainerError", message));
        }
    };
    record(pod_events::created(&step.name));
    if let Err(e) = ctx.runtime.start_container(&id).await {
        let message = Chain(&e).to_string();
        record(pod_events::container_error(&message));
        return Err(failed(&step.name, "RunContainerError", message));
    }
    record(pod_events::started(&step.name));
    info!(container = %step.name, %id, restart_count = config.attempt, "started container");
    started.push(id.clone());
    if let Some(spec) = spec_of(target, step) {
        probes::post_start(ctx, target.pod, spec, &id, sandbox_id)
            .await
            .map_err(|message| failed(&step.name, "PostStartHookError", message))?;
    }
    Ok(())
}

/// Binds the container's volume subpaths, each opened under its volume without
/// following a link out of it, before the runtime mounts them.
async fn bind_sub_paths(
    ctx: &SyncContext,
    container: &str,
    config: &ContainerConfig,
) -> Result<(), Held> {
    let subs: Vec<_> = config
        .mounts
        .iter()
        .filter_map(|m| m.sub_path.clone())
        .collect();
    if subs.is_empty() {
        return Ok(());
    }
    let files = ctx.volumes.files();
    let bound = tokio::task::spawn_blocking(move || {
        subs.into_iter()
            .try_for_each(|sub| files.bind_sub_path(&sub).map_err(|e| Box::new((sub, e))))
    })
    .await;
    let failure = match bound {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(failure)) => {
            let (sub, error) = *failure;
            warn!(container, volume = %sub.volume, error = %Chain(&error), "Failed to prepare subPath for volumeMount of the container");
            sub.failure_message(container)
        }
        Err(error) => format!("subpath task failed: {error}"),
    };
    Err(failed(container, "CreateContainerConfigError", failure))
}

fn spec_of<'a>(
    target: &Target<'a>,
    step: &ContainerPlan,
) -> Option<&'a crate::domain::pod::Container> {
    if target.init {
        target.pod.spec.init_containers.get(step.index)
    } else {
        target.pod.spec.containers.get(step.index)
    }
}

/// Creates the instance's termination message file (its folder first), writable by any
/// user: the container may run as any.
async fn create_message_file(ctx: &SyncContext, path: &Path) -> Result<(), FilesError> {
    let path = path.to_owned();
    off_runtime(&ctx.volumes.files(), move |files| {
        if let Some(parent) = path.parent() {
            files.create_dir_all(parent, None)?;
        }
        files.create_file(&path, 0o666)
    })
    .await
}

/// Fills the message of the pod's exited instances with what they wrote to their
/// termination message file, or their log's tail, as the domain decides.
async fn read_termination_messages(
    ctx: &SyncContext,
    pod: &Pod,
    containers: &mut [ContainerStatus],
) {
    use termination::{log_tail, termination_message, Message, MessageFile};
    let files = ctx.volumes.files();
    for c in containers
        .iter_mut()
        .filter(|c| c.state == ContainerState::Exited)
    {
        let Some(spec) = pod
            .spec
            .init_containers
            .iter()
            .chain(&pod.spec.containers)
            .find(|s| s.name == c.name)
        else {
            continue;
        };
        let path = termination::message_file(&ctx.requests, &pod.metadata.uid, &c.name, c.attempt);
        let limit = termination::MAX_MESSAGE_BYTES as u64;
        let read = {
            let path = path.clone();
            off_runtime(&files, move |f| f.read_at_most(&path, limit)).await
        };
        let file = match read {
            Ok(Some(data)) => MessageFile::Read(data),
            Ok(None) => MessageFile::Missing,
            Err(e) => MessageFile::Failed {
                path: path.display().to_string(),
                error: io_cause(&e),
            },
        };
        let text = match termination_message(spec, c.exit_code, &c.reason, &file) {
            Message::Text(text) => text,
            Message::FromLogs => {
                let log = pod_log_dir(&ctx.requests, pod)
                    .join(&c.name)
                    .join(format!("{}.log", c.attempt));
                // No log (yet) or an unreadable one: no tail, as upstream's.
                let data = off_runtime(&files, move |f| f.read(&log)).await;
                log_tail(&data.ok().flatten().unwrap_or_default())
            }
        };
        if !text.is_empty() && !c.message.ends_with(&text) {
            if !c.message.is_empty() {
                c.message.push_str(": ");
            }
            c.message.push_str(&text);
        }
    }
}

/// The innermost cause of a failed file operation (the I/O error itself): the domain
/// words the rest of the message.
fn io_cause(error: &FilesError) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Pulls `image`; a failure is recorded in the pull back-off (upstream's
/// `EnsureImageExists` after its decision).
async fn pull_image(
    ctx: &SyncContext,
    pod: &Pod,
    container: &str,
    image: &str,
    keyring: &Keyring,
) -> Result<(), Held> {
    let key = image_pull_key(&pod.metadata.uid, image);
    ctx.events
        .container(pod, container, pod_events::pulling(image));
    let started = ctx.clock.monotonic_nanos();
    match pull_with_credentials(ctx.images.as_ref(), image, &keyring.lookup(image)).await {
        Ok(reference) => {
            // One pull at a time per sync: the pull is all of the wait.
            let took = GoDuration::from_nanos(
                i64::try_from(ctx.clock.monotonic_nanos().saturating_sub(started))
                    .unwrap_or(i64::MAX),
            );
            debug!(image, %reference, "pulled image");
            ctx.events
                .container(pod, container, pod_events::pulled(image, took, took));
            lock(&ctx.image_backoff).reset(&key);
            Ok(())
        }
        Err(error) => {
            let mut backoff = lock(&ctx.image_backoff);
            // Keys of pods gone without their spec (orphans, pods from before a restart)
            // are not reset; the table keeps only the failures still counting.
            backoff.gc(ctx.monotonic());
            backoff.record_failure(&key, ctx.monotonic());
            // Look again soon: the status then says ImagePullBackOff until the next pull.
            let retry_after = backoff
                .current_delay(&key)
                .map_or(RETRY_AFTER_ERROR, |d| d.min(RETRY_AFTER_ERROR));
            ctx.events.container(
                pod,
                container,
                pod_events::pull_failed(image, &Chain(&error).to_string()),
            );
            Err(Held {
                waiting: Waiting::new(
                    "ErrImagePull",
                    format!("Failed to pull image {image:?}: {}", Chain(&error)),
                ),
                retry_after,
            })
        }
    }
}

/// Upstream's `PullImage`: anonymously when no credential matches the image's
/// registry, else with each matching credential in turn until one works; the errors of
/// all the attempts when none does.
async fn pull_with_credentials(
    images: &dyn ImageService,
    image: &str,
    credentials: &[AuthConfig],
) -> Result<String, RuntimeError> {
    if credentials.is_empty() {
        return images.pull_image(image, None).await;
    }
    let mut errors = Vec::new();
    for auth in credentials {
        match images.pull_image(image, Some(auth)).await {
            Ok(reference) => return Ok(reference),
            Err(e) => errors.push(e),
        }
    }
    match errors.len() {
        1 => Err(errors.remove(0)),
        _ => Err(RuntimeError::Failed {
            call: "PullImage".into(),
            source: std::sync::Arc::new(PullErrors(
                errors.iter().map(|e| Chain(e).to_string()).collect(),
            )),
        }),
    }
}

/// The errors of several pull attempts, as upstream's aggregate prints them.
#[derive(Debug)]
struct PullErrors(Vec<String>);

impl std::fmt::Display for PullErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}]", self.0.join(", "))
    }
}

impl std::error::Error for PullErrors {}

/// Carries out the domain's termination plan: each group of live containers stopped at
/// once (each with its `preStop` hook within the grace period), then the ready
/// sandboxes. `pod` is the spec when known.
async fn stop_pod(
    ctx: &SyncContext,
    pod: Option<&Pod>,
    status: &PodRuntimeStatus,
    plan: &TerminationPlan,
) {
    let ip = probes::kill_pod_ip(ctx, pod, status);
    for group in &plan.stop_groups {
        let kills: Vec<_> = group
            .iter()
            .map(|c| probes::stop_kill(&c.name, &c.id, plan.grace_secs))
            .collect();
        futures_util::future::join_all(
            kills
                .iter()
                .map(|kill| probes::kill_container(ctx, pod, kill, &ip)),
        )
        .await;
    }
    for id in &plan.stop_sandboxes {
        if let Err(error) = ctx.runtime.stop_pod_sandbox(id).await {
            warn!(sandbox = %id, error = %Chain(&error), "failed to stop pod sandbox");
        }
    }
}

/// Kills the pod for good (an eviction): stops its containers with `grace_secs` (at
/// least upstream's 2 s) and then its sandbox, keeping them for their logs and status.
/// Returns what the runtime holds afterwards.
pub async fn kill_pod(ctx: &SyncContext, pod: &Pod, grace_secs: i64) -> PodRuntimeStatus {
    let uid = &pod.metadata.uid;
    let before = match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
        Ok(view) => view.status,
        Err(error) => {
            warn!(error = %Chain(&error), "cannot read the pod's runtime status to kill it");
            return PodRuntimeStatus::default();
        }
    };
    let plan = teardown::termination_plan(Some(pod), &before, Stopping::KilledWith(grace_secs));
    info!(grace_period_secs = plan.grace_secs, "killing pod");
    stop_pod(ctx, Some(pod), &before, &plan).await;
    match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
        Ok(view) => view.status,
        Err(_) => before,
    }
}

/// Terminates a pod that is no longer desired: stops it with its grace period, then
/// removes its containers, sandboxes, volumes folder and logs. `pod` is its last spec
/// when known. Returns whether everything was removed.
pub async fn terminate_pod(ctx: &SyncContext, uid: &str, pod: Option<&Pod>) -> bool {
    let view = match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
        Ok(view) => view,
        Err(error) => {
            warn!(error = %Chain(&error), "cannot read the pod's runtime status to terminate it");
            return false;
        }
    };
    // A pod whose spec is gone (deleted while rkubelet was down) stops with what its
    // containers recorded: its grace period and their preStop hooks, as upstream's.
    let restored = pod
        .is_none()
        .then(|| view.status.restored_pod())
        .filter(|p| !p.metadata.name.is_empty());
    let stopping = pod.or(restored.as_ref());
    let plan = teardown::termination_plan(stopping, &view.status, Stopping::Spec);
    info!(
        grace_period_secs = plan.grace_secs,
        restored = restored.is_some(),
        "terminating pod"
    );
    stop_pod(ctx, stopping, &view.status, &plan).await;
    let mut clean = true;
    let removal = teardown::removal(&view.status);
    for id in &removal.containers {
        let mut removed = ctx.runtime.remove_container(id).await;
        let exited = view
            .status
            .containers
            .iter()
            .any(|c| c.id == *id && c.state == ContainerState::Exited);
        if removed.is_err() && exited {
            // A container listed as exited may still have a running task (rkubelet killed
            // while it started; found by fault test 1): stop it, then remove it.
            let _ = ctx.runtime.stop_container(id, 0).await;
            removed = ctx.runtime.remove_container(id).await;
        }
        if let Err(error) = removed {
            warn!(%id, error = %Chain(&error), "failed to remove container");
            clean = false;
        }
    }
    for id in &removal.sandboxes {
        if let Err(error) = ctx.runtime.remove_pod_sandbox(id).await {
            warn!(sandbox = %id, error = %Chain(&error), "failed to remove pod sandbox");
            clean = false;
        }
    }
    // Only now that its containers are gone may the pod's cgroup go.
    if clean {
        if let Err(error) = ctx.containers.remove_pod(uid).await {
            warn!(error = %Chain(&error), "failed to remove the pod's cgroup");
            clean = false;
        }
    }
    // tmpfs volumes (memory emptyDirs, secrets) and subpath binds are unmounted before
    // the folder goes; with one left, the folder stays.
    if !remove_pod_dir(ctx, pod_dir(&ctx.requests, uid)).await {
        clean = false;
    }
    ctx.volumes.forget(uid);
    if let Some(pod) = pod {
        let dir = pod_log_dir(&ctx.requests, pod);
        if let Err(error) = off_runtime(&ctx.volumes.files(), move |f| f.remove_dir_all(&dir)).await
        {
            warn!(error = %Chain(&error), "failed to remove pod folder");
        }
        let mut backoff = lock(&ctx.image_backoff);
        for c in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
            backoff.reset(&image_pull_key(uid, &c.image));
        }
    }
    info!(removed = clean, "pod terminated");
    clean
}

/// Unmounts what is mounted under a pod's folder and removes it (kept with a mount left
/// in it); whether it went. Every failure is logged.
pub(super) async fn remove_pod_dir(ctx: &SyncContext, dir: PathBuf) -> bool {
    let files = ctx.volumes.files();
    let removed = tokio::task::spawn_blocking(move || files.remove_pod_dir(&dir)).await;
    match removed {
        Ok(Ok(())) => true,
        Ok(Err(errors)) => {
            for error in errors {
                warn!(error = %Chain(&error), "failed to remove the pod's folder");
            }
            false
        }
        Err(error) => {
            warn!(error = %Chain(&error), "failed to remove the pod's folder");
            false
        }
    }
}

/// Removes a removed instance's log and its rotated files (upstream's `Clean`): a
/// crash-looping container would otherwise leave one log per restart until its pod goes.
async fn remove_instance_logs(ctx: &SyncContext, dir: PathBuf, attempt: u32) {
    let removed = off_runtime(&ctx.volumes.files(), move |files| {
        // A failure on one file does not keep the others.
        let mut failures = Vec::new();
        for name in files.list_dir(&dir)? {
            if belongs_to_instance(&name, attempt) {
                if let Err(error) = files.remove_file(&dir.join(&name)) {
                    failures.push(error);
                }
            }
        }
        Ok(failures)
    })
    .await;
    let failures = match removed {
        Ok(failures) => failures.into_iter().map(FilesError::Files).collect(),
        Err(error) => vec![error],
    };
    for error in failures {
        warn!(error = %Chain(&error), "failed to remove the log of a dead container");
    }
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
                let dir = pod_log_dir_of(
                    &ctx.requests.pod_logs_dir,
                    &status.namespace,
                    &status.name,
                    &status.uid,
                )
                .join(&c.name);
                remove_instance_logs(ctx, dir, c.attempt).await;
            }
            Err(error) => {
                warn!(container = %c.name, id = %c.id, error = %Chain(&error), "failed to remove dead container")
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
            Err(error) => {
                warn!(sandbox = %s.id, error = %Chain(&error), "failed to remove dead sandbox")
            }
        }
    }
}
