use super::*;

fn cg(usage: u64, inactive: u64, cpu: u64) -> CgroupStats {
    CgroupStats {
        memory_usage_bytes: usage,
        inactive_file_bytes: inactive,
        cpu_usage_nanos: Some(cpu),
        tasks: Some(3),
        ..CgroupStats::default()
    }
}

fn sample(t: i64, cpu: u64) -> StatsSample {
    StatsSample {
        time_unix_nanos: t,
        node: Some(cg(1000, 300, cpu)),
        memory_capacity_bytes: 4000,
        kubepods: None,
        node_fs: Some(FsStats {
            capacity_bytes: 100,
            available_bytes: 40,
            inodes: Some(10),
            inodes_free: Some(4),
        }),
        image_fs: None,
        pids: Some(PidStats {
            max: 100,
            running: 7,
        }),
        node_network: Vec::new(),
        pods: vec![PodSample {
            time_unix_nanos: 0,
            network: Vec::new(),
            name: "web".into(),
            namespace: "default".into(),
            uid: "u1".into(),
            start_time: Some("2026-01-01T00:00:00Z".into()),
            cgroup_path: Some("/kubepods/podu1".into()),
            cgroup: Some(cg(500, 100, cpu / 2)),
            containers: vec![ContainerSample {
                name: "c".into(),
                image: "busybox".into(),
                start_time: None,
                stats: RuntimeContainerStats {
                    id: "abc".into(),
                    name: "c".into(),
                    pod_uid: "u1".into(),
                    memory_working_set_bytes: Some(200),
                    cpu_usage_nanos: Some(cpu / 4),
                    writable_layer: Some(FsUsage {
                        used_bytes: 8,
                        inodes_used: 2,
                    }),
                    ..RuntimeContainerStats::default()
                },
                logs: Some(FsUsage {
                    used_bytes: 100,
                    inodes_used: 1,
                }),
            }],
            volumes: vec![VolumeSample {
                name: "scratch".into(),
                usage: FsUsage {
                    used_bytes: 4096,
                    inodes_used: 1,
                },
                fs: Some(FsStats {
                    capacity_bytes: 100_000,
                    available_bytes: 60_000,
                    inodes: Some(50),
                    inodes_free: Some(20),
                }),
                local_ephemeral: true,
                pvc_ref: None,
            }],
            etc_hosts: Some(FsUsage {
                used_bytes: 4096,
                inodes_used: 1,
            }),
        }],
    }
}

#[test]
fn usage_nano_cores_is_a_rate_over_two_samples() {
    assert_eq!(
        nano_cores(
            (2_000_000_000, 3_000_000_000),
            Some((1_000_000_000, 1_000_000_000))
        ),
        Some(2_000_000_000)
    );
    assert_eq!(nano_cores((5, 10), None), None);
    // A restarted counter and a clock that did not advance give no rate.
    assert_eq!(nano_cores((5, 1), Some((1, 10))), None);
    assert_eq!(nano_cores((5, 10), Some((5, 1))), None);
}

#[test]
fn the_summary_holds_working_sets_and_rates() {
    let first = sample(1_000_000_000, 1_000_000_000);
    let second = sample(3_000_000_000, 2_000_000_000);
    let s = summary("n1", "2026-01-01T00:00:00Z", &second, Some(&first));
    let memory = s.node.memory.clone().unwrap_or_default();
    assert_eq!(memory.working_set_bytes, Some(700));
    assert_eq!(memory.available_bytes, Some(3300));
    let cpu = s.node.cpu.clone().unwrap_or_default();
    assert_eq!(cpu.usage_nano_cores, Some(500_000_000));
    assert_eq!(cpu.usage_core_nano_seconds, Some(2_000_000_000));
    assert_eq!(s.node.fs.as_ref().and_then(|f| f.used_bytes), Some(60));
    assert_eq!(s.node.rlimit.as_ref().and_then(|r| r.curproc), Some(7));
    let pod = &s.pods[0];
    assert_eq!(
        pod.memory.as_ref().and_then(|m| m.working_set_bytes),
        Some(400)
    );
    assert_eq!(
        pod.cpu.as_ref().and_then(|c| c.usage_nano_cores),
        Some(250_000_000)
    );
    assert_eq!(
        pod.containers[0]
            .cpu
            .as_ref()
            .and_then(|c| c.usage_nano_cores),
        Some(125_000_000)
    );
    // Upstream's ephemeral storage: writable layer, logs, the disk-backed emptyDir and
    // the managed /etc/hosts (CVE-2020-8557).
    assert_eq!(
        pod.ephemeral_storage.as_ref().and_then(|e| e.used_bytes),
        Some(8 + 100 + 4096 + 4096)
    );
    let logs = pod.containers[0].logs.as_ref();
    assert_eq!(logs.and_then(|l| l.used_bytes), Some(100));
    assert!(
        logs.and_then(|l| l.capacity_bytes).is_some(),
        "the logs' filesystem is the node's"
    );
    assert_eq!(
        pod.process_stats.as_ref().and_then(|p| p.process_count),
        Some(3)
    );
    // A volume: its usage, on its filesystem, named (upstream's VolumeStats).
    let volume = serde_json::to_value(&pod.volume).unwrap_or_default();
    assert_eq!(
        volume,
        serde_json::json!([{
            "time": "1970-01-01T00:00:03Z",
            "availableBytes": 60_000,
            "capacityBytes": 100_000,
            "usedBytes": 4096,
            "inodesFree": 20,
            "inodes": 50,
            "inodesUsed": 1,
            "name": "scratch"
        }])
    );
    // A claim's volume names its claim (upstream's `pvcRef`).
    let claimed = VolumeSummary {
        name: "data".into(),
        pvc_ref: Some(PvcReference {
            name: "data".into(),
            namespace: "ns".into(),
        }),
        ..VolumeSummary::default()
    };
    assert_eq!(
        serde_json::to_value(&claimed).unwrap_or_default()["pvcRef"],
        serde_json::json!({"name": "data", "namespace": "ns"})
    );
    let first_only = summary("n1", "", &first, None);
    assert_eq!(first_only.node.cpu.and_then(|c| c.usage_nano_cores), None);
}

#[test]
fn the_json_has_upstreams_field_names() {
    let s = summary(
        "n1",
        "2026-01-01T00:00:00Z",
        &sample(1_000_000_000, 5),
        None,
    );
    let v = serde_json::to_value(&s).unwrap_or_default();
    assert_eq!(v["node"]["nodeName"], "n1");
    assert!(v["node"]["memory"]["workingSetBytes"].is_u64());
    assert!(v["node"]["cpu"]["usageCoreNanoSeconds"].is_u64());
    assert_eq!(v["pods"][0]["podRef"]["uid"], "u1");
    assert!(v["pods"][0]["ephemeral-storage"]["usedBytes"].is_u64());
    assert_eq!(v["pods"][0]["process_stats"]["process_count"], 3);
    assert_eq!(v["node"]["time"], serde_json::Value::Null);
}

#[test]
fn net_dev_counters_leave_the_loopback_out() {
    let text = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0\n  eth0:    5000      40    2    3    0     0          0         0     3000      30    1    4    0     0       0          0\n";
    let found = parse_net_dev(text);
    assert_eq!(
        found,
        vec![InterfaceStats {
            name: "eth0".into(),
            rx_bytes: 5000,
            rx_errors: 2,
            tx_bytes: 3000,
            tx_errors: 1,
            packets: Some(PacketCounts {
                rx_packets: 40,
                rx_dropped: 3,
                tx_packets: 30,
                tx_dropped: 4,
            }),
        }]
    );
    let mut s = sample(1, 1);
    s.pods[0].network = found;
    let v = serde_json::to_value(summary("n1", "", &s, None)).unwrap_or_default();
    assert_eq!(v["pods"][0]["network"]["name"], "eth0");
    assert_eq!(v["pods"][0]["network"]["rxBytes"], 5000);
    assert_eq!(v["pods"][0]["network"]["interfaces"][0]["txErrors"], 1);
}

#[test]
fn a_containers_cgroup_names_its_id_in_each_drivers_spelling() {
    let id = "4f3c2a";
    assert_eq!(container_id_of_cgroup(id), id);
    assert_eq!(container_id_of_cgroup("cri-containerd-4f3c2a.scope"), id);
    assert_eq!(container_id_of_cgroup("crio-4f3c2a.scope"), id);
}

#[test]
fn a_container_read_from_its_cgroup_keeps_the_runtimes_writable_layer() {
    let layer = FsUsage {
        used_bytes: 4096,
        inodes_used: 3,
    };
    let stats =
        RuntimeContainerStats::from_cgroup("c1", "app", "u1", &cg(1000, 300, 42), 7, Some(layer));
    assert_eq!(stats.memory_working_set_bytes, Some(700));
    assert_eq!(stats.memory_usage_bytes, Some(1000));
    assert_eq!(stats.cpu_usage_nanos, Some(42));
    assert_eq!(stats.timestamp_unix_nanos, 7);
    assert_eq!(stats.writable_layer, Some(layer));
    assert_eq!(
        (
            stats.id.as_str(),
            stats.name.as_str(),
            stats.pod_uid.as_str()
        ),
        ("c1", "app", "u1")
    );
}

fn status_with(containers: &[(&str, &str, bool)]) -> ApiPodStatus {
    use crate::domain::status::{ApiContainerStatus, Running};
    ApiPodStatus {
        container_statuses: containers
            .iter()
            .map(|(name, id, running)| ApiContainerStatus {
                name: (*name).to_owned(),
                container_id: format!("containerd://{id}"),
                state: if *running {
                    ApiContainerState::Running(Running::default())
                } else {
                    ApiContainerState::default()
                },
                ..ApiContainerStatus::default()
            })
            .collect(),
        ..ApiPodStatus::default()
    }
}

#[test]
fn a_sample_lists_the_runtime_only_when_the_cgroups_cannot_say_everything() {
    let status = status_with(&[("a", "c1", true), ("b", "c2", false)]);
    let listed: WritableLayers = BTreeMap::from([("c1".to_owned(), None)]);
    let running = || running_container_ids(&status);
    assert_eq!(running().collect::<Vec<_>>(), ["c1"]);
    assert!(!sample_lists_the_runtime(
        false,
        true,
        Some(&listed),
        running()
    ));
    // Housekeeping asks; no pod cgroups; no list yet.
    assert!(sample_lists_the_runtime(
        true,
        true,
        Some(&listed),
        running()
    ));
    assert!(sample_lists_the_runtime(
        false,
        false,
        Some(&listed),
        running()
    ));
    assert!(sample_lists_the_runtime(false, true, None, running()));
    // A container started since the last list: its writable layer is unknown.
    let restarted = status_with(&[("a", "c3", true)]);
    assert!(sample_lists_the_runtime(
        false,
        true,
        Some(&listed),
        running_container_ids(&restarted)
    ));
}

#[test]
fn containers_measured_from_cgroups_are_the_pods_known_ones() {
    let status = status_with(&[("app", "c1", true)]);
    let layer = FsUsage {
        used_bytes: 4096,
        inodes_used: 2,
    };
    let layers: WritableLayers = BTreeMap::from([("c1".to_owned(), Some(layer))]);
    let cgroups = vec![
        ("cri-containerd-c1.scope".to_owned(), cg(100, 10, 7)),
        // The sandbox's cgroup: no container of the status.
        ("cri-containerd-s1.scope".to_owned(), cg(50, 0, 1)),
    ];
    let measured = containers_from_cgroups("uid-1", &status, &cgroups, 42, &layers);
    assert_eq!(measured.len(), 1);
    assert_eq!(measured[0].id, "c1");
    assert_eq!(measured[0].name, "app");
    assert_eq!(measured[0].pod_uid, "uid-1");
    assert_eq!(measured[0].writable_layer, Some(layer));
    assert_eq!(runtime_id("containerd://c1"), "c1");
}

#[test]
fn a_pods_rates_come_from_the_times_its_cgroups_were_read() {
    // Pods read at 1 s and 5 s, served by samples taken at 2 s and 6 s: the pod's rate
    // is over the 4 s between its readings, and its time is its reading's.
    let mut first = sample(2_000_000_000, 1_000_000_000);
    first.pods[0].time_unix_nanos = 1_000_000_000;
    let mut second = sample(6_000_000_000, 3_000_000_000);
    second.pods[0].time_unix_nanos = 5_000_000_000;
    let pods = pod_summaries(&second, Some(&first));
    // (1.5 s - 0.5 s of pod CPU) over 4 s.
    assert_eq!(
        pods[0].cpu.as_ref().and_then(|c| c.usage_nano_cores),
        Some(250_000_000)
    );
    assert_eq!(
        pods[0].memory.as_ref().map(|m| m.time.as_str()),
        Some("1970-01-01T00:00:05Z")
    );
    // The node's part is at the sample's own time.
    let node = node_summary("n1", "", &second, Some(&first));
    assert_eq!(
        node.cpu.as_ref().and_then(|c| c.usage_nano_cores),
        Some(500_000_000)
    );
    assert_eq!(
        node.cpu.map(|c| c.time),
        Some("1970-01-01T00:00:06Z".into())
    );
    // The same reading twice gives no rate rather than a wrong one.
    assert_eq!(
        pod_summaries(&second, Some(&second))[0]
            .cpu
            .as_ref()
            .and_then(|c| c.usage_nano_cores),
        None
    );
}

#[test]
fn a_scrape_serves_a_reading_only_while_it_holds_every_active_pod_and_running_container() {
    let reading = sample(1_000_000_000, 0).pods;
    let running = status_with(&[("c", "abc", true)]);
    let age = 15_000_000_000;
    let at = |now: i64, active: &[(&str, &ApiPodStatus)]| {
        pods_reading_serves(now, 1_000_000_000, age, &reading, active)
    };
    assert!(at(2_000_000_000, &[("u1", &running)]));
    // Too old: housekeeping has not read the pods for a period and a half.
    assert!(!at(16_000_000_000, &[("u1", &running)]));
    // A pod added or gone since.
    assert!(!at(2_000_000_000, &[("u1", &running), ("u2", &running)]));
    assert!(!at(2_000_000_000, &[]));
    assert!(!at(2_000_000_000, &[("u2", &running)]));
    // A container started since (a restart's new instance).
    let restarted = status_with(&[("c", "def", true)]);
    assert!(!at(2_000_000_000, &[("u1", &restarted)]));
    // A container that is not running needs no reading.
    let waiting = status_with(&[("c", "def", false)]);
    assert!(at(2_000_000_000, &[("u1", &waiting)]));
}
