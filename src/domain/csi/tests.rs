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
