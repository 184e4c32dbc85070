//! `/stats/summary`, `/metrics`, `/metrics/cadvisor`, `/metrics/resource` and `/metrics/probes` of the
//! kubelet API, reached through a real private control plane (kube-apiserver v1.26.1's
//! node proxy, as `kubectl get --raw` and a Prometheus scraping through the API server
//! reach them) on a node of a private containerd: the summary's working sets against
//! the kernel's cgroup files, and the metrics parsed by a real Prometheus parser
//! (Python's `prometheus_client` from PyPI, installed by scripts/test-env/install-deps.sh).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::cluster::Cluster;
use crate::common::free_port;
use crate::common::kubelet_api::{host_ip, proxy, text, wait_for};
use crate::common::node::{container, pod, Node, NODE};

/// The pod holds 16 MiB of tmpfs (swap-backed: in the working set, not the inactive file
/// cache).
const FILLER: &str = "dd if=/dev/zero of=/dev/shm/fill bs=1M count=16 2>/dev/null; sleep 3600";

/// The parser: every family of each file, as JSON (`{file: {family: {type, samples:
/// [[name, labels, value]]}}}`); fails when `prometheus_client` is missing or a file
/// does not parse.
const PARSE: &str = r##"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as text_format
out = {}
for path in sys.argv[1:]:
    families = {}
    with open(path) as f:
        body = f.read()
    # OpenMetrics ends with "# EOF"; the text format 0.0.4 (served without an Accept
    # asking for OpenMetrics, as through kubectl) has no end marker.
    parse = openmetrics if body.rstrip().endswith("# EOF") else text_format
    for fam in parse(body):
        families[fam.name] = {
            "type": fam.type,
            "samples": [[s.name, s.labels, s.value] for s in fam.samples],
        }
    out[path] = families
print(json.dumps(out))
"##;

/// Parses the files with the real parser.
fn parse_metrics(files: &[PathBuf]) -> Value {
    let out = Command::new("python3")
        .arg("-c")
        .arg(PARSE)
        .args(files)
        .output()
        .expect("python3 runs (scripts/test-env/install-deps.sh installs it)");
    assert!(
        out.status.success(),
        "the Prometheus parser failed (is prometheus_client installed? scripts/test-env/install-deps.sh installs it):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the parser's JSON")
}

/// The samples of `family` in `parsed`, failing when it is absent or of another type.
fn samples<'a>(parsed: &'a Value, family: &str, kind: &str) -> &'a Vec<Value> {
    let fam = &parsed[family];
    assert_eq!(fam["type"], kind, "family {family}: {fam}");
    fam["samples"].as_array().expect("samples")
}

/// The first sample named `name` whose labels hold every `(key, value)` of `labels`.
fn find<'a>(samples: &'a [Value], name: &str, labels: &[(&str, &str)]) -> Option<&'a Value> {
    samples
        .iter()
        .find(|s| s[0] == name && labels.iter().all(|(k, v)| s[1][*k].as_str() == Some(*v)))
}

fn read_u64(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn stat_value(path: &Path, key: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

/// The memory hierarchy's mount and whether it is cgroup v1.
fn memory_mount() -> (PathBuf, bool) {
    let v1 = Path::new("/sys/fs/cgroup/memory");
    if v1.join("memory.usage_in_bytes").exists() {
        (v1.to_path_buf(), true)
    } else {
        (PathBuf::from("/sys/fs/cgroup"), false)
    }
}

/// A cgroup's working set from its files: usage − inactive file, as cAdvisor counts it.
fn working_set(dir: &Path, v1: bool) -> u64 {
    if v1 {
        read_u64(&dir.join("memory.usage_in_bytes"))
            .saturating_sub(stat_value(&dir.join("memory.stat"), "total_inactive_file"))
    } else {
        read_u64(&dir.join("memory.current"))
            .saturating_sub(stat_value(&dir.join("memory.stat"), "inactive_file"))
    }
}

/// The node's working set from the kernel's files (the v2 root has no memory.current:
/// MemTotal − MemFree, as runc and rkubelet take it).
fn node_working_set(mount: &Path, v1: bool) -> u64 {
    if v1 {
        return working_set(mount, true);
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let field = |name: &str| -> u64 {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("meminfo field")
    };
    ((field("MemTotal") - field("MemFree")) * 1024)
        .saturating_sub(stat_value(&mount.join("memory.stat"), "inactive_file"))
}

/// The directory below `dir` named for the pod (`pod<uid>`, or the systemd spelling).
fn find_pod_cgroup(dir: &Path, uid: &str) -> Option<PathBuf> {
    let systemd_uid = uid.replace('-', "_");
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == format!("pod{uid}") || name.ends_with(&format!("pod{systemd_uid}.slice")) {
            return Some(path);
        }
        if let Some(found) = find_pod_cgroup(&path, uid) {
            return Some(found);
        }
    }
    None
}

/// The pod's memory cgroup below the node's cgroup root.
fn pod_memory_cgroup(node: &Node, mount: &Path, uid: &str) -> PathBuf {
    let cgroup_root = mount.join(
        node.ctrd
            .var("RKUBELET_CGROUP_ROOT")
            .trim_start_matches('/'),
    );
    find_pod_cgroup(&cgroup_root, uid)
        .unwrap_or_else(|| panic!("pod{uid} below {}", cgroup_root.display()))
}

/// The filler's own cgroup: the pod's largest child (the sandbox's is tiny).
fn largest_child(pod_dir: &Path, v1: bool) -> PathBuf {
    std::fs::read_dir(pod_dir)
        .expect("the pod cgroup")
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .max_by_key(|e| working_set(&e.path(), v1))
        .map(|e| e.path())
        .expect("the filler's cgroup")
}

fn within(actual: u64, expected: u64, share: f64) -> bool {
    (actual as f64 - expected as f64).abs() <= expected as f64 * share
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd), containerd, python3 with prometheus_client and root: run by scripts/test.sh"]
async fn summary_and_metrics_through_the_api_server() {
    let cluster = Cluster::start("kstats");
    let mut node = Node::start("kstats");
    let port = free_port();
    let pki = node.root.join("pki");
    let busybox = node.busybox.clone();
    node.write(
        "filler.yaml",
        &pod(
            "filler",
            "  volumes:\n  - name: scratch\n    emptyDir: {}\n",
            &[],
            &[container("f", &busybox, FILLER)],
        ),
    );
    // A container with a readiness probe, for /metrics/probes.
    let probed = format!(
        "{}    readinessProbe:\n      exec:\n        command: [\"true\"]\n      periodSeconds: 1\n",
        container("p", &busybox, "sleep 3600")
    );
    node.write("prober.yaml", &pod("prober", "", &[], &[probed]));
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    let ca = cluster.ca_cert();
    node.kubelet_with(&[
        &format!("--kubeconfig={}", kubeconfig.display()),
        &format!("--port={port}"),
        &format!("--node-ip={}", host_ip()),
        &format!("--client-ca-file={}", ca.display()),
        &format!("--cert-dir={}", pki.display()),
    ]);
    let pod_name = format!("filler-{NODE}");

    // The summary, once the pod is measured and has a CPU rate (two samples) and its
    // volume is measured (housekeeping walks volumes every 10 s).
    let summary = wait_for(90, "a summary with the filler's rate", || {
        let out = proxy(&cluster, "/stats/summary");
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let pod = v["pods"]
            .as_array()?
            .iter()
            .find(|p| p["podRef"]["name"] == pod_name.as_str())?
            .clone();
        let ws = pod["memory"]["workingSetBytes"].as_u64()?;
        let container = pod["containers"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "f")?;
        let scratch = pod["volume"]
            .as_array()?
            .iter()
            .find(|v| v["name"] == "scratch")?;
        (ws >= 16 << 20
            && container["cpu"]["usageNanoCores"].is_u64()
            && pod["cpu"]["usageNanoCores"].is_u64()
            && scratch["usedBytes"].is_u64()
            && scratch["inodesUsed"].as_u64() >= Some(1)
            && scratch["capacityBytes"].is_u64())
        .then_some(v)
    });
    let node_part = &summary["node"];
    assert_eq!(node_part["nodeName"], NODE, "{node_part}");
    for key in ["usageNanoCores", "usageCoreNanoSeconds"] {
        assert!(
            node_part["cpu"][key].is_u64(),
            "node cpu {key}: {node_part}"
        );
    }
    for key in [
        "availableBytes",
        "usageBytes",
        "workingSetBytes",
        "rssBytes",
    ] {
        assert!(
            node_part["memory"][key].is_u64(),
            "node memory {key}: {node_part}"
        );
    }
    for key in ["capacityBytes", "availableBytes", "usedBytes"] {
        assert!(node_part["fs"][key].is_u64(), "node fs {key}: {node_part}");
        assert!(
            node_part["runtime"]["imageFs"][key].is_u64(),
            "imageFs {key}: {node_part}"
        );
    }
    assert!(node_part["rlimit"]["maxpid"].is_u64(), "{node_part}");
    assert!(node_part["startTime"].is_string(), "{node_part}");
    let pod = summary["pods"]
        .as_array()
        .and_then(|pods| {
            pods.iter()
                .find(|p| p["podRef"]["name"] == pod_name.as_str())
        })
        .expect("the filler in the summary");
    assert_eq!(pod["podRef"]["namespace"], "default", "{pod}");
    assert!(pod["startTime"].is_string(), "{pod}");
    assert!(
        pod["process_stats"]["process_count"].as_u64() >= Some(1),
        "{pod}"
    );
    assert!(
        pod["containers"][0]["memory"]["workingSetBytes"].as_u64() >= Some(16 << 20),
        "{pod}"
    );
    assert!(
        pod["containers"][0]["rootfs"]["usedBytes"].is_u64(),
        "{pod}"
    );
    // Its log folder, on the node filesystem, measured with the volumes; the pod's
    // ephemeral storage holds them and the disk-backed emptyDir.
    let logs = &pod["containers"][0]["logs"];
    assert!(
        logs["usedBytes"].is_u64() && logs["capacityBytes"] == node_part["fs"]["capacityBytes"],
        "{pod}"
    );
    let scratch_used = pod["volume"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "scratch"))
        .and_then(|v| v["usedBytes"].as_u64())
        .unwrap_or(u64::MAX);
    assert!(
        pod["ephemeral-storage"]["usedBytes"].as_u64() >= Some(scratch_used),
        "{pod}"
    );
    // Network counters: the host's namespace, and the pod's (its CNI interface).
    assert!(node_part["network"]["rxBytes"].is_u64(), "{node_part}");
    assert!(
        pod["network"]["interfaces"]
            .as_array()
            .is_some_and(|i| !i.is_empty() && i.iter().all(|i| i["name"] != "lo")),
        "{pod}"
    );
    assert!(pod["network"]["rxBytes"].is_u64(), "{pod}");
    let uid = pod["podRef"]["uid"].as_str().expect("uid").to_owned();

    // Working sets against the kernel's files, within 5 %. The node's memory moves with
    // everything else on the machine: each attempt takes a fresh sample (the provider
    // keeps one for a second) and reads the files right after it.
    let (mount, v1) = memory_mount();
    let pod_dir = pod_memory_cgroup(&node, &mount, &uid);
    let mut attempts = Vec::new();
    let matched = (0..10).any(|_| {
        std::thread::sleep(Duration::from_millis(1200));
        let v: Value = serde_json::from_slice(&proxy(&cluster, "/stats/summary").stdout)
            .expect("summary JSON");
        let (node_file, pod_file) = (node_working_set(&mount, v1), working_set(&pod_dir, v1));
        let container_file = working_set(&largest_child(&pod_dir, v1), v1);
        let node_ws = v["node"]["memory"]["workingSetBytes"].as_u64().unwrap_or(0);
        let pod_part = v["pods"]
            .as_array()
            .and_then(|pods| pods.iter().find(|p| p["podRef"]["uid"] == uid.as_str()));
        let pod_ws = pod_part
            .and_then(|p| p["memory"]["workingSetBytes"].as_u64())
            .unwrap_or(0);
        let container_ws = pod_part
            .and_then(|p| p["containers"][0]["memory"]["workingSetBytes"].as_u64())
            .unwrap_or(0);
        attempts.push(format!(
            "node {node_ws} vs {node_file}, pod {pod_ws} vs {pod_file}, container {container_ws} vs {container_file}"
        ));
        within(node_ws, node_file, 0.05)
            && within(pod_ws, pod_file, 0.05)
            && within(container_ws, container_file, 0.05)
    });
    assert!(
        matched,
        "working sets off by more than 5 % from the cgroup files:\n{}",
        attempts.join("\n")
    );

    // The metrics endpoints through the same proxy, parsed by the real parser.
    let dir = tempfile::tempdir().expect("temp dir");
    let mut files = Vec::new();
    for (name, path) in [
        ("metrics", "/metrics"),
        ("cadvisor", "/metrics/cadvisor"),
        ("resource", "/metrics/resource"),
        ("probes", "/metrics/probes"),
    ] {
        let out = proxy(&cluster, path);
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = dir.path().join(name);
        std::fs::write(&file, text(&out)).expect("metrics file");
        files.push(file);
    }
    let parsed = parse_metrics(&files);
    let file = |i: usize| &parsed[files[i].to_string_lossy().as_ref()];

    let kubelet = file(0);
    let running = samples(kubelet, "kubelet_running_pods", "gauge");
    assert!(running[0][2].as_f64() >= Some(1.0), "{running:?}");
    let containers = samples(kubelet, "kubelet_running_containers", "gauge");
    assert!(
        find(
            containers,
            "kubelet_running_containers",
            &[("container_state", "running")]
        )
        .is_some_and(|s| s[2].as_f64() >= Some(1.0)),
        "{containers:?}"
    );
    let start = samples(kubelet, "kubelet_pod_start_duration_seconds", "histogram");
    assert!(
        find(start, "kubelet_pod_start_duration_seconds_count", &[])
            .is_some_and(|s| s[2].as_f64() >= Some(1.0)),
        "{start:?}"
    );
    let worker = samples(kubelet, "kubelet_pod_worker_duration_seconds", "histogram");
    assert!(
        find(
            worker,
            "kubelet_pod_worker_duration_seconds_count",
            &[("operation_type", "create")]
        )
        .is_some(),
        "{worker:?}"
    );
    let ops = samples(kubelet, "kubelet_runtime_operations", "counter");
    assert!(
        find(
            ops,
            "kubelet_runtime_operations_total",
            &[("operation_type", "list_podsandbox")]
        )
        .is_some_and(|s| s[2].as_f64() >= Some(1.0)),
        "{ops:?}"
    );
    let durations = samples(
        kubelet,
        "kubelet_runtime_operations_duration_seconds",
        "histogram",
    );
    assert!(
        find(
            durations,
            "kubelet_runtime_operations_duration_seconds_bucket",
            &[("operation_type", "run_podsandbox"), ("le", "+Inf")]
        )
        .is_some(),
        "{durations:?}"
    );
    samples(kubelet, "kubelet_runtime_operations_errors", "counter");
    let relist = samples(kubelet, "kubelet_pleg_relist_duration_seconds", "histogram");
    assert!(
        find(relist, "kubelet_pleg_relist_duration_seconds_count", &[])
            .is_some_and(|s| s[2].as_f64() >= Some(1.0)),
        "{relist:?}"
    );
    let name = samples(kubelet, "kubelet_node_name", "gauge");
    assert!(
        find(name, "kubelet_node_name", &[("node", NODE)]).is_some_and(|s| s[2] == 1.0),
        "{name:?}"
    );
    // The REST client series: the node's registration (POST 201) and its watches (GET
    // 200), against the API server's host.
    let host = cluster
        .server()
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .to_owned();
    let requests = samples(kubelet, "rest_client_requests", "counter");
    for (code, method) in [("201", "POST"), ("200", "GET")] {
        assert!(
            find(
                requests,
                "rest_client_requests_total",
                &[("code", code), ("method", method), ("host", &host)]
            )
            .is_some_and(|s| s[2].as_f64() >= Some(1.0)),
            "{code} {method} {host}: {requests:?}"
        );
    }
    let latency = samples(kubelet, "rest_client_request_duration_seconds", "histogram");
    assert!(
        find(
            latency,
            "rest_client_request_duration_seconds_count",
            &[("verb", "GET"), ("host", &host)]
        )
        .is_some_and(|s| s[2].as_f64() >= Some(1.0)),
        "{latency:?}"
    );
    for (family, kind) in [
        ("process_resident_memory_bytes", "gauge"),
        ("process_cpu_seconds", "counter"),
        ("process_start_time_seconds", "gauge"),
    ] {
        let s = samples(kubelet, family, kind);
        assert!(s[0][2].as_f64() > Some(0.0), "{family}: {s:?}");
    }

    let probes = file(3);
    let prober = format!("prober-{NODE}");
    let answers = samples(probes, "prober_probe", "counter");
    assert!(
        find(
            answers,
            "prober_probe_total",
            &[
                ("probe_type", "Readiness"),
                ("result", "successful"),
                ("container", "p"),
                ("pod", &prober),
                ("namespace", "default"),
            ]
        )
        .is_some_and(|s| s[2].as_f64() >= Some(1.0)),
        "{answers:?}"
    );
    let took = samples(probes, "prober_probe_duration_seconds", "histogram");
    assert!(
        find(
            took,
            "prober_probe_duration_seconds_count",
            &[("probe_type", "Readiness"), ("pod", &prober)]
        )
        .is_some_and(|s| s[2].as_f64() >= Some(1.0)),
        "{took:?}"
    );

    let cadvisor = file(1);
    let container_labels = [
        ("container", "f"),
        ("pod", pod_name.as_str()),
        ("namespace", "default"),
        ("image", busybox.as_str()),
    ];
    let cpu = samples(cadvisor, "container_cpu_usage_seconds", "counter");
    let sample = find(cpu, "container_cpu_usage_seconds_total", &container_labels)
        .unwrap_or_else(|| panic!("the filler's CPU in {cpu:?}"));
    let id = sample[1]["name"].as_str().expect("name label").to_owned();
    assert!(!id.is_empty(), "{sample}");
    assert!(
        sample[1]["id"].as_str().is_some_and(|i| i.contains(&id)),
        "{sample}"
    );
    for family in [
        "container_memory_working_set_bytes",
        "container_memory_usage_bytes",
    ] {
        let s = samples(cadvisor, family, "gauge");
        let found = find(s, family, &container_labels)
            .unwrap_or_else(|| panic!("the filler's {family} in {s:?}"));
        assert!(found[2].as_f64() >= Some(f64::from(16u32 << 20)), "{found}");
        assert!(
            find(s, family, &[("id", "/")]).is_some(),
            "the root in {family}"
        );
    }

    // The start time, and the pod's interfaces on its cgroup (cAdvisor's `interface`).
    let started = samples(cadvisor, "container_start_time_seconds", "gauge");
    let started = find(started, "container_start_time_seconds", &container_labels)
        .and_then(|s| s[2].as_f64())
        .unwrap_or_else(|| panic!("the filler's start time in {started:?}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    assert!(
        started <= now && started > now - 600.0,
        "{started} vs {now}"
    );
    for family in [
        "container_network_receive_bytes",
        "container_network_transmit_bytes",
        "container_network_receive_errors",
        "container_network_transmit_errors",
    ] {
        let s = samples(cadvisor, family, "counter");
        let found = find(
            s,
            &format!("{family}_total"),
            &[("pod", pod_name.as_str()), ("container", "")],
        )
        .unwrap_or_else(|| panic!("the pod's {family} in {s:?}"));
        assert!(
            found[1]["interface"]
                .as_str()
                .is_some_and(|i| !i.is_empty() && i != "lo"),
            "{found}"
        );
    }

    // cAdvisor's finer series, from the container's own cgroup files: CPU time by mode
    // (clock ticks, so within a few ticks of the total), the page cache, when last seen.
    let usage = sample[2].as_f64().unwrap_or(0.0);
    let by_mode: f64 = ["container_cpu_user_seconds", "container_cpu_system_seconds"]
        .iter()
        .map(|family| {
            let s = samples(cadvisor, family, "counter");
            find(s, &format!("{family}_total"), &container_labels)
                .and_then(|v| v[2].as_f64())
                .unwrap_or_else(|| panic!("the filler's {family} in {s:?}"))
        })
        .sum();
    assert!(
        by_mode <= usage + 0.1,
        "user and system {by_mode} s, usage {usage} s"
    );
    let cache = samples(cadvisor, "container_memory_cache", "gauge");
    assert!(
        find(cache, "container_memory_cache", &container_labels).is_some(),
        "the filler's page cache in {cache:?}"
    );
    let seen = samples(cadvisor, "container_last_seen", "gauge");
    let seen = find(seen, "container_last_seen", &container_labels)
        .and_then(|s| s[2].as_f64())
        .unwrap_or_else(|| panic!("the filler last seen in {seen:?}"));
    assert!(seen > now - 600.0 && seen < now + 60.0, "{seen} vs {now}");

    let resource = file(2);
    for (family, kind) in [
        ("node_cpu_usage_seconds", "counter"),
        ("node_memory_working_set_bytes", "gauge"),
    ] {
        let s = samples(resource, family, kind);
        assert!(s[0][2].as_f64() > Some(0.0), "{family}: {s:?}");
    }
    let pod_labels = [("pod", pod_name.as_str()), ("namespace", "default")];
    let labelled = [("container", "f"), pod_labels[0], pod_labels[1]];
    for (family, sample_name, kind, labels) in [
        (
            "container_cpu_usage_seconds",
            "container_cpu_usage_seconds_total",
            "counter",
            &labelled[..],
        ),
        (
            "container_memory_working_set_bytes",
            "container_memory_working_set_bytes",
            "gauge",
            &labelled[..],
        ),
        (
            "pod_cpu_usage_seconds",
            "pod_cpu_usage_seconds_total",
            "counter",
            &pod_labels[..],
        ),
        (
            "pod_memory_working_set_bytes",
            "pod_memory_working_set_bytes",
            "gauge",
            &pod_labels[..],
        ),
    ] {
        let s = samples(resource, family, kind);
        assert!(find(s, sample_name, labels).is_some(), "{family}: {s:?}");
    }
    let error = samples(resource, "scrape_error", "gauge");
    assert_eq!(error[0][2].as_f64(), Some(0.0), "{error:?}");
}

/// A cgroup's cumulative CPU time in nanoseconds from its files.
fn cpu_nanos(dir: &Path) -> u64 {
    let v1 = dir.join("cpuacct.usage");
    if v1.exists() {
        return read_u64(&v1);
    }
    stat_value(&dir.join("cpu.stat"), "usage_usec") * 1000
}

/// Upstream's `PodAndContainerStatsFromCRI`: the pod's and its container's CPU and memory
/// in the summary come from the runtime's `ListPodSandboxStats` and `ListContainerStats`
/// (counted under upstream's operation names), and agree with the kernel's cgroup files
/// within 5 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs containerd and root: run by scripts/test.sh"]
async fn with_stats_from_the_runtime_the_summary_agrees_with_the_cgroups() {
    let mut node = Node::start("kcristats");
    let busybox = node.busybox.clone();
    node.write(
        "filler.yaml",
        &pod("filler", "", &[], &[container("f", &busybox, FILLER)]),
    );
    node.kubelet_with(&["--feature-gates=PodAndContainerStatsFromCRI=true"]);
    let port = node.pods_port();
    let get_json = |path: &str| -> Option<Value> {
        let (code, body) = crate::common::http_get(port, path)?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
    };
    let pod_name = format!("filler-{NODE}");
    let filler_of = |summary: &Value| -> Option<Value> {
        summary["pods"]
            .as_array()?
            .iter()
            .find(|p| p["podRef"]["name"] == pod_name.as_str())
            .cloned()
    };
    let measured = wait_for(90, "the filler measured by the runtime", || {
        let pod = filler_of(&get_json("/stats/summary")?)?;
        (pod["memory"]["workingSetBytes"].as_u64()? >= 16 << 20
            && pod["containers"][0]["memory"]["workingSetBytes"].as_u64()? >= 16 << 20
            && pod["containers"][0]["cpu"]["usageCoreNanoSeconds"].is_u64())
        .then_some(pod)
    });
    let uid = measured["podRef"]["uid"].as_str().expect("uid").to_owned();
    let (mount, v1) = memory_mount();
    let pod_dir = pod_memory_cgroup(&node, &mount, &uid);
    let container_dir = largest_child(&pod_dir, v1);
    // The CPU counters live in the cpuacct hierarchy on v1 (mounted alone or with cpu).
    let cpu_dir = |dir: &Path| -> PathBuf {
        if !v1 {
            return dir.to_path_buf();
        }
        let relative = dir.strip_prefix(&mount).expect("below the memory mount");
        ["/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct"]
            .iter()
            .map(|hierarchy| Path::new(hierarchy).join(relative))
            .find(|d| d.join("cpuacct.usage").exists())
            .unwrap_or_else(|| panic!("no cpuacct cgroup for {}", relative.display()))
    };
    let mut attempts = Vec::new();
    let matched = (0..10).any(|_| {
        std::thread::sleep(Duration::from_millis(1200));
        let Some(pod) = get_json("/stats/summary").and_then(|s| filler_of(&s)) else {
            attempts.push("no summary".to_owned());
            return false;
        };
        let figures = [
            (
                "pod working set",
                pod["memory"]["workingSetBytes"].as_u64().unwrap_or(0),
                working_set(&pod_dir, v1),
            ),
            (
                "container working set",
                pod["containers"][0]["memory"]["workingSetBytes"]
                    .as_u64()
                    .unwrap_or(0),
                working_set(&container_dir, v1),
            ),
            (
                "container CPU",
                pod["containers"][0]["cpu"]["usageCoreNanoSeconds"]
                    .as_u64()
                    .unwrap_or(0),
                cpu_nanos(&cpu_dir(&container_dir)),
            ),
            (
                "pod CPU",
                pod["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap_or(0),
                cpu_nanos(&cpu_dir(&pod_dir)),
            ),
        ];
        attempts.push(format!("{figures:?}"));
        figures
            .iter()
            .all(|(_, summary, files)| within(*summary, *files, 0.05))
    });
    assert!(
        matched,
        "the runtime's figures (summary, files) off by more than 5 % from the cgroup files:\n{}",
        attempts.join("\n")
    );
    eprintln!("the runtime's figures (summary, files): {attempts:?}");
    // The runtime was asked, under upstream's operation names.
    let metrics = crate::common::http_get(port, "/metrics")
        .map(|(_, body)| body)
        .unwrap_or_default();
    for operation in ["list_podsandbox_stats", "list_container_stats"] {
        let line = format!("kubelet_runtime_operations_total{{operation_type=\"{operation}\"}}");
        let count = metrics
            .lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .and_then(|v| v.trim().parse::<f64>().ok());
        assert!(count >= Some(1.0), "{line} in /metrics:\n{metrics}");
    }
    node.remove("filler.yaml");
    wait_for(60, "the filler gone", || {
        let pods = get_json("/pods")?;
        pods["items"].as_array()?.is_empty().then_some(())
    });
    node.finish();
}
