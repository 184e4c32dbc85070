//! Connected mode at start-up: the checks of the node's flags (before any effect), and the
//! agent's settings from the resolved configuration. Start-up calls [`validate`] early and
//! [`start_if_connected`] once the pod loop runs.

use tokio::sync::watch;
use tracing::{info, warn};

use std::sync::Arc;

use super::{run_node_agent, ClientsHook, ConnectedNode, NodeAgent, NodeAgentSettings};
use crate::app::bootstrap::{Deps, PodLinks, Started, StartupError};
use crate::app::pods::volume_manager::VolumeManager;
use crate::domain::config::{ClusterConfig, ResolvedConfig};
use crate::domain::eviction::thresholds::PressureCondition;
use crate::domain::node_status::labels::Registration;
use crate::ports::api::ApiClients;

/// Whether `--kubeconfig` (with or without `--bootstrap-kubeconfig`) asks for connected
/// mode.
pub fn connected(resolved: &ResolvedConfig) -> bool {
    resolved.node.cluster.is_some()
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

/// The agent's settings from the configuration.
pub fn agent_settings(resolved: &ResolvedConfig, cluster: &ClusterConfig) -> NodeAgentSettings {
    let node = &resolved.node;
    let registration = Registration {
        node_name: node.node_name.clone(),
        hostname: node.hostname.clone(),
        os: std::env::consts::OS.into(),
        arch: go_arch().into(),
        node_labels: cluster.node_labels.clone(),
        taints: node.register_with_taints.clone(),
        schedulable: cluster.register_schedulable,
        provider_id: cluster.provider_id.clone(),
        controller_attach_detach: true,
    };
    let mut settings = NodeAgentSettings::new(registration, cluster.kubeconfig.clone());
    settings.register_node = node.register_node;
    settings.node_ips = cluster.node_ips.clone();
    settings.kubelet_port = i32::from(node.kubelet_port);
    settings.capacity = node.node.capacity.clone();
    settings.allocatable = node.node.allocatable.clone();
    settings.machine = node.machine.clone();
    settings.max_images = cluster.node_status_max_images;
    settings.status_update_frequency = node.node_status_update_frequency;
    settings.status_report_frequency = node.node_status_report_frequency;
    settings.lease_duration_seconds =
        i32::try_from(node.node_lease_duration.as_secs()).unwrap_or(i32::MAX);
    settings.bootstrap_kubeconfig = cluster.bootstrap_kubeconfig.clone();
    settings.rotate_certificates = cluster.rotate_certificates;
    settings.server_tls_bootstrap = node.server.as_ref().is_some_and(|s| s.server_tls_bootstrap);
    settings.allocatable_enforced = node.cgroup_tree.as_ref().is_some_and(|t| t.enforce_pods);
    settings
}

/// Start the node agent when connected mode is asked for; `None` in standalone mode.
/// `pressure` carries the eviction manager's node conditions.
pub fn start_if_connected(
    started: &Started,
    deps: &Deps,
    pressure: watch::Receiver<Vec<PressureCondition>>,
    links: &PodLinks,
    volumes: Option<Arc<VolumeManager>>,
    connected: Arc<watch::Sender<Option<ConnectedNode>>>,
) -> Result<Option<NodeAgent>, StartupError> {
    let Some(cluster) = &started.resolved.node.cluster else {
        return Ok(None);
    };
    let mut settings = agent_settings(&started.resolved, cluster);
    settings.pressure = pressure;
    settings.pod_events = links.events.clone();
    settings.static_pods = links.static_pods.subscribe();
    settings.devices = Some(Arc::clone(&links.devices));
    if let Some(volumes) = volumes {
        settings.volumes_in_use = volumes.in_use();
        // The clients for API objects (the node's facts are set at start-up).
        settings.clients_hook = ClientsHook(Some(Arc::new(move |clients: &ApiClients| {
            volumes.set_api(clients.objects.clone());
        })));
    }
    settings.connected = Some(connected);
    let agent_deps = (deps.node_agent_for)(
        &started.resolved.node,
        started.runtime.clone(),
        deps.clock.clone(),
    )
    .map_err(|source| StartupError::Runtime {
        endpoint: started.resolved.node.runtime_endpoint.clone(),
        source,
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
