//! The pure half of the static pod sources (manifest folder and manifest
//! URL): which files are manifests, and how a manifest's bytes become pods
//! the kubelet can run, with upstream's static pod defaults and checks.
//! Reading files, fetching URLs and the clock stay with the callers.

use std::fmt;

use serde_json::Value;

use crate::domain::pod::{
    apply_api_defaults, decode_pod, validate_pod, Pod, PodError, CONFIG_HASH_ANNOTATION,
    CONFIG_SEEN_ANNOTATION, CONFIG_SOURCE_ANNOTATION,
};
use crate::domain::upstream::static_pod_uid::{pod_items, upstream_pod, UidSource, UpstreamPod};
use crate::domain::upstream::yaml::{parser_options, to_json, ToJsonError, MAX_PARSER_DEPTH};
use crate::domain::upstream::IdentityError;

/// Manifests larger than this are refused, as upstream does, so a runaway
/// file cannot exhaust the kubelet's memory.
pub const MAX_MANIFEST_BYTES: usize = 10 * 1024 * 1024;

/// Where a static pod came from; its text is the `kubernetes.io/config.source`
/// annotation value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodSourceKind {
    File,
    Http,
}

impl PodSourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PodSourceKind::File => "file",
            PodSourceKind::Http => "http",
        }
    }
}

impl fmt::Display for PodSourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a manifest yielded no pods. Every message names the manifest, since
/// a folder may hold many and the operator must find the bad one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("manifest {origin} is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        origin: String,
        size: usize,
        limit: usize,
    },
    #[error("manifest {origin} is not valid YAML or JSON: {reason}")]
    NotYaml { origin: String, reason: String },
    #[error("manifest {origin} is not a v1 Pod: {reason}")]
    NotAPod { origin: String, reason: String },
    #[error("manifest {origin} holds an invalid pod: {}", join(.errors))]
    Invalid {
        origin: String,
        errors: Vec<PodError>,
    },
}

fn join(errors: &[PodError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// True for the files of a manifest folder that are manifests: visible
/// (editors and tools leave dot files behind) and named `.yaml`, `.yml` or
/// `.json`. Upstream reads every visible file; the extension check keeps
/// backups such as `kube-apiserver.yaml.bak` from starting a second pod.
pub fn is_manifest_file_name(name: &str) -> bool {
    if name.is_empty() || name.starts_with('.') {
        return false;
    }
    match name.rsplit_once('.') {
        Some((_, ext)) => ["yaml", "yml", "json"]
            .iter()
            .any(|known| ext.eq_ignore_ascii_case(known)),
        None => false,
    }
}

/// Decodes one manifest into the pods it defines and applies the static pod
/// defaults: the name becomes `<name>-<node>` (node lowercased), an empty
/// namespace becomes `default`, a missing UID is derived from the manifest
/// content, the node and the origin, `spec.nodeName` is the node, and the
/// hash, source and first-seen annotations are set (`seen_rfc3339` is the
/// caller's clock reading). A manifest from a URL may also be a v1 `PodList`.
/// Every pod is validated; any problem refuses the whole manifest.
pub fn decode_static_pods(
    origin: &str,
    bytes: &[u8],
    node_name: &str,
    source: PodSourceKind,
    seen_rfc3339: &str,
) -> Result<Vec<Pod>, ManifestError> {
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            origin: origin.to_string(),
            size: bytes.len(),
            limit: MAX_MANIFEST_BYTES,
        });
    }
    let not_yaml = |reason: String| ManifestError::NotYaml {
        origin: origin.to_string(),
        reason,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| not_yaml(format!("not UTF-8: {e}")))?;
    let document: Value = if text.trim().is_empty() {
        Value::Null
    } else {
        // JSON is YAML, so one parser reads both.
        serde_saphyr::from_str_with_options(text, parser_options(MAX_PARSER_DEPTH))
            .map_err(|e| not_yaml(e.to_string()))?
    };

    let items = pod_documents(origin, &document, source)?;
    let upstream = upstream_identities(text, items.len(), node_name, origin, source);
    items
        .iter()
        .zip(upstream)
        .map(|(item, identity)| decode_one(origin, item, node_name, source, seen_rfc3339, identity))
        .collect()
}

/// Upstream kubelet v1.26's UID and container hashes for each pod of the
/// manifest, in order, so a node can switch between the two kubelets
/// without restarting anything. An error for each pod when the manifest
/// has no upstream identity rkubelet can reproduce.
pub fn upstream_identities(
    text: &str,
    count: usize,
    node_name: &str,
    origin: &str,
    source: PodSourceKind,
) -> Vec<Result<UpstreamPod, IdentityError>> {
    let document = match to_json(text) {
        Ok(document) => document,
        Err(e) => {
            let error = match e {
                ToJsonError::Invalid(reason) => IdentityError::Refused(reason),
                ToJsonError::Unreproducible(reason) => IdentityError::Unreproducible(reason),
            };
            return vec![Err(error); count];
        }
    };
    let items = pod_items(&document);
    if items.len() != count {
        let reason = format!(
            "upstream reads {} pods where rkubelet reads {count}",
            items.len()
        );
        return vec![Err(IdentityError::Unreproducible(reason)); count];
    }
    let uid_source = match source {
        PodSourceKind::File => UidSource::File {
            node: node_name,
            path: origin,
        },
        PodSourceKind::Http => UidSource::Url { url: origin },
    };
    items
        .into_iter()
        .map(|item| upstream_pod(item, uid_source))
        .collect()
}

/// The pod documents in a manifest: the manifest itself when it is a Pod,
/// its items when it is a PodList from a URL.
fn pod_documents<'a>(
    origin: &str,
    document: &'a Value,
    source: PodSourceKind,
) -> Result<Vec<&'a Value>, ManifestError> {
    let not_a_pod = |reason: String| ManifestError::NotAPod {
        origin: origin.to_string(),
        reason,
    };
    let Some(object) = document.as_object() else {
        let what = match document {
            Value::Null => "the document is empty",
            Value::Array(_) => "the document is a list, not an object",
            _ => "the document is a scalar, not an object",
        };
        return Err(not_a_pod(what.to_string()));
    };
    let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or("");
    let (kind, api_version) = (field("kind"), field("apiVersion"));
    if kind.is_empty() {
        return Err(not_a_pod("kind is missing".to_string()));
    }
    if api_version.is_empty() {
        return Err(not_a_pod("apiVersion is missing".to_string()));
    }
    let found = || format!("found kind {kind:?} of apiVersion {api_version:?}");
    if api_version != "v1" {
        return Err(not_a_pod(found()));
    }
    match kind {
        "Pod" => Ok(vec![document]),
        // Upstream's URL source falls back to a PodList; its file source
        // does not.
        "PodList" if source == PodSourceKind::Http => match object.get("items") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items.iter().collect()),
            Some(_) => Err(not_a_pod("the PodList's items are not a list".to_string())),
        },
        "PodList" => Err(not_a_pod(format!(
            "{}; a PodList is accepted only from a URL",
            found()
        ))),
        _ => Err(not_a_pod(found())),
    }
}

fn decode_one(
    origin: &str,
    item: &Value,
    node_name: &str,
    source: PodSourceKind,
    seen_rfc3339: &str,
    upstream: Result<UpstreamPod, IdentityError>,
) -> Result<Pod, ManifestError> {
    let invalid = |errors: Vec<PodError>| ManifestError::Invalid {
        origin: origin.to_string(),
        errors,
    };
    // Every problem of the manifest at once: what does not decode, then what the decoded
    // rest fails in validation, and, for a pod refused anyway, the fields not honoured.
    let decoded = decode_pod(item);
    let Some(mut pod) = decoded.pod.clone() else {
        return Err(invalid(decoded.errors));
    };
    // Checked before defaulting, which would make any name non-empty.
    if pod.metadata.name.is_empty() {
        let mut errors = decoded.errors;
        errors.push(PodError::Required {
            field: "metadata.name".to_string(),
            detail: "name is needed for the pod".to_string(),
        });
        return Err(invalid(errors));
    }
    apply_api_defaults(&mut pod);

    let meta = &mut pod.metadata;
    // A UID written in the manifest is kept, as upstream keeps it. Without
    // one, upstream's UID when it can be reproduced, else our own.
    if meta.uid.is_empty() {
        meta.uid = match &upstream {
            Ok(identity) => identity.uid.clone(),
            Err(_) => fallback_static_pod_uid(item, node_name, origin, source),
        };
    }
    meta.name = format!("{}-{}", meta.name, node_name.to_lowercase());
    if meta.namespace.is_empty() {
        meta.namespace = "default".to_string();
    }
    let uid = meta.uid.clone();
    meta.annotations
        .insert(CONFIG_HASH_ANNOTATION.to_string(), uid);
    meta.annotations.insert(
        CONFIG_SOURCE_ANNOTATION.to_string(),
        source.as_str().to_string(),
    );
    meta.annotations
        .insert(CONFIG_SEEN_ANNOTATION.to_string(), seen_rfc3339.to_string());
    pod.spec.node_name = node_name.to_string();
    if let Ok(identity) = &upstream {
        for container in pod
            .spec
            .init_containers
            .iter_mut()
            .chain(&mut pod.spec.containers)
        {
            container.upstream_hash = identity
                .container_hashes
                .iter()
                .find(|(name, _)| *name == container.name)
                .map(|(_, hash)| *hash);
        }
    }

    let mut errors = decoded.errors.clone();
    errors.extend(
        validate_pod(&pod)
            .into_iter()
            .filter(|e| decoded.is_news(e)),
    );
    // Upstream validates a static pod as a pod being created, and the API server adds
    // ephemeral containers only to a running pod.
    if !pod.spec.ephemeral_containers.is_empty() {
        errors.push(PodError::Forbidden {
            field: "spec.ephemeralContainers".to_owned(),
            detail: "cannot be set on create".to_owned(),
        });
    }
    if let Some(resource) = api_reference(item) {
        errors.push(PodError::ApiReference {
            resource: resource.to_string(),
        });
    }
    if errors.is_empty() {
        Ok(pod)
    } else {
        errors.extend(
            pod.spec
                .refused_fields
                .iter()
                .cloned()
                .map(PodError::Refused),
        );
        Err(invalid(errors))
    }
}

/// The UID for a manifest whose upstream UID is not reproduced (see
/// `upstream::IdentityError`): one that changes whenever the manifest's
/// content, the node or the origin changes, and only then. It hashes the
/// whole document, modelled fields or not, in a canonical form (keys
/// sorted), and mixes in the node for URL manifests too.
fn fallback_static_pod_uid(
    item: &Value,
    node_name: &str,
    origin: &str,
    source: PodSourceKind,
) -> String {
    let mut hash = Fnv1a128::new();
    feed_value(&mut hash, item);
    feed_str(&mut hash, &format!("host:{node_name}"));
    let place = match source {
        PodSourceKind::File => "file",
        PodSourceKind::Http => "url",
    };
    feed_str(&mut hash, &format!("{place}:{origin}"));
    format!("{:032x}", hash.0)
}

struct Fnv1a128(u128);

impl Fnv1a128 {
    fn new() -> Self {
        Fnv1a128(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d)
    }
    fn write(&mut self, bytes: &[u8]) {
        const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
        for &b in bytes {
            self.0 ^= u128::from(b);
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }
}

// Length prefixes and type tags keep distinct documents from feeding the
// same bytes (e.g. "a","bc" against "ab","c").
fn feed_str(hash: &mut Fnv1a128, s: &str) {
    hash.write(format!("s{}:", s.len()).as_bytes());
    hash.write(s.as_bytes());
}

fn feed_value(hash: &mut Fnv1a128, value: &Value) {
    match value {
        Value::Null => hash.write(b"n"),
        Value::Bool(true) => hash.write(b"T"),
        Value::Bool(false) => hash.write(b"F"),
        Value::Number(n) => {
            hash.write(b"#");
            hash.write(n.to_string().as_bytes());
            hash.write(b";");
        }
        Value::String(s) => feed_str(hash, s),
        Value::Array(items) => {
            hash.write(b"[");
            items.iter().for_each(|v| feed_value(hash, v));
            hash.write(b"]");
        }
        Value::Object(map) => {
            // Sorted here because serde_json may keep insertion order.
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            hash.write(b"{");
            for (key, v) in entries {
                feed_str(hash, key);
                feed_value(hash, v);
            }
            hash.write(b"}");
        }
    }
}

fn list(v: Option<&Value>) -> Vec<&Value> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// The first kind of API object the pod refers to, in upstream's order, or
/// `None`. The typed model drops these fields, so this reads the document.
fn api_reference(pod: &Value) -> Option<&'static str> {
    let spec = pod.get("spec")?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    let has = |v: &Value, key: &str| v.get(key).is_some_and(|x| !x.is_null());

    if text(spec.get("serviceAccountName")) || text(spec.get("serviceAccount")) {
        return Some("serviceaccounts");
    }
    let containers: Vec<&Value> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|key| list(spec.get(*key)))
        .collect();
    let volumes = list(spec.get("volumes"));
    let projected = |v: &Value, key: &str| {
        list(v.get("projected").and_then(|p| p.get("sources")))
            .iter()
            .any(|s| has(s, key))
    };
    let env_refers = |key_ref: &str, from_ref: &str| {
        containers.iter().any(|c| {
            list(c.get("env"))
                .iter()
                .any(|e| e.get("valueFrom").is_some_and(|f| has(f, key_ref)))
                || list(c.get("envFrom")).iter().any(|e| has(e, from_ref))
        })
    };

    // Volume sources that name a secret for their credentials.
    const SECRET_REFS: [(&str, &str); 8] = [
        ("cephfs", "secretRef"),
        ("cinder", "secretRef"),
        ("flexVolume", "secretRef"),
        ("rbd", "secretRef"),
        ("iscsi", "secretRef"),
        ("scaleIO", "secretRef"),
        ("storageos", "secretRef"),
        ("csi", "nodePublishSecretRef"),
    ];
    let volume_secret = volumes.iter().any(|v| {
        has(v, "secret")
            || has(v, "azureFile")
            || projected(v, "secret")
            || SECRET_REFS
                .iter()
                .any(|(kind, key)| v.get(*kind).is_some_and(|src| has(src, key)))
    });
    if !list(spec.get("imagePullSecrets")).is_empty()
        || env_refers("secretKeyRef", "secretRef")
        || volume_secret
    {
        return Some("secrets");
    }
    if env_refers("configMapKeyRef", "configMapRef")
        || volumes
            .iter()
            .any(|v| has(v, "configMap") || projected(v, "configMap"))
    {
        return Some("configmaps");
    }
    if !list(spec.get("resourceClaims")).is_empty() {
        return Some("resourceclaims");
    }
    for v in &volumes {
        if has(v, "csi") {
            return Some("csidrivers");
        }
        if has(v, "glusterfs") {
            return Some("endpoints");
        }
        if has(v, "persistentVolumeClaim") || has(v, "ephemeral") {
            return Some("persistentvolumeclaims");
        }
        if projected(v, "serviceAccountToken") {
            return Some("serviceaccounts");
        }
        if projected(v, "clusterTrustBundle") {
            return Some("clustertrustbundles");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::{PullPolicy, RestartPolicy};

    const SEEN: &str = "2024-05-01T10:00:00.000000000Z";

    fn decode(
        origin: &str,
        text: &str,
        node: &str,
        source: PodSourceKind,
    ) -> Result<Vec<Pod>, ManifestError> {
        decode_static_pods(origin, text.as_bytes(), node, source, SEEN)
    }

    fn one(text: &str) -> Pod {
        let mut pods = decode(
            "/etc/kubernetes/manifests/p.yaml",
            text,
            "node1",
            PodSourceKind::File,
        )
        .expect("manifest decodes");
        assert_eq!(pods.len(), 1);
        pods.remove(0)
    }

    fn error(text: &str) -> String {
        decode("/m/bad.yaml", text, "node1", PodSourceKind::File)
            .expect_err("manifest is refused")
            .to_string()
    }

    const POD_JSON: &str = r#"{
  "kind": "Pod", "apiVersion": "v1",
  "metadata": {"name": "test", "uid": "12345", "namespace": "mynamespace"},
  "spec": {
    "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
    "terminationGracePeriodSeconds": 30,
    "containers": [{
      "name": "image", "image": "test/image", "imagePullPolicy": "IfNotPresent",
      "terminationMessagePath": "/dev/termination-log",
      "terminationMessagePolicy": "File",
      "securityContext": {"procMount": "Default"}
    }],
    "securityContext": {}, "schedulerName": "default-scheduler",
    "enableServiceLinks": true
  },
  "status": {"podIP": "1.2.3.4", "podIPs": [{"ip": "1.2.3.4"}]}
}"#;

    const POD_YAML: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: test
  namespace: mynamespace
  uid: "12345"
spec:
  containers:
  - image: test/image
    imagePullPolicy: IfNotPresent
    name: image
    securityContext:
      procMount: Default
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {}
  terminationGracePeriodSeconds: 30
status:
  podIP: 1.2.3.4
  podIPs:
  - ip: 1.2.3.4
"#;

    // Upstream common_test.go TestDecodeSinglePod: the same pod as JSON and
    // as YAML decodes to the same object, unknown fields ignored.
    #[test]
    fn decode_single_pod_json_and_yaml() {
        let from_json = one(POD_JSON);
        let from_yaml = one(POD_YAML);
        assert_eq!(from_json, from_yaml);
        let meta = &from_json.metadata;
        assert_eq!(meta.name, "test-node1");
        assert_eq!(meta.namespace, "mynamespace");
        assert_eq!(meta.uid, "12345", "a manifest's own UID is kept");
        assert_eq!(meta.annotations[CONFIG_HASH_ANNOTATION], "12345");
        let spec = &from_json.spec;
        assert_eq!(spec.restart_policy, RestartPolicy::Always);
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.node_name, "node1");
        let c = &spec.containers[0];
        assert_eq!((c.name.as_str(), c.image.as_str()), ("image", "test/image"));
        assert_eq!(c.image_pull_policy, Some(PullPolicy::IfNotPresent));
    }

    // Upstream TestDecodePodList: a v1 PodList, accepted from a URL only.
    #[test]
    fn decode_pod_list_from_url() {
        let list = format!(r#"{{"kind":"PodList","apiVersion":"v1","items":[{POD_JSON}]}}"#);
        let pods = decode("http://cfg/pods", &list, "node1", PodSourceKind::Http).expect("list");
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.name, "test-node1");
        assert_eq!(
            pods[0].metadata.annotations[CONFIG_SOURCE_ANNOTATION],
            "http"
        );

        let err = decode("/m/list.json", &list, "node1", PodSourceKind::File)
            .expect_err("file PodList refused");
        assert!(matches!(err, ManifestError::NotAPod { .. }), "{err}");
        assert!(err.to_string().contains("/m/list.json"), "{err}");

        let empty = r#"{"kind":"PodList","apiVersion":"v1","items":[]}"#;
        let pods = decode("http://cfg/pods", empty, "node1", PodSourceKind::Http).expect("empty");
        assert!(pods.is_empty());
    }

    #[test]
    fn pod_list_with_an_invalid_item_is_refused() {
        let list = r#"{"kind":"PodList","apiVersion":"v1","items":[
            {"metadata":{"name":"ok"},"spec":{"containers":[{"name":"c","image":"i"}]}},
            {"metadata":{"name":"bad"},"spec":{"containers":[]}}]}"#;
        let err = decode("http://cfg/pods", list, "n", PodSourceKind::Http)
            .expect_err("refused")
            .to_string();
        assert!(err.contains("http://cfg/pods"), "{err}");
        assert!(err.contains("spec.containers: Required value"), "{err}");
    }

    fn pod_with_spec(spec_extra: &str, container_extra: &str) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"test"}},
              "spec":{{{spec_extra}"containers":[{{"name":"c","image":"i"{container_extra}}}]}}}}"#
        )
    }

    // Upstream TestDecodeSinglePodRejectsClusterTrustBundleVolumes and
    // TestDecodeSinglePodRejectsResourceClaims, plus the other API objects
    // upstream's reference check names.
    #[test]
    fn static_pods_may_not_reference_api_objects() {
        let cases = [
            (
                pod_with_spec(
                    r#""volumes":[{"name":"ctb","projected":{"sources":[{"clusterTrustBundle":{"name":"my-ctb","path":"f"}}]}}],"#,
                    "",
                ),
                "clustertrustbundles",
            ),
            (
                pod_with_spec(
                    r#""resourceClaims":[{"name":"my-claim","resourceClaimName":"x"}],"#,
                    "",
                ),
                "resourceclaims",
            ),
            (
                pod_with_spec(r#""serviceAccountName":"sa","#, ""),
                "serviceaccounts",
            ),
            (
                pod_with_spec(
                    r#""volumes":[{"name":"s","secret":{"secretName":"x"}}],"#,
                    "",
                ),
                "secrets",
            ),
            (
                pod_with_spec(
                    "",
                    r#","env":[{"name":"P","valueFrom":{"secretKeyRef":{"name":"x","key":"k"}}}]"#,
                ),
                "secrets",
            ),
            (
                pod_with_spec(r#""imagePullSecrets":[{"name":"r"}],"#, ""),
                "secrets",
            ),
            (
                pod_with_spec(r#""volumes":[{"name":"c","configMap":{"name":"x"}}],"#, ""),
                "configmaps",
            ),
            (
                pod_with_spec("", r#","envFrom":[{"configMapRef":{"name":"x"}}]"#),
                "configmaps",
            ),
            (
                pod_with_spec(
                    r#""volumes":[{"name":"v","persistentVolumeClaim":{"claimName":"x"}}],"#,
                    "",
                ),
                "persistentvolumeclaims",
            ),
            (
                pod_with_spec(r#""volumes":[{"name":"v","csi":{"driver":"d"}}],"#, ""),
                "csidrivers",
            ),
            (
                pod_with_spec(
                    r#""volumes":[{"name":"t","projected":{"sources":[{"serviceAccountToken":{"path":"t"}}]}}],"#,
                    "",
                ),
                "serviceaccounts",
            ),
        ];
        for (manifest, resource) in cases {
            let err = error(&manifest);
            assert!(
                err.contains(&format!("static pods may not reference {resource}")),
                "want {resource}: {err}"
            );
            assert!(err.contains("/m/bad.yaml"), "{err}");
        }
        // Node-local volumes are fine.
        let ok = pod_with_spec(
            r#""volumes":[{"name":"h","hostPath":{"path":"/etc","type":"Directory"}},{"name":"e","emptyDir":{}}],"#,
            r#","volumeMounts":[{"name":"h","mountPath":"/h"},{"name":"e","mountPath":"/e"}]"#,
        );
        let pod = one(&ok);
        assert_eq!(
            pod.spec.volumes[0]
                .host_path
                .as_ref()
                .map(|h| h.kind.as_str()),
            Some("Directory")
        );
        assert!(pod.spec.volumes[1].empty_dir.is_some());
    }

    // Upstream TestDecodeSinglePodWithOptions enables the alpha
    // ContainerRestartRules gate; with it off (our behaviour, and upstream's
    // default) a restart policy on a regular container is refused.
    #[test]
    fn container_restart_policy_on_regular_container_is_refused() {
        let manifest = pod_with_spec(
            r#""restartPolicy":"Never","#,
            r#","restartPolicy":"Always""#,
        );
        let err = error(&manifest);
        assert!(
            err.contains("spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"),
            "{err}"
        );
    }

    /// Upstream validates a static pod as one being created, where the API server refuses
    /// ephemeral containers; a bad target is named too (its `validateEphemeralContainers`).
    #[test]
    fn ephemeral_containers_are_refused_in_a_static_pod() {
        let manifest = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{
            "containers":[{"name":"c","image":"i"}],
            "ephemeralContainers":[{"name":"c","image":"i"},
                                   {"name":"d","image":"i","targetContainerName":"nope"}]}}"#;
        let err = error(manifest);
        for expected in [
            "spec.ephemeralContainers[0].name: Duplicate value: \"c\"",
            "spec.ephemeralContainers[1].targetContainerName: Not found: \"nope\"",
            "spec.ephemeralContainers: Forbidden: cannot be set on create",
        ] {
            assert!(err.contains(expected), "{expected} in {err}");
        }
    }

    #[test]
    fn sidecar_init_container_is_accepted() {
        let manifest = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{
            "initContainers":[{"name":"side","image":"i","restartPolicy":"Always"}],
            "containers":[{"name":"c","image":"i"}]}}"#;
        let pod = one(manifest);
        assert_eq!(
            pod.spec.init_containers[0].restart_policy,
            Some(RestartPolicy::Always)
        );
    }

    // Upstream TestStaticPodNameGenerate: the node name is lowercased.
    #[test]
    fn static_pod_name_generation() {
        for node in ["node1", "Node1", "NODE1"] {
            let manifest = pod_with_spec("", "").replace("\"test\"", "\"static-pod1\"");
            let pods = decode("/m/p.json", &manifest, node, PodSourceKind::File).expect("decodes");
            assert_eq!(pods[0].metadata.name, "static-pod1-node1", "node {node}");
            assert_eq!(
                pods[0].spec.node_name, node,
                "nodeName keeps the node's spelling"
            );
        }
        // A name the user wrote in upper case is still refused.
        let manifest = pod_with_spec("", "").replace("\"test\"", "\"static-pod1-NODE1\"");
        assert!(
            error(&manifest).contains("metadata.name: Invalid value: \"static-pod1-NODE1-node1\"")
        );
    }

    // Upstream TestDecodeSinglePodTerminationGracePeriodSeconds.
    #[test]
    fn negative_grace_period_is_clamped_to_one() {
        let pod = one(&pod_with_spec(r#""terminationGracePeriodSeconds":-1,"#, ""));
        assert_eq!(pod.spec.termination_grace_period_seconds, Some(1));
    }

    #[test]
    fn pod_without_name_is_refused() {
        let err = error(
            r#"{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","image":"i"}]}}"#,
        );
        assert!(
            err.contains("metadata.name: Required value: name is needed for the pod"),
            "{err}"
        );
    }

    #[test]
    fn static_defaults_and_annotations() {
        let pod = one(&pod_with_spec("", ""));
        let meta = &pod.metadata;
        assert_eq!(meta.namespace, "default");
        assert_eq!(meta.uid.len(), 32);
        assert!(meta.uid.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(meta.annotations[CONFIG_HASH_ANNOTATION], meta.uid);
        assert_eq!(meta.annotations[CONFIG_SOURCE_ANNOTATION], "file");
        assert_eq!(meta.annotations[CONFIG_SEEN_ANNOTATION], SEEN);
        let c = &pod.spec.containers[0];
        assert_eq!(c.image_pull_policy, Some(PullPolicy::Always));
    }

    /// (case, manifest bytes, is the error of the expected kind)
    type RefusalCase = (&'static str, Vec<u8>, fn(&ManifestError) -> bool);

    #[test]
    fn refusals_name_the_origin() {
        let cases: Vec<RefusalCase> = vec![
            (
                "not yaml",
                b"kind: Pod\n  metadata: [unclosed\n\t- : :".to_vec(),
                |e| matches!(e, ManifestError::NotYaml { .. }),
            ),
            ("not utf-8", vec![0xff, 0xfe, 0x00], |e| {
                matches!(e, ManifestError::NotYaml { .. })
            }),
            (
                "config map",
                b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n".to_vec(),
                |e| matches!(e, ManifestError::NotAPod { .. }),
            ),
            (
                "deployment",
                b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n".to_vec(),
                |e| matches!(e, ManifestError::NotAPod { .. }),
            ),
            ("no kind", b"metadata:\n  name: x\n".to_vec(), |e| {
                matches!(e, ManifestError::NotAPod { .. })
            }),
            ("empty", b"# only a comment\n".to_vec(), |e| {
                matches!(e, ManifestError::NotAPod { .. })
            }),
            (
                "no containers",
                b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers: []\n"
                    .to_vec(),
                |e| matches!(e, ManifestError::Invalid { .. }),
            ),
            (
                "wrong field type",
                b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers: {a: b}\n"
                    .to_vec(),
                |e| matches!(e, ManifestError::Invalid { .. }),
            ),
            ("too large", vec![b' '; 11 * 1024 * 1024], |e| {
                matches!(
                    e,
                    ManifestError::TooLarge {
                        size: 11_534_336,
                        limit: MAX_MANIFEST_BYTES,
                        ..
                    }
                )
            }),
        ];
        let origin = "/etc/kubernetes/manifests/broken.yaml";
        for (name, bytes, kind_ok) in cases {
            let err = decode_static_pods(origin, &bytes, "node1", PodSourceKind::File, SEEN)
                .expect_err(name);
            assert!(kind_ok(&err), "case {name}: {err:?}");
            assert!(err.to_string().contains(origin), "case {name}: {err}");
        }
        let missing = decode_static_pods(
            origin,
            b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec: {}\n",
            "node1",
            PodSourceKind::File,
            SEEN,
        )
        .expect_err("no containers");
        assert!(
            missing
                .to_string()
                .contains("spec.containers: Required value"),
            "{missing}"
        );
    }

    #[test]
    fn exactly_the_limit_is_accepted_for_size() {
        let mut text = pod_with_spec("", "").into_bytes();
        text.resize(MAX_MANIFEST_BYTES, b' ');
        let pods = decode_static_pods("/m/p.json", &text, "n", PodSourceKind::File, SEEN);
        assert!(pods.is_ok(), "{pods:?}");
    }

    fn uid(text: &str, node: &str, origin: &str, source: PodSourceKind) -> String {
        decode(origin, text, node, source).expect("decodes")[0]
            .metadata
            .uid
            .clone()
    }

    #[test]
    fn uid_is_deterministic_and_tracks_content_node_and_origin() {
        let base = pod_with_spec("", "");
        let file = PodSourceKind::File;
        let a = uid(&base, "node1", "/m/p.json", file);
        assert_eq!(
            a,
            uid(&base, "node1", "/m/p.json", file),
            "same input, same UID"
        );
        // Same content in another layout (YAML, keys reordered) is the same pod.
        let yaml = "kind: Pod\napiVersion: v1\nspec:\n  containers:\n  - image: i\n    name: c\nmetadata:\n  name: test\n";
        assert_eq!(a, uid(yaml, "node1", "/m/p.json", file));

        let changed_image = base.replace("\"image\":\"i\"", "\"image\":\"i2\"");
        assert_ne!(a, uid(&changed_image, "node1", "/m/p.json", file));
        // A field we do not model still changes the UID, so the pod restarts.
        let probe = pod_with_spec("", r#","livenessProbe":{"exec":{"command":["true"]}}"#);
        assert_ne!(a, uid(&probe, "node1", "/m/p.json", file));

        assert_ne!(a, uid(&base, "node2", "/m/p.json", file), "other node");
        assert_ne!(a, uid(&base, "node1", "/m/q.json", file), "other file");
        let h1 = uid(&base, "node1", "http://cfg/p", PodSourceKind::Http);
        let h2 = uid(&base, "node2", "http://cfg/p", PodSourceKind::Http);
        assert_eq!(h1, h2, "upstream mixes only the URL into a URL pod's UID");
        assert_ne!(a, h1);
    }

    #[test]
    fn same_pod_on_two_nodes_differs() {
        let text = pod_with_spec("", "");
        let p1 = &decode("/m/p.json", &text, "node-a", PodSourceKind::File).expect("a")[0];
        let p2 = &decode("/m/p.json", &text, "node-b", PodSourceKind::File).expect("b")[0];
        assert_ne!(p1.metadata.name, p2.metadata.name);
        assert_ne!(p1.metadata.uid, p2.metadata.uid);
    }

    #[test]
    fn uid_falls_back_when_upstreams_is_not_reproduced() {
        // A set creation time is hashed by upstream with the node's time
        // zone data, which is not reproduced: rkubelet's own UID is used.
        let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":"2024-01-01T00:00:00Z"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
        let identities = upstream_identities(text, 1, "node1", "/m/p.json", PodSourceKind::File);
        assert!(
            matches!(&identities[0], Err(IdentityError::Unreproducible(reason)) if reason.contains("metadata.creationTimestamp")),
            "{identities:?}"
        );
        let got = uid(text, "node1", "/m/p.json", PodSourceKind::File);
        assert_eq!(got, uid(text, "node1", "/m/p.json", PodSourceKind::File));
        // Pinned so an accidental change of the fallback hash (which would
        // restart such static pods after an upgrade) is caught.
        assert_eq!(got, FALLBACK_UID, "fallback hash algorithm changed");
        let pod = &decode("/m/p.json", text, "node1", PodSourceKind::File).expect("decodes")[0];
        assert_eq!(pod.spec.containers[0].upstream_hash, None);
    }

    const FALLBACK_UID: &str = "9bb32688364171e12c44d143e739f679";

    #[test]
    fn fnv1a128_known_vector() {
        let mut h = Fnv1a128::new();
        h.write(b"a");
        assert_eq!(h.0, 0xd228_cb69_6f1a_8caf_7891_2b70_4e4a_8964);
    }

    #[test]
    fn manifest_file_names() {
        let cases = [
            ("kube-apiserver.yaml", true),
            ("etcd.yml", true),
            ("pod.json", true),
            ("POD.YAML", true),
            (".kube-apiserver.yaml.swp", false),
            (".hidden.yaml", false),
            ("kube-apiserver.yaml.bak", false),
            ("kube-apiserver.yaml~", false),
            ("README", false),
            ("notes.txt", false),
            ("", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_manifest_file_name(name), want, "{name:?}");
        }
    }

    #[test]
    fn source_kind_text() {
        assert_eq!(PodSourceKind::File.to_string(), "file");
        assert_eq!(PodSourceKind::Http.to_string(), "http");
    }
}
