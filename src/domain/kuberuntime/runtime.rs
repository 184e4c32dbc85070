//! The container runtime's view of one pod, in domain terms.
//!
//! The CRI adapter maps sandbox and container listings into these types so
//! that sync decisions (`actions`, `plan`) never see protobuf or transport details.
//! Times are plain nanoseconds since the Unix epoch as the runtime reported
//! them; nothing here reads a clock.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The runtime name rkubelet's simulated runtime (`fake://`) reports: pods on it say
/// they are simulated.
pub const SIMULATED_RUNTIME_NAME: &str = "rkubelet-fake";

/// Whether a pod sandbox can host containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SandboxState {
    Ready,
    NotReady,
}

/// One pod sandbox (the pause container / VM holding the pod's namespaces).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxStatus {
    pub id: String,
    /// How many sandboxes were created for this pod before this one.
    pub attempt: u32,
    pub state: SandboxState,
    pub created_at_nanos: i64,
    /// The sandbox shares the node's network namespace (CRI namespace mode NODE).
    pub host_network: bool,
    /// Primary pod IP; empty when the runtime reported none.
    pub ip: String,
}

/// Lifecycle state of one container instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    Unknown,
}

/// One container instance (one attempt) as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerStatus {
    pub id: String,
    pub name: String,
    /// Restart count of this instance (0 for the first run).
    pub attempt: u32,
    pub state: ContainerState,
    pub image: String,
    /// The image's digest reference (`imageID` in the API).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_ref: String,
    /// `container_hash` of the spec the instance was created from; a
    /// mismatch with the current spec means the definition changed.
    pub hash: u64,
    pub exit_code: i32,
    pub reason: String,
    pub message: String,
    pub created_at_nanos: i64,
    pub started_at_nanos: i64,
    /// When the instance exited; what its crash-loop back-off counts from.
    pub finished_at_nanos: i64,
    /// The crash-loop back-off step the kubelet recorded on the instance (an
    /// annotation); `None` when it carries none (see `backoff`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_step: Option<u32>,
    /// What the kubelet wrote on the instance to stop it without the pod's spec.
    #[serde(default, skip_serializing_if = "KillSpec::is_empty")]
    pub kill_spec: KillSpec,
}

/// What the kubelet writes on a container (annotations) to stop it when the pod's spec is
/// gone, as upstream's `restoreSpecsFromContainerLabels` reads it back: the pod's grace
/// period, the container's ports (for a hook's named port) and its `preStop` handler.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KillSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_secs: Option<i64>,
    /// `io.kubernetes.container.ports`, JSON.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ports_json: String,
    /// `io.kubernetes.container.preStopHandler`, JSON.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pre_stop_json: String,
}

impl KillSpec {
    pub fn is_empty(&self) -> bool {
        *self == KillSpec::default()
    }

    /// From a container's annotations.
    pub fn from_annotations<'a>(annotation: impl Fn(&str) -> Option<&'a str>) -> KillSpec {
        use super::labels::{
            CONTAINER_PORTS_ANNOTATION, CONTAINER_PRE_STOP_HANDLER_ANNOTATION,
            POD_TERMINATION_GRACE_PERIOD_ANNOTATION,
        };
        KillSpec {
            grace_period_secs: annotation(POD_TERMINATION_GRACE_PERIOD_ANNOTATION)
                .and_then(|g| g.parse().ok()),
            ports_json: annotation(CONTAINER_PORTS_ANNOTATION)
                .unwrap_or_default()
                .to_owned(),
            pre_stop_json: annotation(CONTAINER_PRE_STOP_HANDLER_ANNOTATION)
                .unwrap_or_default()
                .to_owned(),
        }
    }
}

impl ContainerStatus {
    /// A blank status for `name` in `state`; handy for adapters and tests
    /// that fill in only what they know.
    pub fn new(id: &str, name: &str, state: ContainerState) -> Self {
        Self {
            id: id.to_owned(),
            name: name.to_owned(),
            attempt: 0,
            state,
            image: String::new(),
            image_ref: String::new(),
            hash: 0,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            created_at_nanos: 0,
            started_at_nanos: 0,
            finished_at_nanos: 0,
            backoff_step: None,
            kill_spec: KillSpec::default(),
        }
    }
}

impl PodRuntimeStatus {
    /// Every sandbox ready and every container running: nothing dead for a sync to
    /// remove or restart.
    pub fn all_live(&self) -> bool {
        self.sandboxes
            .iter()
            .all(|s| s.state == SandboxState::Ready)
            && self
                .containers
                .iter()
                .all(|c| c.state == ContainerState::Running)
    }
    /// The pod as far as its containers' kill specs tell it, to stop it when its spec is
    /// gone (upstream's `restoreSpecsFromContainerLabels`): name, namespace, uid, the
    /// grace period, and per container its ports and `preStop` handler. What cannot be
    /// read back is left out: the stop then goes on without it.
    pub fn restored_pod(&self) -> crate::domain::pod::Pod {
        use crate::domain::pod::{Container, ContainerPort, Pod};
        use crate::domain::probe::spec::{Lifecycle, LifecycleHandler};
        let mut pod = Pod::default();
        pod.metadata.name.clone_from(&self.name);
        pod.metadata.namespace.clone_from(&self.namespace);
        pod.metadata.uid.clone_from(&self.uid);
        pod.spec.termination_grace_period_seconds = self
            .containers
            .iter()
            .find_map(|c| c.kill_spec.grace_period_secs);
        for status in &self.containers {
            if pod.spec.containers.iter().any(|c| c.name == status.name) {
                continue;
            }
            let spec = &status.kill_spec;
            let pre_stop: Option<LifecycleHandler> = serde_json::from_str(&spec.pre_stop_json).ok();
            pod.spec.containers.push(Container {
                name: status.name.clone(),
                ports: serde_json::from_str::<Vec<ContainerPort>>(&spec.ports_json)
                    .unwrap_or_default(),
                lifecycle: pre_stop.map(|h| Lifecycle {
                    pre_stop: Some(h),
                    ..Lifecycle::default()
                }),
                ..Container::default()
            });
        }
        pod
    }
}

/// Everything the runtime knows about one pod.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PodRuntimeStatus {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    /// Newest first; the first entry is the one the pod should be running in.
    pub sandboxes: Vec<SandboxStatus>,
    /// Every instance still known to the runtime, including older attempts
    /// of the same container and exited init containers.
    pub containers: Vec<ContainerStatus>,
}

impl PodRuntimeStatus {
    /// The most recent instance of the container called `name`.
    ///
    /// "Most recent" is the latest creation time; ties (runtimes that do not
    /// report it) fall back to the higher attempt, then to the later entry.
    pub fn find_container(&self, name: &str) -> Option<&ContainerStatus> {
        self.containers
            .iter()
            .filter(|c| c.name == name)
            .max_by_key(|c| (c.created_at_nanos, c.attempt))
    }

    /// Whether any instance of `name` ever exited, at any attempt. A freshly
    /// re-created container with an exited predecessor is restarting, not new.
    pub fn has_exited_instance(&self, name: &str) -> bool {
        self.containers
            .iter()
            .any(|c| c.name == name && c.state == ContainerState::Exited)
    }
}

/// The runtime's name and versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeVersion {
    pub runtime_name: String,
    pub runtime_version: String,
    pub runtime_api_version: String,
}

/// One sandbox in a listing, with the pod it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxEntry {
    pub status: SandboxStatus,
    pub name: String,
    pub uid: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    /// The runtime handler it was made with (empty: the runtime's default).
    pub runtime_handler: String,
}

/// Which sandboxes to list; empty fields match everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxFilter {
    pub id: String,
    pub state: Option<SandboxState>,
    pub labels: BTreeMap<String, String>,
}

/// One container in a listing, with its sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEntry {
    pub status: ContainerStatus,
    pub sandbox_id: String,
    pub labels: BTreeMap<String, String>,
}

/// Which containers to list; empty fields match everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerFilter {
    pub id: String,
    pub sandbox_id: String,
    pub state: Option<ContainerState>,
    pub labels: BTreeMap<String, String>,
}

/// An image present on the node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageInfo {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size_bytes: u64,
    /// The image's user when it is a number (`USER 1000` or `1000:3000`).
    pub uid: Option<i64>,
    /// The image's user when it is a name (`USER nobody`).
    pub username: String,
}

impl ImageInfo {
    /// Who the image runs as (upstream's `getImageUser`).
    pub fn user(&self) -> ImageUser {
        ImageUser::of(self.uid, &self.username)
    }
}

/// Who an image runs as unless the pod says otherwise: a uid, or a name for the
/// runtime to resolve; an image that names no user runs as root (uid 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageUser {
    pub uid: Option<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
}

impl ImageUser {
    /// From what `ImageStatus` reports: the uid when set, else the name, else root.
    pub fn of(uid: Option<i64>, username: &str) -> ImageUser {
        match (uid, username) {
            (Some(uid), _) => ImageUser {
                uid: Some(uid),
                username: String::new(),
            },
            (None, name) if !name.is_empty() => ImageUser {
                uid: None,
                username: name.to_owned(),
            },
            _ => ImageUser::root(),
        }
    }

    pub fn root() -> ImageUser {
        ImageUser {
            uid: Some(0),
            username: String::new(),
        }
    }
}

/// What a command run in a container (CRI `ExecSync`) gave back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecResult {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

/// What happened to a container, as the runtime streams it (CRI `GetContainerEvents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerEventKind {
    Created,
    Started,
    Stopped,
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEvent {
    pub container_id: String,
    pub kind: ContainerEventKind,
    /// The uid of the pod the container belongs to; empty when the runtime did not say.
    pub pod_uid: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(name: &str, id: &str, created: i64, attempt: u32) -> ContainerStatus {
        ContainerStatus {
            created_at_nanos: created,
            attempt,
            ..ContainerStatus::new(id, name, ContainerState::Exited)
        }
    }

    #[test]
    fn a_pod_is_all_live_with_only_ready_sandboxes_and_running_containers() {
        let ready = SandboxStatus {
            id: "s1".into(),
            attempt: 0,
            state: SandboxState::Ready,
            created_at_nanos: 1,
            host_network: false,
            ip: String::new(),
        };
        let mut status = PodRuntimeStatus {
            sandboxes: vec![ready.clone()],
            containers: vec![ContainerStatus::new("c1", "app", ContainerState::Running)],
            ..PodRuntimeStatus::default()
        };
        assert!(status.all_live());
        status.sandboxes.push(SandboxStatus {
            state: SandboxState::NotReady,
            ..ready
        });
        assert!(!status.all_live(), "an old sandbox left dead");
        status.sandboxes.pop();
        status.containers.push(at("app", "c0", 1, 0));
        assert!(!status.all_live(), "an exited container");
    }

    #[test]
    fn find_container_picks_newest_by_creation_time() {
        let status = PodRuntimeStatus {
            containers: vec![
                at("a", "old", 10, 0),
                at("a", "new", 20, 1),
                at("b", "b", 30, 0),
            ],
            ..Default::default()
        };
        assert_eq!(
            status.find_container("a").map(|c| c.id.as_str()),
            Some("new")
        );
        assert_eq!(status.find_container("b").map(|c| c.id.as_str()), Some("b"));
        assert!(status.find_container("c").is_none());
    }

    #[test]
    fn find_container_breaks_ties_by_attempt() {
        let status = PodRuntimeStatus {
            containers: vec![at("a", "second", 0, 1), at("a", "first", 0, 0)],
            ..Default::default()
        };
        assert_eq!(
            status.find_container("a").map(|c| c.id.as_str()),
            Some("second")
        );
    }

    #[test]
    fn exited_instances_are_found_across_attempts() {
        let mut running = at("a", "now", 20, 1);
        running.state = ContainerState::Running;
        let status = PodRuntimeStatus {
            containers: vec![at("a", "before", 10, 0), running],
            ..Default::default()
        };
        assert!(status.has_exited_instance("a"));
        assert!(!status.has_exited_instance("b"));
    }
}
