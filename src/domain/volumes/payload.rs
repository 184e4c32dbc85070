//! The files of a configMap, secret, downwardAPI or projected volume (upstream's
//! `MakePayload` of each plugin and `CollectData`), the checks the atomic writer makes
//! on their paths, and what changed between two file sets.

use std::collections::BTreeMap;

use super::{downward, ConfigMapData, Fetched, PodFacts, PodObjects, SecretData};
use crate::domain::pod::{
    ConfigMapVolumeSource, DownwardApiVolumeFile, KeyToPath, Pod, ProjectedVolumeSource,
    SecretVolumeSource,
};
use crate::domain::securitycontext::fs_group_mode;

/// Mode of a file when the volume sets none (`0644`, API defaulting's 420).
pub const DEFAULT_MODE: u32 = 0o644;

/// Mode of a projected token with an owner (`fsGroup` or one container user), whatever
/// the volume's `defaultMode`.
const TOKEN_OWNED_MODE: u32 = 0o600;

/// One file: content and permission bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    pub data: Vec<u8>,
    pub mode: u32,
}

/// Relative path (may contain `/`) to file.
pub type Payload = BTreeMap<String, FileProjection>;

/// Who owns the files of a pod's configMap, secret, downwardAPI and projected volumes
/// (upstream's mounter arguments `FsUser` and `FsGroup`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VolumeOwners {
    /// The one user every init and app container runs as (upstream's `FsUserFrom`;
    /// `None` when a container sets none or two differ): owner of a projected token.
    pub fs_user: Option<u32>,
    /// The pod's `fsGroup`: group of every file, folder and link, with its read bits.
    pub fs_group: Option<u32>,
}

impl VolumeOwners {
    pub fn of(pod: &Pod) -> VolumeOwners {
        let pod_sc = pod.spec.security_context.as_ref();
        let pod_user = pod_sc.and_then(|sc| sc.run_as_user);
        let mut fs_user = None;
        // Upstream's `FsUserFrom` leaves ephemeral containers out: a debugger added
        // later does not change who owns the files.
        for container in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
            let user = container
                .security_context
                .as_ref()
                .and_then(|sc| sc.run_as_user)
                .or(pod_user)
                .and_then(|uid| u32::try_from(uid).ok());
            match (user, fs_user) {
                (None, _) => return Self::with_user(pod, None),
                (Some(uid), Some(seen)) if uid != seen => return Self::with_user(pod, None),
                (Some(uid), _) => fs_user = Some(uid),
            }
        }
        Self::with_user(pod, fs_user)
    }

    fn with_user(pod: &Pod, fs_user: Option<u32>) -> VolumeOwners {
        VolumeOwners {
            fs_user,
            fs_group: pod
                .spec
                .security_context
                .as_ref()
                .and_then(|sc| sc.fs_group)
                .and_then(|gid| u32::try_from(gid).ok()),
        }
    }
}

/// What the atomic writer gives a volume's files and folders besides their content and
/// the files' modes (which the payload carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesOwnership {
    /// Group of the volume's folder, everything the writer makes in it and its links
    /// (`fsGroup`); `None`: the kubelet's own.
    pub group: Option<u32>,
    /// Files given to a user (a projected service account token to `fs_user`).
    pub users: BTreeMap<String, u32>,
    /// Mode of the folders the writer makes, and of the volume's folder with a group.
    pub dir_mode: u32,
}

/// Mode of the folders the atomic writer makes, as upstream's.
pub const WRITER_DIR_MODE: u32 = 0o755;

impl Default for FilesOwnership {
    fn default() -> Self {
        FilesOwnership {
            group: None,
            users: BTreeMap::new(),
            dir_mode: WRITER_DIR_MODE,
        }
    }
}

/// Applies `owners` to a volume's files as upstream's `SetVolumeOwnership` leaves them
/// (these volumes are read-only: the group gets read, and search on folders, which are
/// setgid), the files in `user_files` given to `fs_user`. Returns the ownership the
/// writer applies; `payload`'s modes are the final ones, so an unchanged volume compares
/// equal to what is on disk.
pub fn apply_owners(
    payload: &mut Payload,
    owners: VolumeOwners,
    user_files: &[String],
) -> FilesOwnership {
    let mut ownership = FilesOwnership::default();
    if let Some(uid) = owners.fs_user {
        ownership.users = user_files
            .iter()
            .filter(|path| payload.contains_key(*path))
            .map(|path| (path.clone(), uid))
            .collect();
    }
    if let Some(gid) = owners.fs_group {
        ownership.group = Some(gid);
        ownership.dir_mode =
            fs_group_mode(WRITER_DIR_MODE, true, false, true).unwrap_or(WRITER_DIR_MODE);
        for file in payload.values_mut() {
            file.mode = fs_group_mode(file.mode, false, false, true).unwrap_or(file.mode);
        }
    }
    ownership
}

/// Why a volume's files cannot be made, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("configmap {name:?} not found")]
    ConfigMapNotFound { name: String },
    #[error("secret {name:?} not found")]
    SecretNotFound { name: String },
    #[error("couldn't get configMap {namespace}/{name}: {message}")]
    ConfigMapFailed {
        namespace: String,
        name: String,
        message: String,
    },
    #[error("couldn't get secret {namespace}/{name}: {message}")]
    SecretFailed {
        namespace: String,
        name: String,
        message: String,
    },
    #[error("couldn't get configMap {namespace}/{name}, no kubeClient defined")]
    ConfigMapNoClient { namespace: String, name: String },
    #[error("couldn't get secret {namespace}/{name}, no kubeClient defined")]
    SecretNoClient { namespace: String, name: String },
    #[error("configmap references non-existent config key: {key}")]
    MissingConfigMapKey { key: String },
    #[error("references non-existent secret key: {key}")]
    MissingSecretKey { key: String },
    #[error("failed to fetch token: {message}")]
    Token { message: String },
    #[error("{0}")]
    Downward(#[from] downward::DownwardError),
    #[error("invalid path: {problem}: {path}")]
    InvalidPath { path: String, problem: &'static str },
}

fn mode_of(mode: Option<i32>, default: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok())
        .map_or(default, |m| m & 0o7777)
}

/// Upstream's check of a payload path (`validatePath`): relative, no `..` element, not
/// starting with `..`, at most 4096 bytes and 255 per element.
pub fn validate_path(path: &str) -> Result<(), PayloadError> {
    let bad = |problem| {
        Err(PayloadError::InvalidPath {
            path: path.to_owned(),
            problem,
        })
    };
    if path.len() > 4096 {
        return bad("must be less than or equal to 4096 characters");
    }
    if path.starts_with('/') {
        return bad("must be relative path");
    }
    if path.split('/').any(|e| e == "..") {
        return bad("must not contain '..'");
    }
    if path.starts_with("..") {
        return bad("must not start with '..'");
    }
    if path.split('/').any(|e| e.len() > 255) {
        return bad("each element must be less than or equal to 255 characters");
    }
    if path.is_empty() {
        return bad("must not be empty");
    }
    Ok(())
}

/// Every path of `payload` checked.
pub fn validate_payload(payload: &Payload) -> Result<(), PayloadError> {
    payload.keys().try_for_each(|p| validate_path(p))
}

/// Keys to files: every key with `default_mode` when `items` is empty, else each item
/// (a missing key is an error unless `optional`).
fn key_files(
    data: &BTreeMap<String, Vec<u8>>,
    items: &[KeyToPath],
    default_mode: u32,
    optional: bool,
    missing: impl Fn(&str) -> PayloadError,
    out: &mut Payload,
) -> Result<(), PayloadError> {
    if items.is_empty() {
        for (key, value) in data {
            out.insert(
                key.clone(),
                FileProjection {
                    data: value.clone(),
                    mode: default_mode,
                },
            );
        }
        return Ok(());
    }
    for item in items {
        let Some(value) = data.get(&item.key) else {
            if optional {
                continue;
            }
            return Err(missing(&item.key));
        };
        out.insert(
            item.path.clone(),
            FileProjection {
                data: value.clone(),
                mode: mode_of(item.mode, default_mode),
            },
        );
    }
    Ok(())
}

fn config_map_bytes(cm: &ConfigMapData) -> BTreeMap<String, Vec<u8>> {
    let mut all: BTreeMap<String, Vec<u8>> = cm
        .data
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    all.extend(cm.binary_data.iter().map(|(k, v)| (k.clone(), v.clone())));
    all
}

/// The ConfigMap named `name`; `None` when it is absent and `optional` (an empty volume).
fn config_map<'a>(
    pod: &Pod,
    objects: &'a PodObjects,
    name: &str,
    optional: bool,
) -> Result<Option<&'a ConfigMapData>, PayloadError> {
    let namespace = pod.metadata.namespace.clone();
    match objects.config_maps.get(name) {
        Some(Fetched::Found(cm)) => Ok(Some(cm)),
        Some(Fetched::NotFound) if optional => Ok(None),
        Some(Fetched::NotFound) => Err(PayloadError::ConfigMapNotFound { name: name.into() }),
        Some(Fetched::Failed(message)) => Err(PayloadError::ConfigMapFailed {
            namespace,
            name: name.into(),
            message: message.clone(),
        }),
        None => Err(PayloadError::ConfigMapNoClient {
            namespace,
            name: name.into(),
        }),
    }
}

fn secret<'a>(
    pod: &Pod,
    objects: &'a PodObjects,
    name: &str,
    optional: bool,
) -> Result<Option<&'a SecretData>, PayloadError> {
    let namespace = pod.metadata.namespace.clone();
    match objects.secrets.get(name) {
        Some(Fetched::Found(s)) => Ok(Some(s)),
        Some(Fetched::NotFound) if optional => Ok(None),
        Some(Fetched::NotFound) => Err(PayloadError::SecretNotFound { name: name.into() }),
        Some(Fetched::Failed(message)) => Err(PayloadError::SecretFailed {
            namespace,
            name: name.into(),
            message: message.clone(),
        }),
        None => Err(PayloadError::SecretNoClient {
            namespace,
            name: name.into(),
        }),
    }
}

/// A configMap volume's files.
pub fn config_map_payload(
    pod: &Pod,
    source: &ConfigMapVolumeSource,
    objects: &PodObjects,
) -> Result<Payload, PayloadError> {
    let optional = source.optional.unwrap_or(false);
    let default_mode = mode_of(source.default_mode, DEFAULT_MODE);
    let mut out = Payload::new();
    if let Some(cm) = config_map(pod, objects, &source.name, optional)? {
        key_files(
            &config_map_bytes(cm),
            &source.items,
            default_mode,
            optional,
            |key| PayloadError::MissingConfigMapKey { key: key.into() },
            &mut out,
        )?;
    }
    Ok(out)
}

/// A secret volume's files.
pub fn secret_payload(
    pod: &Pod,
    source: &SecretVolumeSource,
    objects: &PodObjects,
) -> Result<Payload, PayloadError> {
    let optional = source.optional.unwrap_or(false);
    let default_mode = mode_of(source.default_mode, DEFAULT_MODE);
    let mut out = Payload::new();
    if let Some(s) = secret(pod, objects, &source.secret_name, optional)? {
        key_files(
            &s.data,
            &source.items,
            default_mode,
            optional,
            |key| PayloadError::MissingSecretKey { key: key.into() },
            &mut out,
        )?;
    }
    Ok(out)
}

/// The files of a downwardAPI volume's (or projection's) items.
pub fn downward_payload(
    pod: &Pod,
    items: &[DownwardApiVolumeFile],
    default_mode: u32,
    facts: &PodFacts,
    out: &mut Payload,
) -> Result<(), PayloadError> {
    for item in items {
        let value = if let Some(field) = &item.field_ref {
            downward::field_value(pod, &field.field_path, facts)?
        } else if let Some(resource) = &item.resource_field_ref {
            downward::resource_value(resource, pod, None, facts)?
        } else {
            continue;
        };
        out.insert(
            item.path.clone(),
            FileProjection {
                data: value.into_bytes(),
                mode: mode_of(item.mode, default_mode),
            },
        );
    }
    Ok(())
}

/// A projected volume's files, its sources merged in order. A service account token is
/// `0600` when the volume has an owner (`owners`), the group's read bits added after,
/// rather than the volume's `defaultMode`, as upstream writes it.
pub fn projected_payload(
    pod: &Pod,
    source: &ProjectedVolumeSource,
    objects: &PodObjects,
    facts: &PodFacts,
    owners: VolumeOwners,
) -> Result<Payload, PayloadError> {
    let default_mode = mode_of(source.default_mode, DEFAULT_MODE);
    let mut out = Payload::new();
    for projection in &source.sources {
        if let Some(cm_source) = &projection.config_map {
            let optional = cm_source.optional.unwrap_or(false);
            if let Some(cm) = config_map(pod, objects, &cm_source.name, optional)? {
                key_files(
                    &config_map_bytes(cm),
                    &cm_source.items,
                    default_mode,
                    optional,
                    |key| PayloadError::MissingConfigMapKey { key: key.into() },
                    &mut out,
                )?;
            }
        }
        if let Some(s_source) = &projection.secret {
            let optional = s_source.optional.unwrap_or(false);
            if let Some(s) = secret(pod, objects, &s_source.name, optional)? {
                key_files(
                    &s.data,
                    &s_source.items,
                    default_mode,
                    optional,
                    |key| PayloadError::MissingSecretKey { key: key.into() },
                    &mut out,
                )?;
            }
        }
        if let Some(d) = &projection.downward_api {
            downward_payload(pod, &d.items, default_mode, facts, &mut out)?;
        }
        if let Some(t) = &projection.service_account_token {
            let key = super::token::token_key(t);
            let token = match objects.tokens.get(&key) {
                Some(Fetched::Found(token)) => token.clone(),
                Some(Fetched::Failed(message)) => {
                    return Err(PayloadError::Token {
                        message: message.clone(),
                    })
                }
                Some(Fetched::NotFound) | None => {
                    return Err(PayloadError::Token {
                        message: "no token for the pod's service account".into(),
                    })
                }
            };
            let owned = owners.fs_user.is_some() || owners.fs_group.is_some();
            out.insert(
                t.path.clone(),
                FileProjection {
                    data: token.into_bytes(),
                    mode: if owned {
                        TOKEN_OWNED_MODE
                    } else {
                        default_mode
                    },
                },
            );
        }
    }
    Ok(out)
}

/// What writing `wanted` over `current` changes: nothing (the writer skips the swap,
/// as upstream's `shouldWritePayload`), or the paths to remove and whether content or
/// modes differ.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayloadChange {
    pub changed: bool,
    /// Paths of `current` no longer wanted (their user-visible links go).
    pub removed: Vec<String>,
}

pub fn payload_change(current: &Payload, wanted: &Payload) -> PayloadChange {
    let removed: Vec<String> = current
        .keys()
        .filter(|k| !wanted.contains_key(*k))
        .cloned()
        .collect();
    PayloadChange {
        changed: current != wanted,
        removed,
    }
}

/// The first element of each payload path: the user-visible links to `..data/<elem>`.
pub fn top_level_entries(payload: &Payload) -> std::collections::BTreeSet<String> {
    payload
        .keys()
        .filter_map(|p| p.split('/').next())
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect()
}
