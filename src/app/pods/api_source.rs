//! The API server as a pod source: the pods bound to the node (`spec.nodeName=<node>`),
//! listed once the node is registered, then watched; a full relist when the watch's
//! resource version expires (410 Gone) or the watch breaks. Each change yields the whole
//! set (source `api`), so the pod manager stays the same for every source.
//!
//! Mirror pods are never run: they are kept aside by their static pod's full name, for
//! the status writer. A pod rkubelet cannot decode or validate is failed in the API with
//! its errors, once, and the other pods go on.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use crate::app::node::failures::FailureLog;
use async_trait::async_trait;
use futures_util::FutureExt;
use serde_json::Value;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::status::{PodStatusStore, StatusTarget};
use crate::app::node::ConnectedNode;
use crate::domain::kuberuntime::backoff::BackoffPolicy;
use crate::domain::pod::api::{classify_api_object, ApiObject, ApiPod, InvalidApiPod, API_SOURCE};
use crate::domain::pod::full_name;
use crate::domain::status::{stamp_status, status_patch, ApiPodStatus};
use crate::ports::api::{PodApi, PodWatch, PodWatchEvent, PodsError};
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
    resource_version: String,
    watch: Option<Box<dyn PodWatch>>,
    /// Invalid pods already failed in the API (by uid).
    reported: BTreeSet<String>,
    failures: u32,
    /// An outage logs its first failure, one line a minute and its end.
    failure_log: FailureLog,
    /// Pods deleted since the last update, in their final state.
    deleted: Vec<ApiPod>,
    /// The set to hand on next (after one that still held deleted pods).
    queued: Option<PodSetUpdate>,
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
            resource_version: String::new(),
            watch: None,
            reported: BTreeSet::new(),
            failures: 0,
            failure_log: FailureLog::new("listing and watching the node's pods"),
            deleted: Vec::new(),
            queued: None,
        }
    }

    /// The clients and the node's name, once the node is registered.
    async fn api(&mut self) -> Option<(std::sync::Arc<dyn PodApi>, String)> {
        loop {
            if let Some(c) = &*self.connected.borrow_and_update() {
                // Before any API pod has a status: each shows the node's IP.
                self.store.set_host_ip(&c.host_ip);
                let pods = c.clients.borrow().pods.clone();
                return Some((pods, c.node_name.clone()));
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
            PodWatchEvent::Added(v) | PodWatchEvent::Modified(v) => {
                let version = meta(&v, "resourceVersion");
                let (uid, seen) = self.decode(&v);
                self.resource_version.clone_from(&version);
                self.seen.insert(uid, (version, seen));
            }
            PodWatchEvent::Deleted(v) => {
                let uid = meta(&v, "uid");
                // The last state decides the grace period of the termination (a force
                // deletion carries 0).
                let (_, seen) = self.decode(&v);
                self.resource_version = meta(&v, "resourceVersion");
                self.seen.remove(&uid);
                self.reported.remove(&uid);
                if let Seen::Pod(pod) = seen {
                    self.deleted.push(*pod);
                }
            }
            PodWatchEvent::Bookmark(version) => self.resource_version = version,
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
            debug!(pod = %full_name(&pod.pod), "pod deleted in the API");
            with_deleted.pods.push(pod.pod);
        }
        self.queued = Some(update);
        with_deleted
    }

    async fn list(&mut self, api: &dyn PodApi, node: &str) -> Result<(), PodsError> {
        let list = api.list_pods(&selector(node)).await?;
        let mut fresh = BTreeMap::new();
        for item in &list.items {
            let version = meta(item, "resourceVersion");
            let (uid, seen) = self.decode(item);
            fresh.insert(uid, (version, seen));
        }
        self.seen = fresh;
        self.resource_version = list.resource_version;
        info!(node, pods = self.seen.len(), resource_version = %self.resource_version, "listed the node's pods");
        Ok(())
    }
}

#[async_trait]
impl PodSource for ApiPodSource {
    async fn next(&mut self) -> Option<PodSetUpdate> {
        if let Some(update) = self.queued.take() {
            return Some(update);
        }
        loop {
            let (api, node) = self.api().await?;
            let Some(watch) = self.watch.as_mut() else {
                // List (first, or after the watch expired or broke), then watch from it.
                if self.failures > 0 {
                    let delay = BackoffPolicy::SYNC_ERROR.delay_for_step(self.failures);
                    tokio::time::sleep(delay.min(Duration::from_secs(30))).await;
                }
                if let Err(error) = self.list(api.as_ref(), &node).await {
                    self.failures = self.failures.saturating_add(1);
                    self.failure_log.failed(&error);
                    continue;
                }
                match api
                    .watch_pods(&selector(&node), &self.resource_version)
                    .await
                {
                    Ok(watch) => {
                        self.failures = 0;
                        self.failure_log.succeeded();
                        self.watch = Some(watch);
                    }
                    Err(error) => {
                        self.failures = self.failures.saturating_add(1);
                        self.failure_log.failed(&error);
                    }
                }
                return Some(self.update());
            };
            let mut changed = false;
            let mut next = watch.next().await;
            let mut taken = 0;
            loop {
                match next {
                    Some(Ok(event)) => {
                        changed |= !matches!(event, PodWatchEvent::Bookmark(_));
                        self.apply(event);
                    }
                    Some(Err(PodsError::Gone { .. })) => {
                        info!("the pods' watch expired (410 Gone); listing again");
                        self.watch = None;
                        break;
                    }
                    Some(Err(error)) => {
                        warn!(error = %Chain(&error), "the pods' watch broke; listing again");
                        self.failures = self.failures.saturating_add(1);
                        self.watch = None;
                        break;
                    }
                    None => {
                        // The server ended the watch (its timeout): resume from where it was.
                        match api
                            .watch_pods(&selector(&node), &self.resource_version)
                            .await
                        {
                            Ok(w) => self.watch = Some(w),
                            Err(error) => {
                                debug!(error = %Chain(&error), "cannot resume the pods' watch; listing again");
                                self.watch = None;
                            }
                        }
                        break;
                    }
                }
                taken += 1;
                let Some(watch) = self.watch.as_mut() else {
                    break;
                };
                if taken >= MAX_EVENTS_PER_UPDATE {
                    break;
                }
                match watch.next().now_or_never() {
                    Some(n) => next = n,
                    None => break,
                }
            }
            if changed {
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

    fn connected(api: &FakeApiServer) -> watch::Receiver<Option<ConnectedNode>> {
        let (_, clients) = watch::channel(api.clients());
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

    #[tokio::test]
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

        // The watch's history is gone: 410, then a full relist.
        api.compact_pods();
        api.put_pod(pod("c", "n1"));
        let third = source.next().await.expect("relisted");
        assert_eq!(names(&third).len(), 3);
        assert_eq!(api.count("list pods"), 2);
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
