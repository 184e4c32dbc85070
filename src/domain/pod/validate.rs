//! The validation a node needs before it runs a pod, worded as upstream's field errors.

use std::collections::BTreeSet;

use super::*;
/// Pod decoding and validation problems, worded as upstream's field errors
/// (`<path>: <kind>: <detail>`) so operators recognise them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    #[error("{field}: Required value{}", suffix(.detail))]
    Required { field: String, detail: String },
    /// `value` is already rendered as upstream prints it (strings quoted).
    #[error("{field}: Invalid value: {value}: {detail}")]
    Invalid {
        field: String,
        value: String,
        detail: String,
    },
    #[error("{field}: Duplicate value: {value}")]
    Duplicate { field: String, value: String },
    #[error("{field}: Not found: {value}")]
    NotFound { field: String, value: String },
    /// `supported` is the rendered list, e.g. `"Always", "Never"`.
    #[error("{field}: Unsupported value: {value}: supported values: {supported}")]
    Unsupported {
        field: String,
        value: String,
        supported: String,
    },
    #[error("{field}: Forbidden: {detail}")]
    Forbidden { field: String, detail: String },
    /// The document has the shape of a pod but a field has the wrong type.
    #[error("cannot decode pod: {reason}")]
    Decode { reason: String },
    /// Static pods run without the API server, so they may not use objects
    /// from it.
    #[error("static pods may not reference {resource}")]
    ApiReference { resource: String },
    /// A field the node cannot honour (or does not know), named beside the other
    /// problems of a pod that is invalid anyway.
    #[error("{0}")]
    Refused(super::fields::RefusedField),
}

impl PodError {
    /// The field the error names, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            PodError::Required { field, .. }
            | PodError::Invalid { field, .. }
            | PodError::Duplicate { field, .. }
            | PodError::NotFound { field, .. }
            | PodError::Unsupported { field, .. }
            | PodError::Forbidden { field, .. } => Some(field),
            PodError::Refused(refused) => Some(&refused.path),
            PodError::Decode { .. } | PodError::ApiReference { .. } => None,
        }
    }
}

fn suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

pub(in crate::domain) fn quoted(s: &str) -> String {
    format!("{s:?}")
}

pub(in crate::domain) fn supported_list(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| quoted(v))
        .collect::<Vec<_>>()
        .join(", ")
}

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const PORT_RANGE_ERR: &str = "must be between 1 and 65535, inclusive";

fn label_shape_ok(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// Upstream's `IsDNS1123Label` messages; empty when valid.
pub fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errors.push(format!(
            "must be no more than {DNS1123_LABEL_MAX} characters"
        ));
    }
    if !label_shape_ok(s) {
        errors.push(DNS1123_LABEL_ERR.to_string());
    }
    errors
}

/// Upstream's `IsDNS1123Subdomain` messages; empty when valid.
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errors.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
        ));
    }
    if !s.split('.').all(label_shape_ok) {
        errors.push(DNS1123_SUBDOMAIN_ERR.to_string());
    }
    errors
}

/// Upstream's `IsValidPortName` messages; empty when valid.
pub(in crate::domain) fn port_name_errors(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if name.len() > 15 {
        errors.push("must be no more than 15 characters".to_string());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if name.contains("--") {
        errors.push("must not contain consecutive hyphens".to_string());
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)".to_string());
    }
    if name.starts_with('-') || name.ends_with('-') {
        errors.push("must not begin or end with a hyphen".to_string());
    }
    errors
}

pub(in crate::domain) fn invalid(
    field: String,
    value: String,
    detail: impl Into<String>,
) -> PodError {
    PodError::Invalid {
        field,
        value,
        detail: detail.into(),
    }
}

pub(in crate::domain) fn required(field: String, detail: &str) -> PodError {
    PodError::Required {
        field,
        detail: detail.to_string(),
    }
}

/// Checks what the kubelet needs to run the pod and reports every problem
/// found, worded as upstream's validation: a valid name, containers with
/// unique valid names and images, sane ports, policies, resources, volumes
/// and mounts. An empty result means valid.
/// Upstream's `validateEphemeralContainers` as far as the kubelet relies on it: the
/// container's own checks, a name unique among all the pod's containers, and a target
/// that is one of the other containers.
fn validate_ephemeral_containers(
    spec: &PodSpec,
    volume_names: &BTreeSet<String>,
    container_names: &mut BTreeSet<String>,
    errors: &mut Vec<PodError>,
) {
    let others: BTreeSet<&str> = spec
        .init_containers
        .iter()
        .chain(&spec.containers)
        .map(|c| c.name.as_str())
        .collect();
    for (i, e) in spec.ephemeral_containers.iter().enumerate() {
        let path = format!("spec.ephemeralContainers[{i}]");
        validate_container(
            &e.container,
            &path,
            spec,
            volume_names,
            container_names,
            errors,
        );
        let target = e.target_container_name.as_str();
        if !target.is_empty() && !others.contains(target) {
            errors.push(PodError::NotFound {
                field: format!("{path}.targetContainerName"),
                value: quoted(target),
            });
        }
    }
}

pub fn validate_pod(pod: &Pod) -> Vec<PodError> {
    let mut errors = Vec::new();
    let meta = &pod.metadata;
    if meta.name.is_empty() {
        errors.push(required(
            "metadata.name".into(),
            "name or generateName is required",
        ));
    } else {
        for msg in dns1123_subdomain_errors(&meta.name) {
            errors.push(invalid("metadata.name".into(), quoted(&meta.name), msg));
        }
    }
    // An empty namespace is filled in by the static pod defaults.
    if !meta.namespace.is_empty() {
        for msg in dns1123_label_errors(&meta.namespace) {
            errors.push(invalid(
                "metadata.namespace".into(),
                quoted(&meta.namespace),
                msg,
            ));
        }
    }

    let spec = &pod.spec;
    let volume_names = validate_volumes(&spec.volumes, &mut errors);

    let mut container_names = BTreeSet::new();
    for (i, c) in spec.init_containers.iter().enumerate() {
        let path = format!("spec.initContainers[{i}]");
        validate_container(
            c,
            &path,
            spec,
            &volume_names,
            &mut container_names,
            &mut errors,
        );
        crate::domain::probe::spec::validate_container(
            c,
            &path,
            true,
            spec.termination_grace_period(),
            &mut errors,
        );
        if let Some(policy) = c.restart_policy {
            if policy != RestartPolicy::Always {
                errors.push(PodError::Unsupported {
                    field: format!("{path}.restartPolicy"),
                    value: quoted(policy.as_str()),
                    supported: supported_list(&["Always"]),
                });
            }
        }
    }
    if spec.containers.is_empty() {
        errors.push(required("spec.containers".into(), ""));
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let path = format!("spec.containers[{i}]");
        validate_container(
            c,
            &path,
            spec,
            &volume_names,
            &mut container_names,
            &mut errors,
        );
        crate::domain::probe::spec::validate_container(
            c,
            &path,
            false,
            spec.termination_grace_period(),
            &mut errors,
        );
        if c.restart_policy.is_some() {
            errors.push(PodError::Forbidden {
                field: format!("{path}.restartPolicy"),
                detail: "may not be set for non-init containers".into(),
            });
        }
    }
    validate_ephemeral_containers(spec, &volume_names, &mut container_names, &mut errors);
    // Upstream's `validateHostUsers`: a pod in its own user namespace shares none of the
    // host's others (the field names as upstream spells them).
    if spec.host_users == Some(false) {
        for (shared, field) in [
            (spec.host_network, "spec.hostNetwork"),
            (spec.host_pid, "spec.HostPID"),
            (spec.host_ipc, "spec.HostIPC"),
        ] {
            if shared {
                errors.push(PodError::Forbidden {
                    field: field.into(),
                    detail: "when `pod.Spec.HostUsers` is false".into(),
                });
            }
        }
    }

    const DNS_POLICIES: [&str; 4] = ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
    if !spec.dns_policy.is_empty() && !DNS_POLICIES.contains(&spec.dns_policy.as_str()) {
        errors.push(PodError::Unsupported {
            field: "spec.dnsPolicy".into(),
            value: quoted(&spec.dns_policy),
            supported: supported_list(&DNS_POLICIES),
        });
    }
    if spec.dns_policy == "None" {
        match &spec.dns_config {
            None => errors.push(required(
                "spec.dnsConfig".into(),
                "must provide `dnsConfig` when `dnsPolicy` is None",
            )),
            Some(c) if c.nameservers.is_empty() => errors.push(required(
                "spec.dnsConfig.nameservers".into(),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )),
            Some(_) => {}
        }
    }
    if let Some(config) = &spec.dns_config {
        if config.nameservers.len() > crate::domain::kuberuntime::dns::MAX_NAMESERVERS {
            errors.push(invalid(
                "spec.dnsConfig.nameservers".into(),
                format!("[{}]", config.nameservers.join(" ")),
                "must not have more than 3 nameservers",
            ));
        }
    }
    if let Some(deadline) = spec.active_deadline_seconds {
        if !(1..=i64::from(i32::MAX)).contains(&deadline) {
            errors.push(invalid(
                "spec.activeDeadlineSeconds".into(),
                deadline.to_string(),
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    if let Some(grace) = spec.termination_grace_period_seconds {
        if grace < 0 {
            errors.push(invalid(
                "spec.terminationGracePeriodSeconds".into(),
                grace.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }
    super::security::validate_security(pod, &mut errors);
    for (field, value) in [
        ("spec.hostname", &spec.hostname),
        ("spec.subdomain", &spec.subdomain),
    ] {
        if !value.is_empty() {
            for msg in dns1123_label_errors(value) {
                errors.push(invalid(field.into(), quoted(value), msg));
            }
        }
    }
    errors
}

fn validate_volumes(volumes: &[Volume], errors: &mut Vec<PodError>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let field = format!("spec.volumes[{i}].name");
        if v.name.is_empty() {
            errors.push(required(field, ""));
        } else {
            let msgs = dns1123_label_errors(&v.name);
            let ok = msgs.is_empty();
            for msg in msgs {
                errors.push(invalid(field.clone(), quoted(&v.name), msg));
            }
            if ok && !names.insert(v.name.clone()) {
                errors.push(PodError::Duplicate {
                    field,
                    value: quoted(&v.name),
                });
            }
        }
        if let Some(host_path) = &v.host_path {
            if host_path.path.is_empty() {
                errors.push(required(format!("spec.volumes[{i}].hostPath.path"), ""));
            }
        }
    }
    names
}

fn validate_container(
    c: &Container,
    path: &str,
    spec: &PodSpec,
    volume_names: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
    errors: &mut Vec<PodError>,
) {
    if c.name.is_empty() {
        errors.push(required(format!("{path}.name"), ""));
    } else {
        let msgs = dns1123_label_errors(&c.name);
        let ok = msgs.is_empty();
        for msg in msgs {
            errors.push(invalid(format!("{path}.name"), quoted(&c.name), msg));
        }
        if ok && !names.insert(c.name.clone()) {
            errors.push(PodError::Duplicate {
                field: format!("{path}.name"),
                value: quoted(&c.name),
            });
        }
    }
    if c.image.is_empty() {
        errors.push(required(format!("{path}.image"), ""));
    } else if c.image.trim() != c.image {
        errors.push(invalid(
            format!("{path}.image"),
            quoted(&c.image),
            "must not have leading or trailing whitespace",
        ));
    }

    let mut port_names = BTreeSet::new();
    for (i, port) in c.ports.iter().enumerate() {
        let p = format!("{path}.ports[{i}]");
        if !port.name.is_empty() {
            let msgs = port_name_errors(&port.name);
            if msgs.is_empty() {
                if !port_names.insert(port.name.clone()) {
                    errors.push(PodError::Duplicate {
                        field: format!("{p}.name"),
                        value: quoted(&port.name),
                    });
                }
            } else {
                for msg in msgs {
                    errors.push(invalid(format!("{p}.name"), quoted(&port.name), msg));
                }
            }
        }
        if port.container_port == 0 {
            errors.push(required(format!("{p}.containerPort"), ""));
        } else if !(1..=65535).contains(&port.container_port) {
            errors.push(invalid(
                format!("{p}.containerPort"),
                port.container_port.to_string(),
                PORT_RANGE_ERR,
            ));
        }
        if port.host_port != 0 && !(1..=65535).contains(&port.host_port) {
            errors.push(invalid(
                format!("{p}.hostPort"),
                port.host_port.to_string(),
                PORT_RANGE_ERR,
            ));
        }
        if spec.host_network && port.host_port != 0 && port.host_port != port.container_port {
            errors.push(invalid(
                format!("{p}.hostPort"),
                port.host_port.to_string(),
                "must match `containerPort` when `hostNetwork` is true",
            ));
        }
        const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];
        if port.protocol.is_empty() {
            errors.push(required(format!("{p}.protocol"), ""));
        } else if !PROTOCOLS.contains(&port.protocol.as_str()) {
            errors.push(PodError::Unsupported {
                field: format!("{p}.protocol"),
                value: quoted(&port.protocol),
                supported: supported_list(&PROTOCOLS),
            });
        }
    }

    let res = &c.resources;
    for (kind, list) in [("limits", &res.limits), ("requests", &res.requests)] {
        for (name, q) in list {
            if q.is_negative() {
                errors.push(invalid(
                    format!("{path}.resources.{kind}[{name}]"),
                    quoted(&q.to_string()),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    for (name, request) in &res.requests {
        if let Some(limit) = res.limits.get(name) {
            if request > limit {
                errors.push(invalid(
                    format!("{path}.resources.requests[{name}]"),
                    quoted(&request.to_string()),
                    format!("must be less than or equal to {name} limit of {limit}"),
                ));
            }
        }
    }

    let mut mount_paths = BTreeSet::new();
    for (i, m) in c.volume_mounts.iter().enumerate() {
        let p = format!("{path}.volumeMounts[{i}]");
        if m.name.is_empty() {
            errors.push(required(format!("{p}.name"), ""));
        } else if !volume_names.contains(&m.name) {
            errors.push(PodError::NotFound {
                field: format!("{p}.name"),
                value: quoted(&m.name),
            });
        }
        if m.mount_path.is_empty() {
            errors.push(required(format!("{p}.mountPath"), ""));
        } else if !mount_paths.insert(m.mount_path.clone()) {
            errors.push(invalid(
                format!("{p}.mountPath"),
                quoted(&m.mount_path),
                "must be unique",
            ));
        }
        validate_mount_propagation(m, c, &format!("{p}.mountPropagation"), errors);
    }
}

/// Upstream's `validateMountPropagation`: a known mode, and `Bidirectional` (mounts the
/// container makes reach the host) for privileged containers only.
fn validate_mount_propagation(
    mount: &VolumeMount,
    container: &Container,
    field: &str,
    errors: &mut Vec<PodError>,
) {
    const MODES: [&str; 3] = ["Bidirectional", "HostToContainer", "None"];
    let Some(mode) = &mount.mount_propagation else {
        return;
    };
    if !MODES.contains(&mode.as_str()) {
        errors.push(PodError::Unsupported {
            field: field.to_owned(),
            value: quoted(mode),
            supported: supported_list(&MODES),
        });
    }
    let privileged = container
        .security_context
        .as_ref()
        .and_then(|sc| sc.privileged)
        .unwrap_or(false);
    if mode == "Bidirectional" && !privileged {
        errors.push(PodError::Forbidden {
            field: field.to_owned(),
            detail: "Bidirectional mount propagation is available only to privileged containers"
                .into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::fixtures::spec_of;

    fn valid_pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: "web".into(),
                namespace: "default".into(),
                ..ObjectMeta::default()
            },
            spec: spec_of(vec![Container {
                name: "web".into(),
                image: "nginx".into(),
                ..Container::default()
            }]),
        }
    }

    fn messages(pod: &Pod) -> Vec<String> {
        validate_pod(pod).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn valid_pod_has_no_errors() {
        assert!(validate_pod(&valid_pod()).is_empty());
    }

    // Names from upstream's TestStaticPodNameGenerate and the invalid-pod
    // cases of pkg/kubelet/config/http_test.go (TestExtractInvalidPods).
    #[test]
    fn validation_table() {
        type Mutate = fn(&mut Pod);
        let cases: Vec<(&str, Mutate, Vec<&str>)> = vec![
            (
                "missing name",
                |p| p.metadata.name.clear(),
                vec!["metadata.name: Required value: name or generateName is required"],
            ),
            (
                "upper-case name",
                |p| p.metadata.name = "static-pod1-NODE1".into(),
                vec!["metadata.name: Invalid value: \"static-pod1-NODE1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"],
            ),
            (
                "no containers",
                |p| p.spec.containers.clear(),
                vec!["spec.containers: Required value"],
            ),
            (
                "unnamed container",
                |p| p.spec.containers[0].name.clear(),
                vec!["spec.containers[0].name: Required value"],
            ),
            (
                "invalid container name",
                |p| p.spec.containers[0].name = "_INVALID_".into(),
                vec!["spec.containers[0].name: Invalid value: \"_INVALID_\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"],
            ),
            (
                "missing image",
                |p| p.spec.containers[0].image.clear(),
                vec!["spec.containers[0].image: Required value"],
            ),
            (
                "duplicate container across init and regular",
                |p| {
                    let mut init = p.spec.containers[0].clone();
                    init.image = "busybox".into();
                    p.spec.init_containers.push(init);
                },
                vec!["spec.containers[0].name: Duplicate value: \"web\""],
            ),
            (
                "invalid volume name",
                |p| {
                    p.spec.volumes.push(Volume {
                        name: "_INVALID_".into(),
                        empty_dir: Some(EmptyDirVolume::default()),
                        ..Volume::default()
                    })
                },
                vec!["spec.volumes[0].name: Invalid value: \"_INVALID_\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"],
            ),
            (
                "duplicate volume names",
                |p| {
                    for _ in 0..2 {
                        p.spec.volumes.push(Volume {
                            name: "repeated".into(),
                            empty_dir: Some(EmptyDirVolume::default()),
                            ..Volume::default()
                        });
                    }
                },
                vec!["spec.volumes[1].name: Duplicate value: \"repeated\""],
            ),
            (
                "container port out of range and host port too",
                |p| {
                    p.spec.containers[0].ports.push(ContainerPort {
                        container_port: 70000,
                        host_port: -1,
                        ..ContainerPort::default()
                    })
                },
                vec![
                    "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                    "spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                "missing container port and bad protocol",
                |p| {
                    p.spec.containers[0].ports.push(ContainerPort {
                        protocol: "HTTP".into(),
                        ..ContainerPort::default()
                    })
                },
                vec![
                    "spec.containers[0].ports[0].containerPort: Required value",
                    "spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                ],
            ),
            (
                "host network port mismatch",
                |p| {
                    p.spec.host_network = true;
                    p.spec.containers[0].ports.push(ContainerPort {
                        container_port: 80,
                        host_port: 8080,
                        ..ContainerPort::default()
                    })
                },
                vec!["spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true"],
            ),
            (
                "restart policy on a regular container",
                |p| p.spec.containers[0].restart_policy = Some(RestartPolicy::Always),
                vec!["spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"],
            ),
            (
                "init container restart policy other than Always",
                |p| {
                    p.spec.init_containers.push(Container {
                        name: "init".into(),
                        image: "busybox".into(),
                        restart_policy: Some(RestartPolicy::Never),
                        ..Container::default()
                    })
                },
                vec!["spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""],
            ),
            (
                "request above limit",
                |p| {
                    let r = &mut p.spec.containers[0].resources;
                    r.requests.insert("cpu".into(), Quantity::parse("2").expect("q"));
                    r.limits.insert("cpu".into(), Quantity::parse("1").expect("q"));
                },
                vec!["spec.containers[0].resources.requests[cpu]: Invalid value: \"2\": must be less than or equal to cpu limit of 1"],
            ),
            (
                "mount of an undeclared volume",
                |p| {
                    p.spec.containers[0].volume_mounts.push(VolumeMount {
                        name: "data".into(),
                        ..VolumeMount::default()
                    })
                },
                vec![
                    "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
                    "spec.containers[0].volumeMounts[0].mountPath: Required value",
                ],
            ),
            (
                "mount propagation: unknown, and Bidirectional unprivileged",
                |p| {
                    p.spec.volumes.push(Volume {
                        name: "data".into(),
                        empty_dir: Some(EmptyDirVolume::default()),
                        ..Volume::default()
                    });
                    for (path, mode) in [("/a", "Sideways"), ("/b", "Bidirectional"), ("/c", "HostToContainer")] {
                        p.spec.containers[0].volume_mounts.push(VolumeMount {
                            name: "data".into(),
                            mount_path: path.into(),
                            mount_propagation: Some(mode.into()),
                            ..VolumeMount::default()
                        });
                    }
                },
                vec![
                    "spec.containers[0].volumeMounts[0].mountPropagation: Unsupported value: \"Sideways\": supported values: \"Bidirectional\", \"HostToContainer\", \"None\"",
                    "spec.containers[0].volumeMounts[1].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
                ],
            ),
            (
                "a user namespace beside the host's others",
                |p| {
                    p.spec.host_users = Some(false);
                    p.spec.host_network = true;
                    p.spec.host_pid = true;
                    p.spec.host_ipc = true;
                },
                vec![
                    "spec.hostNetwork: Forbidden: when `pod.Spec.HostUsers` is false",
                    "spec.HostPID: Forbidden: when `pod.Spec.HostUsers` is false",
                    "spec.HostIPC: Forbidden: when `pod.Spec.HostUsers` is false",
                ],
            ),
            (
                "unknown dns policy",
                |p| p.spec.dns_policy = "Google".into(),
                vec!["spec.dnsPolicy: Unsupported value: \"Google\": supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\""],
            ),
        ];
        for (name, mutate, want) in cases {
            let mut pod = valid_pod();
            mutate(&mut pod);
            assert_eq!(messages(&pod), want, "case {name}");
        }
    }

    #[test]
    fn validation_reports_every_problem() {
        let mut pod = valid_pod();
        pod.metadata.name.clear();
        pod.spec.containers[0].image.clear();
        pod.spec.containers.push(Container {
            name: "web".into(),
            image: "nginx".into(),
            ..Container::default()
        });
        let got = messages(&pod);
        assert_eq!(got.len(), 3, "{got:?}");
    }

    #[test]
    fn dns_label_length_limit() {
        let long = "a".repeat(64);
        assert_eq!(
            dns1123_label_errors(&long),
            vec!["must be no more than 63 characters".to_string()]
        );
        assert!(dns1123_label_errors(&"a".repeat(63)).is_empty());
        assert!(dns1123_subdomain_errors("kube-apiserver-node1.example").is_empty());
        assert!(!dns1123_subdomain_errors("a..b").is_empty());
    }
}
