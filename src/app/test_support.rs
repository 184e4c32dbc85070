//! What the app's unit tests share: a configuration resolved from a command line on the
//! fake host and machine, and the fake world start-up sees.

use std::sync::Arc;

use crate::adapters::fake::runtime::FakeRuntime;
use crate::adapters::fake::{FakeCgroupManager, FakeClock, FakeHost, FakeMachine};
use crate::app::bootstrap::{load_configuration, Deps, StartupError};
use crate::app::cli;
use crate::domain::cgroup::CgroupVersion;
use crate::domain::config::ResolvedConfig;
use crate::ports::cgroup::CgroupManager;
use crate::ports::runtime::{ImageService, RuntimeService};

/// The fake world: `host`'s hostname and the fake machine (2 CPUs, 4 GiB), a fresh
/// simulated runtime per client, in-memory cgroups, no pod source, a fake clock at 0.
pub fn deps(host: &Arc<FakeHost>) -> Deps {
    Deps {
        // The start-up tests serve no kubelet API (no port 10250 in unit tests).
        kubelet_api_for: Box::new(|_| None),
        host: host.clone(),
        machine: Arc::new(FakeMachine::default()),
        runtime_for: Box::new(|_, _| Ok(Arc::new(FakeRuntime::new()) as Arc<dyn RuntimeService>)),
        images_for: Box::new(|_, _| Ok(Arc::new(FakeRuntime::new()) as Arc<dyn ImageService>)),
        cgroups_for: Box::new(|driver, _, _| {
            let cgroups: Arc<dyn CgroupManager> = Arc::new(FakeCgroupManager::new(driver));
            Box::pin(std::future::ready(Ok(cgroups)))
        }),
        sources_for: Box::new(|_, _| Ok(Vec::new())),
        // The app's unit tests run standalone; the node agent has its own (app/node/tests.rs).
        node_agent_for: Box::new(|_, _, _| {
            Err(crate::ports::runtime::RuntimeError::Unimplemented(
                "the node agent in the start-up tests".into(),
            ))
        }),
        eviction_for: Box::new(|_| {
            Ok(crate::app::eviction::EvictionPorts {
                node: Arc::new(crate::adapters::fake::FakeNodeStats::new()),
                runtime: Arc::new(FakeRuntime::new()),
                notifier: Arc::new(crate::adapters::fake::FakeMemoryNotifier::unsupported()),
            })
        }),
        cgroup_version: Box::new(|| CgroupVersion::V1),
        clock: Arc::new(FakeClock::new(0)),
        prober: Arc::new(crate::ports::prober::NoProber),
        host_facts: Arc::new(crate::adapters::fake::FakeHostFacts::default()),
        pod_files: Arc::new(crate::adapters::fake::FakePodFiles::default()),
        container_logs: Arc::new(crate::adapters::fake::FakeContainerLogs::new()),
        csi_plugins: Arc::new(crate::adapters::fake::FakeCsiPlugins::default()),
        device_plugins: Arc::new(crate::adapters::fake::FakeDevicePlugins::default()),
    }
}

/// `rkubelet --container-runtime-endpoint=fake:// <args>` resolved on the fake node
/// (hostname `fake-node`).
pub fn try_resolved(args: &[&str]) -> Result<ResolvedConfig, StartupError> {
    resolved_on(&Arc::new(FakeHost::new()), args)
}

/// [`try_resolved`] on `host`.
pub fn resolved_on(host: &Arc<FakeHost>, args: &[&str]) -> Result<ResolvedConfig, StartupError> {
    let mut argv = vec!["rkubelet", "--container-runtime-endpoint=fake://"];
    argv.extend_from_slice(args);
    let given = cli::parse(argv).map_err(|e| StartupError::Invalid(vec![e.to_string()]))?;
    load_configuration(given, &deps(host))
}

/// [`try_resolved`] for a command line the test knows is valid.
pub fn resolved(args: &[&str]) -> ResolvedConfig {
    try_resolved(args).unwrap_or_else(|e| panic!("configuration {args:?}: {e}"))
}
