//! What the kubelet does with each volume of a pod before its containers start: an
//! emptyDir folder (on tmpfs for `medium: Memory`, sized by `sizeLimit` or the pod's
//! memory limit), a hostPath checked against its `type`, or the files of a
//! configMap/secret/downwardAPI/projected volume written atomically (secrets and
//! projected volumes, which carry tokens, on tmpfs as upstream's wrapped memory
//! emptyDir). A volume that cannot be set up holds the pod (upstream's `FailedMount`).

use std::path::{Path, PathBuf};

use super::claim::{claim_key, resolve_claim, ClaimError, PersistentVolumeSource};
use super::payload::{
    self, apply_owners, FilesOwnership, Payload, PayloadError, VolumeOwners, DEFAULT_MODE,
};
use super::{volume_dir, PodFacts, PodObjects, VolumeKind};
use crate::domain::cgroup::config::pod_cpu_and_memory;
use crate::domain::kuberuntime::requests::{empty_dir_setup, RequestContext};
use crate::domain::pod::{Pod, Volume};
use crate::domain::securitycontext::VolumeSetup;
use crate::domain::units::quantity::Quantity;

/// A hostPath `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPathType {
    /// Empty: no check.
    Unset,
    DirectoryOrCreate,
    Directory,
    FileOrCreate,
    File,
    Socket,
    CharDevice,
    BlockDevice,
}

impl HostPathType {
    pub fn parse(kind: &str) -> Option<HostPathType> {
        Some(match kind {
            "" => HostPathType::Unset,
            "DirectoryOrCreate" => HostPathType::DirectoryOrCreate,
            "Directory" => HostPathType::Directory,
            "FileOrCreate" => HostPathType::FileOrCreate,
            "File" => HostPathType::File,
            "Socket" => HostPathType::Socket,
            "CharDevice" => HostPathType::CharDevice,
            "BlockDevice" => HostPathType::BlockDevice,
            _ => return None,
        })
    }
}

/// What is at a host path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    File,
    Socket,
    CharDevice,
    BlockDevice,
    Other,
}

/// What to do at a hostPath before mounting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPathStep {
    Ready,
    /// Create the folder (0755) and its parents.
    CreateDirectory,
    /// Create an empty file (0644).
    CreateFile,
}

/// Upstream's `checkType`: `found` is what is at `path` (`None`: nothing).
pub fn check_host_path(
    path: &Path,
    kind: HostPathType,
    found: Option<FileKind>,
) -> Result<HostPathStep, VolumeErrorKind> {
    let fail = |what: &str| {
        Err(VolumeErrorKind::HostPathType(format!(
            "hostPath type check failed: {} is not {what}",
            path.display()
        )))
    };
    match (kind, found) {
        (HostPathType::Unset, _) => Ok(HostPathStep::Ready),
        (HostPathType::DirectoryOrCreate, None) => Ok(HostPathStep::CreateDirectory),
        (HostPathType::FileOrCreate, None) => Ok(HostPathStep::CreateFile),
        (HostPathType::DirectoryOrCreate | HostPathType::Directory, Some(FileKind::Directory)) => {
            Ok(HostPathStep::Ready)
        }
        (HostPathType::FileOrCreate | HostPathType::File, Some(FileKind::File)) => {
            Ok(HostPathStep::Ready)
        }
        (HostPathType::Socket, Some(FileKind::Socket)) => Ok(HostPathStep::Ready),
        (HostPathType::CharDevice, Some(FileKind::CharDevice)) => Ok(HostPathStep::Ready),
        (HostPathType::BlockDevice, Some(FileKind::BlockDevice)) => Ok(HostPathStep::Ready),
        (HostPathType::DirectoryOrCreate | HostPathType::Directory, _) => fail("a directory"),
        (HostPathType::FileOrCreate | HostPathType::File, _) => fail("a file"),
        (HostPathType::Socket, _) => fail("a socket file"),
        (HostPathType::CharDevice, _) => fail("a character device"),
        (HostPathType::BlockDevice, _) => fail("a block device"),
    }
}

/// What to set up for one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeAction {
    /// A folder; on tmpfs of this many bytes when `tmpfs_size_bytes` (0: the kernel's
    /// default size).
    EmptyDir {
        setup: VolumeSetup,
        tmpfs_size_bytes: Option<i64>,
    },
    /// A host path, checked (and maybe created) first.
    HostPath { path: PathBuf, kind: HostPathType },
    /// A `local` PersistentVolume's folder, which must exist; given to the pod's
    /// `fsGroup` (`owner`) unless its claim is read-only, as upstream's local plugin.
    Local {
        path: PathBuf,
        owner: Option<VolumeSetup>,
    },
    /// A CSI inline volume for its driver to publish.
    Csi(Box<crate::domain::csi::volume::CsiPublish>),
    /// Files written atomically into `dir` (on tmpfs when `tmpfs`), owned as `ownership`
    /// says.
    Files {
        dir: PathBuf,
        payload: Payload,
        tmpfs: bool,
        ownership: FilesOwnership,
    },
}

/// Why a volume cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeErrorKind {
    #[error("the {plugin:?} volume plugin is not supported by rkubelet (supported: hostPath, emptyDir, configMap, secret, downwardAPI, projected, csi, ephemeral, and persistentVolumeClaim bound to a hostPath, local or csi PersistentVolume)")]
    Unsupported { plugin: String },
    /// A claim that gives no volume; `expected` are the pod's mounted volumes, which
    /// upstream's message lists.
    #[error("{}", claim_message(.claim, .error))]
    Claim {
        claim: String,
        #[source]
        error: ClaimError,
        expected: Vec<String>,
    },
    #[error("no matching NodeSelectorTerms")]
    NodeAffinity,
    /// A Block PersistentVolume of a plugin other than CSI (upstream maps a `local` one
    /// too).
    #[error("volumeMode Block is given to containers only from a CSI driver's volume by rkubelet (this PersistentVolume is {plugin})")]
    BlockNotFromCsi { plugin: &'static str },
    /// A PersistentVolume with `mountOptions` that its plugin does not mount with:
    /// upstream's refusal for hostPath; a local volume's folder is given to the
    /// container as it is, where upstream bind-mounts it with them first.
    #[error("mount options are not supported for this volume type{}", if *.local { " by rkubelet (a local volume's folder is given to the container as it is, not mounted with its options)" } else { "" })]
    MountOptions { local: bool },
    /// A CSI volume that cannot be published (upstream's `kubernetes.io/csi: ...`).
    #[error("{0}")]
    Csi(String),
    #[error(
        "emptyDir medium {medium:?} is not supported by rkubelet (supported: \"\" and \"Memory\")"
    )]
    HugePages { medium: String },
    #[error("unknown storage medium {0:?}")]
    UnknownMedium(String),
    #[error("{0} is an invalid volume type")]
    InvalidHostPathType(String),
    #[error("{0}")]
    HostPathType(String),
    #[error(transparent)]
    Payload(#[from] PayloadError),
}

/// Upstream wraps a claim's errors, but not a generic ephemeral volume's ownership.
fn claim_message(claim: &str, error: &ClaimError) -> String {
    match error {
        ClaimError::NotForPod { .. } => error.to_string(),
        _ => format!("error processing PVC {claim}: {error}"),
    }
}

/// A volume that cannot be set up, in upstream's `FailedMount` words: the operation
/// that failed and the volume's spec name (a claim's PersistentVolume), or, for a claim
/// that gives no volume, the volume manager's wait that ends at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeError {
    pub volume: String,
    pub kind: VolumeErrorKind,
}

impl std::fmt::Display for VolumeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (volume, kind) = (&self.volume, &self.kind);
        match kind {
            VolumeErrorKind::Claim { expected, .. } => {
                // Upstream's getUnattachedVolumes compares names of another kind, so
                // every expected volume is listed as unattached too.
                let list = expected.join(" ");
                write!(
                    f,
                    "Unable to attach or mount volumes: unmounted volumes=[{list}], unattached volumes=[{list}]: {kind}"
                )
            }
            VolumeErrorKind::NodeAffinity => write!(
                f,
                "MountVolume.NodeAffinity check failed for volume {volume:?} : {kind}"
            ),
            VolumeErrorKind::MountOptions { .. } => write!(
                f,
                "MountVolume.MountOptionSupport check failed for volume {volume:?} : {kind}"
            ),
            _ => write!(f, "MountVolume.SetUp failed for volume {volume:?} : {kind}"),
        }
    }
}

impl std::error::Error for VolumeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.kind)
    }
}

/// One volume's plan: `name` is the pod's volume, `spec_name` the name upstream's
/// events give it (a claim's PersistentVolume, else the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumePlan {
    pub name: String,
    pub spec_name: String,
    pub action: Result<VolumeAction, VolumeError>,
}

/// The size of a memory emptyDir: the smaller of `sizeLimit` and the pod's memory limit
/// (node allocatable when the pod has none), as upstream's `calculateEmptyDirMemorySize`.
pub fn memory_empty_dir_size(pod: &Pod, size_limit: Option<Quantity>, facts: &PodFacts) -> i64 {
    let (_, _, pod_limit) = pod_cpu_and_memory(pod);
    let ceiling = if pod_limit > 0 {
        pod_limit
    } else {
        facts.allocatable_memory_bytes
    };
    match size_limit.map(|q| q.value()).filter(|v| *v > 0) {
        Some(limit) if ceiling <= 0 || limit < ceiling => limit,
        _ => ceiling.max(0),
    }
}

fn action(
    ctx: &RequestContext,
    pod: &Pod,
    volume: &Volume,
    objects: &PodObjects,
    facts: &PodFacts,
) -> Result<VolumeAction, VolumeErrorKind> {
    let uid = &pod.metadata.uid;
    let kind = VolumeKind::of(volume);
    let dir = |plugin: &str| volume_dir(&ctx.root_dir, uid, plugin, &volume.name);
    let owners = VolumeOwners::of(pod);
    let owned_files = |mut payload: Payload,
                       tmpfs: bool,
                       user_files: &[String]|
     -> Result<VolumeAction, VolumeErrorKind> {
        payload::validate_payload(&payload)?;
        let ownership = apply_owners(&mut payload, owners, user_files);
        Ok(VolumeAction::Files {
            dir: dir(kind.plugin_dir().unwrap_or_default()),
            payload,
            tmpfs,
            ownership,
        })
    };
    let files = |payload: Payload, tmpfs: bool| owned_files(payload, tmpfs, &[]);
    match &kind {
        VolumeKind::HostPath => {
            let host = volume.host_path.clone().unwrap_or_default();
            let path_type = HostPathType::parse(&host.kind)
                .ok_or_else(|| VolumeErrorKind::InvalidHostPathType(host.kind.clone()))?;
            Ok(VolumeAction::HostPath {
                path: PathBuf::from(host.path),
                kind: path_type,
            })
        }
        VolumeKind::EmptyDir => {
            let ed = volume.empty_dir.clone().unwrap_or_default();
            let tmpfs_size_bytes = match ed.medium.as_str() {
                "" => None,
                "Memory" => Some(memory_empty_dir_size(pod, ed.size_limit, facts)),
                m if m.starts_with("HugePages") => {
                    return Err(VolumeErrorKind::HugePages { medium: m.into() })
                }
                m => return Err(VolumeErrorKind::UnknownMedium(m.into())),
            };
            Ok(VolumeAction::EmptyDir {
                setup: empty_dir_setup(ctx, pod, volume),
                tmpfs_size_bytes,
            })
        }
        VolumeKind::ConfigMap => {
            let source = volume.config_map.clone().unwrap_or_default();
            files(payload::config_map_payload(pod, &source, objects)?, false)
        }
        VolumeKind::Secret => {
            let source = volume.secret.clone().unwrap_or_default();
            files(payload::secret_payload(pod, &source, objects)?, true)
        }
        VolumeKind::DownwardApi => {
            let source = volume.downward_api.clone().unwrap_or_default();
            let default_mode = source
                .default_mode
                .and_then(|m| u32::try_from(m).ok())
                .map_or(DEFAULT_MODE, |m| m & 0o7777);
            let mut out = Payload::new();
            payload::downward_payload(pod, &source.items, default_mode, facts, &mut out)?;
            // On tmpfs, as upstream's plugin wraps a memory emptyDir.
            files(out, true)
        }
        VolumeKind::Projected => {
            let source = volume.projected.clone().unwrap_or_default();
            let tokens: Vec<String> = source
                .sources
                .iter()
                .filter_map(|p| p.service_account_token.as_ref())
                .map(|t| t.path.clone())
                .collect();
            owned_files(
                payload::projected_payload(pod, &source, objects, facts, owners)?,
                true,
                &tokens,
            )
        }
        VolumeKind::PersistentVolumeClaim => {
            claimed_action(&ctx.root_dir, pod, volume, objects, facts)
        }
        VolumeKind::Csi => {
            let source = volume.csi.clone().unwrap_or_default();
            crate::domain::csi::volume::plan_inline(
                pod,
                &volume.name,
                &source,
                dir(crate::domain::csi::volume::CSI_PLUGIN_DIR),
                &facts.node_name,
                objects,
            )
            .map(|publish| VolumeAction::Csi(Box::new(publish)))
            .map_err(VolumeErrorKind::Csi)
        }
        VolumeKind::Unsupported(plugin) => Err(VolumeErrorKind::Unsupported {
            plugin: plugin.clone(),
        }),
    }
}

/// The volumes named in the pod's containers' mounts and devices, sorted (upstream's
/// `getExpectedVolumes`, a set).
fn expected_volumes(pod: &Pod) -> Vec<String> {
    let names: std::collections::BTreeSet<&str> = pod
        .spec
        .all_containers()
        .flat_map(|c| {
            c.volume_mounts
                .iter()
                .map(|m| m.name.as_str())
                .chain(c.volume_devices.iter().map(|d| d.name.as_str()))
        })
        .collect();
    names.into_iter().map(str::to_owned).collect()
}

fn claimed_action(
    root_dir: &std::path::Path,
    pod: &Pod,
    volume: &Volume,
    objects: &PodObjects,
    facts: &PodFacts,
) -> Result<VolumeAction, VolumeErrorKind> {
    let Some(resolved) = resolve_claim(pod, volume, objects) else {
        return Err(VolumeErrorKind::Unsupported {
            plugin: "persistentVolumeClaim".into(),
        });
    };
    let claimed = resolved.map_err(|error| VolumeErrorKind::Claim {
        claim: claim_key(
            pod,
            &crate::domain::volumes::claim::claim_name_of(pod, volume).unwrap_or_default(),
        ),
        error,
        expected: expected_volumes(pod),
    })?;
    if !claimed.fits_node(&facts.node_name, &facts.node_labels) {
        return Err(VolumeErrorKind::NodeAffinity);
    }
    if claimed.volume_mode == crate::domain::volumes::claim::BLOCK {
        let plugin = match &claimed.source {
            PersistentVolumeSource::HostPath { .. } => Some("hostPath"),
            PersistentVolumeSource::Local { .. } => Some("local"),
            PersistentVolumeSource::Csi(_) | PersistentVolumeSource::Other(_) => None,
        };
        if let Some(plugin) = plugin {
            return Err(VolumeErrorKind::BlockNotFromCsi { plugin });
        }
        // A device is not mounted: there is nothing to give the options to.
        if !claimed.mount_options.is_empty() {
            return Err(VolumeErrorKind::MountOptions { local: false });
        }
    }
    if !claimed.mount_options.is_empty() {
        match &claimed.source {
            PersistentVolumeSource::HostPath { .. } => {
                return Err(VolumeErrorKind::MountOptions { local: false })
            }
            PersistentVolumeSource::Local { .. } => {
                return Err(VolumeErrorKind::MountOptions { local: true })
            }
            _ => {}
        }
    }
    match &claimed.source {
        PersistentVolumeSource::HostPath { path, kind } => Ok(VolumeAction::HostPath {
            path: PathBuf::from(path),
            kind: claimed
                .host_path_type()
                .ok_or_else(|| VolumeErrorKind::InvalidHostPathType(kind.clone()))?,
        }),
        PersistentVolumeSource::Local { path } => {
            let owner = (!claimed.read_only)
                .then(|| VolumeSetup::fs_group_walk(pod, PathBuf::from(path)))
                .flatten();
            Ok(VolumeAction::Local {
                path: PathBuf::from(path),
                owner,
            })
        }
        PersistentVolumeSource::Csi(source) => crate::domain::csi::volume::plan_persistent(
            pod, &claimed, source, root_dir, facts, objects,
        )
        .map(|publish| VolumeAction::Csi(Box::new(publish)))
        .map_err(VolumeErrorKind::Csi),
        PersistentVolumeSource::Other(plugin) => Err(VolumeErrorKind::Unsupported {
            plugin: plugin.clone(),
        }),
    }
}

/// The name upstream's mount events give `volume`: a claim's PersistentVolume when it
/// is bound to one, else the volume's own.
fn spec_name(pod: &Pod, volume: &Volume, objects: &PodObjects) -> String {
    match resolve_claim(pod, volume, objects) {
        Some(Ok(claimed)) => claimed.volume_name,
        _ => volume.name.clone(),
    }
}

/// Every volume of the pod (mounted or not, as upstream sets up all), each with what to
/// do or why it cannot be set up.
pub fn plan_volumes(
    ctx: &RequestContext,
    pod: &Pod,
    objects: &PodObjects,
    facts: &PodFacts,
) -> Vec<VolumePlan> {
    pod.spec
        .volumes
        .iter()
        .map(|volume| {
            let spec_name = spec_name(pod, volume, objects);
            VolumePlan {
                name: volume.name.clone(),
                action: action(ctx, pod, volume, objects, facts).map_err(|kind| VolumeError {
                    volume: spec_name.clone(),
                    kind,
                }),
                spec_name,
            }
        })
        .collect()
}
