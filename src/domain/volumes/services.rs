//! Service links (upstream's `getServiceEnvVarMap` and `envvars.FromServices`): the
//! environment a container gets from Services: the master `kubernetes` Service of the
//! `default` namespace always, and, with `enableServiceLinks` (the default), every Service
//! of the pod's own namespace, each as `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT`,
//! `<NAME>_SERVICE_PORT_<PORTNAME>` and Docker's link variables (`<NAME>_PORT`,
//! `<NAME>_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]`). Services without a cluster IP
//! (headless) give nothing.

use std::collections::BTreeMap;

/// The namespace of the master services (upstream's `masterServiceNamespace` default).
pub const MASTER_SERVICE_NAMESPACE: &str = "default";
/// The master services, whose variables every pod gets.
pub const MASTER_SERVICES: &[&str] = &["kubernetes"];

/// One port of a Service.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServicePort {
    pub name: String,
    pub port: i32,
    /// `TCP` when empty.
    pub protocol: String,
}

/// What service links need of a Service.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceInfo {
    pub namespace: String,
    pub name: String,
    /// `None` or empty: headless, no variables.
    pub cluster_ip: String,
    pub ports: Vec<ServicePort>,
}

impl ServiceInfo {
    /// Upstream's `IsServiceIPSet`.
    fn ip_set(&self) -> bool {
        !self.cluster_ip.is_empty() && self.cluster_ip != "None"
    }
}

/// Upstream's `makeEnvVariableName`.
fn env_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

fn host_port(ip: &str, port: i32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// The variables of one Service (upstream's `FromServices` for one entry).
fn service_vars(service: &ServiceInfo, out: &mut BTreeMap<String, String>) {
    let Some(first) = service.ports.first() else {
        // Validation refuses a Service without ports unless headless; skip it then.
        return;
    };
    let prefix = env_name(&service.name);
    let ip = &service.cluster_ip;
    out.insert(format!("{prefix}_SERVICE_HOST"), ip.clone());
    out.insert(format!("{prefix}_SERVICE_PORT"), first.port.to_string());
    for p in service.ports.iter().filter(|p| !p.name.is_empty()) {
        out.insert(
            format!("{prefix}_SERVICE_PORT_{}", env_name(&p.name)),
            p.port.to_string(),
        );
    }
    for (i, p) in service.ports.iter().enumerate() {
        let protocol = if p.protocol.is_empty() {
            "TCP"
        } else {
            p.protocol.as_str()
        };
        let lower = protocol.to_lowercase();
        let url = format!("{lower}://{}", host_port(ip, p.port));
        if i == 0 {
            out.insert(format!("{prefix}_PORT"), url.clone());
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
        out.insert(format!("{port_prefix}_PROTO"), lower);
        out.insert(format!("{port_prefix}_PORT"), p.port.to_string());
        out.insert(format!("{port_prefix}_ADDR"), ip.clone());
        out.insert(port_prefix, url);
    }
}

/// The service-link environment of a pod in `namespace` (upstream's
/// `getServiceEnvVarMap`): `services` are all the Services the node sees.
pub fn service_env(
    services: &[ServiceInfo],
    namespace: &str,
    enable_service_links: bool,
) -> BTreeMap<String, String> {
    let mut chosen: BTreeMap<&str, &ServiceInfo> = BTreeMap::new();
    for service in services.iter().filter(|s| s.ip_set()) {
        if service.namespace == MASTER_SERVICE_NAMESPACE
            && MASTER_SERVICES.contains(&service.name.as_str())
        {
            chosen.entry(service.name.as_str()).or_insert(service);
        } else if service.namespace == namespace && enable_service_links {
            chosen.insert(service.name.as_str(), service);
        }
    }
    let mut out = BTreeMap::new();
    for service in chosen.values() {
        service_vars(service, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, name: &str, ip: &str, ports: &[(&str, i32, &str)]) -> ServiceInfo {
        ServiceInfo {
            namespace: ns.into(),
            name: name.into(),
            cluster_ip: ip.into(),
            ports: ports
                .iter()
                .map(|(n, p, proto)| ServicePort {
                    name: (*n).into(),
                    port: *p,
                    protocol: (*proto).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn services_become_upstreams_variables() {
        let services = [
            svc(
                "default",
                "kubernetes",
                "10.0.0.1",
                &[("https", 443, "TCP")],
            ),
            svc(
                "app",
                "my-db",
                "10.0.0.7",
                &[("sql", 5432, ""), ("stats", 9000, "UDP")],
            ),
            svc("app", "headless", "None", &[("x", 1, "TCP")]),
            svc("other", "elsewhere", "10.0.0.9", &[("", 80, "TCP")]),
        ];
        let env = service_env(&services, "app", true);
        let get = |k: &str| env.get(k).map(String::as_str);
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("10.0.0.1"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("443"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT_HTTPS"), Some("443"));
        assert_eq!(get("KUBERNETES_PORT"), Some("tcp://10.0.0.1:443"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP"), Some("tcp://10.0.0.1:443"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP_PROTO"), Some("tcp"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP_PORT"), Some("443"));
        assert_eq!(get("KUBERNETES_PORT_443_TCP_ADDR"), Some("10.0.0.1"));
        assert_eq!(get("MY_DB_SERVICE_PORT_SQL"), Some("5432"));
        assert_eq!(get("MY_DB_PORT_9000_UDP"), Some("udp://10.0.0.7:9000"));
        assert_eq!(get("MY_DB_PORT"), Some("tcp://10.0.0.7:5432"));
        assert!(!env.keys().any(|k| k.starts_with("HEADLESS")));
        assert!(!env.keys().any(|k| k.starts_with("ELSEWHERE")));
        assert_eq!(env.len(), 8 + 4 + 9);

        // Without service links only the master service remains.
        let env = service_env(&services, "app", false);
        assert!(env.keys().all(|k| k.starts_with("KUBERNETES_")), "{env:?}");
        // A `kubernetes` Service of the pod's own namespace wins over the master one
        // (upstream's map keeps the master service only where the name is free).
        let mut more = services.to_vec();
        more.push(svc("app", "kubernetes", "10.0.0.99", &[("", 1, "TCP")]));
        let env = service_env(&more, "app", true);
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.0.0.99");
        // IPv6 cluster IPs are bracketed in URLs.
        let env = service_env(
            &[svc("default", "kubernetes", "fd00::1", &[("", 443, "")])],
            "x",
            true,
        );
        assert_eq!(env["KUBERNETES_PORT"], "tcp://[fd00::1]:443");
    }
}
