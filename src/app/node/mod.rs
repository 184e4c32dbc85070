//! The node agent of connected mode: TLS bootstrap and certificate rotation, registration,
//! the node status loop, the lease loop, node events, and readiness following the runtime.
//! It runs beside the pod loop and never blocks it: while the API server is unreachable the
//! static pods run on, and the agent retries with back-off.
//!
//! Start-up calls [`run_node_agent`] when `--kubeconfig` or `--bootstrap-kubeconfig` is given;
//! the composition root supplies the ports ([`NodeAgentDeps`]).

pub mod failures;
pub mod lease_loop;
pub mod recorder;
pub mod register;
pub mod runtime_watch;
pub mod startup;
pub mod status_loop;
pub mod tls;

#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info};

use crate::app::pods::events::PodEventSink;
use crate::app::pods::mirror::{run_mirror_loop, MirrorInputs};
use crate::domain::eviction::thresholds::PressureCondition;
use crate::domain::node::machine::MachineInfo;
use crate::domain::node_status::labels::Registration;
use crate::domain::node_status::model::{NodeAddress, NodeObject, ResourceList, Time};
use crate::domain::node_status::status::{
    node_addresses, ImageSummary, NodeEvent, StatusInputs, Versions,
};
use crate::domain::pod::Pod;
use crate::ports::api::{ApiClients, ApiConnector};
use crate::ports::cert_store::CertStore;
use crate::ports::clock::Clock;
use crate::ports::host_facts::HostFacts;
use crate::ports::pki::Pki;
use crate::ports::runtime::RuntimeService;
use crate::ports::runtime_status::RuntimeStatusService;
use recorder::{run_recorder, EventRecorder};
use register::{register, Registered};
use runtime_watch::{check_once, watch_runtime, RuntimeHealth};
use status_loop::{run_status_loop, StatusState};

/// What the agent is configured with (from flags and the configuration file).
#[derive(Debug, Clone)]
pub struct NodeAgentSettings {
    pub registration: Registration,
    /// `registerNode`.
    pub register_node: bool,
    /// `--node-ip`, parsed.
    pub node_ips: Vec<IpAddr>,
    /// The kubelet's port (`port`, 10250) for `daemonEndpoints`.
    pub kubelet_port: i32,
    pub capacity: ResourceList,
    pub allocatable: ResourceList,
    pub machine: MachineInfo,
    /// Reported as kubeletVersion and kubeProxyVersion.
    pub kubelet_version: String,
    /// `nodeStatusMaxImages`.
    pub max_images: i32,
    /// `nodeStatusUpdateFrequency` (10 s).
    pub status_update_frequency: Duration,
    /// `nodeStatusReportFrequency` (5 m).
    pub status_report_frequency: Duration,
    /// `nodeLeaseDurationSeconds` (40).
    pub lease_duration_seconds: i32,
    /// How often the runtime's status is checked (upstream: 5 s).
    pub runtime_check_period: Duration,
    /// How long the runtime may go without a good check before the node is not ready.
    /// Upstream waits 30 s; 15 s (three checks) makes `Ready` False show within 30 s of the
    /// runtime stopping, status push included.
    pub runtime_down_after: Duration,
    /// `--kubeconfig`.
    pub kubeconfig: PathBuf,
    /// `--bootstrap-kubeconfig`.
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// `rotateCertificates`.
    pub rotate_certificates: bool,
    /// `serverTLSBootstrap` (without serving files): request and rotate the serving
    /// certificate.
    pub server_tls_bootstrap: bool,
    /// Record `NodeAllocatableEnforced` (node allocatable is enforced on the pods' cgroup).
    pub allocatable_enforced: bool,
    /// The eviction manager's node conditions (none when it does not run).
    pub pressure: watch::Receiver<Vec<PressureCondition>>,
    /// The pod loop's events, written through the agent's recorder.
    pub pod_events: PodEventSink,
    /// The static pods the pod loop runs, for their mirror pods.
    pub static_pods: watch::Receiver<Vec<Pod>>,
    /// Told of every set of clients (the first, and each rebuild): the volume manager
    /// reads ConfigMaps, Secrets and tokens through them.
    pub clients_hook: ClientsHook,
    /// Told the node once it is registered: the API pod source and status writer start.
    pub connected: Option<Arc<watch::Sender<Option<ConnectedNode>>>>,
    /// The attached volumes the pods use (the volume manager's), for `volumesInUse`.
    pub volumes_in_use: Arc<crate::app::pods::volumes_in_use::VolumesInUse>,
    /// The device plugins' resources in capacity and allocatable; `None` without them.
    pub devices: Option<Arc<crate::app::devices::DeviceManager>>,
}

/// A callback given the agent's clients; empty by default.
#[derive(Clone, Default)]
pub struct ClientsHook(pub Option<ClientsCallback>);

/// What a [`ClientsHook`] calls.
pub type ClientsCallback = Arc<dyn Fn(&ApiClients) + Send + Sync>;

impl std::fmt::Debug for ClientsHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ClientsHook(set)"
        } else {
            "ClientsHook(none)"
        })
    }
}

/// A registered node, for the pod loop: its name, the current clients (replaced when the
/// client certificate rotates), its IP and Node object.
#[derive(Clone)]
pub struct ConnectedNode {
    pub node_name: String,
    pub clients: watch::Receiver<ApiClients>,
    /// The first InternalIP (else the first address): each pod's `hostIP`.
    pub host_ip: String,
    pub node: NodeObject,
    /// The node's allocatable as the status loop computes it.
    pub allocatable: ResourceList,
}

impl std::fmt::Debug for ConnectedNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectedNode")
            .field("node_name", &self.node_name)
            .field("host_ip", &self.host_ip)
            .finish_non_exhaustive()
    }
}

impl NodeAgentSettings {
    /// Upstream's defaults around a registration and the node's resources.
    pub fn new(registration: Registration, kubeconfig: PathBuf) -> Self {
        NodeAgentSettings {
            registration,
            register_node: true,
            node_ips: Vec::new(),
            kubelet_port: 10250,
            capacity: ResourceList::new(),
            allocatable: ResourceList::new(),
            machine: MachineInfo {
                num_cores: 0,
                online_cpus: Default::default(),
                memory_capacity_bytes: 0,
                root_fs_capacity_bytes: 0,
                pid_max: 0,
                boot_id: String::new(),
                machine_id: String::new(),
                system_uuid: String::new(),
                hugepages: Vec::new(),
                apparmor_enabled: false,
            },
            kubelet_version: crate::app::node::KUBELET_VERSION.into(),
            max_images: crate::domain::node_status::status::DEFAULT_MAX_IMAGES,
            status_update_frequency: Duration::from_secs(10),
            status_report_frequency: Duration::from_secs(300),
            lease_duration_seconds: 40,
            runtime_check_period: Duration::from_secs(5),
            runtime_down_after: Duration::from_secs(15),
            kubeconfig,
            bootstrap_kubeconfig: None,
            rotate_certificates: false,
            server_tls_bootstrap: false,
            allocatable_enforced: false,
            pressure: watch::channel(Vec::new()).1,
            pod_events: PodEventSink::new(),
            static_pods: watch::channel(Vec::new()).1,
            clients_hook: ClientsHook::default(),
            connected: None,
            volumes_in_use: Arc::default(),
            devices: None,
        }
    }
}

/// The Kubernetes version rkubelet reports itself as (the API it implements).
pub const KUBELET_VERSION: &str = crate::domain::version::KUBERNETES.git_version;

/// The ports the agent works through.
#[derive(Clone)]
pub struct NodeAgentDeps {
    pub connector: Arc<dyn ApiConnector>,
    pub runtime: Arc<dyn RuntimeService>,
    pub runtime_status: Arc<dyn RuntimeStatusService>,
    pub host_facts: Arc<dyn HostFacts>,
    pub clock: Arc<dyn Clock>,
    pub pki: Arc<dyn Pki>,
    pub cert_store: Arc<dyn CertStore>,
    /// The serving certificate's pairs (`kubelet-server-*.pem`).
    pub serving_cert_store: Arc<dyn CertStore>,
}

/// Everything the loops share.
pub struct Agent {
    pub settings: NodeAgentSettings,
    pub deps: NodeAgentDeps,
    pub clock: Arc<dyn Clock>,
    /// The current clients (replaced when the client certificate rotates).
    pub clients: watch::Receiver<ApiClients>,
    /// The Node's uid once registered (the lease's owner).
    pub node_uid: watch::Sender<Option<String>>,
    pub recorder: EventRecorder,
    pub health: Arc<RuntimeHealth>,
}

impl Agent {
    /// The observations the status is computed from, now.
    pub fn status_inputs(&self) -> StatusInputs {
        let runtime = self.health.snapshot();
        status_inputs(
            &self.settings,
            self.deps.host_facts.as_ref(),
            RuntimeFacts {
                version: runtime.version,
                images: runtime.images,
                not_ready: self.health.not_ready(),
            },
            self.clock.now_unix_nanos(),
        )
    }
}

/// What the runtime says for the node status.
#[derive(Debug, Clone, Default)]
pub struct RuntimeFacts {
    /// `containerd://1.6.20`; `None` when not known yet.
    pub version: Option<String>,
    /// `None` when listing them failed.
    pub images: Option<Vec<ImageSummary>>,
    /// Why the node is not ready; empty when it is.
    pub not_ready: Vec<String>,
}

/// The observations the status is computed from: the settings, the host, the runtime, now.
pub fn status_inputs(
    s: &NodeAgentSettings,
    host: &dyn HostFacts,
    runtime: RuntimeFacts,
    now_unix_nanos: i64,
) -> StatusInputs {
    let addresses = match node_addresses(
        &s.registration.node_name,
        &s.node_ips,
        &s.registration.hostname,
        host.default_route_ip(),
    ) {
        Ok(a) => a,
        Err(e) => {
            error!(error = %e, "Failed to set some node status fields");
            vec![NodeAddress::new(
                "Hostname",
                s.registration.hostname.clone(),
            )]
        }
    };
    let pressure = s.pressure.borrow().clone();
    let mut capacity = s.capacity.clone();
    let mut allocatable = s.allocatable.clone();
    if let Some(devices) = &s.devices {
        devices.capacity().apply(&mut capacity, &mut allocatable);
    }
    StatusInputs {
        node_name: s.registration.node_name.clone(),
        now: Time::from_unix_nanos(now_unix_nanos),
        addresses,
        capacity,
        allocatable,
        machine_id: s.machine.machine_id.clone(),
        system_uuid: s.machine.system_uuid.clone(),
        boot_id: s.machine.boot_id.clone(),
        versions: Versions {
            kernel_version: host.kernel_version(),
            os_image: host.os_image(),
            container_runtime_version: runtime
                .version
                .unwrap_or_else(|| "Unknown://Unknown".into()),
            kubelet_version: s.kubelet_version.clone(),
        },
        operating_system: s.registration.os.clone(),
        architecture: s.registration.arch.clone(),
        kubelet_port: s.kubelet_port,
        images: runtime.images,
        max_images: s.max_images,
        not_ready: runtime.not_ready,
        memory_pressure: pressure.contains(&PressureCondition::MemoryPressure),
        disk_pressure: pressure.contains(&PressureCondition::DiskPressure),
        pid_pressure: pressure.contains(&PressureCondition::PidPressure),
        volumes_in_use: s.volumes_in_use.wanted(),
    }
}

/// The running agent; dropping it stops every loop.
pub struct NodeAgent {
    tasks: Vec<JoinHandle<()>>,
}

impl NodeAgent {
    pub fn stop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for NodeAgent {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Start the agent: returns at once; everything runs in the background.
pub fn run_node_agent(settings: NodeAgentSettings, deps: NodeAgentDeps) -> NodeAgent {
    let task = tokio::spawn(run(settings, deps));
    NodeAgent { tasks: vec![task] }
}

/// The agent's flow: a client certificate, a connection, the first runtime check, the
/// Starting event, registration, then the loops.
async fn run(settings: NodeAgentSettings, deps: NodeAgentDeps) {
    let clients = tls::connected_clients(&settings, &deps).await;
    let (clients_tx, clients_rx) = watch::channel(clients);
    if let Some(hook) = settings.clients_hook.0.clone() {
        let mut rx = clients_rx.clone();
        tokio::spawn(async move {
            loop {
                let clients = rx.borrow_and_update().clone();
                hook(&clients);
                if rx.changed().await.is_err() {
                    break;
                }
            }
        });
    }
    let health = RuntimeHealth::new(settings.runtime_down_after);
    check_once(
        &health,
        deps.runtime.as_ref(),
        deps.runtime_status.as_ref(),
        true,
        settings.runtime_check_period,
    )
    .await;
    let (recorder, events) = EventRecorder::new();
    settings.pod_events.connect(recorder.clone());
    let (node_uid, _) = watch::channel(None);
    let mirrors = MirrorInputs {
        clients: clients_rx.clone(),
        node_name: settings.registration.node_name.clone(),
        node_uid: node_uid.subscribe(),
        static_pods: settings.static_pods.clone(),
    };
    let agent = Arc::new(Agent {
        clock: deps.clock.clone(),
        settings,
        deps,
        clients: clients_rx.clone(),
        node_uid,
        recorder,
        health: health.clone(),
    });
    let mut tasks = Vec::new();
    tasks.push(tokio::spawn(run_recorder(
        events,
        clients_rx,
        agent.clock.clone(),
        agent.settings.registration.node_name.clone(),
    )));
    tasks.push(tokio::spawn(run_mirror_loop(mirrors)));
    tasks.push(tokio::spawn(watch_runtime(
        health,
        agent.deps.runtime.clone(),
        agent.deps.runtime_status.clone(),
        agent.settings.runtime_check_period,
        6,
    )));
    if agent.settings.rotate_certificates {
        let a = agent.clone();
        tasks.push(tokio::spawn(async move {
            tls::run_rotation(&a, clients_tx).await;
        }));
    }
    if agent.settings.server_tls_bootstrap {
        let a = agent.clone();
        tasks.push(tokio::spawn(async move {
            tls::run_serving_rotation(&a).await;
        }));
    }
    agent.recorder.record(NodeEvent::starting());
    let registered = if agent.settings.register_node {
        register(&agent).await
    } else {
        loop {
            let api = agent.clients.borrow().nodes.clone();
            match api.get_node(&agent.settings.registration.node_name).await {
                Ok(node) => break Registered::Adopted(node),
                Err(e) => {
                    error!(error = %crate::ports::error::Chain(&e), "registerNode is false and the Node cannot be read; retrying");
                    tokio::time::sleep(Duration::from_secs(7)).await;
                }
            }
        }
    };
    agent
        .node_uid
        .send_replace(Some(registered.node().metadata.uid.clone()));
    if agent.settings.allocatable_enforced {
        agent.recorder.record(NodeEvent::allocatable_enforced());
    }
    if let Some(tx) = &agent.settings.connected {
        let addresses = agent.status_inputs().addresses;
        let host_ip = addresses
            .iter()
            .find(|a| a.type_ == "InternalIP")
            .or_else(|| addresses.first())
            .map(|a| a.address.clone())
            .unwrap_or_default();
        tx.send_replace(Some(ConnectedNode {
            node_name: agent.settings.registration.node_name.clone(),
            clients: agent.clients.clone(),
            host_ip,
            node: registered.node().clone(),
            allocatable: agent.settings.allocatable.clone(),
        }));
    }
    info!(node = %agent.settings.registration.node_name, "Node agent running: lease and status loops");
    let a = agent.clone();
    tasks.push(tokio::spawn(async move {
        lease_loop::run_lease_loop(&a).await;
    }));
    let adopted = matches!(registered, Registered::Adopted(_));
    let state = StatusState::after(&registered);
    // The loops run until the agent is stopped; keep their handles alive with this task.
    let _guard = NodeAgent { tasks };
    run_status_loop(&agent, state, adopted).await;
}
