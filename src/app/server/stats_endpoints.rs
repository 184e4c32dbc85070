//! `/stats/summary`, `/metrics`, `/metrics/cadvisor` and `/metrics/resource` of the
//! kubelet API, served from the stats provider's cached sample, and `/metrics/probes`.

use crate::app::metrics::{
    encode_cadvisor, encode_kubelet_metrics, encode_resource, probe_metrics, ScrapeState,
    OPENMETRICS,
};
use crate::app::stats_provider::StatsProvider;
use crate::domain::kubelet_api::metrics_format::{to_text_format, wants_openmetrics, TEXT_FORMAT};
use crate::ports::error::Chain;

/// Whether `path` is one of the stats and metrics endpoints.
pub fn is_stats_path(path: &str) -> bool {
    matches!(
        path,
        "/stats/summary"
            | "/stats/summary/"
            | "/metrics"
            | "/metrics/cadvisor"
            | "/metrics/resource"
            | "/metrics/probes"
    )
}

/// The content type and body answering `path` (one [`is_stats_path`] accepts): the
/// metrics in OpenMetrics when `accept` asks for it, else in upstream's text format 0.0.4.
pub async fn answer(
    provider: &StatsProvider,
    path: &str,
    accept: Option<&str>,
) -> (&'static str, Vec<u8>) {
    let (content_type, body) = openmetrics_answer(provider, path).await;
    if content_type == OPENMETRICS && !wants_openmetrics(accept) {
        let text = String::from_utf8_lossy(&body);
        return (TEXT_FORMAT, to_text_format(&text).into_bytes());
    }
    (content_type, body)
}

async fn openmetrics_answer(provider: &StatsProvider, path: &str) -> (&'static str, Vec<u8>) {
    match path {
        "/metrics" => {
            let pods: Vec<_> = provider
                .pods
                .pod_uids()
                .iter()
                .filter_map(|uid| provider.pods.status_of(uid))
                .collect();
            let process = match provider.stats.own_process().await {
                Ok(p) => p,
                Err(e) => {
                    tracing::debug!(error = %Chain(&e), "cannot read the process's own usage");
                    None
                }
            };
            // The last sample's volumes (housekeeping keeps it fresh): a scrape of
            // `/metrics` does not read the node again.
            let snapshot = provider.cached().await;
            let volumes: Vec<_> = snapshot
                .iter()
                .flat_map(|s| s.summary.pods.iter())
                .flat_map(|p| p.volume.iter())
                .collect();
            let text = encode_kubelet_metrics(&ScrapeState {
                node_name: &provider.node_name,
                pods: &pods,
                process,
                volumes: &volumes,
            });
            (OPENMETRICS, text.into_bytes())
        }
        "/metrics/cadvisor" => {
            let snapshot = provider.latest().await;
            (
                OPENMETRICS,
                encode_cadvisor(&snapshot.sample, provider.driver).into_bytes(),
            )
        }
        "/metrics/probes" => (OPENMETRICS, probe_metrics().encode().into_bytes()),
        "/metrics/resource" => {
            let snapshot = provider.latest().await;
            (OPENMETRICS, encode_resource(&snapshot.sample).into_bytes())
        }
        _ => {
            let snapshot = provider.latest().await;
            ("application/json", snapshot.summary_json.clone())
        }
    }
}
