//! `/metrics/cadvisor`: cAdvisor's `container_*` series of a stats sample, labelled as
//! upstream's cAdvisor labels them.

use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::{encode, float_counter, float_gauge, seconds, FloatCounter, FloatGauge, Labels};
use crate::domain::cgroup::CgroupDriver;
use crate::domain::stats::StatsSample;
use crate::domain::units::time::parse_rfc3339;

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
