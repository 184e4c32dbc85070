//! The device manager's checkpoint, `<root-dir>/device-plugins/kubelet_internal_checkpoint`,
//! as upstream v1.26 writes it (`devicemanager/checkpoint`):
//! `{"Data":{"PodDeviceEntries":[{"PodUID","ContainerName","ResourceName","DeviceIDs":
//! {"<numa>":[ids]},"AllocResp":"<base64 of the plugin's ContainerAllocateResponse>"}],
//! "RegisteredDevices":{"<resource>":[ids]}},"Checksum":N}`. The checksum is FNV-32a over
//! go-spew's `%#v` of `Data` (upstream `checksum.New`), the CPU manager's algorithm
//! ([`crate::domain::upstream::container_hash::fnv32a`]). A v1 file (before v1.20:
//! `DeviceIDs` a plain list) is read too, its devices under NUMA node 0 as upstream does.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ContainerAllocateResponse, ContainerDevices, DeviceManagerState, Endpoint};
use crate::domain::upstream::container_hash::fnv32a;

/// One container's devices of one resource (`PodDevicesEntry`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodDevicesEntry {
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    #[serde(rename = "ContainerName")]
    pub container_name: String,
    #[serde(rename = "ResourceName")]
    pub resource_name: String,
    #[serde(rename = "DeviceIDs")]
    pub device_ids: Option<BTreeMap<i64, Option<Vec<String>>>>,
    #[serde(rename = "AllocResp", with = "go_bytes")]
    pub alloc_resp: Option<Vec<u8>>,
}

/// `checkpointData`: `None` where Go holds a nil slice or map (JSON `null`, spew
/// `<nil>`), which the checksum tells from an empty one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointData {
    #[serde(rename = "PodDeviceEntries")]
    pub pod_device_entries: Option<Vec<PodDevicesEntry>>,
    #[serde(rename = "RegisteredDevices")]
    pub registered_devices: Option<BTreeMap<String, Option<Vec<String>>>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCheckpoint {
    #[serde(rename = "Data")]
    pub data: CheckpointData,
    #[serde(rename = "Checksum")]
    pub checksum: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct PodDevicesEntryV1 {
    #[serde(rename = "PodUID")]
    pod_uid: String,
    #[serde(rename = "ContainerName")]
    container_name: String,
    #[serde(rename = "ResourceName")]
    resource_name: String,
    #[serde(rename = "DeviceIDs")]
    device_ids: Option<Vec<String>>,
    #[serde(rename = "AllocResp", with = "go_bytes")]
    alloc_resp: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct CheckpointDataV1 {
    #[serde(rename = "PodDeviceEntries")]
    pod_device_entries: Option<Vec<PodDevicesEntryV1>>,
    #[serde(rename = "RegisteredDevices")]
    registered_devices: Option<BTreeMap<String, Option<Vec<String>>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct DeviceCheckpointV1 {
    #[serde(rename = "Data")]
    data: CheckpointDataV1,
    #[serde(rename = "Checksum")]
    checksum: u64,
}

/// Why a checkpoint was not restored, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint is corrupted")]
    Corrupt,
    #[error("{0}")]
    Json(String),
}

/// Go's `[]byte` in JSON: base64 text, `null` for nil.
mod go_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    #[allow(clippy::ref_option)]
    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(b) => s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b)),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| {
            base64::engine::general_purpose::STANDARD
                .decode(t)
                .map_err(serde::de::Error::custom)
        })
        .transpose()
    }
}

fn spew_strings(out: &mut String, list: Option<&Vec<String>>) {
    match list {
        None => out.push_str("<nil>"),
        Some(list) => {
            let _ = write!(out, "[{}]", list.join(" "));
        }
    }
}

fn spew_bytes(out: &mut String, bytes: Option<&Vec<u8>>) {
    match bytes {
        None => out.push_str("([]uint8)<nil>"),
        Some(b) => out.push_str(&crate::domain::upstream::spew::spew_bytes(b)),
    }
}

fn spew_registered(out: &mut String, registered: Option<&BTreeMap<String, Option<Vec<String>>>>) {
    out.push_str(" RegisteredDevices:(map[string][]string)");
    match registered {
        None => out.push_str("<nil>"),
        Some(map) => {
            out.push_str("map[");
            for (i, (resource, ids)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "{resource}:");
                spew_strings(out, ids.as_ref());
            }
            out.push(']');
        }
    }
    out.push('}');
}

fn spew_entry_head(out: &mut String, pod: &str, container: &str, resource: &str) {
    let _ = write!(
        out,
        "{{PodUID:(string){pod} ContainerName:(string){container} ResourceName:(string){resource} DeviceIDs:"
    );
}

impl CheckpointData {
    /// go-spew's `%#v` of the data, what upstream hashes.
    pub fn spew(&self) -> String {
        let mut out = String::from(
            "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)",
        );
        match &self.pod_device_entries {
            None => out.push_str("<nil>"),
            Some(entries) => {
                out.push('[');
                for (i, e) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    spew_entry_head(&mut out, &e.pod_uid, &e.container_name, &e.resource_name);
                    out.push_str("(checkpoint.DevicesPerNUMA)");
                    match &e.device_ids {
                        None => out.push_str("<nil>"),
                        Some(map) => {
                            out.push_str("map[");
                            for (j, (node, ids)) in map.iter().enumerate() {
                                if j > 0 {
                                    out.push(' ');
                                }
                                let _ = write!(out, "{node}:");
                                spew_strings(&mut out, ids.as_ref());
                            }
                            out.push(']');
                        }
                    }
                    out.push_str(" AllocResp:");
                    spew_bytes(&mut out, e.alloc_resp.as_ref());
                    out.push('}');
                }
                out.push(']');
            }
        }
        spew_registered(&mut out, self.registered_devices.as_ref());
        out
    }

    pub fn checksum(&self) -> u64 {
        u64::from(fnv32a(self.spew().as_bytes()))
    }
}

impl CheckpointDataV1 {
    /// Upstream hashes a v1 file as the v2 type names with v1's `DeviceIDs` list.
    fn spew(&self) -> String {
        let mut out = String::from(
            "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)",
        );
        match &self.pod_device_entries {
            None => out.push_str("<nil>"),
            Some(entries) => {
                out.push('[');
                for (i, e) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    spew_entry_head(&mut out, &e.pod_uid, &e.container_name, &e.resource_name);
                    out.push_str("([]string)");
                    spew_strings(&mut out, e.device_ids.as_ref());
                    out.push_str(" AllocResp:");
                    spew_bytes(&mut out, e.alloc_resp.as_ref());
                    out.push('}');
                }
                out.push(']');
            }
        }
        spew_registered(&mut out, self.registered_devices.as_ref());
        out
    }
}

impl DeviceCheckpoint {
    /// The file's contents with a fresh checksum.
    pub fn marshal(&self) -> String {
        let checkpoint = DeviceCheckpoint {
            data: self.data.clone(),
            checksum: self.data.checksum(),
        };
        // Plain data: serializing it cannot fail.
        serde_json::to_string(&checkpoint).unwrap_or_default()
    }

    /// A file's contents, current or v1, its checksum verified.
    pub fn unmarshal(blob: &str) -> Result<DeviceCheckpoint, CheckpointError> {
        match serde_json::from_str::<DeviceCheckpoint>(blob) {
            Ok(cp) => {
                if cp.checksum != cp.data.checksum() {
                    return Err(CheckpointError::Corrupt);
                }
                Ok(cp)
            }
            Err(v2_error) => {
                let v1: DeviceCheckpointV1 = serde_json::from_str(blob)
                    .map_err(|_| CheckpointError::Json(v2_error.to_string()))?;
                let checksum = u64::from(fnv32a(v1.data.spew().as_bytes()));
                if v1.checksum != checksum {
                    return Err(CheckpointError::Corrupt);
                }
                let entries = v1.data.pod_device_entries.map(|entries| {
                    entries
                        .into_iter()
                        .map(|e| PodDevicesEntry {
                            pod_uid: e.pod_uid,
                            container_name: e.container_name,
                            resource_name: e.resource_name,
                            device_ids: Some(BTreeMap::from([(0, e.device_ids)])),
                            alloc_resp: e.alloc_resp,
                        })
                        .collect()
                });
                Ok(DeviceCheckpoint {
                    data: CheckpointData {
                        pod_device_entries: entries,
                        registered_devices: v1.data.registered_devices,
                    },
                    checksum: 0,
                })
            }
        }
    }
}

impl DeviceManagerState {
    /// Upstream's `writeCheckpoint`: every container's devices and the healthy devices
    /// of each resource.
    pub fn to_checkpoint(&self) -> DeviceCheckpoint {
        let entries: Vec<PodDevicesEntry> = self
            .pod_devices
            .iter()
            .flat_map(|(pod, containers)| {
                containers.iter().flat_map(move |(container, resources)| {
                    resources
                        .iter()
                        .map(move |(resource, devices)| PodDevicesEntry {
                            pod_uid: pod.clone(),
                            container_name: container.clone(),
                            resource_name: resource.clone(),
                            device_ids: Some(
                                devices
                                    .devices_per_numa
                                    .iter()
                                    .map(|(n, ids)| (*n, Some(ids.clone())))
                                    .collect(),
                            ),
                            alloc_resp: Some(devices.response_bytes.clone()),
                        })
                })
            })
            .collect();
        DeviceCheckpoint {
            data: CheckpointData {
                // Go's nil slice when no pod holds a device, as upstream writes it.
                pod_device_entries: (!entries.is_empty()).then_some(entries),
                registered_devices: Some(
                    self.healthy
                        .iter()
                        .map(|(r, ids)| (r.clone(), Some(ids.iter().cloned().collect())))
                        .collect(),
                ),
            },
            checksum: 0,
        }
    }

    /// Upstream's `readCheckpoint`: the containers' devices back, and each registered
    /// resource known with no device until its plugin registers again (its endpoint
    /// stopped `now`, so it goes after the grace period if the plugin never returns).
    /// `decode` reads a plugin's stored answer; one it cannot read gives the container
    /// its devices with an empty answer.
    pub fn restore(
        checkpoint: &DeviceCheckpoint,
        now: Duration,
        decode: &dyn Fn(&[u8]) -> Option<ContainerAllocateResponse>,
    ) -> DeviceManagerState {
        let mut state = DeviceManagerState::default();
        for e in checkpoint.data.pod_device_entries.iter().flatten() {
            let bytes = e.alloc_resp.clone().unwrap_or_default();
            let devices = ContainerDevices {
                devices_per_numa: e
                    .device_ids
                    .iter()
                    .flatten()
                    .map(|(n, ids)| (*n, ids.clone().unwrap_or_default()))
                    .collect(),
                response: decode(&bytes).unwrap_or_default(),
                response_bytes: bytes,
            };
            state
                .pod_devices
                .entry(e.pod_uid.clone())
                .or_default()
                .entry(e.container_name.clone())
                .or_default()
                .insert(e.resource_name.clone(), devices);
        }
        state.allocated = state.held();
        for resource in checkpoint
            .data
            .registered_devices
            .iter()
            .flatten()
            .map(|(r, _)| r)
        {
            state.healthy.insert(resource.clone(), Default::default());
            state.unhealthy.insert(resource.clone(), Default::default());
            state.endpoints.insert(
                resource.clone(),
                Endpoint {
                    options: None,
                    stopped_at: Some(now),
                },
            );
        }
        state
    }
}
