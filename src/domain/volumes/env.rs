//! A container's environment as upstream's `makeEnvironmentVariables`: `envFrom`
//! (ConfigMaps and Secrets, with a prefix; keys that are not valid variable names
//! skipped and reported), then `env` in order (a `value` expanded with `$(VAR)`, or a
//! `valueFrom`: fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef), then the
//! service links the others do not set. A missing non-optional reference is an error
//! in upstream's words; the container waits with `CreateContainerConfigError`.

use std::collections::{BTreeMap, HashMap};

use super::downward::{self, DownwardError};
use super::{ConfigMapData, Fetched, PodFacts, PodObjects, SecretData};
use crate::domain::kuberuntime::requests::expand_within;
use crate::domain::pod::{Container, Pod};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("configmap {name:?} not found")]
    ConfigMapNotFound { name: String },
    #[error("secret {name:?} not found")]
    SecretNotFound { name: String },
    #[error("couldn't get configMap {namespace}/{name}, no kubeClient defined")]
    ConfigMapNoClient { namespace: String, name: String },
    #[error("couldn't get secret {namespace}/{name}, no kubeClient defined")]
    SecretNoClient { namespace: String, name: String },
    /// The API call failed: its message.
    #[error("{0}")]
    Failed(String),
    #[error("couldn't find key {key} in ConfigMap {namespace}/{name}")]
    MissingConfigMapKey {
        key: String,
        namespace: String,
        name: String,
    },
    #[error("couldn't find key {key} in Secret {namespace}/{name}")]
    MissingSecretKey {
        key: String,
        namespace: String,
        name: String,
    },
    #[error("{0}")]
    Downward(#[from] DownwardError),
    /// The environment would not fit `execve`: refused before it is built, so a chain of
    /// self-doubling variables costs no memory.
    #[error("environment variable {name:?}: the container's environment would take more than {limit} bytes, the most the kernel passes to a process")]
    TooLong { name: String, limit: usize },
}

/// The most bytes a container's environment, command and arguments may take together:
/// what the kernel's `execve` accepts with the usual 8 MiB stack (a quarter of it).
/// More could never start; expanding it would only cost the kubelet memory.
pub const EXEC_ARGS_MAX_BYTES: usize = 2 * 1024 * 1024;

/// The bytes `vars` take in a process's environment (`NAME=value` and a NUL each).
pub fn exec_size(vars: &[(String, String)]) -> usize {
    vars.iter().map(|(k, v)| k.len() + v.len() + 2).sum()
}

/// `envFrom` keys skipped as invalid variable names: upstream's
/// `InvalidEnvironmentVariableNames` warning event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedKeys {
    /// `configMap` or `secret`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub keys: Vec<String>,
}

impl SkippedKeys {
    /// The event's message, as upstream's.
    pub fn message(&self) -> String {
        format!(
            "Keys [{}] from the EnvFrom {} {}/{} were skipped since they are considered invalid environment variable names.",
            self.keys.join(", "),
            self.kind,
            self.namespace,
            self.name
        )
    }
}

/// A container's environment, with what was skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    pub vars: Vec<(String, String)>,
    pub skipped: Vec<SkippedKeys>,
}

/// Upstream's `IsEnvVarName`: `[-._a-zA-Z][-._a-zA-Z0-9]*`, and not `.`, `..` or
/// starting with `..`.
pub fn is_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let ok_first = first.is_ascii_alphabetic() || matches!(first, '-' | '.' | '_');
    ok_first
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        && name != "."
        && !name.starts_with("..")
}

/// The variables in the order first set, and where each is: a later one of the same
/// name replaces the value in place (upstream's order), found without a scan (a pod may
/// have 100,000 of them).
#[derive(Default)]
struct Vars {
    list: Vec<(String, String)>,
    at: HashMap<String, usize>,
    /// [`exec_size`] of `list`, kept as it changes.
    bytes: usize,
}

impl Vars {
    /// Sets `name`, refused when the environment would pass [`EXEC_ARGS_MAX_BYTES`].
    fn set(&mut self, name: &str, value: String) -> Result<(), EnvError> {
        let replaced = self
            .at
            .get(name)
            .and_then(|&i| self.list.get(i))
            .map_or(0, |(k, v)| k.len() + v.len() + 2);
        let bytes = (self.bytes - replaced).saturating_add(name.len() + value.len() + 2);
        if bytes > EXEC_ARGS_MAX_BYTES {
            return Err(EnvError::TooLong {
                name: name.to_owned(),
                limit: EXEC_ARGS_MAX_BYTES,
            });
        }
        self.bytes = bytes;
        match self.at.get(name) {
            Some(&i) => {
                if let Some(slot) = self.list.get_mut(i) {
                    slot.1 = value;
                }
            }
            None => {
                self.at.insert(name.to_owned(), self.list.len());
                self.list.push((name.to_owned(), value));
            }
        }
        Ok(())
    }

    /// How many more bytes a value may take before the environment is too large.
    fn room(&self) -> usize {
        EXEC_ARGS_MAX_BYTES.saturating_sub(self.bytes)
    }

    fn get(&self, name: &str) -> Option<&str> {
        let &i = self.at.get(name)?;
        self.list.get(i).map(|(_, v)| v.as_str())
    }
}

/// `Ok(None)`: absent and optional.
fn config_map<'a>(
    pod: &Pod,
    objects: &'a PodObjects,
    name: &str,
    optional: bool,
) -> Result<Option<&'a ConfigMapData>, EnvError> {
    match objects.config_maps.get(name) {
        Some(Fetched::Found(cm)) => Ok(Some(cm)),
        Some(Fetched::NotFound) if optional => Ok(None),
        Some(Fetched::NotFound) => Err(EnvError::ConfigMapNotFound { name: name.into() }),
        Some(Fetched::Failed(message)) => Err(EnvError::Failed(message.clone())),
        None => Err(EnvError::ConfigMapNoClient {
            namespace: pod.metadata.namespace.clone(),
            name: name.into(),
        }),
    }
}

fn secret<'a>(
    pod: &Pod,
    objects: &'a PodObjects,
    name: &str,
    optional: bool,
) -> Result<Option<&'a SecretData>, EnvError> {
    match objects.secrets.get(name) {
        Some(Fetched::Found(s)) => Ok(Some(s)),
        Some(Fetched::NotFound) if optional => Ok(None),
        Some(Fetched::NotFound) => Err(EnvError::SecretNotFound { name: name.into() }),
        Some(Fetched::Failed(message)) => Err(EnvError::Failed(message.clone())),
        None => Err(EnvError::SecretNoClient {
            namespace: pod.metadata.namespace.clone(),
            name: name.into(),
        }),
    }
}

/// The container's environment from its spec, the fetched objects, the pod's facts and
/// the service links (`service_env`, empty when `enableServiceLinks` is off).
pub fn resolve_environment(
    pod: &Pod,
    container: &Container,
    objects: &PodObjects,
    facts: &PodFacts,
    service_env: &BTreeMap<String, String>,
) -> Result<Environment, EnvError> {
    let namespace = &pod.metadata.namespace;
    let mut out = Environment::default();
    let mut vars = Vars::default();
    for from in &container.env_from {
        let (kind, name, entries): (&'static str, &str, Vec<(String, String)>) = if let Some(r) =
            &from.config_map_ref
        {
            let Some(cm) = config_map(pod, objects, &r.name, r.optional.unwrap_or(false))? else {
                continue;
            };
            let entries = cm
                .data
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            ("configMap", &r.name, entries)
        } else if let Some(r) = &from.secret_ref {
            let Some(s) = secret(pod, objects, &r.name, r.optional.unwrap_or(false))? else {
                continue;
            };
            let entries = s
                .data
                .iter()
                .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
                .collect();
            ("secret", &r.name, entries)
        } else {
            continue;
        };
        let mut invalid = Vec::new();
        for (key, value) in entries {
            let key = format!("{}{key}", from.prefix);
            if is_env_var_name(&key) {
                vars.set(&key, value)?;
            } else {
                invalid.push(key);
            }
        }
        if !invalid.is_empty() {
            invalid.sort();
            out.skipped.push(SkippedKeys {
                kind,
                namespace: namespace.clone(),
                name: name.to_owned(),
                keys: invalid,
            });
        }
    }
    for var in &container.env {
        let value = if !var.value.is_empty() {
            // The container's own variables first, then the services'.
            expand_within(
                &var.value,
                |name| {
                    vars.get(name)
                        .or_else(|| service_env.get(name).map(String::as_str))
                },
                vars.room(),
            )
            .ok_or_else(|| EnvError::TooLong {
                name: var.name.clone(),
                limit: EXEC_ARGS_MAX_BYTES,
            })?
        } else if let Some(from) = &var.value_from {
            if let Some(field) = &from.field_ref {
                downward::field_value(pod, &field.field_path, facts)?
            } else if let Some(resource) = &from.resource_field_ref {
                downward::resource_value(resource, pod, Some(container), facts)?
            } else if let Some(r) = &from.config_map_key_ref {
                let optional = r.optional.unwrap_or(false);
                let Some(cm) = config_map(pod, objects, &r.name, optional)? else {
                    continue;
                };
                match cm.data.get(&r.key) {
                    Some(v) => v.clone(),
                    None if optional => continue,
                    None => {
                        return Err(EnvError::MissingConfigMapKey {
                            key: r.key.clone(),
                            namespace: namespace.clone(),
                            name: r.name.clone(),
                        })
                    }
                }
            } else if let Some(r) = &from.secret_key_ref {
                let optional = r.optional.unwrap_or(false);
                let Some(s) = secret(pod, objects, &r.name, optional)? else {
                    continue;
                };
                match s.data.get(&r.key) {
                    Some(v) => String::from_utf8_lossy(v).into_owned(),
                    None if optional => continue,
                    None => {
                        return Err(EnvError::MissingSecretKey {
                            key: r.key.clone(),
                            namespace: namespace.clone(),
                            name: r.name.clone(),
                        })
                    }
                }
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        vars.set(&var.name, value)?;
    }
    for (k, v) in service_env {
        if vars.get(k).is_none() {
            vars.set(k, v.clone())?;
        }
    }
    out.vars = vars.list;
    Ok(out)
}

/// True when a container's environment needs the pod's IP (known once its sandbox is).
pub fn needs_pod_ip(pod: &Pod) -> bool {
    pod.spec
        .all_containers()
        .flat_map(|c| &c.env)
        .filter_map(|v| v.value_from.as_ref()?.field_ref.as_ref())
        .any(|f| f.field_path.starts_with("status.podIP"))
}
