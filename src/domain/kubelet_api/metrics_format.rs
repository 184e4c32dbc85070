//! Which exposition format a metrics scrape gets. `prometheus-client` writes OpenMetrics
//! text; upstream's kubelet v1.26 serves Prometheus's text format 0.0.4 (its handler does
//! not offer OpenMetrics), which `promtool check metrics` and older scrapers read. So a
//! scrape gets OpenMetrics only when its `Accept` asks for it (Prometheus does), and the
//! 0.0.4 text otherwise.

use std::collections::BTreeSet;

/// The content type of Prometheus's text format, as upstream's kubelet answers it.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether a request's `Accept` header asks for OpenMetrics (and does not refuse it with
/// `q=0`).
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.unwrap_or("").split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        media.eq_ignore_ascii_case("application/openmetrics-text")
            && !parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    == Some(0.0)
            })
    })
}

/// The text format 0.0.4 of OpenMetrics text: a counter's family is named with its
/// `_total` there (OpenMetrics names it without, and promtool then sees samples of a
/// family without help), its `_created` samples do not exist, nor do `# UNIT` and
/// `# EOF`.
pub fn to_text_format(openmetrics: &str) -> String {
    let counters: BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?)));
        if let Some((prefix, rest)) = descriptor {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            if counters.contains(name) {
                out.push_str(&format!("{prefix}{name}_total {tail}\n"));
                continue;
            }
        } else if !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap_or("");
            if name
                .strip_suffix("_created")
                .is_some_and(|base| counters.contains(base))
            {
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_asks_for_openmetrics_curl_and_kubectl_do_not() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wants_openmetrics(Some(prometheus)));
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(Some("application/json, */*")));
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text; q=0, text/plain"
        )));
    }

    #[test]
    fn counters_take_their_total_and_openmetrics_only_lines_go() {
        let om = "# HELP node_cpu_usage_seconds Cumulative cpu time.\n\
                  # TYPE node_cpu_usage_seconds counter\n\
                  # UNIT node_cpu_usage_seconds seconds\n\
                  node_cpu_usage_seconds_total 2.5\n\
                  node_cpu_usage_seconds_created 1.0\n\
                  # HELP scrape_error 1 on error.\n\
                  # TYPE scrape_error gauge\n\
                  scrape_error 0\n\
                  # HELP d_seconds D.\n\
                  # TYPE d_seconds histogram\n\
                  d_seconds_bucket{le=\"+Inf\"} 1\n\
                  # EOF\n";
        assert_eq!(
            to_text_format(om),
            "# HELP node_cpu_usage_seconds_total Cumulative cpu time.\n\
             # TYPE node_cpu_usage_seconds_total counter\n\
             node_cpu_usage_seconds_total 2.5\n\
             # HELP scrape_error 1 on error.\n\
             # TYPE scrape_error gauge\n\
             scrape_error 0\n\
             # HELP d_seconds D.\n\
             # TYPE d_seconds histogram\n\
             d_seconds_bucket{le=\"+Inf\"} 1\n"
        );
    }
}
