//! Connected-mode benchmark against a private control plane (scripts/test-env/cluster-up.sh,
//! kube-apiserver v1.26.1): simulated nodes (`fake://`, one process each) started at once,
//! time until all are Ready, their memory after a minute idle, and the API requests an idle
//! node sends. Goals (issue 11): 100 nodes all Ready within 30 s, total memory under 1 GiB;
//! an idle node no more requests than upstream (12 a minute: a Node read and a Lease update
//! every 10 s). `RKUBELET_BENCH_NODES` sets the count (default 100),
//! `RKUBELET_BENCH_IDLE_SECS` the idle wait (default 60).

#[allow(dead_code)]
#[path = "../tests/common/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../tests/common/env_file.rs"]
mod env_file;
#[allow(dead_code)]
#[path = "../tests/common/patience.rs"]
mod patience;

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{env_number, pss_kib, rss_kib, verdict};
use serde_json::Value;

fn ready_nodes(c: &cluster::Cluster) -> usize {
    c.get_json(&["nodes"])
        .and_then(|list| {
            Some(
                list["items"]
                    .as_array()?
                    .iter()
                    .filter(|n| {
                        n["status"]["conditions"].as_array().is_some_and(|cs| {
                            cs.iter()
                                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                        })
                    })
                    .count(),
            )
        })
        .unwrap_or(0)
}

/// Distinct free ports below the kernel's ephemeral range. A port picked inside it and
/// released can be taken by one of the 100 nodes' own connections to the API server before
/// its node binds it, and a taken port stops that node at start, as upstream's.
fn ports_outside_the_ephemeral_range(count: usize) -> Vec<u16> {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let offset = u16::try_from(std::process::id() % 4000).unwrap_or(0);
    let start = ephemeral_low.saturating_sub(12_000).max(1024) + offset;
    (start..ephemeral_low)
        .filter(|p| std::net::TcpListener::bind(("0.0.0.0", *p)).is_ok())
        .take(count)
        .collect()
}

fn main() {
    let nodes = usize::try_from(env_number("RKUBELET_BENCH_NODES", 100)).unwrap_or(100);
    let idle = Duration::from_secs(env_number("RKUBELET_BENCH_IDLE_SECS", 60));
    let c = cluster::Cluster::start("bench");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfigs: Vec<_> = (0..nodes)
        .map(|i| c.node_kubeconfig(&format!("sim-{i:03}"), 30))
        .collect();
    let mut ports = ports_outside_the_ephemeral_range(2 * nodes).into_iter();
    let start = Instant::now();
    let mut children: Vec<Child> = Vec::new();
    for (i, kubeconfig) in kubeconfigs.iter().enumerate() {
        let (Some(port), Some(healthz_port)) = (ports.next(), ports.next()) else {
            common::fail("cluster", "no free ports below the ephemeral range");
        };
        let root = dir.path().join(format!("{i}"));
        std::fs::create_dir_all(&root).expect("root");
        let child = Command::new(common::rkubelet_bin())
            .args([
                format!("--kubeconfig={}", kubeconfig.display()),
                "--container-runtime-endpoint=fake://".into(),
                format!("--hostname-override=sim-{i:03}"),
                format!("--root-dir={}", root.display()),
                format!("--port={port}"),
                format!("--cert-dir={}", root.join("pki").display()),
                format!("--healthz-port={healthz_port}"),
            ])
            .env_remove("NOTIFY_SOCKET")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("rkubelet starts");
        children.push(child);
    }
    let mut all_ready = None;
    while start.elapsed() < Duration::from_secs(60) {
        if ready_nodes(&c) >= nodes {
            all_ready = Some(start.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    match all_ready {
        Some(t) => println!(
            "cluster: {nodes} simulated nodes started at once, all Ready after {:.2} s (goal 30 s: {})",
            t.as_secs_f64(),
            verdict(t <= Duration::from_secs(30))
        ),
        None => println!(
            "cluster: only {} of {nodes} simulated nodes Ready after 60 s (goal 30 s: NOT MET)",
            ready_nodes(&c)
        ),
    }
    let window_start = std::time::SystemTime::now();
    std::thread::sleep(idle);
    let pss: u64 = children
        .iter()
        .map(|ch| pss_kib(ch.id()).unwrap_or(0))
        .sum();
    let rss: u64 = children
        .iter()
        .map(|ch| rss_kib(ch.id()).unwrap_or(0))
        .sum();
    println!(
        "cluster: after {} s idle, {nodes} nodes use {:.1} MiB in total (proportional set size; {:.1} MiB resident counting the shared binary in each) (goal 1 GiB: {})",
        idle.as_secs(),
        pss as f64 / 1024.0,
        rss as f64 / 1024.0,
        verdict(pss < 1024 * 1024)
    );
    let since = window_start
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    // Each request of the window by verb and resource, to name what a node sent beyond
    // its steady state (a Lease renewal and a read of its Node every 10 s).
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for event in c.audit_events().iter().filter(|e: &&Value| {
        e["user"]["username"]
            .as_str()
            .is_some_and(|u| u.starts_with("system:node:sim-"))
            && e["stageTimestamp"]
                .as_str()
                .and_then(rkubelet::domain::units::time::parse_rfc3339)
                .is_some_and(|t| t as f64 / 1e9 >= since)
    }) {
        let kind = format!(
            "{} {}",
            event["verb"].as_str().unwrap_or("?"),
            event["objectRef"]["resource"].as_str().unwrap_or("?")
        );
        *by_kind.entry(kind).or_default() += 1;
    }
    let requests: usize = by_kind.values().sum();
    let beyond: Vec<String> = by_kind
        .iter()
        .filter(|(kind, _)| !matches!(kind.as_str(), "update leases" | "get nodes"))
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    let per_node_minute = requests as f64 / nodes as f64 / (idle.as_secs_f64() / 60.0);
    println!(
        "cluster: an idle node sends {per_node_minute:.1} API requests a minute (upstream v1.26.1: 12; goal no more: {}); {requests} by {nodes} nodes in {} s, beyond Lease renewals and Node reads: {}",
        verdict(per_node_minute <= 12.0),
        idle.as_secs(),
        if beyond.is_empty() { "none".to_owned() } else { beyond.join(", ") }
    );
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
}
