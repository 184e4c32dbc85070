//! The managed `/etc/hosts` of a pod's containers (upstream's `makeHostsMount`,
//! `managedHostsFileContent`, `nodeHostsFileContent`): `<pod-dir>/etc-hosts`, mounted at
//! `/etc/hosts` once the pod has an IP, unless the container mounts something there
//! itself. It names localhost, the pod's IP with its hostname (and FQDN with a
//! subdomain), and the `hostAliases`; a host-network pod gets the node's file and the
//! aliases.

use std::path::{Path, PathBuf};

use super::requests::{pod_dir, RequestContext};
use crate::domain::pod::{HostAlias, Pod};

pub const ETC_HOSTS_PATH: &str = "/etc/hosts";
const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.\n";
const MANAGED_HEADER_HOST_NETWORK: &str = "# Kubernetes-managed hosts file (host network).\n";

/// `<root-dir>/pods/<uid>/etc-hosts`
pub fn etc_hosts_file(ctx: &RequestContext, pod_uid: &str) -> PathBuf {
    pod_dir(ctx, pod_uid).join(ETC_HOSTS_FILE)
}

/// [`etc_hosts_file`] from the root directory alone.
pub fn etc_hosts_file_in(root_dir: &Path, pod_uid: &str) -> PathBuf {
    root_dir.join("pods").join(pod_uid).join(ETC_HOSTS_FILE)
}

const ETC_HOSTS_FILE: &str = "etc-hosts";

fn alias_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for alias in aliases {
        out.push_str(&format!("{}\t{}\n", alias.ip, alias.hostnames.join("\t")));
    }
    out
}

/// Upstream's `managedHostsFileContent`.
pub fn managed_hosts_content(
    pod_ips: &[String],
    host_name: &str,
    host_domain: &str,
    aliases: &[HostAlias],
) -> String {
    let mut out = String::from(MANAGED_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        if host_domain.is_empty() {
            out.push_str(&format!("{ip}\t{host_name}\n"));
        } else {
            out.push_str(&format!("{ip}\t{host_name}.{host_domain}\t{host_name}\n"));
        }
    }
    out.push_str(&alias_entries(aliases));
    out
}

/// Upstream's `nodeHostsFileContent`: the node's file, then the aliases.
pub fn node_hosts_content(node_hosts: &str, aliases: &[HostAlias]) -> String {
    format!(
        "{MANAGED_HEADER_HOST_NETWORK}{node_hosts}{}",
        alias_entries(aliases)
    )
}

/// The pod's domain (`<subdomain>.<namespace>.svc.<cluster domain>`), empty without a
/// subdomain (upstream's `GeneratePodHostNameAndDomain`).
pub fn pod_host_domain(ctx: &RequestContext, pod: &Pod) -> String {
    if pod.spec.subdomain.is_empty() || ctx.cluster_domain.is_empty() {
        return String::new();
    }
    format!(
        "{}.{}.svc.{}",
        pod.spec.subdomain, pod.metadata.namespace, ctx.cluster_domain
    )
}

/// The IP the hosts file names: the sandbox's, or the node's for a host-network pod
/// (whose sandbox the runtime may report without one).
pub fn hosts_ip<'a>(pod: &Pod, pod_ip: &'a str, host_ip: &'a str) -> &'a str {
    if pod_ip.is_empty() && pod.spec.host_network {
        host_ip
    } else {
        pod_ip
    }
}

/// The mount of the pod's hosts file into `container` when it gets one.
pub fn hosts_mount(
    ctx: &RequestContext,
    pod: &Pod,
    container: &crate::domain::pod::Container,
    ip: &str,
) -> Option<super::requests::Mount> {
    if ip.is_empty()
        || container
            .volume_mounts
            .iter()
            .any(|m| m.mount_path == ETC_HOSTS_PATH)
    {
        return None;
    }
    Some(super::requests::Mount {
        container_path: ETC_HOSTS_PATH.into(),
        host_path: etc_hosts_file(ctx, &pod.metadata.uid).display().to_string(),
        readonly: false,
        ..Default::default()
    })
}

/// What to write to the pod's hosts file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostsFile {
    /// This content.
    Managed(String),
    /// The node's `/etc/hosts` under the host-network header, then this (the aliases).
    FromNode { aliases: String },
}

impl HostsFile {
    /// The content, given the node's `/etc/hosts` for a host-network pod.
    pub fn content(&self, node_hosts: &str) -> String {
        match self {
            HostsFile::Managed(text) => text.clone(),
            HostsFile::FromNode { aliases } => {
                format!("{MANAGED_HEADER_HOST_NETWORK}{node_hosts}{aliases}")
            }
        }
    }

    /// The hosts file of `pod` with IP `pod_ip`; `None` while it has none (upstream's
    /// `shouldMountHostsFile`).
    pub fn of(ctx: &RequestContext, pod: &Pod, pod_ip: &str, host_name: &str) -> Option<Self> {
        if pod_ip.is_empty() {
            return None;
        }
        let aliases = &pod.spec.host_aliases;
        Some(if pod.spec.host_network {
            HostsFile::FromNode {
                aliases: alias_entries(aliases),
            }
        } else {
            HostsFile::Managed(managed_hosts_content(
                &[pod_ip.to_owned()],
                host_name,
                &pod_host_domain(ctx, pod),
                aliases,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aliases() -> Vec<HostAlias> {
        vec![HostAlias {
            ip: "10.1.2.3".into(),
            hostnames: vec!["foo.local".into(), "bar.local".into()],
        }]
    }

    #[test]
    fn the_managed_file_is_upstreams() {
        assert_eq!(
            managed_hosts_content(&["10.0.0.5".into()], "web", "", &aliases()),
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n10.0.0.5\tweb\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"
        );
        let text =
            managed_hosts_content(&["10.0.0.5".into()], "web", "sub.ns.svc.cluster.local", &[]);
        assert!(
            text.ends_with("10.0.0.5\tweb.sub.ns.svc.cluster.local\tweb\n"),
            "{text}"
        );
        assert_eq!(
            node_hosts_content("127.0.0.1 localhost\n", &aliases()),
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"
        );
    }

    #[test]
    fn no_file_before_the_pod_has_an_ip_and_host_network_pods_get_the_nodes() {
        let ctx = RequestContext::under_root(std::path::Path::new("/r"));
        let mut pod = Pod::default();
        pod.spec.host_aliases = aliases();
        assert_eq!(HostsFile::of(&ctx, &pod, "", "p"), None);
        pod.spec.host_network = true;
        let file = HostsFile::of(&ctx, &pod, "192.168.1.2", "node").expect("file");
        assert_eq!(
            file.content("1.1.1.1 n\n"),
            node_hosts_content("1.1.1.1 n\n", &pod.spec.host_aliases)
        );
        pod.spec.subdomain = "s".into();
        pod.metadata.namespace = "ns".into();
        assert_eq!(pod_host_domain(&ctx, &pod), "s.ns.svc.cluster.local");
    }
}
