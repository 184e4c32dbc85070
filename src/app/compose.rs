//! The composition root: the only place that picks concrete adapters.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use crate::adapters::apiserver::{ClientSettings, KubeConnector};
use crate::adapters::cgroupfs::{detect_version, CgroupfsManager};
use crate::adapters::cri::CriRuntime;
use crate::adapters::fake::runtime::FakeRuntime;
use crate::adapters::fake::FakeCgroupManager;
use crate::adapters::fake::FakeRuntimeStatus;
use crate::adapters::fake::{FakeMemoryNotifier, FakeNodeStats};
use crate::adapters::pki::RcgenPki;
use crate::adapters::procfs::{
    MachinePaths, MemcgThresholdNotifier, ProcfsMachineInfo, ProcfsNodeStats,
};
use crate::adapters::static_pods::file::FileSource;
use crate::adapters::static_pods::http::HttpSource;
use crate::adapters::system::{
    FileCertStore, SystemContainerLogs, SystemHostFacts, SystemPodFiles,
};
use crate::adapters::system::{SystemClock, SystemHost};
use crate::adapters::systemd::{CgroupMount, SystemdManager};
use crate::app::bootstrap::Deps;
use crate::app::eviction::EvictionPorts;
use crate::app::node::NodeAgentDeps;
use crate::domain::cgroup::{CgroupDriver, WeightCurve};
use crate::domain::config::options::DEFAULT_CERT_DIR;
use crate::domain::config::{FlagOptions, NodeConfig, RuntimeEndpoint};
use crate::ports::cgroup::{CgroupError, CgroupManager};
use crate::ports::clock::Clock;
use crate::ports::pod_source::{PodSource, PodSourceError};
use crate::ports::runtime::{ImageService, RuntimeError, RuntimeService};
use crate::ports::runtime_status::RuntimeStatusService;

/// Where the cgroup hierarchies are mounted.
const CGROUP_MOUNT_ROOT: &str = "/sys/fs/cgroup";

/// The runtime and image service clients of one endpoint.
type CriClients = (Arc<dyn RuntimeService>, Arc<dyn ImageService>);

/// The runtime and image service behind one endpoint, one client for both: the embedded
/// simulated runtime, or a CRI client whose every call is bounded by `timeout`.
fn clients_for(endpoint: &RuntimeEndpoint, timeout: Duration) -> Result<CriClients, RuntimeError> {
    match endpoint {
        RuntimeEndpoint::Simulated => {
            // Real times, as a real runtime records them (crash-loop back-off counts from them).
            let fake =
                Arc::new(FakeRuntime::with_clock(Arc::new(SystemClock::new())).without_journal());
            Ok((fake.clone(), fake))
        }
        RuntimeEndpoint::Cri(uri) => {
            let cri = Arc::new(CriRuntime::connect(uri, timeout)?);
            Ok((cri.clone(), cri))
        }
    }
}

/// The runtime client for an endpoint (see [`clients_for`]).
pub fn runtime_for(
    endpoint: &RuntimeEndpoint,
    timeout: Duration,
) -> Result<Arc<dyn RuntimeService>, RuntimeError> {
    clients_for(endpoint, timeout).map(|(runtime, _)| runtime)
}

/// The image service client for an endpoint (see [`clients_for`]).
pub fn image_service_for(
    endpoint: &RuntimeEndpoint,
    timeout: Duration,
) -> Result<Arc<dyn ImageService>, RuntimeError> {
    clients_for(endpoint, timeout).map(|(_, images)| images)
}

/// The cgroup manager for a driver: the kernel's cgroup filesystem or systemd over
/// D-Bus; the simulated node gets an in-memory tree so it touches no cgroup.
pub async fn cgroup_manager_for(
    driver: CgroupDriver,
    curve: WeightCurve,
    simulated: bool,
) -> Result<Arc<dyn CgroupManager>, CgroupError> {
    if simulated {
        info!("simulated node: cgroups are kept in memory only");
        return Ok(Arc::new(FakeCgroupManager::new(driver).without_journal()));
    }
    match driver {
        CgroupDriver::Cgroupfs => Ok(Arc::new(CgroupfsManager::detect(Path::new(
            CGROUP_MOUNT_ROOT,
        ))?)),
        // The system bus, or DBUS_SYSTEM_BUS_ADDRESS where set (tests point it at a
        // private manager).
        CgroupDriver::Systemd => {
            let root = PathBuf::from(CGROUP_MOUNT_ROOT);
            let version = detect_version(&root);
            Ok(Arc::new(
                SystemdManager::connect(None, CgroupMount { root, version })
                    .await?
                    .with_weight_curve(curve),
            ))
        }
    }
}

/// The pod sources the configuration asks for: the manifest path (`staticPodPath`)
/// and the manifest URL (`staticPodURL`).
pub fn pod_sources(
    node: &NodeConfig,
    clock: Arc<dyn Clock>,
) -> Result<Vec<Box<dyn PodSource>>, PodSourceError> {
    let mut sources: Vec<Box<dyn PodSource>> = Vec::new();
    if let Some(path) = &node.static_pod_path {
        let every = node.file_check_frequency;
        info!(path = %path.display(), ?every, "adding static pod path");
        sources.push(Box::new(FileSource::new(
            path,
            &node.node_name,
            every,
            Arc::clone(&clock),
        )));
    }
    if let Some(url) = &node.static_pod_url {
        let every = node.http_check_frequency;
        info!(%url, ?every, "adding pod source URL");
        let source = HttpSource::new(
            url,
            node.static_pod_url_header.clone(),
            &node.node_name,
            every,
            clock,
        )
        .map_err(|e| PodSourceError::Invalid {
            what: "--manifest-url",
            value: url.clone(),
            source: Box::new(e),
        })?;
        sources.push(Box::new(source));
    }
    Ok(sources)
}

/// The adapters of a real node; `options` gives the root directory whose filesystem the
/// machine facts measure.
pub fn production_deps(options: &FlagOptions) -> Deps {
    Deps {
        kubelet_api_for: Box::new(kubelet_api_deps),
        host: Arc::new(SystemHost::from_env()),
        machine: Arc::new(ProcfsMachineInfo::new(MachinePaths::host(
            options.root_dir.clone(),
        ))),
        runtime_for: Box::new(runtime_for),
        images_for: Box::new(image_service_for),
        cgroups_for: Box::new(|driver, endpoint, curve| {
            Box::pin(cgroup_manager_for(driver, curve, endpoint.is_simulated()))
        }),
        sources_for: Box::new(pod_sources),
        node_agent_for: Box::new(node_agent_deps),
        eviction_for: Box::new(eviction_ports),
        cgroup_version: Box::new(|| detect_version(Path::new(CGROUP_MOUNT_ROOT))),
        clock: Arc::new(SystemClock::new()),
        prober: Arc::new(crate::adapters::probe::NetworkProber::new()),
        host_facts: Arc::new(SystemHostFacts),
        pod_files: Arc::new(SystemPodFiles),
        container_logs: Arc::new(SystemContainerLogs),
        csi_plugins: Arc::new(crate::adapters::csi::SocketCsiPlugins),
        device_plugins: Arc::new(crate::adapters::device_plugins::SocketDevicePlugins),
    }
}

/// The kubelet API's ports: rcgen for the self-signed certificate and client subjects;
/// TokenReview and SubjectAccessReview with the node's kubeconfig when connected.
pub fn kubelet_api_deps(node: &NodeConfig) -> Option<crate::app::bootstrap::KubeletApiDeps> {
    let reviewer = node.cluster.as_ref().map(|cluster| {
        Arc::new(
            crate::adapters::apiserver::auth::KubeReviewer::new(
                cluster.kubeconfig.clone(),
                Duration::from_secs(10),
            )
            .observed_by(Arc::new(crate::app::metrics::RestClientMetrics)),
        )
    });
    let cert_dir = node
        .server
        .as_ref()
        .map_or_else(|| PathBuf::from(DEFAULT_CERT_DIR), |s| s.cert_dir.clone());
    Some(crate::app::bootstrap::KubeletApiDeps {
        pki: Arc::new(RcgenPki),
        certs: Arc::new(FileCertStore::with_prefix(
            cert_dir,
            crate::domain::node_status::certificate::SERVER_PAIR_PREFIX,
        )),
        authenticator: reviewer
            .clone()
            .map(|r| r as Arc<dyn crate::ports::auth::Authenticator>),
        authorizer: reviewer.map(|r| r as Arc<dyn crate::ports::auth::Authorizer>),
    })
}

/// Threads for blocking work (file system calls, folder walks, mounts). Tokio's default
/// (512) lets a burst of pods start a thread per call, and an idle pool never shrinks
/// while work keeps arriving: each new task wakes the longest-idle thread, so none stays
/// idle the 10 s that retires it. Blocking tasks here are short, so a small pool queues
/// them briefly instead.
pub const MAX_BLOCKING_THREADS: usize = 8;

/// The single-threaded tokio runtime the binaries run on; `None` (reported on
/// stderr) when it cannot start.
pub fn async_runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            eprintln!("failed to start the async runtime: {e}");
            None
        }
    }
}

/// How long the shutdown may take after the signal before the process exits anyway.
/// Every task it waits for ends at once, and pods keep running either way; but work
/// already running on the runtime's one thread or in its blocking pool (a pod of
/// 100,000 variables decided in a debug build, under load) must not keep a node from
/// replacing its kubelet, as the upstream kubelet's exit does not wait for it either.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Install the SIGTERM/SIGINT handlers now (so a signal that arrives during start-up
/// is not fatal) and return a future that resolves on the first of them. From the
/// signal's arrival the process exits within [`SHUTDOWN_GRACE`] whatever still runs:
/// a thread of its own hears the signal as the kernel delivers it, since the runtime's
/// one thread, which polls tokio's handlers, may be the one held up. Must be called
/// inside the tokio runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    arm_shutdown_watchdog();
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut term), Ok(mut int)) = handlers else {
            // Without handlers only a kill stops us; say so rather than exit.
            tracing::warn!("cannot install SIGTERM/SIGINT handlers");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("received SIGTERM"),
            _ = int.recv() => tracing::info!("received SIGINT"),
        }
    }
}

/// A thread that waits for SIGTERM or SIGINT, then gives the shutdown
/// [`SHUTDOWN_GRACE`] and exits the process (exit code 0: pods keep running).
fn arm_shutdown_watchdog() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = match signal_hook::iterator::Signals::new([SIGTERM, SIGINT]) {
        Ok(signals) => signals,
        Err(e) => {
            tracing::warn!(error = %e, "cannot bound the shutdown's time");
            return;
        }
    };
    let watchdog = std::thread::Builder::new()
        .name("shutdown-grace".into())
        .spawn(move || {
            if signals.forever().next().is_none() {
                return;
            }
            std::thread::sleep(SHUTDOWN_GRACE);
            tracing::warn!(grace = ?SHUTDOWN_GRACE, "the shutdown did not finish in time; exiting now (pods keep running)");
            std::process::exit(0);
        });
    if let Err(e) = watchdog {
        tracing::warn!(error = %e, "cannot bound the shutdown's time");
    }
}

/// The node agent's adapters: the API server through kube-rs (rate-limited as
/// `kubeAPIQPS`/`kubeAPIBurst` say), the runtime's status over the CRI (or the simulated
/// one), the host's facts, the key and CSR maker, and the certificate folder.
pub fn node_agent_deps(
    node: &NodeConfig,
    runtime: Arc<dyn RuntimeService>,
    clock: Arc<dyn Clock>,
) -> Result<NodeAgentDeps, RuntimeError> {
    let runtime_status: Arc<dyn RuntimeStatusService> = match &node.runtime_endpoint {
        RuntimeEndpoint::Simulated => Arc::new(FakeRuntimeStatus::new()),
        RuntimeEndpoint::Cri(uri) => {
            Arc::new(CriRuntime::connect(uri, node.runtime_request_timeout)?)
        }
    };
    let defaults = ClientSettings::default();
    let (settings, cert_dir) = match &node.cluster {
        Some(cluster) => (
            ClientSettings {
                qps: cluster.kube_api_qps,
                burst: cluster.kube_api_burst,
                event_qps: cluster.event_record_qps,
                event_burst: cluster.event_burst,
                ..defaults
            },
            cluster.cert_dir.clone(),
        ),
        None => (defaults, PathBuf::from(DEFAULT_CERT_DIR)),
    };
    Ok(NodeAgentDeps {
        connector: Arc::new(KubeConnector {
            settings,
            observer: Some(Arc::new(crate::app::metrics::RestClientMetrics)),
        }),
        runtime,
        runtime_status,
        host_facts: Arc::new(SystemHostFacts),
        clock,
        pki: Arc::new(RcgenPki),
        cert_store: Arc::new(FileCertStore::new(cert_dir.clone())),
        serving_cert_store: Arc::new(FileCertStore::with_prefix(
            cert_dir,
            crate::domain::node_status::certificate::SERVER_PAIR_PREFIX,
        )),
    })
}

/// The eviction manager's ports: `/proc` and the cgroup hierarchies, statfs and `du`,
/// the runtime's usage and images over the CRI (its image service endpoint), and cgroup
/// v1 memory notifications. The simulated node observes nothing of the host.
pub fn eviction_ports(node: &NodeConfig) -> Result<EvictionPorts, RuntimeError> {
    match &node.image_service_endpoint {
        RuntimeEndpoint::Simulated => Ok(EvictionPorts {
            node: Arc::new(FakeNodeStats::new()),
            runtime: Arc::new(FakeRuntime::new()),
            notifier: Arc::new(FakeMemoryNotifier::unsupported()),
        }),
        RuntimeEndpoint::Cri(uri) => {
            // A cgroup's slower files are read once a housekeeping interval, as
            // cAdvisor's housekeeping reads them.
            let stats = ProcfsNodeStats::detect(
                Path::new("/proc"),
                Path::new(CGROUP_MOUNT_ROOT),
                node.cgroup_driver,
            )
            .with_detail_period(node.eviction.monitoring_period);
            let notifier = MemcgThresholdNotifier::new(stats.layout(), node.cgroup_driver);
            Ok(EvictionPorts {
                node: Arc::new(stats),
                runtime: Arc::new(CriRuntime::connect(uri, node.runtime_request_timeout)?),
                notifier: Arc::new(notifier),
            })
        }
    }
}
