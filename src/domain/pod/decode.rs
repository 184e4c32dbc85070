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
    let mut value = value.clone();
    strip_nulls(&mut value);
    let errors = check_enum_fields(&mut value);
    if !errors.is_empty() {
        return Err(errors);
    }
    let refused_fields = value
        .get("spec")
        .map(super::fields::refused_fields)
        .unwrap_or_default();
    // The path of a value that does not fit (a bad quantity names its resource).
    let mut pod = serde_path_to_error::deserialize::<_, Pod>(value).map_err(|e| {
        let path = e.path().to_string();
        vec![PodError::Decode {
            reason: format!("{path}: {}", e.into_inner()),
        }]
    })?;
    pod.spec.refused_fields = refused_fields;
    Ok(pod)
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

/// Checks one enum-valued string field, removing it when empty so the
/// default applies.
fn check_enum(
    obj: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
    path: &str,
    supported: &[&str],
    errors: &mut Vec<PodError>,
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
            errors.push(PodError::Unsupported {
                field: format!("{path}.{key}"),
                value: rendered,
                supported: supported_list(supported),
            });
        }
    }
}

fn check_enum_fields(value: &mut serde_json::Value) -> Vec<PodError> {
    let mut errors = Vec::new();
    let Some(spec) = value.get_mut("spec").and_then(|s| s.as_object_mut()) else {
        return errors;
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
    for list in ["initContainers", "containers"] {
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
    errors
}

/// The `type` of a security context's `seccompProfile` and `appArmorProfile`.
fn check_profile_types(
    sc: &mut serde_json::Map<String, serde_json::Value>,
    path: &str,
    errors: &mut Vec<PodError>,
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
