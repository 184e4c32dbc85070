//! Issue 35, "Prometheus for real": Debian's Prometheus (2.42) scrapes the four metrics
//! endpoints of rkubelet's kubelet API over TLS, verifying the node's self-signed serving
//! certificate, with a service-account token that RBAC allows `nodes/metrics`, checked by
//! rkubelet's webhook authentication and authorization against a private kube-apiserver
//! v1.26.1 (upstream's Prometheus guides grant exactly that). Every target must be up with
//! samples, `promtool check metrics` must find nothing in each endpoint's output, and a
//! token without `nodes/metrics` must be refused with 403.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::common::cluster::Cluster;
use crate::common::free_port;
use crate::common::kubelet_api::{kubelet_secured, text, wait_for};
use crate::common::node::{container, pod, Node};

/// The scrape jobs: (job, path, one series of it that must have samples).
const JOBS: [(&str, &str, &str); 4] = [
    ("kubelet", "/metrics", "kubelet_running_pods"),
    (
        "cadvisor",
        "/metrics/cadvisor",
        "container_cpu_usage_seconds_total",
    ),
    ("probes", "/metrics/probes", "prober_probe_total"),
    (
        "resource",
        "/metrics/resource",
        "node_cpu_usage_seconds_total",
    ),
];

/// The RBAC of upstream's Prometheus guides for the kubelet's metrics: `get` on
/// `nodes/metrics`, bound to the scraper's service account. `denied` has no binding.
const RBAC: &str = "apiVersion: v1
kind: ServiceAccount
metadata:
  name: prometheus
  namespace: default
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: denied
  namespace: default
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kubelet-metrics-reader
rules:
- apiGroups: [\"\"]
  resources: [nodes/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prometheus-kubelet-metrics
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: kubelet-metrics-reader
subjects:
- kind: ServiceAccount
  name: prometheus
  namespace: default
";

/// A private Prometheus, killed and its folder removed when dropped (a failing test too).
struct Prometheus {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(config: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, config).expect("config written");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("prometheus runs (Debian's prometheus package: scripts/test-env/install-deps.sh installs it)");
        Prometheus { child, port, dir }
    }

    /// `GET /api/v1/<path>` of Prometheus's HTTP API (query parameters URL-encoded by
    /// curl): its `data`, or `None` when it does not answer yet.
    fn api(&self, path: &str, params: &[(&str, &str)]) -> Option<Value> {
        let mut curl = Command::new("curl");
        curl.args(["-sf", "--max-time", "5", "-G"]);
        for (k, v) in params {
            curl.args(["--data-urlencode", &format!("{k}={v}")]);
        }
        let out = curl
            .arg(format!("http://127.0.0.1:{}/api/v1/{path}", self.port))
            .output()
            .expect("curl runs");
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        (v["status"] == "success").then(|| v["data"].clone())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!(
                "---- prometheus log (last lines) ----\n{}\n---- end ----",
                lines[lines.len().saturating_sub(30)..].join("\n")
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The scrape configuration: one job per endpoint, and `denied` (the token without
/// `nodes/metrics`) on `/metrics`.
fn scrape_config(target: &str, ca: &Path, token: &Path, denied: &Path) -> String {
    let job = |name: &str, path: &str, credentials: &Path| {
        format!(
            "- job_name: {name}\n  scheme: https\n  metrics_path: {path}\n  tls_config:\n    ca_file: {}\n  authorization:\n    credentials_file: {}\n  static_configs:\n  - targets: ['{target}']\n",
            ca.display(),
            credentials.display()
        )
    };
    let mut config =
        String::from("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n");
    for (name, path, _) in JOBS {
        config.push_str(&job(name, path, token));
    }
    config.push_str(&job("denied", "/metrics", denied));
    config
}

/// A token of service account `name` written to a file in `dir`.
fn token_file(cluster: &Cluster, dir: &Path, name: &str) -> PathBuf {
    let out = cluster.kubectl(&["create", "token", name, "-n", "default"]);
    assert!(out.status.success(), "kubectl create token {name}: {out:?}");
    let file = dir.join(format!("{name}.token"));
    std::fs::write(&file, text(&out).trim()).expect("token written");
    file
}

/// rkubelet's answer to `path` with the bearer token of `token`, the serving certificate
/// verified against `ca`: (HTTP status, body).
fn fetch(port: u16, path: &str, ca: &Path, token: &Path) -> (u16, String) {
    let bearer = format!(
        "Authorization: Bearer {}",
        std::fs::read_to_string(token).expect("token file")
    );
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "-w", "\n%{http_code}", "--cacert"])
        .arg(ca)
        .args(["-H", &bearer])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl runs");
    let all = text(&out);
    let (body, code) = all.rsplit_once('\n').unwrap_or(("", &all));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// `promtool check metrics` on `body`: (exit status 0, what it printed).
fn promtool_check(body: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian's prometheus package)");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(body.as_bytes()).expect("metrics sent");
    }
    let out = child.wait_with_output().expect("promtool ends");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd), containerd, Debian's prometheus package (prometheus, promtool) and root: run by scripts/test.sh"]
async fn prometheus_scrapes_every_metrics_endpoint_with_a_nodes_metrics_token() {
    let started = Instant::now();
    let cluster = Cluster::start("kprom");
    let mut node = Node::start("kprom");
    let port = free_port();
    // An HTTP readiness probe, so /metrics/probes has samples.
    let web = format!(
        "{}    readinessProbe:\n      httpGet:\n        path: /ready\n        port: 8080\n      periodSeconds: 1\n",
        container(
            "web",
            &node.busybox,
            "mkdir -p /www; echo ok > /www/ready; exec httpd -f -p 8080 -h /www"
        )
    );
    node.write("web.yaml", &pod("web", "", &[], &[web]));
    // rkubelet's defaults: webhook authentication and authorization, no anonymous access.
    let pki = kubelet_secured(&mut node, &cluster, port);
    // No serving certificate is configured: rkubelet makes upstream's self-signed one
    // (for the hostname, localhost, 127.0.0.1 and ::1), which is its own CA.
    let serving = pki.join("kubelet.crt");
    wait_for(30, "kubelet.crt", || serving.exists().then_some(()));

    cluster.apply(RBAC);
    let dir = tempfile::tempdir().expect("temp dir");
    let token = token_file(&cluster, dir.path(), "prometheus");
    let denied = token_file(&cluster, dir.path(), "denied");

    // Straight to rkubelet: each endpoint, once it has its series, passes promtool.
    for (job, path, series) in JOBS {
        let body = wait_for(90, &format!("{series} in {path}"), || {
            let (code, body) = fetch(port, path, &serving, &token);
            (code == 200 && body.lines().any(|l| l.starts_with(series))).then_some(body)
        });
        let (ok, said) = promtool_check(&body);
        assert!(
            ok && said.trim().is_empty(),
            "promtool check metrics on {job} ({path}): {said}\n{body}"
        );
        eprintln!(
            "promtool check metrics {path}: clean ({} lines)",
            body.lines().count()
        );
    }
    let (code, body) = fetch(port, "/metrics", &serving, &denied);
    assert_eq!(
        (code, body.as_str()),
        (
            403,
            "Forbidden (user=system:serviceaccount:default:denied, verb=get, resource=nodes, subresource=metrics)"
        )
    );

    // Prometheus: every job with the allowed token up, the denied one down with 403.
    let prometheus = Prometheus::start(&scrape_config(
        &format!("127.0.0.1:{port}"),
        &serving,
        &token,
        &denied,
    ));
    let targets = wait_for(60, "every target scraped, the allowed ones up", || {
        let data = prometheus.api("targets", &[])?;
        let active = data["activeTargets"].as_array()?.clone();
        let scraped = active.len() == JOBS.len() + 1
            && active
                .iter()
                .all(|t| t["lastScrape"] != "0001-01-01T00:00:00Z");
        let allowed_up = active
            .iter()
            .filter(|t| t["labels"]["job"] != "denied")
            .all(|t| t["health"] == "up");
        (scraped && allowed_up).then_some(active)
    });
    for t in &targets {
        eprintln!(
            "target {} {}: {} {}",
            t["labels"]["job"], t["scrapeUrl"], t["health"], t["lastError"]
        );
    }
    let refused = targets
        .iter()
        .find(|t| t["labels"]["job"] == "denied")
        .expect("the denied job");
    assert_eq!(refused["health"], "down", "{refused}");
    assert!(
        refused["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("403")),
        "{refused}"
    );

    // The queries: `up` per job, and samples of each endpoint's series.
    let up = prometheus.api("query", &[("query", "up")]).expect("up");
    let mut seen: Vec<(String, String)> = up["result"]
        .as_array()
        .expect("a vector")
        .iter()
        .map(|r| {
            (
                r["metric"]["job"].as_str().unwrap_or("").to_owned(),
                r["value"][1].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    seen.sort();
    let mut expected: Vec<(String, String)> = JOBS
        .iter()
        .map(|(job, _, _)| ((*job).to_owned(), "1".to_owned()))
        .chain([("denied".to_owned(), "0".to_owned())])
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
    for (job, _, series) in JOBS {
        let query = format!("{series}{{job=\"{job}\"}}");
        let result = wait_for(30, &format!("samples of {query}"), || {
            let data = prometheus.api("query", &[("query", &query)])?;
            let result = data["result"].as_array()?.clone();
            (!result.is_empty()).then_some(result)
        });
        eprintln!("{query}: {} series, e.g. {}", result.len(), result[0]);
    }
    drop(prometheus);
    node.finish();
    eprintln!(
        "FIGURE prometheus_scrape: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
