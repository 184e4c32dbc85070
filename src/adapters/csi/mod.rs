//! CSI node plugins over their unix sockets: the plugin registration v1 client on the
//! sockets in `plugins_registry`, and the CSI v1 node client on each driver's socket.
//! The generated wire types stay private here.

use std::os::unix::fs::{DirBuilderExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tower::service_fn;

use crate::domain::csi::volume::CsiPublish;
use crate::domain::csi::{DriverNodeInfo, PluginInfo};
use crate::ports::csi::{CsiError, CsiPlugins};

#[allow(clippy::all, clippy::pedantic, clippy::unwrap_used, missing_docs)]
mod registration {
    tonic::include_proto!("pluginregistration");
}

#[allow(clippy::all, clippy::pedantic, clippy::unwrap_used, missing_docs)]
mod csi {
    tonic::include_proto!("csi.v1");
}

/// Upstream's `csiTimeout` for a driver's node calls, and the plugin watcher's for
/// registration calls.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A channel to the unix socket `path`, connected on the first call (one connection per
/// call site: these calls are rare).
fn channel(path: &Path) -> Channel {
    let path = path.to_path_buf();
    Endpoint::from_static("http://localhost")
        .connect_timeout(CALL_TIMEOUT)
        .timeout(CALL_TIMEOUT)
        .connect_with_connector_lazy(service_fn(move |_: Uri| {
            let path = path.clone();
            async move { UnixStream::connect(path).await.map(TokioIo::new) }
        }))
}

fn call_error<'a>(
    socket: &'a Path,
    call: &'static str,
) -> impl FnOnce(tonic::Status) -> CsiError + 'a {
    move |status| CsiError::Call {
        socket: socket.display().to_string(),
        call,
        message: format!(
            "rpc error: code = {:?} desc = {}",
            status.code(),
            status.message()
        ),
    }
}

/// The CSI plugins of this host.
#[derive(Debug, Clone, Default)]
pub struct SocketCsiPlugins;

#[async_trait]
impl CsiPlugins for SocketCsiPlugins {
    fn registration_sockets(&self, dir: &Path) -> Result<Vec<PathBuf>, CsiError> {
        let io = |action: &'static str| {
            move |source| CsiError::Io {
                action,
                path: dir.to_path_buf(),
                source,
            }
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(dir)
            .map_err(io("create"))?;
        let mut sockets = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io("read"))? {
            let entry = entry.map_err(io("read"))?;
            // The entry's own type: a link is not followed.
            if entry.file_type().is_ok_and(|t| t.is_socket()) {
                sockets.push(entry.path());
            }
        }
        sockets.sort();
        Ok(sockets)
    }

    async fn get_info(&self, socket: &Path) -> Result<PluginInfo, CsiError> {
        let mut client =
            registration::registration_client::RegistrationClient::new(channel(socket));
        let info = client
            .get_info(registration::InfoRequest {})
            .await
            .map_err(call_error(socket, "GetInfo"))?
            .into_inner();
        Ok(PluginInfo {
            kind: info.r#type,
            name: info.name,
            endpoint: info.endpoint,
            supported_versions: info.supported_versions,
        })
    }

    async fn notify_registration(
        &self,
        socket: &Path,
        registered: bool,
        error: &str,
    ) -> Result<(), CsiError> {
        let mut client =
            registration::registration_client::RegistrationClient::new(channel(socket));
        client
            .notify_registration_status(registration::RegistrationStatus {
                plugin_registered: registered,
                error: error.to_owned(),
            })
            .await
            .map_err(call_error(socket, "NotifyRegistrationStatus"))?;
        Ok(())
    }

    async fn node_get_info(&self, endpoint: &Path) -> Result<DriverNodeInfo, CsiError> {
        let mut client = csi::node_client::NodeClient::new(channel(endpoint));
        let info = client
            .node_get_info(csi::NodeGetInfoRequest {})
            .await
            .map_err(call_error(endpoint, "NodeGetInfo"))?
            .into_inner();
        Ok(DriverNodeInfo {
            node_id: info.node_id,
            max_volumes_per_node: info.max_volumes_per_node,
            topology: info
                .accessible_topology
                .map(|t| t.segments.into_iter().collect())
                .unwrap_or_default(),
        })
    }

    async fn node_publish(&self, endpoint: &Path, volume: &CsiPublish) -> Result<(), CsiError> {
        use csi::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
        let mut client = csi::node_client::NodeClient::new(channel(endpoint));
        let request = csi::NodePublishVolumeRequest {
            volume_id: volume.volume_handle.clone(),
            publish_context: Default::default(),
            staging_target_path: String::new(),
            target_path: volume.target_path.display().to_string(),
            volume_capability: Some(csi::VolumeCapability {
                access_type: Some(AccessType::Mount(MountVolume {
                    fs_type: volume.fs_type.clone(),
                    mount_flags: Vec::new(),
                    volume_mount_group: String::new(),
                })),
                // An inline volume is ReadWriteOnce.
                access_mode: Some(AccessMode {
                    mode: Mode::SingleNodeWriter as i32,
                }),
            }),
            readonly: volume.readonly,
            secrets: volume.secrets.clone().into_iter().collect(),
            volume_context: volume.volume_context.clone().into_iter().collect(),
        };
        client
            .node_publish_volume(request)
            .await
            .map_err(call_error(endpoint, "NodePublishVolume"))?;
        Ok(())
    }

    async fn node_unpublish(
        &self,
        endpoint: &Path,
        volume_handle: &str,
        target_path: &Path,
    ) -> Result<(), CsiError> {
        let mut client = csi::node_client::NodeClient::new(channel(endpoint));
        client
            .node_unpublish_volume(csi::NodeUnpublishVolumeRequest {
                volume_id: volume_handle.to_owned(),
                target_path: target_path.display().to_string(),
            })
            .await
            .map_err(call_error(endpoint, "NodeUnpublishVolume"))?;
        Ok(())
    }
}
