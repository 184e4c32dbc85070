//! A pod as the API server sends it: decoded on its own (unknown fields recorded), given
//! upstream's defaults and the `api` source annotation, validated; mirror pods told
//! apart; a pod rkubelet cannot run named with its errors.

use serde_json::Value;

use super::{
    apply_api_defaults, decode_pod, validate_pod, Pod, PodError, CONFIG_SOURCE_ANNOTATION,
};
use crate::domain::status::{rejected_pod_status, ApiPodStatus};

/// The source name of API pods (`kubernetes.io/config.source`).
pub const API_SOURCE: &str = "api";

/// The reason a pod rkubelet cannot decode or validate is failed with.
pub const INVALID_POD_REASON: &str = "InvalidPod";

/// One pod read from the API.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiPod {
    pub pod: Pod,
    /// The status the API holds now (the kubelet's last write, or nothing yet).
    pub status: Option<ApiPodStatus>,
}

/// A pod from the API that rkubelet cannot run.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidApiPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub errors: Vec<PodError>,
}

impl InvalidApiPod {
    /// The status it is failed with: `Failed`, [`INVALID_POD_REASON`], the errors.
    pub fn status(&self) -> ApiPodStatus {
        let errors: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        rejected_pod_status(INVALID_POD_REASON, &errors.join(", "))
    }
}

fn text(value: &Value, key: &str) -> String {
    value["metadata"][key]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Decodes, defaults and validates one API pod.
///
/// # Errors
/// [`InvalidApiPod`] naming the pod and every problem found.
pub fn decode_api_pod(value: &Value) -> Result<ApiPod, InvalidApiPod> {
    let invalid = |errors| InvalidApiPod {
        namespace: text(value, "namespace"),
        name: text(value, "name"),
        uid: text(value, "uid"),
        errors,
    };
    let decoded = decode_pod(value);
    let Some(mut pod) = decoded.pod.clone() else {
        return Err(invalid(decoded.errors));
    };
    apply_api_defaults(&mut pod);
    pod.metadata
        .annotations
        .entry(CONFIG_SOURCE_ANNOTATION.to_owned())
        .or_insert_with(|| API_SOURCE.to_owned());
    let mut errors = decoded.errors.clone();
    errors.extend(
        validate_pod(&pod)
            .into_iter()
            .filter(|e| decoded.is_news(e)),
    );
    if !errors.is_empty() {
        return Err(invalid(errors));
    }
    // A status the kubelet cannot read is as good as none: the next write replaces it.
    let status = value
        .get("status")
        .and_then(|s| serde_json::from_value::<ApiPodStatus>(s.clone()).ok());
    Ok(ApiPod { pod, status })
}

/// What one object of the node's pod list or watch is to the kubelet.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiObject {
    /// A static pod's copy in the API (`kubernetes.io/config.mirror`): never run; the
    /// static pod's status is written to it.
    Mirror {
        namespace: String,
        name: String,
        uid: String,
        /// Its status as the API holds it.
        status: Option<Box<ApiPodStatus>>,
    },
    /// A pod to run.
    Pod(Box<ApiPod>),
    /// A pod rkubelet cannot run: it is failed in the API.
    Invalid(InvalidApiPod),
}

impl ApiObject {
    /// The mirror's static pod, as `<name>_<namespace>`.
    pub fn static_full_name(namespace: &str, name: &str) -> String {
        format!("{name}_{namespace}")
    }
}

/// Tells a mirror pod, a pod to run and an invalid pod apart (the pod loop's API
/// source and the dry run both take this).
pub fn classify_api_object(value: &Value) -> ApiObject {
    if value["metadata"]["annotations"]
        .get(super::CONFIG_MIRROR_ANNOTATION)
        .is_some()
    {
        return ApiObject::Mirror {
            namespace: text(value, "namespace"),
            name: text(value, "name"),
            uid: text(value, "uid"),
            status: value
                .get("status")
                .and_then(|s| serde_json::from_value(s.clone()).ok())
                .map(Box::new),
        };
    }
    match decode_api_pod(value) {
        Ok(pod) => ApiObject::Pod(Box::new(pod)),
        Err(invalid) => ApiObject::Invalid(invalid),
    }
}

/// Whether a pod carries the source annotation `api`.
pub fn is_api_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .get(CONFIG_SOURCE_ANNOTATION)
        .is_some_and(|s| s == API_SOURCE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn api_pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                         "resourceVersion": "7", "managedFields": [{"manager": "kubectl"}],
                         "creationTimestamp": "2026-11-23T19:00:00Z"},
            "spec": {"nodeName": "n1", "someFutureField": {"x": 1},
                     "containers": [{"name": "app", "image": "busybox:1.36",
                                     "imagePullPolicy": "IfNotPresent",
                                     "terminationMessagePath": "/dev/termination-log",
                                     "terminationMessagePolicy": "File"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort",
                       "conditions": [{"type": "PodScheduled", "status": "True",
                                       "lastProbeTime": null,
                                       "lastTransitionTime": "2026-11-23T19:00:00Z"}]}
        })
    }

    #[test]
    fn an_api_pod_decodes_with_unknown_fields_recorded_and_the_api_source() {
        let decoded = decode_api_pod(&api_pod()).expect("decodes");
        assert_eq!(decoded.pod.metadata.uid, "u1");
        // Refused by the node when it syncs the pod, not here: the pod is valid.
        let refused: Vec<&str> = decoded
            .pod
            .spec
            .refused_fields
            .iter()
            .map(|r| r.path.as_str())
            .collect();
        assert_eq!(refused, ["spec.someFutureField"]);
        assert_eq!(
            decoded.pod.metadata.creation_timestamp.as_deref(),
            Some("2026-11-23T19:00:00Z")
        );
        assert!(is_api_pod(&decoded.pod));
        let status = decoded.status.expect("status");
        assert_eq!(status.phase, "Pending");
        assert_eq!(status.conditions[0].condition_type, "PodScheduled");
    }

    #[test]
    fn a_pod_rkubelet_cannot_run_is_named_with_its_errors() {
        let mut bad = api_pod();
        bad["spec"]["restartPolicy"] = json!("Sometimes");
        bad["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "lots"}});
        let invalid = decode_api_pod(&bad).expect_err("invalid");
        assert_eq!((invalid.name.as_str(), invalid.uid.as_str()), ("web", "u1"));
        let status = invalid.status();
        assert_eq!(status.phase, "Failed");
        assert_eq!(status.reason, INVALID_POD_REASON);
        assert!(
            status.message.starts_with(
                "Pod was rejected: spec.restartPolicy: Unsupported value: \"Sometimes\""
            ),
            "{}",
            status.message
        );
        // Every problem at once: the quantity that does not decode, and what validation
        // finds in the rest.
        bad["spec"]["containers"][0]["name"] = json!("App_1");
        let errors: Vec<String> = decode_api_pod(&bad)
            .expect_err("invalid")
            .errors
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors[1].contains("spec.containers[0].resources.limits.cpu"),
            "{errors:?}"
        );
        assert!(
            errors[2].starts_with("spec.containers[0].name: Invalid value: \"App_1\""),
            "{errors:?}"
        );
    }
}
