//! `/metrics`: the recorded series with what is read at scrape time (running pods and
//! containers, the node's name, the process collector's series).

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::registries::kubelet_metrics;
use super::{FloatCounter, FloatGauge, Labels};
use crate::domain::stats::VolumeSummary;
use crate::domain::status::{ApiContainerState, ApiPodStatus};
use crate::ports::node_stats::OwnProcess;

/// What `/metrics` adds at scrape time to the recorded series.
pub struct ScrapeState<'a> {
    pub node_name: &'a str,
    pub pods: &'a [ApiPodStatus],
    pub process: Option<OwnProcess>,
    /// The pods' volumes as the last stats sample measured them.
    pub volumes: &'a [&'a VolumeSummary],
}

/// Upstream's `container_state` label of a container state.
pub(super) fn container_state(state: &ApiContainerState) -> &'static str {
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
    register_volume_stats(&mut scrape, state.volumes);
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

/// Upstream's volume stats collector: each claim's volume once (the first pod's
/// reading), by `namespace` and `persistentvolumeclaim`; volumes without a claim are not
/// shown.
fn register_volume_stats(scrape: &mut Registry, volumes: &[&VolumeSummary]) {
    type Read = fn(&VolumeSummary) -> Option<u64>;
    const SERIES: [(&str, &str, Read); 6] = [
        (
            "kubelet_volume_stats_capacity_bytes",
            "Capacity in bytes of the volume",
            |v| v.fs.capacity_bytes,
        ),
        (
            "kubelet_volume_stats_available_bytes",
            "Number of available bytes in the volume",
            |v| v.fs.available_bytes,
        ),
        (
            "kubelet_volume_stats_used_bytes",
            "Number of used bytes in the volume",
            |v| v.fs.used_bytes,
        ),
        (
            "kubelet_volume_stats_inodes",
            "Maximum number of inodes in the volume",
            |v| v.fs.inodes,
        ),
        (
            "kubelet_volume_stats_inodes_free",
            "Number of free inodes in the volume",
            |v| v.fs.inodes_free,
        ),
        (
            "kubelet_volume_stats_inodes_used",
            "Number of used inodes in the volume",
            |v| v.fs.inodes_used,
        ),
    ];
    let mut seen = std::collections::BTreeSet::new();
    let claimed: Vec<(&VolumeSummary, Labels)> = volumes
        .iter()
        .filter_map(|v| {
            let claim = v.pvc_ref.as_ref()?;
            seen.insert((claim.namespace.clone(), claim.name.clone()))
                .then(|| {
                    let labels = vec![
                        ("namespace", claim.namespace.clone()),
                        ("persistentvolumeclaim", claim.name.clone()),
                    ];
                    (*v, labels)
                })
        })
        .collect();
    if claimed.is_empty() {
        return;
    }
    for (name, help, read) in SERIES {
        let family = Family::<Labels, FloatGauge>::default();
        for (volume, labels) in &claimed {
            family
                .get_or_create(labels)
                .set(read(volume).unwrap_or(0) as f64);
        }
        scrape.register(name, help, family);
    }
}
