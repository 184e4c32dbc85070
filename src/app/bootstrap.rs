//! The start-up flow, in upstream's order, each step a named function with a log line.
//!
//! One difference from upstream, on purpose: everything that can refuse the input
//! (configuration, feature gates, node-level checks against this machine's facts) runs
//! before the first side effect, so bad input exits having created nothing: no lock
//! file, no directory.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use serde_json::{json, Value};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::adapters::file_source::{FileSource, DEFAULT_CHECK_FREQUENCY};
use crate::adapters::http_source::{
    HttpSource, HttpSourceError, DEFAULT_CHECK_FREQUENCY as HTTP_CHECK_FREQUENCY,
};
use crate::app::container_manager::{ContainerManager, ContainerManagerError};
use crate::app::cri_requests::RequestContext;
use crate::app::pods::run_once::run_once;
use crate::app::pods::sync::SyncContext;
use crate::app::pods::{LoopSettings, PodLoop, PodStatusStore};
use crate::app::server::Endpoints;
use crate::domain::cgroup::{CgroupDriver, WeightCurve};
use crate::domain::config::layers::GivenFlags;
use crate::domain::config::model::KubeletConfiguration;
use crate::domain::config::{self, ConfigInputs, FileInput, ResolvedConfig};
use crate::domain::dns::{parse_resolv_conf, ResolvConf};
use crate::domain::feature_gates::FeatureGates;
use crate::domain::machine::MachineInfo;
use crate::domain::node::{node_settings, resolve_node_name, NodeNameSource, NodeSettings};
use crate::ports::cgroup::{CgroupError, CgroupManager};
use crate::ports::clock::Clock;
use crate::ports::host::{ContentionWait, Host, LockHandle};
use crate::ports::machine::MachineInfoProvider;
use crate::ports::pod_source::PodSource;
use crate::ports::runtime::{ImageService, RuntimeError, RuntimeService};

/// Builds the runtime client for an endpoint (the composition root decides which).
pub type RuntimeFactory =
    Box<dyn Fn(&str) -> Result<Arc<dyn RuntimeService>, RuntimeError> + Send + Sync>;

/// Builds the image service client for an endpoint.
pub type ImageFactory =
    Box<dyn Fn(&str) -> Result<Arc<dyn ImageService>, RuntimeError> + Send + Sync>;

/// Builds the cgroup manager for a driver (the endpoint tells the simulated node apart).
pub type CgroupFactory = Box<
    dyn Fn(
            CgroupDriver,
            &str,
            WeightCurve,
        )
            -> Pin<Box<dyn Future<Output = Result<Arc<dyn CgroupManager>, CgroupError>> + Send>>
        + Send
        + Sync,
>;

/// The world as start-up sees it.
pub struct Deps {
    pub host: Arc<dyn Host>,
    pub machine: Arc<dyn MachineInfoProvider>,
    pub runtime_for: RuntimeFactory,
    pub images_for: ImageFactory,
    pub cgroups_for: CgroupFactory,
    pub clock: Arc<dyn Clock>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// Bad input: each problem on its own line; nothing was changed.
    #[error("{}", .0.join("\n"))]
    Invalid(Vec<String>),
    #[error("failed to acquire the lock file {path}: {reason}")]
    Lock { path: PathBuf, reason: String },
    #[error("failed to read machine info: {0}")]
    Machine(String),
    #[error("failed to create directory {path}: {reason}")]
    Directory { path: PathBuf, reason: String },
    #[error("failed to run the container runtime at {endpoint}: {reason}")]
    Runtime { endpoint: String, reason: String },
    #[error("failed to start the container manager: {0}")]
    Cgroups(String),
    /// `--runonce`: these pods did not reach running.
    #[error("error running pods: {}", .0.join("; "))]
    RunOnce(Vec<String>),
    #[error("failed to serve healthz on {address}: {reason}")]
    Healthz { address: String, reason: String },
}

/// Read the files the flags name: `--config` and the `*.conf` drop-ins of `--config-dir`
/// in name order. Unreadable files become problems reported with the others.
pub fn read_config_inputs(flags: GivenFlags) -> Result<ConfigInputs, StartupError> {
    let options = config::flag_options(&flags).map_err(problems_to_error)?;
    let read = |path: &Path| FileInput {
        path: path.to_path_buf(),
        text: std::fs::read_to_string(path).map_err(|e| e.to_string()),
    };
    let main_file = options.config.as_deref().map(read);
    let mut drop_ins = Vec::new();
    if let Some(dir) = &options.config_dir {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            StartupError::Invalid(vec![format!(
                "failed to read drop-in configs from --config-dir {:?}: {e}",
                dir.display().to_string()
            )])
        })?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|ext| ext == "conf") && p.is_file())
            .collect();
        paths.sort();
        drop_ins = paths.iter().map(|p| read(p)).collect();
    }
    Ok(ConfigInputs {
        main_file,
        drop_ins,
        flags,
    })
}

fn problems_to_error<E: ToString>(problems: Vec<E>) -> StartupError {
    StartupError::Invalid(problems.iter().map(ToString::to_string).collect())
}

/// Step: load and validate the configuration (defaults, file, drop-ins, flags).
pub fn load_configuration(flags: GivenFlags) -> Result<ResolvedConfig, StartupError> {
    let inputs = read_config_inputs(flags)?;
    config::resolve(&inputs).map_err(problems_to_error)
}

/// Step: the feature gates in force (already validated with the configuration).
pub fn initialize_feature_gates(resolved: &ResolvedConfig) -> Result<FeatureGates, StartupError> {
    let gates =
        FeatureGates::from_map(&resolved.config.feature_gates).map_err(problems_to_error)?;
    info!(changed = ?gates.changed(), "feature gates initialized");
    Ok(gates)
}

/// What start-up knows about the node before it changes anything.
#[derive(Debug, Clone)]
pub struct NodePlan {
    pub node_name: String,
    pub node_name_source: NodeNameSource,
    pub machine: MachineInfo,
    pub settings: NodeSettings,
}

/// Step: node name, machine facts and the container manager settings, validated
/// against this machine (reserved CPUs, allocatable) before any side effect.
pub fn resolve_node(resolved: &ResolvedConfig, deps: &Deps) -> Result<NodePlan, StartupError> {
    let hostname = deps.host.hostname().unwrap_or_default();
    let (node_name, node_name_source) =
        resolve_node_name(resolved.options.hostname_override.as_deref(), &hostname)
            .map_err(|e| StartupError::Invalid(vec![e.to_string()]))?;
    let machine = deps
        .machine
        .machine_info()
        .map_err(|e| StartupError::Machine(e.to_string()))?;
    let settings = node_settings(&resolved.config, &machine).map_err(problems_to_error)?;
    Ok(NodePlan {
        node_name,
        node_name_source,
        machine,
        settings,
    })
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
        .map_err(|e| StartupError::Lock {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

/// The `/configz` document: upstream's shape, `{"kubeletconfig": {...}}` is added by the
/// server; this is the inner configuration with its kind and version.
pub type Configz = Arc<RwLock<Value>>;

/// Step: register the effective configuration for `/configz`.
pub fn register_configz(resolved: &ResolvedConfig) -> Configz {
    let mut value = serde_json::to_value(&resolved.config).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert("kind".into(), json!(config::model::KIND));
        map.insert("apiVersion".into(), json!(config::model::API_VERSION));
    }
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
pub fn log_node(plan: &NodePlan, resolved: &ResolvedConfig) {
    info!(node = %plan.node_name, source = ?plan.node_name_source, "node name resolved");
    info!(
        cores = plan.machine.num_cores,
        online_cpus = %plan.machine.online_cpus,
        memory_bytes = plan.machine.memory_capacity_bytes,
        boot_id = %plan.machine.boot_id,
        machine_id = %plan.machine.machine_id,
        "machine info"
    );
    let c = &resolved.config;
    let show = crate::domain::reserved::format_resource_list;
    info!(
        cgroup_root = %c.cgroup_root,
        cgroups_per_qos = c.cgroups_per_qos,
        cgroup_driver = %c.cgroup_driver,
        system_reserved = %show(&plan.settings.system_reserved),
        kube_reserved = %show(&plan.settings.kube_reserved),
        reserved_cpus = %plan.settings.reserved_cpus.as_ref().map(ToString::to_string).unwrap_or_default(),
        enforce_node_allocatable = ?c.enforce_node_allocatable,
        hard_eviction_thresholds = plan.settings.hard_thresholds.len(),
        allocatable = %show(&plan.settings.allocatable),
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
            warn!(value, error = %e, "failed to apply oom_score_adj; continuing");
            false
        }
    }
}

/// Step: connect to the container runtime and check its version.
pub async fn start_runtime(
    deps: &Deps,
    endpoint: &str,
) -> Result<(Arc<dyn RuntimeService>, String), StartupError> {
    let fail = |e: RuntimeError| StartupError::Runtime {
        endpoint: endpoint.to_string(),
        reason: e.to_string(),
    };
    let runtime = (deps.runtime_for)(endpoint).map_err(fail)?;
    let version = runtime.version().await.map_err(fail)?;
    if endpoint.starts_with("fake://") {
        warn!("SIMULATED NODE: --container-runtime-endpoint=fake:// selects the embedded in-memory runtime; no container will really run");
    }
    info!(
        endpoint,
        runtime = %version.runtime_name,
        version = %version.runtime_version,
        api = %version.runtime_api_version,
        "container runtime initialized"
    );
    Ok((runtime, version.runtime_name))
}

/// Step: the cgroup driver (checked against the runtime's where it says), then the
/// container manager's tree: `kubepods` with node allocatable and the QoS cgroups.
pub async fn start_container_manager(
    resolved: &ResolvedConfig,
    plan: &NodePlan,
    deps: &Deps,
    runtime: &dyn RuntimeService,
) -> Result<Arc<ContainerManager>, StartupError> {
    let config = &resolved.config;
    let driver = CgroupDriver::parse(&config.cgroup_driver).ok_or_else(|| {
        StartupError::Invalid(vec![format!(
            "invalid configuration: cgroupDriver (--cgroup-driver) {:?}: must be \"cgroupfs\" or \"systemd\"",
            config.cgroup_driver
        )])
    })?;
    match runtime.cgroup_driver().await {
        Ok(Some(reported)) if reported != driver => {
            return Err(StartupError::Invalid(vec![format!(
                "misconfiguration: kubelet cgroup driver: {:?} is different from the container runtime's cgroup driver: {:?}; set --cgroup-driver (cgroupDriver) to {:?} or change the runtime's",
                driver.as_str(),
                reported.as_str(),
                reported.as_str()
            )]))
        }
        Ok(Some(_)) => info!(%driver, "the container runtime uses the same cgroup driver"),
        Ok(None) => info!(%driver, "the container runtime does not report its cgroup driver (RuntimeConfig is not implemented); using the configured cgroup driver"),
        Err(e) => warn!(%driver, error = %e, "cannot ask the container runtime for its cgroup driver; using the configured one"),
    }
    let curve = resolved.options.cpu_weight_curve;
    let cgroups = (deps.cgroups_for)(driver, &config.container_runtime_endpoint, curve)
        .await
        .map_err(|e| StartupError::Cgroups(e.to_string()))?;
    let containers = ContainerManager::new(cgroups, resolved)
        .map_err(|e| StartupError::Invalid(vec![e.to_string()]))?;
    let enforce_pods = config.enforce_node_allocatable.iter().any(|e| e == "pods");
    containers
        .setup(&plan.settings, enforce_pods)
        .await
        .map_err(|e| match e {
            ContainerManagerError::Setup { .. } => StartupError::Cgroups(e.to_string()),
            _ => StartupError::Invalid(vec![e.to_string()]),
        })?;
    Ok(Arc::new(containers))
}

/// Everything start-up produced that the running kubelet keeps.
pub struct Started {
    pub resolved: ResolvedConfig,
    pub plan: NodePlan,
    pub configz: Configz,
    pub runtime: Arc<dyn RuntimeService>,
    /// The runtime's name (`containerd`), which prefixes container ids in pod status.
    pub runtime_name: String,
    pub containers: Arc<ContainerManager>,
    pub lock: Option<LockHandle>,
    /// With `--exit-on-lock-contention`: resolves when another process opens the lock.
    pub contention: Option<ContentionWait>,
}

/// The start-up flow up to a connected runtime. Bad input returns before any effect.
pub async fn start(resolved: ResolvedConfig, deps: &Deps) -> Result<Started, StartupError> {
    crate::app::cli::warn_compatibility(&resolved);
    initialize_feature_gates(&resolved)?;
    let plan = resolve_node(&resolved, deps)?;
    crate::app::node::startup::validate(&resolved)?;
    let lock = acquire_lock_file(deps.host.as_ref(), resolved.options.lock_file.as_deref())?;
    let contention = watch_lock_contention(deps.host.as_ref(), &resolved, lock.as_ref());
    let configz = register_configz(&resolved);
    check_standalone(&resolved);
    log_node(&plan, &resolved);
    deps.host
        .create_dir_all(&resolved.options.root_dir)
        .map_err(|e| StartupError::Directory {
            path: resolved.options.root_dir.clone(),
            reason: e.to_string(),
        })?;
    check_root(deps.host.as_ref());
    apply_oom_score_adj(deps.host.as_ref(), resolved.config.oom_score_adj);
    let (runtime, runtime_name) =
        start_runtime(deps, &resolved.config.container_runtime_endpoint).await?;
    let containers = start_container_manager(&resolved, &plan, deps, runtime.as_ref()).await?;
    Ok(Started {
        resolved,
        plan,
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
            warn!(error = %e, "cannot watch the lock file; --exit-on-lock-contention is inactive");
            None
        }
    }
}

/// The pod sources the configuration asks for: the manifest path (`staticPodPath`)
/// and the manifest URL (`staticPodURL`).
pub fn pod_sources(
    started: &Started,
    deps: &Deps,
) -> Result<Vec<Box<dyn PodSource>>, HttpSourceError> {
    let config = &started.resolved.config;
    let mut sources: Vec<Box<dyn PodSource>> = Vec::new();
    if !config.static_pod_path.is_empty() {
        let frequency = config
            .file_check_frequency
            .to_std()
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_CHECK_FREQUENCY);
        info!(path = %config.static_pod_path, every = ?frequency, "adding static pod path");
        sources.push(Box::new(FileSource::new(
            &config.static_pod_path,
            &started.plan.node_name,
            frequency,
            Arc::clone(&deps.clock),
        )));
    }
    if !config.static_pod_url.is_empty() {
        let frequency = config
            .http_check_frequency
            .to_std()
            .filter(|d| !d.is_zero())
            .unwrap_or(HTTP_CHECK_FREQUENCY);
        info!(url = %config.static_pod_url, every = ?frequency, "adding pod source URL");
        sources.push(Box::new(HttpSource::new(
            &config.static_pod_url,
            config.static_pod_url_header.clone(),
            &started.plan.node_name,
            frequency,
            Arc::clone(&deps.clock),
        )?));
    }
    Ok(sources)
}

/// The host's resolver configuration for `Default`-policy pods; an unreadable file
/// only warns (pods then get no DNS servers), as upstream.
fn read_resolv_conf(config: &KubeletConfiguration) -> ResolvConf {
    if config.resolv_conf.is_empty() {
        return ResolvConf::default();
    }
    match std::fs::read_to_string(&config.resolv_conf) {
        Ok(text) => parse_resolv_conf(&text),
        Err(e) => {
            warn!(path = %config.resolv_conf, error = %e, "cannot read resolvConf; pods with dnsPolicy Default get no DNS servers");
            ResolvConf::default()
        }
    }
}

/// What every pod sync shares: the runtime and image clients, the clock, and how
/// requests are built.
fn sync_context(started: &Started, deps: &Deps) -> Result<Arc<SyncContext>, StartupError> {
    let config = &started.resolved.config;
    let endpoint = if config.image_service_endpoint.is_empty() {
        &config.container_runtime_endpoint
    } else {
        &config.image_service_endpoint
    };
    let images = (deps.images_for)(endpoint).map_err(|e| StartupError::Runtime {
        endpoint: endpoint.clone(),
        reason: e.to_string(),
    })?;
    let requests = RequestContext::from_config(&started.resolved, read_resolv_conf(config))
        .with_memory_capacity(started.plan.machine.memory_capacity_bytes);
    Ok(Arc::new(SyncContext::new(
        Arc::clone(&started.runtime),
        images,
        Arc::clone(&deps.clock),
        requests,
        started.runtime_name.clone(),
        Arc::clone(&started.containers),
    )))
}

fn sources_or_error(
    started: &Started,
    deps: &Deps,
) -> Result<Vec<Box<dyn PodSource>>, StartupError> {
    pod_sources(started, deps)
        .map_err(|e| StartupError::Invalid(vec![format!("invalid --manifest-url: {e}")]))
}

/// Step: the sync loop that runs the pods of every source on the runtime.
fn start_pod_loop(
    started: &Started,
    deps: &Deps,
    store: PodStatusStore,
    shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, StartupError> {
    let config = &started.resolved.config;
    let ctx = sync_context(started, deps)?;
    let settings = LoopSettings {
        resync_period: config
            .sync_frequency
            .to_std()
            .filter(|d| !d.is_zero())
            .unwrap_or(LoopSettings::default().resync_period),
        ..LoopSettings::default()
    };
    let sources = sources_or_error(started, deps)?;
    Ok(tokio::spawn(
        PodLoop::new(ctx, store, settings).run(sources, shutdown),
    ))
}

/// `--runonce`: start the static pods once, wait until they run, report, return.
async fn run_pods_once(started: &Started, deps: &Deps) -> Result<StopReason, StartupError> {
    let ctx = sync_context(started, deps)?;
    let sources = sources_or_error(started, deps)?;
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

/// Why the kubelet stopped running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Signal,
    LockContention,
    RunOnceDone,
}

/// Run until `stop` resolves (a signal), the lock file is contended, or, with
/// `--runonce`, one pass is done. Serves `/healthz` and `/configz` and tells systemd
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
    let store = PodStatusStore::new();
    let pod_loop = start_pod_loop(&started, deps, store.clone(), shutdown_rx.clone())?;
    // Connected mode: the node agent runs beside the pod loop until shutdown.
    let _node_agent = crate::app::node::startup::start_if_connected(&started, deps)?;
    let config = &started.resolved.config;
    let server = if config.healthz_port != 0 {
        let address = format!("{}:{}", config.healthz_bind_address, config.healthz_port);
        let listener =
            tokio::net::TcpListener::bind(&address)
                .await
                .map_err(|e| StartupError::Healthz {
                    address: address.clone(),
                    reason: e.to_string(),
                })?;
        info!(%address, "serving /healthz and /configz");
        let configz = started.configz.clone();
        let store = store.clone();
        let endpoints = Endpoints {
            configz: Arc::new(move || configz.read().map(|v| v.clone()).unwrap_or_default()),
            pods: Arc::new(move || store.pod_list()),
        };
        Some(tokio::spawn(crate::app::server::serve_health(
            listener,
            endpoints,
            shutdown_rx.clone(),
        )))
    } else {
        None
    };
    match deps.host.notify_ready() {
        Ok(true) => info!("notified systemd: READY=1"),
        Ok(false) => {}
        Err(e) => warn!(error = %e, "failed to notify systemd"),
    }
    let contention = async {
        match started.contention {
            Some(wait) => {
                if let Err(e) = wait.await {
                    warn!(error = %e, "lost the lock file watch; --exit-on-lock-contention is inactive");
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
    if let Err(e) = pod_loop.await {
        warn!(error = %e, "pod loop task failed");
    }
    if let Some(server) = server {
        match server.await {
            Ok(Err(e)) => warn!(error = %e, "healthz server stopped with an error"),
            Err(e) => warn!(error = %e, "healthz server task failed"),
            Ok(Ok(())) => {}
        }
    }
    Ok(reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::runtime::FakeRuntime;
    use crate::adapters::fake::{FakeHost, FakeMachine};
    use crate::app::cli;

    fn resolved(args: &[&str]) -> Result<ResolvedConfig, StartupError> {
        let mut argv = vec![
            "rkubelet",
            "--container-runtime-endpoint=fake://",
            "--healthz-port=0",
        ];
        argv.extend_from_slice(args);
        let given = cli::parse(argv).map_err(|e| StartupError::Invalid(vec![e.to_string()]))?;
        load_configuration(given)
    }

    fn deps(host: &Arc<FakeHost>) -> Deps {
        Deps {
            host: host.clone(),
            machine: Arc::new(FakeMachine::default()),
            runtime_for: Box::new(|_| Ok(Arc::new(FakeRuntime::new()) as Arc<dyn RuntimeService>)),
            images_for: Box::new(|_| Ok(Arc::new(FakeRuntime::new()) as Arc<dyn ImageService>)),
            cgroups_for: Box::new(|driver, _, _| {
                let cgroups: Arc<dyn CgroupManager> =
                    Arc::new(crate::adapters::fake::FakeCgroupManager::new(driver));
                Box::pin(std::future::ready(Ok(cgroups)))
            }),
            clock: Arc::new(crate::adapters::fake::FakeClock::new(0)),
        }
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
        assert_eq!(started.plan.node_name, "fake-node");
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

    #[tokio::test]
    async fn node_level_refusals_happen_before_any_effect() {
        let host = Arc::new(FakeHost::new());
        let deps = deps(&host);
        let config = resolved(&["--lock-file=/run/kubelet.lock", "--reserved-cpus=0-99"])
            .expect("config valid");
        let error = start(config, &deps).await.err().expect("refused");
        assert!(error.to_string().contains("0-99"), "{error}");
        assert!(host.lock_acquisitions().is_empty());
        assert!(host.created_dirs().is_empty());
        assert!(host.oom_score_adj_calls().is_empty());
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
