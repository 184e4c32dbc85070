//! The start-up flow, in upstream's order, each step a named function with a log line.
//!
//! One difference from upstream, on purpose: everything that can refuse the input
//! (configuration, feature gates, node-level checks against this machine's facts) runs
//! before the first side effect, so bad input exits having created nothing: no lock
//! file, no directory.

use crate::ports::error::Chain;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::app::container_manager::{ContainerManager, ContainerManagerError};
use crate::app::eviction::{EvictionInputs, RunningEviction};
use crate::app::node::ConnectedNode;
use crate::app::pods::api_source::ApiPodSource;
use crate::app::pods::events::PodEventSink;
use crate::app::pods::pleg::PlegHealth;
use crate::app::pods::run_once::run_once;
use crate::app::pods::sync::SyncContext;
use crate::app::pods::sync_loop_health::SyncLoopHealth;
use crate::app::pods::volume_manager::VolumeManager;
use crate::app::pods::{EvictionHooks, LoopSettings, PodLoop, PodStatusStore};
use crate::app::server::Endpoints;
use crate::domain::admission::NodeInfo;
use crate::domain::cgroup::{CgroupDriver, CgroupVersion, DriverAgreement, WeightCurve};
use crate::domain::config::error::ConfigError;
use crate::domain::config::layers::GivenFlags;
use crate::domain::config::{
    self, ConfigInputs, FileInput, NodeConfig, NodeFacts, ResolvedConfig, RuntimeEndpoint,
};
use crate::domain::kubelet_api::healthz;
use crate::domain::kuberuntime::dns::{parse_resolv_conf, ResolvConf};
use crate::domain::kuberuntime::requests::RequestContext;
use crate::domain::resource_managers::device_topology::DeviceTopology;
use crate::domain::stats::{UsageSource, STATS_FROM_CRI_GATE};
use crate::ports::cgroup::{CgroupError, CgroupManager};
use crate::ports::clock::Clock;
use crate::ports::host::{ContentionWait, Host, HostError, LockHandle};
use crate::ports::machine::{MachineInfoError, MachineInfoProvider};
use crate::ports::pod_source::{PodSource, PodSourceError};
use crate::ports::runtime::{ImageService, RuntimeError, RuntimeService};

/// Builds the runtime client for an endpoint, each call bounded by the timeout (the
/// composition root decides which client).
pub type RuntimeFactory = Box<
    dyn Fn(&RuntimeEndpoint, Duration) -> Result<Arc<dyn RuntimeService>, RuntimeError>
        + Send
        + Sync,
>;

/// Builds the image service client for an endpoint.
pub type ImageFactory = Box<
    dyn Fn(&RuntimeEndpoint, Duration) -> Result<Arc<dyn ImageService>, RuntimeError> + Send + Sync,
>;

/// Builds the cgroup manager for a driver (the simulated node gets one that touches
/// nothing).
pub type CgroupFactory = Box<
    dyn Fn(
            CgroupDriver,
            &RuntimeEndpoint,
            WeightCurve,
        )
            -> Pin<Box<dyn Future<Output = Result<Arc<dyn CgroupManager>, CgroupError>> + Send>>
        + Send
        + Sync,
>;

/// Builds the pod sources the configuration asks for (manifest path, manifest URL).
pub type SourceFactory = Box<
    dyn Fn(&NodeConfig, Arc<dyn Clock>) -> Result<Vec<Box<dyn PodSource>>, PodSourceError>
        + Send
        + Sync,
>;

/// Builds the node agent's adapters for a connected node.
pub type NodeAgentFactory = Box<
    dyn Fn(
            &NodeConfig,
            Arc<dyn RuntimeService>,
            Arc<dyn Clock>,
        ) -> Result<crate::app::node::NodeAgentDeps, RuntimeError>
        + Send
        + Sync,
>;

/// Builds the eviction manager's ports: node statistics, the runtime's usage and
/// images, memory threshold notifications.
pub type EvictionPortsFactory = Box<
    dyn Fn(&NodeConfig) -> Result<crate::app::eviction::EvictionPorts, RuntimeError> + Send + Sync,
>;

/// The kubelet API's ports: certificates, and the API server's reviews (none standalone).
pub struct KubeletApiDeps {
    pub pki: Arc<dyn crate::ports::pki::Pki>,
    /// The serving certificate's files: given, self-signed or issued.
    pub certs: Arc<dyn crate::ports::cert_store::CertStore>,
    pub authenticator: Option<Arc<dyn crate::ports::auth::Authenticator>>,
    pub authorizer: Option<Arc<dyn crate::ports::auth::Authorizer>>,
}

/// Builds the kubelet API's ports; `None`: the API is not served (the unit tests).
pub type KubeletApiFactory = Box<dyn Fn(&NodeConfig) -> Option<KubeletApiDeps> + Send + Sync>;

/// The world as start-up sees it.
pub struct Deps {
    pub kubelet_api_for: KubeletApiFactory,
    pub host: Arc<dyn Host>,
    pub machine: Arc<dyn MachineInfoProvider>,
    pub runtime_for: RuntimeFactory,
    pub images_for: ImageFactory,
    pub cgroups_for: CgroupFactory,
    pub sources_for: SourceFactory,
    pub node_agent_for: NodeAgentFactory,
    pub eviction_for: EvictionPortsFactory,
    /// The cgroup version of this machine (for the planner).
    pub cgroup_version: Box<dyn Fn() -> CgroupVersion + Send + Sync>,
    pub clock: Arc<dyn Clock>,
    /// Network probes and lifecycle hooks (HTTP, TCP, gRPC).
    pub prober: Arc<dyn crate::ports::prober::Prober>,
    /// The host's default-route address, for the node's IP without `--node-ip`.
    pub host_facts: Arc<dyn crate::ports::host_facts::HostFacts>,
    /// The volumes' files and subpaths, where a container can reach them.
    pub pod_files: Arc<dyn crate::ports::pod_files::PodFiles>,
    /// The containers' log files: rotated, and read by `/containerLogs`.
    pub container_logs: Arc<dyn crate::ports::container_logs::ContainerLogs>,
    /// CSI drivers' registration sockets and node services.
    pub csi_plugins: Arc<dyn crate::ports::csi::CsiPlugins>,
    /// Device plugins' sockets, the pod resources socket and the device checkpoint.
    pub device_plugins: Arc<dyn crate::ports::device_plugins::DevicePlugins>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// Bad input: each problem on its own line; nothing was changed.
    #[error("{}", .0.join("\n"))]
    Invalid(Vec<String>),
    #[error("failed to acquire the lock file {path}")]
    Lock {
        path: PathBuf,
        #[source]
        source: HostError,
    },
    #[error("failed to read machine info")]
    Machine(#[source] MachineInfoError),
    #[error("failed to create directory {path}")]
    Directory {
        path: PathBuf,
        #[source]
        source: HostError,
    },
    /// Upstream's `setupDataDirs`: "error configuring root directory".
    #[error("error configuring root directory {}", path.display())]
    RootDirectory {
        path: PathBuf,
        #[source]
        source: HostError,
    },
    #[error("failed to run the container runtime at {endpoint}")]
    Runtime {
        endpoint: RuntimeEndpoint,
        #[source]
        source: RuntimeError,
    },
    #[error("failed to start the cgroup driver {driver}")]
    CgroupDriver {
        driver: CgroupDriver,
        #[source]
        source: CgroupError,
    },
    #[error("failed to start the container manager")]
    ContainerManager(#[source] ContainerManagerError),
    /// Upstream's `NewContainerManager` fails on the CPU manager's errors.
    #[error("failed to start the CPU manager")]
    CpuManager(#[source] crate::app::cpu_manager::CpuManagerStartError),
    #[error("failed to start the pod sources")]
    Sources(#[source] PodSourceError),
    /// `--runonce`: these pods did not reach running.
    #[error("error running pods: {}", .0.join("; "))]
    RunOnce(Vec<String>),
    /// The kubelet API's port (or the read-only port) cannot be listened on: upstream
    /// logs "Failed to listen and serve" and exits.
    #[error("Failed to listen and serve on {address}")]
    KubeletApiListen {
        address: String,
        #[source]
        source: std::io::Error,
    },
    /// No usable serving certificate: upstream's `InitializeTLS` fails the start.
    #[error("failed to initialize the kubelet API's TLS")]
    KubeletApiTls(#[source] crate::app::server::tls::TlsError),
    #[error("failed to serve healthz on {address}")]
    Healthz {
        address: String,
        #[source]
        source: std::io::Error,
    },
}

impl StartupError {
    /// The error and its causes, one per line, as printed at exit.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.to_string().lines().map(str::to_owned).collect();
        let mut cause = std::error::Error::source(self);
        while let Some(e) = cause {
            lines.push(format!("  caused by: {e}"));
            cause = e.source();
        }
        lines
    }
}

/// Read the files the options name: `--config` and the `*.conf` drop-ins of
/// `--config-dir` in name order. Unreadable files become problems reported with the
/// others.
pub fn read_config_inputs(flags: GivenFlags, host: &dyn Host) -> ConfigInputs {
    let mut inputs = ConfigInputs::from_flags(flags);
    let Ok(options) = &inputs.options else {
        return inputs;
    };
    let read = |path: &Path| FileInput {
        path: path.to_path_buf(),
        text: host.read_to_string(path).map_err(|e| io_cause(&e)),
    };
    inputs.main_file = options.config.as_deref().map(read);
    if let Some(dir) = &options.config_dir {
        match host.files_in(dir) {
            Ok(files) => {
                inputs.drop_ins = files
                    .iter()
                    .filter(|p| config::is_drop_in(p))
                    .map(|p| read(p))
                    .collect();
            }
            Err(e) => inputs.read_problems.push(ConfigError::Invalid(format!(
                "failed to read drop-in configs from --config-dir {:?}: {}",
                dir.display().to_string(),
                io_cause(&e)
            ))),
        }
    }
    inputs
}

/// The OS's words for why a file could not be read (the path is said by the caller).
fn io_cause(e: &HostError) -> String {
    std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string)
}

fn problems_to_error<E: ToString>(problems: Vec<E>) -> StartupError {
    StartupError::Invalid(problems.iter().map(ToString::to_string).collect())
}

/// What the configuration is checked against: the hostname and the machine.
pub fn node_facts(deps: &Deps) -> Result<NodeFacts, StartupError> {
    let machine = deps.machine.machine_info().map_err(StartupError::Machine)?;
    // An unreadable hostname is an empty one: the node name check then names the
    // problem (and --hostname-override avoids it).
    let hostname = deps.host.hostname().unwrap_or_default();
    Ok(NodeFacts { hostname, machine })
}

/// Step: load the configuration (defaults, file, drop-ins, flags) and validate it
/// against this machine; every problem at once.
pub fn load_configuration(flags: GivenFlags, deps: &Deps) -> Result<ResolvedConfig, StartupError> {
    let inputs = read_config_inputs(flags, deps.host.as_ref());
    let facts = node_facts(deps)?;
    config::resolve(&inputs, &facts).map_err(problems_to_error)
}

/// Step: the lock file, when one is asked for.
pub fn acquire_lock_file(
    host: &dyn Host,
    lock_file: Option<&Path>,
) -> Result<Option<LockHandle>, StartupError> {
    let Some(path) = lock_file else {
        return Ok(None);
    };
    info!(path = %path.display(), "acquiring file lock");
    host.acquire_lock(path)
        .map(Some)
        .map_err(|source| StartupError::Lock {
            path: path.to_path_buf(),
            source,
        })
}

/// The `/configz` document: upstream's shape, `{"kubeletconfig": {...}}` is added by the
/// server; this is the inner configuration with its kind and version.
pub type Configz = Arc<RwLock<Value>>;

/// Step: register the effective configuration for `/configz`.
pub fn register_configz(resolved: &ResolvedConfig) -> Configz {
    let value = config::configz::configz_document(&resolved.config);
    info!("registered /configz");
    Arc::new(RwLock::new(value))
}

/// Step: without a kubeconfig the kubelet runs standalone, as upstream does.
pub fn check_standalone(resolved: &ResolvedConfig) -> bool {
    let standalone = !crate::app::node::startup::connected(resolved);
    if standalone {
        warn!("standalone mode, no API client: no --kubeconfig given, so the node is not registered and only static pods run");
    }
    standalone
}

/// Step: log the machine and the container manager settings.
pub fn log_node(node: &NodeConfig) {
    info!(node = %node.node_name, source = ?node.node_name_source, "node name resolved");
    let machine = &node.machine;
    info!(
        cores = machine.num_cores,
        online_cpus = %machine.online_cpus,
        memory_bytes = machine.memory_capacity_bytes,
        boot_id = %machine.boot_id,
        machine_id = %machine.machine_id,
        "machine info"
    );
    let settings = &node.node;
    let show = crate::domain::node::reserved::format_resource_list;
    info!(
        cgroup_root = %node.cgroup_root,
        cgroups_per_qos = node.cgroup_tree.is_some(),
        cgroup_driver = %node.cgroup_driver,
        system_reserved = %show(&settings.system_reserved),
        kube_reserved = %show(&settings.kube_reserved),
        reserved_cpus = %settings.reserved_cpus.as_ref().map(ToString::to_string).unwrap_or_default(),
        enforce_node_allocatable_on_pods = node.cgroup_tree.as_ref().is_some_and(|t| t.enforce_pods),
        hard_eviction_thresholds = settings.hard_thresholds.len(),
        allocatable = %show(&settings.allocatable),
        "creating container manager"
    );
}

/// Step: upstream only warns when not root, and so do we.
pub fn check_root(host: &dyn Host) -> bool {
    let uid = host.effective_uid();
    if uid != 0 {
        error!(
            uid,
            "kubelet running with insufficient permissions: kubelet needs to run as uid `0`"
        );
    }
    uid == 0
}

/// Step: lower the kubelet's own OOM score; when the kernel refuses, warn and go on.
pub fn apply_oom_score_adj(host: &dyn Host, value: i32) -> bool {
    match host.set_oom_score_adj(None, value) {
        Ok(()) => {
            info!(value, "applied OOM score adjustment");
            true
        }
        Err(e) => {
            warn!(value, error = %Chain(&e), "failed to apply oom_score_adj; continuing");
            false
        }
    }
}

/// Step: connect to the container runtime and check its version.
pub async fn start_runtime(
    deps: &Deps,
    node: &NodeConfig,
) -> Result<(Arc<dyn RuntimeService>, String), StartupError> {
    let endpoint = &node.runtime_endpoint;
    let fail = |source: RuntimeError| StartupError::Runtime {
        endpoint: endpoint.clone(),
        source,
    };
    let runtime = (deps.runtime_for)(endpoint, node.runtime_request_timeout).map_err(fail)?;
    // Every runtime call is counted and timed here, once (kubelet_runtime_operations*).
    let runtime = crate::app::metrics::InstrumentedRuntime::wrap(runtime);
    let version = runtime.version().await.map_err(fail)?;
    if endpoint.is_simulated() {
        warn!("SIMULATED NODE: --container-runtime-endpoint={endpoint} selects the embedded in-memory runtime; no container will really run");
    }
    info!(
        %endpoint,
        runtime = %version.runtime_name,
        version = %version.runtime_version,
        api = %version.runtime_api_version,
        "container runtime initialized"
    );
    Ok((runtime, version.runtime_name))
}

/// Step: the root directory on a shared mount (upstream's `MakeRShared` in
/// `setupDataDirs`), so the volumes under it can be mounted with `HostToContainer` or
/// `Bidirectional` propagation: bound onto itself `rshared` when its mount is private.
/// Nothing is mounted on the simulated runtime.
fn share_root_dir(host: &dyn Host, resolved: &ResolvedConfig) -> Result<(), StartupError> {
    if resolved.node.runtime_endpoint.is_simulated() {
        return Ok(());
    }
    let root = &resolved.options.root_dir;
    let fail = |source| StartupError::RootDirectory {
        path: root.clone(),
        source,
    };
    let mountinfo = host
        .read_to_string(Path::new("/proc/self/mountinfo"))
        .map_err(fail)?;
    if crate::domain::volumes::propagation::is_shared(&mountinfo, root) {
        return Ok(());
    }
    host.make_rshared(root).map_err(fail)?;
    info!(path = %root.display(), "root directory bound onto itself rshared, for mount propagation");
    Ok(())
}

/// Step: the cgroup driver (checked against the runtime's where it says), then the
/// container manager's tree: `kubepods` with node allocatable and the QoS cgroups.
pub async fn start_container_manager(
    resolved: &mut ResolvedConfig,
    deps: &Deps,
    runtime: &dyn RuntimeService,
) -> Result<Arc<ContainerManager>, StartupError> {
    let configured = resolved
        .origins
        .get("cgroupDriver")
        .is_some_and(|source| *source != crate::domain::config::layers::Source::Default);
    let mut driver = resolved.node.cgroup_driver;
    let reported = runtime.cgroup_driver().await;
    match driver.agreement(configured, reported.as_ref().ok().copied()) {
        Ok(DriverAgreement::Same) => {
            info!(%driver, "the container runtime uses the same cgroup driver")
        }
        Ok(DriverAgreement::FromRuntime(theirs)) => {
            info!(cgroupDriver = %theirs, "Using cgroup driver setting received from the CRI runtime");
            driver = theirs;
            // Everything after start-up (stats, eviction, the sync) reads it here.
            resolved.node.cgroup_driver = theirs;
            resolved.config.cgroup_driver = theirs.as_str().to_owned();
        }
        Ok(DriverAgreement::NotReported) => {
            info!(%driver, "the container runtime does not report its cgroup driver (RuntimeConfig is not implemented); using the configured cgroup driver")
        }
        Ok(DriverAgreement::Unknown) => {
            warn!(%driver, error = %reported.err().map(|e| Chain(&e).to_string()).unwrap_or_default(), "cannot ask the container runtime for its cgroup driver; using the configured one")
        }
        Err(mismatch) => return Err(StartupError::Invalid(vec![mismatch.to_string()])),
    }
    let node = &resolved.node;
    let cgroups = (deps.cgroups_for)(
        driver,
        &node.runtime_endpoint,
        resolved.options.cpu_weight_curve,
    )
    .await
    .map_err(|source| StartupError::CgroupDriver { driver, source })?;
    let containers = ContainerManager::new(cgroups, node.cgroup_tree.clone(), node.node.clone());
    containers
        .setup()
        .await
        .map_err(StartupError::ContainerManager)?;
    Ok(Arc::new(containers))
}

/// Everything start-up produced that the running kubelet keeps.
pub struct Started {
    pub resolved: ResolvedConfig,
    pub configz: Configz,
    pub runtime: Arc<dyn RuntimeService>,
    /// The runtime's name (`containerd`), which prefixes container ids in pod status.
    pub runtime_name: String,
    pub containers: Arc<ContainerManager>,
    pub lock: Option<LockHandle>,
    /// With `--exit-on-lock-contention`: resolves when another process opens the lock.
    pub contention: Option<ContentionWait>,
}

/// The start-up flow up to a connected runtime. Bad input was refused by
/// [`load_configuration`], before any effect.
pub async fn start(mut resolved: ResolvedConfig, deps: &Deps) -> Result<Started, StartupError> {
    crate::app::cli::warn_compatibility(&resolved);
    info!(changed = ?resolved.node.feature_gates.changed(), "feature gates initialized");
    let lock = acquire_lock_file(deps.host.as_ref(), resolved.options.lock_file.as_deref())?;
    let contention = watch_lock_contention(deps.host.as_ref(), &resolved, lock.as_ref());
    let configz = register_configz(&resolved);
    check_standalone(&resolved);
    log_node(&resolved.node);
    deps.host
        .create_dir_all(&resolved.options.root_dir)
        .map_err(|source| StartupError::Directory {
            path: resolved.options.root_dir.clone(),
            source,
        })?;
    check_root(deps.host.as_ref());
    apply_oom_score_adj(deps.host.as_ref(), resolved.node.oom_score_adj);
    let (runtime, runtime_name) = start_runtime(deps, &resolved.node).await?;
    share_root_dir(deps.host.as_ref(), &resolved)?;
    let containers = start_container_manager(&mut resolved, deps, runtime.as_ref()).await?;
    Ok(Started {
        resolved,
        configz,
        runtime,
        runtime_name,
        containers,
        lock,
        contention,
    })
}

/// Step: with `--exit-on-lock-contention`, watch the lock file from right after taking
/// it, so an open at any later moment is noticed. A failed watch only disables the exit.
fn watch_lock_contention(
    host: &dyn Host,
    resolved: &ResolvedConfig,
    lock: Option<&LockHandle>,
) -> Option<ContentionWait> {
    let lock = lock.filter(|_| resolved.options.exit_on_lock_contention)?;
    match host.watch_lock_contention(lock.path()) {
        Ok(wait) => {
            info!(path = %lock.path().display(), "watching the lock file for contention");
            Some(wait)
        }
        Err(e) => {
            warn!(error = %Chain(&e), "cannot watch the lock file; --exit-on-lock-contention is inactive");
            None
        }
    }
}

/// The host's resolver configuration for `Default`-policy pods; an unreadable file
/// only warns (pods then get no DNS servers), as upstream.
fn read_resolv_conf(node: &NodeConfig, host: &dyn Host) -> ResolvConf {
    let Some(path) = &node.resolv_conf else {
        return ResolvConf::default();
    };
    match host.read_to_string(path) {
        Ok(text) => parse_resolv_conf(&text),
        Err(e) => {
            warn!(path = %path.display(), error = %Chain(&e), "cannot read resolvConf; pods with dnsPolicy Default get no DNS servers");
            ResolvConf::default()
        }
    }
}

/// The user namespaces pods may have: the feature gate, and the host IDs they come from,
/// the `kubelet` user's subordinate IDs when `/etc/subuid` gives it some (as upstream
/// reads them), else upstream's default range. A range that cannot serve `maxPods` pods
/// refuses start-up, as upstream.
fn user_namespaces(
    resolved: &ResolvedConfig,
    host: &dyn Host,
) -> Result<crate::app::pods::userns::UserNamespaces, StartupError> {
    use crate::domain::kuberuntime::userns::{KubeletIdRange, FEATURE_GATE};
    let gate = resolved.node.feature_gates.enabled(FEATURE_GATE);
    let read = |path: &str| host.read_to_string(Path::new(path)).unwrap_or_default();
    let range = match KubeletIdRange::from_subid_files(&read("/etc/subuid"), &read("/etc/subgid")) {
        Ok(None) => KubeletIdRange::DEFAULT,
        Ok(Some((first, length))) => {
            let max_pods = u32::try_from(resolved.config.max_pods).unwrap_or(0);
            KubeletIdRange::checked(first, length, max_pods)
                .map_err(|e| StartupError::Invalid(vec![e.to_string()]))?
        }
        Err(message) => return Err(StartupError::Invalid(vec![message])),
    };
    Ok(crate::app::pods::userns::UserNamespaces::new(gate, range))
}

/// What every pod sync shares: the runtime and image clients, the clock, and how
/// requests are built.
fn sync_context(
    started: &Started,
    deps: &Deps,
    events: PodEventSink,
    volumes: Option<Arc<VolumeManager>>,
    devices: Option<Arc<crate::app::devices::DeviceManager>>,
    cpus: Option<Arc<crate::app::cpu_manager::CpuManager>>,
) -> Result<Arc<SyncContext>, StartupError> {
    let node = &started.resolved.node;
    let endpoint = &node.image_service_endpoint;
    let images = (deps.images_for)(endpoint, node.runtime_request_timeout).map_err(|source| {
        StartupError::Runtime {
            endpoint: endpoint.clone(),
            source,
        }
    })?;
    let requests = RequestContext::from_config(
        &started.resolved,
        read_resolv_conf(node, deps.host.as_ref()),
    );
    let mut ctx = SyncContext::new(
        Arc::clone(&started.runtime),
        images,
        Arc::clone(&deps.clock),
        requests,
        started.runtime_name.clone(),
        Arc::clone(&started.containers),
    )
    .with_prober(Arc::clone(&deps.prober))
    .with_events(events)
    .with_user_namespaces(user_namespaces(&started.resolved, deps.host.as_ref())?);
    if let Some(devices) = devices {
        ctx = ctx.with_devices(devices);
    }
    if let Some(cpus) = cpus {
        ctx = ctx.with_cpu_manager(cpus);
    }
    ctx = ctx.with_volumes(volumes.unwrap_or_else(|| {
        Arc::new(VolumeManager::standalone(
            Arc::clone(&deps.clock),
            Arc::clone(&deps.pod_files),
        ))
    }));
    Ok(Arc::new(ctx))
}

fn pod_sources(started: &Started, deps: &Deps) -> Result<Vec<Box<dyn PodSource>>, StartupError> {
    (deps.sources_for)(&started.resolved.node, Arc::clone(&deps.clock))
        .map_err(StartupError::Sources)
}

/// Step: the sync loop that runs the pods of every source on the runtime.
fn start_pod_loop(
    started: &Started,
    deps: &Deps,
    store: PodStatusStore,
    eviction: Option<EvictionHooks>,
    links: &PodLinks,
    connected: Option<watch::Receiver<Option<ConnectedNode>>>,
    shutdown: watch::Receiver<bool>,
) -> Result<PodLoopStarted, StartupError> {
    let ctx = sync_context(
        started,
        deps,
        links.events.clone(),
        Some(Arc::clone(&links.volumes)),
        Some(Arc::clone(&links.devices)),
        links.cpus.clone(),
    )?;
    let settings = LoopSettings {
        resync_period: started.resolved.node.sync_frequency,
        evented_pleg: started
            .resolved
            .node
            .feature_gates
            .enabled(crate::domain::kuberuntime::pleg::EVENTED_PLEG_GATE),
        ..LoopSettings::default()
    };
    let mut sources = pod_sources(started, deps)?;
    let node = &started.resolved.node;
    let node_info = NodeInfo {
        name: node.node_name.clone(),
        labels: Default::default(),
        allocatable: node.node.allocatable.clone(),
        taints: node.register_with_taints.clone(),
    };
    let node_ip = crate::domain::node_status::status::primary_node_ip(
        &started.resolved.options.node_ips,
        &node.hostname,
        deps.host_facts.default_route_ip(),
    )
    .map(|ip| ip.to_string())
    .unwrap_or_default();
    store.set_host_ip(&node_ip);
    // The node's facts for the downward API and env (`status.hostIP`, limits a
    // container does not set), standalone as connected.
    links
        .volumes
        .set_node_facts(crate::domain::volumes::PodFacts {
            pod_ip: String::new(),
            host_ip: node_ip,
            allocatable_cpu_milli: node
                .node
                .allocatable
                .get("cpu")
                .map_or(0, |q| q.milli_value()),
            allocatable_memory_bytes: node.node.allocatable.get("memory").map_or(0, |q| q.value()),
            node_name: node.node_name.clone(),
            ..Default::default()
        });
    let mut pod_loop = PodLoop::new(ctx, store.clone(), settings)
        .with_node_info(node_info)
        .with_static_pods(links.static_pods.clone())
        .with_devices(Arc::clone(&links.devices));
    if let Some(aligner) = &links.device_topology {
        pod_loop = pod_loop.with_device_topology(Arc::clone(aligner));
    }
    if let Some(cpus) = &links.cpus {
        pod_loop = pod_loop.with_cpu_manager(Arc::clone(cpus));
    }
    if let Some(connected) = connected {
        // The API server is one more source: "every source has spoken" waits for its
        // first list, once the node is registered.
        sources.push(Box::new(ApiPodSource::new(connected.clone(), store)));
        links.volumes.set_connected(connected.clone());
        pod_loop = pod_loop.with_connected(connected);
    }
    if let Some(hooks) = eviction {
        pod_loop = pod_loop.with_eviction(hooks);
    }
    let pleg = pod_loop.pleg_health();
    let sync_loop = pod_loop.sync_loop_health();
    Ok(PodLoopStarted {
        task: tokio::spawn(pod_loop.run(sources, shutdown)),
        pleg,
        sync_loop,
    })
}

/// The running pod loop and the health of its relist and of its rounds.
struct PodLoopStarted {
    task: tokio::task::JoinHandle<()>,
    pleg: Arc<PlegHealth>,
    sync_loop: Arc<SyncLoopHealth>,
}

/// The ports with the runtime's stats and image calls counted in
/// `kubelet_runtime_operations*`, as every other CRI call.
fn instrumented(ports: crate::app::eviction::EvictionPorts) -> crate::app::eviction::EvictionPorts {
    crate::app::eviction::EvictionPorts {
        runtime: crate::app::metrics::InstrumentedRuntimeStats::wrap(ports.runtime),
        ..ports
    }
}

/// Step: the eviction manager and image GC beside the pod loop.
fn start_eviction(
    started: &Started,
    deps: &Deps,
    store: PodStatusStore,
    shutdown: &watch::Receiver<bool>,
) -> Result<RunningEviction, StartupError> {
    let node = &started.resolved.node;
    let ports = (deps.eviction_for)(node)
        .map(instrumented)
        .map_err(|source| StartupError::Runtime {
            endpoint: node.image_service_endpoint.clone(),
            source,
        })?;
    let inputs = EvictionInputs {
        node: node.clone(),
        requests: RequestContext::from_config(&started.resolved, ResolvConf::default()),
        containers: Arc::clone(&started.containers),
        runtime: Arc::clone(&started.runtime),
        store,
        clock: Arc::clone(&deps.clock),
    };
    Ok(crate::app::eviction::start(inputs, ports, shutdown))
}

/// Step: the container log manager beside the pod loop, unless rotation is off or the
/// runtime is the simulated one (which writes no logs).
fn start_log_rotation(started: &Started, deps: &Deps, shutdown: &watch::Receiver<bool>) {
    let node = &started.resolved.node;
    if node.runtime_endpoint.is_simulated() {
        return;
    }
    if let Some(manager) = crate::app::container_logs::ContainerLogManager::new(
        Arc::clone(&started.runtime),
        Arc::clone(&deps.clock),
        Arc::clone(&deps.container_logs),
        node.pod_logs_dir.clone(),
        node.log_rotation,
    ) {
        tokio::spawn(manager.run(shutdown.clone()));
    }
}

/// `--runonce`: start the static pods once, wait until they run, report, return.
async fn run_pods_once(started: &Started, deps: &Deps) -> Result<StopReason, StartupError> {
    let events = PodEventSink::for_runtime(started.resolved.node.runtime_endpoint.is_simulated());
    let ctx = sync_context(started, deps, events, None, None, None)?;
    let sources = pod_sources(started, deps)?;
    let results = run_once(ctx, sources).await;
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| {
            r.failure
                .as_ref()
                .map(|why| format!("pod {}: {why}", r.pod))
        })
        .collect();
    info!(pods = results.len(), failed = failed.len(), "runonce: done");
    if failed.is_empty() {
        Ok(StopReason::RunOnceDone)
    } else {
        Err(StartupError::RunOnce(failed))
    }
}

/// What the pod loop shares with the node agent: its events (written through the agent's
/// recorder), its static pods (for their mirror pods) and its volume manager (which reads
/// ConfigMaps, Secrets and tokens once the agent has clients).
pub struct PodLinks {
    pub events: PodEventSink,
    pub static_pods: watch::Sender<Vec<crate::domain::pod::Pod>>,
    pub volumes: Arc<VolumeManager>,
    /// The registered CSI drivers.
    pub csi_drivers: crate::app::plugins::CsiDrivers,
    /// The device plugins' devices: admission, containers, the Node's capacity.
    pub devices: Arc<crate::app::devices::DeviceManager>,
    /// The static CPU manager; `None` with the `none` policy.
    pub cpus: Option<Arc<crate::app::cpu_manager::CpuManager>>,
    /// The topology manager over the devices alone, where the CPU manager does not run it.
    pub device_topology: Option<Arc<DeviceTopology>>,
}

impl PodLinks {
    /// `cache_ttl`: how long a ConfigMap or Secret read is used.
    pub fn new(
        clock: Arc<dyn crate::ports::clock::Clock>,
        files: Arc<dyn crate::ports::pod_files::PodFiles>,
        cache_ttl: Duration,
        csi_plugins: Arc<dyn crate::ports::csi::CsiPlugins>,
        devices: Arc<crate::app::devices::DeviceManager>,
        events: PodEventSink,
    ) -> Self {
        let csi_drivers = crate::app::plugins::CsiDrivers::default();
        PodLinks {
            events,
            static_pods: watch::channel(Vec::new()).0,
            volumes: Arc::new(
                VolumeManager::standalone(clock, files)
                    .with_cache_ttl(cache_ttl)
                    .with_csi(csi_drivers.clone(), csi_plugins),
            ),
            csi_drivers,
            devices,
            cpus: None,
            device_topology: None,
        }
    }
}

type ServerTask = tokio::task::JoinHandle<Result<(), crate::app::server::ServerError>>;

/// Step: the kubelet API on `address:port` over TLS, and the read-only port when set. A
/// port that cannot be listened on, or an unusable certificate, fails the start, as
/// upstream's `ListenAndServeKubeletServer` exits.
async fn start_kubelet_api(
    started: &Started,
    deps: &Deps,
    store: PodStatusStore,
    endpoints: Endpoints,
    volumes: Arc<VolumeManager>,
    shutdown: &watch::Receiver<bool>,
) -> Result<Vec<ServerTask>, StartupError> {
    use crate::app::server::api::{serve_api, KubeletApi};
    use crate::app::server::auth::Guard;
    let node = &started.resolved.node;
    let Some(settings) = node.server.clone() else {
        info!("enableServer is false: the kubelet API is not served");
        return Ok(Vec::new());
    };
    let Some(api_deps) = (deps.kubelet_api_for)(node) else {
        return Ok(Vec::new());
    };
    if matches!(
        settings.authorization,
        crate::domain::kubelet_api::settings::AuthorizationMode::Webhook { .. }
    ) && api_deps.authorizer.is_none()
    {
        warn!("authorization.mode is Webhook without an API server (standalone): every kubelet API request is forbidden");
    }
    let mut tasks = Vec::new();
    let now_secs = deps.clock.now_unix_nanos().div_euclid(1_000_000_000);
    let tls = if settings.server_tls_bootstrap {
        info!("serverTLSBootstrap: TLS handshakes fail until a kubelet-serving certificate is issued, as upstream's");
        crate::app::server::tls::bootstrapped_server_config(&settings, Arc::clone(&api_deps.certs))
    } else {
        crate::app::server::tls::serving_files(
            &settings,
            &node.hostname,
            api_deps.pki.as_ref(),
            api_deps.certs.as_ref(),
            now_secs,
        )
        .and_then(|(cert, key)| {
            crate::app::server::tls::server_config(
                &settings,
                Arc::clone(&api_deps.certs),
                &cert,
                &key,
            )
        })
    };
    let stats = stats_provider(started, deps, &store, volumes, shutdown, &mut tasks);
    let api = |guard: Option<Arc<Guard>>| {
        Arc::new(KubeletApi {
            guard,
            endpoints: endpoints.clone(),
            pods: store.clone(),
            pod_logs_dir: node.pod_logs_dir.clone(),
            logs: Arc::clone(&deps.container_logs),
            debugging: settings.enable_debugging_handlers,
            clock: Arc::clone(&deps.clock),
            runtime: Arc::clone(&started.runtime),
            stats: stats.clone(),
        })
    };
    let address = join_host_port(&settings.address, settings.port);
    let config = tls.map_err(StartupError::KubeletApiTls)?;
    let listen = |address: String| async move {
        tokio::net::TcpListener::bind(&address)
            .await
            .map_err(|source| StartupError::KubeletApiListen { address, source })
    };
    let listener = listen(address).await?;
    let guard = Arc::new(Guard::new(
        settings.clone(),
        node.node_name.clone(),
        Arc::clone(&api_deps.pki),
        api_deps.authenticator.clone(),
        api_deps.authorizer.clone(),
        Arc::clone(&deps.clock),
    ));
    tasks.push(tokio::spawn(serve_api(
        listener,
        Some(Arc::new(config)),
        api(Some(guard)),
        shutdown.clone(),
    )));
    if let Some(port) = settings.read_only_port {
        let address = join_host_port(&settings.address, port);
        let listener = listen(address.clone()).await?;
        warn!(%address, "serving the read-only port without authentication (readOnlyPort)");
        tasks.push(tokio::spawn(serve_api(
            listener,
            None,
            api(None),
            shutdown.clone(),
        )));
    }
    Ok(tasks)
}

/// The stats provider of `/stats/summary` and `/metrics*`, reading through the eviction
/// manager's ports (cgroup files, statfs, the CRI), with its housekeeping loop.
fn stats_provider(
    started: &Started,
    deps: &Deps,
    store: &PodStatusStore,
    volumes: Arc<VolumeManager>,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut Vec<ServerTask>,
) -> Option<Arc<crate::app::stats_provider::StatsProvider>> {
    let node = &started.resolved.node;
    let ports = match (deps.eviction_for)(node) {
        Ok(ports) => instrumented(ports),
        Err(e) => {
            error!(error = %Chain(&e), "no stats provider: /stats/summary and /metrics are not served");
            return None;
        }
    };
    let requests = RequestContext::from_config(&started.resolved, ResolvConf::default());
    // Sampled every housekeeping interval (cAdvisor's housekeeping), so CPU rates have
    // an earlier sample and scrapes between serve its pods.
    let period = node.eviction.monitoring_period;
    let provider = Arc::new(
        crate::app::stats_provider::StatsProvider::new(
            ports.node,
            ports.runtime,
            started.containers.tree().cloned(),
            node.cgroup_driver,
            &requests,
            store.clone(),
            Arc::clone(&deps.clock),
            node.node_name.to_string(),
        )
        .with_housekeeping_period(period)
        .with_volumes(volumes)
        .with_usage_source(UsageSource::from_gate(
            node.feature_gates.enabled(STATS_FROM_CRI_GATE),
        )),
    );
    let housekeeping = Arc::clone(&provider);
    let stop = shutdown.clone();
    tasks.push(tokio::spawn(async move {
        housekeeping.run(period, stop).await;
        Ok(())
    }));
    Some(provider)
}

/// `host:port`, bracketing IPv6 addresses.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Why the kubelet stopped running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Signal,
    LockContention,
    RunOnceDone,
}

/// Run until `stop` resolves (a signal), the lock file is contended, or, with
/// `--runonce`, one pass is done. Serves `/healthz` (and the kubelet API) and tells systemd
/// it is ready.
pub async fn run(
    started: Started,
    deps: &Deps,
    stop: impl Future<Output = ()>,
) -> Result<StopReason, StartupError> {
    if started.resolved.options.runonce {
        return run_pods_once(&started, deps).await;
    }
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let store = PodStatusStore::new().with_clock(Arc::clone(&deps.clock));
    let eviction = start_eviction(&started, deps, store.clone(), &shutdown_rx)?;
    start_log_rotation(&started, deps, &shutdown_rx);
    let cache_ttl = Duration::from_secs(crate::domain::volumes::object_cache_ttl_secs(
        started
            .resolved
            .config
            .config_map_and_secret_change_detection_strategy
            .as_deref(),
    ));
    let mut links = PodLinks::new(
        Arc::clone(&deps.clock),
        Arc::clone(&deps.pod_files),
        cache_ttl,
        Arc::clone(&deps.csi_plugins),
        Arc::new(
            crate::app::devices::DeviceManager::new(
                &started.resolved.options.root_dir,
                Arc::clone(&deps.device_plugins),
                Arc::clone(&deps.clock),
            )
            .with_pod_resources_get(
                started
                    .resolved
                    .node
                    .feature_gates
                    .enabled(crate::domain::devices::pod_resources::GET_FEATURE_GATE),
            ),
        ),
        PodEventSink::for_runtime(started.resolved.node.runtime_endpoint.is_simulated()),
    );
    // Before the pods are admitted: the checkpoint tells which devices they hold.
    // Without its sockets the node runs on, with no device plugin (upstream fails).
    if let Err(e) = links.devices.start().await {
        error!(error = %Chain(&e), "failed to start the device plugin manager");
    }
    // Before the pods are admitted too: the state file tells which CPUs they hold.
    links.cpus = crate::app::cpu_manager::CpuManager::start(
        &started.resolved.node,
        &started.resolved.options.root_dir,
        deps.machine.as_ref(),
        Arc::clone(&deps.device_plugins),
    )
    .map_err(StartupError::CpuManager)?;
    if let Some(cpus) = &links.cpus {
        links.devices.set_cpu_manager(Arc::clone(cpus));
        tokio::spawn(Arc::clone(cpus).run(Arc::clone(&started.runtime), shutdown_rx.clone()));
    }
    links.device_topology =
        crate::app::cpu_manager::device_topology(&started.resolved.node, deps.machine.as_ref())
            .map_err(StartupError::CpuManager)?
            .map(Arc::new);
    let (connected_tx, connected_rx) = watch::channel(None);
    let connected = crate::app::node::startup::connected(&started.resolved);
    let PodLoopStarted {
        task: pod_loop,
        pleg,
        sync_loop,
    } = start_pod_loop(
        &started,
        deps,
        store.clone(),
        Some(eviction.hooks),
        &links,
        connected.then(|| connected_rx.clone()),
        shutdown_rx.clone(),
    )?;
    // Connected mode: CSI drivers register once the Node is (they write to it).
    if connected {
        let watcher = crate::app::plugins::PluginWatcher::new(
            &started.resolved.options.root_dir,
            Arc::clone(&deps.csi_plugins),
            links.csi_drivers.clone(),
        );
        tokio::spawn(watcher.run(connected_rx.clone(), shutdown_rx.clone()));
    }
    // Connected mode: the node agent runs beside the pod loop until shutdown.
    let _node_agent = crate::app::node::startup::start_if_connected(
        &started,
        deps,
        eviction.conditions,
        &links,
        Some(Arc::clone(&links.volumes)),
        Arc::new(connected_tx),
    )?;
    let endpoints = {
        let configz = started.configz.clone();
        let store = store.clone();
        Endpoints {
            configz: Arc::new(move || configz.read().map(|v| v.clone()).unwrap_or_default()),
            pods: Arc::new(move || store.pod_list()),
            checks: {
                let pleg = Arc::clone(&pleg);
                Arc::new(move || vec![("pleg", pleg.check().map_err(Into::into))])
            },
            // Upstream's kubelet API checks (`ping` and `log` always pass), with the PLEG's.
            api_checks: Arc::new(move || {
                vec![
                    (
                        healthz::SYNC_LOOP_CHECK,
                        sync_loop.check().map_err(Into::into),
                    ),
                    ("pleg", pleg.check().map_err(Into::into)),
                ]
            }),
        }
    };
    let server = if let Some(healthz) = &started.resolved.node.healthz {
        let address = healthz.to_string();
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .map_err(|source| StartupError::Healthz {
                address: address.clone(),
                source,
            })?;
        Some((
            address,
            tokio::spawn(crate::app::server::serve_health(
                listener,
                Arc::clone(&endpoints.checks),
                shutdown_rx.clone(),
            )),
        ))
    } else {
        None
    };
    let api_servers = start_kubelet_api(
        &started,
        deps,
        store.clone(),
        endpoints,
        Arc::clone(&links.volumes),
        &shutdown_rx,
    )
    .await?;
    // Said once every port listens: tests and operators take it as the ready signal.
    let server = server.map(|(address, task)| {
        info!(%address, "serving /healthz");
        task
    });
    match deps.host.notify_ready() {
        Ok(true) => info!("notified systemd: READY=1"),
        Ok(false) => {}
        Err(e) => warn!(error = %Chain(&e), "failed to notify systemd"),
    }
    // Ends on shutdown; nothing waits for it.
    drop(tokio::spawn(crate::app::code_pages::release_code_pages(
        Arc::clone(&deps.host),
        shutdown_rx.clone(),
    )));
    let contention = async {
        match started.contention {
            Some(wait) => {
                if let Err(e) = wait.await {
                    warn!(error = %Chain(&e), "lost the lock file watch; --exit-on-lock-contention is inactive");
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    };
    let reason = tokio::select! {
        () = stop => StopReason::Signal,
        () = contention => {
            info!("another process opened the lock file; exiting");
            StopReason::LockContention
        }
    };
    info!(?reason, "shutting down");
    let _ = shutdown_tx.send(true);
    // Each task stops at its next await on the shutdown; one held in a call to a runtime
    // or an API server that does not answer would hold the exit for that call's whole
    // timeout (minutes). The upstream kubelet exits at once on SIGTERM, and a kill leaves
    // nothing rkubelet does not recover at its next start, so what is still running at
    // the deadline is dropped.
    let deadline = tokio::time::Instant::now() + SHUTDOWN_WAIT;
    if let Err(e) = stopped_by(deadline, pod_loop, "pod loop").await {
        warn!(error = %Chain(&e), "pod loop task failed");
    }
    for task in eviction.tasks {
        if let Err(e) = stopped_by(deadline, task, "eviction task").await {
            warn!(error = %Chain(&e), "eviction task failed");
        }
    }
    for task in api_servers {
        match stopped_by(deadline, task, "kubelet API server").await {
            Ok(Some(Err(e))) => {
                warn!(error = %Chain(&e), "kubelet API server stopped with an error")
            }
            Err(e) => warn!(error = %Chain(&e), "kubelet API server task failed"),
            Ok(_) => {}
        }
    }
    if let Some(server) = server {
        match stopped_by(deadline, server, "healthz server").await {
            Ok(Some(Err(e))) => warn!(error = %Chain(&e), "healthz server stopped with an error"),
            Err(e) => warn!(error = %Chain(&e), "healthz server task failed"),
            Ok(_) => {}
        }
    }
    Ok(reason)
}

/// How long rkubelet waits, once asked to stop, for its tasks to end by themselves: half
/// the watchdog's grace, so what is left of it is for the abandoned tasks' warnings and
/// the exit.
const SHUTDOWN_WAIT: Duration =
    Duration::from_millis(crate::app::compose::SHUTDOWN_GRACE.as_millis() as u64 / 2);

/// `task`'s result if it ends by `deadline`; `None`, the task aborted and the fact
/// logged, if it does not.
async fn stopped_by<T>(
    deadline: tokio::time::Instant,
    mut task: tokio::task::JoinHandle<T>,
    what: &str,
) -> Result<Option<T>, tokio::task::JoinError> {
    match tokio::time::timeout_at(deadline, &mut task).await {
        Ok(ended) => ended.map(Some),
        Err(_) => {
            task.abort();
            warn!(
                task = what,
                wait = ?SHUTDOWN_WAIT,
                "still running at the shutdown deadline; abandoned"
            );
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::FakeHost;
    use crate::app::test_support::{deps, try_resolved as resolved};

    #[tokio::test(start_paused = true)]
    async fn the_shutdown_waits_for_a_task_until_its_deadline_then_abandons_it() {
        let deadline = tokio::time::Instant::now() + SHUTDOWN_WAIT;
        let quick = tokio::spawn(async { 7 });
        assert_eq!(
            stopped_by(deadline, quick, "quick").await.ok(),
            Some(Some(7))
        );

        // A task held in a call that never answers.
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        let held = tokio::spawn(async move {
            let _dropped_when_aborted = dropped_tx;
            std::future::pending::<()>().await;
        });
        let asked = tokio::time::Instant::now();
        assert_eq!(stopped_by(deadline, held, "held").await.ok(), Some(None));
        assert_eq!(tokio::time::Instant::now(), asked + SHUTDOWN_WAIT);
        assert!(dropped_rx.await.is_err(), "the abandoned task is aborted");
    }

    #[test]
    fn the_configuration_file_and_its_conf_drop_ins_are_read_through_the_host() {
        let host = FakeHost::new()
            .with_file("/etc/rk/config.yaml", "kind: KubeletConfiguration\n")
            .with_file("/etc/rk/conf.d/20-b.conf", "maxPods: 20\n")
            .with_file("/etc/rk/conf.d/10-a.conf", "maxPods: 10\n")
            .with_file("/etc/rk/conf.d/notes.txt", "not a drop-in");
        let given = crate::app::cli::parse([
            "rkubelet",
            "--config=/etc/rk/config.yaml",
            "--config-dir=/etc/rk/conf.d",
        ])
        .unwrap_or_else(|e| panic!("flags: {e}"));
        let inputs = read_config_inputs(given, &host);
        let main = inputs.main_file.map(|f| (f.path, f.text));
        assert_eq!(
            main,
            Some((
                PathBuf::from("/etc/rk/config.yaml"),
                Ok("kind: KubeletConfiguration\n".to_owned())
            ))
        );
        let drop_ins: Vec<PathBuf> = inputs.drop_ins.into_iter().map(|f| f.path).collect();
        assert_eq!(
            drop_ins,
            [
                PathBuf::from("/etc/rk/conf.d/10-a.conf"),
                PathBuf::from("/etc/rk/conf.d/20-b.conf")
            ]
        );

        // A missing file and folder: the OS's words, reported with the other problems.
        let given = crate::app::cli::parse([
            "rkubelet",
            "--config=/nowhere.yaml",
            "--config-dir=/nowhere.d",
        ])
        .unwrap_or_else(|e| panic!("flags: {e}"));
        let inputs = read_config_inputs(given, &FakeHost::new());
        let not_found = std::io::Error::from(std::io::ErrorKind::NotFound).to_string();
        assert_eq!(
            inputs.main_file.map(|f| f.text),
            Some(Err(not_found.clone()))
        );
        let problems: Vec<String> = inputs
            .read_problems
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            problems,
            [format!(
                "failed to read drop-in configs from --config-dir \"/nowhere.d\": {not_found}"
            )]
        );
    }

    #[tokio::test]
    async fn the_flow_locks_creates_adjusts_notifies_and_stops_on_signal() {
        let host = Arc::new(FakeHost::new().with_notify_socket());
        let deps = deps(&host);
        let config =
            resolved(&["--lock-file=/run/kubelet.lock", "--root-dir=/var/lib/rk"]).expect("valid");
        let started = start(config, &deps).await.expect("starts");
        assert_eq!(
            host.lock_acquisitions(),
            [PathBuf::from("/run/kubelet.lock")]
        );
        assert!(host.created_dirs().contains(&PathBuf::from("/var/lib/rk")));
        assert_eq!(host.oom_score_adj(None), Some(-999));
        assert_eq!(started.resolved.node.node_name, "fake-node");
        let reason = run(started, &deps, std::future::ready(()))
            .await
            .expect("runs");
        assert_eq!(reason, StopReason::Signal);
        assert_eq!(host.ready_notifications(), 1);
    }

    #[tokio::test]
    async fn a_refused_oom_score_only_warns() {
        let host = Arc::new(FakeHost::new());
        host.fail_oom_score_adj(Some(std::io::ErrorKind::PermissionDenied));
        let deps = deps(&host);
        let config = resolved(&["--oom-score-adj=-500"]).expect("valid");
        start(config, &deps)
            .await
            .expect("starts despite the refusal");
        let calls = host.oom_score_adj_calls();
        assert_eq!(calls.len(), 1);
        assert!(!calls[0].applied);
    }

    /// Upstream's `MakeRShared`: a root directory on a private mount is bound onto itself
    /// rshared; one already on a shared mount, or a simulated node, is left alone.
    #[tokio::test]
    async fn the_root_directory_is_made_rshared_unless_it_propagates_already() {
        let private = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
        let shared = "22 1 8:1 / / rw shared:1 - ext4 /dev/sda1 rw\n";
        for (mountinfo, endpoint, made) in [
            (private, "unix:///run/containerd/containerd.sock", true),
            (shared, "unix:///run/containerd/containerd.sock", false),
            (private, "fake://", false),
        ] {
            let host = Arc::new(FakeHost::new().with_file("/proc/self/mountinfo", mountinfo));
            let root = "--root-dir=/var/lib/rk";
            let flag = format!("--container-runtime-endpoint={endpoint}");
            let config =
                crate::app::test_support::resolved_on(&host, &[root, &flag]).expect("valid");
            start(config, &deps(&host)).await.expect("starts");
            let want: Vec<PathBuf> = if made {
                vec!["/var/lib/rk".into()]
            } else {
                Vec::new()
            };
            assert_eq!(host.made_shared(), want, "{mountinfo} {endpoint}");
        }
        // Without the mount table, a real node does not start (upstream's fatal error).
        let host = Arc::new(FakeHost::new());
        let config = crate::app::test_support::resolved_on(
            &host,
            &["--container-runtime-endpoint=unix:///run/containerd/containerd.sock"],
        )
        .expect("valid");
        let Err(error) = start(config, &deps(&host)).await else {
            panic!("started without the mount table");
        };
        assert!(
            error
                .to_string()
                .starts_with("error configuring root directory"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn node_level_refusals_happen_before_any_effect() {
        let host = Arc::new(FakeHost::new());
        let deps = deps(&host);
        let given = crate::app::cli::parse([
            "rkubelet",
            "--container-runtime-endpoint=fake://",
            "--lock-file=/run/kubelet.lock",
            "--reserved-cpus=0-99",
        ])
        .expect("flags parse");
        let error = load_configuration(given, &deps).expect_err("refused");
        assert!(error.to_string().contains("0-99"), "{error}");
        assert!(host.lock_acquisitions().is_empty());
        assert!(host.created_dirs().is_empty());
        assert!(host.oom_score_adj_calls().is_empty());
    }

    #[test]
    fn machine_checks_are_reported_with_the_other_problems() {
        let Err(StartupError::Invalid(problems)) =
            resolved(&["--reserved-cpus=0-99", "--cgroup-driver=nonsense"])
        else {
            panic!("expected invalid configuration");
        };
        assert!(
            problems.iter().any(|p| p.contains("cgroupDriver")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("0-99") && p.contains("0-1")),
            "{problems:?}"
        );
    }

    #[tokio::test]
    async fn a_cgroup_driver_unlike_the_runtimes_refuses_to_start_naming_both() {
        let host = Arc::new(FakeHost::new());
        let deps = deps(&host);
        // The simulated runtime reports cgroupfs, as a containerd with SystemdCgroup=false.
        let config = resolved(&["--cgroup-driver=systemd"]).expect("config valid");
        let error = start(config, &deps).await.err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("misconfiguration: kubelet cgroup driver: \"systemd\" is different from the container runtime's cgroup driver: \"cgroupfs\"; set --cgroup-driver (cgroupDriver) to \"cgroupfs\" or change the runtime's")
        );
    }

    #[tokio::test]
    async fn runonce_returns_after_one_pass_without_notifying() {
        let host = Arc::new(FakeHost::new().with_notify_socket());
        let deps = deps(&host);
        let started = start(resolved(&["--runonce"]).expect("valid"), &deps)
            .await
            .expect("starts");
        let reason = run(started, &deps, std::future::pending())
            .await
            .expect("runs");
        assert_eq!(reason, StopReason::RunOnceDone);
        assert_eq!(host.ready_notifications(), 0);
    }

    #[tokio::test]
    async fn lock_contention_stops_the_kubelet() {
        let host = Arc::new(FakeHost::new());
        let deps = deps(&host);
        let config =
            resolved(&["--lock-file=/run/k.lock", "--exit-on-lock-contention"]).expect("valid");
        let started = start(config, &deps).await.expect("starts");
        host.simulate_lock_contention();
        let reason = run(started, &deps, std::future::pending())
            .await
            .expect("runs");
        assert_eq!(reason, StopReason::LockContention);
    }

    #[test]
    fn bad_configuration_is_reported_whole() {
        let Err(StartupError::Invalid(problems)) =
            resolved(&["--oom-score-adj=5000", "--cgroup-driver=x"])
        else {
            panic!("expected invalid configuration");
        };
        assert_eq!(problems.len(), 2, "{problems:?}");
    }
}
