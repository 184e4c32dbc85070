//! The container runtime's view of one pod, in domain terms.
//!
//! The CRI adapter maps sandbox and container listings into these types so
//! that sync decisions (`actions`, `plan`) never see protobuf or transport details.
//! Times are plain nanoseconds since the Unix epoch as the runtime reported
//! them; nothing here reads a clock.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
        }
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
