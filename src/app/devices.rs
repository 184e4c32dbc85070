//! The device manager (upstream v1.26 `cm/devicemanager`): serves the device plugin
//! `Registration` socket and the pod resources API, keeps each registered plugin's
//! `ListAndWatch` stream, allocates devices when a pod is admitted (the domain decides
//! which), gives a container its devices when it is created, and writes the checkpoint
//! after every change. Every decision is `domain::devices`'; every call and file goes
//! through `ports::device_plugins`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tracing::{error, info, warn};

use crate::domain::admission::Rejection;
use crate::domain::devices::checkpoint::DeviceCheckpoint;
use crate::domain::devices::pod_resources;
use crate::domain::devices::{
    validate_registration, AllocateError, DeviceCapacity, DeviceManagerState, DeviceRunOptions,
    CHECKPOINT_FILE, DEVICE_PLUGINS_DIR, KUBELET_SOCKET, POD_RESOURCES_DIR, POD_RESOURCES_SOCKET,
    UNEXPECTED_ADMISSION_ERROR,
};
use crate::domain::node_status::model::ResourceList;
use crate::domain::pod::{log_ref, Container, Pod};
use crate::domain::resource_managers::topology_manager::TopologyHint;
use crate::ports::clock::Clock;
use crate::ports::device_plugins::{
    DevicePluginClient, DevicePluginError, DevicePlugins, GetPodResourcesError, PodResources,
    PodResourcesProvider, RegisterRequest, RegistrationHandler, ResourceDevices,
};
use crate::ports::error::Chain;

pub use crate::domain::devices::pod_resources::ActivePod;

struct Connected {
    generation: u64,
    client: Arc<dyn DevicePluginClient>,
}

pub struct DeviceManager {
    dir: PathBuf,
    pod_resources_socket: PathBuf,
    plugins: Arc<dyn DevicePlugins>,
    clock: Arc<dyn Clock>,
    state: Mutex<DeviceManagerState>,
    clients: Mutex<BTreeMap<String, Connected>>,
    generation: AtomicU64,
    active: Mutex<Vec<ActivePod>>,
    /// The static CPU manager, whose exclusive CPUs the pod resources API reports.
    cpus: std::sync::OnceLock<Arc<crate::app::cpu_manager::CpuManager>>,
    /// The `KubeletPodResourcesGet` gate: whether the pod resources API answers `Get`.
    pod_resources_get: bool,
    /// Told when a resource's devices change (the node status loop reports them).
    pub changed: Notify,
}

impl std::fmt::Debug for DeviceManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceManager")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn refused(e: &AllocateError) -> Rejection {
    Rejection {
        reason: UNEXPECTED_ADMISSION_ERROR.into(),
        message: e.admission_message(),
    }
}

impl DeviceManager {
    pub fn new(root_dir: &Path, plugins: Arc<dyn DevicePlugins>, clock: Arc<dyn Clock>) -> Self {
        DeviceManager {
            dir: root_dir.join(DEVICE_PLUGINS_DIR),
            pod_resources_socket: root_dir.join(POD_RESOURCES_DIR).join(POD_RESOURCES_SOCKET),
            plugins,
            clock,
            state: Mutex::new(DeviceManagerState::default()),
            clients: Mutex::new(BTreeMap::new()),
            generation: AtomicU64::new(0),
            active: Mutex::new(Vec::new()),
            cpus: std::sync::OnceLock::new(),
            pod_resources_get: false,
            changed: Notify::new(),
        }
    }

    /// With the pod resources API's `Get` answered (the `KubeletPodResourcesGet` gate).
    #[must_use]
    pub fn with_pod_resources_get(mut self, enabled: bool) -> Self {
        self.pod_resources_get = enabled;
        self
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.clock.monotonic_nanos())
    }

    fn checkpoint_path(&self) -> PathBuf {
        self.dir.join(CHECKPOINT_FILE)
    }

    /// Upstream's `Start`: stale sockets removed, the checkpoint read back, then the
    /// registration socket and the pod resources socket served.
    ///
    /// # Errors
    /// The folder cannot be made or a socket listened on.
    pub async fn start(self: &Arc<Self>) -> Result<(), DevicePluginError> {
        let checkpoint = self.checkpoint_path();
        self.plugins.prepare_dir(&self.dir, &checkpoint)?;
        match self.plugins.read_checkpoint(&checkpoint) {
            Ok(None) => {}
            Ok(Some(text)) => match DeviceCheckpoint::unmarshal(&text) {
                Ok(cp) => {
                    let plugins = Arc::clone(&self.plugins);
                    let restored = DeviceManagerState::restore(&cp, self.now(), &move |b| {
                        plugins.decode_response(b)
                    });
                    info!(
                        pods = restored.pods().len(),
                        "Read device allocations from the checkpoint"
                    );
                    *lock(&self.state) = restored;
                }
                Err(e) => {
                    warn!(err = %e, "Continue after failing to read checkpoint file. Device allocation info may NOT be up-to-date")
                }
            },
            Err(e) => {
                warn!(err = %Chain(&e), "Continue after failing to read checkpoint file. Device allocation info may NOT be up-to-date")
            }
        }
        let handler: Arc<dyn RegistrationHandler> = Arc::new(Arc::clone(self));
        self.plugins
            .serve_registration(&self.dir.join(KUBELET_SOCKET), handler)
            .await?;
        let provider: Arc<dyn PodResourcesProvider> = Arc::new(Arc::clone(self));
        self.plugins
            .serve_pod_resources(&self.pod_resources_socket, provider)
            .await?;
        info!(socket = %self.dir.join(KUBELET_SOCKET).display(), "Serving device plugin registration server");
        Ok(())
    }

    fn write_checkpoint(&self, state: &DeviceManagerState) {
        let text = state.to_checkpoint().marshal();
        if let Err(e) = self
            .plugins
            .write_checkpoint(&self.checkpoint_path(), &text)
        {
            error!(err = %Chain(&e), "Failed to write checkpoint file");
        }
    }

    /// The CPU manager whose exclusive CPUs the pod resources API lists (set once, at
    /// start-up).
    pub fn set_cpu_manager(&self, cpus: Arc<crate::app::cpu_manager::CpuManager>) {
        if self.cpus.set(cpus).is_err() {
            warn!("the CPU manager was given to the device manager twice; the first is kept");
        }
    }

    /// The pods the pod loop runs now (the pod resources API lists them).
    pub fn set_active_pods(&self, pods: Vec<ActivePod>) {
        *lock(&self.active) = pods;
    }

    /// Upstream's `GetCapacity`, the checkpoint written when a resource went.
    pub fn capacity(&self) -> DeviceCapacity {
        let mut state = lock(&self.state);
        let capacity = state.capacity(self.now());
        if !capacity.removed.is_empty() {
            info!(resources = ?capacity.removed, "Device plugin resources removed after the grace period");
            self.write_checkpoint(&state);
        }
        capacity
    }

    /// The node's allocatable for admission: the plugins' healthy devices, at least what
    /// containers hold (upstream's `sanitizeNodeAllocatable`).
    pub fn admission_allocatable(&self, allocatable: &mut ResourceList) {
        let state = lock(&self.state);
        allocatable.extend(state.allocatable());
        state.sanitize_allocatable(allocatable);
    }

    /// Upstream's resource allocator admission: every container of a pod asking for a
    /// plugin's resource gets its devices (init containers first), within the affinity
    /// the topology manager chose for it (`affinities`, by container name; none: no
    /// preference), or the pod is refused with `UnexpectedAdmissionError`. Devices of
    /// pods not in `active` (nor this one) are freed first; `None` while the pod sources
    /// have not all spoken.
    pub async fn allocate_pod_within(
        &self,
        pod: &Pod,
        active: Option<&BTreeSet<String>>,
        affinities: &BTreeMap<String, TopologyHint>,
    ) -> Result<(), Rejection> {
        if !self.wants_devices(pod) {
            return Ok(());
        }
        if let Some(active) = active {
            self.free_inactive(active, Some(&pod.metadata.uid));
        }
        let uid = &pod.metadata.uid;
        for container in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
            // Upstream's `devicesToReuse`: an init container's devices go to the
            // containers after it (init containers run before them, one at a time).
            let reusable = lock(&self.state).reusable_for(pod);
            self.allocate_container(uid, container, &reusable, affinities.get(&container.name))
                .await
                .map_err(|e| refused(&e))?;
        }
        Ok(())
    }

    /// [`DeviceManager::allocate_pod_within`] without a topology manager: no container
    /// has a preference.
    pub async fn allocate_pod(
        &self,
        pod: &Pod,
        active: Option<&BTreeSet<String>>,
    ) -> Result<(), Rejection> {
        self.allocate_pod_within(pod, active, &BTreeMap::new())
            .await
    }

    /// Whether any container of the pod asks for a plugin's resource.
    pub fn wants_devices(&self, pod: &Pod) -> bool {
        lock(&self.state).wants_devices(pod)
    }

    /// The device manager's state as it is now (the topology manager reads its hints).
    pub fn state_snapshot(&self) -> DeviceManagerState {
        lock(&self.state).clone()
    }

    /// Devices of pods neither in `active` nor `admitting` are freed.
    pub fn free_inactive(&self, active: &BTreeSet<String>, admitting: Option<&str>) {
        let mut keep = active.clone();
        keep.extend(admitting.map(str::to_owned));
        let mut state = lock(&self.state);
        if state.free_inactive(&keep) {
            self.write_checkpoint(&state);
        }
    }

    fn client(&self, resource: &str) -> Option<Arc<dyn DevicePluginClient>> {
        lock(&self.clients)
            .get(resource)
            .map(|c| Arc::clone(&c.client))
    }

    async fn allocate_container(
        &self,
        pod_uid: &str,
        container: &Container,
        reusable: &BTreeMap<String, BTreeSet<String>>,
        affinity: Option<&TopologyHint>,
    ) -> Result<(), AllocateError> {
        let requests = lock(&self.state).container_requests(container);
        for (resource, required) in requests {
            let (step, wants_preference) = {
                let state = lock(&self.state);
                let step = state.allocation_step(
                    pod_uid,
                    &container.name,
                    &resource,
                    required,
                    reusable,
                    affinity,
                )?;
                let wants = state
                    .options(&resource)
                    .is_some_and(|o| o.get_preferred_allocation_available);
                (step, wants)
            };
            let Some(step) = step else {
                continue;
            };
            let Some(client) = self.client(&resource) else {
                return Err(AllocateError::UnknownPlugin(resource));
            };
            let question = step.preference_request().filter(|_| wants_preference);
            let preferred = match question {
                Some(question) => client
                    .preferred_allocation(question.offered, question.must_include, required)
                    .await
                    .map_err(|e| {
                        AllocateError::Plugin(format!(
                            "device plugin GetPreferredAllocation rpc failed with err: {}",
                            Chain(&e)
                        ))
                    })?,
                None => Vec::new(),
            };
            let ids = step.take(&mut lock(&self.state), &resource, &preferred)?;
            let answer = client.allocate(ids.clone()).await;
            let mut state = lock(&self.state);
            match answer {
                Ok(Some((response, bytes))) => {
                    info!(pod_uid, container = %container.name, %resource, devices = ?ids, "Allocated devices");
                    state.commit(pod_uid, &container.name, &resource, &ids, response, bytes);
                    self.write_checkpoint(&state);
                }
                Ok(None) => {
                    state.release_uncommitted();
                    return Err(AllocateError::EmptyResponse);
                }
                Err(e) => {
                    state.release_uncommitted();
                    return Err(AllocateError::Plugin(Chain(&e).to_string()));
                }
            }
        }
        Ok(())
    }

    /// Upstream's `GetDeviceRunContainerOptions`: `PreStartContainer` where the plugin
    /// asks for it, devices allocated again if the container has none yet (a restart
    /// raced its admission), then what the container is created with.
    ///
    /// # Errors
    /// Upstream's message of the failed step.
    pub async fn run_options(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Result<DeviceRunOptions, String> {
        let uid = &pod.metadata.uid;
        let requests = lock(&self.state).container_requests(container);
        if requests.is_empty() {
            return Ok(DeviceRunOptions::default());
        }
        let mut missing = false;
        for (resource, required) in &requests {
            if *required == 0 {
                continue;
            }
            let (pre_start, held) = {
                let state = lock(&self.state);
                (
                    state
                        .options(resource)
                        .is_some_and(|o| o.pre_start_required),
                    state
                        .container_devices(uid, &container.name, resource)
                        .map(|d| d.ids().into_iter().collect::<Vec<_>>()),
                )
            };
            if pre_start {
                let Some(client) = self.client(resource) else {
                    return Err(format!(
                        "endpoint not found in cache for a registered resource: {resource}"
                    ));
                };
                let Some(ids) = held.clone() else {
                    return Err(format!("no devices found allocated in local cache for pod {uid}, container {}, resource {resource}", container.name));
                };
                client.pre_start_container(ids).await.map_err(|e| {
                    format!(
                        "device plugin PreStartContainer rpc failed with err: {}",
                        Chain(&e)
                    )
                })?;
            }
            missing |= held.is_none();
        }
        if missing {
            info!(pod = %log_ref(pod), container = %container.name, "Needs to re-allocate device plugin resources for pod");
            self.allocate_container(uid, container, &BTreeMap::new(), None)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(lock(&self.state).run_options(uid, &container.name))
    }

    /// One plugin's stream, until it ends or a newer registration replaces it.
    async fn watch(
        self: Arc<Self>,
        resource: String,
        generation: u64,
        client: Arc<dyn DevicePluginClient>,
    ) {
        let current = |this: &Self| {
            lock(&this.clients)
                .get(&resource)
                .is_some_and(|c| c.generation == generation)
        };
        match client.list_and_watch().await {
            Ok(mut stream) => loop {
                match stream.next().await {
                    Ok(Some(devices)) => {
                        if !current(&self) {
                            return;
                        }
                        info!(resource = %resource, count = devices.len(), "State pushed for device plugin");
                        let mut state = lock(&self.state);
                        state.update_devices(&resource, devices);
                        self.write_checkpoint(&state);
                        drop(state);
                        self.changed.notify_one();
                    }
                    Ok(None) => {
                        warn!(resource = %resource, "ListAndWatch ended unexpectedly for device plugin");
                        break;
                    }
                    Err(e) => {
                        warn!(resource = %resource, err = %Chain(&e), "ListAndWatch ended unexpectedly for device plugin");
                        break;
                    }
                }
            },
            Err(e) => {
                warn!(resource = %resource, err = %Chain(&e), "ListAndWatch ended unexpectedly for device plugin");
            }
        }
        let mut clients = lock(&self.clients);
        if clients
            .get(&resource)
            .is_some_and(|c| c.generation == generation)
        {
            clients.remove(&resource);
            drop(clients);
            info!(resource = %resource, "Endpoint became unhealthy");
            lock(&self.state).plugin_disconnected(&resource, self.now());
            self.changed.notify_one();
        }
    }
}

#[async_trait]
impl RegistrationHandler for Arc<DeviceManager> {
    async fn register(&self, request: RegisterRequest) -> Result<(), String> {
        info!(resourceName = %request.resource_name, "Got registration request from device plugin with resource");
        if let Err(e) = validate_registration(&request.version, &request.resource_name) {
            info!(resourceName = %request.resource_name, err = %e, "Bad registration request from device plugin");
            return Err(e.to_string());
        }
        let endpoint = self.dir.join(&request.endpoint);
        let client = self.plugins.connect(&endpoint).await.map_err(|e| {
            warn!(err = %Chain(&e), "Error connecting to device plugin client");
            Chain(&e).to_string()
        })?;
        let options = client
            .options()
            .await
            .map_err(|e| format!("failed to get device plugin options: {}", Chain(&e)))?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        lock(&self.clients).insert(
            request.resource_name.clone(),
            Connected {
                generation,
                client: Arc::clone(&client),
            },
        );
        lock(&self.state).plugin_connected(&request.resource_name, options);
        info!(resource = %request.resource_name, endpoint = %endpoint.display(), "Registered device plugin");
        tokio::spawn(Arc::clone(self).watch(request.resource_name, generation, client));
        Ok(())
    }
}

impl DeviceManager {
    /// The container's exclusive CPUs, empty without the static CPU manager.
    fn exclusive_cpus(&self, pod_uid: &str, container: &str) -> Vec<i64> {
        self.cpus
            .get()
            .map(|cpus| cpus.exclusive_cpus(pod_uid, container))
            .unwrap_or_default()
    }
}

impl PodResourcesProvider for Arc<DeviceManager> {
    fn list(&self) -> Vec<PodResources> {
        let active = lock(&self.active).clone();
        let state = lock(&self.state);
        pod_resources::list(&active, &state, &|uid, c| self.exclusive_cpus(uid, c))
    }

    fn get(&self, namespace: &str, name: &str) -> Result<PodResources, GetPodResourcesError> {
        let active = lock(&self.active).clone();
        let state = lock(&self.state);
        pod_resources::get(
            self.pod_resources_get,
            &active,
            namespace,
            name,
            &state,
            &|uid, c| self.exclusive_cpus(uid, c),
        )
    }

    fn allocatable(&self) -> (Vec<ResourceDevices>, Vec<i64>) {
        let state = lock(&self.state);
        let devices = state
            .all_devices()
            .iter()
            .flat_map(|(resource, devices)| {
                devices.values().map(move |d| ResourceDevices {
                    resource_name: resource.clone(),
                    device_ids: vec![d.id.clone()],
                    numa_nodes: pod_resources::numa_nodes(d.numa_nodes.iter().copied()),
                })
            })
            .collect();
        let cpus = self
            .cpus
            .get()
            .map(|cpus| cpus.allocatable_cpus())
            .unwrap_or_default();
        (devices, cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::{FakeClock, FakeDevicePlugins, FakePlugin};
    use crate::domain::devices::{ContainerAllocateResponse, Device, DeviceSpec, PluginOptions};
    use crate::domain::units::quantity::{Format, Quantity};

    const R: &str = "example.com/resource";

    fn pod(uid: &str, count: i64) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.uid = uid.into();
        pod.metadata.name = format!("pod-{uid}");
        pod.metadata.namespace = "default".into();
        let mut c = Container {
            name: "app".into(),
            ..Container::default()
        };
        c.resources
            .limits
            .insert(R.into(), Quantity::new(count, Format::DecimalSI));
        pod.spec.containers.push(c);
        pod
    }

    async fn manager(
        options: PluginOptions,
        preferred: &[&str],
    ) -> (Arc<DeviceManager>, FakeDevicePlugins) {
        let fake = FakeDevicePlugins::default();
        let root = Path::new("/root-dir");
        fake.add_plugin(
            &root.join("device-plugins/p.sock"),
            FakePlugin {
                devices: ["Dev-1", "Dev-2", "Dev-3"]
                    .iter()
                    .map(|id| Device {
                        id: (*id).into(),
                        healthy: true,
                        numa_nodes: Vec::new(),
                    })
                    .collect(),
                options,
                response: ContainerAllocateResponse {
                    envs: [("GPU".to_owned(), "yes".to_owned())].into(),
                    devices: vec![DeviceSpec {
                        container_path: "/dev/x".into(),
                        host_path: "/dev/null".into(),
                        permissions: "rw".into(),
                    }],
                    ..Default::default()
                },
                preferred: preferred.iter().map(|s| (*s).to_owned()).collect(),
            },
        );
        let m = Arc::new(DeviceManager::new(
            root,
            Arc::new(fake.clone()),
            Arc::new(FakeClock::new(0)),
        ));
        m.start().await.unwrap_or_else(|e| panic!("start: {e}"));
        let request = |version: &str, name: &str| RegisterRequest {
            version: version.into(),
            endpoint: "p.sock".into(),
            resource_name: name.into(),
            options,
        };
        assert_eq!(
            RegistrationHandler::register(&m, request("v1alpha", R)).await,
            Err(r#"requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]"#.into())
        );
        assert_eq!(
            RegistrationHandler::register(&m, request("v1beta1", "gpu")).await,
            Err(r#"the ResourceName "gpu" is invalid"#.into())
        );
        assert_eq!(
            RegistrationHandler::register(&m, request("v1beta1", R)).await,
            Ok(())
        );
        // The stream's first list arrives on its task.
        for _ in 0..100 {
            if m.capacity().allocatable.get(R) == Some(&3) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(m.capacity().allocatable.get(R), Some(&3));
        (m, fake)
    }

    #[tokio::test]
    async fn admission_allocates_asks_the_plugins_preference_and_refuses_when_none_is_left() {
        let options = PluginOptions {
            pre_start_required: true,
            get_preferred_allocation_available: true,
        };
        let (m, fake) = manager(options, &["Dev-3"]).await;
        let a = pod("a", 2);
        let active = BTreeSet::new();
        assert_eq!(m.allocate_pod(&a, Some(&active)).await, Ok(()));
        let run = m.run_options(&a, &a.spec.containers[0]).await;
        let run = run.unwrap_or_default();
        assert_eq!(run.envs, vec![("GPU".to_owned(), "yes".to_owned())]);
        assert_eq!(run.devices.len(), 1);
        assert_eq!(
            fake.calls(),
            vec![
                "GetPreferredAllocation 2".to_owned(),
                "Allocate Dev-3,Dev-1".to_owned(),
                "PreStartContainer Dev-1,Dev-3".to_owned(),
            ]
        );
        let active: BTreeSet<String> = ["a".to_owned()].into();
        let refused = m.allocate_pod(&pod("b", 2), Some(&active)).await;
        assert_eq!(
            refused,
            Err(Rejection {
                reason: "UnexpectedAdmissionError".into(),
                message: "Allocate failed due to requested number of devices unavailable for example.com/resource. Requested: 2, Available: 1, which is unexpected".into(),
            })
        );
        // The checkpoint holds pod a's devices; the node's allocatable for admission
        // counts the healthy devices.
        let checkpoint = fake.checkpoint().unwrap_or_default();
        assert!(checkpoint.contains(r#""PodUID":"a""#), "{checkpoint}");
        let mut allocatable = ResourceList::new();
        m.admission_allocatable(&mut allocatable);
        assert_eq!(allocatable[R].value(), 3);
        // Pod a gone: its devices go to the next pod.
        assert_eq!(
            m.allocate_pod(&pod("b", 2), Some(&BTreeSet::new())).await,
            Ok(())
        );
    }

    #[tokio::test]
    async fn an_app_container_reuses_its_init_containers_device() {
        let (m, _) = manager(PluginOptions::default(), &[]).await;
        let mut x = pod("x", 1);
        let mut init = x.spec.containers[0].clone();
        init.name = "init".into();
        x.spec.init_containers.push(init);
        assert_eq!(m.allocate_pod(&x, None).await, Ok(()));
        // One device for the pod (the scheduler counts it so): two are left.
        assert_eq!(m.allocate_pod(&pod("y", 2), None).await, Ok(()));
        let state = lock(&m.state);
        let ids = |c: &str| {
            state
                .devices_of("x", c)
                .into_iter()
                .flat_map(|(_, d)| d.ids())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids("init"), ids("app"));
    }

    #[tokio::test]
    async fn a_restarted_manager_reads_its_checkpoint_and_lists_pod_resources() {
        let (m, fake) = manager(PluginOptions::default(), &[]).await;
        let a = pod("a", 1);
        assert_eq!(m.allocate_pod(&a, Some(&BTreeSet::new())).await, Ok(()));
        m.set_active_pods(vec![ActivePod::of(&a)]);
        let listed = PodResourcesProvider::list(&m);
        assert_eq!(listed.len(), 1);
        assert_eq!(
            listed[0].containers[0].devices[0].device_ids,
            vec!["Dev-1".to_owned()]
        );
        assert_eq!(PodResourcesProvider::allocatable(&m).0.len(), 3);
        let (ns, name) = (a.metadata.namespace.clone(), a.metadata.name.clone());
        assert_eq!(
            PodResourcesProvider::get(&m, &ns, &name),
            Err(GetPodResourcesError::Disabled),
            "Get is off without the KubeletPodResourcesGet gate"
        );
        // A new manager on the same checkpoint: pod a keeps Dev-1, the resource has no
        // device until the plugin registers again.
        let again = Arc::new(
            DeviceManager::new(
                Path::new("/root-dir"),
                Arc::new(fake.clone()),
                Arc::new(FakeClock::new(0)),
            )
            .with_pod_resources_get(true),
        );
        again.start().await.unwrap_or_else(|e| panic!("start: {e}"));
        again.set_active_pods(vec![ActivePod::of(&a)]);
        assert_eq!(
            PodResourcesProvider::get(&again, &ns, &name),
            Ok(listed[0].clone()),
            "Get answers List's entry, from the checkpoint"
        );
        assert_eq!(again.capacity().allocatable.get(R), Some(&0));
        assert_eq!(again.allocate_pod(&a, None).await, Ok(()));
        let refused = again
            .allocate_pod(&pod("b", 1), Some(&["a".to_owned()].into()))
            .await;
        assert!(refused.is_err(), "{refused:?}");
    }
}
