//! Device plugin benchmark (issue 36): admission and allocation of one device per pod
//! with a plugin of 100 devices, until all 100 are taken: the device manager's decision
//! (`domain::devices`), its checkpoint written to a real file after each allocation, and
//! the container's run options; the plugin's calls answered in memory (their time is the
//! plugin's). Goal: under 1 ms per pod (median). `RKUBELET_BENCH_RUNS` sets the runs
//! (default 5), each on a fresh manager; the median over all pods is printed.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rkubelet::adapters::device_plugins::SocketDevicePlugins;
use rkubelet::adapters::fake::{FakeClock, FakeDevicePlugins, FakePlugin};
use rkubelet::app::devices::DeviceManager;
use rkubelet::domain::devices::{ContainerAllocateResponse, Device, DeviceMount};
use rkubelet::domain::pod::{Container, Pod};
use rkubelet::domain::units::quantity::{Format, Quantity};
use rkubelet::ports::device_plugins::{
    DevicePluginClient, DevicePluginError, DevicePlugins, PodResourcesProvider, RegisterRequest,
    RegistrationHandler,
};

mod common;

use common::{below, fail};

const DEVICES: usize = 100;
const RESOURCE: &str = "example.com/resource";
const GOAL: Duration = Duration::from_millis(1);

/// The checkpoint on disk (the real adapter), the plugin in memory.
struct DiskCheckpoint {
    disk: SocketDevicePlugins,
    fake: FakeDevicePlugins,
}

#[async_trait]
impl DevicePlugins for DiskCheckpoint {
    fn prepare_dir(&self, dir: &Path, keep: &Path) -> Result<(), DevicePluginError> {
        self.disk.prepare_dir(dir, keep)
    }
    fn read_checkpoint(&self, path: &Path) -> Result<Option<String>, DevicePluginError> {
        self.disk.read_checkpoint(path)
    }
    fn write_checkpoint(&self, path: &Path, contents: &str) -> Result<(), DevicePluginError> {
        self.disk.write_checkpoint(path, contents)
    }
    async fn serve_registration(
        &self,
        socket: &Path,
        handler: Arc<dyn RegistrationHandler>,
    ) -> Result<(), DevicePluginError> {
        self.fake.serve_registration(socket, handler).await
    }
    async fn serve_pod_resources(
        &self,
        socket: &Path,
        provider: Arc<dyn PodResourcesProvider>,
    ) -> Result<(), DevicePluginError> {
        self.fake.serve_pod_resources(socket, provider).await
    }
    async fn connect(
        &self,
        endpoint: &Path,
    ) -> Result<Arc<dyn DevicePluginClient>, DevicePluginError> {
        self.fake.connect(endpoint).await
    }
    fn decode_response(&self, bytes: &[u8]) -> Option<ContainerAllocateResponse> {
        self.disk.decode_response(bytes)
    }
}

fn pod(i: usize) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = format!("dev-{i:03}");
    pod.metadata.namespace = "default".into();
    pod.metadata.uid = format!("{i:032x}");
    let mut container = Container {
        name: "app".into(),
        image: "busybox".into(),
        ..Container::default()
    };
    container
        .resources
        .limits
        .insert(RESOURCE.into(), Quantity::new(1, Format::DecimalSI));
    pod.spec.containers.push(container);
    pod
}

/// Per-pod times of one run: 100 pods, one device each.
async fn run(root: &Path) -> Vec<Duration> {
    let fake = FakeDevicePlugins::default();
    let dir = root.join("device-plugins");
    fake.add_plugin(
        &dir.join("bench.sock"),
        FakePlugin {
            devices: (0..DEVICES)
                .map(|i| Device {
                    id: format!("Dev-{i}"),
                    healthy: true,
                    numa_nodes: Vec::new(),
                })
                .collect(),
            response: ContainerAllocateResponse {
                mounts: vec![DeviceMount {
                    container_path: "/dev/bench".into(),
                    host_path: "/dev/null".into(),
                    read_only: false,
                }],
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let plugins = Arc::new(DiskCheckpoint {
        disk: SocketDevicePlugins,
        fake,
    });
    let manager = Arc::new(DeviceManager::new(
        root,
        plugins,
        Arc::new(FakeClock::new(0)),
    ));
    if manager.start().await.is_err() {
        fail("devices", "the device manager does not start");
    }
    let register = RegisterRequest {
        version: "v1beta1".into(),
        endpoint: "bench.sock".into(),
        resource_name: RESOURCE.into(),
        ..Default::default()
    };
    if RegistrationHandler::register(&manager, register)
        .await
        .is_err()
    {
        fail("devices", "the plugin does not register");
    }
    // The plugin's device list arrives on its stream.
    for _ in 0..1000 {
        if manager.capacity().allocatable.get(RESOURCE) == Some(&(DEVICES as i64)) {
            break;
        }
        tokio::task::yield_now().await;
    }
    let mut active = BTreeSet::new();
    let mut times = Vec::with_capacity(DEVICES);
    for i in 0..DEVICES {
        let pod = pod(i);
        let start = Instant::now();
        if manager.allocate_pod(&pod, Some(&active)).await.is_err() {
            fail("devices", &format!("pod {i} refused with devices free"));
        }
        let options = manager.run_options(&pod, &pod.spec.containers[0]).await;
        times.push(start.elapsed());
        if options.map(|o| o.mounts.len()) != Ok(1) {
            fail("devices", "the container has no device mount");
        }
        active.insert(pod.metadata.uid.clone());
    }
    // All taken: the next is refused.
    if manager
        .allocate_pod(&pod(DEVICES), Some(&active))
        .await
        .is_ok()
    {
        fail("devices", "a device was handed out twice");
    }
    times
}

pub fn main() {
    let runs: usize = std::env::var("RKUBELET_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        fail("devices", "no tokio runtime");
    };
    let mut times = Vec::new();
    for _ in 0..runs.max(1) {
        let Ok(root) = tempfile::tempdir() else {
            fail("devices", "no temporary folder");
        };
        times.extend(rt.block_on(run(root.path())));
    }
    times.sort();
    let median = times[times.len() / 2];
    let worst = times[times.len() - 1];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "devices: admission and allocation of 1 of {DEVICES} devices per pod in {:.1} us (median of {} pods; slowest {:.1} us; checkpoint written to disk each time; {})",
        us(median),
        times.len(),
        us(worst),
        below(us(median) / 1000.0, GOAL.as_secs_f64() * 1000.0, " ms")
    );
}
