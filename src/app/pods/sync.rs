//! Carrying out one pod's sync: read what the runtime holds and which images are
//! present, ask the domain for the sync plan (`plan_pod_sync`), then carry it out
//! (kill, create the sandbox, pull images, create and start containers), record what
//! happened (pull failures feed the pull back-off), and collect dead containers.
//! Termination is in `terminate.rs`, pulls in `pulls.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tracing::{debug, info, warn};

use super::events::PodEventSink;
use super::probes;
use super::volumes::{off_runtime, FilesError};
use crate::app::container_manager::ContainerManager;
use crate::app::pods::runtime_state::{image_presence, pod_runtime_view};
use crate::domain::kuberuntime::backoff::{image_pull_key, Backoff, BackoffPolicy};
use crate::domain::kuberuntime::hosts::ETC_HOSTS_PATH;
use crate::domain::kuberuntime::log_rotation::belongs_to_instance;
use crate::domain::kuberuntime::plan::ImageFacts;
use crate::domain::kuberuntime::pod_sync::{
    Answer, Created, Effect, Need, PlanningFacts, PodSync, PulledImage, Step,
};
use crate::domain::kuberuntime::requests::{pod_log_dir, RequestContext};
use crate::domain::kuberuntime::runtime::{ContainerState, ContainerStatus, PodRuntimeStatus};
use crate::domain::kuberuntime::termination;
use crate::domain::pod::Pod;
use crate::domain::volumes::subpath::SubPath;
use crate::ports::clock::Clock;
use crate::ports::error::Chain;
use crate::ports::prober::{NoProber, Prober};
use crate::ports::runtime::{ImageService, RuntimeService};

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
    /// The device plugins' devices for the containers that ask for them.
    pub devices: Option<Arc<crate::app::devices::DeviceManager>>,
    /// The static CPU manager's cpusets.
    pub cpus: Option<Arc<crate::app::cpu_manager::CpuManager>>,
    /// The user namespaces of `hostUsers: false` pods.
    pub userns: Arc<super::userns::UserNamespaces>,
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
            devices: None,
            cpus: None,
            userns: Arc::new(super::userns::UserNamespaces::new(
                true,
                crate::domain::kuberuntime::userns::KubeletIdRange::DEFAULT,
            )),
        }
    }

    /// With the user namespaces the configuration gives (the feature gate, the range).
    pub fn with_user_namespaces(mut self, userns: super::userns::UserNamespaces) -> Self {
        self.userns = Arc::new(userns);
        self
    }

    /// With the device manager giving containers their devices.
    pub fn with_devices(mut self, devices: Arc<crate::app::devices::DeviceManager>) -> Self {
        self.devices = Some(devices);
        self
    }

    /// With the static CPU manager giving each container its cpuset.
    pub fn with_cpu_manager(mut self, cpus: Arc<crate::app::cpu_manager::CpuManager>) -> Self {
        self.cpus = Some(cpus);
        self
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
    pub(super) fn monotonic(&self) -> Duration {
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

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Back-off tables stay usable after a panic elsewhere; they hold plain data.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub use crate::domain::kuberuntime::pod_sync::SyncOutcome;

/// Syncs `pod` once: brings the runtime in line with its spec as far as possible now.
/// The domain's step machine decides everything; this loop gathers the facts it names
/// and carries out the effects it asks for.
pub async fn sync_pod(ctx: &SyncContext, pod: &Pod) -> SyncOutcome {
    let mut sync = PodSync::new(pod, &ctx.requests, ctx.clock.now_unix_nanos());
    loop {
        let answer = match sync.step() {
            Step::Done(outcome) => {
                for hold in outcome.holds.iter().filter(|h| h.held.is_error()) {
                    warn!(container = %hold.name, reason = %hold.held.waiting.reason, message = %hold.held.waiting.message, "container not started");
                }
                return *outcome;
            }
            Step::Need(need) => gather(ctx, pod, need).await,
            Step::Do(effect) => perform(ctx, pod, effect).await,
        };
        sync.feed(answer);
    }
}

/// Gathers a fact the sync needs.
async fn gather(ctx: &SyncContext, pod: &Pod, need: Need) -> Answer {
    let uid = &pod.metadata.uid;
    match need {
        Need::Runtime => match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
            Ok(mut view) => {
                read_termination_messages(ctx, pod, &mut view.status.containers).await;
                Answer::Runtime(Ok(view))
            }
            Err(error) => Answer::Runtime(Err(Chain(&error).to_string())),
        },
        Need::Inputs { images: wanted } => {
            let images = image_presence(ctx.images.as_ref(), &wanted).await;
            let image_backoff = ctx.pulls_in_backoff(uid, &wanted);
            Answer::Inputs(Box::new(PlanningFacts {
                images,
                image_backoff,
                cgroup_parent: ctx.containers.cgroup_parent(pod),
                pod_inputs: ctx.volumes.inputs(pod).await,
            }))
        }
        Need::SandboxStatus { id } => match ctx.runtime.pod_sandbox_status(&id).await {
            Ok(status) => Answer::SandboxStatus(Some(status)),
            Err(error) => {
                warn!(sandbox = %id, error = %Chain(&error), "cannot read the new sandbox's IP");
                Answer::SandboxStatus(None)
            }
        },
        Need::NodeHosts => {
            let files = ctx.volumes.files();
            let read = off_runtime(&files, |f| f.read(Path::new(ETC_HOSTS_PATH))).await;
            Answer::NodeHosts(match read {
                Ok(Some(data)) => String::from_utf8_lossy(&data).into_owned(),
                Ok(None) => {
                    warn!("cannot read the node's /etc/hosts for a host-network pod: missing");
                    String::new()
                }
                Err(error) => {
                    warn!(error = %Chain(&error), "cannot read the node's /etc/hosts for a host-network pod");
                    String::new()
                }
            })
        }
        Need::PulledImage { image } => {
            Answer::PulledImage(match ctx.images.image_status(&image).await {
                Ok(Some(info)) => PulledImage::Facts(ImageFacts::of(&info)),
                Ok(None) => PulledImage::Missing,
                Err(error) => PulledImage::Failed(error.to_string()),
            })
        }
        Need::RuntimeAfter { created } => {
            Answer::RuntimeAfter(runtime_after(ctx, pod, created).await)
        }
    }
}

/// The pod's runtime status after a sync. When the sync only added (`created`), the
/// view from its start gains the new sandbox's status, read already, and one status call
/// per started container, where listing the pod again would cost four calls or more:
/// containerd's CPU is what many pods starting at once wait for. Otherwise, or when a
/// read fails, the pod is read again whole; `None` when that fails too (the next relist
/// corrects it).
async fn runtime_after(
    ctx: &SyncContext,
    pod: &Pod,
    created: Option<Created>,
) -> Option<PodRuntimeStatus> {
    if let Some(created) = created {
        let mut after = created.base;
        let first_started = after.containers.len();
        let mut complete = true;
        for id in &created.containers {
            match ctx.runtime.container_status(id).await {
                Ok(status) => after.containers.push(status),
                Err(error) => {
                    debug!(container_id = %id, error = %Chain(&error), "cannot read a started container's status");
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
            return Some(after);
        }
    }
    match pod_runtime_view(ctx.runtime.as_ref(), &pod.metadata.uid).await {
        Ok(mut after) => {
            read_termination_messages(ctx, pod, &mut after.status.containers).await;
            Some(after.status)
        }
        Err(error) => {
            debug!(error = %Chain(&error), "cannot read the pod's runtime status after its sync");
            None
        }
    }
}

/// Carries out an effect the sync asked for.
async fn perform(ctx: &SyncContext, pod: &Pod, effect: Effect) -> Answer {
    match effect {
        Effect::SetUpVolumes { all } => {
            let inputs = ctx.volumes.inputs(pod).await;
            let failed = ctx
                .volumes
                .set_up_volumes(&ctx.requests, pod, &inputs, all)
                .await;
            for resized in ctx.volumes.take_resize_events(&pod.metadata.uid) {
                match resized.claim {
                    Some(claim) => ctx.events.about(pod, claim, resized.event),
                    None => ctx.events.pod(pod, resized.event),
                }
            }
            Answer::Volumes {
                failed: failed.into_iter().map(|f| f.message).collect(),
                refresh_after: ctx.volumes.next_refresh(&pod.metadata.uid),
            }
        }
        Effect::Event { container, event } => {
            match container {
                Some(container) => ctx.events.container(pod, &container, event),
                None => ctx.events.pod(pod, event),
            }
            Answer::Done
        }
        Effect::Warn(message) => {
            warn!(%message, "pod sync");
            Answer::Done
        }
        Effect::StopPod {
            reason,
            plan,
            sandbox_ip,
        } => {
            info!(%reason, "killing pod");
            let ip = probes::kill_ip(ctx, Some(pod), &sandbox_ip);
            super::terminate::stop_pod(ctx, Some(pod), &ip, &plan).await;
            Answer::Done
        }
        Effect::StopContainer {
            name,
            id,
            reason,
            grace_secs,
            sandbox_ip,
        } => {
            info!(container = %name, container_id = %id, %reason, "killing container");
            let mut stop = probes::stop_kill(&name, &id, grace_secs);
            stop.message = reason.to_string();
            let ip = probes::kill_ip(ctx, Some(pod), &sandbox_ip);
            probes::kill_container(ctx, Some(pod), &stop, &ip).await;
            Answer::Done
        }
        Effect::EnsurePodCgroup => match ctx.containers.ensure_pod(pod).await {
            Ok(()) => Answer::Done,
            Err(error) => Answer::Failed(Chain(&error).to_string()),
        },
        Effect::CreateSandbox {
            creation,
            mut config,
        } => {
            for warning in &creation.dns_warnings {
                warn!(%warning, "pod DNS configuration");
            }
            let directories = creation.directories.clone();
            let volumes = creation.volumes.clone();
            let made = off_runtime(&ctx.volumes.files(), move |files| {
                for dir in &directories {
                    files.create_dir_all(dir, None)?;
                }
                volumes.iter().try_for_each(|v| files.set_up_empty_dir(v))
            })
            .await;
            if let Err(error) = made {
                return Answer::Failed(Chain(&error).to_string());
            }
            if let Some(user) = config.security.namespace_options.user.as_mut() {
                let handler = config.runtime_handler.clone();
                match ctx
                    .userns
                    .for_sandbox(
                        ctx.runtime.as_ref(),
                        &ctx.volumes.files(),
                        &ctx.requests.root_dir.join("pods"),
                        &pod.metadata.uid,
                        &handler,
                    )
                    .await
                {
                    Ok(namespace) => *user = namespace,
                    Err(error) => return Answer::Failed(Chain(&error).to_string()),
                }
            }
            match ctx.runtime.run_pod_sandbox(&config).await {
                Ok(id) => {
                    info!(sandbox = %id, attempt = creation.attempt, reason = %creation.reason, "created pod sandbox");
                    Answer::SandboxCreated(id)
                }
                Err(error) => Answer::Failed(Chain(&error).to_string()),
            }
        }
        Effect::WriteHostsFile { path, content } => {
            let files = ctx.volumes.files();
            if let Err(error) =
                off_runtime(&files, move |f| f.write_file(&path, content.as_bytes())).await
            {
                warn!(error = %Chain(&error), "cannot write the pod's hosts file");
            }
            Answer::Done
        }
        Effect::PullImage {
            image, credentials, ..
        } => super::pulls::pull_image(ctx, pod, &image, &credentials).await,
        Effect::CreateMessageFile { path, .. } => match create_message_file(ctx, &path).await {
            Ok(()) => Answer::Done,
            Err(error) => Answer::Failed(io_cause(&error)),
        },
        Effect::BindSubPaths {
            container,
            sub_paths,
        } => bind_sub_paths(ctx, &container, sub_paths).await,
        Effect::CreateContainer {
            kind,
            index,
            name,
            reason,
            sandbox_id,
            mut config,
            sandbox,
            ..
        } => {
            // The device plugins' devices, mounts and envs (upstream asks the device
            // manager while it builds the container's config).
            if let (Some(devices), Some(spec)) = (&ctx.devices, pod.spec.container(kind, index)) {
                match devices.run_options(pod, spec).await {
                    Ok(options) => {
                        crate::domain::kuberuntime::requests::apply_device_options(
                            &mut config,
                            &options,
                        );
                    }
                    Err(message) => return Answer::Failed(message),
                }
            }
            if let Some(user) = config.security.namespace_options.user.as_mut() {
                match ctx
                    .userns
                    .for_container(
                        &ctx.volumes.files(),
                        &ctx.requests.root_dir.join("pods"),
                        &pod.metadata.uid,
                    )
                    .await
                {
                    Ok(Some(namespace)) => *user = namespace,
                    Ok(None) => {
                        return Answer::Failed(format!(
                            "the pod's user namespace is not known (no {} in its folder)",
                            crate::domain::kuberuntime::userns::MAPPINGS_FILE
                        ))
                    }
                    Err(error) => return Answer::Failed(Chain(&error).to_string()),
                }
            }
            // Upstream's `PreCreateContainer`: exclusive CPUs, else the shared pool.
            if let (Some(cpus), Some(spec)) = (&ctx.cpus, pod.spec.container(kind, index)) {
                config.linux.cpuset_cpus = cpus.container_cpuset(&pod.metadata.uid, &spec.name);
            }
            debug!(container = %name, %reason, "starting container");
            match ctx
                .runtime
                .create_container(&sandbox_id, &config, &sandbox)
                .await
            {
                Ok(id) => Answer::ContainerCreated(id),
                Err(error) => Answer::Failed(Chain(&error).to_string()),
            }
        }
        Effect::StartContainer { container, id } => match ctx.runtime.start_container(&id).await {
            Ok(()) => {
                info!(%container, container_id = %id, "started container");
                Answer::Done
            }
            Err(error) => Answer::Failed(Chain(&error).to_string()),
        },
        Effect::PostStart {
            kind,
            index,
            id,
            sandbox_id,
        } => {
            let Some(spec) = pod.spec.container(kind, index) else {
                return Answer::Done;
            };
            match probes::post_start(ctx, pod, spec, &id, &sandbox_id).await {
                Ok(()) => Answer::Done,
                Err(message) => Answer::Failed(message),
            }
        }
        Effect::RemoveDeadContainer {
            name,
            id,
            attempt,
            log_dir,
        } => match ctx.runtime.remove_container(&id).await {
            Ok(()) => {
                debug!(container = %name, container_id = %id, attempt, "removed dead container");
                remove_instance_logs(ctx, log_dir, attempt).await;
                Answer::Done
            }
            Err(error) => {
                warn!(container = %name, container_id = %id, error = %Chain(&error), "failed to remove dead container");
                Answer::Failed(Chain(&error).to_string())
            }
        },
        Effect::RemoveDeadSandbox { id } => {
            match ctx.runtime.remove_pod_sandbox(&id).await {
                Ok(()) => debug!(sandbox = %id, "removed dead sandbox"),
                Err(error) => {
                    warn!(sandbox = %id, error = %Chain(&error), "failed to remove dead sandbox")
                }
            }
            Answer::Done
        }
    }
}

/// Opens each subpath under its volume without following a link out of it and binds
/// it, before the runtime mounts them; the message the container is held with otherwise.
async fn bind_sub_paths(ctx: &SyncContext, container: &str, subs: Vec<SubPath>) -> Answer {
    let files = ctx.volumes.files();
    let bound = tokio::task::spawn_blocking(move || {
        subs.into_iter()
            .try_for_each(|sub| files.bind_sub_path(&sub).map_err(|e| Box::new((sub, e))))
    })
    .await;
    match bound {
        Ok(Ok(())) => Answer::Done,
        Ok(Err(failure)) => {
            let (sub, error) = *failure;
            warn!(container, volume = %sub.volume, error = %Chain(&error), "Failed to prepare subPath for volumeMount of the container");
            Answer::Failed(sub.failure_message(container))
        }
        Err(error) => Answer::Failed(format!("subpath task failed: {error}")),
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
        let Some(spec) = pod.spec.all_containers().find(|s| s.name == c.name) else {
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
