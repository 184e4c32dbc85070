use super::*;
use crate::adapters::fake::{FakeApiServer, FakeCsiPlugins};
use crate::domain::csi::{PluginInfo, CSI_PLUGIN_TYPE};
use crate::domain::node_status::model::NodeObject;

const ROOT: &str = "/var/lib/kubelet";

fn registry_socket(name: &str) -> PathBuf {
    Path::new(ROOT).join(PLUGINS_REGISTRY_DIR).join(name)
}

fn setup() -> (FakeApiServer, FakeCsiPlugins, PluginWatcher) {
    let api = FakeApiServer::new();
    let mut node = NodeObject::default();
    node.metadata.name = "n1".into();
    node.metadata.uid = "node-uid".into();
    api.put_node(node);
    let plugins = FakeCsiPlugins::default();
    let watcher = PluginWatcher::new(
        Path::new(ROOT),
        Arc::new(plugins.clone()),
        CsiDrivers::default(),
    );
    (api, plugins, watcher)
}

fn hostpath(endpoint: &str, versions: &[&str]) -> PluginInfo {
    PluginInfo {
        kind: CSI_PLUGIN_TYPE.into(),
        name: "hostpath.csi.k8s.io".into(),
        endpoint: endpoint.into(),
        supported_versions: versions.iter().map(|v| (*v).to_owned()).collect(),
    }
}

#[tokio::test]
async fn a_registered_driver_is_on_the_node_and_its_csinode_until_its_socket_goes() {
    let (api, plugins, mut watcher) = setup();
    let clients = api.clients();
    let socket = registry_socket("hostpath.csi.k8s.io-reg.sock");
    let endpoint = "/var/lib/kubelet/plugins/csi-hostpath/csi.sock";
    plugins.put_socket(&socket, hostpath(endpoint, &["1.0.0"]));
    plugins.put_driver(
        endpoint,
        DriverNodeInfo {
            node_id: "n1".into(),
            max_volumes_per_node: 0,
            topology: BTreeMap::from([("topology.hostpath.csi/node".into(), "n1".into())]),
        },
    );
    watcher.reconcile("n1", &clients).await;
    assert_eq!(
        plugins.notified(),
        vec![(socket.clone(), true, String::new())]
    );
    let node = api.node("n1").expect("node");
    assert_eq!(
        node.metadata
            .annotations
            .get(NODE_ID_ANNOTATION)
            .map(String::as_str),
        Some(r#"{"hostpath.csi.k8s.io":"n1"}"#)
    );
    assert_eq!(
        node.metadata
            .labels
            .get("topology.hostpath.csi/node")
            .map(String::as_str),
        Some("n1")
    );
    let csi_node = api.csi_node("n1").expect("CSINode made");
    assert_eq!(csi_node.drivers.len(), 1);
    assert_eq!(
        csi_node.drivers[0].topology_keys,
        vec!["topology.hostpath.csi/node"]
    );
    assert_eq!(watcher.drivers.names(), vec!["hostpath.csi.k8s.io"]);

    // Listed again: nothing asked, nothing written.
    let writes = api.count("update csinode") + api.count("create csinode");
    watcher.reconcile("n1", &clients).await;
    assert_eq!(plugins.get_infos(), 1);
    assert_eq!(
        api.count("update csinode") + api.count("create csinode"),
        writes
    );

    // The socket goes: the driver leaves the CSINode and the annotation.
    plugins.remove_socket(&socket);
    watcher.reconcile("n1", &clients).await;
    assert_eq!(api.csi_node("n1").map(|n| n.drivers.len()), Some(0));
    let node = api.node("n1").expect("node");
    assert_eq!(node.metadata.annotations.get(NODE_ID_ANNOTATION), None);
    assert!(watcher.drivers.names().is_empty());

    // It comes back (a restarted driver): registered again.
    plugins.put_socket(&socket, hostpath(endpoint, &["1.0.0"]));
    watcher.reconcile("n1", &clients).await;
    assert_eq!(api.csi_node("n1").map(|n| n.drivers.len()), Some(1));

    // Made again between two listings (a driver restarted within a second): a new
    // socket at the same path, asked and registered again, told so.
    let asked = plugins.get_infos();
    plugins.put_socket(&socket, hostpath(endpoint, &["1.0.0"]));
    watcher.reconcile("n1", &clients).await;
    assert_eq!(plugins.get_infos(), asked + 1);
    assert_eq!(api.csi_node("n1").map(|n| n.drivers.len()), Some(1));
    assert_eq!(watcher.drivers.names(), vec!["hostpath.csi.k8s.io"]);
    assert_eq!(
        plugins.notified().last(),
        Some(&(socket.clone(), true, String::new()))
    );
}

#[tokio::test]
async fn a_refused_plugin_is_told_why_and_tried_again_less_often() {
    let (api, plugins, mut watcher) = setup();
    let clients = api.clients();
    let socket = registry_socket("old.sock");
    plugins.put_socket(&socket, hostpath("/x.sock", &["0.3.0"]));
    watcher.reconcile("n1", &clients).await;
    let notified = plugins.notified();
    assert_eq!(notified.len(), 1);
    assert!(!notified[0].1);
    assert!(
        notified[0]
            .2
            .ends_with("err=highest supported version reported by driver is 0.3.0, must be v1.x"),
        "{}",
        notified[0].2
    );
    assert!(api.csi_node("n1").is_none());
    // Tried at polls 0, 2 and 5: one poll skipped, then two, then four.
    for _ in 0..7 {
        watcher.reconcile("n1", &clients).await;
    }
    assert_eq!(plugins.get_infos(), 3);
    // A driver whose node service does not answer is not registered either.
    let socket = registry_socket("mute.sock");
    plugins.put_socket(&socket, hostpath("/mute.sock", &["1.0.0"]));
    watcher.reconcile("n1", &clients).await;
    let last = plugins.notified().pop().expect("told");
    assert_eq!(last.0, socket);
    assert!(last.2.contains("NodeGetInfo"), "{}", last.2);
}
