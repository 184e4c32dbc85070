//! Cgroup benchmark: the time to compute the cgroup configs of 10,000 pods
//! (pod_cgroup_name + pod_resource_config + qos_resource_configs; goal < 10 ms),
//! and to create and to destroy 100 pod cgroups with the cgroupfs driver under a
//! unique root (goal < 1 s each; removed afterwards). The second needs root on a
//! cgroup v1 (or hybrid) host; without, the bench fails saying which is missing. `RKUBELET_BENCH_RUNS` sets the number of compute runs (default 20);
//! `RKUBELET_BENCH_PARTS=1` also prints one cold pass of each part.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::adapters::cgroupfs::CgroupfsManager;
use rkubelet::domain::cgroup::{
    kubepods_name, pod_cgroup_name, pod_resource_config, qos_resource_configs, CgroupName,
    CgroupSettings, ResourceConfig,
};
use rkubelet::domain::pod::{Container, ObjectMeta, Pod, PodSpec, ResourceRequirements};
use rkubelet::domain::units::quantity::Quantity;
use rkubelet::ports::cgroup::CgroupManager;

#[allow(dead_code)] // shared with the tests, which use more of it
#[path = "../tests/common/cgroups.rs"]
mod cgroups;

use cgroups::rmdir_tree;

mod common;

use common::{below, fail};

fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// A mix of the three QoS classes, two containers each.
fn pods(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let (requests, limits) = match i % 3 {
                0 => (
                    vec![("cpu", "250m")],
                    vec![("cpu", "500m"), ("memory", "128Mi")],
                ),
                1 => (vec![], vec![("cpu", "1"), ("memory", "1Gi")]),
                _ => (vec![], vec![]),
            };
            let list = |pairs: &[(&str, &str)]| {
                pairs.iter().map(|(k, v)| ((*k).to_owned(), q(v))).collect()
            };
            let container = Container {
                name: "c".into(),
                image: "i".into(),
                resources: ResourceRequirements {
                    requests: list(&requests),
                    limits: list(&limits),
                },
                ..Container::default()
            };
            Pod {
                metadata: ObjectMeta {
                    name: format!("p{i}"),
                    namespace: "default".into(),
                    uid: format!("00000000-0000-0000-0000-{i:012}"),
                    ..ObjectMeta::default()
                },
                spec: PodSpec {
                    containers: vec![container.clone(), container],
                    ..PodSpec::default()
                },
            }
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn compute(pods: &[Pod]) {
    let runs = std::env::var("RKUBELET_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20usize)
        .max(1);
    let kubepods = kubepods_name("/").unwrap_or_default();
    let settings = CgroupSettings::default();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        for pod in pods {
            black_box(pod_cgroup_name(&kubepods, pod));
            black_box(pod_resource_config(pod, &settings));
        }
        black_box(qos_resource_configs(pods));
        times.push(start.elapsed());
    }
    if std::env::var_os("RKUBELET_BENCH_PARTS").is_some() {
        let t = Instant::now();
        for pod in pods {
            black_box(pod_cgroup_name(&kubepods, pod));
        }
        println!("names {:.2} ms", ms(t.elapsed()));
        let t = Instant::now();
        for pod in pods {
            black_box(pod_resource_config(pod, &settings));
        }
        println!("pod configs {:.2} ms", ms(t.elapsed()));
        let t = Instant::now();
        black_box(qos_resource_configs(pods));
        println!("qos {:.2} ms", ms(t.elapsed()));
        let t = Instant::now();
        for pod in pods {
            black_box(rkubelet::domain::pod::qos_class(&pod.spec));
        }
        println!("qos_class {:.2} ms", ms(t.elapsed()));
    }
    times.sort();
    let median = ms(times[times.len() / 2]);
    println!(
        "cgroups: configs of {} pods (name + pod config + QoS configs): median {median:.2} ms, min {:.2} ms over {runs} runs ({})",
        pods.len(),
        ms(times[0]),
        below(median, 10.0, " ms")
    );
}

struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            rmdir_tree(p);
        }
    }
}

/// The cgroupfs driver on the real hierarchies, or what this machine lacks for it.
fn real_manager() -> Result<CgroupfsManager, String> {
    if !nix::unistd::Uid::effective().is_root() {
        return Err(
            "peer missing: creating cgroups needs root; run as root, as scripts/test.sh does"
                .into(),
        );
    }
    let m = CgroupfsManager::detect(Path::new("/sys/fs/cgroup")).map_err(|e| e.to_string())?;
    if m.is_unified() {
        return Err(
            "peer missing: a cgroup v1 (or hybrid) host; the create/destroy figures are \
             measured on v1 hierarchies"
                .into(),
        );
    }
    Ok(m)
}

async fn real(m: &CgroupfsManager, pods: &[Pod]) -> Result<(), String> {
    let root = format!("rkubelet-bench-{}", std::process::id());
    let _cleanup = Cleanup(m.mounts().iter().map(|p| p.join(&root)).collect());
    let kubepods = kubepods_name(&format!("/{root}")).map_err(|e| e.to_string())?;
    let settings = CgroupSettings::default();
    let (burstable, besteffort) = qos_resource_configs(pods);
    m.create(&kubepods, &ResourceConfig::default())
        .await
        .map_err(|e| e.to_string())?;
    for (qos, config) in [("burstable", burstable), ("besteffort", besteffort)] {
        let name = CgroupName::new(&kubepods, &[qos]).map_err(|e| e.to_string())?;
        m.create(&name, &config).await.map_err(|e| e.to_string())?;
    }
    let batch: Vec<_> = pods
        .iter()
        .take(100)
        .map(|p| {
            (
                pod_cgroup_name(&kubepods, p),
                pod_resource_config(p, &settings),
            )
        })
        .collect();
    let start = Instant::now();
    for (name, config) in &batch {
        m.create(name, config).await.map_err(|e| e.to_string())?;
    }
    let created = start.elapsed();
    let start = Instant::now();
    for (name, _) in &batch {
        m.destroy(name).await.map_err(|e| e.to_string())?;
    }
    let destroyed = start.elapsed();
    m.destroy(&CgroupName::from_cgroupfs(&format!("/{root}")))
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "cgroups: create {} pod cgroups (cgroupfs v1, {} hierarchies): {:.2} ms, {:.3} ms each ({})",
        batch.len(),
        m.mounts().len(),
        ms(created),
        ms(created) / batch.len() as f64,
        below(ms(created), 1000.0, " ms")
    );
    println!(
        "cgroups: destroy {} pod cgroups: {:.2} ms, {:.3} ms each ({})",
        batch.len(),
        ms(destroyed),
        ms(destroyed) / batch.len() as f64,
        below(ms(destroyed), 1000.0, " ms")
    );
    Ok(())
}

pub fn main() {
    let pods = pods(10_000);
    compute(&pods);
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => fail("cgroups", &format!("no tokio runtime: {e}")),
    };
    let m = match real_manager() {
        Ok(m) => m,
        Err(reason) => fail(
            "cgroups",
            &format!("create/destroy 100 pod cgroups: {reason}"),
        ),
    };
    if let Err(e) = runtime.block_on(real(&m, &pods)) {
        fail("cgroups", &format!("create/destroy failed: {e}"));
    }
}
