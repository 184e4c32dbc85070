//! The kubelet's client certificate: what it asks for (TLS bootstrap and rotation), where it
//! keeps it, when it renews it, and the kubeconfig that points at it.

use std::path::Path;
use std::time::Duration;

use crate::domain::node_status::model::NodeAddress;
use crate::domain::units::time::rfc3339_seconds;

/// The signer of kubelet client certificates.
pub const SIGNER_KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The usages a kubelet client certificate asks for (upstream's order).
pub const CLIENT_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];
pub const NODES_GROUP: &str = "system:nodes";
/// The file-store prefix: `kubelet-client-<timestamp>.pem` and `kubelet-client-current.pem`.
pub const CLIENT_PAIR_PREFIX: &str = "kubelet-client";
/// Upstream waits an hour for a bootstrap certificate.
pub const BOOTSTRAP_WAIT: Duration = Duration::from_secs(3600);
/// The private key kept while a bootstrap request is pending, reused on a restart.
pub const PENDING_KEY_FILE: &str = "kubelet-client.key.tmp";

/// The signer of kubelet serving certificates (`serverTLSBootstrap`).
pub const SIGNER_KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";
/// The usages a kubelet serving certificate asks for (upstream's order).
pub const SERVING_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];
/// The file-store prefix of serving pairs: `kubelet-server-<timestamp>.pem` and
/// `kubelet-server-current.pem`.
pub const SERVER_PAIR_PREFIX: &str = "kubelet-server";

/// The subject of a node's certificate: its identity, and for a serving certificate its
/// names and addresses (subject alternative names; none for a client certificate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSubject {
    pub common_name: String,
    pub organization: String,
    pub alt_names: Vec<String>,
}

pub fn node_subject(node_name: &str) -> NodeSubject {
    NodeSubject {
        common_name: format!("system:node:{node_name}"),
        organization: NODES_GROUP.into(),
        alt_names: Vec::new(),
    }
}

/// The subject of a serving certificate request: the node's identity with its addresses
/// as upstream's `addressesToHostnamesAndIPs` takes them (a `Hostname` that is an IP and
/// the internal and external IPs as IP addresses, the `Hostname` and DNS entries as
/// names), names sorted then IPs sorted, each once. `None` without any (upstream sends no
/// request then).
pub fn serving_subject(node_name: &str, addresses: &[NodeAddress]) -> Option<NodeSubject> {
    let mut names = std::collections::BTreeSet::new();
    let mut ips = std::collections::BTreeSet::new();
    for a in addresses.iter().filter(|a| !a.address.is_empty()) {
        let ip = a.address.parse::<core::net::IpAddr>().ok();
        match (a.type_.as_str(), ip) {
            ("Hostname", Some(_)) | ("InternalIP" | "ExternalIP", Some(_)) => {
                ips.insert(a.address.clone());
            }
            ("Hostname" | "InternalDNS" | "ExternalDNS", _) => {
                names.insert(a.address.clone());
            }
            _ => {}
        }
    }
    if names.is_empty() && ips.is_empty() {
        return None;
    }
    let mut subject = node_subject(node_name);
    subject.alt_names = names.into_iter().chain(ips).collect();
    Some(subject)
}

/// The file a newly issued pair is written to (upstream's `FileStore`: the key and the
/// certificate in one PEM file, named by the time, `2006-01-02-15-04-05`).
pub fn pair_file_name(now_unix_nanos: i64) -> String {
    prefixed_pair_file_name(CLIENT_PAIR_PREFIX, now_unix_nanos)
}

/// [`pair_file_name`] for the store named `prefix` (`kubelet-client`, `kubelet-server`).
pub fn prefixed_pair_file_name(prefix: &str, now_unix_nanos: i64) -> String {
    let text = rfc3339_seconds(now_unix_nanos);
    let stamp: String = text
        .trim_end_matches('Z')
        .chars()
        .map(|c| if c == 'T' || c == ':' { '-' } else { c })
        .collect();
    format!("{prefix}-{stamp}.pem")
}

/// The link to the current pair.
pub fn current_pair_name() -> String {
    prefixed_current_pair_name(CLIENT_PAIR_PREFIX)
}

/// [`current_pair_name`] for the store named `prefix`.
pub fn prefixed_current_pair_name(prefix: &str) -> String {
    format!("{prefix}-current.pem")
}

/// When to renew a certificate valid from `not_before` to `not_after` (Unix seconds):
/// at 70 % to 90 % of its life, `jitter` in `[0, 1)` picking the point (upstream's
/// `nextRotationDeadline`).
pub fn rotation_deadline(not_before: i64, not_after: i64, jitter: f64) -> i64 {
    let total = (not_after - not_before).max(0) as f64;
    let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
    not_before + (total * fraction).round() as i64
}

/// The certificate blocks and the private key block of a pair file (PEM, any order).
pub fn split_pair(pem: &str) -> (String, Option<String>) {
    let mut certificates = String::new();
    let mut key = None;
    let mut rest = pem;
    while let Some(start) = rest.find("-----BEGIN ") {
        let block = &rest[start..];
        let Some(label_end) = block[11..].find("-----") else {
            break;
        };
        let label = &block[11..11 + label_end];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = block.find(&end_marker) else {
            break;
        };
        let text = &block[..end + end_marker.len()];
        if label.ends_with("PRIVATE KEY") {
            key = Some(format!("{text}\n"));
        } else {
            certificates.push_str(text);
            certificates.push('\n');
        }
        rest = &block[end + end_marker.len()..];
    }
    (certificates, key)
}

/// How a kubeconfig names the API server's CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaSource {
    File(String),
    /// PEM bytes, written base64-encoded.
    Data(String),
    /// `insecure-skip-tls-verify` in the bootstrap kubeconfig, carried over.
    Insecure,
}

/// The kubeconfig written after TLS bootstrap (upstream's `writeKubeconfigFromBootstrapping`):
/// the bootstrap kubeconfig's server and CA, and the current pair for the client. JSON
/// strings are valid YAML, so every value is quoted that way.
pub fn bootstrapped_kubeconfig(server: &str, ca: &CaSource, pair_path: &Path) -> String {
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let ca_line = match ca {
        CaSource::File(path) => format!("    certificate-authority: {}\n", q(path)),
        CaSource::Data(base64) => format!("    certificate-authority-data: {}\n", q(base64)),
        CaSource::Insecure => "    insecure-skip-tls-verify: true\n".to_string(),
    };
    let pair = pair_path.to_string_lossy();
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - cluster:\n\
         {ca_line}    server: {server}\n\
         \x20 name: default-cluster\n\
         contexts:\n\
         - context:\n\
         \x20   cluster: default-cluster\n\
         \x20   namespace: default\n\
         \x20   user: default-auth\n\
         \x20 name: default-context\n\
         current-context: default-context\n\
         preferences: {{}}\n\
         users:\n\
         - name: default-auth\n\
         \x20 user:\n\
         \x20   client-certificate: {pair}\n\
         \x20   client-key: {pair}\n",
        server = q(server),
        pair = q(&pair),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_files_are_named_by_time() {
        assert_eq!(
            pair_file_name(1_795_232_011_900_000_000),
            "kubelet-client-2026-11-21-03-33-31.pem"
        );
        assert_eq!(current_pair_name(), "kubelet-client-current.pem");
    }

    #[test]
    fn renewal_falls_between_70_and_90_percent() {
        assert_eq!(rotation_deadline(1000, 2000, 0.0), 1700);
        assert_eq!(rotation_deadline(1000, 2000, 0.5), 1800);
        assert_eq!(rotation_deadline(1000, 2000, 1.0), 1900);
        assert_eq!(rotation_deadline(1000, 500, 0.5), 1000);
    }

    #[test]
    fn a_pair_splits_into_certificate_and_key() {
        let pem = "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n\
                   -----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n";
        let (cert, key) = split_pair(pem);
        assert_eq!(
            cert,
            "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n"
        );
        assert_eq!(
            key.as_deref(),
            Some("-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n")
        );
        assert_eq!(split_pair("junk"), (String::new(), None));
    }

    #[test]
    fn subject_is_the_nodes_identity() {
        assert_eq!(
            node_subject("n1"),
            NodeSubject {
                common_name: "system:node:n1".into(),
                organization: "system:nodes".into(),
                alt_names: vec![],
            }
        );
    }

    #[test]
    fn serving_subject_names_the_nodes_addresses_as_upstream() {
        let a = |t: &str, v: &str| NodeAddress {
            type_: t.into(),
            address: v.into(),
        };
        let subject = serving_subject(
            "n1",
            &[
                a("InternalIP", "10.0.0.9"),
                a("Hostname", "node-1"),
                a("ExternalIP", "not-an-ip"),
                a("InternalDNS", "n1.internal"),
                a("InternalIP", "10.0.0.10"),
                a("InternalIP", "10.0.0.9"),
                a("Hostname", ""),
            ],
        )
        .unwrap_or_else(|| panic!("a subject"));
        assert_eq!(subject.common_name, "system:node:n1");
        assert_eq!(subject.organization, "system:nodes");
        assert_eq!(
            subject.alt_names,
            ["n1.internal", "node-1", "10.0.0.10", "10.0.0.9"]
        );
        assert_eq!(serving_subject("n1", &[a("Hostname", "")]), None);
        assert_eq!(
            prefixed_pair_file_name(SERVER_PAIR_PREFIX, 0),
            "kubelet-server-1970-01-01-00-00-00.pem"
        );
        assert_eq!(
            prefixed_current_pair_name(SERVER_PAIR_PREFIX),
            "kubelet-server-current.pem"
        );
    }

    #[test]
    fn golden_bootstrapped_kubeconfig() {
        let text = bootstrapped_kubeconfig(
            "https://127.0.0.1:6443",
            &CaSource::Data("Q0E=".into()),
            Path::new("/var/lib/kubelet/pki/kubelet-client-current.pem"),
        );
        assert_eq!(
            text,
            r#"apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: "Q0E="
    server: "https://127.0.0.1:6443"
  name: default-cluster
contexts:
- context:
    cluster: default-cluster
    namespace: default
    user: default-auth
  name: default-context
current-context: default-context
preferences: {}
users:
- name: default-auth
  user:
    client-certificate: "/var/lib/kubelet/pki/kubelet-client-current.pem"
    client-key: "/var/lib/kubelet/pki/kubelet-client-current.pem"
"#
        );
    }
}
