//! A private Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) for one
//! test, started with `scripts/test-env/cluster-up.sh BASE` and torn down with
//! `cluster-down.sh BASE` when the guard is dropped. Each instance has its own base
//! directory, CA and ports, so tests run in parallel. A missing binary (etcd, the Kubernetes
//! binaries) fails the test: there is no skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::env_file;
use crate::common::ports::{free_port, free_port_pair};

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env")
}

/// What a test asks of its control plane.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// Also run kube-scheduler.
    pub scheduler: bool,
    /// The controller manager's `--cluster-signing-duration` (default 720h).
    pub signing_duration: Option<String>,
    /// Node identities (`BASE/node-NAME.kubeconfig`) made at start-up.
    pub nodes: Vec<String>,
}

/// A running private control plane, torn down on drop.
pub struct Cluster {
    pub base: PathBuf,
    env: BTreeMap<String, String>,
    down: bool,
}

impl Cluster {
    /// Start a control plane named after the test; panics (the test fails) when it cannot.
    pub fn start(name: &str) -> Cluster {
        Cluster::start_with(name, ClusterOptions::default())
    }

    pub fn start_with(name: &str, options: ClusterOptions) -> Cluster {
        let base = PathBuf::from(format!("/tmp/rkcl-{}-{name}", std::process::id()));
        // The guard exists before the script runs, so a half-started instance is torn down.
        let mut guard = Cluster {
            base: base.clone(),
            env: BTreeMap::new(),
            down: false,
        };
        let mut command = Command::new(scripts().join("cluster-up.sh"));
        command
            .arg(&base)
            .env("APORT", free_port().to_string())
            .env("ETCD_PORT", free_port_pair().to_string())
            .env("NODES", options.nodes.join(" "));
        if options.scheduler {
            command.env("SCHEDULER", "1");
        }
        if let Some(d) = &options.signing_duration {
            command.env("SIGNING_DURATION", d);
        }
        let started = Instant::now();
        let out = command.output().expect("cluster-up.sh runs");
        assert!(
            out.status.success(),
            "cluster-up.sh {} failed:\n{}\n{}",
            base.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        guard.env = env_file::read(&base.join("env")).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "control plane {} up in {:.1} s at {}",
            base.display(),
            started.elapsed().as_secs_f64(),
            guard.var("APISERVER")
        );
        guard
    }

    /// A variable of `BASE/env`; panics when missing.
    pub fn var(&self, key: &str) -> String {
        self.env
            .get(key)
            .cloned()
            .unwrap_or_else(|| panic!("{key} missing from {}/env", self.base.display()))
    }

    pub fn server(&self) -> String {
        self.var("APISERVER")
    }

    pub fn admin_kubeconfig(&self) -> PathBuf {
        PathBuf::from(self.var("KUBECONFIG"))
    }

    pub fn bootstrap_kubeconfig(&self) -> PathBuf {
        PathBuf::from(self.var("BOOTSTRAP_KUBECONFIG"))
    }

    pub fn ca_cert(&self) -> PathBuf {
        PathBuf::from(self.var("CA_CERT"))
    }

    pub fn audit_log(&self) -> PathBuf {
        PathBuf::from(self.var("AUDIT_LOG"))
    }

    /// A kubeconfig with the node identity `system:node:NAME` (group `system:nodes`),
    /// valid `days` days (negative: already expired).
    pub fn node_kubeconfig(&self, node: &str, days: i32) -> PathBuf {
        let out = Command::new(scripts().join("cluster-up.sh"))
            .arg(&self.base)
            .args(["node", node, &days.to_string()])
            .output()
            .expect("cluster-up.sh runs");
        assert!(
            out.status.success(),
            "cluster-up.sh node {node} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    }

    /// Stop one component (`apiserver`, `etcd`, `controller-manager`, `scheduler`).
    pub fn stop_component(&self, name: &str) {
        let out = Command::new(scripts().join("cluster-down.sh"))
            .arg(&self.base)
            .args(["stop", name])
            .output()
            .expect("cluster-down.sh runs");
        assert!(out.status.success(), "stopping {name} failed: {out:?}");
    }

    /// Start a stopped component again; for the API server, wait until it is ready.
    pub fn start_component(&self, name: &str) {
        let out = Command::new(scripts().join("cluster-up.sh"))
            .arg(&self.base)
            .args(["start", name])
            .output()
            .expect("cluster-up.sh runs");
        assert!(out.status.success(), "starting {name} failed: {out:?}");
        if name == "apiserver" {
            let deadline = Instant::now() + super::patience::patience(60);
            while !self.kubectl(&["get", "--raw", "/readyz"]).status.success() {
                assert!(Instant::now() < deadline, "apiserver not ready again");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    /// A second API server on the same etcd (`cluster-up.sh BASE side-door`), ready, while
    /// the first is stopped: what kubectl does through it reaches etcd unseen by a node
    /// whose API server is down. Returns its port; `stop_component("side-door")` ends it.
    pub fn open_side_door(&self) -> u16 {
        let port = free_port();
        let out = Command::new(scripts().join("cluster-up.sh"))
            .arg(&self.base)
            .args(["side-door", &port.to_string()])
            .output()
            .expect("cluster-up.sh runs");
        assert!(out.status.success(), "the side door failed: {out:?}");
        let deadline = Instant::now() + super::patience::patience(60);
        while !self
            .side_door_kubectl(port, &["get", "--raw", "/readyz"])
            .status
            .success()
        {
            assert!(
                Instant::now() < deadline,
                "the side door's API server not ready"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        port
    }

    /// kubectl as the cluster's admin through the side door on `port`.
    pub fn side_door_kubectl(&self, port: u16, args: &[&str]) -> Output {
        Command::new(self.var("KUBECTL"))
            .env("KUBECONFIG", self.admin_kubeconfig())
            .arg(format!("--server=https://127.0.0.1:{port}"))
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// kubectl as the cluster's admin.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(self.var("KUBECTL"))
            .env("KUBECONFIG", self.admin_kubeconfig())
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// `kubectl apply` of YAML documents, which must succeed. An apply kubectl could not
    /// send (the API server slow to answer on a loaded machine: "Unable to connect to the
    /// server", seen in CI) is sent again, twice at most: an apply is idempotent.
    pub fn apply(&self, yaml: &str) {
        use std::io::Write;
        const ATTEMPTS: usize = 3;
        for attempt in 1..=ATTEMPTS {
            let mut child = Command::new(self.var("KUBECTL"))
                .env("KUBECONFIG", self.admin_kubeconfig())
                .args(["apply", "-f", "-"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("kubectl runs");
            if let Some(mut stdin) = child.stdin.take() {
                stdin
                    .write_all(yaml.as_bytes())
                    .expect("manifest sent to kubectl");
            }
            let out = child.wait_with_output().expect("kubectl ends");
            if out.status.success() {
                return;
            }
            let error = String::from_utf8_lossy(&out.stderr);
            let unsent = error.contains("Unable to connect to the server");
            assert!(
                unsent && attempt < ATTEMPTS,
                "kubectl apply failed (attempt {attempt}): {error}\n{yaml}"
            );
            eprintln!("kubectl apply not sent (attempt {attempt}), again: {error}");
        }
    }

    /// `kubectl get ARGS -o json`, parsed; `None` when kubectl fails (e.g. not found).
    pub fn get_json(&self, args: &[&str]) -> Option<Value> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let out = self.kubectl(&all);
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// The API server's audit events so far (one per request, stage ResponseComplete).
    pub fn audit_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.audit_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Tear down now; the folder goes too.
    pub fn down(&mut self) {
        self.down = true;
        let out = Command::new(scripts().join("cluster-down.sh"))
            .arg(&self.base)
            .output();
        if let Ok(out) = out {
            if !out.status.success() {
                eprintln!(
                    "cluster-down.sh {} failed: {}",
                    self.base.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.down {
            if std::thread::panicking() {
                // Keep what explains the failure: the last lines of each component's log.
                for name in ["apiserver", "controller-manager", "etcd"] {
                    let log = std::fs::read_to_string(self.base.join(format!("{name}.log")))
                        .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(15).collect();
                    eprintln!("--- {name}.log (last lines) ---");
                    for l in tail.iter().rev() {
                        eprintln!("{l}");
                    }
                }
            }
            self.down();
        }
    }
}
