//! The kubelet API (port 10250) against a real private control plane (kube-apiserver
//! v1.26.1 started with `--kubelet-client-certificate`, Node,RBAC authorization) and a
//! private containerd: the API server reaches rkubelet through the node's
//! `daemonEndpoints` and addresses (`nodes/<node>/proxy/...`, as `kubectl` does), and curl
//! calls it directly for the security checks.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::cluster::{pick_port, Cluster};
use crate::common::node::{container, pod, Node, NODE};

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl get --raw /api/v1/nodes/<node>/proxy<path>` as the admin.
fn proxy(cluster: &Cluster, path: &str) -> Output {
    cluster.kubectl(&["get", "--raw", &format!("/api/v1/nodes/{NODE}/proxy{path}")])
}

/// curl straight to rkubelet: (HTTP status, body); status 0 when no HTTP answer (TLS
/// refused), with curl's exit code in the body.
fn curl(port: u16, path: &str, extra: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args([
            "-sk",
            "--path-as-is",
            "--max-time",
            "10",
            "-w",
            "\n%{http_code}",
        ])
        .args(extra)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl runs");
    let all = text(&out);
    let (body, code) = all.rsplit_once('\n').unwrap_or(("", &all));
    let code: u16 = code.trim().parse().unwrap_or(0);
    if code == 0 {
        return (0, format!("curl exit {:?}", out.status.code()));
    }
    (code, body.to_owned())
}

/// This machine's address on its default route.
fn host_ip() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("UDP socket");
    socket.connect("10.255.255.255:9").expect("a route");
    socket.local_addr().expect("local address").ip()
}

fn wait_for<T>(secs: u64, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
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

/// A client certificate signed by a CA the node does not trust.
fn foreign_client_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let (crt, key) = (dir.join("foreign.crt"), dir.join("foreign.key"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-subj",
            "/CN=kube-apiserver-kubelet-client/O=system:masters",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl made the foreign certificate");
    (crt, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd), containerd and root: run by scripts/test.sh"]
async fn logs_through_the_api_server_and_the_doors_stay_shut() {
    let cluster = Cluster::start("kapi");
    let mut node = Node::start("kapi");
    let port = pick_port(false);
    let pki = node.root.join("pki");
    let busybox = node.busybox.clone();
    node.write(
        "talker.yaml",
        &pod(
            "talker",
            "",
            &[],
            &[container(
                "c",
                &busybox,
                "i=0; while true; do i=$((i+1)); echo line $i; sleep 0.1; done",
            )],
        ),
    );
    node.write(
        "quitter.yaml",
        &pod(
            "quitter",
            "",
            &[],
            &[container(
                "q",
                &busybox,
                "echo run $(date +%s%N); sleep 1; exit 1",
            )],
        ),
    );
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    let ca = cluster.ca_cert();
    node.kubelet_with(&[
        &format!("--kubeconfig={}", kubeconfig.display()),
        &format!("--port={port}"),
        // The API server dials the node's InternalIP (a loopback one is refused, as
        // upstream): this machine's outbound address.
        &format!("--node-ip={}", host_ip()),
        &format!("--client-ca-file={}", ca.display()),
        &format!("--cert-dir={}", pki.display()),
    ]);
    let talker = format!("/containerLogs/default/talker-{NODE}/c");

    // 4. The serving certificate is upstream's self-signed pair in --cert-dir.
    let served_cert = pki.join("kubelet.crt");
    wait_for(30, "kubelet.crt", || served_cert.exists().then_some(()));
    assert!(pki.join("kubelet.key").exists());

    // 1. Through the API server: the node reports the real port, the API server's
    // kubelet-client certificate is accepted and authorized.
    let reported = wait_for(40, "daemonEndpoints", || {
        let n = cluster.get_json(&["node", NODE])?;
        n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"].as_u64()
    });
    assert_eq!(reported, u64::from(port));
    let health = wait_for(30, "healthz through the API server", || {
        let out = proxy(&cluster, "/healthz");
        out.status.success().then(|| text(&out))
    });
    assert_eq!(health, "ok");
    let lines = wait_for(60, "the talker's logs", || {
        let out = proxy(&cluster, &format!("{talker}?tailLines=3"));
        let body = text(&out);
        (out.status.success() && body.lines().count() == 3).then_some(body)
    });
    for line in lines.lines() {
        assert!(line.starts_with("line "), "{lines}");
    }
    let stamped = text(&proxy(
        &cluster,
        &format!("{talker}?tailLines=2&timestamps=true"),
    ));
    for line in stamped.lines() {
        let (time, rest) = line.split_once(' ').expect("timestamp and text");
        assert!(
            rkubelet::domain::units::time::parse_rfc3339(time).is_some(),
            "{stamped}"
        );
        assert!(rest.starts_with("line "), "{stamped}");
    }
    let limited = text(&proxy(&cluster, &format!("{talker}?limitBytes=7")));
    assert_eq!(limited.len(), 7, "{limited:?}");
    std::thread::sleep(Duration::from_secs(2));
    let all = text(&proxy(&cluster, &talker)).lines().count();
    let recent = text(&proxy(&cluster, &format!("{talker}?sinceSeconds=1")))
        .lines()
        .count();
    assert!(
        recent > 0 && recent * 2 < all,
        "sinceSeconds=1 gave {recent} of {all} lines"
    );

    // -f streams the lines written after it started.
    let mut follow = Command::new(cluster.var("KUBECTL"))
        .env("KUBECONFIG", cluster.admin_kubeconfig())
        .args([
            "get",
            "--raw",
            &format!("/api/v1/nodes/{NODE}/proxy{talker}?follow=true&tailLines=1"),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut stdout = follow.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    std::thread::sleep(Duration::from_secs(3));
    let _ = follow.kill();
    let _ = follow.wait();
    let streamed = reader.join().expect("reader");
    assert!(
        streamed.lines().count() >= 5,
        "follow streamed: {streamed:?}"
    );

    // -p: the previous container's log after a restart.
    let quitter = format!("/containerLogs/default/quitter-{NODE}/q");
    let previous = wait_for(60, "a previous log", || {
        let out = proxy(&cluster, &format!("{quitter}?previous=true"));
        let body = text(&out);
        (out.status.success() && body.starts_with("run ")).then_some(body)
    });
    assert_eq!(previous.lines().count(), 1, "{previous}");

    // 3. Security, straight to rkubelet.
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, body) = curl(port, "/pods", &[]);
    assert_eq!((code, body.as_str()), (401, "Unauthorized"));
    let (code, _) = curl(port, "/healthz", &[]);
    assert_eq!(code, 401, "anonymous is off by default");
    let token = text(&cluster.kubectl(&["create", "token", "default", "-n", "default"]));
    let bearer = format!("Authorization: Bearer {}", token.trim());
    let (code, body) = curl(port, &talker, &["-H", &bearer]);
    assert_eq!(
        (code, body.as_str()),
        (
            403,
            "Forbidden (user=system:serviceaccount:default:default, verb=get, resource=nodes, subresource=proxy)"
        )
    );
    let (code, _) = curl(
        port,
        "/stats/summary",
        &["-H", "Authorization: Bearer not-a-token"],
    );
    assert_eq!(code, 401);
    let (crt, key) = foreign_client_cert(dir.path());
    let (code, body) = curl(
        port,
        "/pods",
        &[
            "--cert",
            &crt.display().to_string(),
            "--key",
            &key.display().to_string(),
        ],
    );
    assert_eq!(
        code, 0,
        "a client certificate from another CA is refused in TLS: {body}"
    );
    // The API server's own client certificate, checking the self-signed serving one.
    let base = &cluster.base;
    let client = |name: &str| base.join("pki").join(name).display().to_string();
    let admin = [
        "--cacert",
        &served_cert.display().to_string(),
        "--cert",
        &client("apiserver-kubelet-client.crt"),
        "--key",
        &client("apiserver-kubelet-client.key"),
    ]
    .map(str::to_owned);
    let admin: Vec<&str> = admin.iter().map(String::as_str).collect();
    let strict = |path: &str| {
        let mut args = vec![];
        args.extend_from_slice(&admin);
        let out = Command::new("curl")
            .args([
                "-s",
                "--path-as-is",
                "--max-time",
                "10",
                "-w",
                "\n%{http_code}",
            ])
            .args(&args)
            .arg(format!("https://localhost:{port}{path}"))
            .output()
            .expect("curl runs");
        let all = text(&out);
        let (body, code) = all.rsplit_once('\n').unwrap_or(("", &all));
        (code.trim().parse::<u16>().unwrap_or(0), body.to_owned())
    };
    assert_eq!(strict("/healthz"), (200, "ok".to_owned()));
    for (path, want) in [
        (
            "/containerLogs/default/talker-n1/..%2F..%2F..%2Fetc%2Fpasswd",
            404,
        ),
        ("/containerLogs/default/../../etc/passwd", 404),
        (
            "/containerLogs/default/talker-n1/c/../../../../etc/passwd",
            404,
        ),
        ("/containerLogs/..%2Fetc/talker-n1/c", 404),
        ("/containerLogs/default/talker-n1/nope", 404),
        ("/containerLogs/default/talker-n1/c?limitBytes=-1", 422),
        (
            "/containerLogs/default/talker-n1/c?tailLines=99999999999999999999",
            400,
        ),
    ] {
        let (code, body) = strict(path);
        assert_eq!(code, want, "{path}: {body}");
        assert!(!body.contains("root:"), "{path} leaked a file: {body}");
    }
    let (code, body) =
        strict("/containerLogs/default/talker-n1/c?tailLines=9223372036854775807&limitBytes=100");
    assert_eq!(code, 200, "{body}");
    assert!(body.starts_with("line 1\n"), "{body}");
    // The read-only port is closed unless set.
    assert!(
        !node.log_text().contains("read-only port"),
        "{}",
        node.log_text()
    );
    assert!(!node.log_text().contains("panicked"));
    node.finish();
}
