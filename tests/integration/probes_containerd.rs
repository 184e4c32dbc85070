//! Probes and lifecycle hooks end to end on a private containerd: busybox containers
//! probed by exec, HTTP (`httpd`) and TCP, a startup probe gating liveness, a failing
//! `postStart`, a `preStop` before SIGTERM. One node runs every pod at once so the
//! whole test takes about as long as its slowest pod. Needs root and containerd; fails,
//! saying which is missing, without them.

use std::time::{Duration, Instant};

use rkubelet::ports::runtime::RuntimeService;
use serde_json::Value;

use crate::common;

use common::node::*;

/// A pod manifest with the given `spec` lines after `terminationGracePeriodSeconds`.
fn manifest(name: &str, grace: i64, body: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: {grace}\n{body}"
    )
}

/// One busybox container `main` running `script`, with further container lines.
fn main_container(image: &str, script: &str, extra: &str) -> String {
    let script = serde_json::to_string(script).expect("a JSON string");
    format!(
        "  containers:\n  - name: main\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n{extra}"
    )
}

fn main_status(pod: &Value) -> Option<&Value> {
    pod["status"]["containerStatuses"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "main")
}

fn condition(pod: &Value, kind: &str) -> Option<String> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

/// `(ready, Ready condition)` of pod `name` in `/pods` once its main container runs.
fn readiness(node: &Node, name: &str) -> Option<(bool, String)> {
    let pod = node.pod_json(name)?;
    let main = main_status(&pod)?;
    main["state"].get("running")?;
    Some((main["ready"].as_bool()?, condition(&pod, "Ready")?))
}

async fn exec(node: &Node, pod: &str, script: &str) {
    let main = node.wait_running(pod, "main", 30).await;
    let cmd = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    let result = node
        .rt
        .exec_sync(&main.status.id, &cmd, Duration::from_secs(10))
        .await
        .expect("exec in the container");
    assert_eq!(result.exit_code, 0, "{script}: {result:?}");
}

fn log_has(node: &Node, needles: &[&str]) -> Option<()> {
    node.log_text()
        .lines()
        // klog quotes the message: its own quotes come escaped.
        .map(|l| l.replace("\\\"", "\""))
        .any(|l| needles.iter().all(|n| l.contains(n)))
        .then_some(())
}

/// The bytes an HTTP/2 server sends to answer one `grpc.health.v1.Health/Check` on
/// stream 1 with `status` (1 SERVING, 2 NOT_SERVING): SETTINGS, its ACK, the response
/// headers (HPACK: `:status 200` indexed, `content-type: application/grpc` literal),
/// the message, the `grpc-status: 0` trailers ending the stream.
fn grpc_health_answer(status: u8) -> Vec<u8> {
    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len())
            .expect("small frame")
            .to_be_bytes();
        let mut f = vec![len[1], len[2], len[3], kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }
    let mut headers = vec![0x88, 0x0f, 0x10, 16];
    headers.extend_from_slice(b"application/grpc");
    let message = [0x08, status];
    let mut data = vec![0u8, 0, 0, 0, message.len() as u8];
    data.extend_from_slice(&message);
    let mut trailers = vec![0x00, 11];
    trailers.extend_from_slice(b"grpc-status");
    trailers.extend_from_slice(&[1, b'0']);
    [
        frame(4, 0, 0, &[]),
        frame(4, 1, 0, &[]),
        frame(1, 0x4, 1, &headers),
        frame(0, 0, 1, &data),
        frame(1, 0x5, 1, &trailers),
    ]
    .concat()
}

#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn probes_and_hooks_on_containerd() {
    let mut node = Node::start("probes");
    let image = node.busybox.clone();
    let hook_dir = tempfile::tempdir().expect("hook dir");
    let hook_path = hook_dir.path().display().to_string();

    // 1. Exec liveness that starts failing after 10 s: restarted once.
    node.write(
        "live.yaml",
        &manifest(
            "live",
            1,
            &main_container(
                &image,
                "touch /tmp/healthy; sleep 10; rm /tmp/healthy; sleep 3600",
                "    livenessProbe:\n      exec:\n        command: [\"test\", \"-f\", \"/tmp/healthy\"]\n      periodSeconds: 1\n      failureThreshold: 3\n",
            ),
        ),
    );
    // 2. HTTP readiness against httpd: ready while /www/ready exists. A TCP liveness
    //    probe on the same port keeps the container alive (after a second: httpd may not
    //    listen yet in the first milliseconds on a loaded machine).
    node.write(
        "web.yaml",
        &manifest(
            "web",
            1,
            &main_container(
                &image,
                "mkdir -p /www; exec httpd -f -p 8080 -h /www",
                "    readinessProbe:\n      httpGet:\n        path: /ready\n        port: http\n      periodSeconds: 1\n    livenessProbe:\n      tcpSocket:\n        port: 8080\n      initialDelaySeconds: 1\n      periodSeconds: 1\n      failureThreshold: 1\n    ports:\n    - name: http\n      containerPort: 8080\n",
            ),
        ),
    );
    // 3. Startup probe (30 × 1 s) holding off a liveness probe that would kill at once.
    node.write(
        "slow.yaml",
        &manifest(
            "slow",
            1,
            &main_container(
                &image,
                "sleep 6; touch /tmp/started; sleep 3600",
                "    startupProbe:\n      exec:\n        command: [\"test\", \"-f\", \"/tmp/started\"]\n      periodSeconds: 1\n      failureThreshold: 30\n    livenessProbe:\n      exec:\n        command: [\"test\", \"-f\", \"/tmp/started\"]\n      periodSeconds: 1\n      failureThreshold: 1\n",
            ),
        ),
    );
    // 4. preStop writing a file then sleeping, before SIGTERM reaches the process.
    node.write(
        "stop.yaml",
        &manifest(
            "stop",
            10,
            &format!(
                "  volumes:\n  - name: hook\n    hostPath:\n      path: {hook_path}\n{}",
                main_container(
                    &image,
                    "trap 'read -r up _ < /proc/uptime; echo $up > /hook/term; exit 0' TERM; while true; do sleep 1 & wait; done",
                    "    volumeMounts:\n    - name: hook\n      mountPath: /hook\n    lifecycle:\n      preStop:\n        exec:\n          command: [\"sh\", \"-c\", \"read -r up _ < /proc/uptime; echo $up > /hook/prestop; sleep 2\"]\n",
                )
            ),
        ),
    );
    // 5. A postStart hook that fails.
    node.write(
        "hook.yaml",
        &manifest(
            "hook",
            1,
            &main_container(
                &image,
                "sleep 3600",
                "    lifecycle:\n      postStart:\n        exec:\n          command: [\"false\"]\n",
            ),
        ),
    );
    // 6. An exec probe outliving its timeout: a failure, in upstream's words.
    node.write(
        "tout.yaml",
        &manifest(
            "tout",
            1,
            &main_container(
                &image,
                "sleep 3600",
                "    readinessProbe:\n      exec:\n        command: [\"sleep\", \"5\"]\n      timeoutSeconds: 1\n      periodSeconds: 2\n",
            ),
        ),
    );
    // 7. An HTTP probe redirected to another host: a success with a warning.
    node.write(
        "away.yaml",
        &manifest(
            "away",
            1,
            &main_container(
                &image,
                r#"mkdir -p /www/cgi-bin; printf '#!/bin/sh\necho "Status: 302 Found"\necho "Location: http://192.0.2.1/elsewhere"\necho ""\necho moved\n' > /www/cgi-bin/away; chmod +x /www/cgi-bin/away; exec httpd -f -p 8080 -h /www"#,
                "    readinessProbe:\n      httpGet:\n        path: /cgi-bin/away\n        port: 8080\n      periodSeconds: 1\n",
            ),
        ),
    );
    // 8. A gRPC liveness probe: busybox `nc` plays a health server answering from a
    //    file the test rewrites (SERVING, then NOT_SERVING).
    let grpc_dir = hook_dir.path().join("grpc");
    std::fs::create_dir_all(&grpc_dir).expect("grpc dir");
    std::fs::write(grpc_dir.join("resp"), grpc_health_answer(1)).expect("answer");
    // Answers on the client's stream 1 once the client has opened it: after its
    // connection preface (24 bytes, sent with its first frames), then a pause for the
    // rest. An answer on a timer alone reached a client slowed by a loaded machine before
    // its request, which it rightly took as a protocol error (CI, 2026-11-30).
    std::fs::write(
        grpc_dir.join("serve.sh"),
        "#!/bin/sh\nhead -c 24 >/dev/null\nsleep 0.5\ncat /grpc/resp\nsleep 1\n",
    )
    .expect("script");
    std::fs::set_permissions(
        grpc_dir.join("serve.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    node.write(
        "grpc.yaml",
        &manifest(
            "grpc",
            1,
            &format!(
                "  volumes:\n  - name: grpc\n    hostPath:\n      path: {}\n{}",
                grpc_dir.display(),
                main_container(
                    &image,
                    "exec nc -ll -p 9000 -e /grpc/serve.sh",
                    "    volumeMounts:\n    - name: grpc\n      mountPath: /grpc\n    livenessProbe:\n      grpc:\n        port: 9000\n      initialDelaySeconds: 1\n      periodSeconds: 1\n      timeoutSeconds: 5\n      failureThreshold: 3\n",
                )
            ),
        ),
    );
    // 9. A host-network pod: its sandbox has no IP, so an HTTP probe without a host goes
    //    to the node (the local system standalone), on a port free on the host.
    let host_port = crate::common::free_port();
    node.write(
        "hostweb.yaml",
        &manifest(
            "hostweb",
            1,
            &format!(
                "  hostNetwork: true\n{}",
                main_container(
                    &image,
                    &format!("mkdir -p /www; echo ok > /www/ready; exec httpd -f -p {host_port} -h /www"),
                    &format!("    readinessProbe:\n      httpGet:\n        path: /ready\n        port: {host_port}\n      periodSeconds: 1\n"),
                )
            ),
        ),
    );
    node.kubelet();
    let started = Instant::now();

    // Readiness: not ready until the file exists.
    let (ready, cond) = eventually!(60, "web running in /pods", readiness(&node, "web-n1"));
    assert!(!ready && cond == "False", "ready {ready}, Ready {cond}");
    exec(&node, "web-n1", "echo ok > /www/ready").await;
    eventually!(
        15,
        "web ready",
        readiness(&node, "web-n1").filter(|(r, c)| *r && c == "True")
    );
    exec(&node, "web-n1", "rm /www/ready").await;
    eventually!(
        15,
        "web unready again",
        readiness(&node, "web-n1").filter(|(r, c)| !*r && c == "False")
    );
    eventually!(
        30,
        "the host-network pod ready through the node's address",
        readiness(&node, "hostweb-n1").filter(|(r, c)| *r && c == "True")
    );
    assert!(log_has(
        &node,
        &[
            "Unhealthy",
            "Readiness probe failed: HTTP probe failed with statuscode: 404"
        ]
    )
    .is_some());

    // Startup: `started` false until the file exists, then liveness passes; no restart.
    let slow = node.wait_running("slow-n1", "main", 30).await;
    let started_flag = |node: &Node| {
        node.pod_json("slow-n1")
            .as_ref()
            .and_then(main_status)
            .and_then(|m| m["started"].as_bool())
    };
    if started.elapsed() < Duration::from_secs(5) {
        assert_eq!(started_flag(&node), Some(false), "{}", node.pods_body());
    }
    eventually!(20, "slow started", started_flag(&node).filter(|s| *s));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = node.wait_running("slow-n1", "main", 5).await;
    assert_eq!((now.status.id, now.status.attempt), (slow.status.id, 0));

    // Liveness: killed after 3 failures once the file is gone, restarted (count 1).
    let restarted = eventually!(
        45,
        "live restarted",
        node.running("live-n1", "main")
            .await
            .filter(|c| c.status.attempt == 1)
    );
    assert_eq!(restarted.status.attempt, 1);
    assert!(
        log_has(&node, &["Unhealthy", "Liveness probe failed"]).is_some(),
        "{}",
        node.log_text()
    );
    assert!(log_has(
        &node,
        &[
            "Killing",
            "Container main failed liveness probe, will be restarted"
        ]
    )
    .is_some());
    // The TCP liveness probe never failed: web still on its first instance.
    let web = node.wait_running("web-n1", "main", 5).await;
    assert_eq!(web.status.attempt, 0);

    // postStart failing: the event and the kill.
    eventually!(
        30,
        "FailedPostStartHook",
        log_has(&node, &["FailedPostStartHook", "PostStartHook failed"])
    );
    eventually!(
        30,
        "killed after its postStart",
        log_has(&node, &["Killing", "FailedPostStartHook"])
    );

    // preStop on deletion: its file before SIGTERM's, all within the grace period.
    node.wait_running("stop-n1", "main", 30).await;
    // Times are the host's uptime (busybox's date has no sub-second format).
    let uptime = |text: String| -> Option<f64> { text.split(' ').next()?.trim().parse().ok() };
    let removed_at =
        uptime(std::fs::read_to_string("/proc/uptime").expect("uptime")).expect("uptime seconds");
    node.remove("stop.yaml");
    let read = |f: &str| {
        std::fs::read_to_string(hook_dir.path().join(f))
            .ok()
            .and_then(uptime)
    };
    let (pre_stop, term) = eventually!(20, "preStop and SIGTERM files", {
        match (read("prestop"), read("term")) {
            (Some(p), Some(t)) => Some((p, t)),
            _ => None,
        }
    });
    assert!(
        pre_stop < term,
        "preStop at {pre_stop}, SIGTERM seen at {term}"
    );
    // The hook sleeps 2 s: SIGTERM comes after it, and the stop ends within the grace.
    assert!(term - pre_stop >= 1.9, "{} s", term - pre_stop);
    assert!(
        term - removed_at < 10.0,
        "stopped {} s after removal",
        term - removed_at
    );
    eventually!(30, "stop pod gone", {
        node.sandboxes("stop-n1").await.is_empty().then_some(())
    });

    eventually!(
        20,
        "an exec probe timing out",
        log_has(
            &node,
            &[
                "Unhealthy",
                "Readiness probe failed: command \"sleep 5\" timed out"
            ]
        )
    );

    eventually!(
        20,
        "the redirected pod ready",
        readiness(&node, "away-n1").filter(|(r, c)| *r && c == "True")
    );
    assert!(
        log_has(
            &node,
            &[
                "ProbeWarning",
                "Readiness probe warning: Probe terminated redirects, Response body: moved"
            ]
        )
        .is_some(),
        "{}",
        node.log_text()
    );

    // gRPC: SERVING keeps the first instance; NOT_SERVING restarts it.
    let grpc = node.wait_running("grpc-n1", "main", 30).await;
    assert_eq!(grpc.status.attempt, 0);
    assert!(
        log_has(&node, &["grpc-n1", "Liveness probe failed"]).is_none(),
        "{}",
        node.log_text()
    );
    std::fs::write(grpc_dir.join("resp"), grpc_health_answer(2)).expect("answer");
    eventually!(
        30,
        "grpc restarted",
        node.running("grpc-n1", "main")
            .await
            .filter(|c| c.status.attempt == 1)
    );
    assert!(log_has(
        &node,
        &[
            "Liveness probe failed: service unhealthy (responded with \"NOT_SERVING\")",
            "grpc-n1"
        ]
    )
    .is_some());

    for pod in [
        "live", "web", "slow", "hook", "tout", "away", "grpc", "hostweb",
    ] {
        node.remove(&format!("{pod}.yaml"));
    }
    eventually!(60, "every pod gone", {
        node.all_sandboxes().await.is_empty().then_some(())
    });
    node.finish();
}

/// The API's events of pod `name`: `(reason, message)`.
fn api_events(cluster: &common::cluster::Cluster, name: &str) -> Vec<(String, String)> {
    common::api_pods::events_of(cluster, name)
        .into_iter()
        .map(|(_, reason, message)| (reason, message))
        .collect()
}

/// Connected mode: an API pod's HTTP readiness probe drives its container's `ready` and
/// the pod's `ContainersReady`/`Ready` conditions in the API server's status, both ways;
/// its exec liveness probe failing twice (`failureThreshold: 2`, every second) restarts
/// the container no sooner than the threshold allows, its `preStop` hook run first, and
/// the `Unhealthy` and `Killing` events reach the API in upstream's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd), containerd and root: run by scripts/test.sh"]
async fn probes_drive_an_api_pods_status_and_events() {
    use common::api_pods::{eventually, pod};
    let (cluster, mut node) = common::api_pods::start(
        "probes-api",
        common::cluster::ClusterOptions::default(),
        &[],
    );
    let script = "mkdir -p /www; exec httpd -f -p 8080 -h /www";
    // The preStop hook leaves its mark on the node, where the restart cannot wipe it.
    let host = tempfile::tempdir().expect("temp dir");
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probed\nspec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 5\n  volumes:\n  - name: host\n    hostPath: {{path: {}}}\n  containers:\n  - name: main\n    image: {}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {}]\n    volumeMounts: [{{name: host, mountPath: /host}}]\n    lifecycle:\n      preStop:\n        exec: {{command: [\"sh\", \"-c\", \"echo stopped >> /host/prestop\"]}}\n    readinessProbe:\n      httpGet: {{path: /ok, port: 8080}}\n      periodSeconds: 1\n      failureThreshold: 1\n    livenessProbe:\n      exec: {{command: [\"sh\", \"-c\", \"test ! -e /tmp/die\"]}}\n      periodSeconds: 1\n      failureThreshold: 2\n",
        host.path().display(),
        node.busybox,
        serde_json::to_string(script).expect("json string"),
    ));
    let ready_of = |p: &Value| {
        let kind = |k: &str| condition(p, k).unwrap_or_default();
        let main = main_status(p).and_then(|m| m["ready"].as_bool());
        (main, kind("ContainersReady"), kind("Ready"))
    };
    let running = eventually(60, "pod probed Running, not ready", || {
        let p = pod(&cluster, "probed")?;
        (p["status"]["phase"] == "Running").then_some(p)
    });
    assert_eq!(
        ready_of(&running),
        (Some(false), "False".to_owned(), "False".to_owned()),
        "{}",
        running["status"]
    );
    exec(&node, "probed", "echo ok > /www/ok").await;
    eventually(20, "pod probed Ready in the API", || {
        let p = pod(&cluster, "probed")?;
        (ready_of(&p) == (Some(true), "True".to_owned(), "True".to_owned())).then_some(())
    });
    exec(&node, "probed", "rm /www/ok").await;
    eventually(20, "pod probed not Ready again in the API", || {
        let p = pod(&cluster, "probed")?;
        (ready_of(&p) == (Some(false), "False".to_owned(), "False".to_owned())).then_some(())
    });
    let unready = api_events(&cluster, "probed");
    assert!(
        unready.iter().any(|(reason, message)| reason == "Unhealthy"
            && message
                .starts_with("Readiness probe failed: HTTP probe failed with statuscode: 404")),
        "{unready:?}"
    );

    let dying = Instant::now();
    exec(&node, "probed", "touch /tmp/die").await;
    eventually(30, "container main restarted once (API)", || {
        let p = pod(&cluster, "probed")?;
        (main_status(&p)?["restartCount"] == 1).then_some(())
    });
    // Two failures a second apart: the first at most a period after the file, the
    // second a period later.
    assert!(
        dying.elapsed() >= Duration::from_secs(1),
        "restarted {:?} after the liveness probe started failing",
        dying.elapsed()
    );
    // The liveness kill ran the preStop hook first, as upstream's does.
    assert_eq!(
        std::fs::read_to_string(host.path().join("prestop")).unwrap_or_default(),
        "stopped\n"
    );
    let events = api_events(&cluster, "probed");
    assert!(
        events.iter().any(|(reason, message)| reason == "Unhealthy"
            && message.starts_with("Liveness probe failed: ")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|(reason, message)| reason == "Killing"
            && message == "Container main failed liveness probe, will be restarted"),
        "{events:?}"
    );
    assert!(!node.log_text().contains("panicked"));
    node.finish();
}
