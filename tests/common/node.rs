//! One node under test: a private containerd, a manifest folder and rkubelet, with
//! helpers to write manifests and read what the runtime and `/pods` report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::runtime::{
    ContainerEntry, ContainerFilter, ContainerState, ContainerStatus, SandboxEntry, SandboxFilter,
};
use rkubelet::ports::runtime::{RuntimeError, RuntimeService};
use serde_json::Value;

use super::containerd::Containerd;
use super::faults::{children, pod_cgroups};
use super::{http_get, start_daemon, Daemon};

pub const NODE: &str = "n1";
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
pub const POLL: Duration = Duration::from_millis(150);

/// Poll `probe` (an expression, awaited inside) every `POLL` until it yields `Some`;
/// fail with `what` after `secs` seconds of a quiet machine (`patience`).
#[allow(unused_macros)]
macro_rules! eventually {
    ($secs:expr, $what:expr, $probe:expr) => {{
        let budget = $crate::common::patience($secs);
        let deadline = Instant::now() + budget;
        loop {
            if let Some(v) = $probe {
                break v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {:.0} s waiting for {}",
                budget.as_secs_f64(),
                $what
            );
            tokio::time::sleep(POLL).await;
        }
    }};
}

#[allow(unused_imports)]
pub(crate) use eventually;

/// Pod uids that own a folder, a log folder or a cgroup on the node.
pub struct Leftovers {
    pub pod_dirs: Vec<String>,
    pub log_dirs: Vec<String>,
    pub cgroups: Vec<String>,
}

pub fn leftovers(node: &Node) -> Leftovers {
    Leftovers {
        pod_dirs: children(&node.root.join("pods")),
        // <namespace>_<name>_<uid>
        log_dirs: children(&node.logs)
            .into_iter()
            .filter_map(|d| d.rsplit('_').next().map(str::to_string))
            .collect(),
        cgroups: pod_cgroups(&node.ctrd.var("RKUBELET_CGROUP_ROOT")),
    }
}

/// One node under test: a private containerd, a manifest folder, and rkubelet.
pub struct Node {
    pub daemon: Option<Daemon>,
    pub rt: CriRuntime,
    pub busybox: String,
    pub endpoint: String,
    pub manifests: PathBuf,
    pub root: PathBuf,
    pub logs: PathBuf,
    pub _dirs: tempfile::TempDir,
    pub ctrd: Containerd,
    /// The logs of the instances `kill9` or `stop_kubelet` ended, shown with the live
    /// one's when a test fails.
    earlier_logs: Vec<String>,
}

/// How much of each log a failing test prints: CI keeps only the head and the tail of a
/// failing run's output, and a whole log would push the assertion's message out of both.
const LOG_LINES_ON_FAILURE: usize = 60;

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// How many distinct warnings and errors of each log a failing test prints.
const PROBLEMS_ON_FAILURE: usize = 12;

/// What tells a warning or an error from another: klog's call site
/// (`W1130 21:17:39.87 pid file:line] "…" k=v`: its message names the pod) or
/// containerd's message (`time="…" level=error msg="…" k=v`).
fn problem_key(line: &str) -> Option<&str> {
    let klog = (line.starts_with('W') || line.starts_with('E'))
        && line[1..].starts_with(|c: char| c.is_ascii_digit());
    if klog {
        let header = line.split_once("] ")?.0;
        return header.rsplit(' ').next();
    }
    if !(line.contains("level=error") || line.contains("level=warning")) {
        return None;
    }
    let rest = line.split_once("msg=")?.1;
    Some(rest.split("\" ").next().unwrap_or(rest))
}

/// A klog or containerd log's warnings and errors, one line for each distinct message (the first seen,
/// with how often it came): the cause of a failure is often a warning long before the
/// tail. scripts/test-env/failures.py repeats these lines at the end of a failed run.
pub fn distinct_problems(log: &str) -> String {
    let mut seen: Vec<(String, &str, usize)> = Vec::new();
    for line in log.lines() {
        let Some(key) = problem_key(line) else {
            continue;
        };
        match seen.iter_mut().find(|(k, _, _)| k == key) {
            Some((_, _, count)) => *count += 1,
            None => seen.push((key.to_string(), line, 1)),
        }
    }
    let shown: Vec<String> = seen
        .iter()
        .take(PROBLEMS_ON_FAILURE)
        .map(|(_, line, count)| format!("problem ({count}x): {line}"))
        .collect();
    let more = seen.len().saturating_sub(PROBLEMS_ON_FAILURE);
    let mut text = shown.join("\n");
    if more > 0 {
        text.push_str(&format!("\nproblem: {more} more distinct"));
    }
    text
}

impl Node {
    /// A node on a fresh private containerd; panics when this machine cannot run one
    /// (saying what is missing).
    pub fn start(name: &str) -> Node {
        let ctrd = Containerd::start(name);
        let dirs = tempfile::tempdir().expect("temp dir");
        let root = dirs.path().join("root");
        Node::on(ctrd, dirs, root)
    }

    /// A node whose `--root-dir`, containerd (images, writable layers) and pod logs share
    /// one tmpfs of `size_mib`: a small node filesystem that is also the image
    /// filesystem.
    #[allow(dead_code)] // the disk-pressure tests only
    pub fn start_on_small_disk(name: &str, size_mib: u64) -> Node {
        let ctrd = Containerd::start_on_small_disk(name, size_mib);
        let dirs = tempfile::tempdir().expect("temp dir");
        let root = ctrd.base.join("kubelet-root");
        Node::on(ctrd, dirs, root)
    }

    fn on(ctrd: Containerd, dirs: tempfile::TempDir, root: PathBuf) -> Node {
        let manifests = dirs.path().join("manifests");
        std::fs::create_dir_all(&manifests).expect("manifest dir");
        std::fs::create_dir_all(&root).expect("root dir");
        let logs = PathBuf::from(ctrd.var("RKUBELET_POD_LOG_ROOT"));
        let endpoint = ctrd.var("CRI_ENDPOINT");
        let rt = CriRuntime::connect(&endpoint, Duration::from_secs(30)).expect("CRI client");
        Node {
            daemon: None,
            rt,
            busybox: ctrd.var("BUSYBOX_IMAGE"),
            endpoint,
            manifests,
            root,
            logs,
            _dirs: dirs,
            ctrd,
            earlier_logs: Vec::new(),
        }
    }

    /// Start rkubelet (again) with the contract's flags; returns once it serves /healthz.
    pub fn kubelet(&mut self) {
        self.kubelet_with(&[]);
    }

    /// `kubelet` with further flags.
    pub fn kubelet_with(&mut self, extra: &[&str]) {
        assert!(self.daemon.is_none(), "rkubelet already running");
        let mut args = vec![
            format!("--container-runtime-endpoint={}", self.endpoint),
            format!("--pod-manifest-path={}", self.manifests.display()),
            format!("--root-dir={}", self.root.display()),
            format!("--pod-logs-dir={}", self.logs.display()),
            format!("--cgroup-root={}", self.ctrd.var("RKUBELET_CGROUP_ROOT")),
            format!("--hostname-override={NODE}"),
            "--file-check-frequency=1s".to_string(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_string()));
        // `/pods` without credentials (the healthz port serves `/healthz` only).
        if !extra.iter().any(|a| a.starts_with("--read-only-port=")) {
            args.push(super::read_only_port_flag());
        }
        self.daemon = Some(start_daemon(&args, false));
    }

    /// `kubelet_with`, connected to `cluster` as the node's identity; returns once the
    /// Node is registered.
    #[allow(dead_code)]
    pub fn kubelet_connected(&mut self, cluster: &super::cluster::Cluster, extra: &[&str]) {
        let kubeconfig = format!(
            "--kubeconfig={}",
            cluster.node_kubeconfig(NODE, 30).display()
        );
        let mut args = vec![kubeconfig.as_str()];
        args.extend_from_slice(extra);
        self.kubelet_with(&args);
        let deadline = Instant::now() + super::patience(30);
        while cluster.get_json(&["node", NODE]).is_none() {
            assert!(
                Instant::now() < deadline,
                "the Node was not registered in 30 s"
            );
            std::thread::sleep(POLL);
        }
    }

    /// Stop rkubelet with SIGTERM, as an operator stops a kubelet it swaps out (its pods
    /// keep running in containerd, their volumes mounted).
    #[allow(dead_code)]
    pub fn stop_kubelet(&mut self) {
        let mut daemon = self.daemon.take().expect("rkubelet running");
        let status = daemon.terminate_within(Duration::from_secs(15));
        assert!(
            status.is_some_and(|s| s.success()),
            "rkubelet did not exit cleanly within 15 s of SIGTERM: {status:?}; log:\n{}",
            daemon.log_text()
        );
        self.earlier_logs.push(daemon.log_text());
    }

    /// The ids of the containers the runtime runs.
    #[allow(dead_code)]
    pub async fn running_containers(&self) -> std::collections::BTreeSet<String> {
        use rkubelet::domain::kuberuntime::runtime::{ContainerFilter, ContainerState};
        use rkubelet::ports::runtime::RuntimeService;
        self.rt
            .list_containers(&ContainerFilter::default())
            .await
            .expect("ListContainers")
            .into_iter()
            .filter(|c| c.status.state == ContainerState::Running)
            .map(|c| c.status.id)
            .collect()
    }

    /// SIGKILL rkubelet (its pods keep running in containerd).
    pub fn kill9(&mut self) {
        let mut daemon = self.daemon.take().expect("rkubelet running");
        daemon.child.kill().expect("SIGKILL sent");
        let status = daemon.child.wait().expect("reaped");
        eprintln!("rkubelet killed: {status:?}");
        self.earlier_logs.push(daemon.log_text());
    }

    /// The healthz port.
    pub fn port(&self) -> u16 {
        self.daemon.as_ref().map_or(0, |d| d.port)
    }

    /// The read-only port, serving `/pods`.
    pub fn pods_port(&self) -> u16 {
        self.daemon.as_ref().map_or(0, |d| d.read_only_port)
    }

    pub fn log_text(&self) -> String {
        self.daemon
            .as_ref()
            .map(Daemon::log_text)
            .unwrap_or_default()
    }

    /// Write a manifest atomically (a hidden temp file renamed into place), as a
    /// config management tool would, so rkubelet never reads half a file.
    pub fn write(&self, file: &str, text: &str) {
        let tmp = self.manifests.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).expect("manifest written");
        std::fs::rename(&tmp, self.manifests.join(file)).expect("manifest renamed");
    }

    pub fn remove(&self, file: &str) {
        std::fs::remove_file(self.manifests.join(file)).expect("manifest removed");
    }

    pub fn pod_label(pod: &str) -> BTreeMap<String, String> {
        [(POD_NAME_LABEL.to_string(), pod.to_string())].into()
    }

    pub async fn sandboxes(&self, pod: &str) -> Vec<SandboxEntry> {
        self.rt
            .list_pod_sandboxes(&SandboxFilter {
                labels: Node::pod_label(pod),
                ..Default::default()
            })
            .await
            .expect("ListPodSandbox")
    }

    pub async fn all_sandboxes(&self) -> Vec<SandboxEntry> {
        self.rt
            .list_pod_sandboxes(&SandboxFilter::default())
            .await
            .expect("ListPodSandbox")
    }

    pub async fn containers(&self, pod: &str) -> Vec<ContainerEntry> {
        self.rt
            .list_containers(&ContainerFilter {
                labels: Node::pod_label(pod),
                ..Default::default()
            })
            .await
            .expect("ListContainers")
    }

    /// The full status of a container; `None` once it is gone.
    pub async fn status(&self, id: &str) -> Option<ContainerStatus> {
        match self.rt.container_status(id).await {
            Ok(s) => Some(s),
            Err(RuntimeError::NotFound(_)) => None,
            Err(e) => panic!("ContainerStatus {id}: {e}"),
        }
    }

    pub async fn running(&self, pod: &str, container: &str) -> Option<ContainerEntry> {
        self.containers(pod)
            .await
            .into_iter()
            .find(|c| c.status.name == container && c.status.state == ContainerState::Running)
    }

    pub async fn wait_running(&self, pod: &str, container: &str, secs: u64) -> ContainerEntry {
        eventually!(
            secs,
            format!("container {container} of pod {pod} running"),
            self.running(pod, container).await
        )
    }

    /// `sh -c script` in container `container` of pod `pod` once it runs, through the
    /// CRI's `ExecSync`: (stdout, exit code).
    #[allow(dead_code)] // the volume and propagation tests
    pub async fn exec_sh(&self, pod: &str, container: &str, script: &str) -> (String, i32) {
        let entry = self.wait_running(pod, container, 60).await;
        let cmd = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
        let result = self
            .rt
            .exec_sync(&entry.status.id, &cmd, Duration::from_secs(10))
            .await
            .expect("ExecSync");
        (
            String::from_utf8_lossy(&result.stdout).into_owned(),
            result.exit_code,
        )
    }

    /// The pod called `pod` in rkubelet's `GET /pods`, if listed.
    pub fn pod_json(&self, pod: &str) -> Option<Value> {
        let (code, body) = http_get(self.pods_port(), "/pods")?;
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

    pub fn pods_body(&self) -> String {
        http_get(self.pods_port(), "/pods")
            .map(|(code, body)| format!("{code} {body}"))
            .unwrap_or_else(|| "no answer".to_string())
    }

    /// The first line of any container log under the pod log root whose text (after
    /// `<time> <stream> <tag> `) is `text`, with its file.
    pub fn log_line(&self, text: &str) -> Option<(PathBuf, String)> {
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
    pub fn finish(&mut self) {
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
            for (i, log) in self.earlier_logs.iter().enumerate() {
                eprintln!(
                    "---- earlier rkubelet {} log (last {LOG_LINES_ON_FAILURE} lines) ----\n{}\n---- end ----",
                    i + 1,
                    last_lines(log, LOG_LINES_ON_FAILURE)
                );
                eprintln!(
                    "---- earlier rkubelet {} warnings and errors ----\n{}\n---- end ----",
                    i + 1,
                    distinct_problems(log)
                );
            }
            let log = self.log_text();
            eprintln!(
                "---- rkubelet log (last {LOG_LINES_ON_FAILURE} lines) ----\n{}\n---- end ----",
                last_lines(&log, LOG_LINES_ON_FAILURE)
            );
            eprintln!(
                "---- rkubelet warnings and errors ----\n{}\n---- end ----",
                distinct_problems(&log)
            );
            let log =
                std::fs::read_to_string(self.ctrd.base.join("containerd.log")).unwrap_or_default();
            eprintln!(
                "---- containerd log (last 40 lines) ----\n{}\n---- end ----",
                last_lines(&log, 40)
            );
            eprintln!(
                "---- containerd warnings and errors ----\n{}\n---- end ----",
                distinct_problems(&log)
            );
        }
        if let Some(mut daemon) = self.daemon.take() {
            let _ = daemon.terminate_within(Duration::from_secs(10));
        }
        // rkubelet leaves running pods' volumes mounted when it stops (as upstream): the
        // test's folders go only once their tmpfs mounts (secrets, tokens) are gone.
        super::mounts::unmount_below(self._dirs.path());
    }
}

pub fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
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

/// Calls `f` on every folder under `dir`, `depth` levels down at most (cgroup trees:
/// their files are no folders to walk).
#[allow(dead_code)] // pod_contract and mount_propagation only
pub fn walk_dirs(dir: &Path, depth: usize, f: &mut dyn FnMut(&Path)) {
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let path = entry.path();
            f(&path);
            walk_dirs(&path, depth - 1, f);
        }
    }
}

/// The text of a CRI log line `<rfc3339nano> <stdout|stderr> <F|P> <text>`, if the
/// line has that form.
pub fn cri_log_text(line: &str) -> Option<&str> {
    let mut parts = line.splitn(4, ' ');
    let (time, stream, tag, text) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let time_ok = time.len() >= 20
        && time.as_bytes().get(10) == Some(&b'T')
        && (time.ends_with('Z') || time[19..].contains(['+', '-']));
    (time_ok && matches!(stream, "stdout" | "stderr") && matches!(tag, "F" | "P")).then_some(text)
}

/// One container of a manifest: `sh -c script` in `image`.
pub fn container(name: &str, image: &str, script: &str) -> String {
    let script = serde_json::to_string(script).expect("a JSON string");
    format!(
        "  - name: {name}\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
    )
}

/// A pod with one `main` container running `script` and an emptyDir `scratch` mounted at
/// `/scratch` (so it has a volume folder under the root dir too).
#[allow(dead_code)] // the fault and soak tests
pub fn pod_with_scratch(name: &str, image: &str, script: &str) -> String {
    let main = container("main", image, script).replace(
        "    command:",
        "    volumeMounts:\n    - name: scratch\n      mountPath: /scratch\n    command:",
    );
    pod(
        name,
        "  volumes:\n  - name: scratch\n    emptyDir: {}\n",
        &[],
        &[main],
    )
}

/// A pod manifest; `spec_extra` are further `spec` lines (two-space indented).
pub fn pod(name: &str, spec_extra: &str, init: &[String], containers: &[String]) -> String {
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

/// A pod manifest for the API server, bound to the node (no scheduler needed) and
/// without the service-account volume (no controller manager needed).
#[allow(dead_code)]
pub fn api_pod(name: &str, spec_extra: &str, init: &[String], containers: &[String]) -> String {
    let spec_extra =
        format!("  nodeName: {NODE}\n  automountServiceAccountToken: false\n{spec_extra}");
    pod(name, &spec_extra, init, containers)
}

pub fn secs_between(from_nanos: i64, to_nanos: i64) -> f64 {
    (to_nanos - from_nanos) as f64 / 1e9
}
