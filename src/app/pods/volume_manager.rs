//! The volume manager (issue 13): before a pod's containers start and on every sync, it
//! fetches the ConfigMaps, Secrets and service-account tokens the pod references (each
//! object cached for `cache_ttl`, tokens until 80 % of their life or 24 h), asks the
//! domain what each volume holds (`plan_volumes`), and sets the volumes up: emptyDir
//! folders (tmpfs for `medium: Memory`), hostPath checks, and files written atomically
//! (secrets and projected volumes on tmpfs). An update of an object thus reaches the
//! running containers within the resync period plus `cache_ttl`.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::join_all;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::volumes::{self, off_runtime};
use super::volumes_in_use::VolumesInUse;
use crate::app::node::ConnectedNode;
use crate::app::plugins::CsiDrivers;
use crate::domain::csi::volume::{
    attachment, pod_device_links_dir, published_block_volume, published_volume, staging_path,
    Attachment, BlockPaths, CsiDriverData, CsiPublish, PublishedVolume, CSI_PLUGIN_DIR,
    VOL_DATA_FILE,
};
use crate::domain::csi::volume::{unique_volume_name, with_mount_group};
use crate::domain::csi::Driver;
use crate::domain::events::{
    volume_resize_failed, volume_resize_refused_read_only, volume_resized,
};
use crate::domain::kuberuntime::requests::RequestContext;
use crate::domain::node_status::model::ObjectReference;
use crate::domain::node_status::status::NodeEvent;
use crate::domain::pod::{log_ref, Pod};
use crate::domain::volumes::claim::{
    bound_volume_names, node_expansion, volume_secret_refs, ClaimData, NodeExpansion, NodeResize,
    PersistentVolumeData, PersistentVolumeSource,
};
use crate::domain::volumes::payload::WRITER_DIR_MODE;
use crate::domain::volumes::plan::{plan_volumes, FileKind, VolumeAction};
use crate::domain::volumes::services::{service_env, ServiceInfo};
use crate::domain::volumes::token::{requires_refresh, IssuedToken};
use crate::domain::volumes::{
    references, ConfigMapData, Fetched, PodFacts, PodInputs, PodObjects, RuntimeClassData,
    SecretData, TokenKey, VolumeKind,
};
use crate::ports::api::{ObjectsError, PodObjectsApi, TokenRequest};
use crate::ports::clock::Clock;
use crate::ports::csi::CsiPlugins;
use crate::ports::error::Chain;
use crate::ports::pod_files::{PodFiles, PodFilesError};

/// How long a fetched ConfigMap or Secret is used before it is read again (upstream's
/// TTL cache strategy; its default is a minute).
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(60);

/// How long a bound claim and its PersistentVolume are used before they are read again.
const BOUND_CLAIM_TTL: Duration = Duration::from_secs(10);

/// The Services list (one call for the whole cluster) is read at most this often; it
/// only matters when a container is created.
const SERVICES_MIN_TTL: Duration = Duration::from_secs(10);

type ObjectKey = (String, String);

struct Cached<T> {
    at: Duration,
    value: Fetched<T>,
}

#[derive(Default)]
struct Caches {
    config_maps: HashMap<ObjectKey, Cached<ConfigMapData>>,
    secrets: HashMap<ObjectKey, Cached<SecretData>>,
    tokens: HashMap<(String, TokenKey), IssuedToken>,
    services: Option<Cached<Vec<ServiceInfo>>>,
    runtime_classes: HashMap<String, Cached<RuntimeClassData>>,
    csi_drivers: HashMap<String, Cached<CsiDriverData>>,
    bound_claims: HashMap<ObjectKey, Cached<ClaimData>>,
    persistent_volumes: HashMap<String, Cached<PersistentVolumeData>>,
}

pub(crate) fn fetched<T>(answer: Result<Option<T>, ObjectsError>) -> Fetched<T> {
    match answer {
        Ok(Some(v)) => Fetched::Found(v),
        Ok(None) => Fetched::NotFound,
        Err(e) => Fetched::Failed(Chain(&e).to_string()),
    }
}

/// A volume that was not set up, with its message (upstream's `FailedMount`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedMount {
    pub volume: String,
    pub message: String,
}

pub struct VolumeManager {
    /// Set once the node agent has clients, replaced when they are rebuilt.
    api: Mutex<Option<Arc<dyn PodObjectsApi>>>,
    clock: Arc<dyn Clock>,
    cache_ttl: Duration,
    /// The node's IP and allocatable, for the downward API.
    facts: Mutex<PodFacts>,
    caches: Mutex<Caches>,
    /// Where the volumes' files are written and their subpaths bound.
    files: Arc<dyn PodFiles>,
    /// The registered Node, whose labels a PersistentVolume's node affinity matches.
    node: Mutex<Option<watch::Receiver<Option<ConnectedNode>>>>,
    /// The registered CSI drivers and their node services, for CSI volumes.
    csi: Option<(CsiDrivers, Arc<dyn CsiPlugins>)>,
    /// The attached volumes the pods use, for the Node's `volumesInUse`.
    in_use: Arc<VolumesInUse>,
    /// Each pod's CSI volumes, by pod uid, for their stats.
    published: Mutex<HashMap<String, Vec<MeasuredVolume>>>,
    /// Events of the pods' volume expansions not yet recorded, by pod uid.
    resize_events: Mutex<HashMap<String, Vec<ResizeEvent>>>,
    /// The pods' read-only claims already warned about as grown, by pod uid and volume:
    /// warned once, when first seen (a volume read before its growth is seen at a later
    /// sync).
    warned_read_only: Mutex<std::collections::HashSet<(String, String)>>,
}

/// An event of a volume expansion: about the pod, or about its claim too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeEvent {
    /// The claim the event is about; `None`: the pod.
    pub claim: Option<ObjectReference>,
    pub event: NodeEvent,
}

/// A pod's claim or CSI volume as it was planned: what measures it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasuredVolume {
    /// The pod's name for it.
    pub volume: String,
    /// The claim it comes from (`None` for an inline volume).
    pub claim: Option<String>,
    pub by: MeasuredBy,
}

/// Who measures a volume: its CSI driver (`NodeGetVolumeStats`), or `statfs` of a
/// local PersistentVolume's folder (upstream's local plugin's `MetricsStatFS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MeasuredBy {
    Driver {
        driver: String,
        volume_handle: String,
        target_path: std::path::PathBuf,
    },
    Statfs {
        path: std::path::PathBuf,
    },
}

/// A pod's CSI volume as its driver measured it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiVolumeSample {
    pub volume: String,
    pub claim: Option<String>,
    pub stats: crate::ports::csi::CsiVolumeStats,
}

/// How long a pod's sync waits for its claims to be bound (made by the provisioner, or
/// by the ephemeral volume controller, meanwhile) before it fails and is tried again
/// with its back-off: upstream's volume manager sees a binding within a tenth of a
/// second, and a pod on a new claim would otherwise wait out a 2 s back-off.
const CLAIM_WAIT: Duration = Duration::from_secs(5);

/// How long a pod's sync waits for its attached volumes (reported in use, then
/// attached) before it fails and is tried again; upstream waits up to 2 minutes.
const ATTACH_WAIT: Duration = Duration::from_secs(30);

impl VolumeManager {
    /// Without an API server (standalone): references to API objects fail as upstream's
    /// "no kubeClient defined".
    pub fn standalone(clock: Arc<dyn Clock>, files: Arc<dyn PodFiles>) -> VolumeManager {
        VolumeManager {
            api: Mutex::new(None),
            clock,
            cache_ttl: DEFAULT_CACHE_TTL,
            facts: Mutex::new(PodFacts::default()),
            caches: Mutex::new(Caches::default()),
            files,
            node: Mutex::new(None),
            csi: None,
            in_use: Arc::new(VolumesInUse::default()),
            published: Mutex::new(HashMap::new()),
            resize_events: Mutex::default(),
            warned_read_only: Mutex::default(),
        }
    }

    fn published(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<MeasuredVolume>>> {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What the drivers measure of pod `uid`'s CSI volumes (upstream's volume stats from
    /// `NodeGetVolumeStats`); a volume whose driver does not offer it, or whose call
    /// fails, is left out.
    pub async fn csi_volume_stats(&self, uid: &str) -> Vec<CsiVolumeSample> {
        let volumes = self.published().get(uid).cloned().unwrap_or_default();
        let mut samples = Vec::new();
        for volume in volumes {
            let MeasuredBy::Driver {
                driver,
                volume_handle,
                target_path,
            } = &volume.by
            else {
                continue;
            };
            let Ok((driver, plugins)) = self.driver(driver) else {
                continue;
            };
            let measured = plugins
                .node_volume_stats(Path::new(&driver.endpoint), volume_handle, target_path)
                .await;
            match measured {
                Ok(Some(stats)) => samples.push(CsiVolumeSample {
                    volume: volume.volume,
                    claim: volume.claim,
                    stats,
                }),
                Ok(None) => {}
                Err(e) => {
                    debug!(volume = %volume.volume, err = %Chain(&e), "CSI volume stats not read")
                }
            }
        }
        samples
    }

    /// Pod `uid`'s claims of local PersistentVolumes, with their folders, for `statfs`.
    pub fn local_claim_volumes(
        &self,
        uid: &str,
    ) -> Vec<(String, Option<String>, std::path::PathBuf)> {
        self.published()
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|v| match &v.by {
                MeasuredBy::Statfs { path } => {
                    Some((v.volume.clone(), v.claim.clone(), path.clone()))
                }
                MeasuredBy::Driver { .. } => None,
            })
            .collect()
    }

    /// The attached volumes the pods use, for the node status loop.
    pub fn in_use(&self) -> Arc<VolumesInUse> {
        Arc::clone(&self.in_use)
    }

    /// CSI volumes are published by the drivers registered in `drivers`.
    pub fn with_csi(mut self, drivers: CsiDrivers, plugins: Arc<dyn CsiPlugins>) -> Self {
        self.csi = Some((drivers, plugins));
        self
    }

    /// The registered Node (connected mode), for its name and labels.
    pub fn set_connected(&self, node: watch::Receiver<Option<ConnectedNode>>) {
        *self.node.lock().unwrap_or_else(PoisonError::into_inner) = Some(node);
    }

    /// The pod files port the volumes are set up through.
    pub fn files(&self) -> Arc<dyn PodFiles> {
        self.files.clone()
    }

    pub fn with_api(self, api: Arc<dyn PodObjectsApi>) -> VolumeManager {
        self.set_api(api);
        self
    }

    /// The API clients to read objects with (on connection and after a rebuild).
    pub fn set_api(&self, api: Arc<dyn PodObjectsApi>) {
        *self.api.lock().unwrap_or_else(PoisonError::into_inner) = Some(api);
    }

    pub fn with_cache_ttl(mut self, ttl: Duration) -> VolumeManager {
        self.cache_ttl = ttl;
        self
    }

    /// The node's IP and allocatable (pod IP is left empty: the sandbox gives it).
    pub fn with_node_facts(self, facts: PodFacts) -> VolumeManager {
        self.set_node_facts(facts);
        self
    }

    pub fn set_node_facts(&self, facts: PodFacts) {
        *self.facts.lock().unwrap_or_else(PoisonError::into_inner) = facts;
    }

    /// The node's IP (empty when unknown, as standalone).
    pub fn node_ip(&self) -> String {
        self.facts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .host_ip
            .clone()
    }

    fn caches(&self) -> std::sync::MutexGuard<'_, Caches> {
        self.caches.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn monotonic(&self) -> Duration {
        Duration::from_nanos(self.clock.monotonic_nanos())
    }

    /// The objects, tokens and facts `pod` needs, fetched or from the caches; the calls
    /// run concurrently (they are on the way to the pod's sandbox).
    pub async fn inputs(&self, pod: &Pod) -> PodInputs {
        let mut inputs = PodInputs {
            facts: self
                .facts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .for_pod(pod),
            ..PodInputs::default()
        };
        let nodes = self
            .node
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|node| {
                let connected = node.borrow();
                let connected = connected.as_ref()?;
                inputs.facts.node_name.clone_from(&connected.node_name);
                inputs
                    .facts
                    .node_labels
                    .clone_from(&connected.node.metadata.labels);
                let nodes = connected.clients.borrow().nodes.clone();
                Some(nodes)
            });
        let api = self
            .api
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(api) = api else {
            return inputs;
        };
        let api = api.as_ref();
        let refs = references(pod);
        let ns = pod.metadata.namespace.as_str();
        let now = self.monotonic();
        let config_maps = join_all(refs.config_maps.into_iter().map(|name| async move {
            let value = self.config_map(api, ns, &name, now).await;
            (name, value)
        }));
        let secrets = join_all(refs.secrets.into_iter().map(|name| async move {
            let value = self.secret(api, ns, &name, now).await;
            (name, value)
        }));
        let tokens = join_all(refs.tokens.into_iter().map(|key| async move {
            let value = self.token(api, pod, &key).await;
            (key, value)
        }));
        let runtime_class = async {
            match pod.spec.runtime_class_name.as_deref() {
                Some(name) if !name.is_empty() => {
                    Some((name.to_owned(), self.runtime_class(api, name, now).await))
                }
                _ => None,
            }
        };
        let csi_drivers = join_all(refs.csi_drivers.into_iter().map(|name| async move {
            let value = self
                .cached(
                    |c| &mut c.csi_drivers,
                    name.clone(),
                    now,
                    api.get_csi_driver(&name),
                )
                .await;
            (name, value)
        }));
        let (config_maps, secrets, tokens, services, runtime_class, claimed, csi_drivers) = tokio::join!(
            config_maps,
            secrets,
            tokens,
            self.services(api, now),
            runtime_class,
            self.claims_once_bound(api, ns, refs.claims, now),
            csi_drivers
        );
        inputs.objects = PodObjects {
            config_maps: config_maps.into_iter().collect(),
            secrets: secrets.into_iter().collect(),
            tokens: tokens.into_iter().collect(),
            runtime_classes: runtime_class.into_iter().collect(),
            ..claimed
        };
        inputs.objects.csi_drivers.extend(csi_drivers);
        // A PersistentVolume's node affinity is matched against the Node's labels as
        // they are now (a CSI driver's topology labels come after registration).
        // (Read again only when the registered Node's labels do not match.)
        let affinity = inputs.objects.persistent_volumes.values().any(|pv| {
            let Fetched::Found(pv) = pv else {
                return false;
            };
            pv.node_affinity.as_ref().is_some_and(|required| {
                !crate::domain::admission::node_selector_matches(
                    required,
                    &inputs.facts.node_name,
                    &inputs.facts.node_labels,
                )
            })
        });
        if let (true, Some(nodes)) = (affinity, nodes) {
            match nodes.get_node_from_cache(&inputs.facts.node_name).await {
                Ok(node) => inputs.facts.node_labels = node.metadata.labels,
                Err(e) => warn!(err = %Chain(&e), "the Node's labels not read"),
            }
        }
        inputs.service_env =
            service_env(&services, ns, pod.spec.enable_service_links.unwrap_or(true));
        self.attachments(api, pod, &mut inputs).await;
        inputs
    }

    /// The attachments of the pod's claims' CSI volumes that need one: marked in use
    /// for the node status loop, then waited for (up to `ATTACH_WAIT`) until the Node
    /// reports them in use and their VolumeAttachments are attached; what was seen goes
    /// to the domain, which decides.
    async fn attachments(&self, api: &dyn PodObjectsApi, pod: &Pod, inputs: &mut PodInputs) {
        let needed: BTreeSet<Attachment> = inputs
            .objects
            .persistent_volumes
            .values()
            .filter_map(|pv| match pv {
                Fetched::Found(PersistentVolumeData {
                    source: PersistentVolumeSource::Csi(source),
                    ..
                }) => attachment(source, &inputs.facts.node_name, &inputs.objects),
                _ => None,
            })
            .collect();
        if needed.is_empty() {
            return;
        }
        let names: BTreeSet<String> = needed.iter().map(|a| a.unique_name.clone()).collect();
        self.in_use.add(&pod.metadata.uid, &names);
        let deadline = tokio::time::Instant::now() + ATTACH_WAIT;
        let reported =
            tokio::time::timeout_at(deadline, self.in_use.wait_reported(&names, ATTACH_WAIT))
                .await
                .unwrap_or_else(|_| self.in_use.reported());
        inputs.facts.volumes_reported_in_use = reported;
        let mut pause = Duration::from_millis(100);
        loop {
            let seen = join_all(needed.iter().map(|a| async move {
                (
                    a.id.clone(),
                    fetched(api.get_volume_attachment(&a.id).await),
                )
            }))
            .await;
            // A read refused is waited out too: the Node authorizer forbids a node the
            // VolumeAttachment until the controller has made it for the node.
            let settled = seen.iter().all(|(_, v)| match v {
                Fetched::Found(a) => a.attached || a.attach_error.is_some() || a.being_deleted,
                Fetched::NotFound | Fetched::Failed(_) => false,
            });
            inputs.objects.volume_attachments = seen.into_iter().collect();
            if settled || tokio::time::Instant::now() + pause > deadline {
                return;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// A cached read: the value read within `cache_ttl` of `now`, else `fetch`'s. A
    /// failed call is not cached: the next sync tries again.
    async fn cached<K, T>(
        &self,
        pick: fn(&mut Caches) -> &mut HashMap<K, Cached<T>>,
        key: K,
        now: Duration,
        fetch: impl std::future::Future<Output = Result<Option<T>, ObjectsError>>,
    ) -> Fetched<T>
    where
        K: Eq + std::hash::Hash,
        T: Clone,
    {
        let keep = |v: &Fetched<T>| !matches!(v, Fetched::Failed(_));
        self.cached_for(pick, key, now, self.cache_ttl, keep, fetch)
            .await
    }

    /// A read kept `BOUND_CLAIM_TTL` when `keep` says so (a bound claim, a volume),
    /// else made every time.
    async fn kept<K, T>(
        &self,
        pick: fn(&mut Caches) -> &mut HashMap<K, Cached<T>>,
        key: K,
        now: Duration,
        keep: impl Fn(&T) -> bool,
        fetch: impl std::future::Future<Output = Result<Option<T>, ObjectsError>>,
    ) -> Fetched<T>
    where
        K: Eq + std::hash::Hash,
        T: Clone,
    {
        let keep = |v: &Fetched<T>| matches!(v, Fetched::Found(found) if keep(found));
        self.cached_for(pick, key, now, BOUND_CLAIM_TTL, keep, fetch)
            .await
    }

    /// The value read within `ttl` of `now`, else `fetch`'s, remembered when `keep`
    /// says so.
    async fn cached_for<K, T>(
        &self,
        pick: fn(&mut Caches) -> &mut HashMap<K, Cached<T>>,
        key: K,
        now: Duration,
        ttl: Duration,
        keep: impl Fn(&Fetched<T>) -> bool,
        fetch: impl std::future::Future<Output = Result<Option<T>, ObjectsError>>,
    ) -> Fetched<T>
    where
        K: Eq + std::hash::Hash,
        T: Clone,
    {
        let hit = pick(&mut self.caches())
            .get(&key)
            .filter(|c| now.saturating_sub(c.at) < ttl)
            .map(|c| c.value.clone());
        if let Some(v) = hit {
            return v;
        }
        let v = fetched(fetch.await);
        if keep(&v) {
            pick(&mut self.caches()).insert(
                key,
                Cached {
                    at: now,
                    value: v.clone(),
                },
            );
        }
        v
    }

    async fn config_map(
        &self,
        api: &dyn PodObjectsApi,
        ns: &str,
        name: &str,
        now: Duration,
    ) -> Fetched<ConfigMapData> {
        let key = (ns.to_owned(), name.to_owned());
        self.cached(
            |c| &mut c.config_maps,
            key,
            now,
            api.get_config_map(ns, name),
        )
        .await
    }

    /// The RuntimeClass `name`, cached as ConfigMaps are (upstream reads them from an
    /// informer: a class made or changed is seen within the cache's time to live).
    async fn runtime_class(
        &self,
        api: &dyn PodObjectsApi,
        name: &str,
        now: Duration,
    ) -> Fetched<RuntimeClassData> {
        self.cached(
            |c| &mut c.runtime_classes,
            name.to_owned(),
            now,
            api.get_runtime_class(name),
        )
        .await
    }

    async fn secret(
        &self,
        api: &dyn PodObjectsApi,
        ns: &str,
        name: &str,
        now: Duration,
    ) -> Fetched<SecretData> {
        let key = (ns.to_owned(), name.to_owned());
        self.cached(|c| &mut c.secrets, key, now, api.get_secret(ns, name))
            .await
    }

    /// The pod's claims as [`Self::claims`] reads them, read again every 0.1 s (upstream's
    /// desired-state populator reads a pod's unbound claims each 100 ms loop) while one
    /// is missing or not bound yet, up to `CLAIM_WAIT`.
    async fn claims_once_bound(
        &self,
        api: &dyn PodObjectsApi,
        ns: &str,
        names: std::collections::BTreeSet<String>,
        now: Duration,
    ) -> PodObjects {
        let deadline = tokio::time::Instant::now() + CLAIM_WAIT;
        let pause = Duration::from_millis(100);
        loop {
            let objects = self.claims(api, ns, names.clone(), now).await;
            let unbound = objects.claims.values().any(|c| match c {
                Fetched::NotFound => true,
                Fetched::Found(c) => c.phase != "Bound" && !c.being_deleted,
                Fetched::Failed(_) => false,
            });
            if !unbound || tokio::time::Instant::now() + pause > deadline {
                return objects;
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// The pod's claims, then the PersistentVolumes they are bound to, read on every
    /// sync as upstream's volume manager reprocesses a pod (a claim bound meanwhile is
    /// seen at once).
    async fn claims(
        &self,
        api: &dyn PodObjectsApi,
        ns: &str,
        names: std::collections::BTreeSet<String>,
        now: Duration,
    ) -> PodObjects {
        let mut objects = PodObjects::default();
        if names.is_empty() {
            return objects;
        }
        // A bound claim and its volume are kept a few seconds (a pod's start reads them
        // twice); a claim not bound yet is read every time, so its binding is seen at
        // once.
        objects.claims = join_all(names.into_iter().map(|name| async move {
            let value = self
                .kept(
                    |c| &mut c.bound_claims,
                    (ns.to_owned(), name.clone()),
                    now,
                    |c: &ClaimData| c.phase == "Bound" && !c.being_deleted,
                    api.get_persistent_volume_claim(ns, &name),
                )
                .await;
            (name, value)
        }))
        .await
        .into_iter()
        .collect();
        objects.persistent_volumes = join_all(bound_volume_names(&objects).into_iter().map(
            |name| async move {
                let value = self
                    .kept(
                        |c| &mut c.persistent_volumes,
                        name.clone(),
                        now,
                        |_: &PersistentVolumeData| true,
                        api.get_persistent_volume(&name),
                    )
                    .await;
                (name, value)
            },
        ))
        .await
        .into_iter()
        .collect();
        let drivers: std::collections::BTreeSet<String> = objects
            .persistent_volumes
            .values()
            .filter_map(|pv| match pv {
                Fetched::Found(pv) => match &pv.source {
                    PersistentVolumeSource::Csi(c) => Some(c.driver.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let secrets = volume_secret_refs(&objects);
        let (drivers, secrets) = tokio::join!(
            join_all(drivers.into_iter().map(|name| async move {
                let value = fetched(api.get_csi_driver(&name).await);
                (name, value)
            })),
            join_all(secrets.into_iter().map(|reference| async move {
                let value = self
                    .secret(api, &reference.namespace, &reference.name, now)
                    .await;
                (reference, value)
            }))
        );
        objects.csi_drivers = drivers.into_iter().collect();
        objects.volume_secrets = secrets.into_iter().collect();
        objects
    }

    async fn token(&self, api: &dyn PodObjectsApi, pod: &Pod, key: &TokenKey) -> Fetched<String> {
        let now_unix = self.clock.now_unix_nanos() / 1_000_000_000;
        let cache_key = (pod.metadata.uid.clone(), key.clone());
        let cached = self
            .caches()
            .tokens
            .get(&cache_key)
            .filter(|t| !requires_refresh(t, now_unix))
            .map(|t| t.token.clone());
        if let Some(token) = cached {
            return Fetched::Found(token);
        }
        let service_account = if pod.spec.service_account_name.is_empty() {
            "default".to_string()
        } else {
            pod.spec.service_account_name.clone()
        };
        let request = TokenRequest {
            namespace: pod.metadata.namespace.clone(),
            service_account,
            audiences: if key.audience.is_empty() {
                Vec::new()
            } else {
                vec![key.audience.clone()]
            },
            expiration_seconds: key.expiration_seconds,
            pod_name: pod.metadata.name.clone(),
            pod_uid: pod.metadata.uid.clone(),
        };
        match api.request_token(&request).await {
            Ok(mut issued) => {
                issued.issued_unix = now_unix;
                debug!(pod = %log_ref(pod), expires = issued.expires_unix, "service account token issued");
                let token = issued.token.clone();
                self.caches().tokens.insert(cache_key, issued);
                Fetched::Found(token)
            }
            Err(e) => Fetched::Failed(Chain(&e).to_string()),
        }
    }

    /// The cluster's Services (cached as the objects are); a failed list gives the last
    /// one read, or none, as upstream's lister would.
    async fn services(&self, api: &dyn PodObjectsApi, now: Duration) -> Vec<ServiceInfo> {
        let ttl = self.cache_ttl.max(SERVICES_MIN_TTL);
        let fresh = self
            .caches()
            .services
            .as_ref()
            .and_then(|c| (now.saturating_sub(c.at) < ttl).then(|| c.value.clone()));
        if let Some(Fetched::Found(list)) = fresh {
            return list;
        }
        match api.list_services().await {
            Ok(list) => {
                self.caches().services = Some(Cached {
                    at: now,
                    value: Fetched::Found(list.clone()),
                });
                list
            }
            Err(e) => {
                warn!(error = %Chain(&e), "failed to list services when setting up env vars");
                // The last list serves one more period: a failure is retried once per
                // period, not at every pod's sync (an API server outage saw a call a pod).
                match &mut self.caches().services {
                    Some(Cached {
                        at,
                        value: Fetched::Found(list),
                    }) => {
                        *at = now;
                        list.clone()
                    }
                    _ => Vec::new(),
                }
            }
        }
    }

    /// The soonest token refresh of `pod`, for the next sync.
    pub fn next_refresh(&self, pod_uid: &str) -> Option<Duration> {
        let now_unix = self.clock.now_unix_nanos() / 1_000_000_000;
        self.caches()
            .tokens
            .iter()
            .filter(|((uid, _), _)| uid == pod_uid)
            .map(|(_, t)| crate::domain::volumes::token::seconds_until_refresh(t, now_unix))
            .min()
            .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0).max(1)))
    }

    /// Sets up every volume of `pod`; the volumes that failed, with upstream's message.
    pub async fn set_up(
        &self,
        requests: &RequestContext,
        pod: &Pod,
        inputs: &PodInputs,
    ) -> Vec<FailedMount> {
        self.set_up_volumes(requests, pod, inputs, true).await
    }

    /// With `all` false (a running pod's resync), only the files of configMap, secret,
    /// downwardAPI and projected volumes are refreshed: emptyDirs and hostPaths were set
    /// up with the sandbox, and an `fsGroup` walk on every sync would be costly.
    pub async fn set_up_volumes(
        &self,
        requests: &RequestContext,
        pod: &Pod,
        inputs: &PodInputs,
        all: bool,
    ) -> Vec<FailedMount> {
        if pod.spec.volumes.is_empty() {
            return Vec::new();
        }
        let mut plans = plan_volumes(requests, pod, &inputs.objects, &inputs.facts);
        self.remember_measured(pod, &plans);
        // Claims' CSI volumes a resizer grew: expanded on the node once published.
        let expansions: Vec<(String, String, CsiPublish, NodeResize)> = plans
            .iter()
            .filter_map(|plan| {
                let Ok(VolumeAction::Csi(publish)) = &plan.action else {
                    return None;
                };
                let volume = pod.spec.volumes.iter().find(|v| v.name == plan.name)?;
                let expansion = node_expansion(pod, volume, &inputs.objects)?;
                Some((
                    plan.name.clone(),
                    plan.spec_name.clone(),
                    (**publish).clone(),
                    expansion,
                ))
            })
            .collect();
        if !all {
            // Folders and paths (claims' too) were set up with the sandbox.
            plans.retain(|p| {
                pod.spec.volumes.iter().any(|v| {
                    v.name == p.name
                        && !matches!(
                            VolumeKind::of(v),
                            VolumeKind::EmptyDir
                                | VolumeKind::HostPath
                                | VolumeKind::PersistentVolumeClaim
                                | VolumeKind::Csi
                        )
                })
            });
        }
        // CSI volumes are the drivers' to publish, over gRPC, after the others.
        let (publishes, plans): (Vec<_>, Vec<_>) = plans
            .into_iter()
            .partition(|p| matches!(p.action, Ok(VolumeAction::Csi(_))));
        let stamp = timestamp(self.clock.now_unix_nanos());
        let files = self.files.clone();
        let result = tokio::task::spawn_blocking(move || {
            let mut failed = Vec::new();
            for plan in plans {
                let outcome = match plan.action {
                    Err(e) => Err(e.to_string()),
                    Ok(action) => carry_out(files.as_ref(), &action, &stamp).map_err(|error| {
                        format!(
                            "MountVolume.SetUp failed for volume {:?} : {}",
                            plan.spec_name,
                            Chain(&error)
                        )
                    }),
                };
                if let Err(message) = outcome {
                    failed.push(FailedMount {
                        volume: plan.name,
                        message,
                    });
                }
            }
            failed
        })
        .await;
        let result = match result {
            Ok(mut failed) => {
                for plan in publishes {
                    let Ok(VolumeAction::Csi(publish)) = plan.action else {
                        continue;
                    };
                    if let Err(failure) = self.publish(pod, &plan.spec_name, &publish).await {
                        let (operation, message) = match failure {
                            PublishFailure::MountDevice(m) => ("MountDevice", m),
                            PublishFailure::SetUp(m) => ("SetUp", m),
                        };
                        failed.push(FailedMount {
                            message: format!(
                                "MountVolume.{operation} failed for volume {:?} : {message}",
                                plan.spec_name
                            ),
                            volume: plan.name,
                        });
                    } else {
                        info!(
                            pod = %log_ref(pod),
                            "{}",
                            volume_message("MountVolume.SetUp succeeded", pod, &plan.spec_name, &publish, "")
                        );
                    }
                }
                Ok(failed)
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(failed) => {
                for f in &failed {
                    warn!(volume = %f.volume, message = %f.message, "FailedMount");
                }
                for (name, spec_name, publish, resize) in expansions {
                    if failed.iter().any(|f| f.volume == name) {
                        continue;
                    }
                    let expansion = match resize {
                        NodeResize::Grow(expansion) => expansion,
                        // Warned once, as upstream's expansion during the mount; not at
                        // each resync.
                        NodeResize::ReadOnly { claim } => {
                            let first = self
                                .warned_read_only
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .insert((pod.metadata.uid.clone(), name.clone()));
                            if first {
                                let event = volume_resize_refused_read_only(&spec_name);
                                warn!(volume = %spec_name, claim = %claim.name, "{}", event.message);
                                self.resize_events()
                                    .entry(pod.metadata.uid.clone())
                                    .or_default()
                                    .extend([
                                        ResizeEvent {
                                            claim: None,
                                            event: event.clone(),
                                        },
                                        ResizeEvent {
                                            claim: Some(claim),
                                            event,
                                        },
                                    ]);
                            }
                            continue;
                        }
                    };
                    // Upstream records a success on the pod and the claim, a failure
                    // on the pod alone.
                    let events = match self.expand(&publish, &expansion).await {
                        Ok(()) => {
                            info!(volume = %spec_name, size = %expansion.new_capacity, "MountVolume.NodeExpandVolume succeeded");
                            let event = volume_resized(&spec_name, &pod.spec.node_name);
                            vec![
                                ResizeEvent {
                                    claim: None,
                                    event: event.clone(),
                                },
                                ResizeEvent {
                                    claim: Some(expansion.claim),
                                    event,
                                },
                            ]
                        }
                        Err(message) => {
                            warn!(volume = %spec_name, %message, "NodeExpandVolume.NodeExpandVolume failed");
                            vec![ResizeEvent {
                                claim: None,
                                event: volume_resize_failed(&spec_name, &message),
                            }]
                        }
                    };
                    self.resize_events()
                        .entry(pod.metadata.uid.clone())
                        .or_default()
                        .extend(events);
                }
                failed
            }
            Err(e) => vec![FailedMount {
                volume: String::new(),
                message: format!("volume setup task failed: {e}"),
            }],
        }
    }

    /// The pod's CSI and local claim volumes as planned, for their stats (a running
    /// pod's resync, after a restart too, records them again).
    fn remember_measured(&self, pod: &Pod, plans: &[crate::domain::volumes::plan::VolumePlan]) {
        let volumes: Vec<MeasuredVolume> = plans
            .iter()
            .filter_map(|plan| {
                let by = match &plan.action {
                    // A Block volume is measured at its global map, as upstream's.
                    Ok(VolumeAction::Csi(publish)) => MeasuredBy::Driver {
                        driver: publish.driver.clone(),
                        volume_handle: publish.volume_handle.clone(),
                        target_path: publish.stats_path().to_path_buf(),
                    },
                    Ok(VolumeAction::Local { path, .. }) => {
                        MeasuredBy::Statfs { path: path.clone() }
                    }
                    _ => return None,
                };
                let claim = pod
                    .spec
                    .volumes
                    .iter()
                    .find(|v| v.name == plan.name)
                    .and_then(|v| crate::domain::volumes::claim::claim_name_of(pod, v));
                Some(MeasuredVolume {
                    volume: plan.name.clone(),
                    claim,
                    by,
                })
            })
            .collect();
        if !volumes.is_empty() {
            self.published().insert(pod.metadata.uid.clone(), volumes);
        }
    }

    fn resize_events(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<ResizeEvent>>> {
        self.resize_events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The events of the pod's volume expansions since the last call, for the sync to
    /// record.
    pub fn take_resize_events(&self, uid: &str) -> Vec<ResizeEvent> {
        self.resize_events().remove(uid).unwrap_or_default()
    }

    /// Grows a published claim's volume on the node through its driver
    /// (`NodeExpandVolume`), then gives the claim's status the new size, as upstream's
    /// `legacyCallNodeExpandOnPlugin`; the message of the step that failed.
    async fn expand(&self, publish: &CsiPublish, expansion: &NodeExpansion) -> Result<(), String> {
        let (driver, plugins) = self.driver(&publish.driver)?;
        publish.expand_secrets.as_ref().map_err(Clone::clone)?;
        let expanded = plugins
            .node_expand(
                Path::new(&driver.endpoint),
                publish,
                expansion.new_size_bytes,
            )
            .await
            .map_err(|e| {
                format!(
                    "Expander.NodeExpand failed to expand the volume : {}",
                    Chain(&e)
                )
            })?;
        if !expanded {
            return Err(format!(
                "Expander.NodeExpand found CSI plugin kubernetes.io/csi/{} to not support node expansion",
                publish.driver
            ));
        }
        let api = self
            .api
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                "mountVolume.NodeExpandVolume get PVC failed : no API server".to_owned()
            })?;
        let (ns, name) = (&expansion.claim.namespace, &expansion.claim.name);
        api.mark_claim_resized(ns, name, &expansion.new_capacity)
            .await
            .map_err(|e| {
                format!(
                    "mountVolume.NodeExpandVolume update PVC status failed : {}",
                    Chain(&e)
                )
            })?;
        // The claim kept with its old size would ask for the expansion again.
        self.caches()
            .bound_claims
            .remove(&(ns.clone(), name.clone()));
        Ok(())
    }

    fn driver(&self, name: &str) -> Result<(Driver, Arc<dyn CsiPlugins>), String> {
        self.csi
            .as_ref()
            .and_then(|(drivers, plugins)| Some((drivers.get(name)?, Arc::clone(plugins))))
            .ok_or_else(|| {
                format!("kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name {name} not found in the list of registered CSI drivers")
            })
    }

    /// Publishes a CSI volume through its driver: the volume's folder and its
    /// `vol_data.json` first (the teardown reads it), then `NodePublishVolume`, then the
    /// `fsGroup` walk when the driver's policy leaves it to the kubelet.
    async fn publish(
        &self,
        pod: &Pod,
        volume: &str,
        publish: &CsiPublish,
    ) -> Result<(), PublishFailure> {
        let (driver, plugins) = self.driver(&publish.driver)?;
        let endpoint = Path::new(&driver.endpoint);
        let capabilities = plugins
            .node_capabilities(endpoint)
            .await
            .map_err(|e| Chain(&e).to_string())?;
        let publish = &with_mount_group(publish.clone(), capabilities);
        let vol_data = serde_json::to_vec(&publish.vol_data).map_err(|e| e.to_string())?;
        let dir = publish.volume_dir.clone();
        off_runtime(&self.files, move |f| {
            f.create_dir_all(&dir, Some(0o750))?;
            f.write_file(&dir.join(VOL_DATA_FILE), &vol_data)
        })
        .await
        .map_err(|e| {
            format!(
                "kubernetes.io/csi: mounter.SetUpAt failed to save volume info data: {}",
                Chain(&e)
            )
        })?;
        let mut staged = None;
        if let Some(stage) = &publish.stage {
            if capabilities.stage_unstage {
                stage
                    .secrets
                    .as_ref()
                    .map_err(|m| PublishFailure::MountDevice(m.clone()))?;
                let staging = stage.staging_path.clone();
                let data_file = stage.vol_data_file.clone();
                let data = serde_json::to_vec(&stage.vol_data).map_err(|e| e.to_string())?;
                off_runtime(&self.files, move |f| {
                    f.create_dir_all(&staging, Some(0o750))?;
                    if let Some(dir) = data_file.parent() {
                        f.create_dir_all(dir, Some(0o750))?;
                    }
                    f.write_file(&data_file, &data)
                })
                .await
                .map_err(|e| PublishFailure::MountDevice(format!("kubernetes.io/csi: attacher.MountDevice failed to save volume info data: {}", Chain(&e))))?;
                plugins
                    .node_stage(endpoint, publish, &stage.staging_path)
                    .await
                    .map_err(|e| PublishFailure::MountDevice(Chain(&e).to_string()))?;
                info!(
                    pod = %log_ref(pod),
                    "{}",
                    volume_message(
                        "MountVolume.MountDevice succeeded",
                        pod,
                        volume,
                        publish,
                        &format!("device mount path {:?}", stage.staging_path.display().to_string()),
                    )
                );
                staged = Some(stage.staging_path.as_path());
            }
        }
        publish.secrets.as_ref().map_err(Clone::clone)?;
        if publish.block.is_some() {
            // The driver makes the device file; its folder is the kubelet's.
            if let Some(dir) = publish.target_path.parent().map(Path::to_path_buf) {
                off_runtime(&self.files, move |f| f.create_dir_all(&dir, Some(0o750)))
                    .await
                    .map_err(|e| {
                        format!(
                            "blockMapper.publishVolumeForBlock failed to create dir: {}",
                            Chain(&e)
                        )
                    })?;
            }
        }
        plugins
            .node_publish(endpoint, publish, staged)
            .await
            .map_err(|e| Chain(&e).to_string())?;
        if let Some(map) = publish.block.clone() {
            // The containers' devices are given from the pod's link, as upstream's; the
            // global map holds the device while the pod uses it.
            let device = publish.target_path.clone();
            off_runtime(&self.files, move |f| {
                if let Some(dir) = map.pod_link.parent() {
                    f.create_dir_all(dir, Some(0o750))?;
                }
                f.symlink(&device, &map.pod_link)?;
                f.map_block_device(&device, &map.global_map)
            })
            .await
            .map_err(|e| {
                format!(
                    "blkUtil.MapDevice failed. devicePath: {}: {}",
                    publish.target_path.display(),
                    Chain(&e)
                )
            })?;
        }
        if let Some(owner) = publish.owner.clone() {
            off_runtime(&self.files, move |f| f.give_to_fs_group(&owner))
                .await
                .map_err(|e| Chain(&e).to_string())?;
        }
        Ok(())
    }

    /// `NodeUnpublishVolume` of a published volume through its registered driver.
    async fn unpublish(&self, volume: &PublishedVolume) -> Result<(), String> {
        let (driver, plugins) = self.driver(&volume.driver)?;
        plugins
            .node_unpublish(
                Path::new(&driver.endpoint),
                &volume.volume_handle,
                &volume.target_path,
            )
            .await
            .map_err(|e| Chain(&e).to_string())
    }

    /// `NodeUnstageVolume` of a volume staged at `staging` through its registered driver.
    async fn unstage(&self, volume: &PublishedVolume, staging: &Path) -> Result<(), String> {
        let (driver, plugins) = self.driver(&volume.driver)?;
        plugins
            .node_unstage(Path::new(&driver.endpoint), &volume.volume_handle, staging)
            .await
            .map_err(|e| Chain(&e).to_string())
    }

    /// Unpublishes the CSI volumes found under the pod folder `pod_dir` (their
    /// `vol_data.json`), each through its driver; whether all are. A volume whose driver
    /// is not registered, or whose call fails, stays mounted (the folder must stay).
    pub async fn tear_down_csi(&self, pod_dir: &Path) -> bool {
        let root = pod_dir.join("volumes").join(CSI_PLUGIN_DIR);
        let listed = {
            let root = root.clone();
            off_runtime(&self.files, move |f| f.list_dir(&root)).await
        };
        let names = match listed {
            Ok(names) => names,
            Err(e) => {
                warn!(dir = %root.display(), err = %Chain(&e), "CSI volumes not listed");
                return false;
            }
        };
        let mut all = true;
        for name in names {
            let dir = root.join(&name);
            let data_path = dir.join(VOL_DATA_FILE);
            let read = {
                let data_path = data_path.clone();
                off_runtime(&self.files, move |f| f.read(&data_path)).await
            };
            let Some(volume) = read
                .ok()
                .flatten()
                .and_then(|data| published_volume(&dir, &data))
            else {
                // Nothing published there (or already unpublished).
                continue;
            };
            let outcome = self.unpublish(&volume).await;
            match outcome {
                Ok(()) => {
                    let removed =
                        off_runtime(&self.files, move |f| f.remove_file(&data_path)).await;
                    if let Err(e) = removed {
                        warn!(volume = %name, err = %Chain(&e), "vol_data.json not removed");
                    }
                    if !self.unstage_if_unused(pod_dir, &volume).await {
                        all = false;
                    }
                }
                Err(message) => {
                    warn!(volume = %name, err = %message, "UnmountVolume.TearDown failed");
                    all = false;
                }
            }
        }
        if !self.tear_down_blocks(pod_dir).await {
            all = false;
        }
        if all {
            // Unstaged: the attach-detach controller may detach them now.
            if let Some(uid) = pod_dir.file_name().and_then(|n| n.to_str()) {
                self.in_use.forget(uid);
                self.published().remove(uid);
            }
        }
        all
    }

    /// Unpublishes the pod's Block volumes (its links under `volumeDevices`), each
    /// through its driver, and unstages each that no other pod has published (upstream's
    /// UnmapPodDevice, then UnmapDevice); whether all are.
    async fn tear_down_blocks(&self, pod_dir: &Path) -> bool {
        let (Some(root), Some(uid)) = (
            pod_dir.parent().and_then(Path::parent),
            pod_dir.file_name().and_then(|n| n.to_str()),
        ) else {
            return true;
        };
        let links = pod_device_links_dir(root, uid);
        let listed = {
            let links = links.clone();
            off_runtime(&self.files, move |f| f.list_dir(&links)).await
        };
        let names = match listed {
            Ok(names) => names,
            Err(e) => {
                warn!(dir = %links.display(), err = %Chain(&e), "block volumes not listed");
                return false;
            }
        };
        let mut all = true;
        for name in names {
            let paths = BlockPaths::of(root, &name);
            let data_file = paths.data_dir.join(VOL_DATA_FILE);
            let read = off_runtime(&self.files, move |f| f.read(&data_file)).await;
            let link = links.join(&name);
            let volume = read
                .ok()
                .flatten()
                .and_then(|data| published_block_volume(root, &name, uid, &data));
            // The global map first, as upstream's `UnmapBlockVolume`: the device is let go
            // before the driver unpublishes it.
            let map = paths.global_map_dir.join(uid);
            let unmapped = off_runtime(&self.files, move |f| f.unmap_block_device(&map)).await;
            if let Err(e) = unmapped {
                warn!(volume = %name, err = %Chain(&e), "UnmapVolume.UnmapBlockVolume failed");
                all = false;
                continue;
            }
            let outcome = match &volume {
                // Nothing says what it was: nothing to unpublish.
                None => Ok(()),
                Some(volume) => self.unpublish(volume).await,
            };
            if let Err(message) = outcome {
                warn!(volume = %name, err = %message, "UnmapVolume.UnmapPodDevice failed");
                all = false;
                continue;
            }
            let target = volume.as_ref().map(|v| v.target_path.clone());
            let removed = off_runtime(&self.files, move |f| {
                // The driver removes its file; one it left is the kubelet's to remove.
                if let Some(target) = target {
                    f.remove_file(&target)?;
                }
                f.remove_file(&link)
            })
            .await;
            if let Err(e) = removed {
                warn!(volume = %name, err = %Chain(&e), "the block volume's link not removed");
                all = false;
                continue;
            }
            if let Some(volume) = volume {
                if !self.unstage_block_if_unused(root, &name, &volume).await {
                    all = false;
                }
            }
        }
        all
    }

    /// Unstages the Block volume `name` once no pod's folder links it any more, then
    /// removes its folders; whether nothing is left to do.
    async fn unstage_block_if_unused(
        &self,
        root: &Path,
        name: &str,
        volume: &PublishedVolume,
    ) -> bool {
        let linked_elsewhere = off_runtime(&self.files, {
            let (root, name) = (root.to_path_buf(), name.to_owned());
            move |f| {
                for uid in f.list_dir(&root.join("pods"))? {
                    if f.list_dir(&pod_device_links_dir(&root, &uid))?
                        .contains(&name)
                    {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        })
        .await;
        // Unknown: keep it staged.
        if linked_elsewhere.unwrap_or(true) {
            return true;
        }
        let paths = BlockPaths::of(root, name);
        let outcome = self.unstage(volume, &paths.staging).await;
        if let Err(message) = outcome {
            warn!(volume = %volume.volume_handle, err = %message, "UnmapDevice failed");
            return false;
        }
        let folders = paths.after_unstage();
        let removed = off_runtime(&self.files, move |f| {
            folders.iter().try_for_each(|dir| f.remove_dir_all(dir))
        })
        .await;
        if let Err(e) = removed {
            warn!(volume = %volume.volume_handle, err = %Chain(&e), "the block volume's folders not removed");
        }
        true
    }

    /// Unstages a PersistentVolume staged on this node once no pod's folder has it
    /// published any more (upstream's UnmountDevice); whether nothing is left to do.
    async fn unstage_if_unused(&self, pod_dir: &Path, volume: &PublishedVolume) -> bool {
        // `<root>/pods/<uid>`: the root is two folders up.
        let Some(root) = pod_dir.parent().and_then(Path::parent) else {
            return true;
        };
        let staging = staging_path(root, &volume.driver, &volume.volume_handle);
        let Some(stage_dir) = staging.parent().map(Path::to_path_buf) else {
            return true;
        };
        let stage_data = stage_dir.join(VOL_DATA_FILE);
        let staged = {
            let stage_data = stage_data.clone();
            off_runtime(&self.files, move |f| f.read(&stage_data)).await
        };
        if !matches!(staged, Ok(Some(_))) {
            return true; // not staged (an inline volume, or a driver that does not stage)
        }
        if self.published_elsewhere(root, volume).await {
            return true;
        }
        let outcome = self.unstage(volume, &staging).await;
        match outcome {
            Ok(()) => {
                if let Err(e) = off_runtime(&self.files, move |f| f.remove_file(&stage_data)).await
                {
                    warn!(err = %Chain(&e), "the staged volume's vol_data.json not removed");
                }
                true
            }
            Err(message) => {
                warn!(volume = %volume.volume_handle, err = %message, "UnmountDevice failed");
                false
            }
        }
    }

    /// Whether another pod's folder still has `volume` published.
    async fn published_elsewhere(&self, root: &Path, volume: &PublishedVolume) -> bool {
        let pods = root.join("pods");
        let found = off_runtime(&self.files, {
            let volume = volume.clone();
            move |f| {
                for uid in f.list_dir(&pods)? {
                    let csi = pods.join(&uid).join("volumes").join(CSI_PLUGIN_DIR);
                    for name in f.list_dir(&csi)? {
                        let dir = csi.join(&name);
                        let Some(data) = f.read(&dir.join(VOL_DATA_FILE))? else {
                            continue;
                        };
                        if published_volume(&dir, &data).is_some_and(|v| {
                            v.driver == volume.driver && v.volume_handle == volume.volume_handle
                        }) {
                            return Ok(true);
                        }
                    }
                }
                Ok(false)
            }
        })
        .await;
        // Unknown: keep it staged.
        found.unwrap_or(true)
    }

    /// Forgets a deleted pod's tokens and warnings.
    pub fn forget(&self, pod_uid: &str) {
        self.caches().tokens.retain(|(uid, _), _| uid != pod_uid);
        self.warned_read_only
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(uid, _)| uid != pod_uid);
    }
}

/// Why a volume's set-up failed.
#[derive(Debug, thiserror::Error)]
enum SetUpError {
    #[error(transparent)]
    Files(#[from] PodFilesError),
    #[error(transparent)]
    HostPath(#[from] volumes::HostPathError),
    #[error("local volume path {0:?} does not exist or is not a directory")]
    LocalPath(std::path::PathBuf),
    /// CSI volumes are published over gRPC, never here.
    #[error("the CSI volume is its driver's to publish")]
    NotHere,
}

fn carry_out(files: &dyn PodFiles, action: &VolumeAction, stamp: &str) -> Result<(), SetUpError> {
    match action {
        VolumeAction::EmptyDir {
            setup,
            tmpfs_size_bytes,
        } => {
            if let Some(size) = tmpfs_size_bytes {
                files.mount_tmpfs(&setup.path, Some(*size), setup.mode)?;
            }
            Ok(files.set_up_empty_dir(setup)?)
        }
        VolumeAction::HostPath { path, kind } => {
            Ok(volumes::prepare_host_path(files, path, *kind)?)
        }
        VolumeAction::Csi(_) => Err(SetUpError::NotHere),
        VolumeAction::Local { path, owner } => {
            if files.file_kind(path) != Some(FileKind::Directory) {
                return Err(SetUpError::LocalPath(path.clone()));
            }
            match owner {
                Some(setup) => Ok(files.give_to_fs_group(setup)?),
                None => Ok(()),
            }
        }
        VolumeAction::Files {
            dir,
            payload,
            tmpfs,
            ownership,
        } => {
            if *tmpfs {
                files.mount_tmpfs(dir, None, WRITER_DIR_MODE)?;
            }
            files
                .write_atomically(dir, payload, ownership, stamp)
                .map(|_| ())
                .map_err(Into::into)
        }
    }
}

/// Upstream's log text of a volume operation on a pod's volume.
fn volume_message(
    operation: &str,
    pod: &Pod,
    volume: &str,
    publish: &CsiPublish,
    suffix: &str,
) -> String {
    format!(
        "{operation} for volume {volume:?} (UniqueName: {:?}) pod {:?} (UID: {:?}) {suffix}",
        unique_volume_name(publish, &pod.metadata.uid, volume),
        pod.metadata.name,
        pod.metadata.uid,
    )
}

/// `2026_11_23_19_40_12.123456789` (UTC), as upstream names its timestamped folders.
pub fn timestamp(unix_nanos: i64) -> String {
    let secs = unix_nanos.div_euclid(1_000_000_000);
    let nanos = unix_nanos.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}_{m:02}_{d:02}_{:02}_{:02}_{:02}.{nanos:09}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Which of upstream's operations a CSI volume's publishing failed in, with its message:
/// staging the PersistentVolume at its global path, or setting it up in the pod.
#[derive(Debug)]
enum PublishFailure {
    MountDevice(String),
    SetUp(String),
}

impl From<String> for PublishFailure {
    fn from(message: String) -> Self {
        PublishFailure::SetUp(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::{FakeClock, FakeObjects, FakePodFiles};
    use crate::domain::kuberuntime::requests::pod_dir;

    fn requests(root: &std::path::Path) -> RequestContext {
        RequestContext::under_root(root)
    }

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
              "volumes": [
                {"name": "cfg", "configMap": {"name": "cfg"}},
                {"name": "kube-api-access-x", "projected": {"sources": [
                  {"serviceAccountToken": {"expirationSeconds": 600, "path": "token"}}]}}]}
        }))
        .expect("pod")
    }

    #[test]
    fn timestamps_are_upstreams_folder_names() {
        assert_eq!(timestamp(0), "1970_01_01_00_00_00.000000000");
        assert_eq!(
            timestamp(1_795_000_000_123_456_789),
            "2026_11_18_11_06_40.123456789"
        );
    }

    /// A claim's CSI volume whose driver needs attaching (no CSIDriver: upstream's
    /// default): marked in use for the status loop, then waited for until the Node
    /// reports it in use; its VolumeAttachment read for the domain to decide.
    #[tokio::test(start_paused = true)]
    async fn an_attached_volume_is_marked_in_use_and_waited_for_until_reported() {
        use crate::domain::csi::volume::{attachment_name, VolumeAttachmentData};
        use crate::domain::volumes::claim::CsiPersistentSource;
        let api = FakeObjects::default();
        api.put_claim(
            "ns",
            "data",
            ClaimData {
                uid: "c1".into(),
                volume_name: "pv1".into(),
                phase: "Bound".into(),
                being_deleted: false,
                controller_uid: None,
                capacity: None,
            },
        );
        api.put_persistent_volume(
            "pv1",
            PersistentVolumeData {
                claim_uid: Some("c1".into()),
                source: PersistentVolumeSource::Csi(Box::new(CsiPersistentSource {
                    driver: "d".into(),
                    volume_handle: "h".into(),
                    ..CsiPersistentSource::default()
                })),
                volume_mode: "Filesystem".into(),
                node_affinity: None,
                access_modes: vec!["ReadWriteOnce".into()],
                mount_options: Vec::new(),
                capacity: None,
            },
        );
        let id = attachment_name("h", "d", "n1");
        api.put_volume_attachment(
            &id,
            VolumeAttachmentData {
                attached: true,
                ..VolumeAttachmentData::default()
            },
        );
        let clock = Arc::new(FakeClock::new(1_000_000_000_000));
        let vm = VolumeManager::standalone(clock, Arc::new(FakePodFiles::default()))
            .with_api(Arc::new(api))
            .with_node_facts(PodFacts {
                node_name: "n1".into(),
                ..PodFacts::default()
            });
        // The status loop: woken by the change, it reports what is wanted.
        let in_use = vm.in_use();
        let reporter = tokio::spawn(async move {
            in_use.changed.notified().await;
            let wanted = in_use.wanted();
            in_use.mark_reported(&wanted);
            wanted
        });
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
              "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
        }))
        .expect("pod");
        let inputs = vm.inputs(&pod).await;
        let unique = "kubernetes.io/csi/d^h".to_owned();
        assert_eq!(reporter.await.ok(), Some(vec![unique.clone()]));
        assert!(inputs.facts.volumes_reported_in_use.contains(&unique));
        assert!(matches!(
            inputs.objects.volume_attachments.get(&id),
            Some(Fetched::Found(a)) if a.attached
        ));
        // Its volumes torn down, the pod no longer holds it in use.
        assert!(
            vm.tear_down_csi(std::path::Path::new("/nonexistent/pods/u1"))
                .await
        );
        assert!(vm.in_use().wanted().is_empty());
    }

    #[tokio::test]
    async fn a_failed_service_list_serves_the_last_one_and_is_retried_once_a_period() {
        let clock = Arc::new(FakeClock::new(1_000_000_000_000));
        let api = FakeObjects::default();
        api.put_service(ServiceInfo {
            namespace: "ns".into(),
            name: "web".into(),
            cluster_ip: "10.0.0.7".into(),
            ports: Vec::new(),
        });
        let vm = VolumeManager::standalone(clock.clone(), Arc::new(FakePodFiles::default()))
            .with_api(Arc::new(api.clone()))
            .with_cache_ttl(Duration::from_secs(60));
        let now = |c: &FakeClock| Duration::from_nanos(c.monotonic_nanos());
        assert_eq!(vm.services(&api, now(&clock)).await.len(), 1);
        api.set_down(true);
        clock.advance(Duration::from_secs(61));
        // Stale: listed again, failed, the last list served.
        assert_eq!(vm.services(&api, now(&clock)).await.len(), 1);
        assert_eq!(api.service_lists(), 2);
        // Every sync of the next period takes the last list without a call.
        for _ in 0..5 {
            clock.advance(Duration::from_secs(5));
            assert_eq!(vm.services(&api, now(&clock)).await.len(), 1);
        }
        assert_eq!(api.service_lists(), 2, "a failure is retried once a period");
        clock.advance(Duration::from_secs(40));
        vm.services(&api, now(&clock)).await;
        assert_eq!(api.service_lists(), 3);
    }

    #[tokio::test]
    async fn objects_are_cached_tokens_refreshed_and_updates_reach_the_files() {
        let clock = Arc::new(FakeClock::new(1_000_000_000_000));
        let api = FakeObjects::default();
        api.set_now(1000);
        api.put_config_map("ns", "cfg", &[("a", "1")]);
        let files = FakePodFiles::default();
        let vm = VolumeManager::standalone(clock.clone(), Arc::new(files.clone()))
            .with_api(Arc::new(api.clone()))
            .with_cache_ttl(Duration::from_secs(60));
        let p = pod();
        let inputs = vm.inputs(&p).await;
        assert_eq!(api.calls(), 2, "one get, one token");
        let token_request = &api.token_requests()[0];
        assert_eq!(token_request.service_account, "default");
        assert_eq!(token_request.pod_uid, "u1");
        assert_eq!(token_request.expiration_seconds, 600);

        let ctx = requests(std::path::Path::new("/var/lib/kubelet"));
        // The projected volume's token is written on a tmpfs.
        assert!(vm.set_up(&ctx, &p, &inputs).await.is_empty());
        let projected =
            pod_dir(&ctx, "u1").join("volumes/kubernetes.io~projected/kube-api-access-x");
        assert!(files.mounts().contains_key(&projected));
        assert!(files
            .written(&projected)
            .is_some_and(|p| p.contains_key("token")));
        let mut only_cfg = p.clone();
        only_cfg.spec.volumes.truncate(1);
        assert!(vm.set_up(&ctx, &only_cfg, &inputs).await.is_empty());
        let dir = pod_dir(&ctx, "u1").join("volumes/kubernetes.io~configmap/cfg");
        let file_a = |files: &FakePodFiles| {
            files.written(&dir).and_then(|p| {
                p.get("a")
                    .map(|f| String::from_utf8_lossy(&f.data).into_owned())
            })
        };
        assert_eq!(file_a(&files).as_deref(), Some("1"));

        // Cached within the TTL: no call, old content.
        api.put_config_map("ns", "cfg", &[("a", "2")]);
        let _ = vm.inputs(&p).await;
        assert_eq!(api.calls(), 2);
        // After the TTL the update is read and written; the token is still fresh.
        clock.advance(Duration::from_secs(61));
        let inputs = vm.inputs(&p).await;
        assert_eq!(api.calls(), 3);
        assert!(vm.set_up(&ctx, &only_cfg, &inputs).await.is_empty());
        assert_eq!(file_a(&files).as_deref(), Some("2"));

        // At 80 % of the token's 600 s the next sync asks for a new one.
        clock.set_unix_nanos((1000 + 480) * 1_000_000_000);
        let _ = vm.inputs(&p).await;
        assert_eq!(api.token_requests().len(), 2);

        // A missing configMap: the volume fails with upstream's message.
        let mut missing = only_cfg.clone();
        if let Some(cm) = missing.spec.volumes[0].config_map.as_mut() {
            cm.name = "gone".into();
        }
        let inputs = vm.inputs(&missing).await;
        let failed = vm.set_up(&ctx, &missing, &inputs).await;
        assert_eq!(
            failed[0].message,
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"gone\" not found"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn claims_are_read_until_bound_and_local_folders_take_the_fs_group() {
        use crate::domain::volumes::claim::{
            ClaimData, PersistentVolumeData, PersistentVolumeSource,
        };
        let clock = Arc::new(FakeClock::new(1_000_000_000_000));
        let api = FakeObjects::default();
        let files = FakePodFiles::default();
        files.put_file("/mnt/disks/a/old", "x");
        let vm = VolumeManager::standalone(clock.clone(), Arc::new(files.clone()))
            .with_api(Arc::new(api.clone()))
            .with_cache_ttl(Duration::from_secs(60));
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db", "namespace": "ns", "uid": "u2"},
            "spec": {"securityContext": {"fsGroup": 2000},
              "containers": [{"name": "c", "image": "busybox",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
              "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "db"}}]}
        }))
        .expect("pod");
        let ctx = requests(std::path::Path::new("/var/lib/kubelet"));
        let claim = ClaimData {
            uid: "c-uid".into(),
            volume_name: "pv1".into(),
            phase: "Pending".into(),
            being_deleted: false,
            controller_uid: None,
            capacity: None,
        };
        api.put_claim("ns", "db", claim.clone());
        let started = tokio::time::Instant::now();
        let inputs = vm.inputs(&p).await;
        // Read again while the sync waits for the binding, up to CLAIM_WAIT; no volume
        // read (an unbound claim names none).
        assert_eq!(started.elapsed(), Duration::from_millis(5000));
        let unbound_reads = api.calls();
        assert_eq!(unbound_reads, 51, "the claim alone, read every 0.1 s");
        let failed = vm.set_up(&ctx, &p, &inputs).await;
        assert_eq!(
            failed[0].message,
            "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: error processing PVC ns/db: PVC is not bound"
        );
        // Bound meanwhile: the next sync sees it, whatever the objects' cache says.
        api.put_claim(
            "ns",
            "db",
            ClaimData {
                phase: "Bound".into(),
                ..claim
            },
        );
        api.put_persistent_volume(
            "pv1",
            PersistentVolumeData {
                access_modes: Vec::new(),
                mount_options: Vec::new(),
                capacity: None,
                claim_uid: Some("c-uid".into()),
                source: PersistentVolumeSource::Local {
                    path: "/mnt/disks/a".into(),
                },
                volume_mode: "Filesystem".into(),
                node_affinity: None,
            },
        );
        let inputs = vm.inputs(&p).await;
        assert_eq!(api.calls(), unbound_reads + 2, "the claim, then its volume");
        assert!(vm.set_up(&ctx, &p, &inputs).await.is_empty());
        assert_eq!(
            files.group(std::path::Path::new("/mnt/disks/a/old")),
            Some(2000)
        );
        // Bound, the claim and its volume are kept for a pod's start (no call), then
        // read again.
        let _ = vm.inputs(&p).await;
        assert_eq!(api.calls(), unbound_reads + 2);
        clock.advance(Duration::from_secs(11));
        // A volume whose folder is gone is refused, naming it.
        api.put_persistent_volume(
            "pv1",
            PersistentVolumeData {
                access_modes: Vec::new(),
                mount_options: Vec::new(),
                capacity: None,
                claim_uid: Some("c-uid".into()),
                source: PersistentVolumeSource::Local {
                    path: "/mnt/disks/gone".into(),
                },
                volume_mode: String::new(),
                node_affinity: None,
            },
        );
        let inputs = vm.inputs(&p).await;
        let failed = vm.set_up(&ctx, &p, &inputs).await;
        assert_eq!(
            failed[0].message,
            "MountVolume.SetUp failed for volume \"pv1\" : local volume path \"/mnt/disks/gone\" does not exist or is not a directory"
        );
        // A running pod's resync leaves the claim alone.
        assert!(vm.set_up_volumes(&ctx, &p, &inputs, false).await.is_empty());
    }

    #[tokio::test]
    async fn an_inline_csi_volume_is_published_by_its_registered_driver_and_unpublished_with_the_pod(
    ) {
        use crate::adapters::fake::FakeCsiPlugins;
        use crate::domain::csi::volume::CsiDriverData;
        use crate::domain::csi::DriverNodeInfo;
        let clock = Arc::new(FakeClock::new(1_000_000_000_000));
        let api = FakeObjects::default();
        api.put_csi_driver(
            "hostpath.csi.k8s.io",
            CsiDriverData {
                attach_required: false,
                pod_info_on_mount: true,
                fs_group_policy: "File".into(),
                volume_lifecycle_modes: vec!["Ephemeral".into()],
            },
        );
        let files = FakePodFiles::default();
        let plugins = FakeCsiPlugins::default();
        let drivers = CsiDrivers::default();
        let vm = VolumeManager::standalone(clock, Arc::new(files.clone()))
            .with_api(Arc::new(api.clone()))
            .with_csi(drivers.clone(), Arc::new(plugins.clone()));
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "inline", "namespace": "ns", "uid": "u3"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
              "volumes": [{"name": "data", "csi": {"driver": "hostpath.csi.k8s.io"}}]}
        }))
        .expect("pod");
        let ctx = requests(std::path::Path::new("/var/lib/kubelet"));
        let inputs = vm.inputs(&p).await;
        // Not registered yet: upstream's message, nothing published.
        let failed = vm.set_up(&ctx, &p, &inputs).await;
        assert_eq!(
            failed[0].message,
            "MountVolume.SetUp failed for volume \"data\" : kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name hostpath.csi.k8s.io not found in the list of registered CSI drivers"
        );
        let endpoint = "/var/lib/kubelet/plugins/csi-hostpath/csi.sock";
        plugins.put_driver(endpoint, DriverNodeInfo::default());
        drivers.insert_for_test(crate::domain::csi::Driver {
            name: "hostpath.csi.k8s.io".into(),
            endpoint: endpoint.into(),
            version: crate::domain::csi::Version(1, 0, 0),
        });
        assert!(vm.set_up(&ctx, &p, &inputs).await.is_empty());
        let dir = pod_dir(&ctx, "u3").join("volumes/kubernetes.io~csi/data");
        let published = plugins.published();
        let volume = published
            .get(&dir.join("mount"))
            .expect("published at the target path");
        assert_eq!(
            volume
                .volume_context
                .get("csi.storage.k8s.io/pod.name")
                .map(String::as_str),
            Some("inline")
        );
        assert!(
            files.file(dir.join("vol_data.json")).is_some(),
            "vol_data.json kept"
        );
        // The teardown unpublishes it through the driver, once.
        assert!(vm.tear_down_csi(&pod_dir(&ctx, "u3")).await);
        assert_eq!(
            plugins.unpublished(),
            vec![(volume.volume_handle.clone(), dir.join("mount"))]
        );
        assert!(vm.tear_down_csi(&pod_dir(&ctx, "u3")).await);
        assert_eq!(plugins.unpublished().len(), 1);
    }

    /// A volume manager with the fake CSI driver `hostpath.csi.k8s.io` (staging), the
    /// claim `ns/data` bound to the PersistentVolume `pvc-1` of `source`.
    fn csi_claim_fixture(
        source: crate::domain::volumes::claim::CsiPersistentSource,
        mount_options: Vec<String>,
    ) -> (
        VolumeManager,
        FakeObjects,
        crate::adapters::fake::FakeCsiPlugins,
        Arc<FakeClock>,
        FakePodFiles,
    ) {
        use crate::adapters::fake::FakeCsiPlugins;
        use crate::domain::csi::DriverNodeInfo;
        use crate::domain::volumes::claim::{
            ClaimData, PersistentVolumeData, PersistentVolumeSource,
        };
        let clock = Arc::new(FakeClock::new(1_000_000_000_000));
        let api = FakeObjects::default();
        api.put_claim(
            "ns",
            "data",
            ClaimData {
                uid: "c-uid".into(),
                volume_name: "pvc-1".into(),
                phase: "Bound".into(),
                being_deleted: false,
                controller_uid: None,
                capacity: None,
            },
        );
        api.put_persistent_volume(
            "pvc-1",
            PersistentVolumeData {
                access_modes: vec!["ReadWriteOnce".into()],
                mount_options,
                capacity: None,
                claim_uid: Some("c-uid".into()),
                source: PersistentVolumeSource::Csi(Box::new(source)),
                volume_mode: String::new(),
                node_affinity: None,
            },
        );
        api.put_csi_driver(
            "hostpath.csi.k8s.io",
            crate::domain::csi::volume::CsiDriverData::default(),
        );
        let files = FakePodFiles::default();
        let plugins = FakeCsiPlugins::default();
        plugins.set_stages(true);
        let endpoint = "/var/lib/kubelet/plugins/csi-hostpath/csi.sock";
        plugins.put_driver(endpoint, DriverNodeInfo::default());
        let drivers = CsiDrivers::default();
        drivers.insert_for_test(crate::domain::csi::Driver {
            name: "hostpath.csi.k8s.io".into(),
            endpoint: endpoint.into(),
            version: crate::domain::csi::Version(1, 0, 0),
        });
        let vm = VolumeManager::standalone(clock.clone(), Arc::new(files.clone()))
            .with_api(Arc::new(api.clone()))
            .with_csi(drivers, Arc::new(plugins.clone()));
        (vm, api, plugins, clock, files)
    }

    fn hostpath_source(handle: &str) -> crate::domain::volumes::claim::CsiPersistentSource {
        crate::domain::volumes::claim::CsiPersistentSource {
            driver: "hostpath.csi.k8s.io".into(),
            volume_handle: handle.into(),
            ..Default::default()
        }
    }

    fn claim_pod(uid: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": uid, "namespace": "ns", "uid": uid},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox",
                "volumeMounts": [{"name": "d", "mountPath": "/data"}]}],
              "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}
        }))
        .expect("pod")
    }

    /// Upstream's csi_attacher: the stage Secret a PersistentVolume names is read for
    /// `NodeStageVolume`; while it is missing the volume waits in upstream's
    /// `MountVolume.MountDevice failed` words, then stages with it; `mountOptions` are
    /// the driver's mount flags.
    #[tokio::test]
    async fn a_claims_stage_secret_and_mount_options_reach_the_driver() {
        let mut source = hostpath_source("vol-1");
        source.node_stage_secret_ref = Some(crate::domain::volumes::claim::SecretReference {
            namespace: "storage".into(),
            name: "creds".into(),
        });
        let (vm, api, plugins, clock, _files) = csi_claim_fixture(source, vec!["noatime".into()]);
        let ctx = requests(std::path::Path::new("/var/lib/kubelet"));
        let p = claim_pod("a");
        let inputs = vm.inputs(&p).await;
        let failed = vm.set_up(&ctx, &p, &inputs).await;
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(
            failed[0].message,
            "MountVolume.MountDevice failed for volume \"pvc-1\" : fetching NodeStageSecretRef storage/creds failed: kubernetes.io/csi: failed to find the secret creds in the namespace storage with error: secrets \"creds\" not found"
        );
        assert!(plugins.staged().is_empty() && plugins.published().is_empty());
        api.put_secret("storage", "creds", &[("key", b"value")]);
        // Read again once the cached answer is old.
        clock.advance(DEFAULT_CACHE_TTL);
        let inputs = vm.inputs(&p).await;
        assert!(vm.set_up(&ctx, &p, &inputs).await.is_empty());
        let published = plugins.published();
        let volume = published.values().next().expect("published");
        assert_eq!(
            volume.stage.as_ref().map(|s| s.secrets.clone()),
            Some(Ok([("key".to_owned(), "value".to_owned())]
                .into_iter()
                .collect()))
        );
        assert_eq!(volume.mount_flags, ["noatime"]);
    }

    /// A claim the pod mounts read-only, whose volume a resizer grew: not grown; when the
    /// pod mounts it, upstream's `FileSystemResizeFailed` on the pod and on the claim,
    /// and nothing at the running pod's resyncs.
    #[tokio::test]
    async fn a_grown_claim_mounted_read_only_is_not_grown_and_warned_about_at_the_mount() {
        use crate::domain::volumes::claim::{ClaimData, PersistentVolumeData};
        let (vm, api, plugins, clock, _files) =
            csi_claim_fixture(hostpath_source("vol-1"), Vec::new());
        plugins.set_expands(true);
        api.put_claim(
            "ns",
            "data",
            ClaimData {
                uid: "c-uid".into(),
                volume_name: "pvc-1".into(),
                phase: "Bound".into(),
                being_deleted: false,
                controller_uid: None,
                capacity: Some("1Mi".into()),
            },
        );
        let ctx = requests(std::path::Path::new("/var/lib/kubelet"));
        let mut p = claim_pod("a");
        if let Some(claim) = p.spec.volumes[0].persistent_volume_claim.as_mut() {
            claim.read_only = true;
        }
        let inputs = vm.inputs(&p).await;
        let Fetched::Found(pv) = inputs.objects.persistent_volumes["pvc-1"].clone() else {
            panic!("the volume read");
        };
        api.put_persistent_volume(
            "pvc-1",
            PersistentVolumeData {
                capacity: Some("2Mi".into()),
                ..pv
            },
        );
        clock.advance(DEFAULT_CACHE_TTL);
        let inputs = vm.inputs(&p).await;
        assert!(vm.set_up(&ctx, &p, &inputs).await.is_empty(), "it mounts");
        assert_eq!(plugins.expanded(), [], "the driver is not asked to grow it");
        let events = vm.take_resize_events("a");
        let message =
            "MountVolume.NodeExpandVolume failed for volume \"pvc-1\" requested read-only file system";
        assert_eq!(events.len(), 2, "{events:?}");
        for resized in &events {
            assert_eq!(
                (
                    resized.event.reason.as_str(),
                    resized.event.message.as_str()
                ),
                ("FileSystemResizeFailed", message)
            );
            assert_eq!(
                resized.event.type_,
                crate::domain::node_status::status::EventType::Warning
            );
        }
        assert_eq!(events[0].claim, None, "on the pod");
        let claim = events[1].claim.as_ref().expect("and on the claim");
        assert_eq!(
            (
                claim.kind.as_str(),
                claim.namespace.as_str(),
                claim.name.as_str(),
                claim.uid.as_str()
            ),
            ("PersistentVolumeClaim", "ns", "data", "c-uid")
        );
        assert!(vm.set_up_volumes(&ctx, &p, &inputs, false).await.is_empty());
        assert!(
            vm.take_resize_events("a").is_empty(),
            "not again at a resync"
        );
        assert_eq!(plugins.expanded(), []);
    }

    /// Upstream's online expansion (`test/e2e/storage/testsuites/volume_expand.go`: the
    /// resizer grows the PersistentVolume, the kubelet grows the file system of the
    /// volume in use): a running pod's claim whose volume's capacity passed the claim's
    /// status capacity is expanded by its driver to the new size, the claim's status
    /// gets it, and the pod an event; a driver without EXPAND_VOLUME gets upstream's
    /// refusal as a warning.
    #[tokio::test]
    async fn a_running_pods_claim_grown_by_a_resizer_is_expanded_on_the_node() {
        use crate::domain::volumes::claim::{ClaimData, PersistentVolumeData};
        let (vm, api, plugins, clock, _files) =
            csi_claim_fixture(hostpath_source("vol-1"), Vec::new());
        let claim = |capacity: &str| ClaimData {
            uid: "c-uid".into(),
            volume_name: "pvc-1".into(),
            phase: "Bound".into(),
            being_deleted: false,
            controller_uid: None,
            capacity: Some(capacity.into()),
        };
        api.put_claim("ns", "data", claim("1Mi"));
        let ctx = requests(std::path::Path::new("/var/lib/kubelet"));
        let p = claim_pod("a");
        let inputs = vm.inputs(&p).await;
        let Fetched::Found(pv) = inputs.objects.persistent_volumes["pvc-1"].clone() else {
            panic!("the volume read");
        };
        assert!(vm.set_up(&ctx, &p, &inputs).await.is_empty());
        assert!(vm.take_resize_events("a").is_empty(), "nothing to grow");
        // The resizer grows the volume (the claim's status still says 1Mi).
        api.put_persistent_volume(
            "pvc-1",
            PersistentVolumeData {
                capacity: Some("2Mi".into()),
                ..pv.clone()
            },
        );
        clock.advance(DEFAULT_CACHE_TTL);
        let inputs = vm.inputs(&p).await;
        assert!(vm.set_up_volumes(&ctx, &p, &inputs, false).await.is_empty());
        assert_eq!(
            plugins.expanded(),
            [],
            "a driver without EXPAND_VOLUME is not asked"
        );
        let events = vm.take_resize_events("a");
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].event.reason, "VolumeResizeFailed");
        assert_eq!(
            events[0].event.message,
            "NodeExpandVolume.NodeExpandVolume failed for volume \"pvc-1\" : Expander.NodeExpand found CSI plugin kubernetes.io/csi/hostpath.csi.k8s.io to not support node expansion"
        );
        plugins.set_expands(true);
        let inputs = vm.inputs(&p).await;
        assert!(vm.set_up_volumes(&ctx, &p, &inputs, false).await.is_empty());
        assert_eq!(
            plugins.expanded(),
            [(
                std::path::PathBuf::from(
                    "/var/lib/kubelet/pods/a/volumes/kubernetes.io~csi/pvc-1/mount"
                ),
                2 * 1024 * 1024
            )]
        );
        let events = vm.take_resize_events("a");
        assert_eq!(events.len(), 2, "on the pod and the claim: {events:?}");
        for resized in &events {
            assert_eq!(resized.event.reason, "FileSystemResizeSuccessful");
            assert_eq!(
                resized.event.message,
                "MountVolume.NodeExpandVolume succeeded for volume \"pvc-1\" n1"
            );
        }
        assert_eq!(events[0].claim, None);
        assert_eq!(
            events[1]
                .claim
                .as_ref()
                .map(|c| (c.name.as_str(), c.uid.as_str())),
            Some(("data", "c-uid"))
        );
        // The claim's status says 2Mi: nothing more to grow.
        let inputs = vm.inputs(&p).await;
        assert!(vm.set_up_volumes(&ctx, &p, &inputs, false).await.is_empty());
        assert_eq!(plugins.expanded().len(), 1);
        assert!(vm.take_resize_events("a").is_empty());
    }

    /// Upstream's DelegateFSGroupToCSIDriver: a driver with VOLUME_MOUNT_GROUP gets the
    /// pod's fsGroup in the mount capability and applies it itself (no kubelet walk);
    /// one without it gets none.
    #[tokio::test]
    async fn a_driver_with_volume_mount_group_applies_the_pods_fs_group() {
        let mut source = hostpath_source("vol-1");
        source.fs_type = "ext4".into();
        let (vm, _api, plugins, _clock, _files) = csi_claim_fixture(source, Vec::new());
        let ctx = requests(std::path::Path::new("/var/lib/kubelet"));
        let mut p = claim_pod("a");
        p.spec.security_context = Some(crate::domain::pod::PodSecurityContext {
            fs_group: Some(1234),
            ..Default::default()
        });
        let inputs = vm.inputs(&p).await;
        assert!(vm.set_up(&ctx, &p, &inputs).await.is_empty());
        let walked = plugins
            .published()
            .values()
            .next()
            .cloned()
            .expect("published");
        assert_eq!(walked.volume_mount_group, "");
        assert!(
            walked.owner.is_some(),
            "the kubelet gives it to the fsGroup"
        );
        assert!(vm.tear_down_csi(&pod_dir(&ctx, "a")).await);
        plugins.set_mounts_group(true);
        assert!(vm.set_up(&ctx, &p, &inputs).await.is_empty());
        let delegated = plugins
            .published()
            .values()
            .next()
            .cloned()
            .expect("published");
        assert_eq!(delegated.volume_mount_group, "1234");
        assert_eq!(delegated.owner, None, "the driver's to apply");
    }

    #[tokio::test]
    async fn a_claims_csi_volume_is_staged_once_and_unstaged_after_its_last_pod() {
        let (vm, _api, plugins, _clock, _files) =
            csi_claim_fixture(hostpath_source("vol-1"), Vec::new());
        let pod_of = claim_pod;
        let ctx = requests(std::path::Path::new("/var/lib/kubelet"));
        for uid in ["a", "b"] {
            let p = pod_of(uid);
            let inputs = vm.inputs(&p).await;
            assert!(vm.set_up(&ctx, &p, &inputs).await.is_empty());
        }
        assert_eq!(
            plugins.staged().len(),
            1,
            "one global staging for both pods"
        );
        assert_eq!(plugins.published().len(), 2);
        // The first pod goes: still staged for the second.
        assert!(vm.tear_down_csi(&pod_dir(&ctx, "a")).await);
        assert_eq!(plugins.staged().len(), 1);
        assert!(vm.tear_down_csi(&pod_dir(&ctx, "b")).await);
        assert!(plugins.staged().is_empty(), "unstaged after its last pod");
        assert!(plugins.published().is_empty());
    }

    /// Upstream's CSI block mapper: a Block claim is staged once, published as a file per
    /// pod and linked into each pod's `volumeDevices`; each pod's teardown unpublishes
    /// its file and removes its link, the last one unstages and removes the folders.
    #[tokio::test]
    async fn a_block_claim_is_linked_into_each_pod_and_unstaged_after_its_last_pod() {
        let (vm, api, plugins, clock, fake_files) =
            csi_claim_fixture(hostpath_source("vol-b"), Vec::new());
        let block_volume = |capacity: &str| PersistentVolumeData {
            access_modes: vec!["ReadWriteOnce".into()],
            mount_options: Vec::new(),
            capacity: Some(capacity.into()),
            claim_uid: Some("c-uid".into()),
            source: PersistentVolumeSource::Csi(Box::new(hostpath_source("vol-b"))),
            volume_mode: "Block".into(),
            node_affinity: None,
        };
        api.put_persistent_volume("pvc-1", block_volume("1Mi"));
        api.put_claim(
            "ns",
            "data",
            crate::domain::volumes::claim::ClaimData {
                uid: "c-uid".into(),
                volume_name: "pvc-1".into(),
                phase: "Bound".into(),
                being_deleted: false,
                controller_uid: None,
                capacity: Some("1Mi".into()),
            },
        );
        let device_pod = |uid: &str| {
            let mut json = serde_json::to_value(claim_pod(uid)).expect("json");
            json["spec"]["containers"][0]["volumeMounts"] = serde_json::json!([]);
            json["spec"]["containers"][0]["volumeDevices"] =
                serde_json::json!([{"name": "d", "devicePath": "/dev/xvda"}]);
            serde_json::from_value::<Pod>(json).expect("pod")
        };
        let root = std::path::Path::new("/var/lib/kubelet");
        let ctx = requests(root);
        for uid in ["a", "b"] {
            let p = device_pod(uid);
            let inputs = vm.inputs(&p).await;
            assert_eq!(vm.set_up(&ctx, &p, &inputs).await, Vec::new());
        }
        let devices = root.join("plugins/kubernetes.io/csi/volumeDevices");
        assert_eq!(
            plugins.staged().keys().collect::<Vec<_>>(),
            [&devices.join("staging/pvc-1")]
        );
        assert_eq!(
            plugins.published().keys().cloned().collect::<Vec<_>>(),
            [
                devices.join("publish/pvc-1/a"),
                devices.join("publish/pvc-1/b")
            ]
        );
        let files = vm.files();
        let links = |uid: &str| {
            files
                .list_dir(&root.join(format!("pods/{uid}/volumeDevices/kubernetes.io~csi")))
                .expect("listed")
        };
        assert_eq!(links("a"), ["pvc-1"]);
        // Each pod's device held at the global map, as upstream's `MapBlockVolume`.
        let map = |uid: &str| devices.join(format!("pvc-1/dev/{uid}"));
        let mounts = fake_files.mounts();
        for uid in ["a", "b"] {
            assert_eq!(
                mounts.get(&map(uid)).map(String::as_str),
                Some(
                    format!(
                        "bind={},loop",
                        devices.join(format!("publish/pvc-1/{uid}")).display()
                    )
                    .as_str()
                ),
                "{mounts:?}"
            );
        }
        // The driver measures it there.
        plugins.put_volume_stats(map("a"), crate::ports::csi::CsiVolumeStats::default());
        let samples = vm.csi_volume_stats("a").await;
        assert_eq!(samples.len(), 1, "{samples:?}");
        assert_eq!(samples[0].claim.as_deref(), Some("data"));
        // A resizer grew it: the driver grows the pod's device (upstream's block
        // expansion: the publish path as the volume path).
        api.put_persistent_volume("pvc-1", block_volume("2Mi"));
        plugins.set_expands(true);
        clock.advance(DEFAULT_CACHE_TTL);
        let p = device_pod("a");
        let inputs = vm.inputs(&p).await;
        assert!(vm.set_up_volumes(&ctx, &p, &inputs, false).await.is_empty());
        assert_eq!(
            plugins.expanded(),
            [(devices.join("publish/pvc-1/a"), 2 * 1024 * 1024)]
        );
        let events = vm.take_resize_events("a");
        assert_eq!(events.len(), 2, "on the pod and the claim: {events:?}");
        assert_eq!(events[0].event.reason, "FileSystemResizeSuccessful");
        assert!(files
            .read(&devices.join("pvc-1/data/vol_data.json"))
            .expect("read")
            .is_some_and(|d| String::from_utf8_lossy(&d).contains("\"volumeHandle\":\"vol-b\"")));
        // The first pod goes: its file unpublished, its link removed, still staged.
        assert!(vm.tear_down_csi(&pod_dir(&ctx, "a")).await);
        assert_eq!(links("a"), Vec::<String>::new());
        assert!(
            !fake_files.mounts().contains_key(&map("a")),
            "its map undone"
        );
        assert!(fake_files.mounts().contains_key(&map("b")));
        assert_eq!(plugins.published().len(), 1);
        assert_eq!(plugins.staged().len(), 1, "still staged for the second pod");
        assert!(vm.tear_down_csi(&pod_dir(&ctx, "b")).await);
        assert!(plugins.staged().is_empty(), "unstaged after its last pod");
        assert!(fake_files.mounts().is_empty(), "{:?}", fake_files.mounts());
        assert_eq!(fake_files.entry(devices.join("pvc-1/dev")), None);
        assert!(plugins.published().is_empty());
        assert_eq!(
            files
                .read(&devices.join("pvc-1/data/vol_data.json"))
                .expect("read"),
            None,
            "its data removed"
        );
    }
}
