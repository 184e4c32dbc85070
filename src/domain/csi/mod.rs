//! CSI node plugins (issue 33), as pure decisions: which registration a plugin's
//! `GetInfo` answer allows (upstream's `RegistrationHandler.validateVersions`), and what
//! the registered drivers make of the Node (the `csi.volume.kubernetes.io/nodeid`
//! annotation, topology labels) and of its `CSINode` object (upstream's
//! `nodeInfoManager`). The sockets, the gRPC calls and the API writes are the app's.

pub mod volume;

use std::collections::BTreeMap;

/// The plugin type a CSI driver's registrar announces.
pub const CSI_PLUGIN_TYPE: &str = "CSIPlugin";
/// The Node annotation mapping each registered driver to its node ID (JSON).
pub const NODE_ID_ANNOTATION: &str = "csi.volume.kubernetes.io/nodeid";
/// The folder under the root directory where plugins put their registration sockets.
pub const PLUGINS_REGISTRY_DIR: &str = "plugins_registry";
/// The folder under the root directory where drivers keep their sockets and state.
pub const PLUGINS_DIR: &str = "plugins";

/// A plugin's answer to `GetInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginInfo {
    /// `CSIPlugin` or `DevicePlugin`.
    pub kind: String,
    pub name: String,
    /// The driver's own socket (`unix://` optional).
    pub endpoint: String,
    pub supported_versions: Vec<String>,
}

/// A version as upstream's `ParseGeneric` reads it (`1`, `1.2`, `v1.2.3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u64, pub u64, pub u64);

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

fn parse_version(text: &str) -> Option<Version> {
    let text = text.trim().trim_start_matches('v');
    let mut parts = text.split('.');
    let mut next = || -> Option<u64> {
        match parts.next() {
            Some(p) => p.parse().ok(),
            None => Some(0),
        }
    };
    let v = Version(next()?, next()?, next()?);
    parts.next().is_none().then_some(v)
}

/// Why a plugin is not registered, in upstream's words (its `kubernetes.io/csi: `
/// prefix included); the plugin is told through `NotifyRegistrationStatus`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    #[error("no handler registered for plugin type: {kind} at socket {socket}")]
    NoHandler { kind: String, socket: String },
    #[error("kubernetes.io/csi: RegisterPlugin for CSI driver {name:?} failed. Plugin returned an empty list for supported versions")]
    NoVersions { name: String },
    #[error("kubernetes.io/csi: RegisterPlugin for CSI driver {name:?} failed. None of the versions specified {} are supported. err={reason}", go_quoted(.versions))]
    Unsupported {
        name: String,
        versions: Vec<String>,
        reason: String,
    },
    #[error("kubernetes.io/csi: RegisterPlugin for CSI driver {name:?} failed. Another driver with the same name is already registered with a higher supported version: {existing:?}")]
    AlreadyRegistered { name: String, existing: String },
    #[error("the CSI driver's name is empty")]
    NoName,
}

/// A CSI driver as registered: its name, socket and highest v1 version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Driver {
    pub name: String,
    /// The driver's socket path (without `unix://`).
    pub endpoint: String,
    pub version: Version,
}

/// Go's `%q` of a string list: `["1.0.0" "2.0.0"]`.
fn go_quoted(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|v| format!("{v:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// Upstream's `highestSupportedVersion`: the highest version of major at most 1, which
/// must be 1.
///
/// # Errors
/// Upstream's reason.
pub fn highest_supported_version(versions: &[String]) -> Result<Version, String> {
    let highest = versions
        .iter()
        .filter_map(|v| parse_version(v))
        .filter(|v| v.0 <= 1)
        .max()
        .ok_or_else(|| {
            format!(
                "could not find a highest supported version from versions ([{}]) reported by this driver",
                versions.join(" ")
            )
        })?;
    if highest.0 != 1 {
        return Err(format!(
            "highest supported version reported by driver is {highest}, must be v1.x"
        ));
    }
    Ok(highest)
}

/// Whether the plugin at `socket` answering `info` may register, `registered` being the
/// drivers registered from other sockets.
///
/// # Errors
/// A [`RegistrationError`] naming the reason.
pub fn validate_registration(
    socket: &str,
    info: &PluginInfo,
    registered: &[Driver],
) -> Result<Driver, RegistrationError> {
    if info.kind != CSI_PLUGIN_TYPE {
        return Err(RegistrationError::NoHandler {
            kind: info.kind.clone(),
            socket: socket.to_owned(),
        });
    }
    if info.name.is_empty() {
        return Err(RegistrationError::NoName);
    }
    if info.supported_versions.is_empty() {
        return Err(RegistrationError::NoVersions {
            name: info.name.clone(),
        });
    }
    let version = highest_supported_version(&info.supported_versions).map_err(|reason| {
        RegistrationError::Unsupported {
            name: info.name.clone(),
            versions: info.supported_versions.clone(),
            reason,
        }
    })?;
    if let Some(existing) = registered.iter().find(|d| d.name == info.name) {
        if existing.version >= version {
            return Err(RegistrationError::AlreadyRegistered {
                name: info.name.clone(),
                existing: existing.version.to_string(),
            });
        }
    }
    // A driver registered by the registrar with the plugin's socket as its endpoint.
    let endpoint = if info.endpoint.is_empty() {
        socket
    } else {
        info.endpoint.as_str()
    };
    Ok(Driver {
        name: info.name.clone(),
        endpoint: endpoint.trim_start_matches("unix://").to_owned(),
        version,
    })
}

/// What a driver's node service offers (`NodeGetCapabilities`), as far as the kubelet
/// asks before publishing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCapabilities {
    /// STAGE_UNSTAGE_VOLUME: a PersistentVolume is staged before it is published.
    pub stage_unstage: bool,
    /// VOLUME_MOUNT_GROUP: the driver applies the pod's fsGroup itself.
    pub volume_mount_group: bool,
}

/// A driver's answer to `NodeGetInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverNodeInfo {
    pub node_id: String,
    pub max_volumes_per_node: i64,
    /// The topology segments: each becomes a Node label and a CSINode topology key.
    pub topology: BTreeMap<String, String>,
}

/// One driver of a `CSINode`'s spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiNodeDriver {
    pub name: String,
    pub node_id: String,
    /// Sorted.
    pub topology_keys: Vec<String>,
    /// `allocatable.count`: the driver's volume limit, when it gives one.
    pub allocatable_count: Option<i32>,
}

/// The CSINode's drivers with `name` installed as `info` says (upstream's
/// `installDriverToCSINode`); `None` when they already say so.
pub fn install_driver(
    drivers: &[CsiNodeDriver],
    name: &str,
    info: &DriverNodeInfo,
) -> Option<Vec<CsiNodeDriver>> {
    let topology_keys: Vec<String> = info.topology.keys().cloned().collect();
    let allocatable_count = (info.max_volumes_per_node > 0)
        .then(|| i32::try_from(info.max_volumes_per_node).unwrap_or(i32::MAX));
    let wanted = CsiNodeDriver {
        name: name.to_owned(),
        node_id: info.node_id.clone(),
        topology_keys,
        allocatable_count,
    };
    if drivers.iter().any(|d| {
        d.name == name && d.node_id == wanted.node_id && d.topology_keys == wanted.topology_keys
    }) {
        return None;
    }
    let mut out: Vec<CsiNodeDriver> = drivers.iter().filter(|d| d.name != name).cloned().collect();
    out.push(wanted);
    Some(out)
}

/// The CSINode's drivers without `name`; `None` when it is not there.
pub fn uninstall_driver(drivers: &[CsiNodeDriver], name: &str) -> Option<Vec<CsiNodeDriver>> {
    drivers
        .iter()
        .any(|d| d.name == name)
        .then(|| drivers.iter().filter(|d| d.name != name).cloned().collect())
}

/// The Node's `csi.volume.kubernetes.io/nodeid` value with `name` mapped to `node_id`
/// (`None`: removed); `Ok(None)` when the annotation is to be removed, and the value
/// unchanged when it already says so.
///
/// # Errors
/// The existing value is not a JSON object of strings (upstream's words).
pub fn node_id_annotation(
    existing: Option<&str>,
    name: &str,
    node_id: Option<&str>,
) -> Result<Option<String>, String> {
    let mut map: BTreeMap<String, String> = match existing.filter(|v| !v.is_empty()) {
        Some(text) => serde_json::from_str(text).map_err(|e| {
            format!(
                "failed to parse node's {NODE_ID_ANNOTATION:?} annotation value ({text:?}) err={e}"
            )
        })?,
        None => BTreeMap::new(),
    };
    match node_id {
        Some(id) => {
            map.insert(name.to_owned(), id.to_owned());
        }
        None => {
            map.remove(name);
        }
    }
    if map.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(&map)
        .map(Some)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
