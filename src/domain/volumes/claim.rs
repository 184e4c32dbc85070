//! A `persistentVolumeClaim` volume resolved as upstream's volume manager resolves it
//! (`getPVCExtractPV`, `getPVSpec`, `checkNodeAffinity`): the claim must exist, not be
//! deleted, be `Bound` with a `volumeName`; the PersistentVolume it names must point back
//! to the claim's UID; its node affinity must match this node. The volume is then the
//! PersistentVolume's source: a `hostPath` or a `local` path, or a CSI driver's volume
//! (the network plugins are refused with a reason).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::plan::HostPathType;
use super::{Fetched, PodObjects};
use crate::domain::admission::node_selector_matches;
use crate::domain::node_status::model::ObjectReference;
use crate::domain::pod::{NodeSelector, Pod, Volume};

/// What the kubelet reads of a PersistentVolumeClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimData {
    pub uid: String,
    /// `spec.volumeName`: the PersistentVolume bound to it.
    pub volume_name: String,
    /// `status.phase`: `Pending`, `Bound`, `Lost`.
    pub phase: String,
    pub being_deleted: bool,
    /// The UID of its controlling owner (a generic ephemeral volume's pod).
    pub controller_uid: Option<String>,
    /// `status.capacity.storage`: the size its volume's file system has been given.
    pub capacity: Option<String>,
}

/// A PersistentVolume's source, as far as the kubelet is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersistentVolumeSource {
    HostPath {
        path: String,
        kind: String,
    },
    Local {
        path: String,
    },
    Csi(Box<CsiPersistentSource>),
    /// Any other source, by its field name (`nfs`, `iscsi` ...).
    Other(String),
}

/// A PersistentVolume's `csi` source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiPersistentSource {
    pub driver: String,
    pub volume_handle: String,
    pub fs_type: String,
    pub read_only: bool,
    pub volume_attributes: BTreeMap<String, String>,
    /// The Secrets given to the driver's `NodeStageVolume`, `NodePublishVolume` and
    /// `NodeExpandVolume` (the controller's are not the kubelet's to read).
    pub node_stage_secret_ref: Option<SecretReference>,
    pub node_publish_secret_ref: Option<SecretReference>,
    pub node_expand_secret_ref: Option<SecretReference>,
}

/// A PersistentVolume's reference to a Secret, in any namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct SecretReference {
    pub namespace: String,
    pub name: String,
}

/// `volumeMode` values: a file system mounted, or a raw block device.
pub const FILESYSTEM: &str = "Filesystem";
pub const BLOCK: &str = "Block";

/// What the kubelet reads of a PersistentVolume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistentVolumeData {
    /// `spec.claimRef.uid`; `None` when the volume has no claim reference.
    pub claim_uid: Option<String>,
    pub source: PersistentVolumeSource,
    /// `spec.volumeMode`: `Filesystem` (the default) or `Block`.
    pub volume_mode: String,
    /// `spec.nodeAffinity.required`.
    pub node_affinity: Option<NodeSelector>,
    /// `spec.accessModes` (`ReadWriteOnce` ...).
    pub access_modes: Vec<String>,
    /// `spec.mountOptions`: given to a CSI driver as its mount flags.
    pub mount_options: Vec<String>,
    /// `spec.capacity.storage`: the volume's size, which a resizer raises.
    pub capacity: Option<String>,
}

/// Why a claim does not give a volume, in upstream's words (after "error processing PVC
/// <namespace>/<claim>: ").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("failed to fetch PVC from API server: {0}")]
    ClaimNotFetched(String),
    #[error("PVC is being deleted")]
    BeingDeleted,
    #[error("PVC is not bound")]
    NotBound,
    #[error("PVC has empty pvc.Spec.VolumeName")]
    NoVolumeName,
    #[error("failed to fetch PV {volume} from API server: {reason}")]
    VolumeNotFetched { volume: String, reason: String },
    #[error("found PV object {0} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim")]
    NoClaimRef(String),
    #[error("found PV object {volume} but its pv.Spec.ClaimRef.UID {found} does not point to claim.UID {claim}")]
    OtherClaim {
        volume: String,
        found: String,
        claim: String,
    },
    /// A Block volume in `volumeMounts` or a Filesystem one in `volumeDevices`
    /// (upstream's `checkVolumeModeMismatches`).
    #[error("volume {volume} has volumeMode {mode}, but is specified in {used_in}")]
    ModeMismatch {
        volume: String,
        mode: String,
        used_in: &'static str,
    },
    #[error("PVC {claim} was not created for pod {pod} (pod is not owner)")]
    NotForPod { claim: String, pod: String },
}

/// The volume a claim gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedVolume {
    /// The PersistentVolume's name (upstream names it in its mount events).
    pub volume_name: String,
    pub source: PersistentVolumeSource,
    /// The claim reference's `readOnly`: every mount of it is read-only.
    pub read_only: bool,
    pub node_affinity: Option<NodeSelector>,
    pub volume_mode: String,
    pub access_modes: Vec<String>,
    pub mount_options: Vec<String>,
}

impl ClaimedVolume {
    /// The host path a container's mount binds; `None` for a source rkubelet refuses.
    pub fn host_path(&self) -> Option<PathBuf> {
        match &self.source {
            PersistentVolumeSource::HostPath { path, .. }
            | PersistentVolumeSource::Local { path } => Some(PathBuf::from(path)),
            PersistentVolumeSource::Csi(_) | PersistentVolumeSource::Other(_) => None,
        }
    }

    /// The hostPath check of a `hostPath` PersistentVolume (`None`: not a hostPath, or an
    /// invalid type, which the plan reports).
    pub fn host_path_type(&self) -> Option<HostPathType> {
        match &self.source {
            PersistentVolumeSource::HostPath { kind, .. } => HostPathType::parse(kind),
            _ => None,
        }
    }

    /// Upstream's `CheckNodeAffinity`: a volume with required terms only on a node
    /// matching one of them.
    pub fn fits_node(&self, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.node_affinity
            .as_ref()
            .is_none_or(|required| node_selector_matches(required, node_name, labels))
    }
}

/// `namespace/claim` as upstream prints it.
pub fn claim_key(pod: &Pod, claim: &str) -> String {
    format!("{}/{}", pod.metadata.namespace, claim)
}

/// The volume `volume`'s claim gives; `None` when `volume` is not a claim.
pub fn resolve_claim(
    pod: &Pod,
    volume: &Volume,
    objects: &PodObjects,
) -> Option<Result<ClaimedVolume, ClaimError>> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some(resolve(
            pod,
            volume,
            &source.claim_name,
            source.read_only,
            objects,
        ));
    }
    volume.ephemeral.as_ref()?;
    let name = ephemeral_claim_name(pod, volume);
    Some(resolve(pod, volume, &name, false, objects))
}

/// Upstream's `ephemeral.VolumeClaimName`: `<pod>-<volume>`.
pub fn ephemeral_claim_name(pod: &Pod, volume: &Volume) -> String {
    format!("{}-{}", pod.metadata.name, volume.name)
}

/// The claim a volume reads: its `claimName`, or a generic ephemeral volume's.
pub fn claim_name_of(pod: &Pod, volume: &Volume) -> Option<String> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some(source.claim_name.clone());
    }
    volume
        .ephemeral
        .as_ref()
        .map(|_| ephemeral_claim_name(pod, volume))
}

fn resolve(
    pod: &Pod,
    volume: &Volume,
    claim_name: &str,
    read_only: bool,
    objects: &PodObjects,
) -> Result<ClaimedVolume, ClaimError> {
    let claim = match objects.claims.get(claim_name) {
        Some(Fetched::Found(claim)) => claim,
        Some(Fetched::NotFound) => {
            return Err(ClaimError::ClaimNotFetched(format!(
                "persistentvolumeclaims {claim_name:?} not found"
            )))
        }
        Some(Fetched::Failed(reason)) => return Err(ClaimError::ClaimNotFetched(reason.clone())),
        None => return Err(ClaimError::ClaimNotFetched("no kubeClient defined".into())),
    };
    if claim.being_deleted {
        return Err(ClaimError::BeingDeleted);
    }
    if claim.phase != "Bound" {
        return Err(ClaimError::NotBound);
    }
    if claim.volume_name.is_empty() {
        return Err(ClaimError::NoVolumeName);
    }
    // A generic ephemeral volume's claim must be the pod's own (upstream's
    // VolumeIsForPod, after the claim's checks).
    if volume.ephemeral.is_some()
        && claim.controller_uid.as_deref() != Some(pod.metadata.uid.as_str())
    {
        return Err(ClaimError::NotForPod {
            claim: claim_key(pod, claim_name),
            pod: claim_key(pod, &pod.metadata.name),
        });
    }
    let name = &claim.volume_name;
    let not_fetched = |reason: String| ClaimError::VolumeNotFetched {
        volume: name.clone(),
        reason,
    };
    let pv = match objects.persistent_volumes.get(name) {
        Some(Fetched::Found(pv)) => pv,
        Some(Fetched::NotFound) => {
            return Err(not_fetched(format!("persistentvolumes {name:?} not found")))
        }
        Some(Fetched::Failed(reason)) => return Err(not_fetched(reason.clone())),
        None => return Err(not_fetched("not read".into())),
    };
    match &pv.claim_uid {
        None => return Err(ClaimError::NoClaimRef(name.clone())),
        Some(uid) if *uid != claim.uid => {
            return Err(ClaimError::OtherClaim {
                volume: name.clone(),
                found: uid.clone(),
                claim: claim.uid.clone(),
            })
        }
        Some(_) => {}
    }
    let mode = if pv.volume_mode.is_empty() {
        FILESYSTEM
    } else {
        pv.volume_mode.as_str()
    };
    let containers = || pod.spec.all_containers();
    let mounted = containers()
        .flat_map(|c| &c.volume_mounts)
        .any(|m| m.name == volume.name);
    let device = containers()
        .flat_map(|c| &c.volume_devices)
        .any(|d| d.name == volume.name);
    let mismatch = |used_in| ClaimError::ModeMismatch {
        volume: volume.name.clone(),
        mode: mode.to_owned(),
        used_in,
    };
    if mounted && mode != FILESYSTEM {
        return Err(mismatch("volumeMounts"));
    }
    if device && mode != BLOCK {
        return Err(mismatch("volumeDevices"));
    }
    Ok(ClaimedVolume {
        volume_name: name.clone(),
        source: pv.source.clone(),
        read_only,
        node_affinity: pv.node_affinity.clone(),
        volume_mode: mode.to_owned(),
        access_modes: pv.access_modes.clone(),
        mount_options: pv.mount_options.clone(),
    })
}

/// The claims a pod's volumes name (generic ephemeral volumes' included).
pub fn claim_names(pod: &Pod) -> impl Iterator<Item = String> + '_ {
    pod.spec
        .volumes
        .iter()
        .filter_map(|v| claim_name_of(pod, v))
}

/// A claim's CSI volume whose file system the node is to grow (upstream's online
/// expansion): a resizer raised its PersistentVolume's capacity above the claim's
/// status capacity, and the claim's status is to say the new size once the driver's
/// `NodeExpandVolume` has grown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeExpansion {
    /// The claim, whose status gets the new size and which upstream's events name too.
    pub claim: ObjectReference,
    /// The PersistentVolume's capacity, as the claim's status is to give it.
    pub new_capacity: String,
    pub new_size_bytes: i64,
}

/// What the node does about a claim whose volume a resizer grew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeResize {
    /// Its driver grows the file system, then the claim's status says the new size
    /// (upstream's `FileSystemResizeSuccessful` on the pod and the claim).
    Grow(NodeExpansion),
    /// The pod mounts the claim read-only, so its file system is not grown: upstream's
    /// `FileSystemResizeFailed` ("requested read-only file system") on the pod and the
    /// claim when the pod mounts it.
    ReadOnly { claim: ObjectReference },
}

/// Upstream's `volumeRequiresFSResize` for the pod's `volume`: `None` unless it is a
/// claim of a CSI PersistentVolume whose capacity is above the claim's status capacity
/// (both set). A claim the pod mounts read-only is not grown; upstream v1.26 warns about
/// one at every mount, grown or not (its read-only check precedes the size comparison),
/// rkubelet only when it was grown.
pub fn node_expansion(pod: &Pod, volume: &Volume, objects: &PodObjects) -> Option<NodeResize> {
    use crate::domain::units::quantity::Quantity;
    let claimed = resolve_claim(pod, volume, objects)?.ok()?;
    if !matches!(claimed.source, PersistentVolumeSource::Csi(_)) {
        return None;
    }
    let claim_name = claim_name_of(pod, volume)?;
    let Some(Fetched::Found(claim)) = objects.claims.get(&claim_name) else {
        return None;
    };
    let Some(Fetched::Found(pv)) = objects.persistent_volumes.get(&claimed.volume_name) else {
        return None;
    };
    let new_capacity = pv.capacity.clone()?;
    let new = Quantity::parse(&new_capacity).ok()?;
    let current = Quantity::parse(claim.capacity.as_deref()?).ok()?;
    if new.value() <= current.value() {
        return None;
    }
    let claim = ObjectReference {
        kind: "PersistentVolumeClaim".into(),
        namespace: pod.metadata.namespace.clone(),
        name: claim_name,
        uid: claim.uid.clone(),
        api_version: "v1".into(),
        field_path: String::new(),
    };
    if claimed.read_only {
        return Some(NodeResize::ReadOnly { claim });
    }
    Some(NodeResize::Grow(NodeExpansion {
        claim,
        new_size_bytes: new.value(),
        new_capacity,
    }))
}

/// The Secrets the fetched PersistentVolumes name for their drivers' node calls.
pub fn volume_secret_refs(objects: &PodObjects) -> std::collections::BTreeSet<SecretReference> {
    objects
        .persistent_volumes
        .values()
        .filter_map(|pv| match pv {
            Fetched::Found(PersistentVolumeData {
                source: PersistentVolumeSource::Csi(c),
                ..
            }) => Some([
                &c.node_stage_secret_ref,
                &c.node_publish_secret_ref,
                &c.node_expand_secret_ref,
            ]),
            _ => None,
        })
        .flatten()
        .flatten()
        .cloned()
        .collect()
}

/// The PersistentVolumes the fetched claims are bound to, to read next (upstream reads
/// a claim's volume only once the claim passes its checks).
pub fn bound_volume_names(objects: &PodObjects) -> std::collections::BTreeSet<String> {
    objects
        .claims
        .values()
        .filter_map(|c| match c {
            Fetched::Found(c)
                if !c.being_deleted && c.phase == "Bound" && !c.volume_name.is_empty() =>
            {
                Some(c.volume_name.clone())
            }
            _ => None,
        })
        .collect()
}
