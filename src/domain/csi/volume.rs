//! A CSI ephemeral inline volume (`volumes[].csi`) as upstream's CSI plugin publishes
//! it: the driver's `CSIDriver` must allow the `Ephemeral` lifecycle mode; the volume
//! handle is `csi-<sha256(pod UID + volume name)>`; the driver mounts it at
//! `<root-dir>/pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount`, with the volume's
//! attributes, the pod's identity when the driver asks for it (`podInfoOnMount`), and
//! `vol_data.json` beside it for the teardown.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::domain::pod::{CsiVolumeSource, Pod};
use crate::domain::securitycontext::VolumeSetup;
use crate::domain::volumes::claim::{ClaimedVolume, CsiPersistentSource, SecretReference};
use crate::domain::volumes::{Fetched, PodFacts, PodObjects, SecretData};

/// The plugin folder of CSI volumes under the pod's `volumes`.
pub const CSI_PLUGIN_DIR: &str = "kubernetes.io~csi";
/// What the kubelet keeps beside a published volume for its teardown.
pub const VOL_DATA_FILE: &str = "vol_data.json";
/// The folder under the volume's where the driver mounts it.
pub const MOUNT_DIR: &str = "mount";

const EPHEMERAL: &str = "Ephemeral";
const PERSISTENT: &str = "Persistent";

/// What the kubelet reads of a `storage.k8s.io/v1` CSIDriver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiDriverData {
    pub attach_required: bool,
    pub pod_info_on_mount: bool,
    /// `None`, `File` or `ReadWriteOnceWithFSType` (the default).
    pub fs_group_policy: String,
    /// Empty: `Persistent` alone.
    pub volume_lifecycle_modes: Vec<String>,
}

/// The CSI access mode a volume is published with (from the PersistentVolume's first
/// access mode; an inline volume is ReadWriteOnce).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsiAccessMode {
    SingleNodeWriter,
    MultiNodeReaderOnly,
    MultiNodeMultiWriter,
    SingleNodeSingleWriter,
}

impl CsiAccessMode {
    /// Upstream's `asCSIAccessModeV1` (without the driver's SINGLE_NODE_MULTI_WRITER
    /// capability: ReadWriteOncePod is SINGLE_NODE_WRITER's stricter sibling).
    pub fn of(mode: &str) -> CsiAccessMode {
        match mode {
            "ReadOnlyMany" => CsiAccessMode::MultiNodeReaderOnly,
            "ReadWriteMany" => CsiAccessMode::MultiNodeMultiWriter,
            "ReadWriteOncePod" => CsiAccessMode::SingleNodeSingleWriter,
            _ => CsiAccessMode::SingleNodeWriter,
        }
    }
}

/// Staging a PersistentVolume at its global path before publishing it, when the driver
/// has the STAGE_UNSTAGE_VOLUME capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiStage {
    /// `<root-dir>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount`, or
    /// a Block volume's `.../csi/volumeDevices/staging/<pv>`.
    pub staging_path: PathBuf,
    /// Its `vol_data.json`: in the staging path's folder, or a Block volume's data folder.
    pub vol_data_file: PathBuf,
    pub vol_data: BTreeMap<String, String>,
    /// The volume's attributes alone (the pod's identity is the publish's: a staged
    /// volume serves every pod on the node).
    pub volume_context: BTreeMap<String, String>,
    /// The credentials for `NodeStageVolume`, or upstream's message when the Secret the
    /// volume names cannot be read (needed only when the driver stages).
    pub secrets: Result<BTreeMap<String, String>, String>,
}

/// Upstream's unique name of a CSI volume in its logs and `volumesInUse`: a
/// PersistentVolume's `kubernetes.io/csi/<driver>^<handle>`, an inline volume's
/// `kubernetes.io/csi/<pod uid>-<volume>` (one per pod).
pub fn unique_volume_name(publish: &CsiPublish, pod_uid: &str, volume: &str) -> String {
    if publish.stage.is_some() {
        persistent_volume_name(&publish.driver, &publish.volume_handle)
    } else {
        format!("kubernetes.io/csi/{pod_uid}-{volume}")
    }
}

fn persistent_volume_name(driver: &str, volume_handle: &str) -> String {
    format!("kubernetes.io/csi/{driver}^{volume_handle}")
}

/// A volume for the driver to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiPublish {
    pub driver: String,
    pub volume_handle: String,
    pub access_mode: CsiAccessMode,
    /// A PersistentVolume's staging; `None` for an inline volume.
    pub stage: Option<CsiStage>,
    /// The volume's folder (`vol_data.json` and `mount` in it; a Block volume's data
    /// folder).
    pub volume_dir: PathBuf,
    /// Where the driver publishes it: the folder `mount`, or a Block volume's file.
    pub target_path: PathBuf,
    /// A Block volume (the driver publishes a device file at `target_path`): where the
    /// kubelet maps it.
    pub block: Option<BlockMap>,
    pub readonly: bool,
    pub fs_type: String,
    pub volume_context: BTreeMap<String, String>,
    /// The credentials for `NodePublishVolume`, or upstream's message when the Secret
    /// cannot be read (a PersistentVolume is staged first, as upstream's).
    pub secrets: Result<BTreeMap<String, String>, String>,
    /// The credentials for `NodeExpandVolume` (`nodeExpandSecretRef`), or upstream's
    /// message when the Secret cannot be read.
    pub expand_secrets: Result<BTreeMap<String, String>, String>,
    /// The PersistentVolume's `mountOptions`, as the driver's mount flags.
    pub mount_flags: Vec<String>,
    /// The pod's `fsGroup`, which a driver with VOLUME_MOUNT_GROUP applies itself.
    pub fs_group: Option<i64>,
    /// The mount capability's `volume_mount_group` (empty: none).
    pub volume_mount_group: String,
    /// The `fsGroup` walk after publishing, when the driver's policy asks the kubelet.
    pub owner: Option<VolumeSetup>,
    /// `vol_data.json`'s content.
    pub vol_data: BTreeMap<String, String>,
    /// The attacher's `attachmentMetadata` for a volume attached first, given to the
    /// driver's stage and publish calls.
    pub publish_context: BTreeMap<String, String>,
}

/// Where the kubelet maps a Block volume's published device file for one pod, as
/// upstream's `MapBlockVolume`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockMap {
    /// The link in the pod's folder that its containers' devices are given from.
    pub pod_link: PathBuf,
    /// `.../volumeDevices/<pv>/dev/<pod uid>`: a file bind-mounted to the device, held
    /// open by a loop device so the device cannot go while the pod uses it, and the
    /// path the driver measures the volume at.
    pub global_map: PathBuf,
}

impl CsiPublish {
    /// Where the driver measures the volume (`NodeGetVolumeStats`): a Block volume at its
    /// global map, as upstream's block mapper; a mounted one at its target.
    pub fn stats_path(&self) -> &Path {
        self.block
            .as_ref()
            .map_or(&self.target_path, |map| &map.global_map)
    }
}

/// What the kubelet reads of a `storage.k8s.io/v1` VolumeAttachment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeAttachmentData {
    pub attached: bool,
    pub being_deleted: bool,
    /// `status.attachError.message`.
    pub attach_error: Option<String>,
    pub attachment_metadata: BTreeMap<String, String>,
}

/// A PersistentVolume that the attach-detach controller and the driver's attacher
/// attach to the node before the kubelet stages it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Attachment {
    /// The volume's name in the Node's `volumesInUse` and `volumesAttached`:
    /// `kubernetes.io/csi/<driver>^<volume handle>`.
    pub unique_name: String,
    /// The VolumeAttachment's name: `csi-<sha256(handle + driver + node)>`.
    pub id: String,
}

/// Upstream's `getAttachmentName`.
pub fn attachment_name(volume_handle: &str, driver: &str, node_name: &str) -> String {
    format!(
        "csi-{}",
        sha256_hex(&format!("{volume_handle}{driver}{node_name}"))
    )
}

/// The attachment a claim's CSI PersistentVolume needs on `node_name`; `None` when its
/// driver's CSIDriver says `attachRequired: false` (no CSIDriver: required, as
/// upstream's default).
pub fn attachment(
    source: &CsiPersistentSource,
    node_name: &str,
    objects: &PodObjects,
) -> Option<Attachment> {
    let required = match objects.csi_drivers.get(&source.driver) {
        Some(Fetched::Found(d)) => d.attach_required,
        _ => true,
    };
    required.then(|| Attachment {
        unique_name: persistent_volume_name(&source.driver, &source.volume_handle),
        id: attachment_name(&source.volume_handle, &source.driver, node_name),
    })
}

/// Whether `attachment` may be staged now: reported in the Node's `volumesInUse`
/// (so the attach-detach controller does not detach it under a mount) and its
/// VolumeAttachment attached; the attacher's metadata when so, upstream's message when
/// not.
fn attached(
    volume_name: &str,
    source: &CsiPersistentSource,
    attachment: &Attachment,
    facts: &PodFacts,
    objects: &PodObjects,
) -> Result<BTreeMap<String, String>, String> {
    if !facts
        .volumes_reported_in_use
        .contains(&attachment.unique_name)
    {
        return Err(format!(
            "Volume has not been added to the list of VolumesInUse in the node's volume status for volume {volume_name:?}"
        ));
    }
    let wait_failed = |why: String| {
        format!("MountVolume.WaitForAttach failed for volume {volume_name:?} : {why}")
    };
    match objects.volume_attachments.get(&attachment.id) {
        Some(Fetched::Found(a)) if a.being_deleted => {
            Err(wait_failed("volume attachment is being deleted".to_owned()))
        }
        Some(Fetched::Found(a)) if a.attached => Ok(a.attachment_metadata.clone()),
        Some(Fetched::Found(VolumeAttachmentData {
            attach_error: Some(message),
            ..
        })) => Err(wait_failed(message.clone())),
        // The app waited for it (upstream's `WaitForAttach`).
        Some(Fetched::Found(_)) => Err(wait_failed(format!(
            "timed out waiting for external-attacher of {} CSI driver to attach volume {}",
            source.driver, source.volume_handle
        ))),
        Some(Fetched::NotFound) | None => Err(wait_failed(format!(
            "volume attachment {} not found (the attach-detach controller has not made it yet)",
            attachment.id
        ))),
        Some(Fetched::Failed(reason)) => Err(wait_failed(format!(
            "volume has GET error for volume attachment {}: {reason}",
            attachment.id
        ))),
    }
}

/// Upstream's `makeVolumeHandle`.
pub fn make_volume_handle(pod_uid: &str, volume_name: &str) -> String {
    format!("csi-{}", sha256_hex(&format!("{pod_uid}{volume_name}")))
}

fn go_quoted(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|v| format!("{v:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// What publishing `source`, the pod's volume `name` in `volume_dir`, takes; upstream's
/// message when it cannot be.
///
/// # Errors
/// The CSIDriver could not be read or does not allow inline volumes; the publish
/// secret is missing.
pub fn plan_inline(
    pod: &Pod,
    name: &str,
    source: &CsiVolumeSource,
    volume_dir: PathBuf,
    node_name: &str,
    objects: &PodObjects,
) -> Result<CsiPublish, String> {
    let driver = driver_data(objects, &source.driver)?;
    let modes = if driver.volume_lifecycle_modes.is_empty() {
        vec![PERSISTENT.to_owned()]
    } else {
        driver.volume_lifecycle_modes.clone()
    };
    if !modes.iter().any(|m| m == EPHEMERAL) {
        return Err(format!(
            "kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: volume mode {EPHEMERAL:?} not supported by driver {} (only supports {})",
            source.driver,
            go_quoted(&modes)
        ));
    }
    let mut secrets = BTreeMap::new();
    if let Some(reference) = &source.node_publish_secret_ref {
        let ns = &pod.metadata.namespace;
        match objects.secrets.get(&reference.name) {
            Some(Fetched::Found(secret)) => secrets = secret_strings(secret),
            Some(Fetched::NotFound) | None => {
                return Err(format!(
                    "kubernetes.io/csi: mounter.SetUpAt failed to get node publish secret: fetching NodePublishSecretRef {ns}/{} failed: secrets {:?} not found",
                    reference.name, reference.name
                ))
            }
            Some(Fetched::Failed(reason)) => {
                return Err(format!(
                    "kubernetes.io/csi: mounter.SetUpAt failed to get node publish secret: fetching NodePublishSecretRef {ns}/{} failed: {reason}",
                    reference.name
                ))
            }
        }
    }
    let mut volume_context = source.volume_attributes.clone();
    if driver.pod_info_on_mount {
        volume_context.extend(pod_info(pod, true));
    }
    let fs_type = source.fs_type.clone().unwrap_or_default();
    let handle = make_volume_handle(&pod.metadata.uid, name);
    let target_path = volume_dir.join(MOUNT_DIR);
    // Never for a read-only volume; an inline volume is ReadWriteOnce.
    let policy_allows = kubelet_applies_fs_group(
        &driver.fs_group_policy,
        &fs_type,
        CsiAccessMode::SingleNodeWriter,
    );
    let owner = (policy_allows && !source.read_only)
        .then(|| VolumeSetup::fs_group_walk(pod, target_path.clone()))
        .flatten();
    let vol_data = BTreeMap::from([
        ("specVolID".to_owned(), name.to_owned()),
        ("volumeHandle".to_owned(), handle.clone()),
        ("driverName".to_owned(), source.driver.clone()),
        ("nodeName".to_owned(), node_name.to_owned()),
        ("volumeLifecycleMode".to_owned(), EPHEMERAL.to_owned()),
    ]);
    Ok(CsiPublish {
        driver: source.driver.clone(),
        volume_handle: handle,
        access_mode: CsiAccessMode::SingleNodeWriter,
        stage: None,
        volume_dir,
        target_path,
        block: None,
        readonly: source.read_only,
        fs_type,
        volume_context,
        secrets: Ok(secrets),
        expand_secrets: Ok(BTreeMap::new()),
        mount_flags: Vec::new(),
        fs_group: pod_fs_group(pod),
        volume_mount_group: String::new(),
        owner,
        vol_data,
        publish_context: BTreeMap::new(),
    })
}

fn sha256_hex(text: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Upstream's `makeDeviceMountPath`: where a PersistentVolume is staged.
pub fn staging_path(root_dir: &Path, driver: &str, volume_handle: &str) -> PathBuf {
    root_dir
        .join("plugins/kubernetes.io/csi")
        .join(driver)
        .join(sha256_hex(volume_handle))
        .join("globalmount")
}

/// Where the kubelet keeps CSI Block volumes (upstream's `GetVolumeDevicePluginDir`).
const VOLUME_DEVICES_DIR: &str = "plugins/kubernetes.io/csi/volumeDevices";
/// The pod's folder of links to its Block volumes' devices.
pub const POD_VOLUME_DEVICES_DIR: &str = "volumeDevices";

/// A Block PersistentVolume's places on the node, as upstream's CSI block mapper's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockPaths {
    /// `<root>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>`.
    pub staging: PathBuf,
    /// `.../volumeDevices/publish/<pv>`: a file per pod, named by its UID.
    pub publish_dir: PathBuf,
    /// `.../volumeDevices/<pv>/data`: its `vol_data.json`.
    pub data_dir: PathBuf,
    /// `.../volumeDevices/<pv>/dev` (upstream's global map path): a bind mount of the
    /// device per pod, named by its UID.
    pub global_map_dir: PathBuf,
}

impl BlockPaths {
    pub fn of(root_dir: &Path, volume_name: &str) -> BlockPaths {
        let dir = root_dir.join(VOLUME_DEVICES_DIR);
        BlockPaths {
            staging: dir.join("staging").join(volume_name),
            publish_dir: dir.join("publish").join(volume_name),
            data_dir: dir.join(volume_name).join("data"),
            global_map_dir: dir.join(volume_name).join("dev"),
        }
    }

    /// Where the volume is mapped for the pod `pod_uid`.
    pub fn map_for(&self, root_dir: &Path, volume_name: &str, pod_uid: &str) -> BlockMap {
        BlockMap {
            pod_link: pod_device_links_dir(root_dir, pod_uid).join(volume_name),
            global_map: self.global_map_dir.join(pod_uid),
        }
    }

    /// The folders removed once the volume is unstaged: its staging, publish and global
    /// map folders and its own (only its data folder for a volume named `staging` or
    /// `publish`, whose own folder is every volume's).
    pub fn after_unstage(&self) -> [PathBuf; 4] {
        let own = self
            .data_dir
            .parent()
            .filter(|own| {
                !own.file_name()
                    .is_some_and(|name| name == "staging" || name == "publish")
            })
            .unwrap_or(&self.data_dir);
        [
            self.staging.clone(),
            self.publish_dir.clone(),
            self.global_map_dir.clone(),
            own.to_path_buf(),
        ]
    }
}

/// `<root>/pods/<uid>/volumeDevices/kubernetes.io~csi`: the pod's links to its Block
/// volumes' devices, named after the PersistentVolumes.
pub fn pod_device_links_dir(root_dir: &Path, pod_uid: &str) -> PathBuf {
    root_dir
        .join("pods")
        .join(pod_uid)
        .join(POD_VOLUME_DEVICES_DIR)
        .join(CSI_PLUGIN_DIR)
}

/// What the driver's CSIDriver says, defaults where there is none.
fn driver_data(objects: &PodObjects, driver: &str) -> Result<CsiDriverData, String> {
    match objects.csi_drivers.get(driver) {
        Some(Fetched::Found(d)) => Ok(d.clone()),
        Some(Fetched::NotFound) | None => Ok(CsiDriverData::default()),
        Some(Fetched::Failed(reason)) => Err(format!(
            "kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: {reason}"
        )),
    }
}

/// Upstream's `supportsFSGroup`: whether the kubelet gives the volume to the pod's
/// `fsGroup` after publishing it.
fn kubelet_applies_fs_group(policy: &str, fs_type: &str, access: CsiAccessMode) -> bool {
    match policy {
        "File" => true,
        "None" => false,
        _ => !fs_type.is_empty() && access == CsiAccessMode::SingleNodeWriter,
    }
}

/// What publishing the claimed CSI PersistentVolume `claimed` (its source `source`)
/// takes: staged at its global path (when the driver stages), then published in the
/// pod's folder.
///
/// # Errors
/// Upstream's message when the driver does not allow Persistent volumes, the volume is
/// not attached yet, or its publish Secret cannot be read.
pub fn plan_persistent(
    pod: &Pod,
    claimed: &ClaimedVolume,
    source: &CsiPersistentSource,
    root_dir: &Path,
    facts: &PodFacts,
    objects: &PodObjects,
) -> Result<CsiPublish, String> {
    let volume_name = claimed.volume_name.as_str();
    let read_only = claimed.read_only || source.read_only;
    let node_name = facts.node_name.as_str();
    let driver = driver_data(objects, &source.driver)?;
    if !driver.volume_lifecycle_modes.is_empty()
        && !driver
            .volume_lifecycle_modes
            .iter()
            .any(|m| m == PERSISTENT)
    {
        return Err(format!(
            "kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: volume mode {PERSISTENT:?} not supported by driver {} (only supports {})",
            source.driver,
            go_quoted(&driver.volume_lifecycle_modes)
        ));
    }
    // Upstream attaches such volumes first: the attach-detach controller makes the
    // VolumeAttachment and the driver's attacher completes it.
    let publish_context = match attachment(source, node_name, objects) {
        Some(needed) => attached(volume_name, source, &needed, facts, objects)?,
        None => BTreeMap::new(),
    };
    let secrets_of = |field: &str, reference: &Option<SecretReference>| {
        reference
            .as_ref()
            .map_or(Ok(BTreeMap::new()), |r| credentials(field, r, objects))
    };
    let secrets = secrets_of("NodePublishSecretRef", &source.node_publish_secret_ref);
    let expand_secrets = secrets_of("NodeExpandSecretRef", &source.node_expand_secret_ref);
    let access_mode = CsiAccessMode::of(claimed.access_modes.first().map_or("", String::as_str));
    let mut volume_context = source.volume_attributes.clone();
    if driver.pod_info_on_mount {
        volume_context.extend(pod_info(pod, false));
    }
    let block = (claimed.volume_mode == crate::domain::volumes::claim::BLOCK)
        .then(|| BlockPaths::of(root_dir, volume_name));
    let (volume_dir, target_path) = match &block {
        Some(paths) => (
            paths.data_dir.clone(),
            paths.publish_dir.join(&pod.metadata.uid),
        ),
        None => {
            let dir = crate::domain::volumes::volume_dir(
                root_dir,
                &pod.metadata.uid,
                CSI_PLUGIN_DIR,
                volume_name,
            );
            let target = dir.join(MOUNT_DIR);
            (dir, target)
        }
    };
    // A device has no file system for the kubelet to give to the fsGroup.
    let owner = (block.is_none()
        && !read_only
        && kubelet_applies_fs_group(&driver.fs_group_policy, &source.fs_type, access_mode))
    .then(|| VolumeSetup::fs_group_walk(pod, target_path.clone()))
    .flatten();
    let handle = source.volume_handle.clone();
    let attachment = attachment_name(&handle, &source.driver, node_name);
    let mut vol_data = BTreeMap::from([
        ("specVolID".to_owned(), volume_name.to_owned()),
        ("volumeHandle".to_owned(), handle.clone()),
        ("driverName".to_owned(), source.driver.clone()),
        ("nodeName".to_owned(), node_name.to_owned()),
        ("attachmentID".to_owned(), attachment),
    ]);
    let (staging, stage_vol_data) = match &block {
        // One file says what the Block volume is, for its stage and each pod's publish.
        Some(paths) => (paths.staging.clone(), vol_data.clone()),
        None => {
            vol_data.insert("volumeLifecycleMode".to_owned(), PERSISTENT.to_owned());
            let data = BTreeMap::from([
                ("driverName".to_owned(), source.driver.clone()),
                ("volumeHandle".to_owned(), handle.clone()),
            ]);
            (staging_path(root_dir, &source.driver, &handle), data)
        }
    };
    let stage = CsiStage {
        vol_data_file: match &block {
            Some(paths) => paths.data_dir.join(VOL_DATA_FILE),
            None => staging.parent().unwrap_or(&staging).join(VOL_DATA_FILE),
        },
        staging_path: staging,
        vol_data: stage_vol_data,
        volume_context: source.volume_attributes.clone(),
        secrets: secrets_of("NodeStageSecretRef", &source.node_stage_secret_ref),
    };
    Ok(CsiPublish {
        driver: source.driver.clone(),
        volume_handle: handle,
        access_mode,
        stage: Some(stage),
        volume_dir,
        block: block
            .as_ref()
            .map(|paths| paths.map_for(root_dir, volume_name, &pod.metadata.uid)),
        target_path,
        readonly: read_only,
        fs_type: source.fs_type.clone(),
        volume_context,
        secrets,
        expand_secrets,
        mount_flags: claimed.mount_options.clone(),
        fs_group: pod_fs_group(pod),
        volume_mount_group: String::new(),
        owner,
        vol_data,
        publish_context,
    })
}

fn pod_fs_group(pod: &Pod) -> Option<i64> {
    pod.spec.security_context.as_ref().and_then(|s| s.fs_group)
}

/// Upstream's `DelegateFSGroupToCSIDriver`: a driver with the VOLUME_MOUNT_GROUP
/// capability gets the pod's `fsGroup` as the mount's `volume_mount_group` (stage and
/// publish) and applies it itself, so the kubelet's ownership walk is left out.
pub fn with_mount_group(
    mut publish: CsiPublish,
    capabilities: super::NodeCapabilities,
) -> CsiPublish {
    if capabilities.volume_mount_group && publish.block.is_none() {
        if let Some(group) = publish.fs_group {
            publish.volume_mount_group = group.to_string();
        }
        publish.owner = None;
    }
    publish
}

/// A Secret's data as a driver's credentials (upstream's `getCredentialsFromSecret`).
fn secret_strings(secret: &SecretData) -> BTreeMap<String, String> {
    secret
        .data
        .iter()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

/// The credentials in the Secret a PersistentVolume's `field` names, or upstream's
/// message when it cannot be read.
fn credentials(
    field: &str,
    reference: &SecretReference,
    objects: &PodObjects,
) -> Result<BTreeMap<String, String>, String> {
    let SecretReference { namespace, name } = reference;
    let context = if field == "NodeExpandSecretRef" {
        format!("expander.NodeExpand failed to get {field} {namespace}/{name}:")
    } else {
        format!("fetching {field} {namespace}/{name} failed:")
    };
    let failed = |reason: &str| {
        format!("{context} kubernetes.io/csi: failed to find the secret {name} in the namespace {namespace} with error: {reason}")
    };
    match objects.volume_secrets.get(reference) {
        Some(Fetched::Found(secret)) => Ok(secret_strings(secret)),
        Some(Fetched::NotFound) | None => Err(failed(&format!("secrets {name:?} not found"))),
        Some(Fetched::Failed(reason)) => Err(failed(reason)),
    }
}

/// The pod's identity for a driver that asks for it (`podInfoOnMount`).
fn pod_info(pod: &Pod, ephemeral: bool) -> BTreeMap<String, String> {
    let m = &pod.metadata;
    let service_account = if pod.spec.service_account_name.is_empty() {
        "default"
    } else {
        pod.spec.service_account_name.as_str()
    };
    [
        ("csi.storage.k8s.io/pod.name", m.name.as_str()),
        ("csi.storage.k8s.io/pod.namespace", m.namespace.as_str()),
        ("csi.storage.k8s.io/pod.uid", m.uid.as_str()),
        ("csi.storage.k8s.io/serviceAccount.name", service_account),
        (
            "csi.storage.k8s.io/ephemeral",
            if ephemeral { "true" } else { "false" },
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// A published volume found in its folder: what its teardown needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedVolume {
    pub driver: String,
    pub volume_handle: String,
    pub target_path: PathBuf,
}

/// `vol_data.json` of the volume folder `volume_dir` read back; `None` when it does not
/// say which driver and volume.
pub fn published_volume(volume_dir: &std::path::Path, vol_data: &[u8]) -> Option<PublishedVolume> {
    let data: BTreeMap<String, String> = serde_json::from_slice(vol_data).ok()?;
    let driver = data.get("driverName").filter(|d| !d.is_empty())?.clone();
    let volume_handle = data.get("volumeHandle").filter(|h| !h.is_empty())?.clone();
    Some(PublishedVolume {
        driver,
        volume_handle,
        target_path: volume_dir.join(MOUNT_DIR),
    })
}

/// A Block volume published for the pod `pod_uid`, found by its link in the pod's
/// folder (named after the PersistentVolume `volume_name`) and its `vol_data.json`
/// (`vol_data`): what its teardown needs; `None` when the data does not say which
/// driver and volume.
pub fn published_block_volume(
    root_dir: &Path,
    volume_name: &str,
    pod_uid: &str,
    vol_data: &[u8],
) -> Option<PublishedVolume> {
    let paths = BlockPaths::of(root_dir, volume_name);
    published_volume(&paths.data_dir, vol_data).map(|v| PublishedVolume {
        target_path: paths.publish_dir.join(pod_uid),
        ..v
    })
}
