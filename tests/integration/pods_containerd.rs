//! End to end: rkubelet runs static pods on a private containerd over CRI (one
//! containerd, one rkubelet and one set of directories per test, so tests run in
//! parallel). Assertions use what the runtime reports, and `/pods` only where the
//! runtime cannot tell (pod phase, image pull errors). On failure the test prints
//! rkubelet's log and the tail of containerd's. Needs root and containerd; fails, saying
//! which is missing, without them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rkubelet::domain::kuberuntime::runtime::{ContainerState, ContainerStatus};
use rkubelet::ports::runtime::{ImageService, RuntimeService};

use crate::common;

use common::node::*;

/// Writes `NAME.yaml`, pod `name` with one busybox container `main` running `script`
/// (`spec_extra` added to the pod spec), and starts rkubelet.
fn run_pod(node: &mut Node, name: &str, spec_extra: &str, script: &str) {
    let manifest = pod(
        name,
        spec_extra,
        &[],
        &[container("main", &node.busybox, script)],
    );
    node.write(&format!("{name}.yaml"), &manifest);
    node.kubelet();
}

/// Waits until container `id` is gone or has exited.
async fn wait_gone_or_exited(node: &Node, id: &str) {
    eventually!(
        30,
        format!("container {id} gone or exited"),
        match node.status(id).await {
            None => Some(()),
            Some(s) if s.state == ContainerState::Exited => Some(()),
            Some(_) => None,
        }
    );
}

/// Scenario 1: a pod runs and its output lands in the pod log folder in CRI format.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn static_pod_runs_and_logs() {
    let mut node = Node::start("run");
    run_pod(&mut node, "web", "", "echo hello-rk; sleep 3600");
    let main = node.wait_running("web-n1", "main", 60).await;
    assert_eq!(main.status.attempt, 0);
    let sandboxes = node.sandboxes("web-n1").await;
    assert_eq!(sandboxes.len(), 1, "one sandbox: {sandboxes:?}");
    let sandbox = &sandboxes[0];
    assert_eq!(sandbox.namespace, "default");
    assert_eq!(main.sandbox_id, sandbox.status.id);
    assert!(!sandbox.uid.is_empty(), "the sandbox carries the pod uid");

    let log_file = node
        .logs
        .join(format!("default_web-n1_{}", sandbox.uid))
        .join("main/0.log");
    let line = eventually!(
        30,
        format!(
            "a CRI line ending in hello-rk in {}: {:?}",
            log_file.display(),
            std::fs::read_to_string(&log_file)
        ),
        std::fs::read_to_string(&log_file)
            .unwrap_or_default()
            .lines()
            .find(|l| cri_log_text(l) == Some("hello-rk") && l.contains(" stdout F "))
            .map(str::to_string)
    );
    eprintln!("log line: {line}");
    node.finish();
}

/// A static pod gets what an API pod gets (issue 13): the managed `/etc/hosts` with its
/// `hostAliases`, env from `fieldRef` and `resourceFieldRef`, and its termination message
/// in its status.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn a_static_pod_sees_its_hosts_and_env_and_reports_its_termination_message() {
    let mut node = Node::start("static-env");
    let bb = node.busybox.clone();
    let field = |name: &str, path: &str| {
        format!("    - name: {name}\n      valueFrom:\n        fieldRef:\n          fieldPath: {path}\n")
    };
    let env = [
        field("MY_NAME", "metadata.name"),
        field("MY_NODE", "spec.nodeName"),
        field("MY_IP", "status.podIP"),
        field("MY_HOST", "status.hostIP"),
        "    - name: MY_CPU\n      valueFrom:\n        resourceFieldRef:\n          resource: limits.cpu\n          divisor: 1m\n".to_string(),
    ]
    .concat();
    let main = format!(
        "{}    resources:\n      limits:\n        cpu: 250m\n    env:\n{env}",
        container(
            "main",
            &bb,
            "echo \"hosts: $(grep alias.example /etc/hosts)\"; echo \"env: $MY_NAME $MY_NODE $MY_IP $MY_HOST $MY_CPU\"; echo bye-static > /dev/termination-log; exit 3",
        )
    );
    node.write(
        "envy.yaml",
        &pod(
            "envy",
            "  restartPolicy: Never\n  hostAliases:\n  - ip: 10.1.2.3\n    hostnames: [alias.example]\n",
            &[],
            &[main],
        ),
    );
    // A volume of a plugin rkubelet does not have: a FailedMount naming it, no sandbox.
    node.write(
        "nfs.yaml",
        &pod(
            "nfs",
            "  volumes:\n  - name: share\n    nfs:\n      server: 192.0.2.1\n      path: /export\n",
            &[],
            &[container("main", &bb, "sleep 3600")],
        ),
    );
    node.kubelet();
    eventually!(60, "FailedMount naming the nfs plugin", {
        node.log_text()
            .lines()
            .any(|l| {
                l.contains("FailedMount")
                    && l.contains("nfs")
                    && l.contains("volume plugin is not supported")
                    && l.contains("nfs-n1")
            })
            .then_some(())
    });
    assert!(
        node.sandboxes("nfs-n1").await.is_empty(),
        "no sandbox for nfs-n1"
    );
    let terminated = eventually!(60, "envy's container terminated in /pods", {
        node.pod_json("envy-n1").and_then(|p| {
            let t = p["status"]["containerStatuses"][0]["state"]["terminated"].clone();
            t.is_object().then_some(t)
        })
    });
    assert_eq!(terminated["exitCode"], 3, "{terminated}");
    assert_eq!(terminated["message"], "bye-static\n", "{terminated}");
    let mut lines = Vec::new();
    walk(&node.logs, &mut |path| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        lines.extend(text.lines().filter_map(cri_log_text).map(str::to_owned));
    });
    let hosts = lines
        .iter()
        .find(|l| l.starts_with("hosts: "))
        .unwrap_or_else(|| panic!("no hosts line: {lines:?}"));
    assert!(
        hosts.contains("10.1.2.3") && hosts.contains("alias.example"),
        "{hosts}"
    );
    let env = lines
        .iter()
        .find(|l| l.starts_with("env: "))
        .unwrap_or_else(|| panic!("no env line: {lines:?}"));
    let values: Vec<&str> = env.trim_start_matches("env: ").split(' ').collect();
    assert_eq!(values.len(), 5, "no value blank: {env}");
    assert_eq!(&values[..2], ["envy-n1", "n1"], "{env}");
    for ip in &values[2..4] {
        assert!(
            ip.parse::<std::net::IpAddr>().is_ok(),
            "an IP, not blank: {env}"
        );
    }
    assert_eq!(values[4], "250", "{env}");
    node.finish();
}

/// Scenario 2a: a crashing container under `restartPolicy: Always` is restarted at once,
/// then after growing back-off waits (10 s, 20 s, ...).
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn crash_loop_backs_off() {
    let mut node = Node::start("backoff");
    run_pod(
        &mut node,
        "crash",
        "  restartPolicy: Always\n",
        "echo crash; exit 1",
    );

    // Each attempt's latest status, kept while the runtime still knows it.
    let mut seen: BTreeMap<u32, ContainerStatus> = BTreeMap::new();
    let hard_deadline = Instant::now() + crate::common::patience(90);
    let mut first_seen: Option<Instant> = None;
    loop {
        for entry in node.containers("crash-n1").await {
            let attempt = entry.status.attempt;
            if seen
                .get(&attempt)
                .is_none_or(|s| s.finished_at_nanos == 0 || s.id != entry.status.id)
            {
                if let Some(status) = node.status(&entry.status.id).await {
                    if let Some(old) = seen.get(&attempt) {
                        assert_eq!(
                            old.id, status.id,
                            "two containers with attempt {attempt}: {old:?} and {status:?}"
                        );
                    }
                    seen.insert(attempt, status);
                }
            }
        }
        if first_seen.is_none() && seen.contains_key(&0) {
            first_seen = Some(Instant::now());
        }
        if seen.contains_key(&3) {
            break;
        }
        if seen.contains_key(&2)
            && first_seen.is_some_and(|t| t.elapsed() > Duration::from_secs(45))
        {
            break;
        }
        assert!(
            Instant::now() < hard_deadline,
            "restarts 1 and 2 not seen within 90 s; attempts seen: {:?}",
            seen.values()
                .map(|s| (s.attempt, s.state, s.exit_code))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = &seen[&0];
    assert!(
        first.finished_at_nanos == 0 || first.exit_code == 1,
        "attempt 0 exit code: {first:?}"
    );
    // The wait before restart k: from the end of attempt k-1 (or, if its end was never
    // observed, its creation) to the creation of attempt k.
    let wait = |k: u32| {
        let prev = &seen[&(k - 1)];
        let from = if prev.finished_at_nanos > 0 {
            prev.finished_at_nanos
        } else {
            prev.created_at_nanos
        };
        secs_between(from, seen[&k].created_at_nanos)
    };
    let waits: Vec<f64> = (1..=seen.len().min(4) as u32 - 1).map(wait).collect();
    eprintln!("FIGURE back-off waits before restarts 1..: {waits:.1?} s");
    assert!(waits[0] < 5.0, "restart 1 should be immediate: {waits:?}");
    assert!(waits[1] >= 8.0, "restart 2 should wait ~10 s: {waits:?}");
    if let Some(w3) = waits.get(2) {
        assert!(waits[1] < *w3, "back-off should grow: {waits:?}");
    }
    node.finish();
}

/// Waits until the only container of `pod` has exited; returns its status.
async fn wait_exited(node: &Node, pod: &str) -> ContainerStatus {
    eventually!(60, format!("the container of {pod} exited"), {
        let containers = node.containers(pod).await;
        match containers.as_slice() {
            [one] if one.status.state == ContainerState::Exited => {
                node.status(&one.status.id).await
            }
            _ => None,
        }
    })
}

/// For `secs` seconds, asserts that `pod` keeps exactly one container, attempt 0.
async fn assert_no_restart(node: &Node, pod: &str, id: &str, secs: u64) {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        let containers = node.containers(pod).await;
        assert!(
            containers.len() == 1
                && containers[0].status.id == id
                && containers[0].status.attempt == 0,
            "{pod} restarted: {containers:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn wait_phase(node: &Node, pod: &str, phase: &str) {
    eventually!(
        30,
        format!("{pod} in phase {phase}; /pods: {}", node.pods_body()),
        node.pod_json(pod).filter(|p| p["status"]["phase"] == phase)
    );
}

/// Runs pod `name` (one container: `script`, which ends with `exit_code`) under
/// restart `policy`; the container is not restarted and the pod reaches `phase`.
async fn exits_without_restart(
    test: &str,
    name: &str,
    policy: &str,
    script: &str,
    exit_code: i32,
    phase: &str,
) {
    let mut node = Node::start(test);
    run_pod(
        &mut node,
        name,
        &format!("  restartPolicy: {policy}\n"),
        script,
    );
    let pod = format!("{name}-n1");
    let status = wait_exited(&node, &pod).await;
    assert_eq!(status.exit_code, exit_code, "{status:?}");
    assert_no_restart(&node, &pod, &status.id, 12).await;
    wait_phase(&node, &pod, phase).await;
    node.finish();
}

/// Scenario 2b: under `OnFailure` a container that succeeds is not restarted.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn on_failure_success_is_not_restarted() {
    exits_without_restart(
        "onfail",
        "done",
        "OnFailure",
        "echo done; exit 0",
        0,
        "Succeeded",
    )
    .await;
}

/// Scenario 2c: under `Never` a failing container is not restarted.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn never_failure_is_not_restarted() {
    exits_without_restart(
        "never",
        "fail",
        "Never",
        "echo failing; exit 1",
        1,
        "Failed",
    )
    .await;
}

/// Scenario 3: editing a manifest replaces the container; deleting it removes the pod.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn edit_replaces_and_delete_removes() {
    let mut node = Node::start("edit");
    run_pod(&mut node, "web", "", "echo v1-running; sleep 3600");
    let old = node.wait_running("web-n1", "main", 60).await;
    eventually!(30, "v1's log line", node.log_line("v1-running"));

    let v2 = pod(
        "web",
        "",
        &[],
        &[container(
            "main",
            &node.busybox,
            "echo v2-running; sleep 3600",
        )],
    );
    node.write("web.yaml", &v2);
    let new = eventually!(
        60,
        format!("a new running container replacing {}", old.status.id),
        node.running("web-n1", "main")
            .await
            .filter(|c| c.status.id != old.status.id)
    );
    let (file, line) = eventually!(30, "v2's log line", node.log_line("v2-running"));
    eprintln!(
        "new container {} logged {line:?} in {}",
        new.status.id,
        file.display()
    );
    wait_gone_or_exited(&node, &old.status.id).await;
    let running: Vec<_> = node
        .containers("web-n1")
        .await
        .into_iter()
        .filter(|c| c.status.state == ContainerState::Running)
        .collect();
    assert_eq!(running.len(), 1, "one running container: {running:?}");

    // Now the image: the pause image, which runs /pause (its entrypoint) without a command.
    let pause = node.ctrd.var("PAUSE_IMAGE");
    let pause_id = node
        .rt
        .image_status(&pause)
        .await
        .expect("ImageStatus")
        .expect("pause image present")
        .id;
    let v3 = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {pause}\n    imagePullPolicy: IfNotPresent\n"
    );
    node.write("web.yaml", &v3);
    let third = eventually!(
        60,
        format!("a running container replacing {}", new.status.id),
        node.running("web-n1", "main")
            .await
            .filter(|c| c.status.id != new.status.id && c.status.id != old.status.id)
    );
    let third = node
        .status(&third.status.id)
        .await
        .expect("third container status");
    assert!(
        third.image == pause || third.image == pause_id,
        "new container's image {:?}, want {pause} or {pause_id}",
        third.image
    );
    wait_gone_or_exited(&node, &new.status.id).await;

    node.remove("web.yaml");
    eventually!(45, "web-n1's sandboxes and containers removed", {
        let (s, c) = (
            node.sandboxes("web-n1").await,
            node.containers("web-n1").await,
        );
        (s.is_empty() && c.is_empty()).then_some(())
    });
    node.finish();
}

/// Scenario 4: app containers are created only after the init container succeeded.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn init_container_runs_first() {
    let mut node = Node::start("init");
    let manifest = pod(
        "boot",
        "",
        &[container("init", &node.busybox, "echo init; sleep 2")],
        &[
            container("a", &node.busybox, "echo a; sleep 3600"),
            container("b", &node.busybox, "echo b; sleep 3600"),
        ],
    );
    node.write("boot.yaml", &manifest);
    node.kubelet();
    let mut init: Option<ContainerStatus> = None;
    let apps = eventually!(60, format!("a and b running; init seen: {init:?}"), {
        let containers = node.containers("boot-n1").await;
        for c in containers.iter().filter(|c| c.status.name == "init") {
            if let Some(s) = node.status(&c.status.id).await {
                init = Some(s);
            }
        }
        let running: Vec<_> = containers
            .iter()
            .filter(|c| c.status.name != "init" && c.status.state == ContainerState::Running)
            .collect();
        if running.len() == 2 {
            let mut statuses = Vec::new();
            for c in running {
                statuses.push(node.status(&c.status.id).await.expect("app status"));
            }
            Some(statuses)
        } else {
            None
        }
    });
    let init = init.expect("the init container was seen");
    assert_eq!(init.state, ContainerState::Exited, "{init:?}");
    assert_eq!(init.exit_code, 0, "{init:?}");
    assert!(
        secs_between(init.started_at_nanos, init.finished_at_nanos) >= 1.5,
        "init ran its 2 s: {init:?}"
    );
    let mut names: Vec<&str> = apps.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    for app in &apps {
        assert!(
            app.created_at_nanos >= init.finished_at_nanos,
            "{} created {:.3} s before init finished",
            app.name,
            secs_between(app.created_at_nanos, init.finished_at_nanos)
        );
    }
    node.finish();
}

/// Scenario 5: a `hostNetwork` pod runs in the node's network namespace.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn host_network_pod_runs() {
    let mut node = Node::start("hostnet");
    let host_ns = std::fs::read_link("/proc/self/ns/net").expect("own netns");
    run_pod(
        &mut node,
        "hn",
        "  hostNetwork: true\n",
        "echo ns=$(readlink /proc/self/ns/net); sleep 3600",
    );
    let main = node.wait_running("hn-n1", "main", 60).await;
    let sandbox = node
        .rt
        .pod_sandbox_status(&main.sandbox_id)
        .await
        .expect("PodSandboxStatus");
    assert!(
        sandbox.host_network,
        "sandbox not in host network: {sandbox:?}"
    );
    let expected = format!("ns={}", host_ns.display());
    eventually!(30, format!("log line {expected}"), node.log_line(&expected));
    node.finish();
}

/// Scenario 6: after SIGKILL, a restarted rkubelet adopts the running pod.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn restart_adopts_running_pods() {
    let mut node = Node::start("adopt");
    run_pod(&mut node, "web", "", "echo up; sleep 3600");
    let main = node.wait_running("web-n1", "main", 60).await;
    let sandbox_id = main.sandbox_id.clone();
    node.kill9();
    node.kubelet();
    eventually!(
        30,
        format!(
            "/pods shows container {} running; /pods: {}",
            main.status.id,
            node.pods_body()
        ),
        node.pod_json("web-n1").filter(|p| {
            let s = &p["status"]["containerStatuses"][0];
            s["containerID"]
                .as_str()
                .is_some_and(|id| id.ends_with(&main.status.id))
                && s["restartCount"] == 0
                && s["state"]["running"].is_object()
        })
    );
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let sandboxes = node.sandboxes("web-n1").await;
        let ids: Vec<&str> = sandboxes.iter().map(|s| s.status.id.as_str()).collect();
        assert_eq!(ids, [sandbox_id.as_str()], "sandboxes after restart");
        let containers = node.containers("web-n1").await;
        assert!(
            containers.len() == 1
                && containers[0].status.id == main.status.id
                && containers[0].status.attempt == 0
                && containers[0].status.state == ContainerState::Running,
            "containers after restart: {containers:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    node.finish();
}

/// A pod removed while rkubelet was down: the restarted kubelet finds it in the runtime
/// without a spec and still runs its preStop hook (read back from the container's
/// annotations) before stopping it.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn a_pod_removed_while_down_still_runs_its_pre_stop_hook() {
    let mut node = Node::start("orphanhook");
    let out = tempfile::tempdir().expect("hook dir");
    let spec = format!(
        "  volumes:\n  - name: out\n    hostPath:\n      path: {}\n",
        out.path().display()
    );
    let hooked = format!(
        "{}    volumeMounts:\n    - name: out\n      mountPath: /out\n    lifecycle:\n      preStop:\n        exec:\n          command: [\"sh\", \"-c\", \"echo stopped > /out/pre-stop\"]\n",
        container("main", &node.busybox, "sleep 3600")
    );
    node.write("hooked.yaml", &pod("hooked", &spec, &[], &[hooked]));
    node.kubelet();
    node.wait_running("hooked-n1", "main", 60).await;
    node.kill9();
    node.remove("hooked.yaml");
    node.kubelet();
    eventually!(60, "the orphan's sandbox gone", {
        node.sandboxes("hooked-n1").await.is_empty().then_some(())
    });
    let written = std::fs::read_to_string(out.path().join("pre-stop")).unwrap_or_default();
    assert_eq!(written, "stopped\n", "the preStop hook's file");
    node.finish();
}

/// Scenario 7: broken manifests are reported by name and reason; a good one still runs.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn broken_manifest_does_not_stop_good_pods() {
    let mut node = Node::start("broken");
    node.write(
        "bad.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: [broken\n",
    );
    node.write(
        "service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\nspec:\n  ports: [{port: 80}]\n",
    );
    run_pod(&mut node, "web", "", "sleep 3600");
    node.wait_running("web-n1", "main", 60).await;
    for (file, why) in [
        ("bad.yaml", "not valid YAML"),
        ("service.yaml", "not a v1 Pod"),
    ] {
        eventually!(
            10,
            format!("a log line naming {file} and saying {why:?}"),
            node.log_text()
                .lines()
                .find(|l| l.contains(file) && l.contains(why))
                .map(str::to_string)
        );
    }
    let names: Vec<String> = node
        .all_sandboxes()
        .await
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["web-n1"], "only the good pod has a sandbox");
    node.finish();
}

/// Scenario 8: an image that cannot be pulled is reported; other pods run.
#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn missing_image_is_reported() {
    let mut node = Node::start("noimage");
    let ghost = pod(
        "ghost",
        "",
        &[],
        &[container(
            "main",
            "docker.io/library/does-not-exist:1.0",
            "sleep 3600",
        )],
    );
    node.write("ghost.yaml", &ghost);
    run_pod(&mut node, "web", "", "sleep 3600");
    node.wait_running("web-n1", "main", 60).await;
    let reason = eventually!(
        90,
        format!(
            "ghost-n1 waiting on ErrImagePull/ImagePullBackOff; /pods: {}",
            node.pods_body()
        ),
        node.pod_json("ghost-n1").and_then(|p| {
            let waiting = &p["status"]["containerStatuses"][0]["state"]["waiting"];
            let reason = waiting["reason"].as_str()?;
            matches!(reason, "ErrImagePull" | "ImagePullBackOff")
                .then(|| format!("{reason}: {}", waiting["message"]))
        })
    );
    eprintln!("ghost-n1: {reason}");
    let containers = node.containers("ghost-n1").await;
    assert!(
        containers.is_empty(),
        "containers for ghost-n1: {containers:?}"
    );
    assert!(
        node.running("web-n1", "main").await.is_some(),
        "web-n1 still runs"
    );
    node.finish();
}
