//! The composition root: the only place that picks concrete adapters.

use std::sync::Arc;

use crate::adapters::fake::runtime::FakeRuntime;
use crate::adapters::procfs::{MachinePaths, ProcfsMachineInfo};
use crate::adapters::system::SystemHost;
use crate::app::bootstrap::Deps;
use crate::domain::config::ResolvedConfig;
use crate::ports::runtime::{RuntimeError, RuntimeService};

/// The runtime client for an endpoint: `fake://` is the embedded simulated runtime.
pub fn runtime_for(endpoint: &str) -> Result<Arc<dyn RuntimeService>, RuntimeError> {
    if endpoint.starts_with("fake://") {
        return Ok(Arc::new(FakeRuntime));
    }
    Err(RuntimeError::Unavailable {
        endpoint: endpoint.to_string(),
        reason: "no CRI client is built into this version for this endpoint".into(),
    })
}

/// The adapters of a real node.
pub fn production_deps(resolved: &ResolvedConfig) -> Deps {
    Deps {
        host: Arc::new(SystemHost::from_env()),
        machine: Arc::new(ProcfsMachineInfo::new(MachinePaths::host(
            resolved.options.root_dir.clone(),
        ))),
        runtime_for: Box::new(runtime_for),
    }
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers only a kill stops us; say so rather than exit.
        tracing::warn!("cannot install SIGTERM/SIGINT handlers");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("received SIGTERM"),
        _ = int.recv() => tracing::info!("received SIGINT"),
    }
}
