//! The kubelet's own cgroups, behind one port with two drivers: `cgroupfs` writes the
//! cgroup filesystem, `systemd` asks systemd for slices over D-Bus.

use std::path::PathBuf;

use async_trait::async_trait;

use crate::domain::cgroup::{CgroupDriver, CgroupName, ResourceConfig};

/// A cause kept as it came (a D-Bus error, a job result).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A cgroup file or directory operation failed.
    #[error("{op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Writing a value to a cgroup file failed.
    #[error("write {value:?} to {path}")]
    Write {
        path: PathBuf,
        value: String,
        #[source]
        source: std::io::Error,
    },
    /// A cgroup file or mount holds what it should not.
    #[error("{op} {path}: {detail}")]
    Unexpected {
        op: &'static str,
        path: PathBuf,
        detail: String,
    },
    /// The cgroup does not exist.
    #[error("cgroup {0} does not exist")]
    NotFound(String),
    /// A controller the kubelet needs is missing or cannot be enabled.
    #[error("cgroup controller {controller} is not available: {reason}")]
    MissingController { controller: String, reason: String },
    /// The systemd manager refused a request or could not be reached.
    #[error("systemd {call} {unit}")]
    Systemd {
        call: &'static str,
        unit: String,
        #[source]
        source: Cause,
    },
    #[error("invalid cgroup name: {0}")]
    InvalidName(String),
    /// Signalling a process left in the cgroup failed.
    #[error("kill process {pid} in cgroup {cgroup}")]
    Kill {
        pid: u32,
        cgroup: String,
        #[source]
        source: std::io::Error,
    },
}

/// Creates, updates and removes the kubelet's cgroups. Names are driver-neutral;
/// each driver spells them its own way (see [`CgroupManager::driver_name`]).
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait CgroupManager: Send + Sync {
    fn driver(&self) -> CgroupDriver;

    /// The name the runtime must be given (a sandbox's `cgroup_parent`): a cgroupfs
    /// path, or a systemd slice unit name.
    fn driver_name(&self, name: &CgroupName) -> String;

    /// True when the cgroups are only kept in memory (the simulated node): nothing on
    /// the machine changes, and the log must not say otherwise.
    fn is_simulated(&self) -> bool {
        false
    }

    /// Creates the cgroup (and missing parents) with `resources`; an existing one is updated.
    async fn create(
        &self,
        name: &CgroupName,
        resources: &ResourceConfig,
    ) -> Result<(), CgroupError>;

    /// Applies `resources` to an existing cgroup.
    async fn update(
        &self,
        name: &CgroupName,
        resources: &ResourceConfig,
    ) -> Result<(), CgroupError>;

    /// Removes the cgroup; an absent one is not an error.
    async fn destroy(&self, name: &CgroupName) -> Result<(), CgroupError>;

    async fn exists(&self, name: &CgroupName) -> Result<bool, CgroupError>;

    /// The processes in the cgroup and below it.
    async fn pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError>;

    /// Sends SIGKILL to every process in the cgroup and below it, as upstream does before
    /// it removes a pod's cgroup (a process left there keeps the cgroup, and the pod,
    /// from going); returns how many it signalled. One gone meanwhile is no error.
    async fn kill_processes(&self, name: &CgroupName) -> Result<usize, CgroupError>;

    /// The names of the cgroup's direct children (e.g. pod cgroups under a QoS cgroup).
    async fn children(&self, name: &CgroupName) -> Result<Vec<CgroupName>, CgroupError>;
}
