//! The Node's labels, annotations and taints at registration, the refusal of `--node-labels`
//! that node restriction would refuse, and the reconciliation of an adopted Node.

use std::collections::BTreeMap;

use thiserror::Error;

use super::model::NodeObject;
use crate::domain::config::model::Taint;

pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_OS: &str = "kubernetes.io/os";
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
pub const LABEL_BETA_OS: &str = "beta.kubernetes.io/os";
pub const LABEL_BETA_ARCH: &str = "beta.kubernetes.io/arch";
/// Set when the attach/detach controller manages this node's volumes (upstream's default).
pub const ANNOTATION_CONTROLLER_MANAGED_ATTACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Labels a kubelet may set on its own Node (upstream's `kubeletapis.KubeletLabels()`, sorted).
pub const KUBELET_LABELS: &[&str] = &[
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// Label namespaces a kubelet may use (upstream's `KubeletLabelNamespaces()`, sorted).
pub const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// The labels upstream reconciles on an existing Node (`updateDefaultLabels`).
const DEFAULT_LABELS: &[&str] = &[
    LABEL_HOSTNAME,
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    LABEL_OS,
    LABEL_ARCH,
    "node.kubernetes.io/windows-build",
    LABEL_BETA_OS,
    LABEL_BETA_ARCH,
];

/// What the kubelet registers its Node with (from flags and the configuration file).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registration {
    pub node_name: String,
    /// `--hostname-override` or the OS hostname: the `kubernetes.io/hostname` label and the
    /// `Hostname` address.
    pub hostname: String,
    /// Go's names: `linux`; `amd64`, `arm64`.
    pub os: String,
    pub arch: String,
    /// `--node-labels`, already validated by [`validate_node_labels`].
    pub node_labels: BTreeMap<String, String>,
    /// `registerWithTaints`.
    pub taints: Vec<Taint>,
    /// `--register-schedulable` (deprecated; default true).
    pub schedulable: bool,
    /// `--provider-id`.
    pub provider_id: Option<String>,
    /// `enableControllerAttachDetach` (default true).
    pub controller_attach_detach: bool,
}

/// `--node-labels` that node restriction would refuse: upstream refuses to start with them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NodeLabelsError {
    #[error("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{}]\n--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix ({}) or be in the specifically allowed set ({})", .0.join(" "), KUBELET_LABEL_NAMESPACES.join(", "), KUBELET_LABELS.join(", "))]
    Restricted(Vec<String>),
    #[error("invalid node labels: {}", .0.join("; "))]
    Invalid(Vec<String>),
}

fn label_namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or("")
}

fn in_namespace(namespace: &str, parent: &str) -> bool {
    namespace == parent
        || namespace
            .strip_suffix(parent)
            .is_some_and(|p| p.ends_with('.'))
}

fn is_kubernetes_label(key: &str) -> bool {
    let ns = label_namespace(key);
    in_namespace(ns, "kubernetes.io") || in_namespace(ns, "k8s.io")
}

/// Whether a kubelet may set this label on its own Node (upstream's `IsKubeletLabel`).
pub fn is_kubelet_label(key: &str) -> bool {
    let ns = label_namespace(key);
    KUBELET_LABELS.contains(&key) || KUBELET_LABEL_NAMESPACES.iter().any(|a| in_namespace(ns, a))
}

/// A DNS-1123 subdomain (a label key's prefix).
fn dns_subdomain_errors(value: &str) -> Option<String> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    (!ok).then(|| {
        "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string()
    })
}

/// A label name or value body: alphanumerics with `-`, `_`, `.` inside, at most 63.
fn is_label_body(text: &str) -> bool {
    let bytes = text.as_bytes();
    text.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_none_or(u8::is_ascii_alphanumeric)
        && bytes.last().is_none_or(u8::is_ascii_alphanumeric)
}

pub(crate) fn qualified_name_errors(key: &str) -> Vec<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut errors = Vec::new();
    if let Some(e) = prefix.and_then(dns_subdomain_errors) {
        errors.push(e);
    }
    if name.is_empty() {
        errors.push("name part must be non-empty".into());
    } else if !is_label_body(name) {
        errors.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into());
    }
    errors
}

/// Upstream's `ValidateKubeletFlags` for `--node-labels`: labels in the `kubernetes.io` and
/// `k8s.io` namespaces must be ones a kubelet may set; keys and values must be valid.
pub fn validate_node_labels(labels: &BTreeMap<String, String>) -> Result<(), NodeLabelsError> {
    let restricted: Vec<String> = labels
        .keys()
        .filter(|k| is_kubernetes_label(k) && !is_kubelet_label(k))
        .cloned()
        .collect();
    if !restricted.is_empty() {
        return Err(NodeLabelsError::Restricted(restricted));
    }
    let mut invalid = Vec::new();
    for (key, value) in labels {
        let errors = qualified_name_errors(key);
        if !errors.is_empty() {
            invalid.push(format!("'{key}' - {}", errors.join(", ")));
        }
        if !is_label_body(value) {
            invalid.push(format!("'{value}' - a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"));
        }
    }
    if invalid.is_empty() {
        Ok(())
    } else {
        Err(NodeLabelsError::Invalid(invalid))
    }
}

/// The Node's metadata and spec at registration (upstream's `initialNode`, without the
/// status, which [`super::status`] computes).
pub fn initial_node(registration: &Registration) -> NodeObject {
    let mut node = NodeObject::default();
    node.metadata.name = registration.node_name.clone();
    let labels = &mut node.metadata.labels;
    labels.insert(LABEL_HOSTNAME.into(), registration.hostname.clone());
    labels.insert(LABEL_OS.into(), registration.os.clone());
    labels.insert(LABEL_ARCH.into(), registration.arch.clone());
    labels.insert(LABEL_BETA_OS.into(), registration.os.clone());
    labels.insert(LABEL_BETA_ARCH.into(), registration.arch.clone());
    // --node-labels overwrite the defaults, as upstream (which logs it).
    for (k, v) in &registration.node_labels {
        labels.insert(k.clone(), v.clone());
    }
    node.spec.unschedulable = !registration.schedulable;
    node.spec.taints = registration.taints.clone();
    if node.spec.unschedulable && !node.spec.taints.iter().any(is_unschedulable_taint) {
        node.spec.taints.push(Taint {
            key: TAINT_UNSCHEDULABLE.into(),
            value: String::new(),
            effect: "NoSchedule".into(),
            time_added: None,
        });
    }
    if registration.controller_attach_detach {
        node.metadata
            .annotations
            .insert(ANNOTATION_CONTROLLER_MANAGED_ATTACH.into(), "true".into());
    }
    if let Some(id) = registration
        .provider_id
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        node.spec.provider_id = id.to_string();
    }
    node
}

fn is_unschedulable_taint(t: &Taint) -> bool {
    t.key == TAINT_UNSCHEDULABLE && t.effect == "NoSchedule"
}

/// The label and annotation changes an existing Node needs to match what this kubelet would
/// register (upstream's `updateDefaultLabels` and `reconcileCMADAnnotationWithExistingNode`):
/// the value of each key to set, `None` to remove. Empty when the Node is already right.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetadataChanges {
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
}

impl MetadataChanges {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// What to change on `existing` so its default labels and the attach/detach annotation match
/// `initial` (the Node this kubelet would register). Other labels, such as ones an admin
/// added or `--node-labels` applied at first registration, are left alone, as upstream does.
pub fn reconcile_metadata(initial: &NodeObject, existing: &NodeObject) -> MetadataChanges {
    let mut changes = MetadataChanges::default();
    for key in DEFAULT_LABELS {
        let Some(wanted) = initial.metadata.labels.get(*key) else {
            continue;
        };
        let current = existing.metadata.labels.get(*key);
        if wanted.is_empty() {
            if current.is_some() {
                changes.labels.insert((*key).to_string(), None);
            }
        } else if current != Some(wanted) {
            changes
                .labels
                .insert((*key).to_string(), Some(wanted.clone()));
        }
    }
    let key = ANNOTATION_CONTROLLER_MANAGED_ATTACH;
    let wanted = initial.metadata.annotations.get(key);
    if existing.metadata.annotations.get(key) != wanted {
        changes.annotations.insert(key.to_string(), wanted.cloned());
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    fn registration() -> Registration {
        Registration {
            node_name: "n1".into(),
            hostname: "n1".into(),
            os: "linux".into(),
            arch: "amd64".into(),
            schedulable: true,
            controller_attach_detach: true,
            ..Registration::default()
        }
    }

    #[test]
    fn node_role_labels_are_refused_in_upstreams_words() {
        let err = validate_node_labels(&labels(&[("node-role.kubernetes.io/worker", "")]))
            .expect_err("refused");
        assert_eq!(
            err.to_string(),
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [node-role.kubernetes.io/worker]\n\
             --node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix \
             (kubelet.kubernetes.io, node.kubernetes.io) or be in the specifically allowed set \
             (beta.kubernetes.io/arch, beta.kubernetes.io/instance-type, beta.kubernetes.io/os, \
             failure-domain.beta.kubernetes.io/region, failure-domain.beta.kubernetes.io/zone, \
             kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os, \
             node.kubernetes.io/instance-type, topology.kubernetes.io/region, topology.kubernetes.io/zone)"
        );
    }

    #[test]
    fn allowed_namespaces_and_labels_pass() {
        for key in [
            "node.kubernetes.io/pool",
            "x.kubelet.kubernetes.io/a",
            "topology.kubernetes.io/zone",
            "example.com/team",
            "plain",
        ] {
            assert_eq!(
                validate_node_labels(&labels(&[(key, "v")])),
                Ok(()),
                "{key}"
            );
        }
        for key in ["kubernetes.io/role", "foo.k8s.io/x", "k8s.io/y"] {
            assert!(matches!(
                validate_node_labels(&labels(&[(key, "v")])),
                Err(NodeLabelsError::Restricted(_))
            ));
        }
        // "notkubernetes.io" is not in the kubernetes.io namespace.
        assert_eq!(
            validate_node_labels(&labels(&[("notkubernetes.io/x", "v")])),
            Ok(())
        );
    }

    #[test]
    fn invalid_keys_and_values_are_named() {
        let err = validate_node_labels(&labels(&[("Bad_Prefix/x", "ok"), ("k", "-bad")]))
            .expect_err("invalid");
        let text = err.to_string();
        assert!(
            text.starts_with("invalid node labels: 'Bad_Prefix/x' - prefix part"),
            "{text}"
        );
        assert!(text.contains("'-bad' - a valid label must be"), "{text}");
    }

    #[test]
    fn initial_node_has_upstreams_labels_taints_and_annotation() {
        let mut r = registration();
        r.node_labels = labels(&[("kubernetes.io/hostname", "alias"), ("team", "a")]);
        r.taints = vec![Taint {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: "NoSchedule".into(),
            time_added: None,
        }];
        r.schedulable = false;
        r.provider_id = Some("fake://n1".into());
        let node = initial_node(&r);
        assert_eq!(
            node.metadata.labels,
            labels(&[
                ("beta.kubernetes.io/arch", "amd64"),
                ("beta.kubernetes.io/os", "linux"),
                ("kubernetes.io/arch", "amd64"),
                ("kubernetes.io/hostname", "alias"),
                ("kubernetes.io/os", "linux"),
                ("team", "a"),
            ])
        );
        assert_eq!(
            node.spec
                .taints
                .iter()
                .map(|t| t.key.as_str())
                .collect::<Vec<_>>(),
            ["dedicated", TAINT_UNSCHEDULABLE]
        );
        assert!(node.spec.unschedulable);
        assert_eq!(node.spec.provider_id, "fake://n1");
        assert_eq!(
            node.metadata.annotations[ANNOTATION_CONTROLLER_MANAGED_ATTACH],
            "true"
        );
    }

    #[test]
    fn adoption_restores_default_labels_and_leaves_others() {
        let initial = initial_node(&registration());
        let mut existing = initial.clone();
        existing
            .metadata
            .labels
            .insert(LABEL_ARCH.into(), "arm64".into());
        existing.metadata.labels.remove(LABEL_BETA_OS);
        existing
            .metadata
            .labels
            .insert("admin/added".into(), "yes".into());
        existing.metadata.annotations.clear();
        let changes = reconcile_metadata(&initial, &existing);
        assert_eq!(
            changes.labels,
            BTreeMap::from([
                (LABEL_ARCH.to_string(), Some("amd64".to_string())),
                (LABEL_BETA_OS.to_string(), Some("linux".to_string())),
            ])
        );
        assert_eq!(
            changes.annotations,
            BTreeMap::from([(
                ANNOTATION_CONTROLLER_MANAGED_ATTACH.to_string(),
                Some("true".to_string())
            )])
        );
        assert!(reconcile_metadata(&initial, &initial).is_empty());
    }
}
