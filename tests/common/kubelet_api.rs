//! Helpers of the kubelet API tests (port 10250 reached through the API server's node
//! proxy, as `kubectl` reaches it).

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use super::cluster::Cluster;
use super::node::{Node, NODE};

/// A command's stdout as text.
pub fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl get --raw /api/v1/nodes/<node>/proxy<path>` as the admin.
pub fn proxy(cluster: &Cluster, path: &str) -> Output {
    cluster.kubectl(&["get", "--raw", &format!("/api/v1/nodes/{NODE}/proxy{path}")])
}

/// This machine's address on its default route (the API server dials the node's
/// InternalIP and refuses a loopback one).
pub fn host_ip() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("UDP socket");
    socket.connect("10.255.255.255:9").expect("a route");
    socket.local_addr().expect("local address").ip()
}

/// Polls `probe` every 250 ms until it yields `Some`; fails naming `what` after `secs`.
pub fn wait_for<T>(secs: u64, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + super::patience(secs);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Start rkubelet on `node` as the cluster's node with a secured kubelet API on `port`
/// (webhook authentication and authorization, its defaults; the cluster CA for client
/// certificates; the node's outbound address, which the API server dials); returns its
/// `--cert-dir`, where it writes its self-signed serving pair.
#[allow(dead_code)] // not every test binary including common uses it
pub fn kubelet_secured(node: &mut Node, cluster: &Cluster, port: u16) -> PathBuf {
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    let pki = node.root.join("pki");
    node.kubelet_with(&[
        &format!("--kubeconfig={}", kubeconfig.display()),
        &format!("--port={port}"),
        &format!("--node-ip={}", host_ip()),
        &format!("--client-ca-file={}", cluster.ca_cert().display()),
        &format!("--cert-dir={}", pki.display()),
    ]);
    pki
}
