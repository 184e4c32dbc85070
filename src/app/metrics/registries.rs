//! The series the kubelet records into for the life of the process, with upstream v1.26's
//! names, buckets and labels: the kubelet's own registry ([`kubelet_metrics`]), the REST
//! client's requests and the probes' registry (`/metrics/probes`).

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::Labels;
use crate::ports::api::{ApiRequestObserver, ApiRequestRecord};

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
    pub(super) registry: Registry,
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
