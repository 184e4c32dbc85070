//! The stats provider behind `/stats/summary`, `/metrics/cadvisor` and
//! `/metrics/resource`: samples the root, `kubepods`, pod and container cgroups (cgroup
//! files), the containers' writable layers (CRI `ListContainerStats`), the node
//! filesystem (`statfs` of the root directory) and the image filesystem (CRI
//! `ImageFsInfo`, then `statfs`), and keeps the last sample so scrapes are cheap: a
//! scrape reuses a sample younger than `max_age`, and a housekeeping loop samples every
//! period so CPU rates always have two samples. Between housekeepings a scrape reads the
//! node's own cgroups anew and serves the pods of the last full reading while it holds
//! every active pod and running container (upstream's summary serves cAdvisor's
//! housekept stats the same way): at 100 pods, ten files instead of some 1,800.
//!
//! `ListContainerStats` costs containerd about 2 ms a container, so only housekeeping
//! calls it, for the writable layers; every sample reads the containers' CPU and memory
//! from their cgroups (as upstream's cAdvisor does), with the layers last listed. Without
//! pod cgroups (`--cgroups-per-qos=false`) every sample asks the runtime. A part that
//! cannot be read is left out and logged; the rest is still served.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Mutex};
use tracing::debug;

use crate::app::pods::volume_manager::VolumeManager;
use crate::app::pods::PodStatusStore;
use crate::domain::cgroup::tree::CgroupTree;
use crate::domain::cgroup::{CgroupDriver, CgroupName};
use crate::domain::config::options::DEFAULT_HOUSEKEEPING_INTERVAL;
use crate::domain::eviction::rank::is_local_ephemeral;
use crate::domain::eviction::signals::{FsStats, FsUsage, PidStats};
use crate::domain::kuberuntime::hosts::etc_hosts_file_in;
use crate::domain::kuberuntime::requests::{pod_log_dir_in, RequestContext};
use crate::domain::stats::{
    container_reading, containers_from_cgroups, named_containers, node_summary,
    pods_reading_serves, running_container_ids, runtime_id, runtime_network_of,
    sample_lists_the_runtime, summary, wants_runtime_network, CgroupStats, ContainerSample,
    InterfaceStats, PodSample, PvcReference, StatsSample, Summary, UsageSource, VolumeSample,
    WritableLayers,
};
use crate::domain::status::{ApiContainerState, ApiPodStatus};
use crate::domain::units::time::rfc3339_seconds;
use crate::domain::volumes::{volume_dir, VolumeKind};
use crate::ports::clock::Clock;
use crate::ports::error::Chain;
use crate::ports::node_stats::{NodeStats, RuntimeContainerStats, RuntimeStats};
use crate::ports::runtime::RuntimeError;

/// One sample and what is served from it.
#[derive(Debug)]
pub struct Snapshot {
    pub sample: StatsSample,
    pub summary: Summary,
    /// The summary's JSON, serialized once per sample.
    pub summary_json: Vec<u8>,
}

/// Writable-layer usage by container id, for every container the runtime listed.
type Layers = WritableLayers;

#[derive(Default)]
struct Cache {
    latest: Option<Arc<Snapshot>>,
    /// What the runtime last listed; `None` before housekeeping's first list.
    layers: Option<Layers>,
    /// The pods' volumes and logs as the last listing sample measured them, by pod uid.
    disk: BTreeMap<String, PodDiskUsage>,
    /// When the pods of `latest` were read (0 before any reading).
    pods_read_at: i64,
}

/// The node's own parts of a sample: its cgroups, filesystem, pids and interfaces.
struct NodeParts {
    node: Option<CgroupStats>,
    kubepods: Option<(String, CgroupStats)>,
    node_fs: Option<FsStats>,
    pids: Option<PidStats>,
    node_network: Vec<InterfaceStats>,
}

/// What `du` measured of one pod: its volumes, and its containers' logs by name.
#[derive(Default)]
struct PodDiskUsage {
    volumes: Vec<VolumeSample>,
    /// Its managed `/etc/hosts`.
    etc_hosts: Option<FsUsage>,
    logs: BTreeMap<String, FsUsage>,
}

/// What the provider reads through and of.
pub struct StatsProvider {
    pub stats: Arc<dyn NodeStats>,
    pub runtime: Arc<dyn RuntimeStats>,
    /// The pods' cgroup tree (`None` without `--cgroups-per-qos`).
    pub tree: Option<CgroupTree>,
    pub driver: CgroupDriver,
    pub root_dir: PathBuf,
    /// Where the pods' container logs are (`<dir>/<namespace>_<name>_<uid>/<container>`).
    pub pod_logs_dir: PathBuf,
    pub memory_capacity_bytes: u64,
    pub pods: PodStatusStore,
    pub clock: Arc<dyn Clock>,
    pub node_name: String,
    /// A scrape reuses a sample younger than this.
    pub max_age: Duration,
    /// A scrape serves the pods of a full reading younger than this (half a housekeeping
    /// period more than housekeeping's, so that a late housekeeping does not turn
    /// every scrape into a full reading).
    pub pods_max_age: Duration,
    cache: Mutex<Cache>,
    boot_time: std::sync::OnceLock<String>,
    /// The pods' CSI volumes, measured by their drivers.
    volumes: Option<Arc<VolumeManager>>,
    /// Where the pods' and containers' CPU and memory come from.
    source: UsageSource,
}

/// How old a full reading's pods may be served: half a housekeeping period past it.
fn pods_max_age(housekeeping: Duration) -> Duration {
    housekeeping + housekeeping / 2
}

fn logged<T, E: std::error::Error>(what: &str, result: Result<T, E>) -> Option<T> {
    match result {
        Ok(v) => Some(v),
        Err(error) => {
            debug!(error = %Chain(&error), "stats: cannot read {what}");
            None
        }
    }
}

impl StatsProvider {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        stats: Arc<dyn NodeStats>,
        runtime: Arc<dyn RuntimeStats>,
        tree: Option<CgroupTree>,
        driver: CgroupDriver,
        requests: &RequestContext,
        pods: PodStatusStore,
        clock: Arc<dyn Clock>,
        node_name: String,
    ) -> Self {
        StatsProvider {
            stats,
            runtime,
            tree,
            driver,
            root_dir: requests.root_dir.clone(),
            pod_logs_dir: requests.pod_logs_dir.clone(),
            memory_capacity_bytes: requests.memory_capacity_bytes,
            pods,
            clock,
            node_name,
            max_age: Duration::from_secs(1),
            pods_max_age: pods_max_age(DEFAULT_HOUSEKEEPING_INTERVAL),
            cache: Mutex::new(Cache::default()),
            boot_time: std::sync::OnceLock::new(),
            volumes: None,
            source: UsageSource::Cgroups,
        }
    }

    /// The pods' and containers' CPU and memory from `source` (upstream's
    /// `PodAndContainerStatsFromCRI` chooses the runtime).
    pub fn with_usage_source(mut self, source: UsageSource) -> Self {
        self.source = source;
        self
    }

    /// Scrapes serve the pods of housekeeping's readings, taken every `period`.
    /// CSI volumes are measured by their drivers, through the volume manager.
    pub fn with_volumes(mut self, volumes: Arc<VolumeManager>) -> Self {
        self.volumes = Some(volumes);
        self
    }

    pub fn with_housekeeping_period(mut self, period: Duration) -> Self {
        self.pods_max_age = pods_max_age(period);
        self
    }

    /// The latest snapshot, sampled anew when the cached one is older than `max_age`
    /// (concurrent scrapes wait for one sampling).
    /// The last snapshot taken, if any; never reads the node.
    pub async fn cached(&self) -> Option<Arc<Snapshot>> {
        self.cache.lock().await.latest.clone()
    }

    pub async fn latest(&self) -> Arc<Snapshot> {
        self.refresh(false).await
    }

    /// A snapshot: the cached one when it is younger than `max_age` and `list_runtime`
    /// is not asked; else a new sample, whose containers come from the runtime's list
    /// when `list_runtime` is asked or the last list lacks a running container (one
    /// started since), else from their cgroups.
    async fn refresh(&self, list_runtime: bool) -> Arc<Snapshot> {
        let mut cache = self.cache.lock().await;
        let now = self.clock.now_unix_nanos();
        let max_age = i64::try_from(self.max_age.as_nanos()).unwrap_or(i64::MAX);
        if let Some(latest) = cache.latest.as_ref().filter(|_| !list_runtime) {
            if now.saturating_sub(latest.sample.time_unix_nanos) < max_age {
                return Arc::clone(latest);
            }
        }
        let statuses: Vec<(String, ApiPodStatus)> = self
            .pods
            .active_pods()
            .iter()
            .map(|pod| {
                let uid = &pod.metadata.uid;
                (uid.clone(), self.pods.status_of(uid).unwrap_or_default())
            })
            .collect();
        if let Some(latest) = cache.latest.as_ref().filter(|_| !list_runtime) {
            let active: Vec<(&str, &ApiPodStatus)> =
                statuses.iter().map(|(uid, s)| (uid.as_str(), s)).collect();
            let pods_max_age = i64::try_from(self.pods_max_age.as_nanos()).unwrap_or(i64::MAX);
            if pods_reading_serves(
                now,
                cache.pods_read_at,
                pods_max_age,
                &latest.sample.pods,
                &active,
            ) {
                let snapshot = Arc::new(self.node_read_anew(now, latest).await);
                cache.latest = Some(Arc::clone(&snapshot));
                return snapshot;
            }
        }
        let listing = sample_lists_the_runtime(
            list_runtime,
            self.source.containers_from_cgroups(self.tree.is_some()),
            cache.layers.as_ref(),
            statuses.iter().flat_map(|(_, s)| running_container_ids(s)),
        );
        let layers = cache.layers.take().filter(|_| !listing);
        let (mut sample, layers) = self.sample(now, layers).await;
        cache.layers = Some(layers);
        cache.pods_read_at = now;
        // Walking volumes and logs is `du`: with the runtime's list, not on every scrape
        // (upstream measures them once a minute).
        if listing {
            cache.disk = self.disk_usage().await;
        }
        for pod in &mut sample.pods {
            let Some(disk) = cache.disk.get(&pod.uid) else {
                continue;
            };
            pod.volumes = disk.volumes.clone();
            pod.etc_hosts = disk.etc_hosts;
            for c in &mut pod.containers {
                c.logs = disk.logs.get(&c.name).copied();
            }
        }
        let boot = self.boot_time().await;
        let summary = summary(
            &self.node_name,
            &boot,
            &sample,
            cache.latest.as_ref().map(|s| &s.sample),
        );
        let summary_json = serde_json::to_vec(&summary).unwrap_or_default();
        let snapshot = Arc::new(Snapshot {
            sample,
            summary,
            summary_json,
        });
        cache.latest = Some(Arc::clone(&snapshot));
        snapshot
    }

    /// A snapshot with the node's own parts read anew and the pods of `latest`, whose
    /// summaries (and their rates) are kept as they were.
    async fn node_read_anew(&self, now: i64, latest: &Snapshot) -> Snapshot {
        let parts = self.node_parts().await;
        let sample = StatsSample {
            time_unix_nanos: now,
            node: parts.node,
            memory_capacity_bytes: self.memory_capacity_bytes,
            kubepods: parts.kubepods,
            node_fs: parts.node_fs,
            image_fs: latest.sample.image_fs,
            pids: parts.pids,
            pods: latest.sample.pods.clone(),
            node_network: parts.node_network,
        };
        let boot = self.boot_time().await;
        let summary = Summary {
            node: node_summary(&self.node_name, &boot, &sample, Some(&latest.sample)),
            pods: latest.summary.pods.clone(),
        };
        let summary_json = serde_json::to_vec(&summary).unwrap_or_default();
        Snapshot {
            sample,
            summary,
            summary_json,
        }
    }

    /// The node's own cgroups, filesystem, pids and interfaces.
    async fn node_parts(&self) -> NodeParts {
        let node = logged(
            "the root cgroup",
            self.stats.cgroup(&CgroupName::root()).await,
        )
        .flatten();
        let kubepods = match &self.tree {
            Some(tree) => logged(
                "the kubepods cgroup",
                self.stats.cgroup(&tree.kubepods).await,
            )
            .flatten()
            .map(|s| (tree.kubepods.to_driver(self.driver), s)),
            None => None,
        };
        let node_fs = logged(
            "the node filesystem",
            self.stats.filesystem(&self.root_dir).await,
        )
        .map(|f| f.stats);
        let pids = logged("the pids", self.stats.pids().await);
        let node_network = logged(
            "the node's network",
            self.stats.network(&CgroupName::root()).await,
        )
        .unwrap_or_default();
        NodeParts {
            node,
            kubepods,
            node_fs,
            pids,
            node_network,
        }
    }

    /// Each active pod's volumes kept under the root directory (their folder's usage and
    /// filesystem; a hostPath is the host's, not the pod's) and its containers' logs.
    async fn disk_usage(&self) -> BTreeMap<String, PodDiskUsage> {
        let mut usage = BTreeMap::new();
        for pod in self.pods.active_pods() {
            let uid = &pod.metadata.uid;
            let log_dir = pod_log_dir_in(&self.pod_logs_dir, &pod);
            let mut logs = BTreeMap::new();
            for c in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
                let used = self.stats.directory_usage(&log_dir.join(&c.name)).await;
                if let Some(used) = logged("container logs", used).flatten() {
                    logs.insert(c.name.clone(), used);
                }
            }
            let mut volumes = Vec::new();
            for volume in &pod.spec.volumes {
                let kind = VolumeKind::of(volume);
                // A CSI volume is its driver's to measure (below), never walked.
                if kind == VolumeKind::Csi {
                    continue;
                }
                let Some(plugin) = kind.plugin_dir() else {
                    continue;
                };
                let dir = volume_dir(&self.root_dir, uid, plugin, &volume.name);
                let Some(used) =
                    logged("a volume", self.stats.directory_usage(&dir).await).flatten()
                else {
                    continue;
                };
                volumes.push(VolumeSample {
                    name: volume.name.clone(),
                    usage: used,
                    fs: logged("a volume's filesystem", self.stats.filesystem(&dir).await)
                        .map(|f| f.stats),
                    local_ephemeral: is_local_ephemeral(volume),
                    pvc_ref: None,
                });
            }
            if let Some(manager) = &self.volumes {
                // A local claim's folder is measured as its filesystem (upstream's
                // MetricsStatFS), never walked.
                for (name, claim, path) in manager.local_claim_volumes(uid) {
                    let Some(info) = logged(
                        "a local volume's filesystem",
                        self.stats.filesystem(&path).await,
                    ) else {
                        continue;
                    };
                    volumes.push(VolumeSample {
                        name,
                        usage: info.used,
                        fs: Some(info.stats),
                        local_ephemeral: false,
                        pvc_ref: claim.map(|name| PvcReference {
                            name,
                            namespace: pod.metadata.namespace.clone(),
                        }),
                    });
                }
                for sample in manager.csi_volume_stats(uid).await {
                    volumes.push(VolumeSample {
                        name: sample.volume,
                        usage: sample.stats.usage,
                        fs: Some(sample.stats.fs),
                        local_ephemeral: false,
                        pvc_ref: sample.claim.map(|name| PvcReference {
                            name,
                            namespace: pod.metadata.namespace.clone(),
                        }),
                    });
                }
            }
            let etc_hosts = logged(
                "a pod's /etc/hosts",
                self.stats
                    .directory_usage(&etc_hosts_file_in(&self.root_dir, uid))
                    .await,
            )
            .flatten();
            usage.insert(
                uid.clone(),
                PodDiskUsage {
                    volumes,
                    etc_hosts,
                    logs,
                },
            );
        }
        usage
    }

    async fn boot_time(&self) -> String {
        if let Some(boot) = self.boot_time.get() {
            return boot.clone();
        }
        let boot = logged("the boot time", self.stats.boot_time().await)
            .flatten()
            .map(|secs| rfc3339_seconds(secs.saturating_mul(1_000_000_000)))
            .unwrap_or_default();
        self.boot_time.get_or_init(|| boot).clone()
    }

    /// Samples every `period` until `stop` (upstream's housekeeping), so that rates have
    /// an earlier sample whenever a scrape comes.
    pub async fn run(self: Arc<Self>, period: Duration, mut stop: watch::Receiver<bool>) {
        loop {
            self.refresh(true).await;
            tokio::select! {
                () = tokio::time::sleep(period) => {}
                _ = stop.changed() => return,
            }
            if *stop.borrow() {
                return;
            }
        }
    }

    /// One sample, and the writable layers it knows. The runtime's calls (image
    /// filesystem, container stats) are in flight while the node's own files are read,
    /// so a sample waits for the slower of the two, not their sum. Given `layers`, the
    /// containers come from their cgroups, else from the runtime's list.
    async fn sample(&self, now: i64, layers: Option<Layers>) -> (StatsSample, Layers) {
        let began = std::time::Instant::now();
        let from_runtime = async {
            let answers = if layers.is_some() {
                (self.runtime.image_fs_info().await, None)
            } else {
                let (fs, listed) =
                    tokio::join!(self.runtime.image_fs_info(), self.runtime.container_stats());
                (fs, Some(listed))
            };
            let pods = match self.source {
                UsageSource::Runtime => Some(self.runtime.pod_sandbox_stats().await),
                UsageSource::Cgroups => None,
            };
            (answers, pods, began.elapsed())
        };
        let pods = self.pods.active_pods();
        let statuses: Vec<_> = pods
            .iter()
            .map(|p| self.pods.status_of(&p.metadata.uid).unwrap_or_default())
            .collect();
        let from_node = async {
            let parts = self.node_parts().await;
            let mut pod_cgroups = Vec::with_capacity(pods.len());
            for (pod, status) in pods.iter().zip(&statuses) {
                pod_cgroups.push(match &self.tree {
                    Some(tree) => {
                        let name = tree.pod(pod).name;
                        // Read on a listing sample too: the runtime's stats lack the
                        // finer counters cAdvisor's series need, and scrapes between
                        // serve this reading. Only the status's containers: the
                        // sandbox's cgroup names none.
                        let ids: Vec<&str> = named_containers(status).map(|(id, _)| id).collect();
                        let containers = logged(
                            "a pod's container cgroups",
                            self.stats.child_cgroups(&name, &ids).await,
                        )
                        .unwrap_or_default();
                        (
                            Some(name.to_driver(self.driver)),
                            logged("a pod cgroup", self.stats.cgroup(&name).await).flatten(),
                            logged("a pod's network", self.stats.network(&name).await)
                                .unwrap_or_default(),
                            containers,
                        )
                    }
                    None => (None, None, Vec::new(), Vec::new()),
                });
            }
            (parts, pod_cgroups, began.elapsed())
        };
        let (
            ((image_fs_info, container_stats), runtime_pods, runtime_took),
            (parts, pod_cgroups, node_took),
        ) = tokio::join!(from_runtime, from_node);
        debug!(
            runtime_ms = runtime_took.as_secs_f64() * 1e3,
            node_files_ms = node_took.as_secs_f64() * 1e3,
            pods = pods.len(),
            "stats sampled"
        );
        let image_fs = match logged("the image filesystem", image_fs_info)
            .and_then(|fs| fs.into_iter().next())
        {
            Some(usage) => logged(
                "the image filesystem",
                self.stats.filesystem(&usage.mountpoint).await,
            )
            .map(|fs| {
                (
                    fs.stats,
                    FsUsage {
                        used_bytes: usage.used_bytes,
                        inodes_used: usage.inodes_used,
                    },
                )
            }),
            None => None,
        };
        let listed =
            container_stats.map(|answer| logged("container stats", answer).unwrap_or_default());
        let layers = match (&listed, layers) {
            (Some(listed), _) => listed
                .iter()
                .map(|c| (c.id.clone(), c.writable_layer))
                .collect(),
            (None, layers) => layers.unwrap_or_default(),
        };
        let mut by_pod: BTreeMap<String, Vec<RuntimeContainerStats>> = BTreeMap::new();
        for c in listed.into_iter().flatten() {
            by_pod.entry(c.pod_uid.clone()).or_default().push(c);
        }
        let mut pod_cgroups = pod_cgroups;
        if let Some(answer) = runtime_pods {
            // The runtime's usage over the cgroups' reading, its network over the
            // namespace's, as upstream's CRI stats provider takes them.
            let measured = match answer {
                Ok(measured) => measured,
                Err(error) => {
                    debug!(error = %Chain(&error), "the runtime's pod stats");
                    Vec::new()
                }
            };
            for (pod, slot) in pods.iter().zip(pod_cgroups.iter_mut()) {
                let Some(theirs) = measured.iter().find(|m| m.pod_uid == pod.metadata.uid) else {
                    continue;
                };
                slot.1 = Some(theirs.usage.over(slot.1.as_ref()));
                if !theirs.network.is_empty() {
                    slot.2 = theirs.network.clone();
                }
            }
        }
        let wanted: Vec<usize> = pod_cgroups
            .iter()
            .zip(&statuses)
            .enumerate()
            .filter(|(_, ((_, _, network, _), status))| {
                wants_runtime_network(&status.phase, network)
            })
            .map(|(i, _)| i)
            .collect();
        if !wanted.is_empty() && self.source == UsageSource::Cgroups {
            match self.runtime.pod_sandbox_stats().await {
                Ok(measured) => {
                    for i in wanted {
                        if let (Some(pod), Some(slot)) = (pods.get(i), pod_cgroups.get_mut(i)) {
                            slot.2 = runtime_network_of(&pod.metadata.uid, &measured);
                        }
                    }
                }
                Err(RuntimeError::Unimplemented(_)) => {}
                Err(error) => debug!(error = %Chain(&error), "the runtime's pod stats"),
            }
        }
        let mut samples = Vec::with_capacity(pods.len());
        for ((pod, status), (cgroup_path, cgroup, network, container_cgroups)) in
            pods.into_iter().zip(statuses).zip(pod_cgroups)
        {
            let uid = pod.metadata.uid.clone();
            let mut measured = by_pod.remove(&uid).unwrap_or_default();
            measured.extend(containers_from_cgroups(
                &uid,
                &status,
                &container_cgroups,
                now,
                &layers,
            ));
            let mut containers = Vec::new();
            for spec in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
                // The instance running now (a restarted container leaves dead ones).
                let current = status.container_status(&spec.name);
                let running_id = current
                    .map(|s| runtime_id(&s.container_id))
                    .unwrap_or_default();
                let Some(stats) = container_reading(self.source, &spec.name, running_id, &measured)
                else {
                    continue;
                };
                let start_time = current.and_then(|s| match &s.state {
                    ApiContainerState::Running(r) => Some(r.started_at.clone()),
                    _ => None,
                });
                containers.push(ContainerSample {
                    name: spec.name.clone(),
                    image: spec.image.clone(),
                    start_time,
                    stats,
                    logs: None,
                });
            }
            samples.push(PodSample {
                time_unix_nanos: now,
                name: pod.metadata.name.clone(),
                namespace: pod.metadata.namespace.clone(),
                uid,
                start_time: status.start_time.clone(),
                cgroup_path,
                cgroup,
                containers,
                network,
                volumes: Vec::new(),
                etc_hosts: None,
            });
        }
        let sample = StatsSample {
            time_unix_nanos: now,
            node: parts.node,
            memory_capacity_bytes: self.memory_capacity_bytes,
            kubepods: parts.kubepods,
            node_fs: parts.node_fs,
            image_fs,
            pids: parts.pids,
            pods: samples,
            node_network: parts.node_network,
        };
        (sample, layers)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::adapters::fake::runtime::FakeRuntime;
    use crate::adapters::fake::{FakeClock, FakeNodeStats};
    use crate::domain::stats::CgroupStats;

    /// The pods' cgroup tree under the root, as cgroupfs names it.
    fn pods_tree() -> Result<CgroupTree, Box<dyn std::error::Error>> {
        use crate::domain::cgroup::{kubepods_name, CgroupSettings};
        Ok(CgroupTree {
            kubepods: kubepods_name("/")?,
            enforce_pods: false,
            pod_settings: CgroupSettings::default(),
        })
    }

    /// A provider over the fakes, with the pods' cgroup `tree`.
    fn provider_on(
        stats: &Arc<FakeNodeStats>,
        runtime: &Arc<FakeRuntime>,
        tree: CgroupTree,
        pods: &PodStatusStore,
        clock: &Arc<FakeClock>,
    ) -> StatsProvider {
        StatsProvider::new(
            stats.clone(),
            runtime.clone(),
            Some(tree),
            CgroupDriver::Cgroupfs,
            &RequestContext::under_root(Path::new("/nonexistent")),
            pods.clone(),
            clock.clone(),
            "n1".into(),
        )
    }

    /// A pod with only its identity.
    fn bare_pod(uid: &str) -> crate::domain::pod::Pod {
        use crate::domain::pod::{ObjectMeta, Pod};
        Pod {
            metadata: ObjectMeta {
                uid: uid.into(),
                name: format!("pod-{uid}"),
                namespace: "default".into(),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[tokio::test]
    async fn a_scrape_reuses_a_fresh_sample_and_rates_come_from_two() {
        let stats = Arc::new(FakeNodeStats::new());
        let clock = Arc::new(FakeClock::new(1_700_000_000_000_000_000));
        let cg = |cpu: u64| CgroupStats {
            memory_usage_bytes: 1000,
            inactive_file_bytes: 100,
            cpu_usage_nanos: Some(cpu),
            ..CgroupStats::default()
        };
        stats.set_cgroup(&CgroupName::root(), cg(1_000_000_000));
        let provider = StatsProvider::new(
            stats.clone(),
            Arc::new(FakeRuntime::new()),
            None,
            CgroupDriver::Cgroupfs,
            &RequestContext {
                memory_capacity_bytes: 4000,
                ..RequestContext::under_root(Path::new("/nonexistent"))
            },
            PodStatusStore::new(),
            clock.clone(),
            "n1".into(),
        );
        let first = provider.latest().await;
        assert_eq!(
            first
                .summary
                .node
                .memory
                .as_ref()
                .and_then(|m| m.working_set_bytes),
            Some(900)
        );
        assert_eq!(
            first
                .summary
                .node
                .cpu
                .as_ref()
                .and_then(|c| c.usage_nano_cores),
            None
        );
        stats.set_cgroup(&CgroupName::root(), cg(3_000_000_000));
        clock.advance(Duration::from_millis(500));
        let cached = provider.latest().await;
        assert!(Arc::ptr_eq(&first, &cached));
        clock.advance(Duration::from_millis(1500));
        let second = provider.latest().await;
        assert_eq!(
            second
                .summary
                .node
                .cpu
                .as_ref()
                .and_then(|c| c.usage_nano_cores),
            Some(1_000_000_000)
        );
        let json: serde_json::Value =
            serde_json::from_slice(&second.summary_json).unwrap_or_default();
        assert_eq!(json["node"]["nodeName"], "n1");
    }

    #[tokio::test]
    async fn between_housekeepings_a_scrape_reads_the_containers_from_their_cgroups(
    ) -> Result<(), Box<dyn std::error::Error>> {
        use crate::domain::eviction::signals::FsUsage;
        use crate::domain::pod::{Container, EmptyDirVolume, ObjectMeta, Pod, PodSpec, Volume};
        use crate::domain::status::{ApiContainerStatus, ApiPodStatus};

        let stats = Arc::new(FakeNodeStats::new());
        let clock = Arc::new(FakeClock::new(1_700_000_000_000_000_000));
        let tree = pods_tree()?;
        let pod = Pod {
            metadata: ObjectMeta {
                uid: "u1".into(),
                name: "web".into(),
                namespace: "default".into(),
                ..ObjectMeta::default()
            },
            spec: PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    image: "busybox".into(),
                    ..Container::default()
                }],
                volumes: vec![Volume {
                    name: "scratch".into(),
                    empty_dir: Some(EmptyDirVolume::default()),
                    ..Volume::default()
                }],
                ..PodSpec::default()
            },
        };
        let pods = PodStatusStore::new();
        pods.set(
            &pod,
            ApiPodStatus {
                phase: "Running".into(),
                container_statuses: vec![ApiContainerStatus {
                    name: "app".into(),
                    container_id: "containerd://abc123".into(),
                    ..ApiContainerStatus::default()
                }],
                ..ApiPodStatus::default()
            },
        );
        let pod_cgroup = tree.pod(&pod).name;
        let usage = |bytes: u64| CgroupStats {
            memory_usage_bytes: bytes,
            cpu_usage_nanos: Some(5),
            ..CgroupStats::default()
        };
        stats.set_cgroup(&pod_cgroup, usage(3000));
        stats.set_cgroup(&CgroupName::new(&pod_cgroup, &["abc123"])?, usage(2000));
        // The sandbox's cgroup is no container of the spec.
        stats.set_cgroup(&CgroupName::new(&pod_cgroup, &["sandbox9"])?, usage(1000));
        let provider = Arc::new(
            StatsProvider::new(
                stats.clone(),
                Arc::new(FakeRuntime::new()),
                Some(tree),
                CgroupDriver::Cgroupfs,
                &RequestContext {
                    memory_capacity_bytes: 4000,
                    ..RequestContext::under_root(Path::new("/nonexistent"))
                },
                pods,
                clock.clone(),
                "n1".into(),
            )
            // Every scrape a full reading, as when a pod came since housekeeping.
            .with_housekeeping_period(Duration::ZERO),
        );
        let memory_of_app = |snapshot: &Snapshot| {
            snapshot.sample.pods[0]
                .containers
                .iter()
                .map(|c| (c.name.clone(), c.stats.memory_working_set_bytes))
                .collect::<Vec<_>>()
        };
        let scratch = PathBuf::from("/nonexistent/pods/u1/volumes/kubernetes.io~empty-dir/scratch");
        let used = |bytes: u64| FsUsage {
            used_bytes: bytes,
            inodes_used: 2,
        };
        stats.set_directory(&scratch, used(8192));
        let volume_of = |snapshot: &Snapshot| {
            snapshot.sample.pods[0]
                .volumes
                .iter()
                .map(|v| (v.name.clone(), v.usage.used_bytes))
                .collect::<Vec<_>>()
        };
        // Housekeeping lists from the runtime, which knows no container here, reads the
        // containers' own cgroups, and measures the volumes.
        let listed = provider.refresh(true).await;
        assert_eq!(memory_of_app(&listed), vec![("app".to_owned(), Some(2000))]);
        assert_eq!(volume_of(&listed), vec![("scratch".to_owned(), 8192)]);
        let json: serde_json::Value =
            serde_json::from_slice(&listed.summary_json).unwrap_or_default();
        assert_eq!(json["pods"][0]["volume"][0]["name"], "scratch");
        assert_eq!(json["pods"][0]["volume"][0]["usedBytes"], 8192);
        // A scrape between housekeepings reads the cgroups anew but does not walk the
        // volumes again.
        stats.set_directory(&scratch, used(16384));
        stats.set_cgroup(&CgroupName::new(&pod_cgroup, &["abc123"])?, usage(2500));
        clock.advance(Duration::from_secs(2));
        let scraped = provider.latest().await;
        assert_eq!(
            memory_of_app(&scraped),
            vec![("app".to_owned(), Some(2500))]
        );
        assert_eq!(volume_of(&scraped), vec![("scratch".to_owned(), 8192)]);
        // A running container the last list lacks (started since) makes the next scrape
        // list again, and walk the volumes with it.
        let mut status = provider.pods.status_of("u1").unwrap_or_default();
        status.container_statuses[0].state = ApiContainerState::Running(Default::default());
        provider.pods.set(&pod, status);
        clock.advance(Duration::from_secs(2));
        let relisted = provider.latest().await;
        assert_eq!(volume_of(&relisted), vec![("scratch".to_owned(), 16384)]);
        Ok(())
    }

    #[tokio::test]
    async fn between_housekeepings_a_scrape_reads_the_node_anew_and_serves_the_pods_read_last(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let stats = Arc::new(FakeNodeStats::new());
        let clock = Arc::new(FakeClock::new(1_700_000_000_000_000_000));
        let tree = pods_tree()?;
        let usage = |bytes: u64, cpu: u64| CgroupStats {
            memory_usage_bytes: bytes,
            cpu_usage_nanos: Some(cpu),
            ..CgroupStats::default()
        };
        let pods = PodStatusStore::new();
        pods.set(&bare_pod("u1"), ApiPodStatus::default());
        let u1 = tree.pod(&bare_pod("u1")).name;
        stats.set_cgroup(&CgroupName::root(), usage(1000, 0));
        stats.set_cgroup(&u1, usage(300, 0));
        let provider = StatsProvider::new(
            stats.clone(),
            Arc::new(FakeRuntime::new()),
            Some(tree.clone()),
            CgroupDriver::Cgroupfs,
            &RequestContext::under_root(Path::new("/nonexistent")),
            pods.clone(),
            clock.clone(),
            "n1".into(),
        )
        .with_housekeeping_period(Duration::from_secs(10));
        let working_sets = |s: &Snapshot| {
            let node = s
                .summary
                .node
                .memory
                .as_ref()
                .and_then(|m| m.working_set_bytes);
            let pods: Vec<_> = s
                .summary
                .pods
                .iter()
                .map(|p| {
                    let ws = p.memory.as_ref().and_then(|m| m.working_set_bytes);
                    (p.pod_ref.uid.clone(), ws)
                })
                .collect();
            (node, pods)
        };
        let nanos_cores = |s: &Snapshot| {
            s.summary.pods[0]
                .cpu
                .as_ref()
                .and_then(|c| c.usage_nano_cores)
        };
        provider.refresh(true).await;
        clock.advance(Duration::from_secs(1));
        stats.set_cgroup(&u1, usage(300, 1_000_000_000));
        let housekept = provider.refresh(true).await;
        assert_eq!(nanos_cores(&housekept), Some(1_000_000_000));
        // Two seconds later the node is read anew; the pod is as housekeeping read it,
        // with the rate it had.
        stats.set_cgroup(&CgroupName::root(), usage(2000, 0));
        stats.set_cgroup(&u1, usage(500, 5_000_000_000));
        clock.advance(Duration::from_secs(2));
        let scraped = provider.latest().await;
        assert_eq!(
            working_sets(&scraped),
            (Some(2000), vec![("u1".to_owned(), Some(300))])
        );
        assert_eq!(nanos_cores(&scraped), Some(1_000_000_000));
        assert_eq!(scraped.sample.pods, housekept.sample.pods);
        // A period and a half after housekeeping's reading the pods are read anew, with
        // their rate over the time between their readings (4 s of CPU in 15 s).
        clock.advance(Duration::from_secs(13));
        let read_anew = provider.latest().await;
        assert_eq!(
            working_sets(&read_anew),
            (Some(2000), vec![("u1".to_owned(), Some(500))])
        );
        assert_eq!(nanos_cores(&read_anew), Some(266_666_666));
        // A pod that came since is read at once, with the others.
        pods.set(&bare_pod("u2"), ApiPodStatus::default());
        stats.set_cgroup(&tree.pod(&bare_pod("u2")).name, usage(700, 0));
        stats.set_cgroup(&u1, usage(600, 5_000_000_000));
        clock.advance(Duration::from_secs(2));
        let with_new_pod = provider.latest().await;
        let (_, mut pods_read) = working_sets(&with_new_pod);
        pods_read.sort();
        assert_eq!(
            pods_read,
            vec![("u1".to_owned(), Some(600)), ("u2".to_owned(), Some(700))]
        );
        Ok(())
    }

    /// A running pod whose namespace gives no interface (its processes not visible) gets
    /// its network from the runtime's `ListPodSandboxStats`; a pod whose namespace was
    /// read does not make the runtime asked.
    #[tokio::test]
    async fn a_pod_network_the_namespace_does_not_give_comes_from_the_runtime(
    ) -> Result<(), Box<dyn std::error::Error>> {
        use crate::domain::stats::InterfaceStats;
        use crate::domain::status::ApiPodStatus;

        let stats = Arc::new(FakeNodeStats::new());
        let runtime = Arc::new(FakeRuntime::new());
        let clock = Arc::new(FakeClock::new(1_700_000_000_000_000_000));
        let tree = pods_tree()?;
        let eth0 = |rx: u64| InterfaceStats {
            name: "eth0".into(),
            rx_bytes: rx,
            ..InterfaceStats::default()
        };
        let pods = PodStatusStore::new();
        let running = ApiPodStatus {
            phase: "Running".into(),
            ..ApiPodStatus::default()
        };
        pods.set(&bare_pod("seen"), running.clone());
        stats.set_network(&tree.pod(&bare_pod("seen")).name, vec![eth0(1)]);
        let provider = provider_on(&stats, &runtime, tree, &pods, &clock);
        let networks = |snapshot: &Snapshot| {
            snapshot
                .sample
                .pods
                .iter()
                .map(|p| {
                    (
                        p.uid.clone(),
                        p.network.iter().map(|i| i.rx_bytes).collect(),
                    )
                })
                .collect::<Vec<(String, Vec<u64>)>>()
        };
        let asked = || {
            runtime
                .journal()
                .iter()
                .filter(|c| c.starts_with("ListPodSandboxStats"))
                .count()
        };
        let first = provider.refresh(true).await;
        assert_eq!(networks(&first), vec![("seen".to_owned(), vec![1])]);
        assert_eq!(asked(), 0);

        pods.set(&bare_pod("hidden"), running);
        runtime.set_pod_network("hidden", vec![eth0(7)]);
        clock.advance(Duration::from_secs(2));
        let second = provider.refresh(true).await;
        let mut got = networks(&second);
        got.sort();
        assert_eq!(
            got,
            vec![("hidden".to_owned(), vec![7]), ("seen".to_owned(), vec![1])]
        );
        assert_eq!(asked(), 1);
        Ok(())
    }

    /// With upstream's `PodAndContainerStatsFromCRI`, a pod's CPU and memory are the
    /// runtime's, asked at every sample; without it, its cgroup's, and the runtime is not
    /// asked for a pod whose namespace gave its network.
    #[tokio::test]
    async fn with_the_gate_a_pods_usage_comes_from_the_runtime(
    ) -> Result<(), Box<dyn std::error::Error>> {
        use crate::domain::stats::{InterfaceStats, RuntimeUsage};
        use crate::domain::status::ApiPodStatus;

        let stats = Arc::new(FakeNodeStats::new());
        let runtime = Arc::new(FakeRuntime::new());
        let clock = Arc::new(FakeClock::new(1_700_000_000_000_000_000));
        let tree = pods_tree()?;
        let pod = bare_pod("u1");
        let pods = PodStatusStore::new();
        pods.set(
            &pod,
            ApiPodStatus {
                phase: "Running".into(),
                ..ApiPodStatus::default()
            },
        );
        let pod_cgroup = tree.pod(&pod).name;
        stats.set_cgroup(
            &pod_cgroup,
            CgroupStats {
                memory_usage_bytes: 3000,
                cpu_usage_nanos: Some(5),
                ..CgroupStats::default()
            },
        );
        stats.set_network(
            &pod_cgroup,
            vec![InterfaceStats {
                name: "eth0".into(),
                rx_bytes: 1,
                ..InterfaceStats::default()
            }],
        );
        runtime.set_pod_usage(
            "u1",
            RuntimeUsage {
                cpu_usage_nanos: Some(77),
                memory_working_set_bytes: Some(1200),
                memory_usage_bytes: Some(1500),
                ..RuntimeUsage::default()
            },
        );
        let provider = |source: UsageSource| {
            provider_on(&stats, &runtime, tree.clone(), &pods, &clock)
                .with_housekeeping_period(Duration::ZERO)
                .with_usage_source(source)
        };
        let asked = || {
            runtime
                .journal()
                .iter()
                .filter(|c| c.starts_with("ListPodSandboxStats"))
                .count()
        };
        let usage_of = |snapshot: &Arc<Snapshot>| -> Option<(u64, Option<u64>)> {
            let pod = snapshot.summary.pods.first()?;
            Some((
                pod.memory.as_ref()?.working_set_bytes?,
                pod.cpu.as_ref()?.usage_core_nano_seconds,
            ))
        };

        let from_cgroups = provider(UsageSource::Cgroups).refresh(true).await;
        assert_eq!(usage_of(&from_cgroups), Some((3000, Some(5))));
        assert_eq!(asked(), 0);

        let from_runtime = provider(UsageSource::Runtime);
        assert_eq!(
            usage_of(&from_runtime.refresh(true).await),
            Some((1200, Some(77)))
        );
        clock.advance(Duration::from_secs(2));
        assert_eq!(
            usage_of(&from_runtime.latest().await),
            Some((1200, Some(77)))
        );
        assert_eq!(asked(), 2, "the runtime is asked at every sample");
        Ok(())
    }
}
