//! Device plugins and the pod resources API (issue 36) against the real peers: upstream's
//! sample device plugin v1.26.1 (`test/images/sample-device-plugin`: `example.com/resource`,
//! devices `Dev-1` and `Dev-2`, each allocated as the host file `/tmp/<id>` mounted at the
//! same path), containerd, a private kube-apiserver v1.26.1 and rkubelet. The plugin
//! dials the kubelet at upstream's fixed `/var/lib/kubelet/device-plugins/kubelet.sock`:
//! it runs in a private mount namespace where that folder is rkubelet's
//! `<root-dir>/device-plugins`, so the host's folder is never touched.
//!
//! Ported from upstream's `device_plugin_test.go` and `podresources_test.go`: the plugin
//! registers and the Node shows 2 in capacity and allocatable; a pod requesting one gets
//! its device (the file the plugin mounts is in the container); with both taken, a third
//! is refused at admission with upstream's reason and message; the pod resources API
//! lists each pod's device and both devices as allocatable, and `Get` one pod's (with the
//! `KubeletPodResourcesGet` gate; refused without it); after the plugin restarts,
//! then rkubelet (its socket folder emptied, so the plugin registers again), the pods keep
//! their devices and containers, the checkpoint holds them in upstream's layout, and no
//! device is handed out twice; a deleted pod's device goes to the next pod.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use rkubelet::adapters::device_plugins::wire::podresources as pr;
use serde_json::Value;

use crate::common::api_pods::{events_of, eventually, phase};
use crate::common::cluster::{Cluster, ClusterOptions};
use crate::common::node::{Node, NODE};
use crate::common::peer::Peer;
use crate::common::upstream::kube_bins;

const RESOURCE: &str = "example.com/resource";
const DEVICES: [&str; 2] = ["Dev-1", "Dev-2"];
/// The gate behind the pod resources API's `Get` (alpha, off by default).
const GET_GATE: &str = "--feature-gates=KubeletPodResourcesGet=true";

/// The sample plugin in its own mount namespace (see the module documentation), stopped
/// (SIGTERM, then waited for) on drop.
fn start_sample_plugin(binary: &Path, plugins_dir: &Path, log: &Path) -> Peer {
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .expect("plugin log");
    // A tmpfs over /var/lib in the namespace holds the folder it dials.
    let script = "mount -t tmpfs rkubelet-dp /var/lib && mkdir -p /var/lib/kubelet/device-plugins \
                      && mount --bind \"$1\" /var/lib/kubelet/device-plugins && exec \"$2\"";
    let mut command = Command::new("unshare");
    command
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(plugins_dir)
        .arg(binary)
        .env("PLUGIN_SOCK_DIR", "/var/lib/kubelet/device-plugins");
    Peer::spawn(
        &mut command,
        out,
        "unshare (util-linux) with the sample plugin",
    )
}

/// The sample plugin among the peers' binaries; fails the test without it.
fn sample_plugin_binary() -> PathBuf {
    let binary = kube_bins().join("sample-device-plugin");
    assert!(
        binary.is_file(),
        "sample-device-plugin is needed in {} (../shared/peers/bin/sample-device-plugin.zst)",
        binary.display()
    );
    binary
}

/// The plugin's log (every run appended), printed when the test fails.
struct PluginLog(PathBuf);

impl Drop for PluginLog {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- sample-device-plugin log ----\n{}\n---- end ----",
                std::fs::read_to_string(&self.0).unwrap_or_default()
            );
        }
    }
}

/// The devices files the plugin made on the host, removed at the end.
struct DeviceFiles;

impl Drop for DeviceFiles {
    fn drop(&mut self) {
        for id in DEVICES {
            let _ = std::fs::remove_file(Path::new("/tmp").join(id));
        }
    }
}

fn pod_yaml(name: &str, image: &str, count: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n  automountServiceAccountToken: false\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n    resources: {{limits: {{{RESOURCE}: {count}}}}}\n"
    )
}

/// The Node's capacity and allocatable of the resource.
fn node_resource(cluster: &Cluster) -> Option<(String, String)> {
    let node = cluster.get_json(&["node", NODE])?;
    let get = |field: &str| node["status"][field][RESOURCE].as_str().map(str::to_owned);
    Some((get("capacity")?, get("allocatable")?))
}

fn wait_resource(cluster: &Cluster, capacity: &str, allocatable: &str, what: &str) {
    eventually(60, what, || {
        node_resource(cluster).filter(|(c, a)| c == capacity && a == allocatable)
    });
}

fn running(cluster: &Cluster, name: &str) {
    eventually(90, &format!("pod {name} Running"), || {
        (phase(cluster, name) == "Running").then_some(())
    });
}

/// The one device file the plugin mounted in the pod's container.
async fn device_in(node: &Node, pod: &str) -> String {
    let (out, code) = node
        .exec_sh(
            pod,
            "app",
            "ls /tmp | grep '^Dev-' ; test -f /tmp/$(ls /tmp | grep '^Dev-' | head -1)",
        )
        .await;
    assert_eq!(code, 0, "pod {pod}: no device file in /tmp: {out:?}");
    let ids: Vec<&str> = out.lines().collect();
    assert_eq!(ids.len(), 1, "pod {pod} sees one device: {out:?}");
    ids[0].to_owned()
}

/// Refused at admission as upstream refuses it: Failed, `UnexpectedAdmissionError`,
/// upstream's message, and an event.
fn refused(cluster: &Cluster, name: &str) {
    let message = "Allocate failed due to requested number of devices unavailable for example.com/resource. Requested: 1, Available: 0, which is unexpected";
    let status = eventually(60, &format!("pod {name} Failed"), || {
        let pod = cluster.get_json(&["pod", name])?;
        (pod["status"]["phase"] == "Failed").then(|| pod["status"].clone())
    });
    assert_eq!(status["reason"], "UnexpectedAdmissionError", "{status}");
    assert_eq!(
        status["message"],
        format!("Pod was rejected: {message}"),
        "{status}"
    );
    assert!(
        events_of(cluster, name)
            .iter()
            .any(|(kind, reason, m)| kind == "Warning"
                && reason == "UnexpectedAdmissionError"
                && m == message),
        "the refusal's event: {:?}",
        events_of(cluster, name)
    );
}

/// A pod's name and the devices of its container `app`: (resource, ids).
type PodDevices = (String, Vec<(String, Vec<String>)>);

/// A pod's name and the devices of its container `app`.
fn app_devices(p: pr::PodResources) -> PodDevices {
    let app = p.containers.into_iter().find(|c| c.name == "app");
    let devices = app
        .map(|c| {
            c.devices
                .into_iter()
                .map(|d| (d.resource_name, d.device_ids))
                .collect()
        })
        .unwrap_or_default();
    (p.name, devices)
}

/// `List`: each pod with the devices of its container `app`.
async fn listed(socket: &Path) -> Vec<PodDevices> {
    let mut client = crate::common::pod_resources::client(socket.to_path_buf()).await;
    let list = client
        .list(pr::ListPodResourcesRequest {})
        .await
        .expect("List")
        .into_inner();
    let mut out: Vec<_> = list
        .pod_resources
        .into_iter()
        .map(|p| {
            assert_eq!(p.namespace, "default");
            app_devices(p)
        })
        .collect();
    out.sort();
    out
}

/// `Get` for the pod `default/<name>`: its name with the devices of its container `app`.
async fn get(socket: &Path, name: &str) -> Result<PodDevices, tonic::Status> {
    let mut client = crate::common::pod_resources::client(socket.to_path_buf()).await;
    let got = client
        .get(pr::GetPodResourcesRequest {
            pod_name: name.to_owned(),
            pod_namespace: "default".to_owned(),
        })
        .await?
        .into_inner();
    let pod = got.pod_resources.expect("Get answers the pod's resources");
    assert_eq!(pod.namespace, "default");
    Ok(app_devices(pod))
}

/// Polls `List` for up to 30 s until it shows `expected`.
async fn listed_eventually(socket: &Path, expected: &[PodDevices]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let now = listed(socket).await;
        if now == expected {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "List shows {now:?}, not {expected:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn container_id(cluster: &Cluster, name: &str) -> String {
    cluster
        .get_json(&["pod", name])
        .and_then(|p| {
            p["status"]["containerStatuses"][0]["containerID"]
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd, control plane and upstream's sample device plugin: run by scripts/test.sh"]
async fn the_sample_device_plugin_registers_its_devices_go_to_pods_once_and_survive_restarts() {
    let started = std::time::Instant::now();
    let plugin_binary = sample_plugin_binary();
    let _files = DeviceFiles;
    let cluster = Cluster::start_with("devplug", ClusterOptions::default());
    let mut node = Node::start("devplug");
    // The topology manager over the devices alone (the CPU manager's `none` policy):
    // on this one-NUMA-node machine `restricted` admits every pod, through its path.
    node.kubelet_connected(
        &cluster,
        &[GET_GATE, "--topology-manager-policy=restricted"],
    );
    let plugins_dir = node.root.join("device-plugins");
    let pod_resources = node.root.join("pod-resources/kubelet.sock");
    assert!(
        rkubelet::adapters::device_plugins::is_socket(&plugins_dir.join("kubelet.sock")),
        "the registration socket is served"
    );
    let log = node.root.join("sample-device-plugin.log");
    let _log = PluginLog(log.clone());
    let mut plugin = start_sample_plugin(&plugin_binary, &plugins_dir, &log);

    // Registered: capacity and allocatable 2 (upstream: "Waiting for devices to become
    // available on the local node").
    wait_resource(&cluster, "2", "2", "example.com/resource: 2 on the Node");
    let mut client = crate::common::pod_resources::client(pod_resources.clone()).await;
    let allocatable = client
        .get_allocatable_resources(pr::AllocatableResourcesRequest {})
        .await
        .expect("GetAllocatableResources")
        .into_inner();
    let mut ids: Vec<String> = allocatable
        .devices
        .iter()
        .inspect(|d| assert_eq!(d.resource_name, RESOURCE))
        .flat_map(|d| d.device_ids.clone())
        .collect();
    ids.sort();
    assert_eq!(ids, DEVICES, "GetAllocatableResources lists both devices");
    assert!(allocatable.cpu_ids.is_empty(), "no CPU manager: no CPU ids");

    // One device each for two pods (upstream: "Can schedule a pod that requires a device").
    cluster.apply(&pod_yaml("dev-a", &node.busybox, 1));
    running(&cluster, "dev-a");
    let dev_a = device_in(&node, "dev-a").await;
    cluster.apply(&pod_yaml("dev-b", &node.busybox, 1));
    running(&cluster, "dev-b");
    let dev_b = device_in(&node, "dev-b").await;
    assert_ne!(dev_a, dev_b, "each device goes to one pod");
    assert!(DEVICES.contains(&dev_a.as_str()) && DEVICES.contains(&dev_b.as_str()));
    // Both taken: a third is refused at admission, with upstream's reason.
    cluster.apply(&pod_yaml("dev-c", &node.busybox, 1));
    refused(&cluster, "dev-c");

    // The pod resources API (upstream's podresources e2e): each pod with its device; the
    // refused pod is not active.
    let expected = vec![
        (
            "dev-a".to_owned(),
            vec![(RESOURCE.to_owned(), vec![dev_a.clone()])],
        ),
        (
            "dev-b".to_owned(),
            vec![(RESOURCE.to_owned(), vec![dev_b.clone()])],
        ),
    ];
    assert_eq!(listed(&pod_resources).await, expected);
    // `Get` (upstream's podresources e2e "should return the expected responses"): the pod's
    // entry as List gives it; the refused pod is not found, in upstream's words.
    let got = get(&pod_resources, "dev-a").await.expect("Get dev-a");
    assert_eq!(got, expected[0], "Get's entry is List's");
    let missing = get(&pod_resources, "dev-c")
        .await
        .expect_err("dev-c is not active");
    assert_eq!(
        (missing.code(), missing.message()),
        (
            tonic::Code::Unknown,
            "pod dev-c in namespace default not found"
        )
    );

    // The checkpoint, in upstream's layout, holds both pods' devices.
    let checkpoint: Value = serde_json::from_str(
        &std::fs::read_to_string(plugins_dir.join("kubelet_internal_checkpoint"))
            .expect("checkpoint"),
    )
    .expect("checkpoint JSON");
    let entries = checkpoint["Data"]["PodDeviceEntries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(entries.len(), 2, "{checkpoint}");
    assert!(
        checkpoint["Checksum"].as_u64().is_some_and(|c| c > 0),
        "{checkpoint}"
    );
    assert_eq!(
        checkpoint["Data"]["RegisteredDevices"][RESOURCE]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{checkpoint}"
    );
    let (id_a, id_b) = (
        container_id(&cluster, "dev-a"),
        container_id(&cluster, "dev-b"),
    );

    // The plugin restarts (upstream: "Keeps device plugin assignments after the device
    // plugin has been re-registered"): it registers anew, the pods keep their devices.
    plugin.stop();
    plugin = start_sample_plugin(&plugin_binary, &plugins_dir, &log);
    // The sample plugin logs each `ListAndWatch` the kubelet opens on it.
    eventually(60, "the plugin registered again", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        (text.matches("\"ListAndWatch\"").count() >= 2).then_some(())
    });
    wait_resource(
        &cluster,
        "2",
        "2",
        "example.com/resource: 2 after the plugin's restart",
    );
    assert_eq!(device_in(&node, "dev-a").await, dev_a);
    assert_eq!(device_in(&node, "dev-b").await, dev_b);
    cluster.apply(&pod_yaml("dev-d", &node.busybox, 1));
    refused(&cluster, "dev-d");

    // rkubelet restarts (upstream: "Keeps device plugin assignments across pod and kubelet
    // restarts"): its socket folder is emptied, so the plugin registers again; the pods
    // keep their containers and devices, and still none is free.
    node.kill9();
    node.kubelet_connected(&cluster, &[]);
    plugin.stop();
    plugin = start_sample_plugin(&plugin_binary, &plugins_dir, &log);
    wait_resource(
        &cluster,
        "2",
        "2",
        "example.com/resource: 2 after rkubelet's restart",
    );
    // The pods come back from the API server's list as the pod loop admits them.
    listed_eventually(&pod_resources, &expected).await;
    // Restarted without the gate,, `Get` is refused as upstream refuses it.
    let disabled = get(&pod_resources, "dev-a")
        .await
        .expect_err("Get is gated");
    assert_eq!(
        (disabled.code(), disabled.message()),
        (tonic::Code::Unknown, "PodResources API Get method disabled")
    );
    assert_eq!(device_in(&node, "dev-a").await, dev_a);
    assert_eq!(device_in(&node, "dev-b").await, dev_b);
    assert_eq!(container_id(&cluster, "dev-a"), id_a, "not restarted");
    assert_eq!(container_id(&cluster, "dev-b"), id_b, "not restarted");
    cluster.apply(&pod_yaml("dev-e", &node.busybox, 1));
    refused(&cluster, "dev-e");

    // A finished pod's device is free again: the next pod gets it.
    let out = cluster.kubectl(&["delete", "pod", "dev-a", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.apply(&pod_yaml("dev-f", &node.busybox, 1));
    running(&cluster, "dev-f");
    assert_eq!(
        device_in(&node, "dev-f").await,
        dev_a,
        "dev-a's device, freed"
    );
    listed_eventually(
        &pod_resources,
        &[
            (
                "dev-b".to_owned(),
                vec![(RESOURCE.to_owned(), vec![dev_b.clone()])],
            ),
            (
                "dev-f".to_owned(),
                vec![(RESOURCE.to_owned(), vec![dev_a.clone()])],
            ),
        ],
    )
    .await;

    let out = cluster.kubectl(&["delete", "pod", "--all", "--wait=true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    plugin.stop();
    node.finish();
    eprintln!(
        "device plugins test: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Upstream's podresources e2e "should return the expected responses" with the CPU
/// manager and devices together: with `--cpu-manager-policy=static --reserved-cpus=0` and
/// the `single-numa-node` topology policy, a Guaranteed static pod asking one CPU and one
/// device is admitted through the topology manager's trial before its device is given,
/// runs on CPU 1 alone with its device, and `List` shows both for its container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd and upstream's sample device plugin: run by scripts/test.sh"]
async fn a_guaranteed_pod_gets_its_device_and_exclusive_cpu_through_the_topology_manager() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    assert_eq!(
        online.trim(),
        "0-1",
        "this test is written for a 2-CPU machine"
    );
    let plugin_binary = sample_plugin_binary();
    let _files = DeviceFiles;
    let mut node = Node::start("devcpu");
    node.kubelet_with(&[
        "--cpu-manager-policy=static",
        "--reserved-cpus=0",
        "--topology-manager-policy=single-numa-node",
    ]);
    let plugins_dir = node.root.join("device-plugins");
    let log = node.root.join("sample-device-plugin.log");
    let _log = PluginLog(log.clone());
    let _plugin = start_sample_plugin(&plugin_binary, &plugins_dir, &log);
    // Static pods are admitted once: the manifest comes after the plugin registered.
    let socket = node.root.join("pod-resources/kubelet.sock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut client = crate::common::pod_resources::client(socket.clone()).await;
        let allocatable = client
            .get_allocatable_resources(pr::AllocatableResourcesRequest {})
            .await
            .expect("GetAllocatableResources")
            .into_inner();
        if allocatable
            .devices
            .iter()
            .map(|d| d.device_ids.len())
            .sum::<usize>()
            == 2
        {
            assert_eq!(allocatable.cpu_ids, vec![1], "CPU 1 allocatable");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the plugin's devices not allocatable in 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let manifest = pod_yaml("devcpu", &node.busybox, 1).replace(
        &format!("limits: {{{RESOURCE}: 1}}"),
        &format!("limits: {{cpu: \"1\", memory: 64Mi, {RESOURCE}: 1}}"),
    );
    node.write("devcpu.yaml", &manifest);
    let pod = format!("devcpu-{NODE}");
    node.wait_running(&pod, "app", 60).await;
    let device = device_in(&node, &pod).await;
    let (out, code) = node
        .exec_sh(&pod, "app", "grep Cpus_allowed_list /proc/self/status")
        .await;
    assert_eq!(code, 0, "{out:?}");
    assert_eq!(out.split(':').nth(1).map(str::trim), Some("1"), "{out:?}");

    let mut client = crate::common::pod_resources::client(socket).await;
    let list = client
        .list(pr::ListPodResourcesRequest {})
        .await
        .expect("List")
        .into_inner();
    let app = list
        .pod_resources
        .iter()
        .find(|p| p.name == pod)
        .and_then(|p| p.containers.iter().find(|c| c.name == "app"))
        .unwrap_or_else(|| panic!("{pod} in List: {list:?}"));
    assert_eq!(app.cpu_ids, vec![1], "{app:?}");
    let devices: Vec<(&str, &[String])> = app
        .devices
        .iter()
        .map(|d| (d.resource_name.as_str(), d.device_ids.as_slice()))
        .collect();
    assert_eq!(devices, vec![(RESOURCE, &[device][..])], "{app:?}");
    eprintln!("{pod}: CPU 1, device {:?}", app.devices);
    node.remove("devcpu.yaml");
    node.finish();
}
