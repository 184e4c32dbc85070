//! A pod from a decoded document: unknown fields ignored, bad enum values named with
//! their path, then upstream's defaults and validation.

use super::security::ProfileType;
use super::validate::{quoted, supported_list};
use super::*;

/// Turns a decoded JSON document into a [`Pod`], first checking the enum
/// fields so a bad value is reported with its path and the allowed values
/// (serde's own message names neither). Nulls count as absent and empty
/// enum strings as unset, as in Go's decoding and defaulting. The fields the node
/// cannot honour are recorded in `spec.refused_fields`.
pub fn pod_from_value(value: &serde_json::Value) -> Result<Pod, Vec<PodError>> {
    let decoded = decode_pod(value);
    match decoded.pod {
        Some(pod) if decoded.errors.is_empty() => Ok(pod),
        _ => Err(decoded.errors),
    }
}

/// A pod decoded as far as its document allows, with every problem met on the way.
#[derive(Debug, Clone)]
pub struct DecodedPod {
    /// `None` when nothing of the document is a pod (not an object).
    pub pod: Option<Pod>,
    pub errors: Vec<PodError>,
    /// The values left out so decoding could go on (bad enum values, values of the wrong
    /// type), by path: the model holds their defaults.
    pub dropped: Vec<String>,
}

impl DecodedPod {
    /// Whether a validation error of the decoded pod says something new: not one about
    /// a value left out (it would repeat the decoding error as "Required").
    pub fn is_news(&self, error: &PodError) -> bool {
        error.field().is_none_or(|field| {
            !self
                .dropped
                .iter()
                .any(|d| field == d || field.starts_with(&format!("{d}.")))
        })
    }
}

/// Most values a document can get wrong before decoding gives up.
const MAX_DECODE_ERRORS: usize = 64;

/// [`pod_from_value`] that goes on past a bad value: each is named with its path, left
/// out, and decoding tried again, so one pass reports every problem.
pub fn decode_pod(value: &serde_json::Value) -> DecodedPod {
    let mut value = value.clone();
    strip_nulls(&mut value);
    let (mut errors, mut dropped) = check_enum_fields(&mut value);
    let refused_fields = value
        .get("spec")
        .map(super::fields::refused_fields)
        .unwrap_or_default();
    for _ in 0..MAX_DECODE_ERRORS {
        // The path of a value that does not fit (a bad quantity names its resource).
        match serde_path_to_error::deserialize::<_, Pod>(&value) {
            Ok(mut pod) => {
                pod.spec.refused_fields = refused_fields;
                return DecodedPod {
                    pod: Some(pod),
                    errors,
                    dropped,
                };
            }
            Err(e) => {
                let path = e.path().clone();
                let text = path.to_string();
                errors.push(PodError::Decode {
                    reason: format!("{text}: {}", e.into_inner()),
                });
                if !remove_at(&mut value, &path) {
                    break;
                }
                dropped.push(text);
            }
        }
    }
    DecodedPod {
        pod: None,
        errors,
        dropped,
    }
}

/// Removes the value at `path` (a list item becomes null, then is left out); false when
/// there is nothing to remove (the document's root).
fn remove_at(value: &mut serde_json::Value, path: &serde_path_to_error::Path) -> bool {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut at = value;
    for segment in parents {
        let next = match segment {
            Segment::Seq { index } => at.get_mut(*index),
            Segment::Map { key } => at.get_mut(key.as_str()),
            Segment::Enum { .. } | Segment::Unknown => None,
        };
        let Some(next) = next else { return false };
        at = next;
    }
    match last {
        Segment::Map { key } => at
            .as_object_mut()
            .is_some_and(|m| m.remove(key.as_str()).is_some()),
        Segment::Seq { index } => match at.as_array_mut() {
            Some(items) if *index < items.len() => {
                items[*index] = serde_json::Value::Object(serde_json::Map::new());
                true
            }
            _ => false,
        },
        Segment::Enum { .. } | Segment::Unknown => false,
    }
}

fn strip_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// What the enum checks found: the errors and the paths of the values left out.
#[derive(Default)]
struct EnumProblems {
    errors: Vec<PodError>,
    dropped: Vec<String>,
}

impl EnumProblems {
    fn push(&mut self, error: PodError) {
        if let Some(field) = error.field() {
            self.dropped.push(field.to_owned());
        }
        self.errors.push(error);
    }
}

/// Checks one enum-valued string field, removing it when empty so the
/// default applies, and when unsupported, so decoding goes on.
fn check_enum(
    obj: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
    path: &str,
    supported: &[&str],
    errors: &mut EnumProblems,
) {
    let Some(v) = obj.get(key) else { return };
    match v.as_str() {
        Some("") => {
            obj.remove(key);
        }
        Some(s) if supported.contains(&s) => {}
        _ => {
            let rendered = match v.as_str() {
                Some(s) => quoted(s),
                None => v.to_string(),
            };
            obj.remove(key);
            errors.push(PodError::Unsupported {
                field: format!("{path}.{key}"),
                value: rendered,
                supported: supported_list(supported),
            });
        }
    }
}

fn check_enum_fields(value: &mut serde_json::Value) -> (Vec<PodError>, Vec<String>) {
    let mut errors = EnumProblems::default();
    let Some(spec) = value.get_mut("spec").and_then(|s| s.as_object_mut()) else {
        return (errors.errors, errors.dropped);
    };
    const RESTART: [&str; 3] = ["Always", "OnFailure", "Never"];
    check_enum(spec, "restartPolicy", "spec", &RESTART, &mut errors);
    if let Some(sc) = spec
        .get_mut("securityContext")
        .and_then(|s| s.as_object_mut())
    {
        let path = "spec.securityContext";
        check_enum(
            sc,
            "fsGroupChangePolicy",
            path,
            &["Always", "OnRootMismatch"],
            &mut errors,
        );
        check_profile_types(sc, path, &mut errors);
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(|c| c.as_array_mut()) else {
            continue;
        };
        for (i, c) in containers.iter_mut().enumerate() {
            let Some(c) = c.as_object_mut() else { continue };
            let path = format!("spec.{list}[{i}]");
            check_enum(
                c,
                "imagePullPolicy",
                &path,
                &["Always", "IfNotPresent", "Never"],
                &mut errors,
            );
            check_enum(c, "restartPolicy", &path, &RESTART, &mut errors);
            crate::domain::probe::spec::check_enum_fields(
                c,
                &path,
                &mut |obj, path, key, supported| check_enum(obj, key, path, supported, &mut errors),
            );
            if let Some(sc) = c.get_mut("securityContext").and_then(|s| s.as_object_mut()) {
                let path = format!("{path}.securityContext");
                check_enum(
                    sc,
                    "procMount",
                    &path,
                    &["Default", "Unmasked"],
                    &mut errors,
                );
                check_profile_types(sc, &path, &mut errors);
            }
        }
    }
    (errors.errors, errors.dropped)
}

/// The `type` of a security context's `seccompProfile` and `appArmorProfile`.
fn check_profile_types(
    sc: &mut serde_json::Map<String, serde_json::Value>,
    path: &str,
    errors: &mut EnumProblems,
) {
    for key in ["seccompProfile", "appArmorProfile"] {
        if let Some(profile) = sc.get_mut(key).and_then(|p| p.as_object_mut()) {
            check_enum(
                profile,
                "type",
                &format!("{path}.{key}"),
                &ProfileType::ALL,
                errors,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::fixtures::q;

    #[test]
    fn decode_ignores_unknown_fields_and_applies_serde_defaults() {
        let yaml = r#"
metadata:
  name: web
  labels: ~
spec:
  securityContext: {runAsUser: 0}
  containers:
  - name: web
    image: nginx
    livenessProbe: {httpGet: {path: /, port: 80}}
    ports:
    - containerPort: 80
    resources:
      limits: {cpu: 1, memory: 128Mi}
"#;
        let value: serde_json::Value = serde_saphyr::from_str(yaml).expect("yaml");
        let pod = pod_from_value(&value).expect("pod");
        let spec = &pod.spec;
        assert_eq!(spec.restart_policy, RestartPolicy::Always);
        assert_eq!(spec.dns_policy, "ClusterFirst");
        assert_eq!(spec.termination_grace_period(), 30);
        let c = &spec.containers[0];
        assert_eq!(c.ports[0].protocol, "TCP");
        assert_eq!(c.termination_message_path, DEFAULT_TERMINATION_MESSAGE_PATH);
        assert_eq!(c.resources.limits["cpu"], q("1"));
        assert!(pod.metadata.labels.is_empty());
    }

    #[test]
    fn bad_enum_values_are_reported_with_their_path() {
        let value = serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "restartPolicy": "Sometimes",
                "containers": [{"name": "c", "image": "i", "imagePullPolicy": "Maybe"}]
            }
        });
        let errors: Vec<String> = pod_from_value(&value)
            .expect_err("must fail")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            vec![
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "spec.containers[0].imagePullPolicy: Unsupported value: \"Maybe\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
            ]
        );
        // An empty string means "use the default", as in upstream.
        let value = serde_json::json!({"spec": {"restartPolicy": ""}});
        let pod = pod_from_value(&value).expect("pod");
        assert_eq!(pod.spec.restart_policy, RestartPolicy::Always);
    }

    /// One pass names every problem: the bad enum value, each value that does not fit
    /// (the decoding goes on past them), and the rest of the pod is still decoded.
    #[test]
    fn every_bad_value_is_named_in_one_pass() {
        let value = serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"restartPolicy": "Sometimes", "containers": [
                {"name": "c", "image": "i", "resources": {"limits": {"cpu": "lots"}}},
                {"name": "d", "image": "i", "tty": "yes", "workingDir": "/w"}]}
        });
        let decoded = decode_pod(&value);
        let errors: Vec<String> = decoded.errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].starts_with("spec.restartPolicy: Unsupported value"));
        assert!(
            errors[1].starts_with("cannot decode pod: spec.containers[0].resources.limits.cpu: ")
        );
        assert!(errors[2].starts_with("cannot decode pod: spec.containers[1].tty: invalid type"));
        let pod = decoded.pod.as_ref().expect("the rest decodes");
        assert_eq!(pod.spec.containers[1].working_dir, "/w");
        // A validation error about a value left out would only repeat it.
        let repeat = PodError::Required {
            field: "spec.containers[1].tty".into(),
            detail: String::new(),
        };
        assert!(!decoded.is_news(&repeat));
        assert!(decoded.is_news(&PodError::Required {
            field: "spec.containers[1].name".into(),
            detail: String::new(),
        }));
    }

    #[test]
    fn a_value_that_does_not_fit_is_named_with_its_path() {
        let value = serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"limits": {"cpu": "1x"}}}]}
        });
        let errors: Vec<String> = pod_from_value(&value)
            .expect_err("must fail")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("cannot decode pod: spec.containers[0].resources.limits.cpu: "),
            "{errors:?}"
        );
    }
}
