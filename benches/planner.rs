//! Planner benchmark: the dry-run plan for 1,000 static pods against a recorded node
//! (snapshot JSON decoded, plan computed, plan encoded as JSON), on one core.
//! Goal: under 100 ms. `RKUBELET_BENCH_RUNS` sets the number of runs (default 20);
//! the median is printed.

use std::path::Path;
use std::time::{Duration, Instant};

use rkubelet::adapters::fake::FakeMachine;
use rkubelet::app::cli;
use rkubelet::app::planner::snapshot::{parse_snapshot, Snapshot, SNAPSHOT_VERSION};
use rkubelet::app::planner::{compute_plan, CgroupVersion, PlanInputs};
use rkubelet::domain::config;
use rkubelet::domain::kuberuntime::plan::{ImageFacts, ImagePresence};
use rkubelet::domain::kuberuntime::runtime::{
    ContainerState, ContainerStatus, ImageUser, PodRuntimeStatus, SandboxState, SandboxStatus,
};
use rkubelet::domain::pod::{container_hash, Container, Pod, CONFIG_SOURCE_ANNOTATION};

mod common;

use common::{below, fail};

const PODS: usize = 1_000;
const GOAL: Duration = Duration::from_millis(100);

fn pod(i: usize) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = format!("pod-{i:04}-node");
    pod.metadata.namespace = "default".into();
    pod.metadata.uid = format!("{i:032x}");
    pod.metadata
        .annotations
        .insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
    for c in ["app", "sidecar"] {
        pod.spec.containers.push(Container {
            name: c.into(),
            image: "docker.io/library/busybox:1.36".into(),
            ..Container::default()
        });
    }
    pod
}

/// Most pods run as specified; every 10th is missing from the runtime, every 7th
/// runs an older spec of one container.
fn observed(pod: &Pod, i: usize) -> Option<PodRuntimeStatus> {
    if i.is_multiple_of(10) {
        return None;
    }
    let containers = pod
        .spec
        .containers
        .iter()
        .enumerate()
        .map(|(n, c)| ContainerStatus {
            hash: if i.is_multiple_of(7) && n == 0 {
                1
            } else {
                container_hash(c)
            },
            image: c.image.clone(),
            created_at_nanos: 10,
            ..ContainerStatus::new(&format!("c{i}-{n}"), &c.name, ContainerState::Running)
        })
        .collect();
    Some(PodRuntimeStatus {
        uid: pod.metadata.uid.clone(),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        sandboxes: vec![SandboxStatus {
            id: format!("sb{i}"),
            attempt: 0,
            state: SandboxState::Ready,
            created_at_nanos: 1,
            host_network: false,
            ip: "10.0.0.2".into(),
        }],
        containers,
    })
}

pub fn main() {
    let Ok(given) = cli::parse(["rkubelet", "--container-runtime-endpoint=fake://"]) else {
        fail("planner", "flags do not parse");
    };
    let config_inputs = config::ConfigInputs::from_flags(given);
    let pods: Vec<Pod> = (0..PODS).map(pod).collect();
    let snapshot = Snapshot {
        version: SNAPSHOT_VERSION,
        hostname: "node".into(),
        machine: FakeMachine::sample_info(),
        cgroup_version: CgroupVersion::V2,
        node_stats: Default::default(),
        pods: pods
            .iter()
            .enumerate()
            .filter_map(|(i, p)| observed(p, i))
            .collect(),
        images: [("docker.io/library/busybox:1.36".to_string(), true)].into(),
        image_facts: Default::default(),
        recorded_at_unix_nanos: Some(1_700_000_000_000_000_000),
        eviction: None,
    };
    let Ok(text) = serde_json::to_string(&snapshot) else {
        fail("planner", "snapshot does not encode");
    };
    let runs: usize = std::env::var("RKUBELET_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let mut times = Vec::with_capacity(runs);
    let mut actions = 0;
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        let Ok(snapshot) = parse_snapshot(Path::new("bench.json"), &text) else {
            fail("planner", "snapshot does not decode");
        };
        let facts = config::NodeFacts {
            hostname: snapshot.hostname,
            machine: snapshot.machine,
        };
        let Ok(resolved) = config::resolve(&config_inputs, &facts) else {
            fail("planner", "configuration invalid");
        };
        let inputs = PlanInputs {
            cpu_manager: None,
            devices: Default::default(),
            resolved,
            cgroup_version: snapshot.cgroup_version,
            node_stats: snapshot.node_stats,
            desired: pods.clone(),
            sources_complete: true,
            warnings: Vec::new(),
            skipped_manifests: Vec::new(),
            observed: snapshot.pods,
            images: snapshot
                .images
                .iter()
                .map(|(image, &present)| {
                    let presence = if present {
                        ImagePresence::Present(ImageFacts {
                            id: String::new(),
                            user: ImageUser::root(),
                        })
                    } else {
                        ImagePresence::Absent
                    };
                    (image.clone(), presence)
                })
                .collect(),
            now_unix_nanos: snapshot.recorded_at_unix_nanos.unwrap_or_default(),
            cluster: None,
            eviction: None,
        };
        let plan = compute_plan(&inputs);
        let json = serde_json::to_string(&plan).unwrap_or_default();
        times.push(start.elapsed());
        actions = plan.action_count;
        std::hint::black_box(json);
    }
    times.sort();
    let median = times[times.len() / 2];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "planner: {PODS} pods from a snapshot in {:.2} ms (median of {}; {actions} actions; {})",
        ms(median),
        times.len(),
        below(ms(median), ms(GOAL), " ms")
    );
}
