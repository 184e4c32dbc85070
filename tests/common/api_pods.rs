//! Helpers for tests that run API pods: a private control plane, a node (containerd +
//! rkubelet with the node's kubeconfig), `kubectl apply` of manifests and reads of pods.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::cluster::{Cluster, ClusterOptions};
use super::node::{Node, NODE};
use super::patience;

/// Poll `probe` every 200 ms for up to `secs` seconds of a quiet machine ([`patience`]).
pub fn eventually<T>(secs: u64, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let budget = patience(secs);
    let deadline = Instant::now() + budget;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {:.0} s: {what}",
            budget.as_secs_f64()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The pod `name` of the default namespace, as `kubectl get pod -o json` shows it.
pub fn pod(cluster: &Cluster, name: &str) -> Option<Value> {
    cluster.get_json(&["pod", name])
}

pub fn phase(cluster: &Cluster, name: &str) -> String {
    pod(cluster, name)
        .and_then(|p| p["status"]["phase"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A control plane, a node running rkubelet with its kubeconfig (and `extra` flags),
/// registered.
pub fn start(name: &str, options: ClusterOptions, extra: &[&str]) -> (Cluster, Node) {
    let cluster = Cluster::start_with(name, options);
    let mut node = Node::start(name);
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    let mut flags = vec![format!("--kubeconfig={}", kubeconfig.display())];
    flags.extend(extra.iter().map(|f| (*f).to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    node.kubelet_with(&flags);
    eventually(30, "node registered", || cluster.get_json(&["node", NODE]));
    (cluster, node)
}

/// The API's events of the object `name`: `(type, reason, message)`.
pub fn events_of(cluster: &Cluster, name: &str) -> Vec<(String, String, String)> {
    let selector = format!("involvedObject.name={name}");
    cluster
        .get_json(&["events", "--field-selector", &selector])
        .and_then(|list| list["items"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (text("type"), text("reason"), text("message"))
        })
        .collect()
}
