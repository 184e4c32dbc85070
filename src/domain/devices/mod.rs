//! Device plugins (issue 36; upstream v1.26 `pkg/kubelet/cm/devicemanager`): what the
//! kubelet decides about the devices plugins announce. Pure: the app serves the
//! registration socket, keeps each plugin's `ListAndWatch` stream, makes the plugins'
//! calls and the checkpoint's file I/O through `ports::device_plugins`, and asks this
//! module every decision:
//!
//! - [`validate_registration`]: may a plugin register (version, resource name);
//! - [`DeviceManagerState`]: the devices of each resource and their health, the plugins'
//!   options and when their stream ended, which devices each pod's containers hold;
//!   capacity and allocatable (a resource whose plugin is gone past
//!   [`ENDPOINT_STOP_GRACE_PERIOD`] is removed), which devices a container takes
//!   ([`DeviceManagerState::devices_to_allocate`], [`DeviceManagerState::take`]), what a
//!   container is created with ([`DeviceManagerState::run_options`]), devices of finished
//!   pods freed;
//! - [`checkpoint`]: the `kubelet_internal_checkpoint` file, in upstream's JSON and
//!   checksum, so a restarted kubelet hands out no device twice;
//! - [`pod_resources`]: the pod resources API's `List` and `Get` answers;
//! - [`topology_hints`]: the devices' NUMA hints, the topology manager's device hint
//!   provider and its trial allocation;
//! - [`affinity`]: the devices a container takes within the topology manager's affinity;
//! - [`DeviceManagerState::planned_devices`]: a container's devices as the dry run shows
//!   them.

pub mod affinity;
pub mod checkpoint;
pub mod pod_resources;
#[cfg(test)]
mod tests;
pub mod topology_hints;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use thiserror::Error;

use crate::domain::node_status::model::ResourceList;
use crate::domain::pod::{Container, Pod};
use crate::domain::units::go_quote;
use crate::domain::units::quantity::{Format, Quantity};

/// The folder under the root directory where plugins put their sockets.
pub const DEVICE_PLUGINS_DIR: &str = "device-plugins";
/// The kubelet's registration socket in [`DEVICE_PLUGINS_DIR`].
pub const KUBELET_SOCKET: &str = "kubelet.sock";
/// The checkpoint in [`DEVICE_PLUGINS_DIR`] (upstream `kubeletDeviceManagerCheckpoint`).
pub const CHECKPOINT_FILE: &str = "kubelet_internal_checkpoint";
/// The pod resources API's folder under the root directory, and its socket.
pub const POD_RESOURCES_DIR: &str = "pod-resources";
pub const POD_RESOURCES_SOCKET: &str = "kubelet.sock";
/// The one device plugin API version served.
pub const VERSION: &str = "v1beta1";
/// A device's health when usable (`pluginapi.Healthy`).
pub const HEALTHY: &str = "Healthy";
/// How long a resource whose plugin went away stays in the Node's capacity (upstream
/// `endpointStopGracePeriod`): a restarting plugin comes back within it.
pub const ENDPOINT_STOP_GRACE_PERIOD: Duration = Duration::from_secs(5 * 60);
/// The NUMA node id a device without topology is kept under (upstream
/// `nodeWithoutTopology`).
pub const NODE_WITHOUT_TOPOLOGY: i64 = -1;

/// Why a plugin's `Register` is refused, in upstream's words (the plugin gets the text).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegistrationError {
    #[error("requested API version {} is not supported by kubelet. Supported version is [{}]", go_quote(.0), go_quote(VERSION))]
    UnsupportedVersion(String),
    #[error("the ResourceName {} is invalid", go_quote(.0))]
    InvalidResourceName(String),
}

/// Upstream's checks of a `RegisterRequest`: the API version, then an extended resource
/// name (domain-prefixed, outside `kubernetes.io/`, a qualified name).
pub fn validate_registration(version: &str, resource_name: &str) -> Result<(), RegistrationError> {
    if version != VERSION {
        return Err(RegistrationError::UnsupportedVersion(version.to_owned()));
    }
    if !crate::domain::admission::is_extended_resource_name(resource_name) {
        return Err(RegistrationError::InvalidResourceName(
            resource_name.to_owned(),
        ));
    }
    Ok(())
}

/// One device a plugin announces.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Device {
    pub id: String,
    pub healthy: bool,
    /// The NUMA nodes it is attached to; empty without topology.
    pub numa_nodes: Vec<i64>,
}

/// What a plugin asks of the kubelet (`DevicePluginOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PluginOptions {
    pub pre_start_required: bool,
    pub get_preferred_allocation_available: bool,
}

/// A device node the runtime makes in the container (`DeviceSpec`; the CRI's `Device`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceSpec {
    pub container_path: String,
    pub host_path: String,
    /// `r`, `w`, `m` (cgroup device permissions).
    pub permissions: String,
}

/// A host path a plugin wants bind-mounted into the container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceMount {
    pub container_path: String,
    pub host_path: String,
    pub read_only: bool,
}

/// A plugin's answer to `Allocate` for one container (`ContainerAllocateResponse`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerAllocateResponse {
    pub envs: BTreeMap<String, String>,
    pub mounts: Vec<DeviceMount>,
    pub devices: Vec<DeviceSpec>,
    pub annotations: BTreeMap<String, String>,
}

/// What a container is created with for its devices (upstream
/// `DeviceRunContainerOptions`): each plugin's answer merged, the first of a name or
/// container path kept.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceRunOptions {
    pub envs: Vec<(String, String)>,
    pub mounts: Vec<DeviceMount>,
    pub devices: Vec<DeviceSpec>,
    pub annotations: Vec<(String, String)>,
}

impl DeviceRunOptions {
    pub fn is_empty(&self) -> bool {
        self.envs.is_empty()
            && self.mounts.is_empty()
            && self.devices.is_empty()
            && self.annotations.is_empty()
    }
}

/// The resources of a container's limits that `wanted` keeps, with their counts.
fn limits_of(container: &Container, wanted: &dyn Fn(&str) -> bool) -> Vec<(String, usize)> {
    container
        .resources
        .limits
        .iter()
        .filter(|(name, _)| wanted(name))
        .map(|(name, q)| (name.clone(), usize::try_from(q.value()).unwrap_or(0)))
        .collect()
}

/// One resource of a container's devices as the dry run shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedDevices {
    pub resource: String,
    pub count: usize,
    /// The ids it holds; empty until a plugin's devices are allocated to it.
    pub ids: Vec<String>,
}

/// The devices one container holds of one resource, and the plugin's answer for them
/// (kept as the plugin's bytes too: the checkpoint stores those).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerDevices {
    /// Device ids by NUMA node ([`NODE_WITHOUT_TOPOLOGY`] for none).
    pub devices_per_numa: BTreeMap<i64, Vec<String>>,
    pub response: ContainerAllocateResponse,
    pub response_bytes: Vec<u8>,
}

impl ContainerDevices {
    pub fn ids(&self) -> BTreeSet<String> {
        self.devices_per_numa.values().flatten().cloned().collect()
    }
}

/// Why a container cannot have its devices, in upstream's words. Admission reports it
/// as [`UNEXPECTED_ADMISSION_ERROR`] with [`AllocateError::admission_message`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AllocateError {
    #[error(
        "pod {} container {} changed request for resource {} from {had} to {wants}",
        go_quote(pod_uid),
        go_quote(container),
        go_quote(resource)
    )]
    ChangedRequest {
        pod_uid: String,
        container: String,
        resource: String,
        had: usize,
        wants: usize,
    },
    #[error("can't allocate unregistered device {0}")]
    Unregistered(String),
    #[error("requested number of devices unavailable for {resource}. Requested: {requested}, Available: {available}")]
    Unavailable {
        resource: String,
        requested: usize,
        available: usize,
    },
    #[error(
        "unexpectedly allocated less resources than required. Requested: {required}, Got: {got}"
    )]
    LessThanRequired { required: usize, got: usize },
    #[error("unknown Device Plugin {0}")]
    UnknownPlugin(String),
    /// A plugin call failed: upstream's text around the call's error.
    #[error("{0}")]
    Plugin(String),
    #[error("no containers return in allocation response")]
    EmptyResponse,
}

/// The reason of a pod the device manager refused (upstream `ErrorReasonUnexpected`).
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";

impl AllocateError {
    /// Upstream's `unexpectedAdmissionError` message.
    pub fn admission_message(&self) -> String {
        format!("Allocate failed due to {self}, which is unexpected")
    }
}

/// What a container still needs of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocationNeed {
    /// It holds them already (a restarted container, a restarted kubelet), or asks none.
    Nothing,
    /// `reused` (an init container's devices, which the app containers after it take
    /// first, as upstream's `devicesToReuse`), and `needed` more of `available` (the
    /// plugin may say which it prefers first).
    Devices {
        reused: Vec<String>,
        available: BTreeSet<String>,
        needed: usize,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Endpoint {
    /// `None` for a resource known only from the checkpoint.
    options: Option<PluginOptions>,
    /// When its stream ended or it was read back from the checkpoint (monotonic).
    stopped_at: Option<Duration>,
}

/// Capacity and allocatable of the plugins' resources, and the resources gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceCapacity {
    /// All devices (healthy and not) by resource.
    pub capacity: BTreeMap<String, i64>,
    /// Healthy devices by resource.
    pub allocatable: BTreeMap<String, i64>,
    /// Resources removed now (their plugin gone past the grace period).
    pub removed: Vec<String>,
}

impl DeviceCapacity {
    /// Into the Node's capacity and allocatable (a removed resource reported as 0, as
    /// upstream does, so the scheduler stops placing pods for it).
    pub fn apply(&self, capacity: &mut ResourceList, allocatable: &mut ResourceList) {
        let quantity = |n: i64| Quantity::new(n, Format::DecimalSI);
        for (name, n) in &self.capacity {
            capacity.insert(name.clone(), quantity(*n));
        }
        for (name, n) in &self.allocatable {
            allocatable.insert(name.clone(), quantity(*n));
        }
        for name in &self.removed {
            capacity.insert(name.clone(), quantity(0));
            allocatable.insert(name.clone(), quantity(0));
        }
    }
}

type PodDevices = BTreeMap<String, BTreeMap<String, BTreeMap<String, ContainerDevices>>>;

/// The device manager's state; see the module documentation. Times are monotonic
/// durations from the caller's clock.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceManagerState {
    all: BTreeMap<String, BTreeMap<String, Device>>,
    healthy: BTreeMap<String, BTreeSet<String>>,
    unhealthy: BTreeMap<String, BTreeSet<String>>,
    endpoints: BTreeMap<String, Endpoint>,
    /// pod uid → container → resource → devices.
    pod_devices: PodDevices,
    /// Devices held by containers or being allocated, by resource.
    allocated: BTreeMap<String, BTreeSet<String>>,
}

impl DeviceManagerState {
    /// A registered plugin's endpoint replaces the resource's previous one.
    pub fn plugin_connected(&mut self, resource: &str, options: PluginOptions) {
        self.endpoints.insert(
            resource.to_owned(),
            Endpoint {
                options: Some(options),
                stopped_at: None,
            },
        );
    }

    /// Its stream ended: every device of the resource unhealthy, the grace period starts.
    pub fn plugin_disconnected(&mut self, resource: &str, now: Duration) {
        if let Some(healthy) = self.healthy.get_mut(resource) {
            let gone = std::mem::take(healthy);
            self.unhealthy
                .entry(resource.to_owned())
                .or_default()
                .extend(gone);
            for device in self
                .all
                .get_mut(resource)
                .into_iter()
                .flat_map(|d| d.values_mut())
            {
                device.healthy = false;
            }
        }
        if let Some(endpoint) = self.endpoints.get_mut(resource) {
            endpoint.stopped_at = Some(now);
        }
    }

    /// A `ListAndWatch` answer: the resource's whole device list.
    pub fn update_devices(&mut self, resource: &str, devices: Vec<Device>) {
        let healthy = self.healthy.entry(resource.to_owned()).or_default();
        healthy.clear();
        let unhealthy = self.unhealthy.entry(resource.to_owned()).or_default();
        unhealthy.clear();
        let all = self.all.entry(resource.to_owned()).or_default();
        all.clear();
        for device in devices {
            if device.healthy {
                healthy.insert(device.id.clone());
            } else {
                unhealthy.insert(device.id.clone());
            }
            all.insert(device.id.clone(), device);
        }
    }

    pub fn options(&self, resource: &str) -> Option<PluginOptions> {
        self.endpoints.get(resource).and_then(|e| e.options)
    }

    /// Upstream's `GetCapacity`: resources whose plugin is gone past the grace period
    /// are removed (the caller writes the checkpoint when `removed` is not empty).
    pub fn capacity(&mut self, now: Duration) -> DeviceCapacity {
        let expired = |e: Option<&Endpoint>| {
            e.is_none_or(|e| {
                e.stopped_at
                    .is_some_and(|t| now.saturating_sub(t) > ENDPOINT_STOP_GRACE_PERIOD)
            })
        };
        let gone: Vec<String> = self
            .healthy
            .keys()
            .chain(self.unhealthy.keys())
            .filter(|r| expired(self.endpoints.get(*r)))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        for resource in &gone {
            self.endpoints.remove(resource);
            self.healthy.remove(resource);
            self.unhealthy.remove(resource);
            self.all.remove(resource);
        }
        let mut out = DeviceCapacity {
            removed: gone,
            ..DeviceCapacity::default()
        };
        let count = |s: &BTreeSet<String>| i64::try_from(s.len()).unwrap_or(i64::MAX);
        for (resource, devices) in &self.healthy {
            out.capacity.insert(resource.clone(), count(devices));
            out.allocatable.insert(resource.clone(), count(devices));
        }
        for (resource, devices) in &self.unhealthy {
            *out.capacity.entry(resource.clone()).or_default() += count(devices);
        }
        out
    }

    /// Healthy devices by resource, without removing any (admission's view; only the
    /// node status's [`Self::capacity`] removes, so it reports the removal).
    pub fn allocatable(&self) -> ResourceList {
        self.healthy
            .iter()
            .map(|(r, d)| {
                let n = i64::try_from(d.len()).unwrap_or(i64::MAX);
                (r.clone(), Quantity::new(n, Format::DecimalSI))
            })
            .collect()
    }

    /// Upstream's `isDevicePluginResource`: registered, or held by a container.
    pub fn is_device_plugin_resource(&self, resource: &str) -> bool {
        self.healthy.contains_key(resource) || self.allocated.contains_key(resource)
    }

    /// Whether a pod asks for a resource of a device plugin.
    pub fn wants_devices(&self, pod: &Pod) -> bool {
        pod.spec
            .init_containers
            .iter()
            .chain(&pod.spec.containers)
            .any(|c| !self.container_requests(c).is_empty())
    }

    /// The device plugin resources a container asks for and how many (its limits:
    /// extended resources are not overcommitted, requests equal limits).
    pub fn container_requests(&self, container: &Container) -> Vec<(String, usize)> {
        limits_of(container, &|name| self.is_device_plugin_resource(name))
    }

    /// What the dry run shows of a container's devices: each extended resource it asks
    /// for (a plugin may register it once the kubelet runs), how many, and the ids it
    /// already holds here (the checkpoint's).
    pub fn planned_devices(&self, pod_uid: &str, container: &Container) -> Vec<PlannedDevices> {
        limits_of(container, &|name| {
            self.is_device_plugin_resource(name)
                || crate::domain::admission::is_extended_resource_name(name)
        })
        .into_iter()
        .map(|(resource, count)| PlannedDevices {
            ids: self
                .container_devices(pod_uid, &container.name, &resource)
                .map(|held| held.ids().into_iter().collect())
                .unwrap_or_default(),
            resource,
            count,
        })
        .collect()
    }

    /// Upstream's `UpdateAllocatedDevices`: the devices of pods no longer active are
    /// freed. Whether anything was freed (the checkpoint is then written).
    pub fn free_inactive(&mut self, active: &BTreeSet<String>) -> bool {
        let before = self.pod_devices.len();
        self.pod_devices.retain(|uid, _| active.contains(uid));
        let freed = self.pod_devices.len() != before;
        self.allocated = self.held();
        freed
    }

    /// The devices containers hold, by resource.
    fn held(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for resources in self.pod_devices.values().flat_map(BTreeMap::values) {
            for (resource, devices) in resources {
                out.entry(resource.clone())
                    .or_default()
                    .extend(devices.ids());
            }
        }
        out
    }

    /// Devices taken by [`Self::take`] but not committed are given back (a failed
    /// `Allocate`).
    pub fn release_uncommitted(&mut self) {
        self.allocated = self.held();
    }

    pub fn container_devices(
        &self,
        pod_uid: &str,
        container: &str,
        resource: &str,
    ) -> Option<&ContainerDevices> {
        self.pod_devices.get(pod_uid)?.get(container)?.get(resource)
    }

    /// Upstream's `devicesToAllocate` up to the plugin's preference: what the container
    /// still needs of `resource`: first the pod's `reusable` devices (its init
    /// containers'), then healthy devices no one holds.
    pub fn devices_to_allocate(
        &self,
        pod_uid: &str,
        container: &str,
        resource: &str,
        required: usize,
        reusable: &BTreeSet<String>,
    ) -> Result<AllocationNeed, AllocateError> {
        if let Some(held) = self.container_devices(pod_uid, container, resource) {
            let had = held.ids().len();
            if had != required {
                return Err(AllocateError::ChangedRequest {
                    pod_uid: pod_uid.to_owned(),
                    container: container.to_owned(),
                    resource: resource.to_owned(),
                    had,
                    wants: required,
                });
            }
            return Ok(AllocationNeed::Nothing);
        }
        if required == 0 {
            return Ok(AllocationNeed::Nothing);
        }
        let Some(healthy) = self.healthy.get(resource) else {
            return Err(AllocateError::Unregistered(resource.to_owned()));
        };
        let reused: Vec<String> = reusable.iter().take(required).cloned().collect();
        let required = required - reused.len();
        if required == 0 {
            return Ok(AllocationNeed::Devices {
                reused,
                available: BTreeSet::new(),
                needed: 0,
            });
        }
        let in_use = self.allocated.get(resource);
        let available: BTreeSet<String> = healthy
            .iter()
            .filter(|d| in_use.is_none_or(|u| !u.contains(*d)))
            .cloned()
            .collect();
        if available.len() < required {
            return Err(AllocateError::Unavailable {
                resource: resource.to_owned(),
                requested: required,
                available: available.len(),
            });
        }
        Ok(AllocationNeed::Devices {
            reused,
            available,
            needed: required,
        })
    }

    /// The devices chosen: `reused`, then the plugin's preferred ones (those still
    /// available), then the rest in order; marked held until committed or released.
    pub fn take(
        &mut self,
        resource: &str,
        reused: &[String],
        available: &BTreeSet<String>,
        needed: usize,
        preferred: &[String],
    ) -> Result<Vec<String>, AllocateError> {
        let in_use = self.allocated.entry(resource.to_owned()).or_default();
        let free = |d: &String| available.contains(d) && !in_use.contains(d);
        let mut chosen: Vec<String> = Vec::with_capacity(needed);
        for device in preferred.iter().chain(available.iter()) {
            if chosen.len() == needed {
                break;
            }
            if free(device) && !chosen.contains(device) {
                chosen.push(device.clone());
            }
        }
        if chosen.len() < needed {
            return Err(AllocateError::LessThanRequired {
                required: needed + reused.len(),
                got: chosen.len() + reused.len(),
            });
        }
        in_use.extend(chosen.iter().cloned());
        let mut all = reused.to_vec();
        all.append(&mut chosen);
        Ok(all)
    }

    /// The plugin's answer for the devices taken: the container holds them.
    pub fn commit(
        &mut self,
        pod_uid: &str,
        container: &str,
        resource: &str,
        ids: &[String],
        response: ContainerAllocateResponse,
        response_bytes: Vec<u8>,
    ) {
        let mut devices_per_numa: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for id in ids {
            let nodes = self
                .all
                .get(resource)
                .and_then(|d| d.get(id))
                .map(|d| d.numa_nodes.clone())
                .unwrap_or_default();
            if nodes.is_empty() {
                devices_per_numa
                    .entry(NODE_WITHOUT_TOPOLOGY)
                    .or_default()
                    .push(id.clone());
            }
            for node in nodes {
                devices_per_numa.entry(node).or_default().push(id.clone());
            }
        }
        self.pod_devices
            .entry(pod_uid.to_owned())
            .or_default()
            .entry(container.to_owned())
            .or_default()
            .insert(
                resource.to_owned(),
                ContainerDevices {
                    devices_per_numa,
                    response,
                    response_bytes,
                },
            );
        self.allocated = self.held();
    }

    /// Upstream's `deviceRunContainerOptions`: every resource's answer for the container,
    /// the first env, mount, device and annotation of a name or path kept.
    pub fn run_options(&self, pod_uid: &str, container: &str) -> DeviceRunOptions {
        let mut out = DeviceRunOptions::default();
        let Some(resources) = self.pod_devices.get(pod_uid).and_then(|p| p.get(container)) else {
            return out;
        };
        for devices in resources.values() {
            let r = &devices.response;
            for (k, v) in &r.envs {
                if !out.envs.iter().any(|(name, _)| name == k) {
                    out.envs.push((k.clone(), v.clone()));
                }
            }
            for m in &r.mounts {
                if !out
                    .mounts
                    .iter()
                    .any(|o| o.container_path == m.container_path)
                {
                    out.mounts.push(m.clone());
                }
            }
            for d in &r.devices {
                if !out
                    .devices
                    .iter()
                    .any(|o| o.container_path == d.container_path)
                {
                    out.devices.push(d.clone());
                }
            }
            for (k, v) in &r.annotations {
                if !out.annotations.iter().any(|(name, _)| name == k) {
                    out.annotations.push((k.clone(), v.clone()));
                }
            }
        }
        out
    }

    /// Upstream's `sanitizeNodeAllocatable`: the node's allocatable of a resource is at
    /// least what containers hold, so pods already running pass admission again after a
    /// restart while their plugin has not registered yet.
    pub fn sanitize_allocatable(&self, allocatable: &mut ResourceList) {
        for (resource, devices) in &self.allocated {
            let held = i64::try_from(devices.len()).unwrap_or(i64::MAX);
            let enough = allocatable.get(resource).is_some_and(|q| q.value() >= held);
            if !enough {
                allocatable.insert(resource.clone(), Quantity::new(held, Format::DecimalSI));
            }
        }
    }

    /// Every known device by resource (the pod resources API's allocatable devices).
    pub fn all_devices(&self) -> &BTreeMap<String, BTreeMap<String, Device>> {
        &self.all
    }

    /// The devices a container holds, by resource: ids and their NUMA nodes.
    pub fn devices_of(&self, pod_uid: &str, container: &str) -> Vec<(String, &ContainerDevices)> {
        self.pod_devices
            .get(pod_uid)
            .and_then(|p| p.get(container))
            .into_iter()
            .flatten()
            .map(|(r, d)| (r.clone(), d))
            .collect()
    }

    /// The pods holding devices.
    pub fn pods(&self) -> BTreeSet<String> {
        self.pod_devices.keys().cloned().collect()
    }
}
