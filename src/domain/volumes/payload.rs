//! The files of a configMap, secret, downwardAPI or projected volume (upstream's
//! `MakePayload` of each plugin and `CollectData`), the checks the atomic writer makes
//! on their paths, and what changed between two file sets.

use std::collections::BTreeMap;

use super::{downward, ConfigMapData, Fetched, PodFacts, PodObjects, SecretData};
use crate::domain::pod::{
    ConfigMapVolumeSource, DownwardApiVolumeFile, KeyToPath, Pod, ProjectedVolumeSource,
    SecretVolumeSource,
};

/// Mode of a file when the volume sets none (`0644`, API defaulting's 420).
pub const DEFAULT_MODE: u32 = 0o644;

/// One file: content and permission bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    pub data: Vec<u8>,
    pub mode: u32,
}

/// Relative path (may contain `/`) to file.
pub type Payload = BTreeMap<String, FileProjection>;

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

/// A projected volume's files, its sources merged in order.
pub fn projected_payload(
    pod: &Pod,
    source: &ProjectedVolumeSource,
    objects: &PodObjects,
    facts: &PodFacts,
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
            out.insert(
                t.path.clone(),
                FileProjection {
                    data: token.into_bytes(),
                    mode: default_mode,
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
