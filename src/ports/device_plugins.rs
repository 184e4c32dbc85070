//! Device plugins as the kubelet meets them (upstream's device plugin API v1beta1 and
//! the pod resources API v1, gRPC on unix sockets): the `Registration` service the
//! kubelet serves on `<root-dir>/device-plugins/kubelet.sock`, each plugin's
//! `DevicePlugin` service the kubelet calls, the pod resources service it serves on
//! `<root-dir>/pod-resources/kubelet.sock`, and the folder with its checkpoint file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use thiserror::Error;

pub use crate::domain::devices::pod_resources::{
    ContainerResources, GetPodResourcesError, PodResources, ResourceDevices,
};
use crate::domain::devices::{ContainerAllocateResponse, Device, PluginOptions};

#[derive(Debug, Error)]
pub enum DevicePluginError {
    /// A gRPC call failed: upstream's wording of the status, or the connection's error.
    #[error("{call} on {socket}: {message}")]
    Call {
        socket: String,
        call: &'static str,
        message: String,
    },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A plugin's `Register` call, as the kubelet's registration server receives it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegisterRequest {
    pub version: String,
    /// The plugin's socket name, relative to the device plugins folder.
    pub endpoint: String,
    pub resource_name: String,
    pub options: PluginOptions,
}

/// Who answers `Register` (the app's device manager). `Err` is the text the plugin
/// receives as the call's error.
#[async_trait]
pub trait RegistrationHandler: Send + Sync {
    async fn register(&self, request: RegisterRequest) -> Result<(), String>;
}

/// What the pod resources server answers from (the app's device manager and pods).
pub trait PodResourcesProvider: Send + Sync {
    /// `List`: every active pod with its containers.
    fn list(&self) -> Vec<PodResources>;
    /// `Get`: the active pod `namespace`/`name` with its containers.
    ///
    /// # Errors
    /// [`GetPodResourcesError`]: the `KubeletPodResourcesGet` gate is off, or no such pod.
    fn get(&self, namespace: &str, name: &str) -> Result<PodResources, GetPodResourcesError>;
    /// `GetAllocatableResources`: every device known, and the CPUs pods may have.
    fn allocatable(&self) -> (Vec<ResourceDevices>, Vec<i64>);
}

/// A connected plugin (`DevicePlugin` service).
#[async_trait]
pub trait DevicePluginClient: Send + Sync {
    /// `GetDevicePluginOptions`.
    ///
    /// # Errors
    /// [`DevicePluginError::Call`].
    async fn options(&self) -> Result<PluginOptions, DevicePluginError>;

    /// `ListAndWatch`: the stream of device lists.
    ///
    /// # Errors
    /// [`DevicePluginError::Call`].
    async fn list_and_watch(&self) -> Result<Box<dyn DeviceWatch>, DevicePluginError>;

    /// `GetPreferredAllocation` for one container: the device ids the plugin prefers.
    ///
    /// # Errors
    /// [`DevicePluginError::Call`].
    async fn preferred_allocation(
        &self,
        available: Vec<String>,
        must_include: Vec<String>,
        size: usize,
    ) -> Result<Vec<String>, DevicePluginError>;

    /// `Allocate` for one container: the plugin's answer, and its bytes as the
    /// checkpoint keeps them.
    ///
    /// # Errors
    /// [`DevicePluginError::Call`]; an answer without containers is an empty response.
    async fn allocate(
        &self,
        device_ids: Vec<String>,
    ) -> Result<Option<(ContainerAllocateResponse, Vec<u8>)>, DevicePluginError>;

    /// `PreStartContainer`.
    ///
    /// # Errors
    /// [`DevicePluginError::Call`].
    async fn pre_start_container(&self, device_ids: Vec<String>) -> Result<(), DevicePluginError>;
}

/// A `ListAndWatch` stream.
#[async_trait]
pub trait DeviceWatch: Send {
    /// The next device list; `Ok(None)` when the stream ended.
    ///
    /// # Errors
    /// [`DevicePluginError::Call`]: the stream broke.
    async fn next(&mut self) -> Result<Option<Vec<Device>>, DevicePluginError>;
}

/// The device plugins of this host.
#[async_trait]
pub trait DevicePlugins: Send + Sync {
    /// The plugins' folder made (0750) and emptied of everything but folders and the
    /// checkpoint (upstream's `CleanupPluginDirectory`: stale sockets).
    ///
    /// # Errors
    /// [`DevicePluginError::Io`].
    fn prepare_dir(&self, dir: &Path, keep: &Path) -> Result<(), DevicePluginError>;

    /// A resource manager's checkpoint file (the device manager's, the CPU manager's
    /// `cpu_manager_state`, as upstream's shared `checkpointmanager`); `Ok(None)` when
    /// there is none.
    ///
    /// # Errors
    /// [`DevicePluginError::Io`].
    fn read_checkpoint(&self, path: &Path) -> Result<Option<String>, DevicePluginError>;

    /// The checkpoint written whole (a temporary file renamed over it).
    ///
    /// # Errors
    /// [`DevicePluginError::Io`].
    fn write_checkpoint(&self, path: &Path, contents: &str) -> Result<(), DevicePluginError>;

    /// Serves `Registration` on `socket` (a stale file there removed first) until the
    /// process ends; each call goes to `handler`.
    ///
    /// # Errors
    /// [`DevicePluginError::Io`]: the socket cannot be listened on.
    async fn serve_registration(
        &self,
        socket: &Path,
        handler: Arc<dyn RegistrationHandler>,
    ) -> Result<(), DevicePluginError>;

    /// Serves the pod resources API v1 on `socket` (its folder made, a stale file
    /// removed) until the process ends.
    ///
    /// # Errors
    /// [`DevicePluginError::Io`].
    async fn serve_pod_resources(
        &self,
        socket: &Path,
        provider: Arc<dyn PodResourcesProvider>,
    ) -> Result<(), DevicePluginError>;

    /// A client of the plugin at `endpoint`, connected (upstream dials with a 10 s
    /// timeout, blocking until the socket answers).
    ///
    /// # Errors
    /// [`DevicePluginError::Call`]: upstream's "failed to dial device plugin".
    async fn connect(
        &self,
        endpoint: &Path,
    ) -> Result<Arc<dyn DevicePluginClient>, DevicePluginError>;

    /// A stored `ContainerAllocateResponse` (the checkpoint's `AllocResp`) read back.
    fn decode_response(&self, bytes: &[u8]) -> Option<ContainerAllocateResponse>;
}
