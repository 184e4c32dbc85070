//! CSI node plugins over their unix sockets: the plugin registration v1 client on the
//! sockets in `plugins_registry`, and the CSI v1 node client on each driver's socket.
//! The generated wire types stay private here.

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tower::service_fn;

use crate::domain::csi::volume::{CsiAccessMode, CsiPublish};
use crate::domain::csi::{DriverNodeInfo, PluginInfo};
use crate::ports::csi::{CsiError, CsiPlugins, CsiVolumeStats, RegistrationSocket};

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

/// A volume's capability: a Block volume's device, or a filesystem's type, mount flags
/// and group; its access mode.
fn capability(volume: &CsiPublish) -> csi::VolumeCapability {
    use csi::volume_capability::{
        access_mode::Mode, AccessMode, AccessType, BlockVolume, MountVolume,
    };
    let mode = match volume.access_mode {
        CsiAccessMode::SingleNodeWriter => Mode::SingleNodeWriter,
        CsiAccessMode::MultiNodeReaderOnly => Mode::MultiNodeReaderOnly,
        CsiAccessMode::MultiNodeMultiWriter => Mode::MultiNodeMultiWriter,
        CsiAccessMode::SingleNodeSingleWriter => Mode::SingleNodeSingleWriter,
    };
    let access_type = if volume.block.is_some() {
        AccessType::Block(BlockVolume {})
    } else {
        AccessType::Mount(MountVolume {
            fs_type: volume.fs_type.clone(),
            mount_flags: volume.mount_flags.clone(),
            volume_mount_group: volume.volume_mount_group.clone(),
        })
    };
    csi::VolumeCapability {
        access_type: Some(access_type),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    }
}

/// The driver's node capabilities (`NodeGetCapabilities`), to ask with [`offers`].
async fn node_rpcs(
    client: &mut csi::node_client::NodeClient<Channel>,
    endpoint: &Path,
) -> Result<csi::NodeGetCapabilitiesResponse, CsiError> {
    Ok(client
        .node_get_capabilities(csi::NodeGetCapabilitiesRequest {})
        .await
        .map_err(call_error(endpoint, "NodeGetCapabilities"))?
        .into_inner())
}

/// Whether the node capabilities offer `wanted`.
fn offers(
    caps: &csi::NodeGetCapabilitiesResponse,
    wanted: csi::node_service_capability::rpc::Type,
) -> bool {
    use csi::node_service_capability::Type as Kind;
    caps.capabilities
        .iter()
        .any(|c| matches!(&c.r#type, Some(Kind::Rpc(rpc)) if rpc.r#type == wanted as i32))
}

/// The CSI plugins of this host.
#[derive(Debug, Clone, Default)]
pub struct SocketCsiPlugins;

#[async_trait]
impl CsiPlugins for SocketCsiPlugins {
    fn registration_sockets(&self, dir: &Path) -> Result<Vec<RegistrationSocket>, CsiError> {
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
            // The entry's own type and metadata: a link is not followed.
            if entry.file_type().is_ok_and(|t| t.is_socket()) {
                let Ok(meta) = entry.metadata() else {
                    continue; // gone meanwhile
                };
                sockets.push(RegistrationSocket {
                    path: entry.path(),
                    identity: (
                        meta.ino(),
                        meta.ctime()
                            .saturating_mul(1_000_000_000)
                            .saturating_add(meta.ctime_nsec()),
                    ),
                });
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

    async fn node_capabilities(
        &self,
        endpoint: &Path,
    ) -> Result<crate::domain::csi::NodeCapabilities, CsiError> {
        use csi::node_service_capability::rpc::Type;
        let mut client = csi::node_client::NodeClient::new(channel(endpoint));
        let caps = node_rpcs(&mut client, endpoint).await?;
        Ok(crate::domain::csi::NodeCapabilities {
            stage_unstage: offers(&caps, Type::StageUnstageVolume),
            volume_mount_group: offers(&caps, Type::VolumeMountGroup),
        })
    }

    async fn node_expand(
        &self,
        endpoint: &Path,
        volume: &CsiPublish,
        required_bytes: i64,
    ) -> Result<bool, CsiError> {
        use csi::node_service_capability::rpc::Type;
        let mut client = csi::node_client::NodeClient::new(channel(endpoint));
        if !offers(&node_rpcs(&mut client, endpoint).await?, Type::ExpandVolume) {
            return Ok(false);
        }
        // A PersistentVolume's staging path, as upstream passes its device mount path.
        let staging = volume.stage.as_ref().map(|s| &s.staging_path);
        client
            .node_expand_volume(csi::NodeExpandVolumeRequest {
                volume_id: volume.volume_handle.clone(),
                volume_path: volume.target_path.display().to_string(),
                capacity_range: Some(csi::CapacityRange {
                    required_bytes,
                    limit_bytes: 0,
                }),
                staging_target_path: staging.map(|p| p.display().to_string()).unwrap_or_default(),
                volume_capability: Some(capability(volume)),
                // The volume manager expands only once the Secret is read.
                secrets: volume
                    .expand_secrets
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
            })
            .await
            .map_err(call_error(endpoint, "NodeExpandVolume"))?;
        Ok(true)
    }

    async fn node_volume_stats(
        &self,
        endpoint: &Path,
        volume_handle: &str,
        target_path: &Path,
    ) -> Result<Option<CsiVolumeStats>, CsiError> {
        use csi::node_service_capability::rpc::Type;
        use csi::volume_usage::Unit;
        let mut client = csi::node_client::NodeClient::new(channel(endpoint));
        if !offers(
            &node_rpcs(&mut client, endpoint).await?,
            Type::GetVolumeStats,
        ) {
            return Ok(None);
        }
        let answer = client
            .node_get_volume_stats(csi::NodeGetVolumeStatsRequest {
                volume_id: volume_handle.to_owned(),
                volume_path: target_path.display().to_string(),
                staging_target_path: String::new(),
            })
            .await
            .map_err(call_error(endpoint, "NodeGetVolumeStats"))?
            .into_inner();
        let mut stats = CsiVolumeStats::default();
        // A negative count (a driver's bug) reads as 0.
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        for usage in answer.usage {
            match Unit::try_from(usage.unit) {
                Ok(Unit::Bytes) => {
                    stats.usage.used_bytes = count(usage.used);
                    stats.fs.capacity_bytes = count(usage.total);
                    stats.fs.available_bytes = count(usage.available);
                }
                Ok(Unit::Inodes) => {
                    stats.usage.inodes_used = count(usage.used);
                    stats.fs.inodes = Some(count(usage.total));
                    stats.fs.inodes_free = Some(count(usage.available));
                }
                _ => {}
            }
        }
        stats.abnormal = answer
            .volume_condition
            .filter(|c| c.abnormal)
            .map(|c| c.message);
        Ok(Some(stats))
    }

    async fn node_stage(
        &self,
        endpoint: &Path,
        volume: &CsiPublish,
        staging_path: &Path,
    ) -> Result<(), CsiError> {
        let stage = volume.stage.as_ref();
        // The volume manager stages only once the stage Secret is read.
        let secrets = match stage.map(|s| &s.secrets) {
            Some(Ok(secrets)) => secrets.clone().into_iter().collect(),
            _ => Default::default(),
        };
        let volume_context = stage
            .map(|s| s.volume_context.clone().into_iter().collect())
            .unwrap_or_default();
        let mut client = csi::node_client::NodeClient::new(channel(endpoint));
        client
            .node_stage_volume(csi::NodeStageVolumeRequest {
                volume_id: volume.volume_handle.clone(),
                publish_context: volume.publish_context.clone().into_iter().collect(),
                staging_target_path: staging_path.display().to_string(),
                volume_capability: Some(capability(volume)),
                secrets,
                volume_context,
            })
            .await
            .map_err(call_error(endpoint, "NodeStageVolume"))?;
        Ok(())
    }

    async fn node_unstage(
        &self,
        endpoint: &Path,
        volume_handle: &str,
        staging_path: &Path,
    ) -> Result<(), CsiError> {
        let mut client = csi::node_client::NodeClient::new(channel(endpoint));
        client
            .node_unstage_volume(csi::NodeUnstageVolumeRequest {
                volume_id: volume_handle.to_owned(),
                staging_target_path: staging_path.display().to_string(),
            })
            .await
            .map_err(call_error(endpoint, "NodeUnstageVolume"))?;
        Ok(())
    }

    async fn node_publish(
        &self,
        endpoint: &Path,
        volume: &CsiPublish,
        staging_path: Option<&Path>,
    ) -> Result<(), CsiError> {
        let mut client = csi::node_client::NodeClient::new(channel(endpoint));
        let request = csi::NodePublishVolumeRequest {
            volume_id: volume.volume_handle.clone(),
            publish_context: volume.publish_context.clone().into_iter().collect(),
            staging_target_path: staging_path
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            target_path: volume.target_path.display().to_string(),
            volume_capability: Some(capability(volume)),
            readonly: volume.readonly,
            // The volume manager publishes only once the Secret is read.
            secrets: volume
                .secrets
                .clone()
                .map(|s| s.into_iter().collect())
                .unwrap_or_default(),
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
