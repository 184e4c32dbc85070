//! The status manager: each pod's spec and its latest API status, served by `/pods` and,
//! in connected mode, written to the API by `api_status`. A status is stamped here
//! (start time, condition transition times, host IP: `domain::status::stamp_status`), so
//! `/pods` and the API show the same values.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{json, Value};
use tokio::sync::Notify;
use tracing::info;

use crate::domain::pod::api::is_api_pod;
use crate::domain::pod::{full_name, log_ref, Pod};
use crate::domain::status::{
    apply_readiness_gates, host_network_pod_ip, same_status, stamp_status, ApiPodStatus,
};
use crate::domain::units::time::{parse_rfc3339, rfc3339_seconds};
use crate::ports::clock::Clock;

#[derive(Debug, Clone)]
pub(crate) struct PodRecord {
    pub(crate) pod: Pod,
    pub(crate) status: ApiPodStatus,
    /// Terminated because it is being deleted in the API: once this final status is
    /// written, the pod is deleted there (grace 0, uid precondition).
    pub(crate) delete_when_written: bool,
}

/// Where a pod's status goes in the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusTarget {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What the API pod source knows beyond the pods it runs.
#[derive(Debug, Default)]
struct ApiView {
    /// Mirror pods by the full name of their static pod (upstream's `GetMirrorPodByPod`).
    mirrors: BTreeMap<String, StatusTarget>,
    /// The status the API holds, by the uid of the API object.
    statuses: HashMap<String, ApiPodStatus>,
}

#[derive(Default)]
struct Inner {
    pods: RwLock<BTreeMap<String, PodRecord>>,
    api: RwLock<ApiView>,
    host_ip: RwLock<String>,
    clock: RwLock<Option<Arc<dyn Clock>>>,
    /// Pods whose status changed since the writer last looked.
    dirty: Mutex<BTreeSet<String>>,
    changed: Notify,
    /// Whether a writer takes the changes (connected mode): without one, `dirty` would
    /// keep every uid that ever changed (the simulated soak's memory grew with it).
    tracks_changes: std::sync::atomic::AtomicBool,
}

/// The status manager: each pod's spec and its latest API status, for `/pods`.
#[derive(Clone, Default)]
pub struct PodStatusStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PodStatusStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodStatusStore").finish_non_exhaustive()
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

impl PodStatusStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Times come from `clock` (the system's time without one).
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        *write(&self.inner.clock) = Some(clock);
        self
    }

    /// The node's IP, reported as each pod's `hostIP`.
    pub fn set_host_ip(&self, ip: &str) {
        ip.clone_into(&mut write(&self.inner.host_ip));
    }

    fn now(&self) -> String {
        let nanos = match &*read(&self.inner.clock) {
            Some(clock) => clock.now_unix_nanos(),
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        };
        rfc3339_seconds(nanos)
    }

    /// Where `pod`'s status goes in the API: the pod itself for an API pod, its mirror
    /// for a static pod that has one, nowhere otherwise.
    pub fn target_of(&self, pod: &Pod) -> Option<StatusTarget> {
        if is_api_pod(pod) {
            return Some(StatusTarget {
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            });
        }
        read(&self.inner.api).mirrors.get(&full_name(pod)).cloned()
    }

    /// The status the API holds for `target` (as last seen by the pod source).
    pub fn api_status(&self, target_uid: &str) -> Option<ApiPodStatus> {
        read(&self.inner.api).statuses.get(target_uid).cloned()
    }

    /// The pod source's view of the API: the mirror pods by static pod full name, and
    /// the statuses the API holds by uid (replacing the previous view).
    pub fn set_api_view(
        &self,
        mirrors: BTreeMap<String, StatusTarget>,
        statuses: HashMap<String, ApiPodStatus>,
    ) {
        let mut api = write(&self.inner.api);
        let mirrors_changed = api.mirrors != mirrors;
        api.mirrors = mirrors;
        api.statuses = statuses;
        drop(api);
        self.follow_readiness_gates();
        if mirrors_changed {
            // A static pod's status goes to its new mirror.
            let uids: Vec<String> = read(&self.inner.pods).keys().cloned().collect();
            self.mark_dirty(uids);
        }
    }

    /// A writer will take the changes from now on ([`Self::changed`]).
    pub(crate) fn track_changes(&self) {
        self.inner
            .tracks_changes
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// A controller set a readiness gate's condition: the pods with gates take it into
    /// their `Ready` at once, not at their next sync.
    fn follow_readiness_gates(&self) {
        let host_ip = read(&self.inner.host_ip).clone();
        let now = self.now();
        let mut changed = Vec::new();
        let mut pods = write(&self.inner.pods);
        for (uid, record) in pods
            .iter_mut()
            .filter(|(_, r)| !r.pod.spec.readiness_gates.is_empty())
        {
            let Some(api) = self
                .target_of(&record.pod)
                .and_then(|target| self.api_status(&target.uid))
            else {
                continue;
            };
            let mut status = record.status.clone();
            if apply_readiness_gates(&record.pod, &mut status, &api.conditions) {
                stamp_status(Some(&record.status), &mut status, &host_ip, &now);
                record.status = status;
                changed.push(uid.clone());
            }
        }
        drop(pods);
        self.mark_dirty(changed);
    }

    fn mark_dirty(&self, uids: impl IntoIterator<Item = String>) {
        if !self
            .inner
            .tracks_changes
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let mut dirty = self.inner.dirty.lock().unwrap_or_else(|e| e.into_inner());
        dirty.extend(uids);
        drop(dirty);
        self.inner.changed.notify_one();
    }

    pub(crate) fn set(&self, pod: &Pod, status: ApiPodStatus) {
        self.record(pod, status, false);
    }

    /// The final status of a pod terminated for its deletion in the API: written, and the
    /// pod then deleted there.
    pub(crate) fn set_final(&self, pod: &Pod, status: ApiPodStatus) {
        self.record(pod, status, true);
    }

    fn record(&self, pod: &Pod, mut status: ApiPodStatus, delete_when_written: bool) {
        let uid = pod.metadata.uid.clone();
        let in_api = self
            .target_of(pod)
            .and_then(|target| self.api_status(&target.uid));
        let api_conditions = in_api.as_ref().map_or(&[][..], |s| &s.conditions[..]);
        apply_readiness_gates(pod, &mut status, api_conditions);
        let previous = read(&self.inner.pods).get(&uid).map(|r| r.status.clone());
        let previous = previous.or(in_api);
        let host_ip = read(&self.inner.host_ip).clone();
        stamp_status(previous.as_ref(), &mut status, &host_ip, &self.now());
        host_network_pod_ip(&mut status, pod.spec.host_network, &host_ip);
        let mut pods = write(&self.inner.pods);
        let before = pods.get(&uid);
        let changed = before.is_none_or(|r| {
            !same_status(&r.status, &status) || r.delete_when_written != delete_when_written
        });
        if changed && before.is_none_or(|r| r.status.phase != status.phase) {
            let phase = &status.phase;
            info!(pod = %log_ref(pod), %uid, %phase, "pod status");
        }
        pods.insert(
            uid.clone(),
            PodRecord {
                pod: pod.clone(),
                status,
                delete_when_written,
            },
        );
        drop(pods);
        if changed {
            self.mark_dirty([uid]);
        }
    }

    /// Forgets the pod; the writer is told, so that it forgets what it kept of it too.
    pub(super) fn remove(&self, uid: &str) {
        if write(&self.inner.pods).remove(uid).is_some() {
            self.mark_dirty([uid.to_owned()]);
        }
    }

    /// When the pod started, as its status says: the kubelet's record, else the API's
    /// (kept across restarts), as Unix nanoseconds.
    pub(crate) fn start_time(&self, pod: &Pod) -> Option<i64> {
        let recorded = read(&self.inner.pods)
            .get(&pod.metadata.uid)
            .and_then(|r| r.status.start_time.clone());
        recorded
            .or_else(|| {
                self.target_of(pod)
                    .and_then(|target| self.api_status(&target.uid))
                    .and_then(|s| s.start_time)
            })
            .as_deref()
            .and_then(parse_rfc3339)
    }

    /// Whether the store still has the pod.
    pub(crate) fn has(&self, uid: &str) -> bool {
        read(&self.inner.pods).contains_key(uid)
    }

    /// The record of a pod, for the API writer.
    pub(crate) fn record_of(&self, uid: &str) -> Option<PodRecord> {
        read(&self.inner.pods).get(uid).cloned()
    }

    /// Waits until a status changed, then takes the pods that changed.
    pub(crate) async fn changed(&self) -> BTreeSet<String> {
        loop {
            let taken =
                std::mem::take(&mut *self.inner.dirty.lock().unwrap_or_else(|e| e.into_inner()));
            if !taken.is_empty() {
                return taken;
            }
            self.inner.changed.notified().await;
        }
    }

    /// The pods the kubelet still runs (their phase is neither Failed nor Succeeded):
    /// what the eviction manager may evict.
    pub fn active_pods(&self) -> Vec<Pod> {
        read(&self.inner.pods)
            .values()
            .filter(|r| !r.status.is_terminal())
            .map(|r| r.pod.clone())
            .collect()
    }

    /// The uids of every pod with a status.
    pub fn pod_uids(&self) -> Vec<String> {
        read(&self.inner.pods).keys().cloned().collect()
    }

    /// The pod's latest status.
    pub fn status_of(&self, uid: &str) -> Option<ApiPodStatus> {
        read(&self.inner.pods).get(uid).map(|r| r.status.clone())
    }

    /// The pod `namespace/name` with its latest status (the kubelet API's logs).
    pub fn find(&self, namespace: &str, name: &str) -> Option<(Pod, ApiPodStatus)> {
        let pods = read(&self.inner.pods);
        pods.values()
            .find(|r| r.pod.metadata.namespace == namespace && r.pod.metadata.name == name)
            .map(|r| (r.pod.clone(), r.status.clone()))
    }

    /// The pods as a `v1.PodList`.
    pub fn pod_list(&self) -> Value {
        let pods = read(&self.inner.pods);
        let items: Vec<Value> = pods
            .values()
            .map(|r| {
                let mut item = serde_json::to_value(&r.pod).unwrap_or_else(|_| json!({}));
                item["kind"] = json!("Pod");
                item["apiVersion"] = json!("v1");
                item["status"] = serde_json::to_value(&r.status).unwrap_or_else(|_| json!({}));
                item
            })
            .collect();
        json!({"kind": "PodList", "apiVersion": "v1", "items": items})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = format!("p-{uid}");
        pod.metadata.namespace = "default".into();
        pod.metadata.uid = uid.into();
        pod
    }

    fn dirty(store: &PodStatusStore) -> usize {
        store
            .inner
            .dirty
            .lock()
            .map(|d| d.len())
            .unwrap_or(usize::MAX)
    }

    #[test]
    fn changes_are_kept_only_for_a_writer() {
        let standalone = PodStatusStore::new();
        for uid in ["a", "b", "c"] {
            standalone.set(&pod(uid), ApiPodStatus::default());
            standalone.remove(uid);
        }
        assert_eq!(dirty(&standalone), 0, "no writer: nothing kept per pod");
        let connected = PodStatusStore::new();
        connected.track_changes();
        connected.set(&pod("a"), ApiPodStatus::default());
        assert_eq!(dirty(&connected), 1);
    }
}
