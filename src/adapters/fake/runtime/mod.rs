//! The embedded simulated runtime behind `--container-runtime-endpoint=fake://`: an
//! in-memory runtime so rkubelet runs anywhere, without root (a simulated node).
//! Containers do not run: `start_container` just marks them Running.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use tokio::sync::mpsc;

use crate::domain::cgroup::CgroupDriver;
use crate::domain::kuberuntime::labels;
use crate::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};
use crate::domain::kuberuntime::runtime::{
    ContainerEntry, ContainerEvent, ContainerEventKind, ContainerFilter, ContainerState,
    ContainerStatus, ImageInfo, RuntimeVersion, SandboxEntry, SandboxFilter, SandboxState,
    SandboxStatus,
};
use crate::ports::clock::Clock;
use crate::ports::runtime::{
    cause, ContainerEventStream, ImageService, RuntimeError, RuntimeService,
};

mod runtime_stats;

pub use crate::domain::kuberuntime::runtime::SIMULATED_RUNTIME_NAME as FAKE_RUNTIME_NAME;

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Without a clock, the latest creation/start/finish time handed out.
    now: i64,
    sandboxes: BTreeMap<String, SandboxEntry>,
    containers: BTreeMap<String, ContainerEntry>,
    /// The host paths each container was created with (not kept without a journal).
    mounts: BTreeMap<String, Vec<String>>,
    images: BTreeMap<String, ImageInfo>,
    /// Every call that changes something, in order (`RunPodSandbox web`, ...).
    journal: Vec<String>,
    /// `ListContainers` calls for one pod (a sync reading its pod), by pod uid.
    pod_reads: BTreeMap<String, usize>,
    /// When set, every pull fails with this reason (a node with no registry).
    pull_failure: Option<String>,
    /// Every pull with the credentials it carried.
    pull_auths: Vec<(
        String,
        Option<crate::domain::kuberuntime::credentials::AuthConfig>,
    )>,
    /// Pulls succeed only with this user's credentials.
    pull_only_as: Option<String>,
    /// `Some` once events are switched on: the subscribers of `container_events`.
    event_subscribers: Option<Vec<mpsc::UnboundedSender<ContainerEvent>>>,
    /// Usage reported by `container_stats`, set by tests (`runtime_stats` module).
    usage: runtime_stats::Usage,
    /// Exit codes of commands run by `exec_sync` (the command joined by spaces); 0
    /// for a command not listed.
    exec_exit_codes: BTreeMap<String, i32>,
    /// When set, `reopen_container_log` fails with this reason.
    log_reopen_failure: Option<String>,
    /// Containers (by name) whose process ends at its start, with this exit code.
    exit_at_start: BTreeMap<String, i32>,
    /// What `Status` lists; none by default, as containerd 1.6.
    runtime_handlers: Vec<crate::domain::kuberuntime::userns::RuntimeHandler>,
    /// The user namespace each sandbox was made with, by sandbox id.
    sandbox_userns: BTreeMap<String, crate::domain::kuberuntime::requests::UserNamespace>,
}

impl State {
    fn emit(&mut self, container_id: &str, kind: ContainerEventKind) {
        let Some(subscribers) = self.event_subscribers.as_mut() else {
            return;
        };
        let pod_uid = self
            .containers
            .get(container_id)
            .and_then(|c| c.labels.get(labels::POD_UID_LABEL))
            .cloned()
            .unwrap_or_default();
        let event = ContainerEvent {
            container_id: container_id.to_owned(),
            kind,
            pod_uid,
        };
        subscribers.retain(|s| s.send(event.clone()).is_ok());
    }
}

/// Events to one subscriber of the fake runtime.
struct FakeEventStream(mpsc::UnboundedReceiver<ContainerEvent>);

#[async_trait]
impl ContainerEventStream for FakeEventStream {
    async fn next(&mut self) -> Option<Result<ContainerEvent, RuntimeError>> {
        self.0.recv().await.map(Ok)
    }
}

impl State {
    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:016x}", self.next_id)
    }
    /// The time of an event: the clock's wall time, or without a clock one past the
    /// previous event's (a logical clock).
    fn tick(&mut self, clock: Option<&dyn Clock>) -> i64 {
        match clock {
            Some(clock) => clock.now_unix_nanos(),
            None => {
                self.now += 1;
                self.now
            }
        }
    }
}

#[derive(Default)]
pub struct FakeRuntime {
    state: Mutex<State>,
    /// Where creation, start and exit times come from; without one, a counter.
    clock: Option<Arc<dyn Clock>>,
    /// The simulated node keeps no journal nor read counts: they would grow with every
    /// call (about 1 KiB a pod churned, found by the soak).
    no_journal: bool,
}

impl std::fmt::Debug for FakeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeRuntime")
            .field("state", &self.state)
            .field("clock", &self.clock.is_some())
            .finish()
    }
}

fn labels_match(want: &BTreeMap<String, String>, have: &BTreeMap<String, String>) -> bool {
    want.iter().all(|(k, v)| have.get(k) == Some(v))
}

impl FakeRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    /// A runtime that records creation, start and exit times from `clock` (wall time),
    /// as a real runtime does; crash-loop back-off counts from those times.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock: Some(clock),
            ..Self::default()
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic in a test; keep using it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Without the journal of calls (the simulated node, which runs for months).
    pub fn without_journal(mut self) -> Self {
        self.no_journal = true;
        self
    }

    fn record(&self, call: String) {
        if !self.no_journal {
            self.state().journal.push(call);
        }
    }

    /// Streams container events from now on, as containerd 1.7+ does; without this
    /// the fake answers `Unimplemented`, as containerd 1.6 does.
    pub fn stream_events(&self) {
        self.state().event_subscribers.get_or_insert_with(Vec::new);
    }

    /// Ends every open event stream (as a runtime restart does); new subscriptions are
    /// served.
    pub fn end_event_streams(&self) {
        if let Some(subscribers) = self.state().event_subscribers.as_mut() {
            subscribers.clear();
        }
    }

    /// How many event streams are open.
    pub fn event_streams(&self) -> usize {
        self.state()
            .event_subscribers
            .as_ref()
            .map_or(0, |s| s.iter().filter(|tx| !tx.is_closed()).count())
    }

    /// How many times the pod `uid` was read whole (`ListContainers` for its uid).
    pub fn pod_reads(&self, uid: &str) -> usize {
        self.state().pod_reads.get(uid).copied().unwrap_or(0)
    }

    /// The calls that changed something, in order.
    pub fn journal(&self) -> Vec<String> {
        self.state().journal.clone()
    }

    /// Simulates the container's process ending with `exit_code`.
    pub fn exit_container(&self, container_id: &str, exit_code: i32) {
        let mut s = self.state();
        let now = s.tick(self.clock.as_deref());
        if let Some(c) = s.containers.get_mut(container_id) {
            c.status.state = ContainerState::Exited;
            c.status.exit_code = exit_code;
            c.status.reason = if exit_code == 0 { "Completed" } else { "Error" }.into();
            c.status.finished_at_nanos = now;
        }
        s.emit(container_id, ContainerEventKind::Stopped);
    }

    /// Containers named `name` end at their start with `exit_code`, before the kubelet
    /// reads their status (a command that fails at once).
    pub fn exit_at_start(&self, name: &str, exit_code: i32) {
        self.state()
            .exit_at_start
            .insert(name.to_owned(), exit_code);
    }

    /// Makes the image present, as if imported.
    /// The host paths the container `id` was created with.
    pub fn container_mounts(&self, id: &str) -> Vec<String> {
        self.state().mounts.get(id).cloned().unwrap_or_default()
    }

    pub fn add_image(&self, image: &str) {
        let mut s = self.state();
        let id = format!("sha256:{:064x}", s.images.len() + 1);
        s.images.insert(
            image.to_owned(),
            ImageInfo {
                id,
                repo_tags: vec![image.to_owned()],
                repo_digests: Vec::new(),
                size_bytes: 0,
                ..ImageInfo::default()
            },
        );
    }

    /// From now on `exec_sync` of `command` (joined by spaces) exits with `exit_code`.
    pub fn set_exec_exit_code(&self, command: &str, exit_code: i32) {
        self.state()
            .exec_exit_codes
            .insert(command.to_owned(), exit_code);
    }

    /// From now on `Status` lists these handlers.
    pub fn set_runtime_handlers(
        &self,
        handlers: Vec<crate::domain::kuberuntime::userns::RuntimeHandler>,
    ) {
        self.state().runtime_handlers = handlers;
    }

    /// The user namespace a sandbox was made with, if it has its own.
    pub fn sandbox_userns(
        &self,
        sandbox_id: &str,
    ) -> Option<crate::domain::kuberuntime::requests::UserNamespace> {
        self.state().sandbox_userns.get(sandbox_id).cloned()
    }

    /// From now on every log reopen fails with `reason` (`None`: reopens succeed again).
    pub fn fail_log_reopens(&self, reason: Option<&str>) {
        self.state().log_reopen_failure = reason.map(str::to_owned);
    }

    /// From now on every pull fails with `reason` (`None`: pulls succeed again).
    pub fn fail_pulls(&self, reason: Option<&str>) {
        self.state().pull_failure = reason.map(str::to_owned);
    }

    /// From now on pulls succeed only with `user`'s credentials (a private registry).
    pub fn pull_only_as(&self, user: Option<&str>) {
        self.state().pull_only_as = user.map(str::to_owned);
    }

    /// Every pull so far: the image and the `AuthConfig` it carried.
    pub fn pull_auths(
        &self,
    ) -> Vec<(
        String,
        Option<crate::domain::kuberuntime::credentials::AuthConfig>,
    )> {
        self.state().pull_auths.clone()
    }
}

#[async_trait]
impl RuntimeService for FakeRuntime {
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError> {
        Ok(RuntimeVersion {
            runtime_name: FAKE_RUNTIME_NAME.into(),
            runtime_version: env!("CARGO_PKG_VERSION").into(),
            runtime_api_version: "v1".into(),
        })
    }

    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, RuntimeError> {
        self.record(format!("RunPodSandbox {}", config.name));
        let mut s = self.state();
        let id = s.id("sb");
        let created = s.tick(self.clock.as_deref());
        let entry = SandboxEntry {
            status: SandboxStatus {
                id: id.clone(),
                attempt: config.attempt,
                state: SandboxState::Ready,
                created_at_nanos: created,
                host_network: config.host_network,
                ip: if config.host_network {
                    String::new()
                } else {
                    format!("10.88.0.{}", (s.next_id % 250) + 2)
                },
            },
            name: config.name.clone(),
            uid: config.uid.clone(),
            namespace: config.namespace.clone(),
            labels: config.labels.clone(),
            runtime_handler: config.runtime_handler.clone(),
        };
        s.sandboxes.insert(id.clone(), entry);
        if let Some(userns) = &config.security.namespace_options.user {
            s.sandbox_userns.insert(id.clone(), userns.clone());
        }
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        self.record(format!("StopPodSandbox {sandbox_id}"));
        let mut s = self.state();
        let now = s.tick(self.clock.as_deref());
        for c in s.containers.values_mut() {
            if c.sandbox_id == sandbox_id && c.status.state == ContainerState::Running {
                c.status.state = ContainerState::Exited;
                c.status.exit_code = 137;
                c.status.finished_at_nanos = now;
            }
        }
        if let Some(sb) = s.sandboxes.get_mut(sandbox_id) {
            sb.status.state = SandboxState::NotReady;
        }
        Ok(())
    }

    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        self.record(format!("RemovePodSandbox {sandbox_id}"));
        let mut s = self.state();
        s.containers.retain(|_, c| c.sandbox_id != sandbox_id);
        s.sandboxes.remove(sandbox_id);
        s.sandbox_userns.remove(sandbox_id);
        Ok(())
    }

    async fn pod_sandbox_status(&self, sandbox_id: &str) -> Result<SandboxStatus, RuntimeError> {
        self.state()
            .sandboxes
            .get(sandbox_id)
            .map(|e| e.status.clone())
            .ok_or_else(|| RuntimeError::NotFound(format!("sandbox {sandbox_id}")))
    }

    async fn list_pod_sandboxes(
        &self,
        filter: &SandboxFilter,
    ) -> Result<Vec<SandboxEntry>, RuntimeError> {
        Ok(self
            .state()
            .sandboxes
            .values()
            .filter(|e| filter.id.is_empty() || e.status.id == filter.id)
            .filter(|e| filter.state.is_none_or(|st| e.status.state == st))
            .filter(|e| labels_match(&filter.labels, &e.labels))
            .cloned()
            .collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        _sandbox: &SandboxConfig,
    ) -> Result<String, RuntimeError> {
        self.record(format!("CreateContainer {}", config.name));
        let mut s = self.state();
        match s.sandboxes.get(sandbox_id) {
            None => return Err(RuntimeError::NotFound(format!("sandbox {sandbox_id}"))),
            Some(sb) if sb.status.state != SandboxState::Ready => {
                return Err(RuntimeError::Failed {
                    call: "CreateContainer".into(),
                    source: cause(format!("sandbox {sandbox_id} is not ready")),
                })
            }
            Some(_) => {}
        }
        let id = s.id("ctr");
        let created = s.tick(self.clock.as_deref());
        let mut status = ContainerStatus::new(&id, &config.name, ContainerState::Created);
        status.attempt = config.attempt;
        status.image = config.image.clone();
        status.created_at_nanos = created;
        status.hash = config
            .annotations
            .get(labels::CONTAINER_HASH_ANNOTATION)
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .unwrap_or(0);
        status.backoff_step = config
            .annotations
            .get(labels::CONTAINER_BACKOFF_STEP_ANNOTATION)
            .and_then(|n| n.parse().ok());
        status.kill_spec = crate::domain::kuberuntime::runtime::KillSpec::from_annotations(|k| {
            config.annotations.get(k).map(String::as_str)
        });
        if !self.no_journal {
            let paths = config.mounts.iter().map(|m| m.host_path.clone()).collect();
            s.mounts.insert(id.clone(), paths);
        }
        s.containers.insert(
            id.clone(),
            ContainerEntry {
                status,
                sandbox_id: sandbox_id.to_string(),
                labels: config.labels.clone(),
            },
        );
        Ok(id)
    }

    async fn start_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        self.record(format!("StartContainer {container_id}"));
        let mut s = self.state();
        let now = s.tick(self.clock.as_deref());
        let c = s
            .containers
            .get_mut(container_id)
            .ok_or_else(|| RuntimeError::NotFound(format!("container {container_id}")))?;
        if c.status.state != ContainerState::Created {
            return Err(RuntimeError::Failed {
                call: "StartContainer".into(),
                source: cause(format!("container {container_id} is not in state Created")),
            });
        }
        c.status.state = ContainerState::Running;
        c.status.started_at_nanos = now;
        let name = c.status.name.clone();
        s.emit(container_id, ContainerEventKind::Started);
        if let Some(&exit_code) = s.exit_at_start.get(&name) {
            drop(s);
            self.exit_container(container_id, exit_code);
        }
        Ok(())
    }

    async fn stop_container(
        &self,
        container_id: &str,
        timeout_secs: i64,
    ) -> Result<(), RuntimeError> {
        self.record(format!("StopContainer {container_id} {timeout_secs}"));
        let mut s = self.state();
        let now = s.tick(self.clock.as_deref());
        if let Some(c) = s.containers.get_mut(container_id) {
            if c.status.state == ContainerState::Running {
                c.status.state = ContainerState::Exited;
                c.status.exit_code = 143;
                c.status.reason = "Error".into();
                c.status.finished_at_nanos = now;
            } else if c.status.state == ContainerState::Created {
                c.status.state = ContainerState::Exited;
            }
        }
        Ok(())
    }

    async fn remove_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        self.record(format!("RemoveContainer {container_id}"));
        self.state().containers.remove(container_id);
        Ok(())
    }

    async fn update_container_cpuset(
        &self,
        container_id: &str,
        cpuset_cpus: &str,
    ) -> Result<(), RuntimeError> {
        if !self.state().containers.contains_key(container_id) {
            return Err(RuntimeError::NotFound(format!("container {container_id}")));
        }
        self.record(format!(
            "UpdateContainerResources {container_id} {cpuset_cpus}"
        ));
        Ok(())
    }

    async fn reopen_container_log(&self, container_id: &str) -> Result<(), RuntimeError> {
        let (running, failure) = {
            let s = self.state();
            let running = s
                .containers
                .get(container_id)
                .map(|c| c.status.state == ContainerState::Running);
            (running, s.log_reopen_failure.clone())
        };
        match running {
            None => return Err(RuntimeError::NotFound(format!("container {container_id}"))),
            Some(false) => {
                return Err(RuntimeError::Failed {
                    call: "ReopenContainerLog".into(),
                    source: crate::ports::runtime::cause("container is not running"),
                })
            }
            Some(true) => {}
        }
        if let Some(reason) = failure {
            return Err(RuntimeError::Failed {
                call: "ReopenContainerLog".into(),
                source: crate::ports::runtime::cause(reason),
            });
        }
        self.record(format!("ReopenContainerLog {container_id}"));
        Ok(())
    }

    async fn container_status(&self, container_id: &str) -> Result<ContainerStatus, RuntimeError> {
        self.state()
            .containers
            .get(container_id)
            .map(|c| c.status.clone())
            .ok_or_else(|| RuntimeError::NotFound(format!("container {container_id}")))
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        _timeout: std::time::Duration,
    ) -> Result<crate::domain::kuberuntime::runtime::ExecResult, RuntimeError> {
        let command = cmd.join(" ");
        self.record(format!("ExecSync {container_id} {command}"));
        let s = self.state();
        match s.containers.get(container_id) {
            Some(c) if c.status.state == ContainerState::Running => {}
            _ => {
                return Err(RuntimeError::NotFound(format!(
                    "container {container_id} is not running"
                )))
            }
        }
        Ok(crate::domain::kuberuntime::runtime::ExecResult {
            exit_code: s.exec_exit_codes.get(&command).copied().unwrap_or(0),
            ..Default::default()
        })
    }

    async fn list_containers(
        &self,
        filter: &ContainerFilter,
    ) -> Result<Vec<ContainerEntry>, RuntimeError> {
        let mut s = self.state();
        // A count per pod ever read is the tests' record, like the journal: the simulated
        // node keeps neither (the 30-minute soak saw 0.2 KiB a pod churned).
        if let Some(uid) = filter
            .labels
            .get(labels::POD_UID_LABEL)
            .filter(|_| !self.no_journal)
        {
            *s.pod_reads.entry(uid.clone()).or_default() += 1;
        }
        Ok(s.containers
            .values()
            .filter(|c| filter.id.is_empty() || c.status.id == filter.id)
            .filter(|c| filter.sandbox_id.is_empty() || c.sandbox_id == filter.sandbox_id)
            .filter(|c| filter.state.is_none_or(|st| c.status.state == st))
            .filter(|c| labels_match(&filter.labels, &c.labels))
            .cloned()
            .collect())
    }

    async fn cgroup_driver(&self) -> Result<Option<CgroupDriver>, RuntimeError> {
        Ok(Some(CgroupDriver::Cgroupfs))
    }

    async fn runtime_handlers(
        &self,
    ) -> Result<Vec<crate::domain::kuberuntime::userns::RuntimeHandler>, RuntimeError> {
        Ok(self.state().runtime_handlers.clone())
    }

    async fn container_events(&self) -> Result<Box<dyn ContainerEventStream>, RuntimeError> {
        let mut s = self.state();
        let Some(subscribers) = s.event_subscribers.as_mut() else {
            return Err(RuntimeError::Unimplemented("GetContainerEvents".into()));
        };
        let (tx, rx) = mpsc::unbounded_channel();
        subscribers.push(tx);
        Ok(Box::new(FakeEventStream(rx)))
    }
}

#[async_trait]
impl ImageService for FakeRuntime {
    async fn image_status(&self, image: &str) -> Result<Option<ImageInfo>, RuntimeError> {
        Ok(self.state().images.get(image).cloned())
    }

    /// Every pull succeeds (the simulated node has no registry) unless told otherwise.
    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&crate::domain::kuberuntime::credentials::AuthConfig>,
    ) -> Result<String, RuntimeError> {
        match auth {
            None => self.record(format!("PullImage {image}")),
            Some(a) => self.record(format!("PullImage {image} as {}", a.username)),
        }
        let mut s = self.state();
        s.pull_auths.push((image.to_owned(), auth.cloned()));
        if let Some(user) = &s.pull_only_as {
            if auth.map(|a| &a.username) != Some(user) {
                return Err(RuntimeError::Failed {
                    call: "PullImage".into(),
                    source: cause("unauthorized (fake)".to_string()),
                });
            }
        }
        if let Some(reason) = &s.pull_failure {
            return Err(RuntimeError::Failed {
                call: "PullImage".into(),
                source: cause(reason.clone()),
            });
        }
        let id = format!("sha256:{:064x}", s.images.len() + 1);
        let info = s
            .images
            .entry(image.to_string())
            .or_insert_with(|| ImageInfo {
                id,
                repo_tags: vec![image.to_string()],
                repo_digests: Vec::new(),
                size_bytes: 0,
                ..ImageInfo::default()
            });
        Ok(info.id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sandbox_and_container_lifecycle() -> Result<(), RuntimeError> {
        let rt = FakeRuntime::new();
        let sb_cfg = SandboxConfig {
            name: "p".into(),
            uid: "u1".into(),
            namespace: "default".into(),
            ..Default::default()
        };
        assert_eq!(rt.image_status("busybox").await?, None);
        rt.pull_image("busybox", None).await?;
        assert!(rt.image_status("busybox").await?.is_some());
        let sb = rt.run_pod_sandbox(&sb_cfg).await?;
        assert_eq!(rt.pod_sandbox_status(&sb).await?.state, SandboxState::Ready);
        let cfg = ContainerConfig {
            name: "main".into(),
            image: "busybox".into(),
            ..Default::default()
        };
        let c = rt.create_container(&sb, &cfg, &sb_cfg).await?;
        rt.start_container(&c).await?;
        assert_eq!(
            rt.container_status(&c).await?.state,
            ContainerState::Running
        );
        let listed = rt
            .list_containers(&ContainerFilter {
                sandbox_id: sb.clone(),
                ..Default::default()
            })
            .await?;
        assert_eq!(listed.len(), 1);
        rt.stop_container(&c, 2).await?;
        assert_eq!(rt.container_status(&c).await?.state, ContainerState::Exited);
        rt.remove_container(&c).await?;
        assert!(matches!(
            rt.container_status(&c).await,
            Err(RuntimeError::NotFound(_))
        ));
        rt.stop_pod_sandbox(&sb).await?;
        rt.remove_pod_sandbox(&sb).await?;
        assert!(matches!(
            rt.pod_sandbox_status(&sb).await,
            Err(RuntimeError::NotFound(_))
        ));
        Ok(())
    }
}
