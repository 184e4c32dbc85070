//! The API server as a pod source: the pods bound to the node (`spec.nodeName=<node>`),
//! through the port's watch once the node is registered (it lists, watches, resumes,
//! lists again after 410 Gone and backs off by itself; made again from the new clients
//! when a certificate rotation replaces them). Each change yields the whole set (source
//! `api`), as upstream's API source does, so the pod manager stays the same for every
//! source; a list replaces the set, so a pod deleted while nothing watched leaves it.
//!
//! Mirror pods are never run: they are kept aside by their static pod's full name, for
//! the status writer. A pod rkubelet cannot decode or validate is failed in the API with
//! its errors, once, and the other pods go on.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::app::node::failures::FailureLog;
use async_trait::async_trait;
use futures_util::FutureExt;
use serde_json::Value;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::status::{PodStatusStore, StatusTarget};
use crate::app::node::ConnectedNode;
use crate::domain::pod::api::{classify_api_object, ApiObject, ApiPod, InvalidApiPod, API_SOURCE};
use crate::domain::pod::log_ref;
use crate::domain::status::{stamp_status, status_patch, ApiPodStatus};
use crate::ports::api::{ApiClients, PodWatch, PodWatchEvent, PodsError};
use crate::ports::error::Chain;
use crate::ports::pod_source::{PodSetUpdate, PodSource, PodSourceError};

/// Events taken in one go before the set is handed on (a burst of creations becomes
/// one update).
const MAX_EVENTS_PER_UPDATE: usize = 512;

/// One API object as last seen.
#[derive(Debug, Clone)]
enum Seen {
    Pod(Box<ApiPod>),
    Mirror {
        static_full_name: String,
        target: StatusTarget,
        status: Option<Box<ApiPodStatus>>,
    },
    Invalid,
}

/// The API pod source; see the module documentation.
pub struct ApiPodSource {
    connected: watch::Receiver<Option<ConnectedNode>>,
    store: PodStatusStore,
    /// By uid, with the resource version it was decoded at.
    seen: BTreeMap<String, (String, Seen)>,
    watch: Option<Watching>,
    /// Whether the set is known (a first list came).
    listed: bool,
    /// Invalid pods already failed in the API (by uid).
    reported: BTreeSet<String>,
    /// An outage logs its first failure, one line a minute and its end.
    failure_log: FailureLog,
    /// Pods deleted since the last update, in their final state.
    deleted: Vec<ApiPod>,
    /// The set to hand on next (after one that still held deleted pods).
    queued: Option<PodSetUpdate>,
}

/// The watch, and the clients it was made from.
struct Watching {
    events: Box<dyn PodWatch>,
    clients: watch::Receiver<ApiClients>,
}

/// Resolves when the clients are replaced; never when their sender is gone.
async fn replaced(clients: &mut watch::Receiver<ApiClients>) {
    if clients.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn selector(node: &str) -> String {
    format!("spec.nodeName={node}")
}

fn meta(value: &Value, key: &str) -> String {
    value["metadata"][key]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

impl ApiPodSource {
    pub fn new(connected: watch::Receiver<Option<ConnectedNode>>, store: PodStatusStore) -> Self {
        ApiPodSource {
            connected,
            store,
            seen: BTreeMap::new(),
            watch: None,
            listed: false,
            reported: BTreeSet::new(),
            failure_log: FailureLog::new("listing and watching the node's pods"),
            deleted: Vec::new(),
            queued: None,
        }
    }

    /// A watch of the node's pods, once the node is registered.
    async fn start_watch(&mut self) -> Option<Watching> {
        loop {
            if let Some(c) = &*self.connected.borrow_and_update() {
                // Before any API pod has a status: each shows the node's IP.
                self.store.set_host_ip(&c.host_ip);
                let mut clients = c.clients.clone();
                let pods = clients.borrow_and_update().pods.clone();
                return Some(Watching {
                    events: pods.watch_pods(&selector(&c.node_name)),
                    clients,
                });
            }
            self.connected.changed().await.ok()?;
        }
    }

    fn decode(&mut self, value: &Value) -> (String, Seen) {
        let uid = meta(value, "uid");
        let version = meta(value, "resourceVersion");
        if let Some((v, seen)) = self.seen.get(&uid) {
            if *v == version && !version.is_empty() {
                return (uid, seen.clone());
            }
        }
        match classify_api_object(value) {
            ApiObject::Mirror {
                namespace,
                name,
                uid: _,
                status,
            } => {
                let seen = Seen::Mirror {
                    static_full_name: ApiObject::static_full_name(&namespace, &name),
                    target: StatusTarget {
                        namespace,
                        name,
                        uid: uid.clone(),
                    },
                    status,
                };
                (uid, seen)
            }
            ApiObject::Pod(pod) => (uid, Seen::Pod(pod)),
            ApiObject::Invalid(invalid) => {
                self.report_invalid(invalid);
                (uid, Seen::Invalid)
            }
        }
    }

    /// Fails an invalid pod in the API, once per uid; a failed write is retried when the
    /// pod is seen again.
    fn report_invalid(&mut self, invalid: InvalidApiPod) {
        if !self.reported.insert(invalid.uid.clone()) {
            return;
        }
        let mut status = invalid.status();
        warn!(pod = %format!("{}/{}", invalid.namespace, invalid.name), uid = %invalid.uid, message = %status.message, "pod from the API cannot run; failing it");
        let Some(connected) = &*self.connected.borrow() else {
            return;
        };
        let pods = connected.clients.borrow().pods.clone();
        stamp_status(None, &mut status, &connected.host_ip, "");
        status.start_time = None;
        let patch = status_patch(&invalid.uid, &status);
        tokio::spawn(async move {
            if let Err(error) = pods
                .patch_pod_status(&invalid.namespace, &invalid.name, &patch)
                .await
            {
                warn!(error = %Chain(&error), "failed to fail an invalid pod in the API");
            }
        });
    }

    fn apply(&mut self, event: PodWatchEvent) {
        match event {
            PodWatchEvent::Listed(items) => {
                let mut fresh = BTreeMap::new();
                for item in &items {
                    let version = meta(item, "resourceVersion");
                    let (uid, seen) = self.decode(item);
                    fresh.insert(uid, (version, seen));
                }
                self.seen = fresh;
                self.reported.retain(|uid| self.seen.contains_key(uid));
                self.listed = true;
                info!(pods = self.seen.len(), "listed the node's pods");
            }
            PodWatchEvent::Applied(v) => {
                let version = meta(&v, "resourceVersion");
                let (uid, seen) = self.decode(&v);
                self.seen.insert(uid, (version, seen));
            }
            PodWatchEvent::Deleted(v) => {
                let uid = meta(&v, "uid");
                // The last state decides the grace period of the termination (a force
                // deletion carries 0).
                let (_, seen) = self.decode(&v);
                self.seen.remove(&uid);
                self.reported.remove(&uid);
                if let Seen::Pod(pod) = seen {
                    self.deleted.push(*pod);
                }
            }
        }
    }

    /// One item of the watch; whether the set changed.
    fn take(&mut self, item: Option<Result<PodWatchEvent, PodsError>>) -> bool {
        match item {
            Some(Ok(event)) => {
                self.failure_log.succeeded();
                self.apply(event);
                true
            }
            Some(Err(PodsError::Gone { message })) => {
                info!(%message, "the pods' watch expired (410 Gone); listing again");
                false
            }
            Some(Err(error)) => {
                self.failure_log.failed(&error);
                false
            }
            None => {
                warn!("the pods' watch stopped; starting it again");
                self.watch = None;
                false
            }
        }
    }

    /// The whole set, and the view of mirrors and API statuses for the status writer.
    fn update(&mut self) -> PodSetUpdate {
        let mut pods = Vec::new();
        let mut mirrors = BTreeMap::new();
        let mut statuses = HashMap::new();
        for (uid, (_, seen)) in &self.seen {
            match seen {
                Seen::Pod(p) => {
                    pods.push(p.pod.clone());
                    if let Some(s) = &p.status {
                        statuses.insert(uid.clone(), s.clone());
                    }
                }
                Seen::Mirror {
                    static_full_name,
                    target,
                    status,
                } => {
                    mirrors.insert(static_full_name.clone(), target.clone());
                    if let Some(s) = status {
                        statuses.insert(uid.clone(), (**s).clone());
                    }
                }
                Seen::Invalid => {}
            }
        }
        self.store.set_api_view(mirrors, statuses);
        let update = PodSetUpdate {
            source: API_SOURCE.to_owned(),
            pods,
            errors: Vec::new(),
        };
        if self.deleted.is_empty() {
            return update;
        }
        // Deleted pods first show in their final state (a force deletion carries grace 0,
        // which the termination then uses), then leave the set.
        let mut with_deleted = update.clone();
        for pod in self.deleted.drain(..) {
            debug!(pod = %log_ref(&pod.pod), "pod deleted in the API");
            with_deleted.pods.push(pod.pod);
        }
        self.queued = Some(update);
        with_deleted
    }
}

#[async_trait]
impl PodSource for ApiPodSource {
    async fn next(&mut self) -> Option<PodSetUpdate> {
        if let Some(update) = self.queued.take() {
            return Some(update);
        }
        loop {
            let mut watching = match self.watch.take() {
                Some(watching) => watching,
                None => self.start_watch().await?,
            };
            let first = tokio::select! {
                item = watching.events.next() => item,
                () = replaced(&mut watching.clients) => {
                    // kube-rs reads client certificates once: a rotation brings new
                    // clients, and the watch is made again from them (it lists first).
                    info!("the API clients were replaced; watching the node's pods again");
                    continue;
                }
            };
            self.watch = Some(watching);
            let mut changed = self.take(first);
            // What is already there joins this update (a burst of creations is one).
            for _ in 1..MAX_EVENTS_PER_UPDATE {
                let Some(watching) = self.watch.as_mut() else {
                    break;
                };
                let Some(item) = watching.events.next().now_or_never() else {
                    break;
                };
                changed |= self.take(item);
            }
            if changed && self.listed {
                return Some(self.update());
            }
        }
    }

    async fn read_once(&self) -> Result<PodSetUpdate, PodSourceError> {
        let Some((api, node)) = self
            .connected
            .borrow()
            .as_ref()
            .map(|c| (c.clients.borrow().pods.clone(), c.node_name.clone()))
        else {
            return Ok(PodSetUpdate {
                source: API_SOURCE.to_owned(),
                pods: Vec::new(),
                errors: Vec::new(),
            });
        };
        let list = api
            .list_pods(&selector(&node))
            .await
            .map_err(|e| PodSourceError::Read {
                origin: format!("the API server's pods of node {node}"),
                source: Box::new(e),
            })?;
        let pods = list
            .items
            .iter()
            .filter_map(|v| match classify_api_object(v) {
                ApiObject::Pod(p) => Some(p.pod),
                ApiObject::Mirror { .. } | ApiObject::Invalid(_) => None,
            })
            .collect();
        Ok(PodSetUpdate {
            source: API_SOURCE.to_owned(),
            pods,
            errors: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::FakeApiServer;
    use serde_json::json;
    use std::time::Duration;

    fn connected(api: &FakeApiServer) -> watch::Receiver<Option<ConnectedNode>> {
        connected_with(watch::channel(api.clients()).1)
    }

    fn connected_with(
        clients: watch::Receiver<ApiClients>,
    ) -> watch::Receiver<Option<ConnectedNode>> {
        let node = ConnectedNode {
            node_name: "n1".into(),
            clients,
            host_ip: "10.0.0.1".into(),
            node: Default::default(),
            allocatable: Default::default(),
        };
        watch::channel(Some(node)).1
    }

    fn pod(name: &str, node: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"},
               "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox"}]}})
    }

    fn names(update: &PodSetUpdate) -> Vec<String> {
        update
            .pods
            .iter()
            .map(|p| p.metadata.name.clone())
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn lists_then_watches_the_nodes_pods_and_relists_on_gone() {
        let api = FakeApiServer::new();
        api.put_pod(pod("a", "n1"));
        api.put_pod(pod("elsewhere", "n2"));
        let store = PodStatusStore::new();
        let mut source = ApiPodSource::new(connected(&api), store);
        let first = source.next().await.expect("first set");
        assert_eq!(names(&first), ["a"]);
        assert_eq!(first.source, "api");
        assert_eq!(api.count("list pods spec.nodeName=n1"), 1);

        api.put_pod(pod("b", "n1"));
        let second = source.next().await.expect("a watch event");
        assert_eq!(names(&second), ["a", "b"]);

        // The watch's history is gone (410); meanwhile "a" was deleted and "c" created:
        // the relist's whole set has "c" and no longer "a".
        api.compact_pods();
        api.remove_pod("default", "a");
        api.put_pod(pod("c", "n1"));
        let third = source.next().await.expect("relisted");
        assert_eq!(names(&third), ["b", "c"]);
        assert_eq!(api.count("list pods"), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_deleted_in_the_api_shows_once_in_its_final_state_then_leaves() {
        let api = FakeApiServer::new();
        api.put_pod(pod("a", "n1"));
        let mut source = ApiPodSource::new(connected(&api), PodStatusStore::new());
        assert_eq!(names(&source.next().await.expect("first set")), ["a"]);
        let mut terminating = api.pod("default", "a").expect("stored");
        terminating["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        api.put_pod(terminating);
        api.remove_pod("default", "a");
        let last = source.next().await.expect("the deletion");
        assert_eq!(names(&last), ["a"]);
        assert_eq!(last.pods[0].metadata.deletion_grace_period_seconds, Some(0));
        assert!(names(&source.next().await.expect("then without it")).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreachable_api_server_is_retried_until_it_lists() {
        let api = FakeApiServer::new();
        api.put_pod(pod("a", "n1"));
        api.set_down(true);
        let mut source = ApiPodSource::new(connected(&api), PodStatusStore::new());
        let next = tokio::spawn(async move { source.next().await });
        tokio::time::sleep(Duration::from_secs(5)).await;
        // Retried after each back-off, not in a tight loop.
        let tries = api.count("list pods");
        assert!((2..=8).contains(&tries), "{tries} lists in 5 s");
        api.set_down(false);
        let first = next.await.expect("joined").expect("first set");
        assert_eq!(names(&first), ["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn replaced_clients_watch_again_through_the_new_ones() {
        let api = FakeApiServer::new();
        api.put_pod(pod("a", "n1"));
        let (clients_tx, clients) = watch::channel(api.clients());
        let mut source = ApiPodSource::new(connected_with(clients), PodStatusStore::new());
        assert_eq!(names(&source.next().await.expect("first set")), ["a"]);

        // A certificate rotation: the same server through new clients.
        let rotated = FakeApiServer::new();
        rotated.put_pod(pod("a", "n1"));
        rotated.put_pod(pod("b", "n1"));
        clients_tx.send_replace(rotated.clients());
        assert_eq!(
            names(&source.next().await.expect("listed again")),
            ["a", "b"]
        );
        assert_eq!(rotated.count("list pods spec.nodeName=n1"), 1);
        api.put_pod(pod("old", "n1"));
        rotated.put_pod(pod("c", "n1"));
        assert_eq!(
            names(
                &source
                    .next()
                    .await
                    .expect("watched through the new clients")
            ),
            ["a", "b", "c"]
        );
    }

    #[tokio::test]
    async fn mirror_pods_are_kept_aside_and_invalid_pods_are_failed() {
        let api = FakeApiServer::new();
        let mut mirror = pod("static-web-n1", "n1");
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
        let mirror = api.put_pod(mirror);
        let mut bad = pod("bad", "n1");
        bad["spec"]["restartPolicy"] = json!("Sometimes");
        api.put_pod(bad);
        api.put_pod(pod("good", "n1"));
        let store = PodStatusStore::new();
        let mut source = ApiPodSource::new(connected(&api), store.clone());
        let first = source.next().await.expect("first set");
        assert_eq!(names(&first), ["good"]);
        let mut static_pod = crate::domain::pod::Pod::default();
        static_pod.metadata.name = "static-web-n1".into();
        static_pod.metadata.namespace = "default".into();
        let target = store
            .target_of(&static_pod)
            .expect("the mirror is the target");
        assert_eq!(target.uid, mirror["metadata"]["uid"]);
        for _ in 0..50 {
            if api
                .pod("default", "bad")
                .is_some_and(|p| p["status"]["phase"] == "Failed")
            {
                break;
            }
            tokio::task::yield_now().await;
        }
        let bad = api.pod("default", "bad").expect("bad pod");
        assert_eq!(bad["status"]["reason"], "InvalidPod");
        assert!(bad["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.restartPolicy: Unsupported value: \"Sometimes\"")));
    }
}
