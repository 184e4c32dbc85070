use std::collections::BTreeSet;

use serde_json::json;

use super::*;
use crate::domain::pod::pod_from_value;

/// A pod as the v1.26 API server stores it after its defaulting and admission plugins
/// (ServiceAccount, DefaultTolerationSeconds, Priority): every field it adds to every pod.
fn api_defaulted_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {
            "containers": [{
                "name": "app", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                "resources": {}, "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"name": "kube-api-access-x", "readOnly": true,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
            }],
            "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "nodeName": "n1",
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
            "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "securityContext": {}, "serviceAccount": "default", "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "volumes": [{"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ]}}]
        },
        "status": {"phase": "Pending", "qosClass": "BestEffort"}
    })
}

fn paths(spec: &Value) -> Vec<String> {
    refused_fields(spec).into_iter().map(|r| r.path).collect()
}

#[test]
fn what_the_api_server_adds_to_every_pod_is_not_refused() {
    assert_eq!(paths(&api_defaulted_pod()["spec"]), Vec::<String>::new());
}

#[test]
fn each_refused_field_is_named_with_its_indexes() {
    let mut pod = api_defaulted_pod();
    let spec = &mut pod["spec"];
    spec["hostnameOverride"] = json!("other");
    spec["ephemeralContainers"] = json!([{"name": "debugger", "image": "busybox",
        "volumeMounts": [{"name": "disk", "mountPath": "/disk", "recursiveReadOnly": "Enabled"}]}]);
    spec["containers"][0]["volumeMounts"][0]["recursiveReadOnly"] = json!("Enabled");
    spec["containers"][0]["lifecycle"] = json!({"stopSignal": "SIGUSR1"});
    assert_eq!(
        paths(spec),
        [
            "spec.containers[0].lifecycle.stopSignal",
            "spec.containers[0].volumeMounts[0].recursiveReadOnly",
            "spec.ephemeralContainers[0].volumeMounts[0].recursiveReadOnly",
            "spec.hostnameOverride",
        ]
    );
}

#[test]
fn a_value_the_node_can_honour_is_not_refused() {
    let mut pod = api_defaulted_pod();
    let spec = &mut pod["spec"];
    spec["hostUsers"] = json!(true);
    spec["setHostnameAsFQDN"] = json!(false);
    spec["os"] = json!({"name": "linux"});
    spec["containers"][0]["volumeMounts"][0]["mountPropagation"] = json!("Bidirectional");
    spec["containers"][0]["volumeMounts"][0]["recursiveReadOnly"] = json!("Disabled");
    spec["containers"][0]["stdinOnce"] = json!(false);
    assert_eq!(paths(spec), Vec::<String>::new());

    spec["hostUsers"] = json!(false);
    assert_eq!(paths(spec), Vec::<String>::new());
    spec["containers"][0]["volumeMounts"][0]["recursiveReadOnly"] = json!("IfPossible");
    let refused = refused_fields(spec);
    let text: Vec<String> = refused.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "spec.containers[0].volumeMounts[0].recursiveReadOnly: \"IfPossible\": recursive read-only mounts are not asked of the runtime (only Disabled is supported)",
        ]
    );
}

#[test]
fn empty_values_say_nothing() {
    let spec = json!({
        "containers": [{"name": "c", "image": "i"}],
        "activeDeadlineSeconds": null, "dnsConfig": {}, "readinessGates": [],
        "runtimeClassName": "", "ephemeralContainers": []
    });
    assert_eq!(paths(&spec), Vec::<String>::new());
}

#[test]
fn another_components_fields_and_unknown_plugins_are_left_to_them() {
    let spec = json!({
        "containers": [{"name": "c", "image": "i"}],
        "schedulerName": "custom", "schedulingGates": [{"name": "wait"}],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                       "whenUnsatisfiable": "DoNotSchedule", "someNewKnob": 1}],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
        // A plugin rkubelet lacks is refused where it is mounted: the pod waits.
        "volumes": [{"name": "repo", "gitRepo": {"repository": "https://example.invalid/x.git"}}]
    });
    assert_eq!(paths(&spec), Vec::<String>::new());
}

#[test]
fn a_field_the_table_does_not_know_is_refused_with_its_path() {
    let spec = json!({
        "containers": [{"name": "c", "image": "i", "securityContext": {"futureKnob": "on"}}],
        "someFutureField": {"x": 1}
    });
    let refused = refused_fields(&spec);
    assert_eq!(
        refused
            .iter()
            .map(|r| (r.path.as_str(), r.why.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                "spec.containers[0].securityContext.futureKnob",
                UNKNOWN_FIELD
            ),
            ("spec.someFutureField", UNKNOWN_FIELD),
        ]
    );
}

#[test]
fn the_decoder_records_the_refused_fields_and_admission_names_them() {
    let mut value = api_defaulted_pod();
    let pod = pod_from_value(&value).expect("decodes");
    assert_eq!(admit(&pod), Ok(()));

    value["spec"]["hostnameOverride"] = json!("other");
    value["spec"]["containers"][0]["lifecycle"] = json!({"stopSignal": "SIGUSR1"});
    let pod = pod_from_value(&value).expect("decodes");
    let rejection = admit(&pod).expect_err("refused");
    assert_eq!(rejection.reason, "PodFeatureUnsupported");
    assert!(
        rejection.message.starts_with(
            "Pod requires node features that are not available: spec.containers[0].lifecycle.stopSignal: "
        ) && rejection
            .message
            .ends_with("; spec.hostnameOverride: the hostname override is not given to the sandbox"),
        "{}",
        rejection.message
    );
}

#[test]
fn every_path_is_one_row_and_refused_rows_have_no_rows_below() {
    let rows = rows();
    let mut seen = BTreeSet::new();
    for (path, treatment) in &rows {
        assert!(seen.insert(path.clone()), "{path} twice");
        if treatment.covers_subtree() {
            assert!(
                !rows.iter().any(|(p, _)| p.starts_with(&format!("{path}."))),
                "{path} covers its value but has rows below"
            );
        }
    }
}

#[test]
fn a_schema_path_takes_its_row_or_the_covering_ancestors() {
    assert_eq!(
        treatment_of("spec.containers[].volumeMounts[].subPathExpr"),
        Some(Treatment::Honoured(
            "a subpath with $(VAR) from the environment"
        ))
    );
    assert_eq!(
        treatment_of("spec.ephemeralContainers[].volumeMounts[].name"),
        Some(Treatment::Honoured("the volume mounted"))
    );
    assert!(matches!(
        treatment_of("spec.ephemeralContainers[].ports[].containerPort"),
        Some(Treatment::NotTheKubelets(_))
    ));
    assert!(matches!(
        treatment_of("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[].topologyKey"),
        Some(Treatment::NotTheKubelets(_))
    ));
    assert_eq!(treatment_of("spec.containers[].someFutureField"), None);
    // Below an honoured map or scalar, nothing is classified.
    assert_eq!(treatment_of("spec.nodeSelector.zone"), None);
}
