//! The composition root: the only place that picks concrete adapters.

use std::sync::Arc;
use std::time::Duration;

use std::path::Path;

use crate::adapters::cgroupfs::CgroupfsManager;
use crate::adapters::cri::CriRuntime;
use crate::adapters::fake::runtime::FakeRuntime;
use crate::adapters::fake::FakeCgroupManager;
use crate::adapters::procfs::{MachinePaths, ProcfsMachineInfo};
use crate::adapters::system::{SystemClock, SystemHost};
use crate::adapters::systemd::SystemdManager;
use crate::app::bootstrap::Deps;
use crate::domain::cgroup::{CgroupDriver, WeightCurve};
use crate::domain::config::ResolvedConfig;
use crate::ports::cgroup::{CgroupError, CgroupManager};
use crate::ports::runtime::{ImageService, RuntimeError, RuntimeService};

/// The default `--runtime-request-timeout`.
pub const DEFAULT_RUNTIME_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The runtime client for an endpoint with the default request timeout.
pub fn runtime_for(endpoint: &str) -> Result<Arc<dyn RuntimeService>, RuntimeError> {
    runtime_with_timeout(endpoint, DEFAULT_RUNTIME_REQUEST_TIMEOUT)
}

/// The runtime and image service clients of one endpoint.
type CriClients = (Arc<dyn RuntimeService>, Arc<dyn ImageService>);

/// The runtime and image service behind one endpoint, one client for both: `fake://`
/// is the embedded simulated runtime, `unix://` a CRI client whose every call is
/// bounded by `timeout`.
fn clients_for(endpoint: &str, timeout: Duration) -> Result<CriClients, RuntimeError> {
    if endpoint.starts_with("fake://") {
        let fake = Arc::new(FakeRuntime::new());
        return Ok((fake.clone(), fake));
    }
    if endpoint.starts_with("unix://") {
        let cri = Arc::new(CriRuntime::connect(endpoint, timeout)?);
        return Ok((cri.clone(), cri));
    }
    Err(RuntimeError::Unavailable {
        endpoint: endpoint.to_string(),
        reason: "no CRI client is built into this version for this endpoint".into(),
    })
}

/// The runtime client for an endpoint (see [`clients_for`]).
pub fn runtime_with_timeout(
    endpoint: &str,
    timeout: Duration,
) -> Result<Arc<dyn RuntimeService>, RuntimeError> {
    clients_for(endpoint, timeout).map(|(runtime, _)| runtime)
}

/// The image service client for an endpoint (`--image-service-endpoint`, or the
/// runtime's when empty; see [`clients_for`]).
pub fn image_service_with_timeout(
    endpoint: &str,
    timeout: Duration,
) -> Result<Arc<dyn ImageService>, RuntimeError> {
    clients_for(endpoint, timeout).map(|(_, images)| images)
}

fn request_timeout(resolved: &ResolvedConfig) -> Duration {
    resolved
        .config
        .runtime_request_timeout
        .to_std()
        .filter(|d| !d.is_zero())
        .unwrap_or(DEFAULT_RUNTIME_REQUEST_TIMEOUT)
}

/// The cgroup manager for a driver: the kernel's cgroup filesystem or systemd over
/// D-Bus; the simulated node (`fake://`) gets an in-memory tree so it touches no cgroup.
pub async fn cgroup_manager_for(
    driver: CgroupDriver,
    curve: WeightCurve,
    simulated: bool,
) -> Result<Arc<dyn CgroupManager>, CgroupError> {
    if simulated {
        return Ok(Arc::new(FakeCgroupManager::new(driver)));
    }
    match driver {
        CgroupDriver::Cgroupfs => Ok(Arc::new(CgroupfsManager::detect(Path::new(
            CGROUP_MOUNT_ROOT,
        ))?)),
        // The system bus, or DBUS_SYSTEM_BUS_ADDRESS where set (tests point it at a
        // private manager).
        CgroupDriver::Systemd => Ok(Arc::new(
            SystemdManager::connect(None)
                .await?
                .with_weight_curve(curve),
        )),
    }
}

/// Where the cgroup hierarchies are mounted.
const CGROUP_MOUNT_ROOT: &str = "/sys/fs/cgroup";

/// The adapters of a real node.
pub fn production_deps(resolved: &ResolvedConfig) -> Deps {
    Deps {
        host: Arc::new(SystemHost::from_env()),
        machine: Arc::new(ProcfsMachineInfo::new(MachinePaths::host(
            resolved.options.root_dir.clone(),
        ))),
        runtime_for: {
            let timeout = request_timeout(resolved);
            Box::new(move |endpoint: &str| runtime_with_timeout(endpoint, timeout))
        },
        images_for: {
            let timeout = request_timeout(resolved);
            Box::new(move |endpoint: &str| image_service_with_timeout(endpoint, timeout))
        },
        cgroups_for: Box::new(|driver, endpoint, curve| {
            let simulated = endpoint.starts_with("fake://");
            Box::pin(cgroup_manager_for(driver, curve, simulated))
        }),
        clock: Arc::new(SystemClock::new()),
    }
}

/// The single-threaded tokio runtime the binaries run on; `None` (reported on
/// stderr) when it cannot start.
pub fn async_runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            eprintln!("failed to start the async runtime: {e}");
            None
        }
    }
}

/// Install the SIGTERM/SIGINT handlers now (so a signal that arrives during start-up
/// is not fatal) and return a future that resolves on the first of them. Must be
/// called inside the tokio runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
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

/// The adapters of the node agent (connected mode): kube-rs with `kubeAPIQPS` and
/// `kubeAPIBurst`, the runtime's status over the CRI (the simulated runtime is always
/// ready), the host's facts, rcgen for keys and `--cert-dir` on disk.
pub fn node_agent_deps(
    resolved: &ResolvedConfig,
    runtime: Arc<dyn RuntimeService>,
    clock: Arc<dyn crate::ports::clock::Clock>,
) -> Result<crate::app::node::NodeAgentDeps, RuntimeError> {
    use crate::adapters::apiserver::{ClientSettings, KubeConnector};
    use crate::ports::runtime_status::RuntimeStatusService;
    let endpoint = resolved.config.container_runtime_endpoint.as_str();
    let runtime_status: Arc<dyn RuntimeStatusService> = if endpoint.starts_with("fake://") {
        Arc::new(crate::adapters::fake::FakeRuntimeStatus::new())
    } else {
        Arc::new(CriRuntime::connect(endpoint, request_timeout(resolved))?)
    };
    let defaults = ClientSettings::default();
    let settings = ClientSettings {
        qps: resolved.config.kube_api_qps.map_or(defaults.qps, f64::from),
        burst: resolved
            .config
            .kube_api_burst
            .and_then(|b| u32::try_from(b).ok())
            .unwrap_or(defaults.burst),
        ..defaults
    };
    Ok(crate::app::node::NodeAgentDeps {
        connector: Arc::new(KubeConnector { settings }),
        runtime,
        runtime_status,
        host_facts: Arc::new(crate::adapters::system::SystemHostFacts),
        clock,
        pki: Arc::new(crate::adapters::pki::RcgenPki),
        cert_store: Arc::new(crate::adapters::system::FileCertStore::new(
            crate::app::node::startup::cert_dir(resolved),
        )),
    })
}
