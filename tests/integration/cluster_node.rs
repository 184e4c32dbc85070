//! rkubelet as a cluster node, against a real private control plane (kube-apiserver and
//! kube-controller-manager v1.26.1, etcd) started per test by scripts/test-env/cluster-up.sh,
//! and a private containerd where a real runtime matters. Missing binaries fail the tests.
//! Request counts come from the API server's audit log.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common;
use crate::common::api_pods::eventually;
use crate::common::cluster::{Cluster, ClusterOptions};
use crate::common::node::{Node, NODE};
use crate::common::{start_daemon, Daemon, BIN};
use rkubelet::domain::units::time::parse_rfc3339;
use serde_json::Value;

fn unix_secs_f64(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn audit_time(event: &Value) -> f64 {
    event["stageTimestamp"]
        .as_str()
        .and_then(parse_rfc3339)
        .map_or(0.0, |n| n as f64 / 1e9)
}

/// Audit events of `user` matching verb, resource and subresource ("" for none).
fn requests<'a>(
    events: &'a [Value],
    user: &str,
    verb: &str,
    resource: &str,
    subresource: &str,
) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["user"]["username"] == user)
        .filter(|e| e["verb"] == verb)
        .filter(|e| e["objectRef"]["resource"] == resource)
        .filter(|e| e["objectRef"]["subresource"].as_str().unwrap_or("") == subresource)
        .collect()
}

fn code(e: &Value) -> i64 {
    e["responseStatus"]["code"].as_i64().unwrap_or(0)
}

fn condition<'a>(node: &'a Value, type_: &str) -> &'a Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

fn simulated_node(cluster: &Cluster, name: &str, extra: &[String]) -> (Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = cluster.node_kubeconfig(name, 30);
    let mut args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--container-runtime-endpoint=fake://".to_string(),
        format!("--hostname-override={name}"),
        format!("--root-dir={}", dir.path().display()),
        format!("--cert-dir={}", dir.path().join("pki").display()),
    ];
    args.extend_from_slice(extra);
    (start_daemon(&args, false), dir)
}

/// 1 and 2: a fresh node on containerd registers Ready with everything the status carries;
/// the Lease is renewed every 10 s; a restarted rkubelet adopts the Node (no second create)
/// and puts back a default label an admin changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
async fn a_fresh_node_registers_ready_and_a_restart_adopts_it() {
    let cluster = Cluster::start("fresh");
    let mut node = Node::start("fresh");
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    let spawned = SystemTime::now();
    let api_port = crate::common::free_port();
    node.kubelet_with(&[
        &format!("--kubeconfig={}", kubeconfig.display()),
        &format!("--port={api_port}"),
    ]);
    let json = eventually(20, "node Ready", || {
        let n = cluster.get_json(&["node", NODE])?;
        (condition(&n, "Ready")["status"] == "True").then_some(n)
    });
    let user = format!("system:node:{NODE}");
    let events = cluster.audit_events();
    let created = requests(&events, &user, "create", "nodes", "");
    assert_eq!(created.len(), 1);
    assert_eq!(code(created[0]), 201);
    let registered_after = audit_time(created[0]) - unix_secs_f64(spawned);
    println!("FIGURE start to Node registered (and Ready, the status is in the create): {registered_after:.3} s (upstream here: 0.43 s / 0.48 s)");

    let labels = &json["metadata"]["labels"];
    assert_eq!(labels["kubernetes.io/hostname"], NODE);
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["beta.kubernetes.io/os"], "linux");
    assert!(labels["kubernetes.io/arch"].is_string());
    let status = &json["status"];
    let types: Vec<&str> = status["addresses"]
        .as_array()
        .expect("addresses")
        .iter()
        .filter_map(|a| a["type"].as_str())
        .collect();
    assert_eq!(types, ["InternalIP", "Hostname"]);
    for key in ["cpu", "memory", "pods", "ephemeral-storage"] {
        assert!(status["capacity"][key].is_string(), "capacity {key}");
        assert!(status["allocatable"][key].is_string(), "allocatable {key}");
    }
    // One hugepages-<size> entry per pool of the kernel, as upstream reports them.
    for pool in std::fs::read_dir("/sys/kernel/mm/hugepages")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = pool.file_name().to_string_lossy().into_owned();
        let kib: u64 = name
            .trim_start_matches("hugepages-")
            .trim_end_matches("kB")
            .parse()
            .expect("page size");
        let size = match kib {
            k if k % (1 << 20) == 0 => format!("{}Gi", k >> 20),
            k if k % (1 << 10) == 0 => format!("{}Mi", k >> 10),
            k => format!("{k}Ki"),
        };
        let key = format!("hugepages-{size}");
        assert!(
            status["capacity"][&key].is_string(),
            "capacity {key}: {status}"
        );
        assert!(status["allocatable"][&key].is_string(), "allocatable {key}");
    }
    let info = &status["nodeInfo"];
    // Debian's containerd says 1.6.20~ds1; the node reports what the runtime says.
    assert!(
        info["containerRuntimeVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("containerd://1.6.")),
        "{info}"
    );
    assert_eq!(info["kubeletVersion"], "v1.26.1");
    assert_eq!(info["operatingSystem"], "linux");
    assert!(!info["bootID"].as_str().unwrap_or("").is_empty());
    assert!(!info["kernelVersion"].as_str().unwrap_or("").is_empty());
    assert_eq!(
        status["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        api_port
    );
    for c in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        assert_eq!(condition(&json, c)["status"], "False", "{c}");
    }
    assert_eq!(condition(&json, "Ready")["reason"], "KubeletReady");
    assert!(!status["images"].as_array().is_none_or(Vec::is_empty));

    // The Lease moves about every 10 s.
    let renew = || {
        cluster
            .get_json(&["lease", "-n", "kube-node-lease", NODE])
            .and_then(|l| l["spec"]["renewTime"].as_str().and_then(parse_rfc3339))
    };
    let first = eventually(10, "lease", renew);
    let second = eventually(15, "lease renewed", || renew().filter(|t| *t > first));
    let third = eventually(15, "lease renewed again", || {
        renew().filter(|t| *t > second)
    });
    let step = (third - second) as f64 / 1e9;
    assert!((8.0..=12.5).contains(&step), "renewed {step:.1} s apart");
    let lease = cluster
        .get_json(&["lease", "-n", "kube-node-lease", NODE])
        .expect("lease");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
    assert_eq!(
        lease["metadata"]["ownerReferences"][0]["uid"],
        json["metadata"]["uid"]
    );

    // Restart: an admin changed a default label meanwhile.
    node.daemon.take().map(|mut d| d.terminate());
    let out = cluster.kubectl(&[
        "label",
        "node",
        NODE,
        "--overwrite",
        "kubernetes.io/arch=wrong",
    ]);
    assert!(out.status.success(), "{out:?}");
    node.kubelet_with(&[&format!("--kubeconfig={}", kubeconfig.display())]);
    let relabelled = eventually(20, "label reconciled", || {
        let n = cluster.get_json(&["node", NODE])?;
        (n["metadata"]["labels"]["kubernetes.io/arch"] != "wrong").then_some(n)
    });
    assert_eq!(relabelled["metadata"]["uid"], json["metadata"]["uid"]);
    let events = cluster.audit_events();
    let creates: Vec<i64> = requests(&events, &user, "create", "nodes", "")
        .into_iter()
        .map(code)
        .collect();
    assert_eq!(creates, [201, 409], "one create, one AlreadyExists");
}

/// 3: an idle minute of a simulated node: node-status patches at most one per five
/// minutes, six lease updates and six Node reads a minute (upstream's
/// `tryUpdateNodeStatus` reads the Node every `nodeStatusUpdateFrequency` to compare the
/// status with it), nothing else; requests per minute printed. A minute holds six
/// periods of each 10 s loop: an extra request, a loop at twice its rate or a patch per
/// period shows in it as in three minutes (the test's length until 2026-11-28).
#[test]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
fn an_idle_node_sends_few_requests() {
    let cluster = Cluster::start("idle");
    let (daemon, _dir) = simulated_node(&cluster, "idle-1", &[]);
    let user = "system:node:idle-1";
    eventually(20, "registered", || {
        requests(&cluster.audit_events(), user, "create", "nodes", "")
            .first()
            .map(|_| ())
    });
    // Leave start-up (registration, events) out of the idle window.
    std::thread::sleep(Duration::from_secs(5));
    let start = unix_secs_f64(SystemTime::now());
    std::thread::sleep(Duration::from_secs(60));
    let end = unix_secs_f64(SystemTime::now());
    let events = cluster.audit_events();
    let window: Vec<Value> = events
        .into_iter()
        .filter(|e| e["user"]["username"] == user)
        .filter(|e| (start..end).contains(&audit_time(e)))
        .collect();
    let patches = requests(&window, user, "patch", "nodes", "status").len();
    let leases = requests(&window, user, "update", "leases", "").len();
    let gets = requests(&window, user, "get", "nodes", "").len();
    let minutes = (end - start) / 60.0;
    println!(
        "FIGURE idle simulated node: {:.1} API requests/min ({} lease updates, {} node GETs, {} status patches in {:.1} min; upstream v1.26.1: 6 node GETs + 6 lease updates a minute plus a patch per 5 min)",
        window.len() as f64 / minutes,
        leases,
        gets,
        patches,
        minutes
    );
    assert!(patches <= 1, "{patches} status patches");
    assert!((5..=7).contains(&leases), "{leases} lease updates");
    assert!((5..=7).contains(&gets), "{gets} node GETs");
    assert_eq!(
        window.len(),
        patches + leases + gets,
        "nothing else: {window:#?}"
    );
    drop(daemon);
}

/// 4: TLS bootstrap from a bootstrap token, then rotation with a short signing duration.
#[test]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
fn tls_bootstrap_then_rotation_before_expiry() {
    let cluster = Cluster::start_with(
        "tls",
        ClusterOptions {
            signing_duration: Some("2m".into()),
            ..ClusterOptions::default()
        },
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let cert_dir = dir.path().join("pki");
    let kubeconfig = dir.path().join("kubelet.conf");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nrotateCertificates: true\nserverTLSBootstrap: true\n",
    )
    .expect("config");
    let port = common::free_port();
    let args = vec![
        format!("--config={}", config.display()),
        format!(
            "--bootstrap-kubeconfig={}",
            cluster.bootstrap_kubeconfig().display()
        ),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--cert-dir={}", cert_dir.display()),
        "--container-runtime-endpoint=fake://".to_string(),
        "--hostname-override=tls-1".to_string(),
        format!("--root-dir={}", dir.path().display()),
        format!("--port={port}"),
        format!("--node-ip={}", common::kubelet_api::host_ip()),
    ];
    let daemon = start_daemon(&args, false);
    let user = "system:node:tls-1";
    eventually(30, "registered as the node", || {
        requests(&cluster.audit_events(), user, "create", "nodes", "")
            .first()
            .map(|_| ())
    });
    let csrs = cluster.get_json(&["csr"]).expect("csrs");
    let bootstrap_csr = csrs["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|c| {
            c["spec"]["username"]
                .as_str()
                .unwrap_or("")
                .starts_with("system:bootstrap:")
        })
        .expect("the bootstrap CSR")
        .clone();
    assert!(bootstrap_csr["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .starts_with("node-csr-"));
    assert_eq!(
        bootstrap_csr["spec"]["signerName"],
        "kubernetes.io/kube-apiserver-client-kubelet"
    );
    let link = cert_dir.join("kubelet-client-current.pem");
    let subject = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-in"])
        .arg(&link)
        .output()
        .expect("openssl");
    let subject = String::from_utf8_lossy(&subject.stdout);
    assert!(
        subject.contains("O = system:nodes") && subject.contains("CN = system:node:tls-1"),
        "{subject}"
    );
    let written = std::fs::read_to_string(&kubeconfig).expect("kubeconfig written");
    assert!(written.contains(&link.display().to_string()), "{written}");
    assert!(!cert_dir.join("kubelet-client.key.tmp").exists());

    // serverTLSBootstrap: the node asks for a serving certificate as itself; approved, it
    // is what the kubelet API serves.
    let first_serving = approve_serving_csr(&cluster, user, 1);
    let served = eventually(30, "the approved serving certificate served", || {
        let served = served_serial(port)?;
        (Some(&served) == serial_of(&cert_dir.join("kubelet-server-current.pem")).as_ref())
            .then_some(served)
    });
    let serving_issued = Instant::now();

    // Rotation: the node asks again as itself before its certificate expires. The signer
    // backdates by 5 minutes, so the certificate lives 7 minutes from its NotBefore and
    // 70-90 % of that falls between 6 s before and 78 s after its issue: a renewal can
    // come right after the bootstrap, even in the same second (when its pair's file name,
    // which has upstream's one-second stamp, is the bootstrap's). So the renewal is told
    // by the current certificate's serial, not by a count of pair files.
    let bootstrap_serial = {
        use base64::Engine;
        let pem = bootstrap_csr["status"]["certificate"]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .expect("the bootstrap CSR's certificate");
        serial_of_pem(&pem).expect("the bootstrap certificate's serial")
    };
    let issued = Instant::now();
    let renewal_csr = eventually(150, "a renewal CSR from the node", || {
        let csrs = cluster.get_json(&["csr"])?;
        csrs["items"]
            .as_array()?
            .iter()
            .find(|c| c["spec"]["username"] == user && c["spec"]["signerName"] == CLIENT_SIGNER)
            .cloned()
    });
    let created = |csr: &Value| {
        csr["metadata"]["creationTimestamp"]
            .as_str()
            .and_then(parse_rfc3339)
            .map_or(0.0, |n| n as f64 / 1e9)
    };
    println!(
        "FIGURE rotation requested {:.0} s after the bootstrap request (2 m signing duration, backdated 5 m by the signer)",
        created(&renewal_csr) - created(&bootstrap_csr)
    );
    eventually(60, "a renewed client certificate in use", || {
        serial_of(&link)
            .filter(|s| *s != bootstrap_serial)
            .map(|_| ())
    });
    // Past the first certificate's expiry the node still works: lease updates succeed
    // with no 401 in between.
    let deadline = issued + Duration::from_secs(150);
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
    let since = unix_secs_f64(SystemTime::now()) - 20.0;
    eventually(
        20,
        "lease renewed after the first certificate expired",
        || {
            let events = cluster.audit_events();
            requests(&events, user, "update", "leases", "")
                .iter()
                .any(|e| audit_time(e) > since && code(e) == 200)
                .then_some(())
        },
    );
    let events = cluster.audit_events();
    let refused: Vec<&Value> = events
        .iter()
        .filter(|e| code(e) == 401 && e["user"]["username"] == user)
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");

    // The serving certificate is renewed too, at 70-90 % of its 2 minutes, and the new
    // one is served without a restart.
    let second_serving = approve_serving_csr(&cluster, user, 2);
    assert_ne!(first_serving, second_serving);
    let renewed = eventually(30, "the renewed serving certificate served", || {
        let now = served_serial(port)?;
        (now != served
            && Some(&now) == serial_of(&cert_dir.join("kubelet-server-current.pem")).as_ref())
        .then_some(now)
    });
    println!(
        "FIGURE serving certificate renewed and served {:.0} s after the first (2 m signing duration): serial {served} then {renewed}",
        serving_issued.elapsed().as_secs_f64()
    );
    assert!(daemon.proc().alive(), "rkubelet restarted or died");
    drop(daemon);
}

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// Waits for the `nth` kubelet-serving CSR of `user` (upstream's controller manager leaves
/// them to an approver), approves it and returns its name.
fn approve_serving_csr(cluster: &Cluster, user: &str, nth: usize) -> String {
    let name = eventually(150, "a kubelet-serving CSR from the node", || {
        let csrs = cluster.get_json(&["csr"])?;
        let mut serving: Vec<(String, String)> = csrs["items"]
            .as_array()?
            .iter()
            .filter(|c| {
                c["spec"]["username"] == user
                    && c["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
            })
            .map(|c| {
                let created = c["metadata"]["creationTimestamp"].as_str().unwrap_or("");
                let name = c["metadata"]["name"].as_str().unwrap_or("");
                (created.to_owned(), name.to_owned())
            })
            .collect();
        serving.sort();
        serving.get(nth - 1).map(|(_, name)| name.clone())
    });
    let out = cluster.kubectl(&["certificate", "approve", &name]);
    assert!(out.status.success(), "{out:?}");
    name
}

/// The serial of the certificate served on 127.0.0.1:`port`.
fn served_serial(port: u16) -> Option<String> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{port} </dev/null 2>/dev/null | openssl x509 -noout -serial"
        ))
        .output()
        .ok()?;
    let serial = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && serial.starts_with("serial=")).then_some(serial)
}

/// The serial of the first certificate in `pem`.
fn serial_of_pem(pem: &[u8]) -> Option<String> {
    use std::io::Write;
    let mut child = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-serial"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(pem).ok()?;
    let out = child.wait_with_output().ok()?;
    let serial = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && serial.starts_with("serial=")).then_some(serial)
}

/// The serial of the first certificate in the PEM file at `path`.
fn serial_of(path: &Path) -> Option<String> {
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-in"])
        .arg(path)
        .output()
        .ok()?;
    let serial = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && serial.starts_with("serial=")).then_some(serial)
}

/// 5: containerd stopped: Ready False "container runtime is down" within 30 s; started
/// again: Ready True within 30 s; NodeNotReady and NodeReady events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
async fn readiness_follows_containerd() {
    let cluster = Cluster::start("runtime");
    let mut node = Node::start("runtime");
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    node.kubelet_with(&[&format!("--kubeconfig={}", kubeconfig.display())]);
    let ready = |want: &str| {
        let n = cluster.get_json(&["node", NODE])?;
        (condition(&n, "Ready")["status"] == want).then(|| condition(&n, "Ready").clone())
    };
    eventually(20, "Ready", || ready("True"));
    node.ctrd.stop_daemon();
    let stopped = Instant::now();
    let down = eventually(40, "Ready False", || ready("False"));
    let took = stopped.elapsed();
    println!(
        "FIGURE containerd stopped to Ready False: {:.1} s",
        took.as_secs_f64()
    );
    assert!(took <= Duration::from_secs(30), "{took:?}");
    assert_eq!(down["message"], "container runtime is down");
    node.ctrd.start_daemon();
    let started = Instant::now();
    eventually(40, "Ready True again", || ready("True"));
    let took = started.elapsed();
    println!(
        "FIGURE containerd started to Ready True: {:.1} s",
        took.as_secs_f64()
    );
    assert!(took <= Duration::from_secs(30), "{took:?}");
    let events = eventually(20, "both events", || {
        let list = cluster.get_json(&["events", "-n", "default"])?;
        let reasons: Vec<String> = list["items"]
            .as_array()?
            .iter()
            .filter(|e| e["involvedObject"]["name"] == NODE)
            .filter_map(|e| e["reason"].as_str().map(str::to_string))
            .collect();
        (reasons.contains(&"NodeNotReady".to_string())
            && reasons.contains(&"NodeReady".to_string()))
        .then_some(reasons)
    });
    assert!(events.contains(&"Starting".to_string()), "{events:?}");
}

const STATIC_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: steady
spec:
  containers:
  - name: main
    image: BUSYBOX
    command: [sh, -c, 'sleep 100000']
";

/// 6: kube-apiserver stopped for a minute (two until 2026-11-28: each loop's failure is
/// logged at its first attempt and then once a minute, so the second minute added a
/// repeat of each and nothing else to check): the static pod runs on untouched, the log
/// reports the outage without a flood (at most 10 lines and 4 a minute, fault 3's
/// bound), the Lease is renewed within 15 s of the return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
async fn an_api_server_outage_leaves_pods_alone() {
    let cluster = Cluster::start("outage");
    let mut node = Node::start("outage");
    node.write("steady.yaml", &STATIC_POD.replace("BUSYBOX", &node.busybox));
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    node.kubelet_with(&[&format!("--kubeconfig={}", kubeconfig.display())]);
    let pod = format!("steady-{NODE}");
    let before = node.wait_running(&pod, "main", 60).await;
    eventually(20, "Ready", || {
        let n = cluster.get_json(&["node", NODE])?;
        (condition(&n, "Ready")["status"] == "True").then_some(())
    });
    let log_lines_before = node.log_text().lines().count();
    cluster.stop_component("apiserver");
    tokio::time::sleep(Duration::from_secs(60)).await;
    let during = node.log_text().lines().count() - log_lines_before;
    let outage_log: Vec<String> = node
        .log_text()
        .lines()
        .skip(log_lines_before)
        .map(str::to_string)
        .collect();
    println!("FIGURE log lines during a 1-minute API server outage: {during}");
    assert!(
        during <= 14,
        "{during} log lines:\n{}",
        outage_log.join("\n")
    );
    assert!(
        outage_log
            .iter()
            .any(|l| l.contains("renewing the node lease failed")),
        "{}",
        outage_log.join("\n")
    );
    let after = node.running(&pod, "main").await.expect("still running");
    assert_eq!(
        after.status.id, before.status.id,
        "the container was not restarted"
    );
    assert_eq!(after.status.attempt, before.status.attempt);
    cluster.start_component("apiserver");
    let back = Instant::now();
    let since = unix_secs_f64(SystemTime::now());
    let user = format!("system:node:{NODE}");
    eventually(30, "lease renewed after the return", || {
        let events = cluster.audit_events();
        requests(&events, &user, "update", "leases", "")
            .iter()
            .any(|e| audit_time(e) >= since && code(e) == 200)
            .then_some(())
    });
    let took = back.elapsed();
    println!(
        "FIGURE API server ready again to Lease renewed: {:.1} s",
        took.as_secs_f64()
    );
    assert!(took <= Duration::from_secs(15), "{took:?}");
}

/// The node's Ready condition as (status, reason).
fn ready_of(node: &Value) -> (String, String) {
    let ready = condition(node, "Ready");
    (
        ready["status"].as_str().unwrap_or_default().to_string(),
        ready["reason"].as_str().unwrap_or_default().to_string(),
    )
}

fn has_unreachable_taint(node: &Value) -> bool {
    node["spec"]["taints"].as_array().is_some_and(|t| {
        t.iter()
            .any(|t| t["key"] == "node.kubernetes.io/unreachable")
    })
}

/// Issue 30: after an API server outage (60 s, or `RKUBELET_TEST_OUTAGE_SECS`) the node
/// controller marks the node `Unknown` (its Lease and status went stale past the 40 s
/// grace period) and taints it `node.kubernetes.io/unreachable`. rkubelet compares its
/// status with the Node the API server holds (as upstream's `tryUpdateNodeStatus`), so the
/// node is Ready again within one status period (10 s, plus slack) of the controller's
/// change, not after the 5-minute report frequency. Figures: the controller's mark to
/// Ready, and to the taint's removal (the controller's own pace).
#[test]
#[ignore = "needs a control plane (kube-apiserver, kube-controller-manager, etcd) and root: run by scripts/test.sh"]
fn after_an_outage_the_node_is_ready_within_one_status_period_of_being_marked_unknown() {
    let outage = std::env::var("RKUBELET_TEST_OUTAGE_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(60);
    let cluster = Cluster::start("outage-ready");
    let name = "outage-ready-1";
    let (daemon, _dir) = simulated_node(&cluster, name, &[]);
    eventually(30, "Ready before the outage", || {
        let n = cluster.get_json(&["node", name])?;
        (ready_of(&n).0 == "True").then_some(())
    });
    cluster.stop_component("apiserver");
    std::thread::sleep(Duration::from_secs(outage));
    cluster.start_component("apiserver");
    let back = Instant::now();
    // Watch the Node every 200 ms: the controller's mark, then rkubelet's correction.
    let mut marked: Option<Instant> = None;
    let mut ready_again: Option<Instant> = None;
    let mut untainted: Option<Instant> = None;
    let mut seen = Vec::new();
    // The controller marks the node only when it looks before rkubelet's Lease is renewed
    // after the return, which a loaded machine can turn around. Then the test marks it
    // as the controller would: what is under test is rkubelet's correction of a
    // condition someone else changed.
    let mut marked_by = "the node controller";
    let deadline = back + Duration::from_secs(150);
    while Instant::now() < deadline && untainted.is_none() {
        if marked.is_none() && back.elapsed() > Duration::from_secs(40) {
            let patch = r#"{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status."}]}}"#;
            let out = cluster.kubectl(&[
                "patch",
                "node",
                name,
                "--subresource=status",
                "--type=strategic",
                "-p",
                patch,
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            marked_by = "the test, as the node controller would";
        }
        if let Some(n) = cluster.get_json(&["node", name]) {
            let (status, reason) = ready_of(&n);
            if seen.last() != Some(&(status.clone(), reason.clone())) {
                seen.push((status.clone(), reason.clone()));
            }
            match (marked, ready_again) {
                (None, _) if status == "Unknown" => marked = Some(Instant::now()),
                (Some(_), None) if status == "True" => ready_again = Some(Instant::now()),
                (Some(_), Some(_)) if !has_unreachable_taint(&n) => {
                    untainted = Some(Instant::now())
                }
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let marked = marked.unwrap_or_else(|| {
        panic!(
            "the node controller never marked the node Unknown within 150 s of the API server's return (Ready went {seen:?}); rkubelet's log:\n{}",
            daemon.log_text()
        )
    });
    let ready_again = ready_again.unwrap_or_else(|| {
        panic!(
            "not Ready again within {:.0} s of being marked Unknown (Ready went {seen:?}); rkubelet's log:\n{}",
            deadline.duration_since(marked).as_secs_f64(),
            daemon.log_text()
        )
    });
    let took = ready_again.duration_since(marked);
    println!(
        "FIGURE {outage} s API server outage: marked Unknown by {marked_by} {:.1} s after the return, Ready again {:.1} s after the mark (one status period: 10 s; upstream v1.26.1: 4 s); the unreachable taint gone {} after the mark",
        marked.duration_since(back).as_secs_f64(),
        took.as_secs_f64(),
        untainted.map_or("not within 150 s".to_string(), |t| format!(
            "{:.1} s",
            t.duration_since(marked).as_secs_f64()
        ))
    );
    assert!(
        took <= Duration::from_secs(12),
        "Ready again {took:?} after the mark (Ready went {seen:?})"
    );
    drop(daemon);
}

/// 7: bad connection input is reported clearly, naming the file or server, and the static
/// pods of the simulated node run anyway.
#[test]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
fn bad_kubeconfigs_are_reported_and_static_pods_run() {
    let cluster = Cluster::start("bad");
    let other = Cluster::start("bad-other");
    let dir = tempfile::tempdir().expect("tempdir");
    let good = std::fs::read_to_string(cluster.node_kubeconfig("bad-1", 30)).expect("kubeconfig");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("written");
        p
    };
    use base64::Engine;
    let b64 = |p: &Path| {
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(p).expect("read"))
    };
    let port = common::free_port();
    let unreachable = write(
        "unreachable",
        &good.replace(&cluster.server(), &format!("https://127.0.0.1:{port}")),
    );
    let wrong_ca = write(
        "wrong-ca",
        &good.replace(&b64(&cluster.ca_cert()), &b64(&other.ca_cert())),
    );
    let expired = cluster.node_kubeconfig("bad-1-old", -1);
    let junk = write("junk", "{{{ this is not: [yaml");
    let missing = dir.path().join("absent.conf");
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("dir");
    std::fs::write(
        manifests.join("pod.yaml"),
        STATIC_POD.replace("BUSYBOX", "busybox"),
    )
    .expect("manifest");
    let cases: [(&Path, Vec<String>); 5] = [
        (
            &unreachable,
            vec![format!("127.0.0.1:{port}"), "onnection refused".into()],
        ),
        (&wrong_ca, vec!["UnknownIssuer".into()]),
        (&expired, vec!["unauthorized".into()]),
        (
            &junk,
            vec![junk.display().to_string(), "not a valid kubeconfig".into()],
        ),
        (
            &missing,
            vec![missing.display().to_string(), "No such file".into()],
        ),
    ];
    for (kubeconfig, expected) in cases {
        let root = tempfile::tempdir().expect("root");
        let args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            "--container-runtime-endpoint=fake://".to_string(),
            "--hostname-override=bad-1".to_string(),
            format!("--root-dir={}", root.path().display()),
            format!("--pod-manifest-path={}", manifests.display()),
            common::read_only_port_flag(),
        ];
        let daemon = start_daemon(&args, false);
        let line = eventually(15, "the error in the log", || {
            let log = daemon.log_text();
            log.lines()
                .find(|l| l.contains("failed") && expected.iter().all(|e| l.contains(e.as_str())))
                .map(str::to_string)
        });
        println!("{}: {line}", kubeconfig.display());
        let pods = eventually(15, "the static pod runs", || {
            let (code, body) = common::pods_get(&daemon)?;
            (code == 200 && body.contains("\"Running\"")).then_some(body)
        });
        assert!(pods.contains("steady-bad-1"), "{pods}");
        drop(daemon);
    }
}

/// 8: a label node restriction would refuse is refused at start, in upstream's words.
#[test]
fn a_node_role_label_is_refused_with_upstreams_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(BIN)
        .args([
            "--node-labels=node-role.kubernetes.io/worker=",
            "--container-runtime-endpoint=fake://",
            &format!("--root-dir={}", dir.path().display()),
            "--healthz-port=0",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [node-role.kubernetes.io/worker]"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io)"),
        "{stderr}"
    );
}

/// The harness itself: two control planes side by side, each with its own CA; the node
/// identity is `system:node:NAME` (the Node authorizer applies); the bootstrap token may
/// create CSRs.
#[test]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
fn harness_runs_two_control_planes_with_node_and_bootstrap_identities() {
    let options = ClusterOptions {
        nodes: vec!["harness-a".into()],
        ..ClusterOptions::default()
    };
    let a = Cluster::start_with("harness-a", options);
    let b = Cluster::start("harness-b");
    assert_ne!(a.server(), b.server());

    let node_kubeconfig = a.base.join("node-harness-a.kubeconfig");
    let as_node = |kubeconfig: &Path, args: &[&str]| {
        std::process::Command::new(a.var("KUBECTL"))
            .env("KUBECONFIG", kubeconfig)
            .args(args)
            .output()
            .expect("kubectl runs")
    };
    let nodes = as_node(&node_kubeconfig, &["get", "nodes"]);
    assert!(nodes.status.success(), "{nodes:?}");
    let secrets = as_node(&node_kubeconfig, &["get", "secrets", "-A"]);
    assert!(!secrets.status.success());
    assert!(
        String::from_utf8_lossy(&secrets.stderr).contains("system:node:harness-a"),
        "{secrets:?}"
    );
    let mut foreign = std::fs::read_to_string(&node_kubeconfig).expect("kubeconfig");
    foreign = foreign.replace(&a.server(), &b.server());
    let foreign_path = a.base.join("foreign.kubeconfig");
    std::fs::write(&foreign_path, foreign).expect("written");
    assert!(!as_node(&foreign_path, &["get", "nodes"]).status.success());
    let csrs = as_node(&a.bootstrap_kubeconfig(), &["get", "csr"]);
    assert!(csrs.status.success(), "{csrs:?}");
    assert!(!as_node(&a.bootstrap_kubeconfig(), &["get", "nodes"])
        .status
        .success());
    let expired = a.node_kubeconfig("harness-old", -1);
    assert!(!as_node(&expired, &["get", "nodes"]).status.success());
    assert!(a
        .audit_events()
        .iter()
        .any(|e| e["user"]["username"] == "system:node:harness-a"));
}

/// The dry run in connected mode reads the Node and shows the one it would register, then,
/// once a node registered it, that it would adopt it: and it writes nothing.
#[test]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
fn the_dry_run_shows_the_node_it_would_register_and_then_adopt() {
    let cluster = Cluster::start("dryrun");
    let name = "dry-node";
    let kubeconfig = cluster.node_kubeconfig(name, 30);
    let dir = tempfile::tempdir().expect("tempdir");
    let dry_run = || -> Value {
        let out = std::process::Command::new(BIN)
            .args([
                "--dry-run",
                "--dry-run-output=json",
                "--container-runtime-endpoint=fake://",
                &format!("--kubeconfig={}", kubeconfig.display()),
                &format!("--hostname-override={name}"),
                &format!("--root-dir={}", dir.path().display()),
                "--node-labels=node.kubernetes.io/pool=dry",
            ])
            .output()
            .expect("runs");
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
    };
    let plan = dry_run();
    let c = &plan["cluster"];
    assert_eq!(c["action"], "register", "{plan}");
    assert_eq!(
        c["nodeObject"]["metadata"]["labels"]["node.kubernetes.io/pool"],
        "dry"
    );
    assert!(
        cluster.get_json(&["node", name]).is_none(),
        "the dry run created nothing"
    );

    let (mut daemon, _dir) = simulated_node(
        &cluster,
        name,
        &["--node-labels=node.kubernetes.io/pool=dry".to_string()],
    );
    eventually(20, "node registered", || cluster.get_json(&["node", name]));
    assert!(daemon.terminate().success());
    let user = format!("system:node:{name}");
    let writes = || {
        cluster
            .audit_events()
            .iter()
            .filter(|e| e["user"]["username"] == user.as_str())
            .filter(|e| !["get", "list", "watch"].contains(&e["verb"].as_str().unwrap_or("")))
            .count()
    };
    // The audit log may still be writing the stopped daemon's last requests: count once
    // the count holds still.
    let mut before = writes();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_secs(1));
        let now = writes();
        if now == before {
            break;
        }
        before = now;
    }
    assert!(before > 0, "the daemon registered the node");
    let plan = dry_run();
    assert_eq!(plan["cluster"]["action"], "adopt", "{plan}");
    assert_eq!(plan["cluster"]["metadataPatch"], Value::Null, "{plan}");
    assert_eq!(writes(), before, "the dry run wrote nothing");
}
