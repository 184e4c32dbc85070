use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::checkpoint::DeviceCheckpoint;
use super::*;

const R: &str = "example.com/resource";

fn devices(ids: &[(&str, bool)]) -> Vec<Device> {
    ids.iter()
        .map(|(id, healthy)| Device {
            id: (*id).to_owned(),
            healthy: *healthy,
            numa_nodes: Vec::new(),
        })
        .collect()
}

fn registered(ids: &[&str]) -> DeviceManagerState {
    let mut s = DeviceManagerState::default();
    s.plugin_connected(R, PluginOptions::default());
    s.update_devices(
        R,
        devices(&ids.iter().map(|i| (*i, true)).collect::<Vec<_>>()),
    );
    s
}

fn allocate(s: &mut DeviceManagerState, pod: &str, n: usize) -> Result<Vec<String>, AllocateError> {
    match s.devices_to_allocate(pod, "c", R, n, &BTreeSet::new())? {
        AllocationNeed::Nothing => Ok(Vec::new()),
        AllocationNeed::Devices {
            reused,
            available,
            needed,
        } => {
            let ids = s.take(R, &reused, &available, needed, &[])?;
            let response = ContainerAllocateResponse {
                mounts: ids
                    .iter()
                    .map(|id| DeviceMount {
                        container_path: format!("/tmp/{id}"),
                        host_path: format!("/tmp/{id}"),
                        read_only: false,
                    })
                    .collect(),
                ..Default::default()
            };
            s.commit(pod, "c", R, &ids, response, vec![1, 2]);
            Ok(ids)
        }
    }
}

#[test]
fn registration_takes_v1beta1_and_an_extended_resource_name() {
    assert_eq!(validate_registration("v1beta1", R), Ok(()));
    assert_eq!(
        validate_registration("v1alpha", R).map_err(|e| e.to_string()),
        Err(r#"requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]"#.into())
    );
    for bad in [
        "cpu",
        "kubernetes.io/gpu",
        "requests.example.com/x",
        "example.com/b@d",
        "x.kubernetes.io/y",
    ] {
        assert_eq!(
            validate_registration("v1beta1", bad).map_err(|e| e.to_string()),
            Err(format!("the ResourceName \"{bad}\" is invalid")),
            "{bad}"
        );
    }
}

#[test]
fn capacity_counts_all_allocatable_the_healthy() {
    let mut s = DeviceManagerState::default();
    s.plugin_connected(R, PluginOptions::default());
    s.update_devices(R, devices(&[("Dev-1", true), ("Dev-2", false)]));
    let c = s.capacity(Duration::ZERO);
    assert_eq!(c.capacity[R], 2);
    assert_eq!(c.allocatable[R], 1);
    assert!(c.removed.is_empty());
}

#[test]
fn a_plugin_gone_leaves_its_devices_unhealthy_then_its_resource_after_the_grace_period() {
    let mut s = registered(&["Dev-1", "Dev-2"]);
    let stop = Duration::from_secs(100);
    s.plugin_disconnected(R, stop);
    let c = s.capacity(stop + ENDPOINT_STOP_GRACE_PERIOD);
    assert_eq!((c.capacity[R], c.allocatable[R]), (2, 0));
    let c = s.capacity(stop + ENDPOINT_STOP_GRACE_PERIOD + Duration::from_secs(1));
    assert_eq!(c.removed, vec![R.to_owned()]);
    assert!(c.capacity.is_empty());
    let mut capacity = ResourceList::new();
    let mut allocatable = ResourceList::new();
    c.apply(&mut capacity, &mut allocatable);
    assert_eq!(capacity[R].value(), 0);
    // A plugin registering again within the grace period keeps the resource.
    let mut s = registered(&["Dev-1"]);
    s.plugin_disconnected(R, stop);
    s.plugin_connected(R, PluginOptions::default());
    s.update_devices(R, devices(&[("Dev-1", true)]));
    let c = s.capacity(stop + ENDPOINT_STOP_GRACE_PERIOD * 2);
    assert_eq!(c.allocatable[R], 1);
}

#[test]
fn allocation_hands_out_each_device_once_and_refuses_in_upstreams_words() {
    let mut s = registered(&["Dev-1", "Dev-2"]);
    let a = allocate(&mut s, "pod-a", 1).unwrap_or_default();
    let b = allocate(&mut s, "pod-b", 1).unwrap_or_default();
    assert_eq!(a.len(), 1);
    assert_eq!(b.len(), 1);
    assert_ne!(a, b);
    let refused = allocate(&mut s, "pod-c", 1).err();
    assert_eq!(
        refused.as_ref().map(AllocateError::admission_message).as_deref(),
        Some("Allocate failed due to requested number of devices unavailable for example.com/resource. Requested: 1, Available: 0, which is unexpected")
    );
    // The same container again (a restart): nothing new, nothing taken.
    assert_eq!(allocate(&mut s, "pod-a", 1), Ok(Vec::new()));
    assert!(matches!(
        s.devices_to_allocate("pod-a", "c", R, 2, &BTreeSet::new()),
        Err(AllocateError::ChangedRequest {
            had: 1,
            wants: 2,
            ..
        })
    ));
    // A finished pod's device is free again.
    assert!(s.free_inactive(&BTreeSet::from(["pod-b".to_owned()])));
    assert_eq!(allocate(&mut s, "pod-c", 1), Ok(a));
    assert!(matches!(
        s.devices_to_allocate("p", "c", "example.com/other", 1, &BTreeSet::new()),
        Err(AllocateError::Unregistered(_))
    ));
}

#[test]
fn the_plugins_preference_comes_first_and_a_failed_allocate_gives_devices_back() {
    let mut s = registered(&["Dev-1", "Dev-2", "Dev-3"]);
    let AllocationNeed::Devices {
        reused,
        available,
        needed,
    } = s
        .devices_to_allocate("p", "c", R, 2, &BTreeSet::new())
        .unwrap_or(AllocationNeed::Nothing)
    else {
        panic!("devices needed");
    };
    let ids = s
        .take(
            R,
            &reused,
            &available,
            needed,
            &["Dev-3".into(), "Dev-9".into()],
        )
        .unwrap_or_default();
    assert_eq!(ids, vec!["Dev-3".to_owned(), "Dev-1".to_owned()]);
    // Not committed: the next request sees one device left until they are released.
    assert!(matches!(
        s.devices_to_allocate("q", "c", R, 2, &BTreeSet::new()),
        Err(AllocateError::Unavailable { available: 1, .. })
    ));
    s.release_uncommitted();
    assert!(s
        .devices_to_allocate("q", "c", R, 3, &BTreeSet::new())
        .is_ok());
}

#[test]
fn run_options_merge_every_resource_first_wins() {
    let mut s = registered(&["Dev-1"]);
    s.plugin_connected("example.com/other", PluginOptions::default());
    s.update_devices("example.com/other", devices(&[("O-1", true)]));
    let resp = |env: &str, path: &str| ContainerAllocateResponse {
        envs: BTreeMap::from([("SHARED".to_owned(), env.to_owned())]),
        devices: vec![DeviceSpec {
            container_path: path.into(),
            host_path: path.into(),
            permissions: "rw".into(),
        }],
        ..Default::default()
    };
    s.commit(
        "p",
        "c",
        "example.com/other",
        &["O-1".into()],
        resp("other", "/dev/a"),
        Vec::new(),
    );
    s.commit(
        "p",
        "c",
        R,
        &["Dev-1".into()],
        resp("mine", "/dev/a"),
        Vec::new(),
    );
    let o = s.run_options("p", "c");
    // Resources in name order: `example.com/other` first.
    assert_eq!(o.envs, vec![("SHARED".to_owned(), "other".to_owned())]);
    assert_eq!(o.devices.len(), 1);
    assert!(s.run_options("p", "other").is_empty());
}

#[test]
fn sanitized_allocatable_covers_what_containers_hold() {
    let mut s = registered(&["Dev-1", "Dev-2"]);
    allocate(&mut s, "a", 2).unwrap_or_default();
    let mut allocatable = ResourceList::new();
    s.sanitize_allocatable(&mut allocatable);
    assert_eq!(allocatable[R].value(), 2);
}

/// Upstream's v1 checkpoint fixture (manager_test.go, `oldCheckpoint`): its checksum
/// verifies with ours, and it reads back under NUMA node 0.
const UPSTREAM_V1: &str = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"13ac2284-0d19-44b7-b94f-055b032dba9b","ContainerName":"centos","ResourceName":"example.com/deviceA","DeviceIDs":["DevA3"],"AllocResp":"CiIKHUVYQU1QTEVDT01ERVZJQ0VBX0RFVkEzX1RUWTEwEgEwGhwKCi9kZXYvdHR5MTASCi9kZXYvdHR5MTAaAnJ3"},{"PodUID":"86b9a017-c9ca-4069-815f-46ca3e53c1e4","ContainerName":"centos","ResourceName":"example.com/deviceA","DeviceIDs":["DevA4"],"AllocResp":"CiIKHUVYQU1QTEVDT01ERVZJQ0VBX0RFVkE0X1RUWTExEgEwGhwKCi9kZXYvdHR5MTESCi9kZXYvdHR5MTEaAnJ3"}],"RegisteredDevices":{"example.com/deviceA":["DevA1","DevA2","DevA3","DevA4"]}},"Checksum":405612085}"#;

#[test]
fn upstreams_v1_checkpoint_verifies_and_restores() {
    let cp = DeviceCheckpoint::unmarshal(UPSTREAM_V1).unwrap_or_default();
    let entries = cp.data.pod_device_entries.clone().unwrap_or_default();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        entries[0].device_ids,
        Some(BTreeMap::from([(0, Some(vec!["DevA3".to_owned()]))]))
    );
    let s = DeviceManagerState::restore(&cp, Duration::ZERO, &|_| None);
    assert_eq!(s.pods().len(), 2);
    let corrupt = UPSTREAM_V1.replace("405612085", "405612086");
    assert_eq!(
        DeviceCheckpoint::unmarshal(&corrupt),
        Err(checkpoint::CheckpointError::Corrupt)
    );
}

#[test]
fn checkpoint_round_trips_in_upstreams_layout_and_checksum() {
    let mut s = registered(&["Dev-1", "Dev-2"]);
    allocate(&mut s, "uid-1", 1).unwrap_or_default();
    let text = s.to_checkpoint().marshal();
    // The spew form upstream hashes, pinned.
    let data = s.to_checkpoint().data;
    assert_eq!(
        data.spew(),
        "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)uid-1 ContainerName:(string)c ResourceName:(string)example.com/resource DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[Dev-1]] AllocResp:([]uint8)[1 2]}] RegisteredDevices:(map[string][]string)map[example.com/resource:[Dev-1 Dev-2]]}"
    );
    assert!(text.starts_with(r#"{"Data":{"PodDeviceEntries":[{"PodUID":"uid-1","ContainerName":"c","ResourceName":"example.com/resource","DeviceIDs":{"-1":["Dev-1"]},"AllocResp":"AQI="}],"RegisteredDevices":{"example.com/resource":["Dev-1","Dev-2"]}},"Checksum":"#), "{text}");
    let back = DeviceCheckpoint::unmarshal(&text).unwrap_or_default();
    let restored = DeviceManagerState::restore(&back, Duration::from_secs(7), &|b| {
        (b == [1, 2]).then(ContainerAllocateResponse::default)
    });
    // Held devices come back; the resource has none until its plugin registers again.
    assert!(restored.container_devices("uid-1", "c", R).is_some());
    let mut restored = restored;
    assert_eq!(restored.capacity(Duration::from_secs(7)).allocatable[R], 0);
    restored.plugin_connected(R, PluginOptions::default());
    restored.update_devices(R, devices(&[("Dev-1", true), ("Dev-2", true)]));
    assert_eq!(
        allocate(&mut restored, "uid-2", 1),
        Ok(vec!["Dev-2".to_owned()])
    );
    // No pod: Go's nil slice (`null`).
    let empty = registered(&[]).to_checkpoint().marshal();
    assert!(empty.contains(r#""PodDeviceEntries":null"#), "{empty}");
    assert!(DeviceCheckpoint::unmarshal(&empty).is_ok());
}

#[test]
fn an_app_container_takes_its_init_containers_devices_first() {
    let mut s = registered(&["Dev-1", "Dev-2"]);
    // The init container took Dev-2.
    s.commit(
        "p",
        "init",
        R,
        &["Dev-2".into()],
        ContainerAllocateResponse::default(),
        Vec::new(),
    );
    let reusable = BTreeSet::from(["Dev-2".to_owned()]);
    let need = s.devices_to_allocate("p", "app", R, 1, &reusable);
    assert_eq!(
        need,
        Ok(AllocationNeed::Devices {
            reused: vec!["Dev-2".into()],
            available: BTreeSet::new(),
            needed: 0
        })
    );
    // Two: the init container's and one more.
    let Ok(AllocationNeed::Devices {
        reused,
        available,
        needed,
    }) = s.devices_to_allocate("p", "app", R, 2, &reusable)
    else {
        panic!("devices needed");
    };
    assert_eq!(
        s.take(R, &reused, &available, needed, &[]),
        Ok(vec!["Dev-2".to_owned(), "Dev-1".to_owned()])
    );
}

#[test]
fn a_containers_config_gets_the_plugins_devices_mounts_envs_before_its_own() {
    use crate::domain::kuberuntime::requests::{apply_device_options, ContainerConfig, Mount};
    let mut config = ContainerConfig {
        envs: vec![("GPU".into(), "spec".into())],
        mounts: vec![Mount {
            container_path: "/data".into(),
            host_path: "/v".into(),
            ..Mount::default()
        }],
        annotations: BTreeMap::from([("kept".to_owned(), "kubelet".to_owned())]),
        ..ContainerConfig::default()
    };
    let options = DeviceRunOptions {
        envs: vec![("GPU".into(), "plugin".into())],
        mounts: vec![DeviceMount {
            container_path: "/tmp/Dev-1".into(),
            host_path: "/tmp/Dev-1".into(),
            read_only: true,
        }],
        devices: vec![DeviceSpec {
            container_path: "/dev/gpu0".into(),
            host_path: "/dev/nvidia0".into(),
            permissions: "rw".into(),
        }],
        annotations: vec![
            ("kept".into(), "plugin".into()),
            ("new".into(), "plugin".into()),
        ],
    };
    apply_device_options(&mut config, &options);
    // The spec's variable comes last: the runtime keeps the last of a name.
    assert_eq!(
        config.envs,
        vec![
            ("GPU".to_owned(), "plugin".to_owned()),
            ("GPU".to_owned(), "spec".to_owned())
        ]
    );
    assert_eq!(config.mounts[0].container_path, "/tmp/Dev-1");
    assert!(config.mounts[0].readonly);
    assert_eq!(config.mounts[1].container_path, "/data");
    assert_eq!(config.devices, options.devices);
    assert_eq!(config.annotations["kept"], "kubelet");
    assert_eq!(config.annotations["new"], "plugin");
}

// The dry run's devices: every extended resource a container asks for, with the ids it
// holds once allocated; native resources are not devices.
#[test]
fn planned_devices_show_extended_requests_and_held_ids() {
    use crate::domain::pod::fixtures::container;
    let q = |s: &str| Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    let limits: BTreeMap<String, Quantity> = [
        ("cpu".to_owned(), q("1")),
        (R.to_owned(), q("1")),
        ("example.org/other".to_owned(), q("2")),
    ]
    .into();
    let c = container("c", limits.clone(), limits);
    let mut s = registered(&["D1", "D2"]);
    let before = s.planned_devices("p", &c);
    assert_eq!(
        before,
        [
            PlannedDevices {
                resource: R.to_owned(),
                count: 1,
                ids: Vec::new(),
            },
            PlannedDevices {
                resource: "example.org/other".to_owned(),
                count: 2,
                ids: Vec::new(),
            },
        ]
    );
    let ids = allocate(&mut s, "p", 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.planned_devices("p", &c)[0].ids, ids);
}
