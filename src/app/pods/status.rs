//! The status manager: each pod's spec and its latest API status, served by `/pods`.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::{json, Value};
use tracing::info;

use crate::domain::pod::{full_name, Pod};
use crate::domain::status::ApiPodStatus;

#[derive(Debug, Clone)]
struct PodRecord {
    pod: Pod,
    status: ApiPodStatus,
}

/// The status manager: each pod's spec and its latest API status, for `/pods`.
#[derive(Debug, Clone, Default)]
pub struct PodStatusStore {
    pods: Arc<RwLock<BTreeMap<String, PodRecord>>>,
}

impl PodStatusStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn set(&self, pod: &Pod, status: ApiPodStatus) {
        let mut pods = self.pods.write().unwrap_or_else(|e| e.into_inner());
        let uid = pod.metadata.uid.clone();
        let changed = pods.get(&uid).is_none_or(|r| r.status != status);
        if changed {
            let phase = &status.phase;
            info!(pod = %full_name(pod), %uid, %phase, "pod status");
        }
        pods.insert(
            uid,
            PodRecord {
                pod: pod.clone(),
                status,
            },
        );
    }

    pub(super) fn remove(&self, uid: &str) {
        self.pods
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }

    /// The pods the kubelet still runs (their phase is neither Failed nor Succeeded):
    /// what the eviction manager may evict.
    pub fn active_pods(&self) -> Vec<Pod> {
        let pods = self.pods.read().unwrap_or_else(|e| e.into_inner());
        pods.values()
            .filter(|r| !r.status.is_terminal())
            .map(|r| r.pod.clone())
            .collect()
    }

    /// The uids of every pod with a status.
    pub fn pod_uids(&self) -> Vec<String> {
        let pods = self.pods.read().unwrap_or_else(|e| e.into_inner());
        pods.keys().cloned().collect()
    }

    /// The pod's latest status.
    pub fn status_of(&self, uid: &str) -> Option<ApiPodStatus> {
        let pods = self.pods.read().unwrap_or_else(|e| e.into_inner());
        pods.get(uid).map(|r| r.status.clone())
    }

    /// The pod `namespace/name` with its latest status (the kubelet API's logs).
    pub fn find(&self, namespace: &str, name: &str) -> Option<(Pod, ApiPodStatus)> {
        let pods = self.pods.read().unwrap_or_else(|e| e.into_inner());
        pods.values()
            .find(|r| r.pod.metadata.namespace == namespace && r.pod.metadata.name == name)
            .map(|r| (r.pod.clone(), r.status.clone()))
    }

    /// The pods as a `v1.PodList`.
    pub fn pod_list(&self) -> Value {
        let pods = self.pods.read().unwrap_or_else(|e| e.into_inner());
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
