//! Pod DNS, as upstream's `pkg/kubelet/network/dns` forms it: the node's
//! resolv.conf parsed, and the resolver configuration a pod gets from its
//! `dnsPolicy` and `dnsConfig`, the cluster DNS servers and the cluster domain.

use crate::domain::pod::PodDnsConfig;

/// Most nameservers a resolver reads (glibc's MAXNS); upstream cuts the rest.
pub const MAX_NAMESERVERS: usize = 3;
/// Most search domains, and their most characters joined by spaces
/// (upstream's expanded DNS config limits).
pub const MAX_SEARCHES: usize = 32;
pub const MAX_SEARCH_CHARS: usize = 2048;
/// Options of a cluster-first pod: names with fewer dots try the search list first.
pub const CLUSTER_FIRST_OPTIONS: &[&str] = &["ndots:5"];

/// The parts of a resolv.conf the kubelet uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvConf {
    pub nameservers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// A pod's resolver configuration (servers, search list, options).
pub type DnsConfigParts = ResolvConf;

/// Something the caller should report as a warning event about a pod's DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsWarning {
    /// The policy is not one the API allows; the pod got ClusterFirst.
    InvalidPolicy(String),
    /// ClusterFirst without `clusterDNS` configured: the pod got the node's DNS.
    MissingClusterDns,
    /// More nameservers than a resolver reads; these are the ones applied.
    NameserversTruncated(Vec<String>),
    /// The search list exceeded its limits; these are the domains applied.
    SearchesTruncated(Vec<String>),
}

impl std::fmt::Display for DnsWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DnsWarning::InvalidPolicy(p) => {
                write!(f, "invalid dnsPolicy {p:?}: falling back to ClusterFirst")
            }
            DnsWarning::MissingClusterDns => f.write_str(
                "kubelet does not have ClusterDNS IP configured and cannot create Pod using \
                 \"ClusterFirst\" policy. Falling back to \"Default\" policy.",
            ),
            DnsWarning::NameserversTruncated(applied) => write!(
                f,
                "Nameserver limits were exceeded, some nameservers have been omitted, \
                 the applied nameserver line is: {}",
                applied.join(" ")
            ),
            DnsWarning::SearchesTruncated(applied) => write!(
                f,
                "Search Line limits were exceeded, some search paths have been omitted, \
                 the applied search line is: {}",
                applied.join(" ")
            ),
        }
    }
}

/// A pod's DNS and what went wrong forming it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodDns {
    pub config: DnsConfigParts,
    pub warnings: Vec<DnsWarning>,
}

/// Parses resolv.conf text: `nameserver` lines accumulate, the last
/// `search` or `domain` line wins (resolv.conf(5) makes them exclusive;
/// upstream only reads `search`), `options` accumulate with a later option
/// of the same name replacing the earlier one. Lines starting with `#` or
/// `;` are comments. Trailing dots of search domains are dropped and a lone
/// `.` skipped, so one domain never counts twice against the limits.
pub fn parse_resolv_conf(text: &str) -> ResolvConf {
    let mut conf = ResolvConf::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let Some(keyword) = fields.next() else {
            continue;
        };
        match keyword {
            "nameserver" => conf.nameservers.extend(fields.next().map(str::to_string)),
            "search" | "domain" => {
                conf.searches = fields
                    .filter(|s| *s != ".")
                    .map(|s| s.strip_suffix('.').unwrap_or(s).to_string())
                    .collect();
            }
            "options" => {
                for option in fields {
                    let name = option_name(option);
                    match conf.options.iter_mut().find(|o| option_name(o) == name) {
                        Some(existing) => *existing = option.to_string(),
                        None => conf.options.push(option.to_string()),
                    }
                }
            }
            _ => {}
        }
    }
    conf
}

fn option_name(option: &str) -> &str {
    option.split(':').next().unwrap_or(option)
}

/// The resolver configuration of a pod with DNS policy `policy`, by
/// upstream's `GetPodDNS`:
/// - `None`: empty;
/// - `Default`, and `ClusterFirst` under host networking: the node's;
/// - `ClusterFirst` / `ClusterFirstWithHostNet`: the cluster DNS servers,
///   `<ns>.svc.<domain> svc.<domain> <domain>` before the node's search
///   domains, and `ndots:5`; without cluster DNS the node's, with a warning;
/// - anything else: treated as `ClusterFirst`, with a warning;
///
/// then the pod's `dnsConfig` appended (`append_pod_config`), and the whole cut to the
/// resolver's limits (with a warning when something is cut).
pub fn pod_dns(
    policy: &str,
    pod_config: Option<&PodDnsConfig>,
    host_network: bool,
    host: &ResolvConf,
    cluster_dns: &[String],
    cluster_domain: &str,
    namespace: &str,
) -> PodDns {
    let mut warnings = Vec::new();
    let cluster = match policy {
        "None" => {
            let mut config = ResolvConf::default();
            if let Some(pod_config) = pod_config {
                append_pod_config(&mut config, pod_config);
            }
            fit_limits(&mut config, &mut warnings);
            return PodDns { config, warnings };
        }
        "ClusterFirstWithHostNet" => true,
        "ClusterFirst" => !host_network,
        "Default" => false,
        other => {
            warnings.push(DnsWarning::InvalidPolicy(other.to_string()));
            true
        }
    };
    let mut config = host.clone();
    if cluster {
        if cluster_dns.is_empty() {
            warnings.push(DnsWarning::MissingClusterDns);
        } else {
            config.nameservers = cluster_dns.to_vec();
            config.searches = cluster_searches(&host.searches, cluster_domain, namespace);
            config.options = CLUSTER_FIRST_OPTIONS
                .iter()
                .map(|o| o.to_string())
                .collect();
        }
    }
    if let Some(pod_config) = pod_config {
        append_pod_config(&mut config, pod_config);
    }
    fit_limits(&mut config, &mut warnings);
    PodDns { config, warnings }
}

/// Upstream's `appendDNSConfig`: the pod's `dnsConfig` after what its policy gave, each
/// server and search domain once, its options replacing those of the same name.
fn append_pod_config(config: &mut ResolvConf, pod: &PodDnsConfig) {
    let append_new = |list: &mut Vec<String>, more: &[String]| {
        for item in more {
            if !list.contains(item) {
                list.push(item.clone());
            }
        }
    };
    append_new(&mut config.nameservers, &pod.nameservers);
    append_new(&mut config.searches, &pod.searches);
    for option in &pod.options {
        let text = match &option.value {
            Some(value) if !value.is_empty() => format!("{}:{value}", option.name),
            _ => option.name.clone(),
        };
        match config
            .options
            .iter_mut()
            .find(|o| option_name(o) == option.name)
        {
            Some(existing) => *existing = text,
            None => config.options.push(text),
        }
    }
}

/// Cuts the configuration to the resolver's limits, with a warning for what was cut.
fn fit_limits(config: &mut ResolvConf, warnings: &mut Vec<DnsWarning>) {
    if config.nameservers.len() > MAX_NAMESERVERS {
        config.nameservers.truncate(MAX_NAMESERVERS);
        warnings.push(DnsWarning::NameserversTruncated(config.nameservers.clone()));
    }
    if fit_searches(&mut config.searches) {
        warnings.push(DnsWarning::SearchesTruncated(config.searches.clone()));
    }
}

fn cluster_searches(host: &[String], cluster_domain: &str, namespace: &str) -> Vec<String> {
    if cluster_domain.is_empty() {
        return host.to_vec();
    }
    let cluster = [
        format!("{namespace}.svc.{cluster_domain}"),
        format!("svc.{cluster_domain}"),
        cluster_domain.to_string(),
    ];
    let mut out: Vec<String> = Vec::new();
    for s in cluster.iter().chain(host) {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// Cuts the search list to the limits; true when something was cut.
fn fit_searches(searches: &mut Vec<String>) -> bool {
    let mut cut = false;
    if searches.len() > MAX_SEARCHES {
        searches.truncate(MAX_SEARCHES);
        cut = true;
    }
    while searches.join(" ").len() > MAX_SEARCH_CHARS {
        searches.pop();
        cut = true;
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_resolv_conf() {
        let cases: &[(&str, ResolvConf)] = &[
            ("", ResolvConf::default()),
            (
                "nameserver 1.2.3.4\n  nameserver   5.6.7.8 extra\nnameserver\n",
                ResolvConf {
                    nameservers: v(&["1.2.3.4", "5.6.7.8"]),
                    ..Default::default()
                },
            ),
            (
                "# comment\n; nameserver 9.9.9.9\nsearch a.com b.com.\nsearch c.com . d.com\n",
                ResolvConf {
                    searches: v(&["c.com", "d.com"]),
                    ..Default::default()
                },
            ),
            (
                "search a.com\ndomain example.org\n",
                ResolvConf {
                    searches: v(&["example.org"]),
                    ..Default::default()
                },
            ),
            (
                "options ndots:1 rotate\noptions ndots:2 timeout:1\n",
                ResolvConf {
                    options: v(&["ndots:2", "rotate", "timeout:1"]),
                    ..Default::default()
                },
            ),
            (
                "nameserver 10.0.0.1\r\nsearch x.local\r\n",
                ResolvConf {
                    nameservers: v(&["10.0.0.1"]),
                    searches: v(&["x.local"]),
                    ..Default::default()
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(&parse_resolv_conf(text), want, "{text:?}");
        }
    }

    fn host() -> ResolvConf {
        ResolvConf {
            nameservers: v(&["192.168.1.1"]),
            searches: v(&["corp.example", "cluster.local"]),
            options: v(&["timeout:2"]),
        }
    }

    fn cluster_config() -> ResolvConf {
        ResolvConf {
            nameservers: v(&["10.96.0.10"]),
            searches: v(&[
                "ns1.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
            ]),
            options: v(&["ndots:5"]),
        }
    }

    #[test]
    fn policies() {
        let dns = v(&["10.96.0.10"]);
        // (policy, hostNetwork, clusterDNS, want, warnings)
        type Case<'a> = (&'a str, bool, &'a [String], ResolvConf, Vec<DnsWarning>);
        let cases: &[Case] = &[
            ("Default", false, &dns, host(), vec![]),
            ("ClusterFirst", false, &dns, cluster_config(), vec![]),
            ("ClusterFirst", true, &dns, host(), vec![]),
            (
                "ClusterFirstWithHostNet",
                true,
                &dns,
                cluster_config(),
                vec![],
            ),
            (
                "ClusterFirstWithHostNet",
                false,
                &dns,
                cluster_config(),
                vec![],
            ),
            ("None", false, &dns, ResolvConf::default(), vec![]),
            ("None", true, &[], ResolvConf::default(), vec![]),
            (
                "ClusterFirst",
                false,
                &[],
                host(),
                vec![DnsWarning::MissingClusterDns],
            ),
            (
                "Bogus",
                false,
                &dns,
                cluster_config(),
                vec![DnsWarning::InvalidPolicy("Bogus".into())],
            ),
        ];
        for (policy, host_network, cluster_dns, want, warnings) in cases {
            let got = pod_dns(
                policy,
                None,
                *host_network,
                &host(),
                cluster_dns,
                "cluster.local",
                "ns1",
            );
            assert_eq!(&got.config, want, "{policy} hostNetwork={host_network}");
            assert_eq!(&got.warnings, warnings, "{policy}");
        }
    }

    #[test]
    fn no_cluster_domain_keeps_host_searches() {
        let got = pod_dns(
            "ClusterFirst",
            None,
            false,
            &host(),
            &v(&["10.0.0.10"]),
            "",
            "ns",
        );
        assert_eq!(got.config.searches, host().searches);
        assert_eq!(got.config.nameservers, v(&["10.0.0.10"]));
    }

    #[test]
    fn limits_cut_with_warnings() {
        let big = ResolvConf {
            nameservers: v(&["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]),
            searches: (0..40).map(|i| format!("d{i}.example")).collect(),
            options: vec![],
        };
        let got = pod_dns("Default", None, false, &big, &[], "", "ns");
        assert_eq!(got.config.nameservers.len(), MAX_NAMESERVERS);
        assert_eq!(got.config.searches.len(), MAX_SEARCHES);
        assert!(matches!(
            got.warnings.as_slice(),
            [
                DnsWarning::NameserversTruncated(_),
                DnsWarning::SearchesTruncated(_)
            ]
        ));
        let long = ResolvConf {
            searches: (0..10).map(|i| format!("{i}{}", "x".repeat(250))).collect(),
            ..Default::default()
        };
        let got = pod_dns("Default", None, false, &long, &[], "", "ns");
        assert!(got.config.searches.join(" ").len() <= MAX_SEARCH_CHARS);
        assert_eq!(got.config.searches.len(), 8);
    }

    /// Upstream's `TestGetPodDNSCustom` cases: `dnsConfig` alone under `None`, appended
    /// to the cluster's and the node's otherwise, options replaced by name, then the
    /// limits.
    #[test]
    fn a_pods_dns_config_is_merged_as_upstream() {
        use crate::domain::pod::PodDnsConfigOption;
        let option = |name: &str, value: Option<&str>| PodDnsConfigOption {
            name: name.into(),
            value: value.map(str::to_owned),
        };
        let custom = PodDnsConfig {
            nameservers: v(&["203.0.113.1", "10.96.0.10"]),
            searches: v(&["my.dns.search.suffix", "svc.cluster.local"]),
            options: vec![option("ndots", Some("2")), option("edns0", None)],
        };
        let dns = v(&["10.96.0.10"]);
        let none = pod_dns(
            "None",
            Some(&custom),
            false,
            &host(),
            &dns,
            "cluster.local",
            "ns1",
        );
        assert_eq!(
            none.config,
            ResolvConf {
                nameservers: v(&["203.0.113.1", "10.96.0.10"]),
                searches: v(&["my.dns.search.suffix", "svc.cluster.local"]),
                options: v(&["ndots:2", "edns0"]),
            }
        );
        assert!(none.warnings.is_empty());
        let cluster = pod_dns(
            "ClusterFirst",
            Some(&custom),
            false,
            &host(),
            &dns,
            "cluster.local",
            "ns1",
        );
        assert_eq!(
            cluster.config.nameservers,
            v(&["10.96.0.10", "203.0.113.1"])
        );
        assert_eq!(
            cluster.config.searches,
            v(&[
                "ns1.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
                "my.dns.search.suffix",
            ])
        );
        assert_eq!(cluster.config.options, v(&["ndots:2", "edns0"]));
        let default = pod_dns("Default", Some(&custom), false, &host(), &dns, "", "ns1");
        assert_eq!(
            default.config.options,
            v(&["timeout:2", "ndots:2", "edns0"])
        );
        // Four servers in all: the resolver reads three, with upstream's warning.
        let many = PodDnsConfig {
            nameservers: v(&["1.1.1.1", "2.2.2.2", "3.3.3.3"]),
            ..PodDnsConfig::default()
        };
        let cut = pod_dns("Default", Some(&many), false, &host(), &dns, "", "ns1");
        assert_eq!(
            cut.config.nameservers,
            v(&["192.168.1.1", "1.1.1.1", "2.2.2.2"])
        );
        assert_eq!(
            cut.warnings,
            [DnsWarning::NameserversTruncated(v(&[
                "192.168.1.1",
                "1.1.1.1",
                "2.2.2.2"
            ]))]
        );
    }
}
