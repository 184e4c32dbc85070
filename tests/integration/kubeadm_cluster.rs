//! Issue 35, "a kubeadm cluster on rkubelet": kubeadm v1.26.1 runs `kubeadm init` with
//! rkubelet as the node's `kubelet`; rkubelet runs kubeadm's control plane as static pods
//! (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, images built here from
//! the peers' binaries); a second rkubelet node joins with `kubeadm join` (bootstrap token,
//! TLS bootstrap, the `config.yaml` kubeadm downloads from the cluster, the flags of its
//! `kubeadm-flags.env`); a Deployment spreads over both and its logs are read through the
//! API server from each node's kubelet API.
//!
//! Each node is a private mount namespace with its own `/etc/kubernetes`, `/var/lib` and
//! containerd (`scripts/test-env/kubeadm-node.sh`): kubeadm's paths are fixed, and two
//! nodes share this one machine. rkubelet is started where systemd would start it, with
//! the flags of `packaging/10-rkubelet-kubeadm.conf` (the drop-in an operator installs)
//! and the files kubeadm wrote.
//!
//! The preflight errors ignored, each forced by this machine (kubeadm's warnings about
//! systemd, which is not PID 1 here, are warnings and stay):
//! - `ImagePull`, for kube-proxy and CoreDNS only: no binary of either is among the peers
//!   and no registry is reachable; their addons are skipped. The test checks that the
//!   control plane's own images, etcd's and pause's were all found locally.
//! - `Port-10250` on the joining node: the first node's kubelet holds 10250 on this same
//!   machine; the joining node's rkubelet serves its API on another port.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::env_file;
use crate::common::free_port;
use crate::common::upstream::kube_bins;

const POLL: Duration = Duration::from_millis(500);
const CONTROL_PLANE: &str = "rk-kadm-cp";
const WORKER: &str = "rk-kadm-w";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env/kubeadm-node.sh")
}

/// The flags the kubeadm drop-in gives the kubelet before kubeadm's own
/// (`KUBELET_KUBECONFIG_ARGS`, `KUBELET_CONFIG_ARGS`), read from the drop-in itself.
fn drop_in_flags() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/10-rkubelet-kubeadm.conf");
    let text = std::fs::read_to_string(&path).expect("the kubeadm drop-in");
    let mut flags = Vec::new();
    for key in ["KUBELET_KUBECONFIG_ARGS", "KUBELET_CONFIG_ARGS"] {
        let prefix = format!("Environment=\"{key}=");
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{key} missing from {}", path.display()));
        flags.extend(
            line.trim_end_matches('"')
                .split_whitespace()
                .map(String::from),
        );
    }
    flags
}

/// One kubeadm node: its namespace and containerd, and the rkubelet started in it; all
/// stopped and removed on drop.
struct KubeadmNode {
    base: PathBuf,
    env: BTreeMap<String, String>,
    bins: PathBuf,
    kubelet: Option<Child>,
}

impl KubeadmNode {
    fn up(name: &str, kube: &Path) -> KubeadmNode {
        let base = PathBuf::from(format!("/tmp/rkadm-{}-{name}", std::process::id()));
        let mut node = KubeadmNode {
            base: base.clone(),
            env: BTreeMap::new(),
            bins: base.join("bin"),
            kubelet: None,
        };
        let out = Command::new(script())
            .args(["up", &base.display().to_string()])
            .env("KUBE_BINS", kube)
            .output()
            .expect("kubeadm-node.sh runs");
        assert!(
            out.status.success(),
            "kubeadm-node.sh up {} failed:\n{}",
            base.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        node.env = env_file::read(&base.join("env")).unwrap_or_else(|e| panic!("{e}"));
        // What kubeadm finds on PATH: rkubelet as `kubelet`, and the upstream tools.
        std::fs::create_dir_all(&node.bins).expect("bin folder");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_rkubelet"), node.bins.join("kubelet"))
            .expect("kubelet link");
        for tool in ["kubeadm", "crictl", "kubectl"] {
            std::os::unix::fs::symlink(kube.join(tool), node.bins.join(tool)).expect("tool link");
        }
        node
    }

    fn var(&self, key: &str) -> String {
        self.env
            .get(key)
            .cloned()
            .unwrap_or_else(|| panic!("{key} missing from {}/env", self.base.display()))
    }

    /// A host path of what the node sees at `/etc/kubernetes/<rel>`.
    fn etc(&self, rel: &str) -> PathBuf {
        PathBuf::from(self.var("NODE_ETC")).join(rel)
    }

    /// A host path of what the node sees at `/var/lib/<rel>`.
    fn var_lib(&self, rel: &str) -> PathBuf {
        PathBuf::from(self.var("NODE_VAR_LIB")).join(rel)
    }

    /// `program` run in the node's mount namespace, with rkubelet first on PATH as
    /// `kubelet`. nsenter execs it: the child is the program itself.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new("nsenter");
        let path = format!(
            "{}:{}",
            self.bins.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .arg(format!("--mount=/proc/{}/ns/mnt", self.var("HOLDER_PID")))
            .arg("--")
            .arg(program)
            .env("PATH", path);
        command
    }

    /// `kubeadm ARGS` in the background, its output in `BASE/<log>`.
    fn kubeadm(&self, args: &[&str], log: &str) -> Child {
        let out = File::create(self.base.join(log)).expect("kubeadm log");
        self.command(&self.bins.join("kubeadm").display().to_string())
            .args(args)
            .stdout(Stdio::from(out.try_clone().expect("log")))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("kubeadm starts")
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.base.join(name)).unwrap_or_default()
    }

    /// Once kubeadm has written the kubelet's files (`kubeadm-flags.env` and
    /// `kubeconfig_written`), start rkubelet as systemd would with the kubeadm drop-in.
    fn start_kubelet_when_written(&mut self, kubeadm: &mut Child, kubeconfig_written: &str) {
        let flags_env = self.var_lib("kubelet/kubeadm-flags.env");
        let kubeconfig = self.etc(kubeconfig_written);
        let deadline = Instant::now() + crate::common::patience(120);
        while !(flags_env.exists() && kubeconfig.exists()) {
            if let Ok(Some(status)) = kubeadm.try_wait() {
                panic!(
                    "kubeadm ended ({status}) before writing the kubelet's files:\n{}",
                    self.log("kubeadm.log")
                );
            }
            assert!(
                Instant::now() < deadline,
                "kubeadm wrote no kubelet files in 120 s:\n{}",
                self.log("kubeadm.log")
            );
            std::thread::sleep(POLL);
        }
        let kubeadm_args = env_file::read(&flags_env)
            .unwrap_or_else(|e| panic!("{e}"))
            .remove("KUBELET_KUBEADM_ARGS")
            .expect("KUBELET_KUBEADM_ARGS in kubeadm-flags.env");
        let mut args = drop_in_flags();
        args.extend(kubeadm_args.split_whitespace().map(String::from));
        let out = File::create(self.base.join("rkubelet.log")).expect("kubelet log");
        let child = self
            .command(&self.bins.join("kubelet").display().to_string())
            .args(&args)
            .stdout(Stdio::from(out.try_clone().expect("log")))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("rkubelet starts");
        self.kubelet = Some(child);
    }

    /// What a failure needs to be explained: every container the node's runtime holds
    /// (restarts included), and the last lines of every container log, read from the
    /// node's pod-log folder since the API server may be what is down. kube-apiserver's
    /// come last: CI keeps the tail of a failing run's output.
    fn print_runtime_state(&self) {
        // The disk the node shares with the rest of CI, and whether rkubelet reclaimed on
        // it: a removed image cannot come back, since the test's registry does not exist.
        let rkubelet_log = self.log("rkubelet.log");
        let reclaims: Vec<&str> = rkubelet_log
            .lines()
            .filter(|l| {
                l.contains("Eviction manager: attempting") || l.contains("eviction manager: ")
            })
            .take(5)
            .collect();
        eprintln!(
            "--- {} eviction reclaims (first 5) ---\n{}",
            self.base.display(),
            reclaims.join("\n")
        );
        for units in ["-h", "-i"] {
            if let Ok(out) = self.command("df").arg(units).arg(&self.base).output() {
                eprintln!("{}", String::from_utf8_lossy(&out.stdout));
            }
        }
        if let Some(endpoint) = self.env.get("CRI_ENDPOINT") {
            let listing = self
                .command(&self.bins.join("crictl").display().to_string())
                .args(["--runtime-endpoint", endpoint, "ps", "-a"])
                .output();
            if let Ok(out) = listing {
                eprintln!(
                    "--- {} containers ---\n{}{}",
                    self.base.display(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        let Some(root) = self.env.get("RKUBELET_POD_LOG_ROOT") else {
            return;
        };
        let Ok(pods) = std::fs::read_dir(root) else {
            return;
        };
        let mut logs: Vec<PathBuf> = pods
            .flatten()
            .filter_map(|pod| std::fs::read_dir(pod.path()).ok())
            .flat_map(|containers| containers.flatten())
            .filter_map(|container| std::fs::read_dir(container.path()).ok())
            .flat_map(|files| files.flatten().map(|f| f.path()))
            .collect();
        logs.sort_by_key(|path| {
            (
                path.to_string_lossy().contains("kube-apiserver"),
                path.clone(),
            )
        });
        for path in logs {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            eprintln!(
                "--- {} (last lines) ---\n{}",
                path.display(),
                tail(&text, 15)
            );
        }
    }

    /// Wait for kubeadm to end; it must succeed within `limit`.
    fn finish(&self, mut kubeadm: Child, what: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = kubeadm.try_wait() {
                let log = self.log("kubeadm.log");
                assert!(
                    status.success(),
                    "{what} failed ({status}):\n{log}\n--- rkubelet ---\n{}",
                    tail(&self.log("rkubelet.log"), 60)
                );
                return log;
            }
            if Instant::now() > deadline {
                let _ = kubeadm.kill();
                let _ = kubeadm.wait();
                panic!(
                    "{what} did not end in {limit:?}:\n{}\n--- rkubelet ---\n{}",
                    self.log("kubeadm.log"),
                    tail(&self.log("rkubelet.log"), 60)
                );
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for KubeadmNode {
    fn drop(&mut self) {
        if let Some(mut kubelet) = self.kubelet.take() {
            if let Ok(pid) = i32::try_from(kubelet.id()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            let _ = kubelet.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- {} rkubelet (last lines) ---\n{}",
                self.base.display(),
                tail(&self.log("rkubelet.log"), 40)
            );
            self.print_runtime_state();
        }
        let _ = Command::new(script())
            .args(["down", &self.base.display().to_string()])
            .status();
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The preflight warnings of a kubeadm run, by check name (`[WARNING Name]`).
fn preflight_warnings(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.trim().strip_prefix("[WARNING "))
        .filter_map(|l| l.split_once("]:"))
        .map(|(name, _)| name.to_string())
        .collect()
}

fn kubectl(kube: &Path, admin: &Path, args: &[&str]) -> Output {
    Command::new(kube.join("kubectl"))
        .env("KUBECONFIG", admin)
        .args(args)
        .output()
        .expect("kubectl runs")
}

fn kubectl_json(kube: &Path, admin: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = kubectl(kube, admin, &all);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("kubectl's JSON")
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(POLL);
    }
}

fn ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: spread, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: spread}}
  template:
    metadata: {labels: {app: spread}}
    spec:
      tolerations:
      - {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        labelSelector: {matchLabels: {app: spread}}
      containers:
      - name: c
        image: docker.io/library/busybox:1.36
        imagePullPolicy: IfNotPresent
        command: [sh, -c, 'echo \"on $NODE\"; exec sleep 3600']
        env:
        - name: NODE
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
";

#[test]
#[ignore = "needs kubeadm and the control plane's binaries v1.26.1, containerd, etcd and root: run by scripts/test.sh"]
fn kubeadm_init_and_join_build_a_two_node_cluster_on_rkubelet() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "must run as root: kubeadm and containerd"
    );
    if let Some(reason) = crate::common::containerd::Containerd::unavailable() {
        panic!("containerd is needed: {reason}");
    }
    let kube = kube_bins();
    let mut cp = KubeadmNode::up("cp", &kube);
    let mut worker = KubeadmNode::up("w", &kube);
    let admin = cp.etc("admin.conf");

    // ---- kubeadm init ----
    let api_port = free_port();
    // CI's disk is shared and at times nearly full. The control plane's images were
    // imported and cannot be pulled again, so neither eviction's reclaim nor image GC may
    // remove them: a landing run once lost them all before the API server started.
    let init_config = format!(
        "apiVersion: kubeadm.k8s.io/v1beta3
kind: InitConfiguration
localAPIEndpoint:
  bindPort: {api_port}
nodeRegistration:
  name: {CONTROL_PLANE}
  criSocket: {endpoint}
  ignorePreflightErrors: [ImagePull]
  kubeletExtraArgs:
    cgroup-root: {cgroup_root}
    pod-logs-dir: {logs}
---
apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
kubernetesVersion: v1.26.1
imageRepository: registry.rkubelet.test
etcd:
  local:
    imageRepository: registry.rkubelet.test
    imageTag: {etcd_tag}
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1Mi
  nodefs.inodesFree: \"1\"
  imagefs.available: 1Mi
imageGCHighThresholdPercent: 100
",
        endpoint = cp.var("CRI_ENDPOINT"),
        cgroup_root = cp.var("RKUBELET_CGROUP_ROOT"),
        logs = cp.var("RKUBELET_POD_LOG_ROOT"),
        etcd_tag = cp.var("ETCD_IMAGE_TAG"),
    );
    let init_path = cp.base.join("init.yaml");
    std::fs::write(&init_path, init_config).expect("init config");
    let started = Instant::now();
    let mut init = cp.kubeadm(
        &[
            "init",
            "--config",
            &init_path.display().to_string(),
            "--skip-phases=addon/kube-proxy,addon/coredns",
        ],
        "kubeadm.log",
    );
    cp.start_kubelet_when_written(&mut init, "kubelet.conf");
    let init_log = cp.finish(init, "kubeadm init", Duration::from_secs(300));
    eprintln!(
        "kubeadm init with rkubelet: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        init_log.contains("Your Kubernetes control-plane has initialized successfully!"),
        "{init_log}"
    );
    // The preflight: rkubelet's `kubelet --version` satisfied the version check, and the
    // images kubeadm could not find are kube-proxy's and CoreDNS's only.
    let warnings = preflight_warnings(&init_log);
    for warning in &warnings {
        assert!(
            ["Hostname", "Service-Kubelet", "ImagePull"].contains(&warning.as_str()),
            "an unexpected preflight warning {warning}:\n{init_log}"
        );
    }
    let missing_images: Vec<&str> = init_log
        .lines()
        .filter(|l| l.contains("[WARNING ImagePull]"))
        .collect();
    assert_eq!(missing_images.len(), 2, "{init_log}");
    assert!(missing_images
        .iter()
        .any(|l| l.contains("/kube-proxy:v1.26.1")));
    assert!(missing_images.iter().any(|l| l.contains("/coredns:")));
    assert!(!init_log.contains("KubeletVersion"), "{init_log}");
    // The kubeconfig's embedded certificate went to --cert-dir, as upstream's certificate
    // manager puts it, so kubeadm's kubelet-finalize points the kubeconfig there.
    assert!(
        init_log.contains("[kubelet-finalize] Updating \"/etc/kubernetes/kubelet.conf\" to point to a rotatable kubelet client certificate and key"),
        "{init_log}"
    );
    let cp_kubeconfig = std::fs::read_to_string(cp.etc("kubelet.conf")).expect("kubelet.conf");
    assert!(
        cp_kubeconfig.contains("/var/lib/kubelet/pki/kubelet-client-current.pem"),
        "{cp_kubeconfig}"
    );

    // rkubelet runs the four static pods; their mirror pods are Running in the API.
    wait_until(
        "the control plane's mirror pods Running",
        Duration::from_secs(120),
        || {
            let pods = kubectl_json(&kube, &admin, &["get", "pods", "-n", "kube-system"]);
            let running: Vec<String> = pods["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["status"]["phase"] == "Running")
                .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
                .collect();
            [
                "etcd",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
            ]
            .iter()
            .all(|c| running.contains(&format!("{c}-{CONTROL_PLANE}")))
        },
    );
    let node = kubectl_json(&kube, &admin, &["get", "node", CONTROL_PLANE]);
    assert!(ready(&node), "{node}");
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v1.26.1");
    // kubeadm's mark-control-plane reached the Node rkubelet registered.
    assert!(
        node["metadata"]["labels"]
            .get("node-role.kubernetes.io/control-plane")
            .is_some(),
        "{node}"
    );
    assert!(
        node["metadata"]["annotations"]["kubeadm.alpha.kubernetes.io/cri-socket"]
            .as_str()
            .is_some_and(|s| s == cp.var("CRI_ENDPOINT")),
        "{node}"
    );

    // ---- kubeadm join ----
    let out = cp
        .command(&cp.bins.join("kubeadm").display().to_string())
        .args(["token", "create", "--print-join-command"])
        .env("KUBECONFIG", "/etc/kubernetes/admin.conf")
        .output()
        .expect("kubeadm token create runs");
    assert!(out.status.success(), "{out:?}");
    let join_command = String::from_utf8_lossy(&out.stdout).to_string();
    let words: Vec<&str> = join_command.split_whitespace().collect();
    let after = |flag: &str| {
        words
            .iter()
            .position(|w| *w == flag)
            .and_then(|i| words.get(i + 1))
            .copied()
            .unwrap_or_else(|| panic!("{flag} missing from {join_command}"))
    };
    let endpoint = after("join");
    let token = after("--token");
    let ca_hash = after("--discovery-token-ca-cert-hash");
    let join_config = format!(
        "apiVersion: kubeadm.k8s.io/v1beta3
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: {endpoint}
    token: {token}
    caCertHashes: [{ca_hash}]
nodeRegistration:
  name: {WORKER}
  criSocket: {cri}
  ignorePreflightErrors: [Port-10250]
  kubeletExtraArgs:
    cgroup-root: {cgroup_root}
    pod-logs-dir: {logs}
    port: \"{port}\"
    healthz-port: \"{healthz}\"
",
        cri = worker.var("CRI_ENDPOINT"),
        cgroup_root = worker.var("RKUBELET_CGROUP_ROOT"),
        logs = worker.var("RKUBELET_POD_LOG_ROOT"),
        port = free_port(),
        healthz = free_port(),
    );
    let join_path = worker.base.join("join.yaml");
    std::fs::write(&join_path, join_config).expect("join config");
    let started = Instant::now();
    let mut join = worker.kubeadm(
        &["join", "--config", &join_path.display().to_string()],
        "kubeadm.log",
    );
    worker.start_kubelet_when_written(&mut join, "bootstrap-kubelet.conf");
    let join_log = worker.finish(join, "kubeadm join", Duration::from_secs(300));
    eprintln!(
        "kubeadm join with rkubelet: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        join_log.contains("This node has joined the cluster"),
        "{join_log}"
    );
    for warning in preflight_warnings(&join_log) {
        assert!(
            ["Hostname", "Service-Kubelet", "Port-10250"].contains(&warning.as_str()),
            "an unexpected preflight warning {warning}:\n{join_log}"
        );
    }
    // The TLS bootstrap: the kubeconfig rkubelet wrote names the certificate it was issued.
    let kubeconfig = std::fs::read_to_string(worker.etc("kubelet.conf")).expect("kubelet.conf");
    assert!(
        kubeconfig.contains("/var/lib/kubelet/pki/kubelet-client-current.pem"),
        "{kubeconfig}"
    );
    assert!(worker
        .var_lib("kubelet/pki/kubelet-client-current.pem")
        .exists());
    let csrs = kubectl_json(&kube, &admin, &["get", "csr"]);
    assert!(
        csrs["items"].as_array().into_iter().flatten().any(|c| {
            c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
                && c["spec"]["username"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("system:bootstrap:"))
                && c["status"]["certificate"].is_string()
        }),
        "{csrs}"
    );
    wait_until("the joined node Ready", Duration::from_secs(60), || {
        ready(&kubectl_json(&kube, &admin, &["get", "node", WORKER]))
    });

    // ---- a Deployment over both nodes ----
    let mut apply = Command::new(kube.join("kubectl"))
        .env("KUBECONFIG", &admin)
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("kubectl apply");
    std::io::Write::write_all(
        &mut apply.stdin.take().expect("stdin"),
        DEPLOYMENT.as_bytes(),
    )
    .expect("manifest written");
    assert!(apply.wait().expect("kubectl ends").success());
    let mut placed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    wait_until(
        "the Deployment's 4 pods Running",
        Duration::from_secs(120),
        || {
            let pods = kubectl_json(&kube, &admin, &["get", "pods", "-l", "app=spread"]);
            placed.clear();
            for p in pods["items"].as_array().into_iter().flatten() {
                if p["status"]["phase"] == "Running" {
                    placed
                        .entry(p["spec"]["nodeName"].as_str().unwrap_or("").to_string())
                        .or_default()
                        .push(p["metadata"]["name"].as_str().unwrap_or("").to_string());
                }
            }
            placed.values().map(Vec::len).sum::<usize>() == 4
        },
    );
    assert_eq!(
        placed.keys().cloned().collect::<Vec<_>>(),
        [CONTROL_PLANE, WORKER],
        "{placed:?}"
    );
    assert!(placed.values().all(|pods| pods.len() == 2), "{placed:?}");
    // Each node's kubelet API, reached by the API server: the pod's log names its node.
    for (node, pods) in &placed {
        let out = kubectl(&kube, &admin, &["logs", &pods[0]]);
        assert!(out.status.success(), "kubectl logs {}: {out:?}", pods[0]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("on {node}")
        );
    }
    // The control-plane node's forced rotation: a certificate for its own identity (its
    // request is retried every 30 s at most until the API server answers; approved once
    // kubeadm's bootstrap-token phase has bound system:nodes to self-renewal).
    wait_until(
        "the control-plane node's renewed client certificate",
        Duration::from_secs(180),
        || {
            let csrs = kubectl_json(&kube, &admin, &["get", "csr"]);
            csrs["items"].as_array().into_iter().flatten().any(|c| {
                c["spec"]["username"] == format!("system:node:{CONTROL_PLANE}")
                    && c["status"]["certificate"].is_string()
            })
        },
    );
    drop(worker);
    drop(cp);
}
