//! Connected mode at start-up: the checks of the node's flags (before any effect), and the
//! agent's settings from the resolved configuration. Start-up calls [`validate`] early and
//! [`start_if_connected`] once the pod loop runs.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use tracing::{info, warn};

use super::{run_node_agent, NodeAgent, NodeAgentSettings};
use crate::app::bootstrap::{Deps, NodePlan, Started, StartupError};
use crate::domain::config::ResolvedConfig;
use crate::domain::node_status::labels::{validate_node_labels, Registration};

/// Upstream's default `--cert-dir`.
pub const DEFAULT_CERT_DIR: &str = "/var/lib/kubelet/pki";

/// Whether `--kubeconfig` or `--bootstrap-kubeconfig` asks for connected mode.
pub fn connected(resolved: &ResolvedConfig) -> bool {
    resolved.options.kubeconfig.is_some() || resolved.options.bootstrap_kubeconfig.is_some()
}

fn given<'a>(resolved: &'a ResolvedConfig, flag: &str) -> Option<&'a str> {
    resolved
        .options
        .given
        .iter()
        .rev()
        .find(|(name, _)| name == flag)
        .map(|(_, value)| value.as_str())
}

/// `--node-ip`: comma-separated IPs (empty: none).
fn node_ips(text: &str) -> Result<Vec<IpAddr>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| format!("invalid value {s:?} for --node-ip: not an IP address"))
        })
        .collect()
}

/// The node flags' checks, all problems at once: `--node-labels` that node restriction
/// would refuse (upstream's message), `--node-ip`, and `--bootstrap-kubeconfig` without the
/// `--kubeconfig` path to write.
pub fn validate(resolved: &ResolvedConfig) -> Result<(), StartupError> {
    let mut problems = Vec::new();
    if let Err(e) = validate_node_labels(&resolved.options.node_labels) {
        problems.push(e.to_string());
    }
    if let Err(e) = node_ips(resolved.options.node_ip.as_deref().unwrap_or("")) {
        problems.push(e);
    }
    if resolved.options.bootstrap_kubeconfig.is_some() && resolved.options.kubeconfig.is_none() {
        problems.push(
            "--bootstrap-kubeconfig needs --kubeconfig: the path where the bootstrapped kubeconfig is written".into(),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StartupError::Invalid(problems))
    }
}

/// Go's names for this machine's OS and architecture.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The agent's settings from the configuration and the node plan.
pub fn agent_settings(
    resolved: &ResolvedConfig,
    plan: &NodePlan,
    hostname: &str,
) -> Result<NodeAgentSettings, StartupError> {
    let c = &resolved.config;
    let o = &resolved.options;
    let kubeconfig = o
        .kubeconfig
        .clone()
        .ok_or_else(|| StartupError::Invalid(vec!["connected mode needs --kubeconfig".into()]))?;
    let registration = Registration {
        node_name: plan.node_name.clone(),
        // Upstream's `kl.hostname`: the override when given, else the OS hostname,
        // lower-cased; the node name is the same unless a cloud provider renames it.
        hostname: o
            .hostname_override
            .as_deref()
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .unwrap_or(hostname)
            .to_lowercase(),
        os: std::env::consts::OS.into(),
        arch: go_arch().into(),
        node_labels: o.node_labels.clone(),
        taints: c.register_with_taints.clone(),
        schedulable: given(resolved, "register-schedulable") != Some("false"),
        provider_id: c.provider_id.clone(),
        controller_attach_detach: true,
    };
    let mut settings = NodeAgentSettings::new(registration, kubeconfig);
    let duration =
        |d: Option<Duration>, default: Duration| d.filter(|d| !d.is_zero()).unwrap_or(default);
    settings.register_node = c.register_node;
    settings.node_ips =
        node_ips(o.node_ip.as_deref().unwrap_or("")).map_err(|e| StartupError::Invalid(vec![e]))?;
    settings.kubelet_port = c.port;
    settings.capacity = plan.settings.capacity.clone();
    settings.allocatable = plan.settings.allocatable.clone();
    settings.machine = plan.machine.clone();
    settings.max_images = c.node_status_max_images.unwrap_or(settings.max_images);
    settings.status_update_frequency = duration(
        c.node_status_update_frequency.to_std(),
        settings.status_update_frequency,
    );
    settings.status_report_frequency = duration(
        c.node_status_report_frequency.to_std(),
        settings.status_report_frequency,
    );
    if c.node_lease_duration_seconds > 0 {
        settings.lease_duration_seconds = c.node_lease_duration_seconds;
    }
    settings.bootstrap_kubeconfig = o.bootstrap_kubeconfig.clone();
    settings.rotate_certificates = c.rotate_certificates.unwrap_or(false);
    settings.allocatable_enforced =
        c.cgroups_per_qos && c.enforce_node_allocatable.iter().any(|e| e == "pods");
    Ok(settings)
}

/// `--cert-dir`.
pub fn cert_dir(resolved: &ResolvedConfig) -> PathBuf {
    given(resolved, "cert-dir")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_CERT_DIR), PathBuf::from)
}

/// Start the node agent when connected mode is asked for; `None` in standalone mode.
pub fn start_if_connected(
    started: &Started,
    deps: &Deps,
) -> Result<Option<NodeAgent>, StartupError> {
    if !connected(&started.resolved) {
        return Ok(None);
    }
    let hostname = deps.host.hostname().unwrap_or_default();
    let settings = agent_settings(&started.resolved, &started.plan, &hostname)?;
    let agent_deps = crate::app::compose::node_agent_deps(
        &started.resolved,
        started.runtime.clone(),
        deps.clock.clone(),
    )
    .map_err(|e| StartupError::Runtime {
        endpoint: started.resolved.config.container_runtime_endpoint.clone(),
        reason: e.to_string(),
    })?;
    if settings.rotate_certificates && settings.bootstrap_kubeconfig.is_none() {
        warn!("rotateCertificates is on without --bootstrap-kubeconfig: only a certificate in --cert-dir (from TLS bootstrap) is rotated");
    }
    info!(
        kubeconfig = %settings.kubeconfig.display(),
        bootstrap = ?settings.bootstrap_kubeconfig,
        node = %settings.registration.node_name,
        "connected mode: starting the node agent"
    );
    Ok(Some(run_node_agent(settings, agent_deps)))
}
