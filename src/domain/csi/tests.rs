use super::*;

fn info(kind: &str, name: &str, versions: &[&str]) -> PluginInfo {
    PluginInfo {
        kind: kind.into(),
        name: name.into(),
        endpoint: "/var/lib/kubelet/plugins/csi-hostpath/csi.sock".into(),
        supported_versions: versions.iter().map(|v| (*v).to_owned()).collect(),
    }
}

const SOCKET: &str = "/var/lib/kubelet/plugins_registry/hostpath.csi.k8s.io-reg.sock";

#[test]
fn a_v1_csi_driver_registers_with_its_endpoint() {
    let driver = validate_registration(
        SOCKET,
        &info(CSI_PLUGIN_TYPE, "hostpath.csi.k8s.io", &["1.0.0", "0.3.0"]),
        &[],
    )
    .expect("registers");
    assert_eq!(
        driver.endpoint,
        "/var/lib/kubelet/plugins/csi-hostpath/csi.sock"
    );
    assert_eq!(driver.version, Version(1, 0, 0));
    // Without an endpoint, the registration socket is the driver's.
    let mut bare = info(CSI_PLUGIN_TYPE, "d", &["v1.5"]);
    bare.endpoint.clear();
    let driver = validate_registration(SOCKET, &bare, &[]).expect("registers");
    assert_eq!(
        (driver.endpoint.as_str(), driver.version),
        (SOCKET, Version(1, 5, 0))
    );
}

#[test]
fn refusals_use_upstreams_words() {
    let refused = |i: PluginInfo, registered: &[Driver]| {
        validate_registration(SOCKET, &i, registered)
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(
        refused(
            info("DevicePlugin", "example.com/resource", &["v1beta1"]),
            &[]
        ),
        format!("no handler registered for plugin type: DevicePlugin at socket {SOCKET}")
    );
    assert_eq!(
        refused(info(CSI_PLUGIN_TYPE, "d", &[]), &[]),
        "kubernetes.io/csi: RegisterPlugin for CSI driver \"d\" failed. Plugin returned an empty list for supported versions"
    );
    assert_eq!(
        refused(info(CSI_PLUGIN_TYPE, "d", &["0.3.0"]), &[]),
        "kubernetes.io/csi: RegisterPlugin for CSI driver \"d\" failed. None of the versions specified [\"0.3.0\"] are supported. err=highest supported version reported by driver is 0.3.0, must be v1.x"
    );
    assert_eq!(
        refused(info(CSI_PLUGIN_TYPE, "d", &["2.0.0", "x"]), &[]),
        "kubernetes.io/csi: RegisterPlugin for CSI driver \"d\" failed. None of the versions specified [\"2.0.0\" \"x\"] are supported. err=could not find a highest supported version from versions ([2.0.0 x]) reported by this driver"
    );
    let existing = Driver {
        name: "d".into(),
        endpoint: "/a".into(),
        version: Version(1, 0, 0),
    };
    assert_eq!(
        refused(info(CSI_PLUGIN_TYPE, "d", &["1.0.0"]), std::slice::from_ref(&existing)),
        "kubernetes.io/csi: RegisterPlugin for CSI driver \"d\" failed. Another driver with the same name is already registered with a higher supported version: \"1.0.0\""
    );
    assert!(
        validate_registration(SOCKET, &info(CSI_PLUGIN_TYPE, "d", &["1.1.0"]), &[existing]).is_ok()
    );
}

#[test]
fn the_csinode_lists_each_driver_once_with_its_topology_keys() {
    let node_info = DriverNodeInfo {
        node_id: "n1".into(),
        max_volumes_per_node: 0,
        topology: BTreeMap::from([("topology.hostpath.csi/node".into(), "n1".into())]),
    };
    let drivers = install_driver(&[], "hostpath.csi.k8s.io", &node_info).expect("added");
    assert_eq!(
        drivers,
        vec![CsiNodeDriver {
            name: "hostpath.csi.k8s.io".into(),
            node_id: "n1".into(),
            topology_keys: vec!["topology.hostpath.csi/node".into()],
            allocatable_count: None,
        }]
    );
    assert_eq!(
        install_driver(&drivers, "hostpath.csi.k8s.io", &node_info),
        None,
        "unchanged"
    );
    let limited = DriverNodeInfo {
        max_volumes_per_node: 16,
        node_id: "n1-b".into(),
        ..node_info
    };
    let replaced = install_driver(&drivers, "hostpath.csi.k8s.io", &limited).expect("changed");
    assert_eq!(replaced.len(), 1);
    assert_eq!(replaced[0].allocatable_count, Some(16));
    assert_eq!(
        uninstall_driver(&replaced, "hostpath.csi.k8s.io"),
        Some(Vec::new())
    );
    assert_eq!(uninstall_driver(&[], "hostpath.csi.k8s.io"), None);
}

#[test]
fn the_node_id_annotation_maps_drivers_to_their_ids() {
    let one = node_id_annotation(None, "b.csi", Some("n1")).expect("valid");
    assert_eq!(one.as_deref(), Some(r#"{"b.csi":"n1"}"#));
    let two = node_id_annotation(one.as_deref(), "a.csi", Some("x")).expect("valid");
    assert_eq!(two.as_deref(), Some(r#"{"a.csi":"x","b.csi":"n1"}"#));
    let back = node_id_annotation(two.as_deref(), "a.csi", None).expect("valid");
    assert_eq!(back, one);
    assert_eq!(node_id_annotation(back.as_deref(), "b.csi", None), Ok(None));
    assert!(node_id_annotation(Some("not json"), "a", None)
        .expect_err("refused")
        .starts_with(
            "failed to parse node's \"csi.volume.kubernetes.io/nodeid\" annotation value"
        ));
}

mod inline_volumes {
    use std::path::PathBuf;

    use super::super::volume::*;
    use crate::domain::pod::{CsiVolumeSource, LocalObjectReference, Pod};
    use crate::domain::volumes::{Fetched, PodObjects, SecretData};

    fn pod(fs_group: Option<i64>) -> Pod {
        let mut json = serde_json::json!({
            "metadata": {"name": "inline", "namespace": "ns", "uid": "u-1"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        });
        if let Some(g) = fs_group {
            json["spec"]["securityContext"] = serde_json::json!({"fsGroup": g});
        }
        serde_json::from_value(json).expect("pod")
    }

    fn source() -> CsiVolumeSource {
        CsiVolumeSource {
            driver: "hostpath.csi.k8s.io".into(),
            volume_attributes: [("size".to_owned(), "1Mi".to_owned())].into(),
            ..CsiVolumeSource::default()
        }
    }

    fn objects(driver: Option<CsiDriverData>) -> PodObjects {
        let mut o = PodObjects::default();
        o.csi_drivers.insert(
            "hostpath.csi.k8s.io".into(),
            driver.map_or(Fetched::NotFound, Fetched::Found),
        );
        o
    }

    fn dir() -> PathBuf {
        PathBuf::from("/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~csi/data")
    }

    fn ephemeral(pod_info: bool, policy: &str) -> CsiDriverData {
        CsiDriverData {
            attach_required: false,
            pod_info_on_mount: pod_info,
            fs_group_policy: policy.into(),
            volume_lifecycle_modes: vec!["Persistent".into(), "Ephemeral".into()],
        }
    }

    #[test]
    fn an_inline_volume_gets_upstreams_handle_target_and_context() {
        let p = pod(Some(1234));
        let publish = plan_inline(
            &p,
            "data",
            &source(),
            dir(),
            "n1",
            &objects(Some(ephemeral(true, "File"))),
        )
        .expect("publishable");
        assert_eq!(publish.volume_handle, make_volume_handle("u-1", "data"));
        assert_eq!(publish.target_path, dir().join("mount"));
        assert_eq!(
            unique_volume_name(&publish, "u-1", "data"),
            "kubernetes.io/csi/u-1-data"
        );
        assert_eq!(
            publish.volume_context.get("size").map(String::as_str),
            Some("1Mi")
        );
        assert_eq!(
            publish
                .volume_context
                .get("csi.storage.k8s.io/pod.name")
                .map(String::as_str),
            Some("inline")
        );
        assert_eq!(
            publish
                .volume_context
                .get("csi.storage.k8s.io/ephemeral")
                .map(String::as_str),
            Some("true")
        );
        assert_eq!(
            publish
                .volume_context
                .get("csi.storage.k8s.io/serviceAccount.name")
                .map(String::as_str),
            Some("default")
        );
        assert_eq!(publish.owner.as_ref().and_then(|o| o.fs_group), Some(1234));
        assert_eq!(
            publish
                .vol_data
                .get("volumeLifecycleMode")
                .map(String::as_str),
            Some("Ephemeral")
        );
        assert_eq!(
            publish.vol_data.get("specVolID").map(String::as_str),
            Some("data")
        );
        // Read back for the teardown.
        let data = serde_json::to_vec(&publish.vol_data).expect("json");
        let found = published_volume(&dir(), &data).expect("found");
        assert_eq!(found.volume_handle, publish.volume_handle);
        assert_eq!(found.target_path, publish.target_path);
        // Without podInfoOnMount, the attributes alone; the default fsGroup policy needs
        // an fsType.
        let plain = plan_inline(
            &p,
            "data",
            &source(),
            dir(),
            "n1",
            &objects(Some(ephemeral(false, ""))),
        )
        .expect("publishable");
        assert_eq!(plain.volume_context.len(), 1);
        assert_eq!(plain.owner, None);
    }

    #[test]
    fn the_handle_is_sha256_of_the_pod_uid_and_volume_name() {
        // printf 'u-1data' | sha256sum
        assert_eq!(
            make_volume_handle("u-1", "data"),
            "csi-7a075fb358279980b660d575168af6c25ee140b5f3a73a8a16e21f8e4f1e9ad8"
        );
    }

    #[test]
    fn a_driver_without_the_ephemeral_mode_or_a_missing_secret_is_refused_in_upstreams_words() {
        let p = pod(None);
        let refused = |o: &PodObjects, s: &CsiVolumeSource| {
            plan_inline(&p, "data", s, dir(), "n1", o).expect_err("refused")
        };
        assert_eq!(
            refused(&objects(None), &source()),
            "kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: volume mode \"Ephemeral\" not supported by driver hostpath.csi.k8s.io (only supports [\"Persistent\"])"
        );
        let mut with_secret = source();
        with_secret.node_publish_secret_ref = Some(LocalObjectReference {
            name: "creds".into(),
        });
        assert_eq!(
            refused(&objects(Some(ephemeral(false, "File"))), &with_secret),
            "kubernetes.io/csi: mounter.SetUpAt failed to get node publish secret: fetching NodePublishSecretRef ns/creds failed: secrets \"creds\" not found"
        );
        let mut o = objects(Some(ephemeral(false, "File")));
        o.secrets.insert(
            "creds".into(),
            Fetched::Found(SecretData {
                data: [("key".to_owned(), b"value".to_vec())].into(),
                kind: "Opaque".into(),
            }),
        );
        let publish = plan_inline(&p, "data", &with_secret, dir(), "n1", &o).expect("publishable");
        assert_eq!(
            publish
                .secrets
                .as_ref()
                .ok()
                .and_then(|s| s.get("key"))
                .map(String::as_str),
            Some("value")
        );
    }
}

mod persistent_volumes {
    use std::path::{Path, PathBuf};

    use super::super::volume::*;
    use crate::domain::pod::Pod;
    use crate::domain::volumes::claim::{
        ClaimedVolume, CsiPersistentSource, PersistentVolumeSource, SecretReference,
    };
    use crate::domain::volumes::{Fetched, PodFacts, PodObjects, SecretData};

    fn n1() -> PodFacts {
        PodFacts {
            node_name: "n1".into(),
            ..PodFacts::default()
        }
    }

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db", "namespace": "ns", "uid": "u-9"},
            "spec": {"securityContext": {"fsGroup": 1234},
                     "containers": [{"name": "c", "image": "busybox"}]}
        }))
        .expect("pod")
    }

    fn source() -> CsiPersistentSource {
        CsiPersistentSource {
            driver: "hostpath.csi.k8s.io".into(),
            volume_handle: "vol-1".into(),
            fs_type: "ext4".into(),
            ..CsiPersistentSource::default()
        }
    }

    /// The claimed volume `name` of [`source`], with these access modes.
    fn claimed(name: &str, access_modes: &[&str]) -> ClaimedVolume {
        ClaimedVolume {
            volume_name: name.into(),
            source: PersistentVolumeSource::Csi(Box::new(source())),
            read_only: false,
            node_affinity: None,
            volume_mode: "Filesystem".into(),
            access_modes: access_modes.iter().map(|m| (*m).to_owned()).collect(),
            mount_options: Vec::new(),
        }
    }

    fn no_attach() -> PodObjects {
        let mut o = PodObjects::default();
        o.csi_drivers.insert(
            "hostpath.csi.k8s.io".into(),
            Fetched::Found(CsiDriverData::default()),
        );
        o
    }

    #[test]
    fn a_claims_csi_volume_is_staged_at_upstreams_global_path_and_published_in_the_pod() {
        let root = Path::new("/var/lib/kubelet");
        let publish = plan_persistent(
            &pod(),
            &claimed("pvc-123", &["ReadWriteOnce"]),
            &source(),
            root,
            &n1(),
            &no_attach(),
        )
        .expect("publishable");
        assert_eq!(
            unique_volume_name(&publish, "u-1", "data"),
            "kubernetes.io/csi/hostpath.csi.k8s.io^vol-1"
        );
        // printf 'vol-1' | sha256sum
        let stage = publish.stage.expect("staged");
        assert_eq!(
            stage.staging_path,
            Path::new("/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/d2e8363faaac7ae76def3b14091d8eb5755f6b92e9531627aeec833a8731cc49/globalmount")
        );
        assert_eq!(
            stage.vol_data.get("volumeHandle").map(String::as_str),
            Some("vol-1")
        );
        assert_eq!(
            publish.target_path,
            Path::new("/var/lib/kubelet/pods/u-9/volumes/kubernetes.io~csi/pvc-123/mount")
        );
        assert_eq!(publish.volume_handle, "vol-1");
        assert_eq!(publish.access_mode, CsiAccessMode::SingleNodeWriter);
        // The default fsGroup policy with an fsType and ReadWriteOnce: the kubelet's.
        assert_eq!(publish.owner.and_then(|o| o.fs_group), Some(1234));
        assert_eq!(
            publish
                .vol_data
                .get("volumeLifecycleMode")
                .map(String::as_str),
            Some("Persistent")
        );
        assert_eq!(
            CsiAccessMode::of("ReadOnlyMany"),
            CsiAccessMode::MultiNodeReaderOnly
        );
    }

    /// Upstream's csiBlockMapper: a Block volume is staged in `volumeDevices/staging`,
    /// published as a file per pod in `volumeDevices/publish/<pv>`, its data kept once
    /// for all pods, and given to the containers from a link in the pod's folder; no
    /// file system, so no fsGroup walk.
    #[test]
    fn a_block_volume_is_staged_and_published_at_upstreams_device_paths() {
        let root = Path::new("/var/lib/kubelet");
        let mut block = claimed("pvc-7", &["ReadWriteOnce"]);
        block.volume_mode = "Block".into();
        let publish = plan_persistent(&pod(), &block, &source(), root, &n1(), &no_attach())
            .expect("publishable");
        let devices = "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices";
        let stage = publish.stage.clone().expect("staged");
        assert_eq!(
            stage.staging_path,
            Path::new(&format!("{devices}/staging/pvc-7"))
        );
        assert_eq!(
            stage.vol_data_file,
            Path::new(&format!("{devices}/pvc-7/data/vol_data.json"))
        );
        assert_eq!(
            publish.volume_dir,
            Path::new(&format!("{devices}/pvc-7/data"))
        );
        assert_eq!(
            publish.target_path,
            Path::new(&format!("{devices}/publish/pvc-7/u-9"))
        );
        assert_eq!(
            publish.block,
            Some(BlockMap {
                pod_link: PathBuf::from(
                    "/var/lib/kubelet/pods/u-9/volumeDevices/kubernetes.io~csi/pvc-7"
                ),
                global_map: PathBuf::from(format!("{devices}/pvc-7/dev/u-9")),
            })
        );
        assert_eq!(
            publish.owner, None,
            "a device is not walked for the fsGroup"
        );
        assert_eq!(stage.vol_data, publish.vol_data, "one data file");
        assert!(!publish.vol_data.contains_key("volumeLifecycleMode"));
        // A driver with VOLUME_MOUNT_GROUP gets no group for a device.
        let grouped = with_mount_group(
            publish.clone(),
            crate::domain::csi::NodeCapabilities {
                volume_mount_group: true,
                ..Default::default()
            },
        );
        assert_eq!(grouped.volume_mount_group, "");
        // Read back for the teardown from the data file and the pod's link.
        let data = serde_json::to_vec(&publish.vol_data).expect("json");
        let found = published_block_volume(root, "pvc-7", "u-9", &data).expect("found");
        assert_eq!(found.volume_handle, "vol-1");
        assert_eq!(found.target_path, publish.target_path);
        assert_eq!(
            BlockPaths::of(root, "pvc-7").after_unstage(),
            [
                PathBuf::from(format!("{devices}/staging/pvc-7")),
                PathBuf::from(format!("{devices}/publish/pvc-7")),
                PathBuf::from(format!("{devices}/pvc-7/dev")),
                PathBuf::from(format!("{devices}/pvc-7")),
            ]
        );
        // A volume named like the shared folders removes its own data and map folders.
        assert_eq!(
            BlockPaths::of(root, "publish").after_unstage()[2..],
            [
                PathBuf::from(format!("{devices}/publish/dev")),
                PathBuf::from(format!("{devices}/publish/data"))
            ]
        );
    }

    #[test]
    fn a_driver_only_for_inline_volumes_is_refused() {
        let mut objects = PodObjects::default();
        objects.csi_drivers.insert(
            "hostpath.csi.k8s.io".into(),
            Fetched::Found(CsiDriverData {
                volume_lifecycle_modes: vec!["Ephemeral".into()],
                ..CsiDriverData::default()
            }),
        );
        let root = Path::new("/var/lib/kubelet");
        let refused = |o: &PodObjects, s: &CsiPersistentSource| {
            plan_persistent(&pod(), &claimed("pv", &[]), s, root, &n1(), o).expect_err("refused")
        };
        assert_eq!(
            refused(&objects, &source()),
            "kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: volume mode \"Persistent\" not supported by driver hostpath.csi.k8s.io (only supports [\"Ephemeral\"])"
        );
    }

    /// Upstream's csi_attacher and csi_mounter: the stage and publish Secrets a
    /// PersistentVolume names (in any namespace) are the driver's credentials; one that
    /// cannot be read fails that call with upstream's words; `mountOptions` are the
    /// driver's mount flags.
    #[test]
    fn a_volumes_secrets_and_mount_options_reach_the_driver() {
        let root = Path::new("/var/lib/kubelet");
        let stage_ref = SecretReference {
            namespace: "storage".into(),
            name: "stage-creds".into(),
        };
        let publish_ref = SecretReference {
            namespace: "storage".into(),
            name: "publish-creds".into(),
        };
        let mut with_secrets = source();
        with_secrets.node_stage_secret_ref = Some(stage_ref.clone());
        with_secrets.node_publish_secret_ref = Some(publish_ref.clone());
        let mut volume = claimed("pv", &["ReadWriteOnce"]);
        volume.source = PersistentVolumeSource::Csi(Box::new(with_secrets.clone()));
        volume.mount_options = vec!["noatime".into()];
        let mut objects = no_attach();
        objects.persistent_volumes.insert(
            "pv".into(),
            Fetched::Found(crate::domain::volumes::claim::PersistentVolumeData {
                claim_uid: None,
                source: volume.source.clone(),
                volume_mode: String::new(),
                node_affinity: None,
                access_modes: Vec::new(),
                mount_options: Vec::new(),
                capacity: None,
            }),
        );
        assert_eq!(
            crate::domain::volumes::claim::volume_secret_refs(&objects),
            [publish_ref.clone(), stage_ref.clone()]
                .into_iter()
                .collect(),
            "both read, once each"
        );
        let plan = |o: &PodObjects| plan_persistent(&pod(), &volume, &with_secrets, root, &n1(), o);
        assert_eq!(
            plan(&objects).expect("planned").secrets,
            Err("fetching NodePublishSecretRef storage/publish-creds failed: kubernetes.io/csi: failed to find the secret publish-creds in the namespace storage with error: secrets \"publish-creds\" not found".to_owned()),
            "told at the publish, after staging"
        );
        let secret = |key: &str| {
            Fetched::Found(SecretData {
                data: [(key.to_owned(), b"s3cr3t".to_vec())].into_iter().collect(),
                kind: "Opaque".into(),
            })
        };
        objects
            .volume_secrets
            .insert(publish_ref.clone(), secret("publish-key"));
        let publish = plan(&objects).expect("planned");
        assert_eq!(
            publish.secrets,
            Ok([("publish-key".to_owned(), "s3cr3t".to_owned())]
                .into_iter()
                .collect())
        );
        assert_eq!(publish.mount_flags, ["noatime"]);
        assert_eq!(
            publish.stage.map(|s| s.secrets),
            Some(Err("fetching NodeStageSecretRef storage/stage-creds failed: kubernetes.io/csi: failed to find the secret stage-creds in the namespace storage with error: secrets \"stage-creds\" not found".to_owned()))
        );
        objects
            .volume_secrets
            .insert(stage_ref, Fetched::Failed("the server is down".into()));
        let stage = plan(&objects).expect("publishable").stage.expect("staged");
        assert_eq!(
            stage.secrets,
            Err("fetching NodeStageSecretRef storage/stage-creds failed: kubernetes.io/csi: failed to find the secret stage-creds in the namespace storage with error: the server is down".to_owned())
        );
        // The expansion's Secret (upstream's csi_expander, `nodeExpandSecretRef`).
        let expand_ref = SecretReference {
            namespace: "storage".into(),
            name: "expand-creds".into(),
        };
        let mut expanding = with_secrets.clone();
        expanding.node_expand_secret_ref = Some(expand_ref.clone());
        let expand_plan = |o: &PodObjects| {
            plan_persistent(&pod(), &volume, &expanding, root, &n1(), o)
                .expect("planned")
                .expand_secrets
        };
        assert_eq!(
            expand_plan(&objects),
            Err("expander.NodeExpand failed to get NodeExpandSecretRef storage/expand-creds: kubernetes.io/csi: failed to find the secret expand-creds in the namespace storage with error: secrets \"expand-creds\" not found".to_owned())
        );
        objects
            .volume_secrets
            .insert(expand_ref, secret("expand-key"));
        assert_eq!(
            expand_plan(&objects),
            Ok([("expand-key".to_owned(), "s3cr3t".to_owned())]
                .into_iter()
                .collect())
        );
    }

    /// Upstream's csi_attacher: the VolumeAttachment `csi-<sha256(handle driver node)>`,
    /// the volume `kubernetes.io/csi/<driver>^<handle>` in the Node's `volumesInUse`
    /// before it is staged, the attacher's metadata given to the driver.
    #[test]
    fn an_attached_volume_is_staged_only_once_reported_in_use_and_attached() {
        let root = Path::new("/var/lib/kubelet");
        // Without a CSIDriver, attachment is required, as upstream's default.
        let mut objects = PodObjects::default();
        let needed = attachment(&source(), "n1", &objects).expect("attachment required");
        assert_eq!(
            needed.unique_name,
            "kubernetes.io/csi/hostpath.csi.k8s.io^vol-1"
        );
        // printf 'vol-1hostpath.csi.k8s.ion1' | sha256sum
        assert_eq!(
            needed.id,
            "csi-ffffc29a669717b61299488392f67014c84daf009b3c45d06bb6627113f72dbe"
        );
        assert_eq!(attachment(&source(), "n1", &no_attach()), None);
        let plan = |facts: &PodFacts, o: &PodObjects| {
            plan_persistent(&pod(), &claimed("pv", &[]), &source(), root, facts, o)
        };
        assert_eq!(
            plan(&n1(), &objects).expect_err("not reported"),
            "Volume has not been added to the list of VolumesInUse in the node's volume status for volume \"pv\""
        );
        let mut reported = n1();
        reported
            .volumes_reported_in_use
            .insert(needed.unique_name.clone());
        assert!(plan(&reported, &objects)
            .expect_err("no attachment yet")
            .starts_with(
                "MountVolume.WaitForAttach failed for volume \"pv\" : volume attachment csi-"
            ));
        let mut attachment_state = VolumeAttachmentData::default();
        objects
            .volume_attachments
            .insert(needed.id.clone(), Fetched::Found(attachment_state.clone()));
        assert_eq!(
            plan(&reported, &objects).expect_err("not attached"),
            "MountVolume.WaitForAttach failed for volume \"pv\" : timed out waiting for external-attacher of hostpath.csi.k8s.io CSI driver to attach volume vol-1"
        );
        attachment_state.attach_error = Some("rpc error: code = NotFound".into());
        objects
            .volume_attachments
            .insert(needed.id.clone(), Fetched::Found(attachment_state.clone()));
        assert_eq!(
            plan(&reported, &objects).expect_err("attach failed"),
            "MountVolume.WaitForAttach failed for volume \"pv\" : rpc error: code = NotFound"
        );
        attachment_state = VolumeAttachmentData {
            attached: true,
            attachment_metadata: [("devicePath".to_owned(), "/dev/x".to_owned())].into(),
            ..VolumeAttachmentData::default()
        };
        objects
            .volume_attachments
            .insert(needed.id.clone(), Fetched::Found(attachment_state));
        let publish = plan(&reported, &objects).expect("attached");
        assert_eq!(
            publish
                .publish_context
                .get("devicePath")
                .map(String::as_str),
            Some("/dev/x")
        );
        assert_eq!(publish.vol_data.get("attachmentID"), Some(&needed.id));
    }
}
