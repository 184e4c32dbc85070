//! The kubelet API's streams (issue 15), rkubelet side by side with the upstream kubelet
//! v1.26.1 on one private control plane and a private containerd each, one kubelet after
//! the other, both with client-certificate authentication and Webhook authorization:
//! `kubectl logs` of a `RKUBELET_BENCH_LOG_MIB` (100) MiB log through the API server
//! (throughput, goal: no less than upstream's, that is limited by the API server rather
//! than the kubelet), and `kubectl exec -- true` round trips (median of
//! `RKUBELET_BENCH_EXEC_RUNS`, 10; goal: no slower than upstream's). Both rotate logs at
//! 10 MiB by default; both run with `--container-log-max-size` above the log's size so
//! both serve one file. Needs root, containerd, the control plane and the upstream
//! kubelet; fails, saying which is missing, without them.

#[allow(dead_code)]
#[path = "../tests/common/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../tests/common/containerd.rs"]
mod containerd;
#[allow(dead_code)]
#[path = "../tests/common/env_file.rs"]
mod env_file;
#[allow(dead_code)]
#[path = "../tests/common/mounts.rs"]
mod mounts;
#[allow(dead_code)]
#[path = "../tests/common/patience.rs"]
mod patience;
#[allow(dead_code)]
#[path = "../tests/common/upstream.rs"]
mod upstream;

mod common;

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cluster::Cluster;
use common::{env_number, fail, free_port, verdict};
use containerd::Containerd;
use upstream::RunningKubelet;

/// This machine's address on its default route (the API server dials the node there).
fn host_ip() -> Result<std::net::IpAddr, String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
    socket
        .connect("10.255.255.255:9")
        .map_err(|e| e.to_string())?;
    Ok(socket.local_addr().map_err(|e| e.to_string())?.ip())
}

#[derive(Clone, Copy, PartialEq)]
enum Kubelet {
    Rkubelet,
    Upstream,
}

struct Figures {
    /// Bytes received and seconds taken by `kubectl logs`.
    logs: (usize, f64),
    exec_median: f64,
}

/// A pod writing `mib` MiB of 100-byte lines, then `DONE`, then sleeping.
fn pod_yaml(node: &str, image: &str, mib: usize) -> String {
    let script = format!(
        "yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456 | head -c {}; echo; echo DONE; exec sleep 3600",
        mib * 1024 * 1024
    );
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: talker\nspec:\n  nodeName: {node}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 0\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {}]\n",
        serde_json::to_string(&script).unwrap_or_default()
    )
}

fn wait_until(secs: u64, what: &str, mut probe: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !probe() {
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {secs} s"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

fn measure(kind: Kubelet, c: &Cluster, bins: &Path, mib: usize) -> Result<Figures, String> {
    let tag = match kind {
        Kubelet::Rkubelet => "rk",
        Kubelet::Upstream => "up",
    };
    let node = format!("kstream-{tag}");
    let ctrd = Containerd::try_start(&format!("kstream{tag}"))?;
    let image = ctrd.var("BUSYBOX_IMAGE");
    let dir = mounts::TempRoot::new().map_err(|e| format!("temp dir: {e}"))?;
    let kubeconfig = c.node_kubeconfig(&node, 30);
    let common = [
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--node-ip={}", host_ip()?),
        format!("--client-ca-file={}", c.ca_cert().display()),
        "--authorization-mode=Webhook".into(),
        "--anonymous-auth=false".into(),
        format!("--container-log-max-size={}Mi", mib * 2 + 10),
    ];
    let running = match kind {
        Kubelet::Rkubelet => {
            let root = dir.path().join("root");
            std::fs::create_dir_all(&root).map_err(|e| format!("root dir: {e}"))?;
            let log = File::create(dir.path().join("rkubelet.log"))
                .map_err(|e| format!("log file: {e}"))?;
            let mut args = vec![
                format!("--container-runtime-endpoint={}", ctrd.var("CRI_ENDPOINT")),
                format!("--root-dir={}", root.display()),
                format!("--cert-dir={}", dir.path().join("pki").display()),
                format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
                format!("--pod-infra-container-image={}", ctrd.var("PAUSE_IMAGE")),
                format!("--hostname-override={node}"),
                format!("--healthz-port={}", free_port()),
                format!("--port={}", free_port()),
                "--fail-swap-on=false".into(),
                "--eviction-hard=".into(),
            ];
            args.extend(common.iter().cloned());
            let child = Command::new(common::rkubelet_bin())
                .args(&args)
                .env_remove("NOTIFY_SOCKET")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("rkubelet does not start: {e}"))?;
            RunningKubelet::Rkubelet(child)
        }
        Kubelet::Upstream => {
            let extra = common.to_vec();
            RunningKubelet::Upstream(upstream::UpstreamKubelet::start(
                bins,
                &ctrd,
                &upstream::UpstreamArgs {
                    dir: &dir.path().join("upstream"),
                    node: &node,
                    manifests: None,
                    url: None,
                    extra: &extra,
                },
            ))
        }
    };
    let manifest = dir.path().join("talker.yaml");
    std::fs::write(&manifest, pod_yaml(&node, &image, mib)).map_err(|e| e.to_string())?;
    wait_until(60, "the node registered", || {
        c.get_json(&["node", &node]).is_some()
    })?;
    let out = c.kubectl(&["apply", "-f", &manifest.display().to_string()]);
    if !out.status.success() {
        return Err(format!("kubectl apply: {out:?}"));
    }
    let mut last = String::new();
    let written = wait_until(180, "the log written", || {
        let out = c.kubectl(&["logs", "talker", "--tail=1"]);
        last = format!(
            "{} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim() == "DONE"
    });
    if let Err(e) = written {
        let status = c
            .get_json(&["pod", "talker"])
            .map(|p| p["status"].to_string())
            .unwrap_or_default();
        return Err(format!("{e}; kubectl logs: {last}; pod status: {status}"));
    }
    // The whole log through the API server, counted as it arrives.
    let t0 = Instant::now();
    let mut child = Command::new(c.var("KUBECTL"))
        .env("KUBECONFIG", c.admin_kubeconfig())
        .args(["logs", "talker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("kubectl: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let mut bytes = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match std::io::Read::read(&mut stdout, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes += n,
        }
    }
    let _ = child.wait();
    let logs = (bytes, t0.elapsed().as_secs_f64());
    let expected = mib * 1024 * 1024;
    if bytes < expected {
        return Err(format!(
            "kubectl logs gave {bytes} bytes of {expected} ({tag})"
        ));
    }
    let mut round_trips = Vec::new();
    for _ in 0..env_number("RKUBELET_BENCH_EXEC_RUNS", 10) {
        let t0 = Instant::now();
        let out = c.kubectl(&["exec", "talker", "--", "true"]);
        if !out.status.success() {
            return Err(format!("kubectl exec: {out:?}"));
        }
        round_trips.push(t0.elapsed().as_secs_f64());
    }
    round_trips.sort_by(f64::total_cmp);
    let exec_median = round_trips[round_trips.len() / 2];
    let _ = c.kubectl(&["delete", "pod", "talker", "--grace-period=0", "--force"]);
    drop(running);
    Ok(Figures { logs, exec_median })
}

fn main() {
    if let Some(missing) = Containerd::unavailable() {
        fail("kubelet_api_stream", &missing);
    }
    let bins = upstream::kube_bins();
    let _lock = upstream::lock();
    let mib = env_number("RKUBELET_BENCH_LOG_MIB", 100).max(1);
    let c = Cluster::start("kstream");
    let up = measure(Kubelet::Upstream, &c, &bins, mib).unwrap_or_else(|e| {
        fail(
            "kubelet_api_stream",
            &format!("the upstream kubelet's run: {e}"),
        )
    });
    let ours = measure(Kubelet::Rkubelet, &c, &bins, mib)
        .unwrap_or_else(|e| fail("kubelet_api_stream", &format!("rkubelet's run: {e}")));
    let rate = |(bytes, secs): (usize, f64)| bytes as f64 / (1024.0 * 1024.0) / secs.max(1e-9);
    let (o, u) = (rate(ours.logs), rate(up.logs));
    println!(
        "kubelet api: kubectl logs of a {mib} MiB log through the API server: rkubelet {o:.1} MiB/s ({:.2} s), upstream {u:.1} MiB/s ({:.2} s) (goal no less than upstream's, 5 % noise allowed: {})",
        ours.logs.1,
        up.logs.1,
        verdict(o >= u * 0.95)
    );
    let (o, u) = (ours.exec_median * 1000.0, up.exec_median * 1000.0);
    println!(
        "kubelet api: kubectl exec -- true round trip (median): rkubelet {o:.0} ms, upstream {u:.0} ms (goal no slower than upstream's, 5 % noise allowed: {})",
        verdict(o <= u * 1.05)
    );
}
