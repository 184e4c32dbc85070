//! Volumes and environment from API objects (issue 13), as pure decisions: where each
//! volume of a pod lives (`<root-dir>/pods/<uid>/volumes/<plugin>/<name>`, upstream's
//! layout), what each one holds (`payload`: the files of a configMap, secret,
//! downwardAPI or projected volume, with their modes), the downward API values
//! (`downward`), a container's environment from its references (`env`), when a
//! service-account token is due for refresh (`token`), and what the kubelet does with
//! each volume (`plan`). The I/O (fetching objects, writing files atomically, mounting
//! tmpfs) is the app's.

pub mod claim;
pub mod downward;
pub mod env;
pub mod payload;
pub mod plan;
pub mod propagation;
pub mod services;
pub mod subpath;
pub mod token;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::domain::pod::Volume;

pub use plan::{plan_volumes, VolumeAction, VolumeError, VolumePlan};

/// Upstream's plugin folder names (`kubernetes.io/<plugin>` with `/` as `~`).
pub const EMPTY_DIR_PLUGIN: &str = "kubernetes.io~empty-dir";
pub const CONFIG_MAP_PLUGIN: &str = "kubernetes.io~configmap";
pub const SECRET_PLUGIN: &str = "kubernetes.io~secret";
pub const DOWNWARD_API_PLUGIN: &str = "kubernetes.io~downward-api";
pub const PROJECTED_PLUGIN: &str = "kubernetes.io~projected";

/// Where a service-account token volume is mounted (upstream's
/// `DefaultAPITokenMountPath`).
pub const SERVICE_ACCOUNT_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The kind of a volume, as far as the kubelet is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeKind {
    HostPath,
    EmptyDir,
    ConfigMap,
    Secret,
    DownwardApi,
    Projected,
    /// A PersistentVolumeClaim: the source of the PersistentVolume bound to it.
    PersistentVolumeClaim,
    /// A CSI ephemeral inline volume.
    Csi,
    /// A source the kubelet does not set up, by its field name (`csi`, `nfs` ...);
    /// empty when the volume names no source at all.
    Unsupported(String),
}

impl VolumeKind {
    pub fn of(volume: &Volume) -> VolumeKind {
        if volume.host_path.is_some() {
            VolumeKind::HostPath
        } else if volume.empty_dir.is_some() {
            VolumeKind::EmptyDir
        } else if volume.config_map.is_some() {
            VolumeKind::ConfigMap
        } else if volume.secret.is_some() {
            VolumeKind::Secret
        } else if volume.downward_api.is_some() {
            VolumeKind::DownwardApi
        } else if volume.projected.is_some() {
            VolumeKind::Projected
        } else if volume.persistent_volume_claim.is_some() || volume.ephemeral.is_some() {
            VolumeKind::PersistentVolumeClaim
        } else if volume.csi.is_some() {
            VolumeKind::Csi
        } else {
            VolumeKind::Unsupported(
                volume
                    .unsupported
                    .keys()
                    .next()
                    .cloned()
                    .unwrap_or_default(),
            )
        }
    }

    /// The plugin folder under the pod's `volumes`; `None` for hostPath (it is the host's
    /// folder) and unsupported kinds.
    pub fn plugin_dir(&self) -> Option<&'static str> {
        match self {
            VolumeKind::EmptyDir => Some(EMPTY_DIR_PLUGIN),
            VolumeKind::ConfigMap => Some(CONFIG_MAP_PLUGIN),
            VolumeKind::Secret => Some(SECRET_PLUGIN),
            VolumeKind::DownwardApi => Some(DOWNWARD_API_PLUGIN),
            VolumeKind::Projected => Some(PROJECTED_PLUGIN),
            VolumeKind::Csi => Some(crate::domain::csi::volume::CSI_PLUGIN_DIR),
            VolumeKind::HostPath
            | VolumeKind::PersistentVolumeClaim
            | VolumeKind::Unsupported(_) => None,
        }
    }
}

/// `<root_dir>/pods/<uid>/volumes`
pub fn pod_volumes_dir(root_dir: &Path, pod_uid: &str) -> PathBuf {
    root_dir.join("pods").join(pod_uid).join("volumes")
}

/// `<root_dir>/pods/<uid>/volumes/<plugin>/<name>`
pub fn volume_dir(root_dir: &Path, pod_uid: &str, plugin: &str, name: &str) -> PathBuf {
    pod_volumes_dir(root_dir, pod_uid).join(plugin).join(name)
}

/// The host path a container's mount of `volume` binds: the hostPath itself, the path
/// of the PersistentVolume its claim is bound to, or the volume's folder; `None` for an
/// unsupported kind or a claim that gives no volume. Whether every mount of it is
/// read-only (a claim's `readOnly`) comes with it.
pub fn volume_source_path(
    root_dir: &Path,
    pod: &crate::domain::pod::Pod,
    volume: &Volume,
    objects: &PodObjects,
) -> Option<(PathBuf, bool)> {
    if let Some(host) = &volume.host_path {
        return Some((PathBuf::from(&host.path), false));
    }
    if let Some(claimed) = claim::resolve_claim(pod, volume, objects) {
        let claimed = claimed.ok()?;
        if let claim::PersistentVolumeSource::Csi(source) = &claimed.source {
            // The driver publishes it in the pod's folder named after the volume.
            let dir = volume_dir(
                root_dir,
                &pod.metadata.uid,
                crate::domain::csi::volume::CSI_PLUGIN_DIR,
                &claimed.volume_name,
            );
            return Some((
                dir.join(crate::domain::csi::volume::MOUNT_DIR),
                claimed.read_only || source.read_only,
            ));
        }
        return Some((claimed.host_path()?, claimed.read_only));
    }
    let kind = VolumeKind::of(volume);
    let dir = volume_dir(
        root_dir,
        &pod.metadata.uid,
        kind.plugin_dir()?,
        &volume.name,
    );
    if kind == VolumeKind::Csi {
        // The driver mounts it in the folder's `mount`; read-only as the source says.
        let read_only = volume.csi.as_ref().is_some_and(|c| c.read_only);
        return Some((dir.join(crate::domain::csi::volume::MOUNT_DIR), read_only));
    }
    Some((dir, false))
}

/// The link a container's device of `volume` is given from (a claim's Block volume,
/// which its CSI driver publishes), and whether it is read-only; `None` when the volume
/// gives no device.
pub fn volume_device_source(
    root_dir: &Path,
    pod: &crate::domain::pod::Pod,
    volume: &Volume,
    objects: &PodObjects,
) -> Option<(PathBuf, bool)> {
    let claimed = claim::resolve_claim(pod, volume, objects)?.ok()?;
    let claim::PersistentVolumeSource::Csi(source) = &claimed.source else {
        return None;
    };
    (claimed.volume_mode == claim::BLOCK).then(|| {
        (
            crate::domain::csi::volume::pod_device_links_dir(root_dir, &pod.metadata.uid)
                .join(&claimed.volume_name),
            claimed.read_only || source.read_only,
        )
    })
}

/// A ConfigMap's content: `data` (text) and `binaryData`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigMapData {
    pub data: BTreeMap<String, String>,
    pub binary_data: BTreeMap<String, Vec<u8>>,
}

/// A Secret's content (decoded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretData {
    pub data: BTreeMap<String, Vec<u8>>,
    /// `type`, e.g. `kubernetes.io/dockerconfigjson`.
    pub kind: String,
}

/// An object the kubelet asked the API server for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched<T> {
    Found(T),
    NotFound,
    /// The call failed: the error's message.
    Failed(String),
}

/// A service-account token request: the audience (empty: the API server's) and
/// lifetime. Tokens are bound to the pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenKey {
    pub audience: String,
    pub expiration_seconds: i64,
}

/// The API objects a pod's volumes and environment reference, as fetched. A name absent
/// from a map was not fetched: there is no API client (upstream's "no kubeClient").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodObjects {
    pub config_maps: BTreeMap<String, Fetched<ConfigMapData>>,
    pub secrets: BTreeMap<String, Fetched<SecretData>>,
    pub tokens: BTreeMap<TokenKey, Fetched<String>>,
    /// The pod's RuntimeClass (cluster-scoped), by name.
    pub runtime_classes: BTreeMap<String, Fetched<RuntimeClassData>>,
    /// The claims of the pod's volumes, by name, and the PersistentVolumes they are
    /// bound to (cluster-scoped), by name.
    pub claims: BTreeMap<String, Fetched<claim::ClaimData>>,
    pub persistent_volumes: BTreeMap<String, Fetched<claim::PersistentVolumeData>>,
    /// The CSIDriver objects of the pod's inline CSI volumes, by name.
    pub csi_drivers: BTreeMap<String, Fetched<crate::domain::csi::volume::CsiDriverData>>,
    /// The VolumeAttachments of the pod's attached CSI volumes, by name.
    pub volume_attachments:
        BTreeMap<String, Fetched<crate::domain::csi::volume::VolumeAttachmentData>>,
    /// The Secrets the pod's claims' PersistentVolumes name for their driver's calls,
    /// by namespace and name.
    pub volume_secrets: BTreeMap<claim::SecretReference, Fetched<SecretData>>,
}

/// What the kubelet reads of a `node.k8s.io/v1` RuntimeClass: the CRI runtime handler
/// (its `overhead` reaches the pod through the API server's admission, as
/// `spec.overhead`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeClassData {
    pub handler: String,
}

/// What the node knows about a pod besides its spec, for the downward API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodFacts {
    pub pod_ip: String,
    pub host_ip: String,
    /// Node allocatable, for `resourceFieldRef` of a limit the container does not set.
    pub allocatable_cpu_milli: i64,
    pub allocatable_memory_bytes: i64,
    /// The Node's name and labels, for a PersistentVolume's node affinity.
    pub node_name: String,
    pub node_labels: BTreeMap<String, String>,
    /// The attached volumes the Node's `volumesInUse` holds (their unique names).
    pub volumes_reported_in_use: std::collections::BTreeSet<String>,
}

impl PodFacts {
    /// The node's facts as `pod` sees them: a host-network pod's IP is the node's (its
    /// sandbox has none; upstream copies the API status's IPs, the node's, into the
    /// runtime's view before making the containers), so `status.podIP` in its env and
    /// downward API files is never blank.
    pub fn for_pod(&self, pod: &crate::domain::pod::Pod) -> PodFacts {
        let mut facts = self.clone();
        if pod.spec.host_network && facts.pod_ip.is_empty() {
            facts.pod_ip.clone_from(&facts.host_ip);
        }
        facts
    }
}

/// Everything besides the spec a pod's volumes and environment are made from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodInputs {
    pub objects: PodObjects,
    pub facts: PodFacts,
    /// Service links (`<NAME>_SERVICE_HOST` ...); empty with `enableServiceLinks: false`.
    pub service_env: BTreeMap<String, String>,
}

/// The ConfigMaps, Secrets and tokens a pod references (volumes, env, envFrom), so the
/// app fetches exactly these (the Node authorizer allows no more).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    pub config_maps: std::collections::BTreeSet<String>,
    pub secrets: std::collections::BTreeSet<String>,
    pub tokens: std::collections::BTreeSet<TokenKey>,
    /// PersistentVolumeClaims; the PersistentVolumes are read once the claims are.
    pub claims: std::collections::BTreeSet<String>,
    /// The CSIDrivers of inline CSI volumes (cluster-scoped).
    pub csi_drivers: std::collections::BTreeSet<String>,
}

/// How long a ConfigMap or Secret read for a pod is used before it is read again, by
/// `configMapAndSecretChangeDetectionStrategy`: `Cache` keeps it for upstream's default
/// TTL (a minute); `Get` reads it on every sync; `Watch` (the default) would see changes
/// as they happen: rkubelet keeps no watches, and reads on every sync instead, so a
/// change reaches the files at the next sync (within `syncFrequency`), as with a watch.
pub fn object_cache_ttl_secs(strategy: Option<&str>) -> u64 {
    match strategy {
        Some("Cache") => 60,
        _ => 0,
    }
}

/// Upstream's default token lifetime when a projection does not say (an hour).
pub const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;

pub fn references(pod: &crate::domain::pod::Pod) -> References {
    let mut refs = References::default();
    for volume in &pod.spec.volumes {
        if let Some(cm) = &volume.config_map {
            refs.config_maps.insert(cm.name.clone());
        }
        if let Some(s) = &volume.secret {
            refs.secrets.insert(s.secret_name.clone());
        }
        if let Some(csi) = &volume.csi {
            refs.csi_drivers.insert(csi.driver.clone());
            if let Some(r) = &csi.node_publish_secret_ref {
                refs.secrets.insert(r.name.clone());
            }
        }
        for source in volume.projected.iter().flat_map(|p| &p.sources) {
            if let Some(cm) = &source.config_map {
                refs.config_maps.insert(cm.name.clone());
            }
            if let Some(s) = &source.secret {
                refs.secrets.insert(s.name.clone());
            }
            if let Some(t) = &source.service_account_token {
                refs.tokens.insert(token::token_key(t));
            }
        }
    }
    refs.claims.extend(claim::claim_names(pod));
    // Pull secrets: the Node authorizer lets a node read those its pods name.
    for reference in &pod.spec.image_pull_secrets {
        refs.secrets.insert(reference.name.clone());
    }
    for c in pod.spec.all_containers() {
        for from in &c.env_from {
            if let Some(r) = &from.config_map_ref {
                refs.config_maps.insert(r.name.clone());
            }
            if let Some(r) = &from.secret_ref {
                refs.secrets.insert(r.name.clone());
            }
        }
        for var in c.env.iter().filter(|v| v.value.is_empty()) {
            let Some(from) = &var.value_from else {
                continue;
            };
            if let Some(r) = &from.config_map_key_ref {
                refs.config_maps.insert(r.name.clone());
            }
            if let Some(r) = &from.secret_key_ref {
                refs.secrets.insert(r.name.clone());
            }
        }
    }
    refs
}

#[cfg(test)]
mod tests;
