//! The kubelet's Prometheus metrics, with upstream v1.26's names and labels, one file per
//! concern: the series the loops record into (`registries`), the runtime wrapper that
//! counts and times every CRI call (`instrumented_runtime`), and the per-scrape encodings
//! of `/metrics` (`kubelet_endpoint`), `/metrics/cadvisor` (`cadvisor_endpoint`) and
//! `/metrics/resource` (`resource_endpoint`) built from a stats sample.

mod cadvisor_endpoint;
mod instrumented_runtime;
mod kubelet_endpoint;
mod registries;
mod resource_endpoint;

pub use cadvisor_endpoint::encode_cadvisor;
pub use instrumented_runtime::{InstrumentedRuntime, InstrumentedRuntimeStats};
pub use kubelet_endpoint::{encode_kubelet_metrics, ScrapeState};
pub use registries::{
    kubelet_metrics, probe_metrics, KubeletMetrics, ProbeLabels, ProbeMetrics, RestClientMetrics,
};
pub use resource_endpoint::encode_resource;

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The content type of the OpenMetrics text `prometheus-client` writes.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(&'static str, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;
type FloatCounter = Counter<f64, AtomicU64>;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::domain::cgroup::CgroupDriver;
    use crate::domain::stats::StatsSample;
    use crate::domain::stats::{
        CgroupDetail, CgroupStats, ContainerSample, DeviceIo, PodSample, RuntimeContainerStats,
    };
    use crate::domain::status::ApiPodStatus;
    use crate::ports::api::{ApiRequestObserver, ApiRequestRecord};
    use crate::ports::node_stats::OwnProcess;

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
            volumes: &[],
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

    /// Upstream's volume stats collector: a claim's volume once, by namespace and claim;
    /// a volume without a claim is not shown.
    #[test]
    fn claims_volumes_are_shown_once_by_namespace_and_claim() {
        use crate::domain::stats::{FsSummary, PvcReference, VolumeSummary};
        let claimed = VolumeSummary {
            fs: FsSummary {
                capacity_bytes: Some(1000),
                available_bytes: Some(600),
                used_bytes: Some(400),
                inodes: Some(10),
                inodes_free: Some(7),
                inodes_used: Some(3),
                ..FsSummary::default()
            },
            name: "data".into(),
            pvc_ref: Some(PvcReference {
                name: "data".into(),
                namespace: "ns".into(),
            }),
        };
        let again = VolumeSummary {
            fs: FsSummary {
                used_bytes: Some(1),
                ..claimed.fs.clone()
            },
            ..claimed.clone()
        };
        let scratch = VolumeSummary {
            name: "scratch".into(),
            pvc_ref: None,
            ..claimed.clone()
        };
        let text = encode_kubelet_metrics(&ScrapeState {
            node_name: "n1",
            pods: &[],
            process: None,
            volumes: &[&claimed, &again, &scratch],
        });
        let labels = r#"{namespace="ns",persistentvolumeclaim="data"}"#;
        for (series, value) in [
            ("kubelet_volume_stats_capacity_bytes", "1000.0"),
            ("kubelet_volume_stats_available_bytes", "600.0"),
            ("kubelet_volume_stats_used_bytes", "400.0"),
            ("kubelet_volume_stats_inodes", "10.0"),
            ("kubelet_volume_stats_inodes_free", "7.0"),
            ("kubelet_volume_stats_inodes_used", "3.0"),
        ] {
            let line = format!("{series}{labels} {value}");
            assert_eq!(
                text.lines().filter(|l| *l == line).count(),
                1,
                "{line} in {text}"
            );
        }
        assert!(!text.contains("scratch"), "{text}");
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
            volumes: &[],
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
