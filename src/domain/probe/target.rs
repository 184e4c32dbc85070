//! Where a network handler goes: the port (by number or by the name of a container
//! port), the host (the pod IP unless given), the URL and headers of an `httpGet`
//! (upstream's `NewRequestForHTTPGetAction`).

use super::spec::{HttpGetAction, IntOrString, LifecycleHandler, ProbeHandler, UriScheme};
use crate::domain::pod::Container;

/// Why a handler's target cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("couldn't find port: {port} in container {container}")]
    PortNotFound { port: String, container: String },
    #[error("invalid port number: {0}")]
    InvalidPort(i64),
    #[error("the pod has no IP yet")]
    NoPodIp,
    #[error("missing probe handler for container {0}")]
    NoHandler(String),
}

/// An HTTP GET to make (upstream's probe request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
    /// In order; `User-Agent` and `Accept` added as upstream does unless given.
    pub headers: Vec<(String, String)>,
}

impl HttpTarget {
    /// `host:port`, with brackets around an IPv6 address.
    pub fn authority(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority(), self.path)
    }
}

/// `host:port` as Go's `net.JoinHostPort` writes it (brackets around a host with a
/// colon: an IPv6 address).
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// What a handler does, its target resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerTarget {
    Exec(Vec<String>),
    Http(HttpTarget),
    Tcp {
        host: String,
        port: u16,
    },
    Grpc {
        host: String,
        port: u16,
        service: String,
    },
    Sleep(i64),
}

/// The port `port` names in `container` (upstream's `ResolveContainerPort` and the
/// hooks' `resolvePort`: a number, a numeric string, or a container port's name).
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, TargetError> {
    let number = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => match name.parse::<i64>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .iter()
                .find(|p| &p.name == name)
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| TargetError::PortNotFound {
                    port: name.clone(),
                    container: container.name.clone(),
                })?,
        },
    };
    u16::try_from(number)
        .ok()
        .filter(|n| *n > 0)
        .ok_or(TargetError::InvalidPort(number))
}

/// The address a handler without a host goes to: the sandbox's IP; for a host-network pod
/// (whose sandbox has none) the node's IP, which upstream gives it as its pod IP, or the
/// local system where the node's IP is unknown (standalone, where upstream's empty host
/// dials the local system too).
pub fn handler_pod_ip(host_network: bool, sandbox_ip: &str, node_ip: &str) -> String {
    match (sandbox_ip.is_empty(), host_network, node_ip.is_empty()) {
        (false, _, _) | (true, false, _) => sandbox_ip.to_owned(),
        (true, true, false) => node_ip.to_owned(),
        (true, true, true) => "127.0.0.1".to_owned(),
    }
}

fn host_or_pod_ip(host: &str, pod_ip: &str) -> Result<String, TargetError> {
    match (host.is_empty(), pod_ip.is_empty()) {
        (false, _) => Ok(host.to_owned()),
        (true, false) => Ok(pod_ip.to_owned()),
        (true, true) => Err(TargetError::NoPodIp),
    }
}

fn http_target(
    http: &HttpGetAction,
    container: &Container,
    pod_ip: &str,
    purpose: &str,
) -> Result<HttpTarget, TargetError> {
    let mut headers: Vec<(String, String)> = http
        .http_headers
        .iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect();
    let has = |headers: &[(String, String)], name: &str| {
        headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    if !has(&headers, "User-Agent") {
        headers.push(("User-Agent".to_owned(), format!("kube-{purpose}/1.26")));
    }
    if !has(&headers, "Accept") {
        headers.push(("Accept".to_owned(), "*/*".to_owned()));
    } else {
        // An Accept given empty means "send none".
        headers.retain(|(n, v)| !(n.eq_ignore_ascii_case("Accept") && v.is_empty()));
    }
    let path = if http.path.starts_with('/') {
        http.path.clone()
    } else {
        format!("/{}", http.path)
    };
    Ok(HttpTarget {
        https: http.scheme() == UriScheme::Https,
        host: host_or_pod_ip(&http.host, pod_ip)?,
        port: resolve_port(&http.port, container)?,
        path,
        headers,
    })
}

/// The target of a probe's handler in `container` of a pod at `pod_ip`.
pub fn probe_target(
    handler: &ProbeHandler,
    container: &Container,
    pod_ip: &str,
) -> Result<HandlerTarget, TargetError> {
    if let Some(exec) = &handler.exec {
        return Ok(HandlerTarget::Exec(exec.command.clone()));
    }
    if let Some(http) = &handler.http_get {
        return Ok(HandlerTarget::Http(http_target(
            http, container, pod_ip, "probe",
        )?));
    }
    if let Some(tcp) = &handler.tcp_socket {
        return Ok(HandlerTarget::Tcp {
            host: host_or_pod_ip(&tcp.host, pod_ip)?,
            port: resolve_port(&tcp.port, container)?,
        });
    }
    if let Some(grpc) = &handler.grpc {
        return Ok(HandlerTarget::Grpc {
            host: host_or_pod_ip("", pod_ip)?,
            port: resolve_port(&IntOrString::Int(grpc.port), container)?,
            service: grpc.service.clone().unwrap_or_default(),
        });
    }
    Err(TargetError::NoHandler(container.name.clone()))
}

/// The target of a lifecycle hook (upstream's handler runner: exec, httpGet with the
/// `kube-lifecycle` agent, sleep; `tcpSocket` is not run).
pub fn hook_target(
    handler: &LifecycleHandler,
    container: &Container,
    pod_ip: &str,
) -> Result<HandlerTarget, TargetError> {
    if let Some(exec) = &handler.exec {
        return Ok(HandlerTarget::Exec(exec.command.clone()));
    }
    if let Some(http) = &handler.http_get {
        return Ok(HandlerTarget::Http(http_target(
            http,
            container,
            pod_ip,
            "lifecycle",
        )?));
    }
    if let Some(sleep) = &handler.sleep {
        return Ok(HandlerTarget::Sleep(sleep.seconds));
    }
    Err(TargetError::NoHandler(container.name.clone()))
}
