//! An in-memory API server for the node's ports: Nodes, Leases, Events and CSRs with
//! resource versions, conflicts and a journal of every call; it can be taken down and
//! brought back, and CSRs are approved by the test. Never proof the kube adapter works.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::domain::node_status::model::{Event, Lease, NodeObject};
use crate::domain::pod::mirror::MirrorPod;
use crate::domain::pod::CONFIG_MIRROR_ANNOTATION;
use crate::ports::api::{
    ApiClients, ApiConnector, CallError, CallErrorKind, CertificateApi, CertificatesError,
    ConnectError, CsrRef, CsrRequest, EventApi, EventsError, KubeconfigSummary, LeaseApi,
    LeasesError, MirrorList, MirrorPodApi, MirrorPodsError, NodeApi, NodesError,
};

/// A stored CSR and its outcome.
#[derive(Debug, Clone)]
pub struct FakeCsr {
    pub request: CsrRequest,
    pub uid: String,
    pub certificate: Option<Vec<u8>>,
    pub denied: bool,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) version: u64,
    down: bool,
    nodes: BTreeMap<String, NodeObject>,
    leases: BTreeMap<(String, String), Lease>,
    events: BTreeMap<(String, String), Event>,
    csrs: BTreeMap<String, FakeCsr>,
    /// Bumped at every change of `pods`.
    pods_version: u64,
    /// `verb resource name`, one per call, in order.
    journal: Vec<String>,
    /// Patches of node status, in order.
    status_patches: Vec<Value>,
    /// A one-shot conflict on the next lease update (someone else wrote it).
    conflict_next_lease_update: bool,
    /// Pods by namespace and name (the node's pods and mirror pods, one store for both
    /// ports), and every change to them (see `pods`).
    pub(super) pods: BTreeMap<(String, String), Value>,
    pub(super) pod_events: Vec<(u64, crate::ports::api::PodWatchEvent)>,
    /// Watches from before this version get 410 Gone.
    pub(super) pods_compacted: u64,
    csi_nodes: BTreeMap<String, crate::ports::api::CsiNodeObject>,
}

/// The fake API server; clone it to share.
#[derive(Debug, Clone, Default)]
pub struct FakeApiServer {
    state: Arc<Mutex<State>>,
    /// Wakes pod watches.
    pub(super) pods_changed: Arc<tokio::sync::Notify>,
}

fn unreachable() -> CallError {
    CallError::new(
        CallErrorKind::Unreachable,
        "connection refused (fake API server is down)",
    )
}

/// A JSON merge of `patch` into `target`, enough for the strategic patches the kubelet sends:
/// objects merge, null removes, `conditions` merge by type, a list ending in
/// `{"$patch": "replace"}` replaces, other lists replace.
pub(super) fn apply_patch(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else if k == "conditions" {
                    let existing = t.entry(k.clone()).or_insert(Value::Array(vec![]));
                    merge_by_type(existing, v);
                } else {
                    apply_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, Value::Array(items)) => {
            *t = Value::Array(
                items
                    .iter()
                    .filter(|i| i.get("$patch").is_none())
                    .cloned()
                    .collect(),
            );
        }
        (t, p) => *t = p.clone(),
    }
}

fn merge_by_type(existing: &mut Value, patch: &Value) {
    let (Value::Array(list), Value::Array(items)) = (existing, patch) else {
        return;
    };
    for item in items {
        match list.iter_mut().find(|e| e.get("type") == item.get("type")) {
            Some(e) => apply_patch(e, item),
            None => list.push(item.clone()),
        }
    }
}

impl FakeApiServer {
    pub fn new() -> FakeApiServer {
        FakeApiServer::default()
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The port set a connector would hand out.
    pub fn clients(&self) -> ApiClients {
        let me = Arc::new(self.clone());
        ApiClients {
            server: "fake://apiserver".into(),
            nodes: me.clone(),
            leases: me.clone(),
            events: me.clone(),
            mirror_pods: me.clone(),
            certificates: me.clone(),
            objects: Arc::new(super::FakeObjects::default()),
            storage: me.clone(),
            pods: me,
        }
    }

    /// Every call from now on fails as unreachable (or works again).
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }

    pub fn journal(&self) -> Vec<String> {
        self.lock().journal.clone()
    }

    /// How many journal entries start with `prefix` (e.g. `"update lease"`).
    pub fn count(&self, prefix: &str) -> usize {
        self.lock()
            .journal
            .iter()
            .filter(|j| j.starts_with(prefix))
            .count()
    }

    pub fn node(&self, name: &str) -> Option<NodeObject> {
        self.lock().nodes.get(name).cloned()
    }

    /// The CSINode `name`, as stored.
    pub fn csi_node(&self, name: &str) -> Option<crate::ports::api::CsiNodeObject> {
        self.lock().csi_nodes.get(name).cloned()
    }

    pub fn put_node(&self, node: NodeObject) {
        let mut s = self.lock();
        s.version += 1;
        let mut node = node;
        node.metadata.resource_version = s.version.to_string();
        if node.metadata.uid.is_empty() {
            node.metadata.uid = format!("uid-{}", node.metadata.name);
        }
        s.nodes.insert(node.metadata.name.clone(), node);
    }

    pub fn lease(&self, namespace: &str, name: &str) -> Option<Lease> {
        self.lock()
            .leases
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    pub fn events(&self) -> Vec<Event> {
        self.lock().events.values().cloned().collect()
    }

    pub fn status_patches(&self) -> Vec<Value> {
        self.lock().status_patches.clone()
    }

    pub fn conflict_next_lease_update(&self) {
        self.lock().conflict_next_lease_update = true;
    }

    pub fn csrs(&self) -> BTreeMap<String, FakeCsr> {
        self.lock().csrs.clone()
    }

    /// Approve and sign a pending CSR with `certificate` (PEM).
    pub fn issue(&self, name: &str, certificate: &[u8]) {
        if let Some(csr) = self.lock().csrs.get_mut(name) {
            csr.certificate = Some(certificate.to_vec());
        }
    }

    pub fn deny(&self, name: &str) {
        if let Some(csr) = self.lock().csrs.get_mut(name) {
            csr.denied = true;
        }
    }

    /// Marks a pod for deletion, as `kubectl delete` does to a pod bound to a node.
    pub fn mark_pod_deleted(&self, namespace: &str, name: &str) {
        let mut s = self.lock();
        if let Some(pod) = s.pods.get_mut(&(namespace.to_string(), name.to_string())) {
            pod["metadata"]["deletionTimestamp"] = Value::from("2026-11-23T19:00:00Z");
        }
        s.pods_version += 1;
    }

    pub(super) fn begin(&self, entry: String) -> Result<MutexGuard<'_, State>, CallError> {
        let mut s = self.lock();
        s.journal.push(entry);
        if s.down {
            return Err(unreachable());
        }
        Ok(s)
    }

    fn patched_node(
        &self,
        verb: &'static str,
        name: &str,
        patch: &Value,
    ) -> Result<NodeObject, NodesError> {
        let call = |source| NodesError::Call {
            verb,
            name: name.into(),
            source,
        };
        let mut s = self.begin(format!("{verb} node {name}")).map_err(call)?;
        if verb == "patch status" {
            s.status_patches.push(patch.clone());
        }
        let Some(node) = s.nodes.get(name) else {
            return Err(NodesError::NotFound { name: name.into() });
        };
        let mut value = serde_json::to_value(node)
            .map_err(|e| call(CallError::new(CallErrorKind::Decode, e.to_string())))?;
        apply_patch(&mut value, patch);
        let mut patched: NodeObject = serde_json::from_value(value)
            .map_err(|e| call(CallError::new(CallErrorKind::Invalid, e.to_string())))?;
        s.version += 1;
        patched.metadata.resource_version = s.version.to_string();
        s.nodes.insert(name.into(), patched.clone());
        Ok(patched)
    }
}

#[async_trait]
impl NodeApi for FakeApiServer {
    async fn get_node(&self, name: &str) -> Result<NodeObject, NodesError> {
        let s = self
            .begin(format!("get node {name}"))
            .map_err(|source| NodesError::Call {
                verb: "get",
                name: name.into(),
                source,
            })?;
        s.nodes
            .get(name)
            .cloned()
            .ok_or_else(|| NodesError::NotFound { name: name.into() })
    }

    async fn create_node(&self, node: &NodeObject) -> Result<NodeObject, NodesError> {
        let name = node.metadata.name.clone();
        let mut s = self
            .begin(format!("create node {name}"))
            .map_err(|source| NodesError::Call {
                verb: "create",
                name: name.clone(),
                source,
            })?;
        if s.nodes.contains_key(&name) {
            return Err(NodesError::AlreadyExists { name });
        }
        s.version += 1;
        let mut stored = node.clone();
        stored.metadata.uid = format!("uid-{name}");
        stored.metadata.resource_version = s.version.to_string();
        s.nodes.insert(name, stored.clone());
        Ok(stored)
    }

    async fn patch_node_status(&self, name: &str, patch: &Value) -> Result<NodeObject, NodesError> {
        self.patched_node("patch status", name, patch)
    }

    async fn patch_node(&self, name: &str, patch: &Value) -> Result<NodeObject, NodesError> {
        self.patched_node("patch", name, patch)
    }
}

#[async_trait]
impl LeaseApi for FakeApiServer {
    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Lease, LeasesError> {
        let s = self
            .begin(format!("get lease {namespace}/{name}"))
            .map_err(|source| LeasesError::Call {
                verb: "get",
                namespace: namespace.into(),
                name: name.into(),
                source,
            })?;
        s.leases
            .get(&(namespace.into(), name.into()))
            .cloned()
            .ok_or_else(|| LeasesError::NotFound {
                namespace: namespace.into(),
                name: name.into(),
            })
    }

    async fn create_lease(&self, lease: &Lease) -> Result<Lease, LeasesError> {
        let (namespace, name) = (
            lease.metadata.namespace.clone(),
            lease.metadata.name.clone(),
        );
        let mut s = self
            .begin(format!("create lease {namespace}/{name}"))
            .map_err(|source| LeasesError::Call {
                verb: "create",
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
        let key = (namespace.clone(), name.clone());
        if s.leases.contains_key(&key) {
            return Err(LeasesError::AlreadyExists { namespace, name });
        }
        s.version += 1;
        let mut stored = lease.clone();
        stored.metadata.resource_version = s.version.to_string();
        s.leases.insert(key, stored.clone());
        Ok(stored)
    }

    async fn update_lease(&self, lease: &Lease) -> Result<Lease, LeasesError> {
        let (namespace, name) = (
            lease.metadata.namespace.clone(),
            lease.metadata.name.clone(),
        );
        let mut s = self
            .begin(format!("update lease {namespace}/{name}"))
            .map_err(|source| LeasesError::Call {
                verb: "update",
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
        let key = (namespace.clone(), name.clone());
        let Some(stored_version) = s
            .leases
            .get(&key)
            .map(|l| l.metadata.resource_version.clone())
        else {
            return Err(LeasesError::NotFound { namespace, name });
        };
        if std::mem::take(&mut s.conflict_next_lease_update)
            || stored_version != lease.metadata.resource_version
        {
            s.version += 1;
            let v = s.version.to_string();
            if let Some(l) = s.leases.get_mut(&key) {
                l.metadata.resource_version = v;
            }
            return Err(LeasesError::Conflict { namespace, name });
        }
        s.version += 1;
        let mut stored = lease.clone();
        stored.metadata.resource_version = s.version.to_string();
        s.leases.insert(key, stored.clone());
        Ok(stored)
    }
}

fn mirror_of(pod: &Value) -> Option<MirrorPod> {
    let meta = &pod["metadata"];
    let hash = meta["annotations"][CONFIG_MIRROR_ANNOTATION].as_str()?;
    let text = |key: &str| meta[key].as_str().unwrap_or_default().to_owned();
    Some(MirrorPod {
        namespace: text("namespace"),
        name: text("name"),
        uid: text("uid"),
        mirror_hash: hash.to_owned(),
        deleting: meta.get("deletionTimestamp").is_some(),
    })
}

#[async_trait]
impl MirrorPodApi for FakeApiServer {
    async fn list_mirror_pods(&self, node: &str) -> Result<MirrorList, MirrorPodsError> {
        let s =
            self.begin(format!("list pods {node}"))
                .map_err(|source| MirrorPodsError::Call {
                    verb: "list",
                    namespace: String::new(),
                    name: node.into(),
                    source,
                })?;
        Ok(MirrorList {
            mirrors: s
                .pods
                .values()
                .filter(|p| p["spec"]["nodeName"] == node)
                .filter_map(mirror_of)
                .collect(),
            resource_version: s.pods_version.to_string(),
        })
    }

    async fn wait_mirror_change(
        &self,
        _node: &str,
        resource_version: &str,
        within: Duration,
    ) -> Result<(), MirrorPodsError> {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if self.lock().pods_version.to_string() != resource_version {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    async fn create_mirror_pod(&self, body: &Value) -> Result<(), MirrorPodsError> {
        let text = |key: &str| {
            body["metadata"][key]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let (namespace, name) = (text("namespace"), text("name"));
        let mut s = self
            .begin(format!("create pod {namespace}/{name}"))
            .map_err(|source| MirrorPodsError::Call {
                verb: "create",
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
        let key = (namespace.clone(), name.clone());
        if s.pods.contains_key(&key) {
            return Err(MirrorPodsError::AlreadyExists { namespace, name });
        }
        s.pods_version += 1;
        let mut pod = body.clone();
        pod["metadata"]["uid"] = Value::from(format!("uid-{}", s.pods_version));
        s.pods.insert(key, pod);
        Ok(())
    }

    async fn delete_mirror_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<(), MirrorPodsError> {
        let mut s = self
            .begin(format!("delete pod {namespace}/{name}"))
            .map_err(|source| MirrorPodsError::Call {
                verb: "delete",
                namespace: namespace.into(),
                name: name.into(),
                source,
            })?;
        let key = (namespace.to_string(), name.to_string());
        if s.pods
            .get(&key)
            .is_some_and(|p| p["metadata"]["uid"] == uid)
        {
            s.pods.remove(&key);
            s.pods_version += 1;
        }
        Ok(())
    }
}

#[async_trait]
impl EventApi for FakeApiServer {
    async fn create_event(&self, event: &Event) -> Result<Event, EventsError> {
        let (namespace, name) = (
            event.metadata.namespace.clone(),
            event.metadata.name.clone(),
        );
        let mut s = self
            .begin(format!("create event {namespace}/{name}"))
            .map_err(|source| EventsError::Call {
                verb: "create",
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
        s.events.insert((namespace, name), event.clone());
        Ok(event.clone())
    }

    async fn patch_event(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Event, EventsError> {
        let call = |source| EventsError::Call {
            verb: "patch",
            namespace: namespace.into(),
            name: name.into(),
            source,
        };
        let mut s = self
            .begin(format!("patch event {namespace}/{name}"))
            .map_err(call)?;
        let key = (namespace.to_string(), name.to_string());
        let Some(event) = s.events.get(&key) else {
            return Err(EventsError::NotFound {
                namespace: namespace.into(),
                name: name.into(),
            });
        };
        let mut value = serde_json::to_value(event)
            .map_err(|e| call(CallError::new(CallErrorKind::Decode, e.to_string())))?;
        apply_patch(&mut value, patch);
        let patched: Event = serde_json::from_value(value)
            .map_err(|e| call(CallError::new(CallErrorKind::Invalid, e.to_string())))?;
        s.events.insert(key, patched.clone());
        Ok(patched)
    }
}

#[async_trait]
impl CertificateApi for FakeApiServer {
    async fn create_csr(&self, request: &CsrRequest) -> Result<CsrRef, CertificatesError> {
        let mut s =
            self.begin("create csr".to_string())
                .map_err(|source| CertificatesError::Call {
                    verb: "create",
                    name: request.name.clone().unwrap_or_default(),
                    source,
                })?;
        s.version += 1;
        let name = request
            .name
            .clone()
            .unwrap_or_else(|| format!("csr-{}", s.version));
        if let Some(existing) = s.csrs.get(&name) {
            if existing.request.request_pem == request.request_pem {
                return Ok(CsrRef {
                    name,
                    uid: existing.uid.clone(),
                });
            }
            return Err(CertificatesError::Exists { name });
        }
        let uid = format!("csr-uid-{}", s.version);
        s.csrs.insert(
            name.clone(),
            FakeCsr {
                request: request.clone(),
                uid: uid.clone(),
                certificate: None,
                denied: false,
            },
        );
        Ok(CsrRef { name, uid })
    }

    async fn wait_for_certificate(
        &self,
        csr: &CsrRef,
        within: Duration,
    ) -> Result<Vec<u8>, CertificatesError> {
        let started = tokio::time::Instant::now();
        loop {
            {
                let s = self
                    .begin(format!("get csr {}", csr.name))
                    .map_err(|source| CertificatesError::Call {
                        verb: "watch",
                        name: csr.name.clone(),
                        source,
                    })?;
                match s.csrs.get(&csr.name) {
                    Some(c) if c.uid != csr.uid => {
                        return Err(CertificatesError::Gone {
                            name: csr.name.clone(),
                        })
                    }
                    None => {
                        return Err(CertificatesError::Gone {
                            name: csr.name.clone(),
                        })
                    }
                    Some(c) if c.denied => {
                        return Err(CertificatesError::Denied {
                            name: csr.name.clone(),
                            reason: "Denied".into(),
                            message: "denied by the test".into(),
                        })
                    }
                    Some(c) => {
                        if let Some(cert) = &c.certificate {
                            return Ok(cert.clone());
                        }
                    }
                }
            }
            if started.elapsed() >= within {
                return Err(CertificatesError::TimedOut {
                    name: csr.name.clone(),
                    waited: within,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A connector whose kubeconfigs are summaries the test sets; every connection reaches the
/// same fake API server. Records the paths connected with.
#[derive(Debug, Clone, Default)]
pub struct FakeConnector {
    pub server: FakeApiServer,
    kubeconfigs: Arc<Mutex<BTreeMap<PathBuf, KubeconfigSummary>>>,
    connections: Arc<Mutex<Vec<PathBuf>>>,
}

impl FakeConnector {
    pub fn new(server: FakeApiServer) -> Self {
        FakeConnector {
            server,
            ..FakeConnector::default()
        }
    }

    pub fn set_kubeconfig(&self, path: &Path, summary: KubeconfigSummary) {
        if let Ok(mut k) = self.kubeconfigs.lock() {
            k.insert(path.to_path_buf(), summary);
        }
    }

    pub fn connections(&self) -> Vec<PathBuf> {
        self.connections
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }
}

#[async_trait]
impl ApiConnector for FakeConnector {
    fn inspect(&self, path: &Path) -> Result<KubeconfigSummary, ConnectError> {
        self.kubeconfigs
            .lock()
            .ok()
            .and_then(|k| k.get(path).cloned())
            .ok_or_else(|| ConnectError::Kubeconfig {
                path: path.to_path_buf(),
                problem: "cannot read it: No such file or directory (os error 2)".into(),
                source: None,
            })
    }

    async fn connect(&self, path: &Path) -> Result<ApiClients, ConnectError> {
        self.inspect(path)?;
        if let Ok(mut c) = self.connections.lock() {
            c.push(path.to_path_buf());
        }
        Ok(self.server.clients())
    }

    /// Recorded as the pair's path (the credentials the clients use).
    async fn connect_as(&self, path: &Path, pair: &Path) -> Result<ApiClients, ConnectError> {
        self.inspect(path)?;
        if let Ok(mut c) = self.connections.lock() {
            c.push(pair.to_path_buf());
        }
        Ok(self.server.clients())
    }
}

#[async_trait]
impl crate::ports::api::CsiNodeApi for FakeApiServer {
    async fn get_csi_node(
        &self,
        name: &str,
    ) -> Result<Option<crate::ports::api::CsiNodeObject>, crate::ports::api::ObjectsError> {
        let mut state = self.lock();
        state.journal.push(format!("get csinode {name}"));
        Ok(state.csi_nodes.get(name).cloned())
    }

    async fn create_csi_node(
        &self,
        name: &str,
        _node_uid: &str,
        drivers: &[crate::domain::csi::CsiNodeDriver],
    ) -> Result<(), crate::ports::api::ObjectsError> {
        let mut state = self.lock();
        state.journal.push(format!("create csinode {name}"));
        state.version += 1;
        let object = crate::ports::api::CsiNodeObject {
            name: name.to_owned(),
            resource_version: state.version.to_string(),
            drivers: drivers.to_vec(),
        };
        state.csi_nodes.insert(name.to_owned(), object);
        Ok(())
    }

    async fn update_csi_node(
        &self,
        node: &crate::ports::api::CsiNodeObject,
    ) -> Result<(), crate::ports::api::ObjectsError> {
        let mut state = self.lock();
        state.journal.push(format!("update csinode {}", node.name));
        state.version += 1;
        let mut stored = node.clone();
        stored.resource_version = state.version.to_string();
        state.csi_nodes.insert(node.name.clone(), stored);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patches_merge_conditions_by_type_and_replace_marked_lists() {
        let mut node = json!({"status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "PIDPressure", "status": "False"}],
            "addresses": [{"type": "InternalIP", "address": "a"}],
            "capacity": {"cpu": "1", "pods": "10"}
        }});
        apply_patch(
            &mut node,
            &json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "Hostname", "address": "h"}, {"$patch": "replace"}],
                "capacity": {"pods": null, "cpu": "2"}
            }}),
        );
        assert_eq!(
            node,
            json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "PIDPressure", "status": "False"}],
                "addresses": [{"type": "Hostname", "address": "h"}],
                "capacity": {"cpu": "2"}
            }})
        );
    }
}
