//! rkubelet as a cluster node, against a real private control plane (kube-apiserver and
//! kube-controller-manager v1.26.1, etcd) started per test by scripts/test-env/cluster-up.sh.
//! Missing binaries fail the tests.

mod common;

use common::cluster::{Cluster, ClusterOptions};

/// The harness itself: two control planes side by side, each with its own CA; the node
/// identity is `system:node:NAME` (the Node authorizer applies); the bootstrap token may
/// create CSRs.
#[test]
fn harness_runs_two_control_planes_with_node_and_bootstrap_identities() {
    let options = ClusterOptions {
        nodes: vec!["harness-a".into()],
        ..ClusterOptions::default()
    };
    let a = Cluster::start_with("harness-a", options);
    let b = Cluster::start("harness-b");
    assert_ne!(a.server(), b.server());

    let node_kubeconfig = a.base.join("node-harness-a.kubeconfig");
    let as_node = |kubeconfig: &std::path::Path, args: &[&str]| {
        std::process::Command::new(a.var("KUBECTL"))
            .env("KUBECONFIG", kubeconfig)
            .args(args)
            .output()
            .expect("kubectl runs")
    };
    // A node may read nodes but not list secrets cluster-wide.
    let nodes = as_node(&node_kubeconfig, &["get", "nodes"]);
    assert!(nodes.status.success(), "{nodes:?}");
    let secrets = as_node(&node_kubeconfig, &["get", "secrets", "-A"]);
    assert!(!secrets.status.success());
    assert!(
        String::from_utf8_lossy(&secrets.stderr).contains("system:node:harness-a"),
        "{secrets:?}"
    );
    // The other control plane does not trust this one's CA.
    let mut foreign = std::fs::read_to_string(&node_kubeconfig).expect("kubeconfig");
    foreign = foreign.replace(&a.server(), &b.server());
    let foreign_path = a.base.join("foreign.kubeconfig");
    std::fs::write(&foreign_path, foreign).expect("written");
    assert!(!as_node(&foreign_path, &["get", "nodes"]).status.success());
    // The bootstrap token may list CSRs (node-bootstrapper role), not nodes.
    let csrs = as_node(&a.bootstrap_kubeconfig(), &["get", "csr"]);
    assert!(csrs.status.success(), "{csrs:?}");
    assert!(!as_node(&a.bootstrap_kubeconfig(), &["get", "nodes"])
        .status
        .success());
    // An expired identity is refused.
    let expired = a.node_kubeconfig("harness-old", -1);
    assert!(!as_node(&expired, &["get", "nodes"]).status.success());
    // Every request is in the audit log.
    assert!(a
        .audit_events()
        .iter()
        .any(|e| e["user"]["username"] == "system:node:harness-a"));
}
