//! Downward API values: a pod field (`fieldRef`) or a container resource
//! (`resourceFieldRef`) as a string, in upstream's format (labels and annotations as
//! sorted `key="value"` lines, resources divided by the divisor and rounded up).

use crate::domain::units::go_quote;
use std::collections::BTreeMap;

use super::PodFacts;
use crate::domain::pod::{Container, Pod, ResourceFieldSelector};
use crate::domain::units::quantity::Quantity;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownwardError {
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
    #[error("fieldPath {0:?} does not support subscript")]
    Subscript(String),
    #[error("unsupported container resource : {0}")]
    UnsupportedResource(String),
    #[error("container {0} not found")]
    ContainerNotFound(String),
}

/// Upstream's `FormatMap`: `key="value"` lines in key order, no trailing newline.
pub fn format_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `metadata.labels['key']` → `("metadata.labels", "key")`.
fn split_subscript(path: &str) -> Option<(&str, &str)> {
    let inner = path.strip_suffix("']")?;
    let (head, key) = inner.split_once("['")?;
    (!head.is_empty()).then_some((head, key))
}

/// The value of a pod field, as the kubelet gives it to env and downwardAPI volumes.
pub fn field_value(pod: &Pod, field_path: &str, facts: &PodFacts) -> Result<String, DownwardError> {
    let m = &pod.metadata;
    if let Some((head, key)) = split_subscript(field_path) {
        return match head {
            "metadata.labels" => Ok(m.labels.get(key).cloned().unwrap_or_default()),
            "metadata.annotations" => Ok(m.annotations.get(key).cloned().unwrap_or_default()),
            _ => Err(DownwardError::Subscript(field_path.into())),
        };
    }
    Ok(match field_path {
        "metadata.name" => m.name.clone(),
        "metadata.namespace" => m.namespace.clone(),
        "metadata.uid" => m.uid.clone(),
        "metadata.labels" => format_map(&m.labels),
        "metadata.annotations" => format_map(&m.annotations),
        "spec.nodeName" => pod.spec.node_name.clone(),
        "spec.serviceAccountName" => pod.spec.service_account_name.clone(),
        "spec.restartPolicy" => pod.spec.restart_policy.to_string(),
        "status.hostIP" | "status.hostIPs" => facts.host_ip.clone(),
        "status.podIP" | "status.podIPs" => facts.pod_ip.clone(),
        other => return Err(DownwardError::UnsupportedField(other.into())),
    })
}

/// `ceil(a / b)`, 0 when `b` is not positive.
fn div_ceil(a: i64, b: i64) -> i64 {
    if b <= 0 {
        return 0;
    }
    let q = a / b;
    if a % b != 0 && a > 0 {
        q + 1
    } else {
        q
    }
}

/// The value of a container's request or limit divided by the selector's divisor
/// (default 1), rounded up; an unset limit is node allocatable (upstream's
/// `defaultPodLimitsForDownwardAPI`). `container` is the env's own container, used when
/// the selector names none.
pub fn resource_value(
    selector: &ResourceFieldSelector,
    pod: &Pod,
    container: Option<&Container>,
    facts: &PodFacts,
) -> Result<String, DownwardError> {
    let container = if selector.container_name.is_empty() {
        container.ok_or_else(|| DownwardError::ContainerNotFound(String::new()))?
    } else {
        pod.spec
            .all_containers()
            .find(|c| c.name == selector.container_name)
            .ok_or_else(|| DownwardError::ContainerNotFound(selector.container_name.clone()))?
    };
    let divisor = selector
        .divisor
        .filter(|d| !d.is_zero())
        .unwrap_or_else(|| Quantity::new(1, crate::domain::units::quantity::Format::DecimalSI));
    let (section, name) = selector
        .resource
        .split_once('.')
        .ok_or_else(|| DownwardError::UnsupportedResource(selector.resource.clone()))?;
    let map = match section {
        "limits" => &container.resources.limits,
        "requests" => &container.resources.requests,
        _ => {
            return Err(DownwardError::UnsupportedResource(
                selector.resource.clone(),
            ))
        }
    };
    let amount = map.get(name).copied();
    let value = match name {
        "cpu" => {
            let milli = match (amount, section) {
                (Some(q), _) => q.milli_value(),
                (None, "limits") => facts.allocatable_cpu_milli,
                (None, _) => 0,
            };
            div_ceil(milli, divisor.milli_value())
        }
        "memory" | "ephemeral-storage" => {
            let bytes = match (amount, section, name) {
                (Some(q), _, _) => q.value(),
                (None, "limits", "memory") => facts.allocatable_memory_bytes,
                (None, _, _) => 0,
            };
            div_ceil(bytes, divisor.value())
        }
        n if n.starts_with("hugepages-") => {
            div_ceil(amount.map_or(0, |q| q.value()), divisor.value())
        }
        _ => {
            return Err(DownwardError::UnsupportedResource(
                selector.resource.clone(),
            ))
        }
    };
    Ok(value.to_string())
}
