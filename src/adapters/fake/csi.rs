//! In-memory CSI plugins for the plugin watcher's tests: the registration sockets present,
//! each one's `GetInfo` answer, each driver's `NodeGetInfo` answer, and the statuses the
//! plugins were told. Never proof the socket adapter works.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::domain::csi::volume::CsiPublish;
use crate::domain::csi::{DriverNodeInfo, PluginInfo};
use crate::ports::csi::{CsiError, CsiPlugins};

#[derive(Debug, Default)]
struct State {
    /// Each socket with how many times one was made at its path.
    sockets: BTreeMap<PathBuf, (PluginInfo, u64)>,
    made: u64,
    drivers: BTreeMap<PathBuf, DriverNodeInfo>,
    /// `(socket, registered, error)`, in order.
    notified: Vec<(PathBuf, bool, String)>,
    get_infos: usize,
    /// Published volumes by target path.
    published: BTreeMap<PathBuf, CsiPublish>,
    /// `(volume handle, target path)` unpublished, in order.
    unpublished: Vec<(String, PathBuf)>,
    /// Whether the drivers stage volumes; staged volumes by staging path.
    stages: bool,
    /// What `NodeGetVolumeStats` answers for a target path (none: not offered).
    volume_stats: BTreeMap<PathBuf, crate::ports::csi::CsiVolumeStats>,
    staged: BTreeMap<PathBuf, String>,
    /// Whether the drivers apply the pod's fsGroup themselves (VOLUME_MOUNT_GROUP).
    mounts_group: bool,
    /// Whether the drivers expand volumes; `(target path, bytes)` expanded, in order.
    expands: bool,
    expanded: Vec<(PathBuf, i64)>,
}

/// Clone it to share.
#[derive(Debug, Clone, Default)]
pub struct FakeCsiPlugins {
    state: Arc<Mutex<State>>,
}

impl FakeCsiPlugins {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A registration socket made at `socket` (anew if one is there) answering `info`.
    pub fn put_socket(&self, socket: impl Into<PathBuf>, info: PluginInfo) {
        let mut state = self.lock();
        state.made += 1;
        let made = state.made;
        state.sockets.insert(socket.into(), (info, made));
    }

    pub fn remove_socket(&self, socket: impl AsRef<Path>) {
        self.lock().sockets.remove(socket.as_ref());
    }

    /// A driver serving `NodeGetInfo` at `endpoint`.
    pub fn put_driver(&self, endpoint: impl Into<PathBuf>, info: DriverNodeInfo) {
        self.lock().drivers.insert(endpoint.into(), info);
    }

    /// The driver measures the volume published at `target` as `stats`.
    pub fn put_volume_stats(
        &self,
        target: impl Into<PathBuf>,
        stats: crate::ports::csi::CsiVolumeStats,
    ) {
        self.lock().volume_stats.insert(target.into(), stats);
    }

    pub fn notified(&self) -> Vec<(PathBuf, bool, String)> {
        self.lock().notified.clone()
    }

    pub fn get_infos(&self) -> usize {
        self.lock().get_infos
    }

    pub fn published(&self) -> BTreeMap<PathBuf, CsiPublish> {
        self.lock().published.clone()
    }

    pub fn unpublished(&self) -> Vec<(String, PathBuf)> {
        self.lock().unpublished.clone()
    }

    /// The drivers have the STAGE_UNSTAGE_VOLUME capability.
    pub fn set_stages(&self, stages: bool) {
        self.lock().stages = stages;
    }

    /// The drivers have the VOLUME_MOUNT_GROUP capability.
    pub fn set_mounts_group(&self, mounts_group: bool) {
        self.lock().mounts_group = mounts_group;
    }

    /// The drivers have the EXPAND_VOLUME capability.
    pub fn set_expands(&self, expands: bool) {
        self.lock().expands = expands;
    }

    pub fn expanded(&self) -> Vec<(PathBuf, i64)> {
        self.lock().expanded.clone()
    }

    pub fn staged(&self) -> BTreeMap<PathBuf, String> {
        self.lock().staged.clone()
    }
}

fn unreachable(socket: &Path, call: &'static str) -> CsiError {
    CsiError::Call {
        socket: socket.display().to_string(),
        call,
        message: "connection refused (fake)".into(),
    }
}

#[async_trait]
impl CsiPlugins for FakeCsiPlugins {
    fn registration_sockets(
        &self,
        dir: &Path,
    ) -> Result<Vec<crate::ports::csi::RegistrationSocket>, CsiError> {
        Ok(self
            .lock()
            .sockets
            .iter()
            .filter(|(s, _)| s.parent() == Some(dir))
            .map(|(path, (_, made))| crate::ports::csi::RegistrationSocket {
                path: path.clone(),
                identity: (*made, 0),
            })
            .collect())
    }

    async fn get_info(&self, socket: &Path) -> Result<PluginInfo, CsiError> {
        let mut state = self.lock();
        state.get_infos += 1;
        state
            .sockets
            .get(socket)
            .map(|(info, _)| info.clone())
            .ok_or_else(|| unreachable(socket, "GetInfo"))
    }

    async fn notify_registration(
        &self,
        socket: &Path,
        registered: bool,
        error: &str,
    ) -> Result<(), CsiError> {
        self.lock()
            .notified
            .push((socket.to_path_buf(), registered, error.to_owned()));
        Ok(())
    }

    async fn node_get_info(&self, endpoint: &Path) -> Result<DriverNodeInfo, CsiError> {
        self.lock()
            .drivers
            .get(endpoint)
            .cloned()
            .ok_or_else(|| unreachable(endpoint, "NodeGetInfo"))
    }

    async fn node_capabilities(
        &self,
        endpoint: &Path,
    ) -> Result<crate::domain::csi::NodeCapabilities, CsiError> {
        let state = self.lock();
        if !state.drivers.contains_key(endpoint) {
            return Err(unreachable(endpoint, "NodeGetCapabilities"));
        }
        Ok(crate::domain::csi::NodeCapabilities {
            stage_unstage: state.stages,
            volume_mount_group: state.mounts_group,
        })
    }

    async fn node_stage(
        &self,
        endpoint: &Path,
        volume: &CsiPublish,
        staging_path: &Path,
    ) -> Result<(), CsiError> {
        let mut state = self.lock();
        if !state.drivers.contains_key(endpoint) {
            return Err(unreachable(endpoint, "NodeStageVolume"));
        }
        state
            .staged
            .insert(staging_path.to_path_buf(), volume.volume_handle.clone());
        Ok(())
    }

    async fn node_unstage(
        &self,
        endpoint: &Path,
        _volume_handle: &str,
        staging_path: &Path,
    ) -> Result<(), CsiError> {
        let mut state = self.lock();
        if !state.drivers.contains_key(endpoint) {
            return Err(unreachable(endpoint, "NodeUnstageVolume"));
        }
        state.staged.remove(staging_path);
        Ok(())
    }

    async fn node_publish(
        &self,
        endpoint: &Path,
        volume: &CsiPublish,
        _staging_path: Option<&Path>,
    ) -> Result<(), CsiError> {
        let mut state = self.lock();
        if !state.drivers.contains_key(endpoint) {
            return Err(unreachable(endpoint, "NodePublishVolume"));
        }
        state
            .published
            .insert(volume.target_path.clone(), volume.clone());
        Ok(())
    }

    async fn node_expand(
        &self,
        endpoint: &Path,
        volume: &CsiPublish,
        required_bytes: i64,
    ) -> Result<bool, CsiError> {
        let mut state = self.lock();
        if !state.drivers.contains_key(endpoint) {
            return Err(unreachable(endpoint, "NodeExpandVolume"));
        }
        if !state.expands {
            return Ok(false);
        }
        state
            .expanded
            .push((volume.target_path.clone(), required_bytes));
        Ok(true)
    }

    async fn node_volume_stats(
        &self,
        endpoint: &Path,
        _volume_handle: &str,
        target_path: &Path,
    ) -> Result<Option<crate::ports::csi::CsiVolumeStats>, CsiError> {
        let state = self.lock();
        if !state.drivers.contains_key(endpoint) {
            return Err(unreachable(endpoint, "NodeGetVolumeStats"));
        }
        Ok(state.volume_stats.get(target_path).cloned())
    }

    async fn node_unpublish(
        &self,
        endpoint: &Path,
        volume_handle: &str,
        target_path: &Path,
    ) -> Result<(), CsiError> {
        let mut state = self.lock();
        if !state.drivers.contains_key(endpoint) {
            return Err(unreachable(endpoint, "NodeUnpublishVolume"));
        }
        state.published.remove(target_path);
        state
            .unpublished
            .push((volume_handle.to_owned(), target_path.to_path_buf()));
        Ok(())
    }
}
