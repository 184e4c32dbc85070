//! The kubelet's Prometheus metrics (`/metrics`), with upstream v1.26's names and
//! labels: the process-wide registry the loops record into ([`kubelet_metrics`]), the
//! runtime wrapper that counts and times every CRI call at one place
//! ([`InstrumentedRuntime`]), and the per-scrape series of `/metrics`,
//! `/metrics/cadvisor` and `/metrics/resource` built from a stats sample.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::domain::cgroup::CgroupDriver;
use crate::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};
use crate::domain::kuberuntime::runtime::{
    ContainerEntry, ContainerFilter, ContainerStatus, ExecResult, RuntimeVersion, SandboxEntry,
    SandboxFilter, SandboxStatus,
};
use crate::domain::stats::StatsSample;
use crate::domain::status::{ApiContainerState, ApiPodStatus};
use crate::domain::units::time::parse_rfc3339;
use crate::ports::api::{ApiRequestObserver, ApiRequestRecord};
use crate::ports::node_stats::OwnProcess;
use crate::ports::runtime::{ContainerEventStream, RuntimeError, RuntimeService, StreamRequest};

/// The content type of the OpenMetrics text `prometheus-client` writes.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(&'static str, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;
type FloatCounter = Counter<f64, AtomicU64>;

/// Prometheus' default buckets (upstream's `metrics.DefBuckets`).
const DEF_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn def_histogram() -> Histogram {
    Histogram::new(DEF_BUCKETS)
}

fn runtime_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.5, 14))
}

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// The series the kubelet's loops record into, for the life of the process.
pub struct KubeletMetrics {
    registry: Registry,
    pub pod_start_duration: Histogram,
    pub pod_worker_duration: HistogramFamily,
    pub pleg_relist_duration: Histogram,
    pub runtime_operations: Family<Labels, Counter>,
    pub runtime_operations_errors: Family<Labels, Counter>,
    pub runtime_operations_duration: HistogramFamily,
    rest_client_requests: Family<Labels, Counter>,
    rest_client_request_duration: HistogramFamily,
}

impl KubeletMetrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        let pod_start_duration = def_histogram();
        registry.register(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
            pod_start_duration.clone(),
        );
        let pod_worker_duration: HistogramFamily = Family::new_with_constructor(def_histogram);
        registry.register(
            "kubelet_pod_worker_duration_seconds",
            "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
            pod_worker_duration.clone(),
        );
        let pleg_relist_duration = def_histogram();
        registry.register(
            "kubelet_pleg_relist_duration_seconds",
            "Duration in seconds for relisting pods in PLEG.",
            pleg_relist_duration.clone(),
        );
        let runtime_operations = Family::<Labels, Counter>::default();
        registry.register(
            "kubelet_runtime_operations",
            "Cumulative number of runtime operations by operation type.",
            runtime_operations.clone(),
        );
        let runtime_operations_errors = Family::<Labels, Counter>::default();
        registry.register(
            "kubelet_runtime_operations_errors",
            "Cumulative number of runtime operation errors by operation type.",
            runtime_operations_errors.clone(),
        );
        let runtime_operations_duration: HistogramFamily =
            Family::new_with_constructor(runtime_histogram);
        registry.register(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            runtime_operations_duration.clone(),
        );
        let rest_client_requests = Family::<Labels, Counter>::default();
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            rest_client_requests.clone(),
        );
        let rest_client_request_duration: HistogramFamily =
            Family::new_with_constructor(rest_client_histogram);
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            rest_client_request_duration.clone(),
        );
        KubeletMetrics {
            registry,
            rest_client_requests,
            rest_client_request_duration,
            pod_start_duration,
            pod_worker_duration,
            pleg_relist_duration,
            runtime_operations,
            runtime_operations_errors,
            runtime_operations_duration,
        }
    }

    /// Records one pod sync of `operation_type` (`create`, `update`, `sync`, `kill`).
    pub fn pod_worker(&self, operation_type: &str, took: Duration) {
        self.pod_worker_duration
            .get_or_create(&vec![("operation_type", operation_type.to_owned())])
            .observe(took.as_secs_f64());
    }
}

/// Upstream's REST client latency buckets.
fn rest_client_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
    ])
}

/// The API client's requests, into the process-wide REST client series.
pub struct RestClientMetrics;

impl ApiRequestObserver for RestClientMetrics {
    fn observe(&self, request: &ApiRequestRecord<'_>) {
        let metrics = kubelet_metrics();
        let code = request
            .code
            .map_or_else(|| "<error>".to_owned(), |c| c.to_string());
        metrics
            .rest_client_requests
            .get_or_create(&vec![
                ("code", code),
                ("method", request.method.to_owned()),
                ("host", request.host.to_owned()),
            ])
            .inc();
        metrics
            .rest_client_request_duration
            .get_or_create(&vec![
                ("verb", request.method.to_owned()),
                ("host", request.host.to_owned()),
            ])
            .observe(request.took.as_secs_f64());
    }
}

static METRICS: LazyLock<KubeletMetrics> = LazyLock::new(KubeletMetrics::new);

/// The process-wide metrics (upstream's legacy registry: one per process).
pub fn kubelet_metrics() -> &'static KubeletMetrics {
    &METRICS
}

/// The probes' series (`/metrics/probes`, upstream's prober registry): a counter of
/// answers by result and a histogram of the time to a successful (or unknown) answer, per
/// probe worker; a worker's series go with it.
pub struct ProbeMetrics {
    registry: Registry,
    probe_total: Family<Labels, Counter>,
    probe_duration: HistogramFamily,
}

/// One probe worker's labels: `probe_type`, `container`, `pod`, `namespace`, `pod_uid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeLabels {
    pub probe_type: &'static str,
    pub container: String,
    /// Upstream's `getPodLabelName` (`domain::pod::metrics_pod_name`).
    pub pod: String,
    pub namespace: String,
    pub pod_uid: String,
}

/// Upstream's result labels.
const PROBE_RESULTS: [&str; 3] = ["successful", "failed", "unknown"];

impl ProbeLabels {
    fn total(&self, result: &str) -> Labels {
        vec![
            ("probe_type", self.probe_type.to_owned()),
            ("result", result.to_owned()),
            ("container", self.container.clone()),
            ("pod", self.pod.clone()),
            ("namespace", self.namespace.clone()),
            ("pod_uid", self.pod_uid.clone()),
        ]
    }

    fn duration(&self) -> Labels {
        vec![
            ("probe_type", self.probe_type.to_owned()),
            ("container", self.container.clone()),
            ("pod", self.pod.clone()),
            ("namespace", self.namespace.clone()),
        ]
    }
}

impl ProbeMetrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        let probe_total = Family::<Labels, Counter>::default();
        registry.register(
            "prober_probe",
            "Cumulative number of a liveness, readiness or startup probe for a container by result.",
            probe_total.clone(),
        );
        let probe_duration: HistogramFamily = Family::new_with_constructor(def_histogram);
        registry.register(
            "prober_probe_duration_seconds",
            "Duration in seconds for a probe response.",
            probe_duration.clone(),
        );
        ProbeMetrics {
            registry,
            probe_total,
            probe_duration,
        }
    }

    /// One answer: `result` is `successful`, `failed` or `unknown`; the time is kept for
    /// the first and the last, as upstream.
    pub fn answered(&self, labels: &ProbeLabels, result: &str, took: Duration) {
        self.probe_total.get_or_create(&labels.total(result)).inc();
        if result != "failed" {
            self.probe_duration
                .get_or_create(&labels.duration())
                .observe(took.as_secs_f64());
        }
    }

    /// The worker stopped: its series go.
    pub fn forget(&self, labels: &ProbeLabels) {
        for result in PROBE_RESULTS {
            self.probe_total.remove(&labels.total(result));
        }
        self.probe_duration.remove(&labels.duration());
    }

    /// The text of `/metrics/probes`.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if encode_registry(&mut text, &self.registry).is_err() {
            return String::new();
        }
        let _ = encode_eof(&mut text);
        text
    }
}

static PROBE_METRICS: LazyLock<ProbeMetrics> = LazyLock::new(ProbeMetrics::new);

/// The process-wide probe metrics.
pub fn probe_metrics() -> &'static ProbeMetrics {
    &PROBE_METRICS
}

/// What `/metrics` adds at scrape time to the recorded series.
pub struct ScrapeState<'a> {
    pub node_name: &'a str,
    pub pods: &'a [ApiPodStatus],
    pub process: Option<OwnProcess>,
}

/// Upstream's `container_state` label of a container state.
fn container_state(state: &ApiContainerState) -> &'static str {
    match state {
        ApiContainerState::Running(_) => "running",
        ApiContainerState::Terminated(_) => "exited",
        ApiContainerState::Waiting(_) => "created",
    }
}

/// `/metrics`: the recorded series, the running pods and containers, the node's name and
/// the process collector's series.
pub fn encode_kubelet_metrics(state: &ScrapeState<'_>) -> String {
    let mut scrape = Registry::default();
    let running_pods = Gauge::<i64>::default();
    let running = state
        .pods
        .iter()
        .filter(|p| {
            p.phase == "Running"
                || p.container_statuses
                    .iter()
                    .any(|c| matches!(c.state, ApiContainerState::Running(_)))
        })
        .count();
    running_pods.set(i64::try_from(running).unwrap_or(i64::MAX));
    scrape.register(
        "kubelet_running_pods",
        "Number of pods that have a running pod sandbox",
        running_pods,
    );
    let containers = Family::<Labels, Gauge>::default();
    for status in state
        .pods
        .iter()
        .flat_map(ApiPodStatus::all_container_statuses)
    {
        containers
            .get_or_create(&vec![(
                "container_state",
                container_state(&status.state).to_owned(),
            )])
            .inc();
    }
    // Upstream always shows the running count, zero included.
    let _ = containers.get_or_create(&vec![("container_state", "running".to_owned())]);
    scrape.register(
        "kubelet_running_containers",
        "Number of containers currently running",
        containers,
    );
    let node = Family::<Labels, Gauge>::default();
    node.get_or_create(&vec![("node", state.node_name.to_owned())])
        .set(1);
    scrape.register(
        "kubelet_node_name",
        "The node's name. The count is always 1.",
        node,
    );
    if let Some(p) = state.process {
        let rss = FloatGauge::default();
        rss.set(p.resident_memory_bytes as f64);
        scrape.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            rss,
        );
        let cpu = FloatCounter::default();
        cpu.inc_by(p.cpu_seconds);
        scrape.register(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            cpu,
        );
        let start = FloatGauge::default();
        start.set(p.start_time_unix_seconds);
        scrape.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            start,
        );
    }
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode_registry(&mut out, &kubelet_metrics().registry);
    let _ = encode_registry(&mut out, &scrape);
    let _ = encode_eof(&mut out);
    out
}

fn float_gauge(registry: &mut Registry, name: &str, help: &str) -> Family<Labels, FloatGauge> {
    let family = Family::<Labels, FloatGauge>::default();
    registry.register(name, help, family.clone());
    family
}

fn float_counter(registry: &mut Registry, name: &str, help: &str) -> Family<Labels, FloatCounter> {
    let family = Family::<Labels, FloatCounter>::default();
    registry.register(name, help, family.clone());
    family
}

fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    let _ = encode_registry(&mut out, registry);
    let _ = encode_eof(&mut out);
    out
}

/// A container's cgroup below its pod's, as cAdvisor names it (`id`).
fn container_cgroup(pod_cgroup: &str, container_id: &str, driver: CgroupDriver) -> String {
    match driver {
        CgroupDriver::Systemd => format!("{pod_cgroup}/cri-containerd-{container_id}.scope"),
        CgroupDriver::Cgroupfs => format!("{pod_cgroup}/{container_id}"),
    }
}

/// `/metrics/cadvisor`: cAdvisor's `container_*` series for the root cgroup, the pods
/// and their containers, labelled `container`, `id`, `image`, `name`, `namespace`, `pod`.
pub fn encode_cadvisor(sample: &StatsSample, driver: CgroupDriver) -> String {
    let mut r = Registry::default();
    let cpu = float_counter(
        &mut r,
        "container_cpu_usage_seconds",
        "Cumulative cpu time consumed in seconds.",
    );
    let ws = float_gauge(
        &mut r,
        "container_memory_working_set_bytes",
        "Current working set in bytes.",
    );
    let usage = float_gauge(
        &mut r,
        "container_memory_usage_bytes",
        "Current memory usage in bytes, including all memory regardless of when it was accessed",
    );
    let rss = float_gauge(&mut r, "container_memory_rss", "Size of RSS in bytes.");
    let start_time = float_gauge(
        &mut r,
        "container_start_time_seconds",
        "Start time of the container since unix epoch in seconds.",
    );
    let limit = float_gauge(
        &mut r,
        "container_spec_memory_limit_bytes",
        "Memory limit for the container.",
    );
    let network = [
        (
            "container_network_receive_bytes",
            "Cumulative count of bytes received",
        ),
        (
            "container_network_receive_errors",
            "Cumulative count of errors encountered while receiving",
        ),
        (
            "container_network_transmit_bytes",
            "Cumulative count of bytes transmitted",
        ),
        (
            "container_network_transmit_errors",
            "Cumulative count of errors encountered while transmitting",
        ),
    ]
    .map(|(name, help)| float_counter(&mut r, name, help));
    let packets = [
        (
            "container_network_receive_packets",
            "Cumulative count of packets received",
        ),
        (
            "container_network_receive_packets_dropped",
            "Cumulative count of packets dropped while receiving",
        ),
        (
            "container_network_transmit_packets",
            "Cumulative count of packets transmitted",
        ),
        (
            "container_network_transmit_packets_dropped",
            "Cumulative count of packets dropped while transmitting",
        ),
    ]
    .map(|(name, help)| float_counter(&mut r, name, help));
    let detail = CadvisorDetail::register(&mut r);
    let last_seen = float_gauge(
        &mut r,
        "container_last_seen",
        "Last time a container was seen by the exporter",
    );
    let seen_at = sample.time_unix_nanos as f64 / 1e9;
    let labels =
        |container: &str, id: &str, image: &str, name: &str, ns: &str, pod: &str| -> Labels {
            vec![
                ("container", container.to_owned()),
                ("id", id.to_owned()),
                ("image", image.to_owned()),
                ("name", name.to_owned()),
                ("namespace", ns.to_owned()),
                ("pod", pod.to_owned()),
            ]
        };
    let cgroup = |l: Labels, c: &crate::domain::stats::CgroupStats| {
        if let Some(n) = c.cpu_usage_nanos {
            let mut cl = l.clone();
            cl.insert(1, ("cpu", "total".to_owned()));
            cpu.get_or_create(&cl).inc_by(seconds(n));
        }
        ws.get_or_create(&l).set(c.working_set_bytes() as f64);
        usage.get_or_create(&l).set(c.memory_usage_bytes as f64);
        if let Some(v) = c.rss_bytes {
            rss.get_or_create(&l).set(v as f64);
        }
        if let Some(v) = c.memory_limit_bytes {
            limit.get_or_create(&l).set(v as f64);
        }
        detail.record(&l, &c.detail);
        last_seen.get_or_create(&l).set(seen_at);
    };
    // cAdvisor puts a pod's interfaces on the pod's cgroup, with an `interface` label.
    let interfaces = |l: &Labels, list: &[crate::domain::stats::InterfaceStats]| {
        for i in list {
            let mut il = l.clone();
            il.insert(3, ("interface", i.name.clone()));
            for (family, value) in
                network
                    .iter()
                    .zip([i.rx_bytes, i.rx_errors, i.tx_bytes, i.tx_errors])
            {
                family.get_or_create(&il).inc_by(value as f64);
            }
            if let Some(p) = i.packets {
                for (family, value) in
                    packets
                        .iter()
                        .zip([p.rx_packets, p.rx_dropped, p.tx_packets, p.tx_dropped])
                {
                    family.get_or_create(&il).inc_by(value as f64);
                }
            }
        }
    };
    if let Some(node) = &sample.node {
        let l = labels("", "/", "", "", "", "");
        interfaces(&l, &sample.node_network);
        cgroup(l, node);
    }
    for pod in &sample.pods {
        let pod_cgroup = pod.cgroup_path.clone().unwrap_or_default();
        let l = labels("", &pod_cgroup, "", "", &pod.namespace, &pod.name);
        interfaces(&l, &pod.network);
        if let Some(c) = &pod.cgroup {
            cgroup(l, c);
        }
        for c in &pod.containers {
            let s = &c.stats;
            let l = labels(
                &c.name,
                &container_cgroup(&pod_cgroup, &s.id, driver),
                &c.image,
                &s.id,
                &pod.namespace,
                &pod.name,
            );
            if let Some(n) = s.cpu_usage_nanos {
                let mut cl = l.clone();
                cl.insert(1, ("cpu", "total".to_owned()));
                cpu.get_or_create(&cl).inc_by(seconds(n));
            }
            if let Some(v) = s.memory_working_set_bytes {
                ws.get_or_create(&l).set(v as f64);
            }
            if let Some(v) = s.memory_usage_bytes {
                usage.get_or_create(&l).set(v as f64);
            }
            if let Some(v) = s.rss_bytes {
                rss.get_or_create(&l).set(v as f64);
            }
            if let Some(started) = c.start_time.as_deref().and_then(parse_rfc3339) {
                start_time.get_or_create(&l).set(started as f64 / 1e9);
            }
            if let Some(d) = &s.detail {
                detail.record(&l, d);
            }
            last_seen.get_or_create(&l).set(seen_at);
        }
    }
    encode(&r)
}

/// cAdvisor's finer `container_*` families: CPU by mode and CFS throttling, the page
/// cache, mapped files, swap and limit hits, and block IO by device.
struct CadvisorDetail {
    cpu_user: Family<Labels, FloatCounter>,
    cpu_system: Family<Labels, FloatCounter>,
    cfs: [Family<Labels, FloatCounter>; 3],
    memory: [Family<Labels, FloatGauge>; 4],
    io: [Family<Labels, FloatCounter>; 4],
}

impl CadvisorDetail {
    fn register(r: &mut Registry) -> Self {
        let cpu_user = float_counter(
            r,
            "container_cpu_user_seconds",
            "Cumulative user cpu time consumed in seconds.",
        );
        let cpu_system = float_counter(
            r,
            "container_cpu_system_seconds",
            "Cumulative system cpu time consumed in seconds.",
        );
        let cfs = [
            (
                "container_cpu_cfs_periods",
                "Number of elapsed enforcement period intervals.",
            ),
            (
                "container_cpu_cfs_throttled_periods",
                "Number of throttled period intervals.",
            ),
            (
                "container_cpu_cfs_throttled_seconds",
                "Total time duration the container has been throttled.",
            ),
        ]
        .map(|(name, help)| float_counter(r, name, help));
        // `container_memory_failcnt` is a counter without `_total` in cAdvisor: a gauge
        // here keeps its name.
        let memory = [
            (
                "container_memory_cache",
                "Number of bytes of page cache memory.",
            ),
            (
                "container_memory_mapped_file",
                "Size of memory mapped files in bytes.",
            ),
            ("container_memory_swap", "Container swap usage in bytes."),
            (
                "container_memory_failcnt",
                "Number of memory usage hits limits",
            ),
        ]
        .map(|(name, help)| float_gauge(r, name, help));
        let io = [
            ("container_fs_reads_bytes", "Cumulative count of bytes read"),
            (
                "container_fs_writes_bytes",
                "Cumulative count of bytes written",
            ),
            ("container_fs_reads", "Cumulative count of reads completed"),
            (
                "container_fs_writes",
                "Cumulative count of writes completed",
            ),
        ]
        .map(|(name, help)| float_counter(r, name, help));
        CadvisorDetail {
            cpu_user,
            cpu_system,
            cfs,
            memory,
            io,
        }
    }

    /// The series of one cgroup labelled `l` (`container`, `id`, …).
    fn record(&self, l: &Labels, d: &crate::domain::stats::CgroupDetail) {
        if let Some(n) = d.cpu_user_nanos {
            self.cpu_user.get_or_create(l).inc_by(seconds(n));
        }
        if let Some(n) = d.cpu_system_nanos {
            self.cpu_system.get_or_create(l).inc_by(seconds(n));
        }
        // cAdvisor shows CFS series for cgroups with a quota: those have periods.
        if let (Some(periods @ 1..), Some(throttled), Some(nanos)) = (
            d.cfs_periods,
            d.cfs_throttled_periods,
            d.cfs_throttled_nanos,
        ) {
            for (family, value) in
                self.cfs
                    .iter()
                    .zip([periods as f64, throttled as f64, seconds(nanos)])
            {
                family.get_or_create(l).inc_by(value);
            }
        }
        for (family, value) in self.memory.iter().zip([
            d.cache_bytes,
            d.mapped_file_bytes,
            d.swap_bytes,
            d.memory_failcnt,
        ]) {
            if let Some(v) = value {
                family.get_or_create(l).set(v as f64);
            }
        }
        for device in &d.io {
            let mut dl = l.clone();
            let name = device
                .device
                .clone()
                .unwrap_or_else(|| device.major_minor.clone());
            dl.insert(1, ("device", name));
            for (family, value) in self.io.iter().zip([
                device.read_bytes,
                device.write_bytes,
                device.reads,
                device.writes,
            ]) {
                family.get_or_create(&dl).inc_by(value as f64);
            }
        }
    }
}

/// `/metrics/resource`: the node's, pods' and containers' CPU time and working set
/// (upstream's `resourceMetricsCollector`), and `scrape_error`.
pub fn encode_resource(sample: &StatsSample) -> String {
    let mut r = Registry::default();
    let node_cpu = FloatCounter::default();
    let node_ws = FloatGauge::default();
    let mut error = 0;
    match &sample.node {
        Some(node) => {
            if let Some(n) = node.cpu_usage_nanos {
                node_cpu.inc_by(seconds(n));
                r.register(
                    "node_cpu_usage_seconds",
                    "Cumulative cpu time consumed by the node in core-seconds",
                    node_cpu,
                );
            }
            node_ws.set(node.working_set_bytes() as f64);
            r.register(
                "node_memory_working_set_bytes",
                "Current working set of the node in bytes",
                node_ws,
            );
        }
        None => error = 1,
    }
    let container_cpu = float_counter(
        &mut r,
        "container_cpu_usage_seconds",
        "Cumulative cpu time consumed by the container in core-seconds",
    );
    let container_ws = float_gauge(
        &mut r,
        "container_memory_working_set_bytes",
        "Current working set of the container in bytes",
    );
    let pod_cpu = float_counter(
        &mut r,
        "pod_cpu_usage_seconds",
        "Cumulative cpu time consumed by the pod in core-seconds",
    );
    let pod_ws = float_gauge(
        &mut r,
        "pod_memory_working_set_bytes",
        "Current working set of the pod in bytes",
    );
    for pod in &sample.pods {
        let pl: Labels = vec![
            ("namespace", pod.namespace.clone()),
            ("pod", pod.name.clone()),
        ];
        if let Some(c) = &pod.cgroup {
            if let Some(n) = c.cpu_usage_nanos {
                pod_cpu.get_or_create(&pl).inc_by(seconds(n));
            }
            pod_ws.get_or_create(&pl).set(c.working_set_bytes() as f64);
        }
        for c in &pod.containers {
            let cl: Labels = vec![
                ("container", c.name.clone()),
                ("namespace", pod.namespace.clone()),
                ("pod", pod.name.clone()),
            ];
            if let Some(n) = c.stats.cpu_usage_nanos {
                container_cpu.get_or_create(&cl).inc_by(seconds(n));
            }
            if let Some(v) = c.stats.memory_working_set_bytes {
                container_ws.get_or_create(&cl).set(v as f64);
            }
        }
    }
    let scrape_error = Gauge::<i64>::default();
    scrape_error.set(error);
    r.register(
        "scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        scrape_error,
    );
    encode(&r)
}

/// A runtime whose every call is counted and timed in `kubelet_runtime_operations*`
/// under upstream's `operation_type` names.
pub struct InstrumentedRuntime {
    inner: Arc<dyn RuntimeService>,
}

impl InstrumentedRuntime {
    pub fn wrap(inner: Arc<dyn RuntimeService>) -> Arc<dyn RuntimeService> {
        Arc::new(InstrumentedRuntime { inner })
    }
}

async fn recorded<T>(
    operation: &'static str,
    call: impl std::future::Future<Output = Result<T, RuntimeError>>,
) -> Result<T, RuntimeError> {
    let m = kubelet_metrics();
    let labels: Labels = vec![("operation_type", operation.to_owned())];
    let started = Instant::now();
    let result = call.await;
    m.runtime_operations.get_or_create(&labels).inc();
    m.runtime_operations_duration
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    if result.is_err() {
        m.runtime_operations_errors.get_or_create(&labels).inc();
    }
    result
}

#[async_trait]
impl RuntimeService for InstrumentedRuntime {
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError> {
        recorded("version", self.inner.version()).await
    }
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, RuntimeError> {
        recorded("run_podsandbox", self.inner.run_pod_sandbox(config)).await
    }
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        recorded("stop_podsandbox", self.inner.stop_pod_sandbox(sandbox_id)).await
    }
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        recorded(
            "remove_podsandbox",
            self.inner.remove_pod_sandbox(sandbox_id),
        )
        .await
    }
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> Result<SandboxStatus, RuntimeError> {
        recorded(
            "podsandbox_status",
            self.inner.pod_sandbox_status(sandbox_id),
        )
        .await
    }
    async fn list_pod_sandboxes(
        &self,
        filter: &SandboxFilter,
    ) -> Result<Vec<SandboxEntry>, RuntimeError> {
        recorded("list_podsandbox", self.inner.list_pod_sandboxes(filter)).await
    }
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> Result<String, RuntimeError> {
        recorded(
            "create_container",
            self.inner.create_container(sandbox_id, config, sandbox),
        )
        .await
    }
    async fn start_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        recorded("start_container", self.inner.start_container(container_id)).await
    }
    async fn stop_container(
        &self,
        container_id: &str,
        timeout_secs: i64,
    ) -> Result<(), RuntimeError> {
        recorded(
            "stop_container",
            self.inner.stop_container(container_id, timeout_secs),
        )
        .await
    }
    async fn remove_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        recorded(
            "remove_container",
            self.inner.remove_container(container_id),
        )
        .await
    }
    async fn container_status(&self, container_id: &str) -> Result<ContainerStatus, RuntimeError> {
        recorded(
            "container_status",
            self.inner.container_status(container_id),
        )
        .await
    }
    async fn list_containers(
        &self,
        filter: &ContainerFilter,
    ) -> Result<Vec<ContainerEntry>, RuntimeError> {
        recorded("list_containers", self.inner.list_containers(filter)).await
    }
    async fn cgroup_driver(&self) -> Result<Option<CgroupDriver>, RuntimeError> {
        recorded("runtime_config", self.inner.cgroup_driver()).await
    }
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, RuntimeError> {
        recorded(
            "exec_sync",
            self.inner.exec_sync(container_id, cmd, timeout),
        )
        .await
    }
    async fn streaming_url(&self, request: &StreamRequest) -> Result<String, RuntimeError> {
        let operation = match request {
            StreamRequest::Exec { .. } => "exec",
            StreamRequest::Attach { .. } => "attach",
            StreamRequest::PortForward { .. } => "port_forward",
        };
        recorded(operation, self.inner.streaming_url(request)).await
    }
    async fn container_events(&self) -> Result<Box<dyn ContainerEventStream>, RuntimeError> {
        recorded("get_container_events", self.inner.container_events()).await
    }
    async fn reopen_container_log(&self, container_id: &str) -> Result<(), RuntimeError> {
        recorded(
            "reopen_container_log",
            self.inner.reopen_container_log(container_id),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::stats::{
        CgroupDetail, CgroupStats, ContainerSample, DeviceIo, PodSample, RuntimeContainerStats,
    };

    fn sample() -> StatsSample {
        StatsSample {
            time_unix_nanos: 1_795_539_700_000_000_000,
            node: Some(CgroupStats {
                memory_usage_bytes: 1000,
                inactive_file_bytes: 100,
                cpu_usage_nanos: Some(2_500_000_000),
                ..CgroupStats::default()
            }),
            pods: vec![PodSample {
                name: "web".into(),
                namespace: "default".into(),
                uid: "u1".into(),
                cgroup_path: Some("/kubepods/podu1".into()),
                cgroup: Some(CgroupStats {
                    memory_usage_bytes: 500,
                    cpu_usage_nanos: Some(1_000_000_000),
                    memory_limit_bytes: Some(1 << 20),
                    ..CgroupStats::default()
                }),
                network: vec![crate::domain::stats::InterfaceStats {
                    name: "eth0".into(),
                    rx_bytes: 4096,
                    rx_errors: 1,
                    tx_bytes: 2048,
                    tx_errors: 2,
                    packets: Some(crate::domain::stats::PacketCounts {
                        rx_packets: 40,
                        rx_dropped: 3,
                        tx_packets: 30,
                        tx_dropped: 4,
                    }),
                }],
                containers: vec![ContainerSample {
                    name: "c".into(),
                    image: "busybox:1".into(),
                    start_time: Some("2026-11-24T17:00:00.5Z".into()),
                    stats: RuntimeContainerStats {
                        id: "abc".into(),
                        memory_working_set_bytes: Some(300),
                        cpu_usage_nanos: Some(500_000_000),
                        detail: Some(CgroupDetail {
                            cpu_user_nanos: Some(300_000_000),
                            cpu_system_nanos: Some(200_000_000),
                            cfs_periods: Some(10),
                            cfs_throttled_periods: Some(4),
                            cfs_throttled_nanos: Some(1_500_000_000),
                            cache_bytes: Some(4096),
                            memory_failcnt: Some(2),
                            io: vec![DeviceIo {
                                major_minor: "253:0".into(),
                                device: Some("/dev/vda".into()),
                                read_bytes: 8192,
                                write_bytes: 512,
                                reads: 2,
                                writes: 1,
                            }],
                            ..CgroupDetail::default()
                        }),
                        ..RuntimeContainerStats::default()
                    },
                    logs: None,
                }],
                ..PodSample::default()
            }],
            ..StatsSample::default()
        }
    }

    #[test]
    fn cadvisor_series_carry_upstreams_labels() {
        let text = encode_cadvisor(&sample(), CgroupDriver::Cgroupfs);
        assert!(text.contains(r#"container_memory_working_set_bytes{container="c",id="/kubepods/podu1/abc",image="busybox:1",name="abc",namespace="default",pod="web"} 300"#), "{text}");
        assert!(text.contains(r#"container_cpu_usage_seconds_total{container="",cpu="total",id="/",image="",name="",namespace="",pod=""} 2.5"#), "{text}");
        assert!(text.contains(r#"container_start_time_seconds{container="c",id="/kubepods/podu1/abc",image="busybox:1",name="abc",namespace="default",pod="web"} 1795539600.5"#), "{text}");
        assert!(text.contains(r#"container_network_receive_bytes_total{container="",id="/kubepods/podu1",image="",interface="eth0",name="",namespace="default",pod="web"} 4096"#), "{text}");
        assert!(text.contains(r#"container_network_transmit_errors_total{container="",id="/kubepods/podu1",image="",interface="eth0",name="",namespace="default",pod="web"} 2"#), "{text}");
        assert!(text.contains(r#"container_spec_memory_limit_bytes{container="",id="/kubepods/podu1",image="",name="",namespace="default",pod="web"} 1048576"#), "{text}");
        assert!(text.contains(r#"container_network_receive_packets_dropped_total{container="",id="/kubepods/podu1",image="",interface="eth0",name="",namespace="default",pod="web"} 3"#), "{text}");
        assert!(text.contains(r#"container_network_transmit_packets_total{container="",id="/kubepods/podu1",image="",interface="eth0",name="",namespace="default",pod="web"} 30"#), "{text}");
        let c = r#"container="c",id="/kubepods/podu1/abc",image="busybox:1",name="abc",namespace="default",pod="web""#;
        for series in [
            format!("container_cpu_user_seconds_total{{{c}}} 0.3"),
            format!("container_cpu_system_seconds_total{{{c}}} 0.2"),
            format!("container_cpu_cfs_periods_total{{{c}}} 10"),
            format!("container_cpu_cfs_throttled_periods_total{{{c}}} 4"),
            format!("container_cpu_cfs_throttled_seconds_total{{{c}}} 1.5"),
            format!("container_memory_cache{{{c}}} 4096"),
            format!("container_memory_failcnt{{{c}}} 2"),
            format!("container_last_seen{{{c}}} 1795539700"),
            r#"container_fs_reads_bytes_total{container="c",device="/dev/vda",id="/kubepods/podu1/abc",image="busybox:1",name="abc",namespace="default",pod="web"} 8192"#.into(),
            r#"container_fs_writes_total{container="c",device="/dev/vda",id="/kubepods/podu1/abc",image="busybox:1",name="abc",namespace="default",pod="web"} 1"#.into(),
        ] {
            assert!(text.contains(&series), "{series} in {text}");
        }
        // Unknown to the kernel's files: no series rather than a zero.
        assert!(!text.contains("container_memory_swap{"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn resource_series_as_upstream_names_them() {
        let text = encode_resource(&sample());
        assert!(text.contains("node_cpu_usage_seconds_total 2.5"), "{text}");
        assert!(text.contains("node_memory_working_set_bytes 900"), "{text}");
        assert!(
            text.contains(r#"pod_memory_working_set_bytes{namespace="default",pod="web"} 500"#),
            "{text}"
        );
        assert!(text.contains(r#"container_cpu_usage_seconds_total{container="c",namespace="default",pod="web"} 0.5"#), "{text}");
        assert!(text.contains("scrape_error 0"), "{text}");
    }

    #[test]
    fn kubelet_metrics_name_the_node_and_count_running_pods() {
        let text = encode_kubelet_metrics(&ScrapeState {
            node_name: "n1",
            pods: &[ApiPodStatus {
                phase: "Running".into(),
                ..ApiPodStatus::default()
            }],
            process: Some(OwnProcess {
                resident_memory_bytes: 10,
                cpu_seconds: 1.5,
                start_time_unix_seconds: 7.0,
            }),
        });
        assert!(text.contains(r#"kubelet_node_name{node="n1"} 1"#), "{text}");
        assert!(text.contains("kubelet_running_pods 1"), "{text}");
        assert!(
            text.contains(r#"kubelet_running_containers{container_state="running"} 0"#),
            "{text}"
        );
        assert!(text.contains("process_cpu_seconds_total 1.5"), "{text}");
        assert!(
            text.contains("# TYPE kubelet_pleg_relist_duration_seconds histogram"),
            "{text}"
        );
    }

    #[test]
    fn api_requests_count_by_code_method_and_host_as_upstream() {
        // A host of this test only: the registry is the process's.
        let host = "10.9.9.9:6443";
        for code in [Some(201), Some(201), None] {
            RestClientMetrics.observe(&ApiRequestRecord {
                method: "POST",
                host,
                code,
                took: Duration::from_millis(30),
            });
        }
        let text = encode_kubelet_metrics(&ScrapeState {
            node_name: "n1",
            pods: &[],
            process: None,
        });
        assert!(
            text.contains(&format!(
                r#"rest_client_requests_total{{code="201",method="POST",host="{host}"}} 2"#
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                r#"rest_client_requests_total{{code="<error>",method="POST",host="{host}"}} 1"#
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                r#"rest_client_request_duration_seconds_bucket{{le="0.1",verb="POST",host="{host}"}} 3"#
            )),
            "{text}"
        );
    }
}
