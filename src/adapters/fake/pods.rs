//! The fake API server's pods: stored as JSON with resource versions, a journal of every
//! change for watches, uid preconditions, graceful and immediate deletion.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::api::{apply_patch, FakeApiServer};
use crate::ports::api::{PodApi, PodList, PodWatch, PodWatchEvent, PodsError};

fn key(value: &Value) -> (String, String) {
    let meta = &value["metadata"];
    (
        meta["namespace"].as_str().unwrap_or("default").to_owned(),
        meta["name"].as_str().unwrap_or_default().to_owned(),
    )
}

fn selected(selector: &str, pod: &Value) -> bool {
    match selector.strip_prefix("spec.nodeName=") {
        Some(node) => pod["spec"]["nodeName"].as_str() == Some(node),
        None => true,
    }
}

fn event_object(event: &PodWatchEvent) -> Option<&Value> {
    match event {
        PodWatchEvent::Applied(v) | PodWatchEvent::Deleted(v) => Some(v),
        PodWatchEvent::Listed(_) => None,
    }
}

impl FakeApiServer {
    /// Store `pod` (created or replaced), as a user's `kubectl apply` would: a uid when
    /// it has none, a new resource version, and a watch event.
    pub fn put_pod(&self, mut pod: Value) -> Value {
        let mut s = self.lock();
        s.version += 1;
        let version = s.version;
        let k = key(&pod);
        pod["metadata"]["namespace"] = json!(k.0);
        if pod["metadata"]["uid"].as_str().is_none_or(str::is_empty) {
            pod["metadata"]["uid"] = json!(format!("uid-{}-{}", k.1, version));
        }
        pod["metadata"]["resourceVersion"] = json!(version.to_string());
        s.pods.insert(k, pod.clone());
        s.pod_events
            .push((version, PodWatchEvent::Applied(pod.clone())));
        drop(s);
        self.pods_changed.notify_waiters();
        pod
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Value> {
        self.lock()
            .pods
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Remove the pod at once, as the API server does once the kubelet deleted it.
    pub fn remove_pod(&self, namespace: &str, name: &str) {
        let mut s = self.lock();
        if let Some(pod) = s.pods.remove(&(namespace.to_owned(), name.to_owned())) {
            s.version += 1;
            let version = s.version;
            s.pod_events.push((version, PodWatchEvent::Deleted(pod)));
        }
        drop(s);
        self.pods_changed.notify_waiters();
    }

    /// Forget the watch history: every open watch gets 410 Gone.
    pub fn compact_pods(&self) {
        let mut s = self.lock();
        s.pods_compacted = s.version + 1;
        s.pod_events.clear();
        drop(s);
        self.pods_changed.notify_waiters();
    }
}

/// The watch as kube-runtime's keeps itself going: a list (journaled `list pods`), then
/// the journal's changes from the list's version (`watch pods`); 410 Gone when the
/// journal was compacted past it, then a list again; a pause after a failure, as the
/// real watch's back-off.
struct FakePodWatch {
    server: FakeApiServer,
    selector: String,
    /// The version the watch is at; `None`: list first.
    from: Option<u64>,
    /// After a failure: not before then (kept when a call is dropped while it waits).
    retry_at: Option<tokio::time::Instant>,
}

/// The fake watch's back-off after a failure (the real one starts at 800 ms).
const FAKE_WATCH_BACKOFF: std::time::Duration = std::time::Duration::from_millis(800);

impl FakePodWatch {
    fn list(&mut self) -> Result<PodWatchEvent, PodsError> {
        let pods = self
            .server
            .list(&self.selector)
            .map_err(|source| PodsError::Call {
                verb: "list",
                namespace: String::new(),
                name: String::new(),
                source,
            })?;
        drop(self.server.begin(format!("watch pods {}", self.selector)));
        self.from = Some(pods.version);
        Ok(PodWatchEvent::Listed(pods.items))
    }
}

#[async_trait]
impl PodWatch for FakePodWatch {
    async fn next(&mut self) -> Option<Result<PodWatchEvent, PodsError>> {
        if let Some(at) = self.retry_at {
            tokio::time::sleep_until(at).await;
            self.retry_at = None;
        }
        let backoff = || Some(tokio::time::Instant::now() + FAKE_WATCH_BACKOFF);
        loop {
            let Some(from) = self.from else {
                let listed = self.list();
                if listed.is_err() {
                    self.retry_at = backoff();
                }
                return Some(listed);
            };
            let notified = self.server.pods_changed.notified();
            {
                let s = self.server.lock();
                if from < s.pods_compacted {
                    self.from = None;
                    self.retry_at = backoff();
                    return Some(Err(PodsError::Gone {
                        message: format!("too old resource version: {from}"),
                    }));
                }
                let next = s.pod_events.iter().find(|(v, e)| {
                    *v > from && event_object(e).is_some_and(|o| selected(&self.selector, o))
                });
                if let Some((v, e)) = next {
                    self.from = Some(*v);
                    return Some(Ok(e.clone()));
                }
            }
            notified.await;
        }
    }
}

/// The pods a list returns, and the version it was read at.
struct Listed {
    items: Vec<Value>,
    version: u64,
}

impl FakeApiServer {
    fn list(&self, field_selector: &str) -> Result<Listed, crate::ports::api::CallError> {
        let s = self.begin(format!("list pods {field_selector}"))?;
        Ok(Listed {
            items: s
                .pods
                .values()
                .filter(|p| selected(field_selector, p))
                .cloned()
                .collect(),
            version: s.version,
        })
    }
}

#[async_trait]
impl PodApi for FakeApiServer {
    async fn list_pods(&self, field_selector: &str) -> Result<PodList, PodsError> {
        let listed = self
            .list(field_selector)
            .map_err(|source| PodsError::Call {
                verb: "list",
                namespace: String::new(),
                name: String::new(),
                source,
            })?;
        Ok(PodList {
            items: listed.items,
            resource_version: listed.version.to_string(),
        })
    }

    fn watch_pods(&self, field_selector: &str) -> Box<dyn PodWatch> {
        Box::new(FakePodWatch {
            server: self.clone(),
            selector: field_selector.to_owned(),
            from: None,
            retry_at: None,
        })
    }

    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, PodsError> {
        let mut s = self
            .begin(format!("patch podstatus {namespace}/{name}"))
            .map_err(|source| PodsError::Call {
                verb: "patch status of",
                namespace: namespace.into(),
                name: name.into(),
                source,
            })?;
        let k = (namespace.to_owned(), name.to_owned());
        let not_found = || PodsError::NotFound {
            namespace: namespace.into(),
            name: name.into(),
        };
        let pod = s.pods.get(&k).cloned().ok_or_else(not_found)?;
        if let Some(uid) = patch["metadata"]["uid"].as_str() {
            if pod["metadata"]["uid"].as_str() != Some(uid) {
                return Err(PodsError::Conflict {
                    namespace: namespace.into(),
                    name: name.into(),
                });
            }
        }
        let mut pod = pod;
        let mut status = pod["status"].take();
        if status.is_null() {
            status = json!({});
        }
        apply_patch(&mut status, &patch["status"]);
        pod["status"] = status;
        s.version += 1;
        let version = s.version;
        pod["metadata"]["resourceVersion"] = json!(version.to_string());
        s.pods.insert(k, pod.clone());
        s.pod_events
            .push((version, PodWatchEvent::Applied(pod.clone())));
        drop(s);
        self.pods_changed.notify_waiters();
        Ok(pod)
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period_seconds: i64,
    ) -> Result<(), PodsError> {
        let s = self
            .begin(format!(
                "delete pod {namespace}/{name} grace={grace_period_seconds}"
            ))
            .map_err(|source| PodsError::Call {
                verb: "delete",
                namespace: namespace.into(),
                name: name.into(),
                source,
            })?;
        let Some(pod) = s.pods.get(&(namespace.to_owned(), name.to_owned())) else {
            return Err(PodsError::NotFound {
                namespace: namespace.into(),
                name: name.into(),
            });
        };
        if pod["metadata"]["uid"].as_str() != Some(uid) {
            return Err(PodsError::Conflict {
                namespace: namespace.into(),
                name: name.into(),
            });
        }
        let mut pod = pod.clone();
        drop(s);
        if grace_period_seconds == 0 {
            self.remove_pod(namespace, name);
        } else {
            pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            pod["metadata"]["deletionGracePeriodSeconds"] = json!(grace_period_seconds);
            self.put_pod(pod);
        }
        Ok(())
    }
}
