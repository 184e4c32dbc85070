//! `/metrics/resource`: the node's, pods' and containers' CPU time and working set of a
//! stats sample (upstream's `resourceMetricsCollector`).

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{encode, float_counter, float_gauge, seconds, FloatCounter, FloatGauge, Labels};
use crate::domain::stats::StatsSample;

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
