//! What the status manager adds to a computed status before it is stored and sent
//! (upstream's `updateStatusInternal`: the start time once, condition transition times
//! kept while a condition holds, the host IP), when two statuses are the same, and the
//! strategic-merge patch of `pods/status` that sends one.

use serde_json::{json, Map, Value};

use super::ApiPodStatus;

/// Stamps `status` against the `previous` one (the last stored, or the API's status when
/// the kubelet has none yet): `startTime` stays once set, each condition keeps its
/// `lastTransitionTime` while its status is unchanged and takes `now` (RFC 3339) when it
/// changes, and `hostIP` is the node's.
pub fn stamp_status(
    previous: Option<&ApiPodStatus>,
    status: &mut ApiPodStatus,
    host_ip: &str,
    now: &str,
) {
    if !host_ip.is_empty() {
        host_ip.clone_into(&mut status.host_ip);
    }
    status.start_time = previous
        .and_then(|p| p.start_time.clone())
        .or_else(|| Some(now.to_owned()));
    for condition in &mut status.conditions {
        let before = previous.and_then(|p| {
            p.conditions
                .iter()
                .find(|c| c.condition_type == condition.condition_type)
        });
        condition.last_transition_time = match before {
            Some(b) if b.status == condition.status && b.last_transition_time.is_some() => {
                b.last_transition_time.clone()
            }
            _ => Some(now.to_owned()),
        };
    }
}

/// A host-network pod's IP is the node's (its sandbox has none), as upstream sets it when
/// it knows the node's IP.
pub fn host_network_pod_ip(status: &mut ApiPodStatus, host_network: bool, host_ip: &str) {
    if host_network && status.pod_ip.is_empty() && !host_ip.is_empty() {
        host_ip.clone_into(&mut status.pod_ip);
        status.pod_ips = vec![super::PodIp {
            ip: host_ip.to_owned(),
        }];
    }
}

/// Conditions in a fixed order: the API keeps the order they were first written in.
fn normalized(status: &ApiPodStatus) -> ApiPodStatus {
    let mut status = status.clone();
    status
        .conditions
        .sort_by(|a, b| a.condition_type.cmp(&b.condition_type));
    status
}

/// Whether two statuses say the same (the order of conditions aside).
pub fn same_status(a: &ApiPodStatus, b: &ApiPodStatus) -> bool {
    normalized(a) == normalized(b)
}

/// The strategic-merge patch of `pods/status` that sets `status` on the pod with `uid`
/// (the uid is the patch's precondition: a pod recreated under the same name refuses
/// it). Fields the status leaves empty are cleared with `null`; container statuses are
/// replaced whole (they have no merge key), conditions merge by type. The scheduler's
/// `PodScheduled` time is kept by stamping against the API's status first.
pub fn status_patch(uid: &str, status: &ApiPodStatus) -> Value {
    let mut body = match serde_json::to_value(status) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    for key in ["reason", "message", "podIP", "podIPs", "hostIP"] {
        body.entry(key).or_insert(Value::Null);
    }
    // Conditions merge by type, field by field: a reason that no longer holds is cleared.
    if let Some(Value::Array(conditions)) = body.get_mut("conditions") {
        for c in conditions.iter_mut().filter_map(Value::as_object_mut) {
            for key in ["reason", "message"] {
                c.entry(key).or_insert(Value::Null);
            }
        }
    }
    json!({"metadata": {"uid": uid}, "status": body})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::status::{
        ApiContainerState, ApiContainerStatus, PodCondition, PodIp, Running,
    };

    fn condition(t: &str, status: &str) -> PodCondition {
        PodCondition {
            condition_type: t.into(),
            status: status.into(),
            ..PodCondition::default()
        }
    }

    fn running() -> ApiPodStatus {
        ApiPodStatus {
            phase: "Running".into(),
            pod_ip: "10.88.0.5".into(),
            pod_ips: vec![PodIp {
                ip: "10.88.0.5".into(),
            }],
            qos_class: "BestEffort".into(),
            conditions: vec![
                condition("Initialized", "True"),
                condition("Ready", "True"),
                condition("ContainersReady", "True"),
                condition("PodScheduled", "True"),
            ],
            container_statuses: vec![ApiContainerStatus {
                name: "app".into(),
                image: "busybox:1.36".into(),
                image_id: "sha256:abc".into(),
                container_id: "containerd://c1".into(),
                ready: true,
                started: true,
                restart_count: 0,
                state: ApiContainerState::Running(Running {
                    started_at: "2026-11-23T19:00:01Z".into(),
                }),
                last_state: None,
            }],
            ..ApiPodStatus::default()
        }
    }

    #[test]
    fn stamping_keeps_start_time_and_unchanged_transition_times() {
        let mut first = running();
        stamp_status(None, &mut first, "192.168.1.7", "2026-11-23T19:00:00Z");
        assert_eq!(first.host_ip, "192.168.1.7");
        assert_eq!(first.start_time.as_deref(), Some("2026-11-23T19:00:00Z"));
        assert!(first
            .conditions
            .iter()
            .all(|c| c.last_transition_time.as_deref() == Some("2026-11-23T19:00:00Z")));

        let mut second = running();
        second.conditions[1].status = "False".into();
        stamp_status(
            Some(&first),
            &mut second,
            "192.168.1.7",
            "2026-11-23T19:00:09Z",
        );
        assert_eq!(second.start_time, first.start_time);
        let times: Vec<&str> = second
            .conditions
            .iter()
            .map(|c| c.last_transition_time.as_deref().unwrap_or(""))
            .collect();
        assert_eq!(
            times,
            [
                "2026-11-23T19:00:00Z",
                "2026-11-23T19:00:09Z",
                "2026-11-23T19:00:00Z",
                "2026-11-23T19:00:00Z"
            ]
        );
    }

    #[test]
    fn the_same_status_in_another_condition_order_is_the_same() {
        let a = running();
        let mut b = running();
        b.conditions.rotate_left(1);
        assert!(same_status(&a, &b));
        b.container_statuses[0].restart_count = 1;
        assert!(!same_status(&a, &b));
    }

    /// A status read back from the API (unknown fields, `lastProbeTime: null`) decodes
    /// to the status the kubelet computed.
    #[test]
    fn an_api_status_decodes_to_the_computed_one() {
        let mut ours = running();
        stamp_status(None, &mut ours, "192.168.1.7", "2026-11-23T19:00:00Z");
        let mut api = serde_json::to_value(&ours).unwrap_or_default();
        api["nominatedNodeName"] = json!("x");
        api["conditions"][0]["lastProbeTime"] = Value::Null;
        // Go writes an empty struct for no last state.
        api["containerStatuses"][0]["lastState"] = json!({});
        let back: ApiPodStatus = serde_json::from_value(api).unwrap_or_default();
        assert!(same_status(&back, &ours));
    }

    /// The golden patch body of a running pod (kwok's `pod-ready` stage has this shape).
    #[test]
    fn the_patch_of_a_running_pod() {
        let mut status = running();
        stamp_status(None, &mut status, "192.168.1.7", "2026-11-23T19:00:00Z");
        let t = "2026-11-23T19:00:00Z";
        assert_eq!(
            status_patch("u-1", &status),
            json!({
                "metadata": {"uid": "u-1"},
                "status": {
                    "phase": "Running",
                    "reason": null,
                    "message": null,
                    "hostIP": "192.168.1.7",
                    "podIP": "10.88.0.5",
                    "podIPs": [{"ip": "10.88.0.5"}],
                    "startTime": t,
                    "qosClass": "BestEffort",
                    "containerStatuses": [{
                        "name": "app",
                        "image": "busybox:1.36",
                        "imageID": "sha256:abc",
                        "containerID": "containerd://c1",
                        "ready": true,
                        "started": true,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-11-23T19:00:01Z"}}
                    }],
                    "conditions": [
                        {"type": "Initialized", "status": "True", "lastTransitionTime": t, "reason": null, "message": null},
                        {"type": "Ready", "status": "True", "lastTransitionTime": t, "reason": null, "message": null},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": t, "reason": null, "message": null},
                        {"type": "PodScheduled", "status": "True", "lastTransitionTime": t, "reason": null, "message": null}
                    ]
                }
            })
        );
    }

    #[test]
    fn a_host_network_pod_takes_the_nodes_ip_once_known() {
        let mut status = ApiPodStatus::default();
        host_network_pod_ip(&mut status, true, "");
        assert_eq!(status.pod_ip, "");
        host_network_pod_ip(&mut status, false, "192.168.1.7");
        assert_eq!(status.pod_ip, "");
        host_network_pod_ip(&mut status, true, "192.168.1.7");
        assert_eq!(status.pod_ip, "192.168.1.7");
        assert_eq!(status.pod_ips.len(), 1);
        assert_eq!(status.pod_ips[0].ip, "192.168.1.7");
    }

    /// The golden patch body of a pod the node refused: no container status, the pod IP
    /// cleared.
    #[test]
    fn the_patch_of_a_rejected_pod() {
        let mut status = crate::domain::status::rejected_pod_status(
            "OutOfcpu",
            "Node didn't have enough resource: cpu, requested: 64000, used: 0, capacity: 2000",
        );
        stamp_status(None, &mut status, "", "2026-11-23T19:00:00Z");
        assert_eq!(
            status_patch("u-2", &status),
            json!({
                "metadata": {"uid": "u-2"},
                "status": {
                    "phase": "Failed",
                    "reason": "OutOfcpu",
                    "message": "Pod was rejected: Node didn't have enough resource: cpu, requested: 64000, used: 0, capacity: 2000",
                    "hostIP": null,
                    "podIP": null,
                    "podIPs": null,
                    "startTime": "2026-11-23T19:00:00Z",
                    "containerStatuses": []
                }
            })
        );
    }
}
