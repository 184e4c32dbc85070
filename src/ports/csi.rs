//! CSI node plugins as the kubelet meets them: the registration sockets plugins put in
//! `<root-dir>/plugins_registry/` (the plugin registration v1 API: `GetInfo`,
//! `NotifyRegistrationStatus`), and each registered driver's node service
//! (`NodeGetInfo`).

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use thiserror::Error;

use crate::domain::csi::volume::CsiPublish;
use crate::domain::csi::{DriverNodeInfo, PluginInfo};

#[derive(Debug, Error)]
pub enum CsiError {
    /// A gRPC call failed: its status code and message, or the connection's error.
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

#[async_trait]
pub trait CsiPlugins: Send + Sync {
    /// The sockets in the registration folder `dir` (made, mode 0750, when missing),
    /// sorted; other files are left alone.
    ///
    /// # Errors
    /// [`CsiError::Io`].
    fn registration_sockets(&self, dir: &Path) -> Result<Vec<RegistrationSocket>, CsiError>;

    /// `Registration.GetInfo` on a registration socket.
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn get_info(&self, socket: &Path) -> Result<PluginInfo, CsiError>;

    /// `Registration.NotifyRegistrationStatus`: the outcome, `error` empty when
    /// registered.
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn notify_registration(
        &self,
        socket: &Path,
        registered: bool,
        error: &str,
    ) -> Result<(), CsiError>;

    /// `Node.NodeGetInfo` on a driver's socket.
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn node_get_info(&self, endpoint: &Path) -> Result<DriverNodeInfo, CsiError>;

    /// What the driver's node service offers before a publish (`NodeGetCapabilities`:
    /// STAGE_UNSTAGE_VOLUME, VOLUME_MOUNT_GROUP).
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn node_capabilities(
        &self,
        endpoint: &Path,
    ) -> Result<crate::domain::csi::NodeCapabilities, CsiError>;

    /// `Node.NodeStageVolume` of a filesystem volume at `staging_path`.
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn node_stage(
        &self,
        endpoint: &Path,
        volume: &CsiPublish,
        staging_path: &Path,
    ) -> Result<(), CsiError>;

    /// `Node.NodeUnstageVolume`.
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn node_unstage(
        &self,
        endpoint: &Path,
        volume_handle: &str,
        staging_path: &Path,
    ) -> Result<(), CsiError>;

    /// `Node.NodePublishVolume` of a filesystem volume at its target path (from
    /// `staging_path` when it was staged).
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn node_publish(
        &self,
        endpoint: &Path,
        volume: &CsiPublish,
        staging_path: Option<&Path>,
    ) -> Result<(), CsiError>;

    /// `Node.NodeUnpublishVolume`.
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn node_unpublish(
        &self,
        endpoint: &Path,
        volume_handle: &str,
        target_path: &Path,
    ) -> Result<(), CsiError>;

    /// `Node.NodeExpandVolume` of a published filesystem volume to `required_bytes`;
    /// `Ok(false)` when the driver does not offer it (no EXPAND_VOLUME capability).
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn node_expand(
        &self,
        endpoint: &Path,
        volume: &CsiPublish,
        required_bytes: i64,
    ) -> Result<bool, CsiError>;

    /// `Node.NodeGetVolumeStats` of a volume published at `target_path`; `Ok(None)`
    /// when the driver does not offer it (no GET_VOLUME_STATS capability).
    ///
    /// # Errors
    /// [`CsiError::Call`].
    async fn node_volume_stats(
        &self,
        endpoint: &Path,
        volume_handle: &str,
        target_path: &Path,
    ) -> Result<Option<CsiVolumeStats>, CsiError>;
}

/// A socket in the registration folder.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RegistrationSocket {
    pub path: PathBuf,
    /// What tells a socket made again at the same path (a restarted plugin, faster than
    /// one listing) from the one registered: its inode and change time.
    pub identity: (u64, i64),
}

/// What a driver measured of a published volume: what it uses, and the space it has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiVolumeStats {
    pub usage: crate::domain::eviction::signals::FsUsage,
    pub fs: crate::domain::eviction::signals::FsStats,
    /// The driver's `volume_condition` when it says the volume is abnormal.
    pub abnormal: Option<String>,
}
