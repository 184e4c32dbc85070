//! Mirror pods: the API server's copy of each static pod (upstream's
//! `pkg/kubelet/pod/mirror_client.go` and the mirror handling of `syncPod` and
//! `HandlePodCleanups`). A mirror is the static pod with `kubernetes.io/config.mirror` set
//! to the static pod's config hash and a controller owner reference to the Node; one
//! deleted, being deleted or stale (its mirror annotation differs from the hash) is deleted
//! with a uid precondition and created again; one whose static pod is gone is deleted.
//! Mirrors are created only once the Node is registered (its uid is known).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{full_name, Pod, CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION};
use super::{CONFIG_SEEN_ANNOTATION, CONFIG_SOURCE_ANNOTATION};

/// A mirror pod as the API shows it: what the decision needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MirrorPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Its `kubernetes.io/config.mirror` annotation.
    pub mirror_hash: String,
    /// It has a `deletionTimestamp`.
    pub deleting: bool,
}

impl MirrorPod {
    /// `"<name>_<namespace>"`, the key it shares with its static pod.
    pub fn full_name(&self) -> String {
        format!("{}_{}", self.name, self.namespace)
    }
}

/// Why a mirror is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Its static pod changed (upstream: "Deleted mirror pod because it is outdated").
    Outdated,
    /// Someone deleted it in the API; it comes back.
    BeingDeleted,
    /// No static pod wants it (upstream's `DeleteOrphanedMirrorPods`).
    Orphaned,
}

/// One deletion: grace 0 with the mirror's uid as precondition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorDelete {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub reason: DeleteReason,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MirrorPlan {
    pub delete: Vec<MirrorDelete>,
    /// Bodies of the mirrors to create (`POST /api/v1/namespaces/<ns>/pods`).
    pub create: Vec<Value>,
}

impl MirrorPlan {
    pub fn is_empty(&self) -> bool {
        self.delete.is_empty() && self.create.is_empty()
    }
}

/// The registered Node a mirror points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOwner {
    pub name: String,
    pub uid: String,
}

/// Whether `pod` came from a file or a URL (not the API server).
pub fn is_static(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .get(CONFIG_SOURCE_ANNOTATION)
        .is_some_and(|s| s != "api")
}

/// Upstream's `getPodHash`: the static pod's config hash annotation.
pub fn pod_hash(pod: &Pod) -> &str {
    pod.metadata
        .annotations
        .get(CONFIG_HASH_ANNOTATION)
        .map_or("", String::as_str)
}

/// Upstream's `IsMirrorPodOf`: same full name, mirror annotation equal to the hash.
pub fn is_mirror_of(mirror: &MirrorPod, pod: &Pod) -> bool {
    mirror.full_name() == full_name(pod) && mirror.mirror_hash == pod_hash(pod)
}

/// Upstream's `CreateMirrorPod` body: the static pod with the mirror annotation (its
/// source, seen and hash annotations kept) and the Node as controller owner. The uid is
/// left for the API server to assign.
pub fn mirror_pod_body(pod: &Pod, node: &NodeOwner) -> Value {
    let mut copy = pod.clone();
    copy.metadata.uid.clear();
    copy.metadata
        .annotations
        .insert(CONFIG_MIRROR_ANNOTATION.into(), pod_hash(pod).to_owned());
    if copy.spec.node_name.is_empty() {
        copy.spec.node_name = node.name.clone();
    }
    let mut body = serde_json::to_value(&copy).unwrap_or_else(|_| json!({}));
    if let Some(object) = body.as_object_mut() {
        object.insert("apiVersion".into(), json!("v1"));
        object.insert("kind".into(), json!("Pod"));
    }
    if let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert(
            "ownerReferences".into(),
            json!([{
                "apiVersion": "v1",
                "kind": "Node",
                "name": node.name,
                "uid": node.uid,
                "controller": true,
            }]),
        );
    }
    body
}

/// Which mirrors to delete and create, from the static pods that run, the mirrors the API
/// holds for this node, and the Node once registered.
pub fn plan_mirrors(
    static_pods: &[Pod],
    mirrors: &[MirrorPod],
    node: Option<&NodeOwner>,
) -> MirrorPlan {
    let mut plan = MirrorPlan::default();
    let wanted: BTreeMap<String, &Pod> = static_pods
        .iter()
        .filter(|p| is_static(p))
        .map(|p| (full_name(p), p))
        .collect();
    let mut present: BTreeMap<String, &MirrorPod> = BTreeMap::new();
    for mirror in mirrors {
        present.insert(mirror.full_name(), mirror);
    }
    for (name, mirror) in &present {
        let reason = match wanted.get(name) {
            None => Some(DeleteReason::Orphaned),
            Some(_) if mirror.deleting => Some(DeleteReason::BeingDeleted),
            Some(pod) if !is_mirror_of(mirror, pod) => Some(DeleteReason::Outdated),
            Some(_) => None,
        };
        if let Some(reason) = reason {
            plan.delete.push(MirrorDelete {
                namespace: mirror.namespace.clone(),
                name: mirror.name.clone(),
                uid: mirror.uid.clone(),
                reason,
            });
        }
    }
    let Some(node) = node else {
        return plan;
    };
    for (name, pod) in &wanted {
        let deleted = plan
            .delete
            .iter()
            .any(|d| format!("{}_{}", d.name, d.namespace) == *name);
        if !present.contains_key(name) || deleted {
            plan.create.push(mirror_pod_body(pod, node));
        }
    }
    plan
}

/// The annotations upstream copies onto the mirror, for tests and readers.
pub const COPIED_ANNOTATIONS: [&str; 3] = [
    CONFIG_SOURCE_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONFIG_HASH_ANNOTATION,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn static_pod(name: &str, hash: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = name.into();
        pod.metadata.namespace = "default".into();
        pod.metadata.uid = hash.into();
        for (k, v) in [
            (CONFIG_SOURCE_ANNOTATION, "file"),
            (CONFIG_SEEN_ANNOTATION, "2026-11-23T19:00:00.000000000Z"),
            (CONFIG_HASH_ANNOTATION, hash),
        ] {
            pod.metadata.annotations.insert(k.into(), v.into());
        }
        pod.spec.node_name = "n1".into();
        pod
    }

    fn mirror(name: &str, hash: &str) -> MirrorPod {
        MirrorPod {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("m-{name}"),
            mirror_hash: hash.into(),
            deleting: false,
        }
    }

    fn node() -> NodeOwner {
        NodeOwner {
            name: "n1".into(),
            uid: "node-uid".into(),
        }
    }

    fn created_names(plan: &MirrorPlan) -> Vec<String> {
        plan.create
            .iter()
            .map(|b| b["metadata"]["name"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    #[test]
    fn the_body_is_the_static_pod_with_the_mirror_annotation_and_the_node_as_owner() {
        let body = mirror_pod_body(&static_pod("web-n1", "abc"), &node());
        assert_eq!(body["apiVersion"], "v1");
        assert_eq!(body["kind"], "Pod");
        assert_eq!(body["spec"]["nodeName"], "n1");
        assert!(body["metadata"].get("uid").is_none());
        let annotations = &body["metadata"]["annotations"];
        assert_eq!(annotations[CONFIG_MIRROR_ANNOTATION], "abc");
        for key in COPIED_ANNOTATIONS {
            assert!(annotations.get(key).is_some(), "{key}");
        }
        assert_eq!(
            body["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Node", "name": "n1",
                    "uid": "node-uid", "controller": true}])
        );
    }

    #[test]
    fn a_missing_mirror_is_created_once_the_node_is_registered() {
        let pods = [static_pod("web-n1", "abc")];
        assert!(plan_mirrors(&pods, &[], None).is_empty());
        let plan = plan_mirrors(&pods, &[], Some(&node()));
        assert_eq!(created_names(&plan), ["web-n1"]);
        assert!(plan.delete.is_empty());
    }

    #[test]
    fn a_current_mirror_is_left_alone() {
        let pods = [static_pod("web-n1", "abc")];
        assert!(plan_mirrors(&pods, &[mirror("web-n1", "abc")], Some(&node())).is_empty());
    }

    #[test]
    fn a_stale_or_deleted_mirror_is_deleted_by_uid_and_created_again() {
        let pods = [static_pod("web-n1", "new")];
        let plan = plan_mirrors(&pods, &[mirror("web-n1", "old")], Some(&node()));
        assert_eq!(
            plan.delete,
            [MirrorDelete {
                namespace: "default".into(),
                name: "web-n1".into(),
                uid: "m-web-n1".into(),
                reason: DeleteReason::Outdated,
            }]
        );
        assert_eq!(created_names(&plan), ["web-n1"]);
        let mut deleting = mirror("web-n1", "new");
        deleting.deleting = true;
        let plan = plan_mirrors(&pods, &[deleting], Some(&node()));
        assert_eq!(plan.delete[0].reason, DeleteReason::BeingDeleted);
        assert_eq!(created_names(&plan), ["web-n1"]);
    }

    #[test]
    fn an_orphaned_mirror_is_deleted_even_before_registration() {
        let plan = plan_mirrors(&[], &[mirror("gone-n1", "abc")], None);
        assert_eq!(plan.delete[0].reason, DeleteReason::Orphaned);
        assert!(plan.create.is_empty());
    }

    #[test]
    fn api_pods_get_no_mirror() {
        let mut pod = static_pod("api-pod", "abc");
        pod.metadata
            .annotations
            .insert(CONFIG_SOURCE_ANNOTATION.into(), "api".into());
        assert!(plan_mirrors(&[pod], &[], Some(&node())).is_empty());
    }
}
