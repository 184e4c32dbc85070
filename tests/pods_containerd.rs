//! End to end: rkubelet runs static pods on a private containerd over CRI (one
//! containerd, one rkubelet and one set of directories per test, so tests run in
//! parallel). Assertions use what the runtime reports, and `/pods` only where the
//! runtime cannot tell (pod phase, image pull errors). On failure the test prints
//! rkubelet's log and the tail of containerd's. Skips, saying why, only when not root or
//! containerd is not installed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::runtime::{ContainerState, ContainerStatus};
use rkubelet::ports::runtime::{
    ContainerEntry, ContainerFilter, ImageService, RuntimeError, RuntimeService, SandboxEntry,
    SandboxFilter,
};
use serde_json::Value;

mod common;

use common::containerd::Containerd;
use common::{http_get, start_daemon, Daemon};

const NODE: &str = "n1";
const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
const POLL: Duration = Duration::from_millis(150);

/// Poll `probe` (an expression, awaited inside) every `POLL` until it yields `Some`;
/// fail with `what` after `secs` seconds.
macro_rules! eventually {
    ($secs:expr, $what:expr, $probe:expr) => {{
        let deadline = Instant::now() + Duration::from_secs($secs);
        loop {
            if let Some(v) = $probe {
                break v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {} s waiting for {}",
                $secs,
                $what
            );
            tokio::time::sleep(POLL).await;
        }
    }};
}

/// One node under test: a private containerd, a manifest folder, and rkubelet.
struct Node {
    daemon: Option<Daemon>,
    rt: CriRuntime,
    busybox: String,
    endpoint: String,
    manifests: PathBuf,
    root: PathBuf,
    logs: PathBuf,
    _dirs: tempfile::TempDir,
    ctrd: Containerd,
}

impl Node {
    fn start(name: &str) -> Option<Node> {
        let ctrd = Containerd::start(name)?;
        let dirs = tempfile::tempdir().expect("temp dir");
        let manifests = dirs.path().join("manifests");
        let root = dirs.path().join("root");
        std::fs::create_dir_all(&manifests).expect("manifest dir");
        std::fs::create_dir_all(&root).expect("root dir");
        let logs = PathBuf::from(ctrd.var("RKUBELET_POD_LOG_ROOT"));
        let endpoint = ctrd.var("CRI_ENDPOINT");
        let rt = CriRuntime::connect(&endpoint, Duration::from_secs(30)).expect("CRI client");
        Some(Node {
            daemon: None,
            rt,
            busybox: ctrd.var("BUSYBOX_IMAGE"),
            endpoint,
            manifests,
            root,
            logs,
            _dirs: dirs,
            ctrd,
        })
    }

    /// Start rkubelet (again) with the contract's flags; returns once it serves /healthz.
    fn kubelet(&mut self) {
        assert!(self.daemon.is_none(), "rkubelet already running");
        let args = [
            format!("--container-runtime-endpoint={}", self.endpoint),
            format!("--pod-manifest-path={}", self.manifests.display()),
            format!("--root-dir={}", self.root.display()),
            format!("--pod-logs-dir={}", self.logs.display()),
            format!("--hostname-override={NODE}"),
            "--file-check-frequency=1s".to_string(),
        ];
        self.daemon = Some(start_daemon(&args, false));
    }

    /// SIGKILL rkubelet (its pods keep running in containerd).
    fn kill9(&mut self) {
        let mut daemon = self.daemon.take().expect("rkubelet running");
        daemon.child.kill().expect("SIGKILL sent");
        let status = daemon.child.wait().expect("reaped");
        eprintln!(
            "rkubelet killed: {status:?}; its log:\n{}",
            daemon.log_text()
        );
    }

    fn port(&self) -> u16 {
        self.daemon.as_ref().map_or(0, |d| d.port)
    }

    fn log_text(&self) -> String {
        self.daemon
            .as_ref()
            .map(Daemon::log_text)
            .unwrap_or_default()
    }

    /// Write a manifest atomically (a hidden temp file renamed into place), as a
    /// config management tool would, so rkubelet never reads half a file.
    fn write(&self, file: &str, text: &str) {
        let tmp = self.manifests.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).expect("manifest written");
        std::fs::rename(&tmp, self.manifests.join(file)).expect("manifest renamed");
    }

    fn remove(&self, file: &str) {
        std::fs::remove_file(self.manifests.join(file)).expect("manifest removed");
    }

    fn pod_label(pod: &str) -> BTreeMap<String, String> {
        [(POD_NAME_LABEL.to_string(), pod.to_string())].into()
    }

    async fn sandboxes(&self, pod: &str) -> Vec<SandboxEntry> {
        self.rt
            .list_pod_sandboxes(&SandboxFilter {
                labels: Node::pod_label(pod),
                ..Default::default()
            })
            .await
            .expect("ListPodSandbox")
    }

    async fn all_sandboxes(&self) -> Vec<SandboxEntry> {
        self.rt
            .list_pod_sandboxes(&SandboxFilter::default())
            .await
            .expect("ListPodSandbox")
    }

    async fn containers(&self, pod: &str) -> Vec<ContainerEntry> {
        self.rt
            .list_containers(&ContainerFilter {
                labels: Node::pod_label(pod),
                ..Default::default()
            })
            .await
            .expect("ListContainers")
    }

    /// The full status of a container; `None` once it is gone.
    async fn status(&self, id: &str) -> Option<ContainerStatus> {
        match self.rt.container_status(id).await {
            Ok(s) => Some(s),
            Err(RuntimeError::NotFound(_)) => None,
            Err(e) => panic!("ContainerStatus {id}: {e}"),
        }
    }

    async fn running(&self, pod: &str, container: &str) -> Option<ContainerEntry> {
        self.containers(pod)
            .await
            .into_iter()
            .find(|c| c.status.name == container && c.status.state == ContainerState::Running)
    }

    async fn wait_running(&self, pod: &str, container: &str, secs: u64) -> ContainerEntry {
        eventually!(
            secs,
            format!("container {container} of pod {pod} running"),
            self.running(pod, container).await
        )
    }

    /// The pod called `pod` in rkubelet's `GET /pods`, if listed.
    fn pod_json(&self, pod: &str) -> Option<Value> {
        let (code, body) = http_get(self.port(), "/pods")?;
        if code != 200 {
            return None;
        }
        let list: Value = serde_json::from_str(&body).ok()?;
        list["items"]
            .as_array()?
            .iter()
            .find(|p| p["metadata"]["name"] == pod)
            .cloned()
    }

    fn pods_body(&self) -> String {
        http_get(self.port(), "/pods")
            .map(|(code, body)| format!("{code} {body}"))
            .unwrap_or_else(|| "no answer".to_string())
    }

    /// The first line of any container log under the pod log root whose text (after
    /// `<time> <stream> <tag> `) is `text`, with its file.
    fn log_line(&self, text: &str) -> Option<(PathBuf, String)> {
        let mut found = None;
        walk(&self.logs, &mut |path| {
            if found.is_some() {
                return;
            }
            let content = std::fs::read_to_string(path).unwrap_or_default();
            if let Some(line) = content
                .lines()
                .find(|l| cri_log_text(l).is_some_and(|t| t == text))
            {
                found = Some((path.to_path_buf(), line.to_string()));
            }
        });
        found
    }

    /// Stop rkubelet and containerd and check nothing is left behind.
    fn finish(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            let status = daemon.terminate_within(Duration::from_secs(15));
            assert!(
                status.is_some_and(|s| s.success()),
                "rkubelet did not exit cleanly within 15 s of SIGTERM: {status:?}; log:\n{}",
                daemon.log_text()
            );
        }
        let left = self.ctrd.down();
        assert!(left.is_empty(), "containerd teardown left: {left:?}");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- rkubelet log ----\n{}\n---- end ----", self.log_text());
            let log =
                std::fs::read_to_string(self.ctrd.base.join("containerd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "---- containerd log (last 40 lines) ----\n{}\n---- end ----",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        if let Some(mut daemon) = self.daemon.take() {
            let _ = daemon.terminate_within(Duration::from_secs(10));
        }
    }
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, f);
        } else {
            f(&path);
        }
    }
}

/// The text of a CRI log line `<rfc3339nano> <stdout|stderr> <F|P> <text>`, if the
/// line has that form.
fn cri_log_text(line: &str) -> Option<&str> {
    let mut parts = line.splitn(4, ' ');
    let (time, stream, tag, text) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let time_ok = time.len() >= 20
        && time.as_bytes().get(10) == Some(&b'T')
        && (time.ends_with('Z') || time[19..].contains(['+', '-']));
    (time_ok && matches!(stream, "stdout" | "stderr") && matches!(tag, "F" | "P")).then_some(text)
}

/// One container of a manifest: `sh -c script` in `image`.
fn container(name: &str, image: &str, script: &str) -> String {
    let script = serde_json::to_string(script).expect("a JSON string");
    format!(
        "  - name: {name}\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
    )
}

/// A pod manifest; `spec_extra` are further `spec` lines (two-space indented).
fn pod(name: &str, spec_extra: &str, init: &[String], containers: &[String]) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n{spec_extra}"
    );
    if !init.is_empty() {
        text.push_str("  initContainers:\n");
        text.push_str(&init.concat());
    }
    text.push_str("  containers:\n");
    text.push_str(&containers.concat());
    text
}

fn secs_between(from_nanos: i64, to_nanos: i64) -> f64 {
    (to_nanos - from_nanos) as f64 / 1e9
}

/// Scenario 1: a pod runs and its output lands in the pod log folder in CRI format.
#[tokio::test]
async fn static_pod_runs_and_logs() {
    let Some(mut node) = Node::start("run") else {
        return;
    };
    let manifest = pod(
        "web",
        "",
        &[],
        &[container(
            "main",
            &node.busybox,
            "echo hello-rk; sleep 3600",
        )],
    );
    node.write("web.yaml", &manifest);
    node.kubelet();
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

/// Scenario 2a: a crashing container under `restartPolicy: Always` is restarted at once,
/// then after growing back-off waits (10 s, 20 s, ...).
#[tokio::test]
async fn crash_loop_backs_off() {
    let Some(mut node) = Node::start("backoff") else {
        return;
    };
    let manifest = pod(
        "crash",
        "  restartPolicy: Always\n",
        &[],
        &[container("main", &node.busybox, "echo crash; exit 1")],
    );
    node.write("crash.yaml", &manifest);
    node.kubelet();

    // Each attempt's latest status, kept while the runtime still knows it.
    let mut seen: BTreeMap<u32, ContainerStatus> = BTreeMap::new();
    let hard_deadline = Instant::now() + Duration::from_secs(90);
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

/// Scenario 2b: under `OnFailure` a container that succeeds is not restarted.
#[tokio::test]
async fn on_failure_success_is_not_restarted() {
    let Some(mut node) = Node::start("onfail") else {
        return;
    };
    let manifest = pod(
        "done",
        "  restartPolicy: OnFailure\n",
        &[],
        &[container("main", &node.busybox, "echo done; exit 0")],
    );
    node.write("done.yaml", &manifest);
    node.kubelet();
    let status = wait_exited(&node, "done-n1").await;
    assert_eq!(status.exit_code, 0, "{status:?}");
    assert_no_restart(&node, "done-n1", &status.id, 12).await;
    wait_phase(&node, "done-n1", "Succeeded").await;
    node.finish();
}

/// Scenario 2c: under `Never` a failing container is not restarted.
#[tokio::test]
async fn never_failure_is_not_restarted() {
    let Some(mut node) = Node::start("never") else {
        return;
    };
    let manifest = pod(
        "fail",
        "  restartPolicy: Never\n",
        &[],
        &[container("main", &node.busybox, "echo failing; exit 1")],
    );
    node.write("fail.yaml", &manifest);
    node.kubelet();
    let status = wait_exited(&node, "fail-n1").await;
    assert_eq!(status.exit_code, 1, "{status:?}");
    assert_no_restart(&node, "fail-n1", &status.id, 12).await;
    wait_phase(&node, "fail-n1", "Failed").await;
    node.finish();
}

/// Scenario 3: editing a manifest replaces the container; deleting it removes the pod.
#[tokio::test]
async fn edit_replaces_and_delete_removes() {
    let Some(mut node) = Node::start("edit") else {
        return;
    };
    let v1 = pod(
        "web",
        "",
        &[],
        &[container(
            "main",
            &node.busybox,
            "echo v1-running; sleep 3600",
        )],
    );
    node.write("web.yaml", &v1);
    node.kubelet();
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
    eventually!(
        30,
        format!("old container {} gone or exited", old.status.id),
        match node.status(&old.status.id).await {
            None => Some(()),
            Some(s) if s.state == ContainerState::Exited => Some(()),
            Some(_) => None,
        }
    );
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
    eventually!(
        30,
        format!("container {} gone or exited", new.status.id),
        match node.status(&new.status.id).await {
            None => Some(()),
            Some(s) if s.state == ContainerState::Exited => Some(()),
            Some(_) => None,
        }
    );

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
async fn init_container_runs_first() {
    let Some(mut node) = Node::start("init") else {
        return;
    };
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
async fn host_network_pod_runs() {
    let Some(mut node) = Node::start("hostnet") else {
        return;
    };
    let host_ns = std::fs::read_link("/proc/self/ns/net").expect("own netns");
    let manifest = pod(
        "hn",
        "  hostNetwork: true\n",
        &[],
        &[container(
            "main",
            &node.busybox,
            "echo ns=$(readlink /proc/self/ns/net); sleep 3600",
        )],
    );
    node.write("hn.yaml", &manifest);
    node.kubelet();
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
async fn restart_adopts_running_pods() {
    let Some(mut node) = Node::start("adopt") else {
        return;
    };
    let manifest = pod(
        "web",
        "",
        &[],
        &[container("main", &node.busybox, "echo up; sleep 3600")],
    );
    node.write("web.yaml", &manifest);
    node.kubelet();
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

/// Scenario 7: broken manifests are reported by name and reason; a good one still runs.
#[tokio::test]
async fn broken_manifest_does_not_stop_good_pods() {
    let Some(mut node) = Node::start("broken") else {
        return;
    };
    node.write(
        "bad.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: [broken\n",
    );
    node.write(
        "service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\nspec:\n  ports: [{port: 80}]\n",
    );
    let good = pod(
        "web",
        "",
        &[],
        &[container("main", &node.busybox, "sleep 3600")],
    );
    node.write("web.yaml", &good);
    node.kubelet();
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
async fn missing_image_is_reported() {
    let Some(mut node) = Node::start("noimage") else {
        return;
    };
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
    let good = pod(
        "web",
        "",
        &[],
        &[container("main", &node.busybox, "sleep 3600")],
    );
    node.write("web.yaml", &good);
    node.kubelet();
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
