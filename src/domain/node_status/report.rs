//! Whether to send the node status, and the strategic-merge patch bodies that send it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::labels::MetadataChanges;
use super::model::{NodeStatus, ResourceList};
use super::status::{compute_status, status_changed, NodeEvent, StatusInputs};

/// One status period's decision, made on the Node the API server holds.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusReport {
    /// The status computed on the held one (its transition times kept where a condition's
    /// status did not change).
    pub status: NodeStatus,
    /// The events the transitions from the held status record.
    pub events: Vec<NodeEvent>,
    /// The patch to send, `None` when the held status is current and the report frequency
    /// has not passed.
    pub patch: Option<Value>,
}

/// Upstream's `tryUpdateNodeStatus` after its GET: the status is computed on the status the
/// API server holds (`held`), not on the one last sent, and compared with it; so a
/// condition someone else changed (the node controller's `Unknown` after an outage) is
/// corrected at the next period, not after `report_frequency`.
pub fn report_status(
    held: &NodeStatus,
    inputs: &StatusInputs,
    since_last_report: Option<Duration>,
    report_frequency: Duration,
) -> StatusReport {
    let update = compute_status(held, inputs);
    let patch = should_report(held, &update.status, since_last_report, report_frequency)
        .then(|| status_patch(held, &update.status));
    StatusReport {
        status: update.status,
        events: update.events,
        patch,
    }
}

/// Upstream's `tryUpdateNodeStatus` decision: send when the status changed beyond heartbeat
/// times, or when `report_frequency` has passed since the last report (`None`: never
/// reported).
pub fn should_report(
    last_reported: &NodeStatus,
    status: &NodeStatus,
    since_last_report: Option<Duration>,
    report_frequency: Duration,
) -> bool {
    since_last_report.is_none_or(|since| since >= report_frequency)
        || status_changed(last_reported, status)
}

/// The strategic-merge patch of the `status` subresource that turns `old` into `new`:
/// every condition (merged by type: heartbeats move), the addresses replaced whole when they
/// changed (their merge key, type, is not unique; upstream patches them the same way),
/// changed capacity and allocatable entries (removed ones as null), and nodeInfo,
/// daemonEndpoints and images when they changed.
pub fn status_patch(old: &NodeStatus, new: &NodeStatus) -> Value {
    let mut status = Map::new();
    if !new.conditions.is_empty() {
        status.insert("conditions".into(), json!(new.conditions));
    }
    if old.addresses != new.addresses {
        let mut addresses: Vec<Value> = new.addresses.iter().map(|a| json!(a)).collect();
        addresses.push(json!({"$patch": "replace"}));
        status.insert("addresses".into(), Value::Array(addresses));
    }
    for (field, old_list, new_list) in [
        ("capacity", &old.capacity, &new.capacity),
        ("allocatable", &old.allocatable, &new.allocatable),
    ] {
        let changes = resource_changes(old_list, new_list);
        if !changes.is_empty() {
            status.insert(field.into(), Value::Object(changes));
        }
    }
    if old.node_info != new.node_info {
        status.insert("nodeInfo".into(), json!(new.node_info));
    }
    if old.daemon_endpoints != new.daemon_endpoints {
        status.insert("daemonEndpoints".into(), json!(new.daemon_endpoints));
    }
    if old.images != new.images {
        // Images carry no patch strategy: the list is replaced.
        status.insert("images".into(), json!(new.images));
    }
    if old.volumes_in_use != new.volumes_in_use {
        // Replaced whole too; null clears it.
        let in_use = if new.volumes_in_use.is_empty() {
            Value::Null
        } else {
            json!(new.volumes_in_use)
        };
        status.insert("volumesInUse".into(), in_use);
    }
    json!({ "status": status })
}

fn resource_changes(old: &ResourceList, new: &ResourceList) -> Map<String, Value> {
    let mut changes = Map::new();
    for (name, quantity) in new {
        if old.get(name) != Some(quantity) {
            changes.insert(name.clone(), json!(quantity));
        }
    }
    for name in old.keys().filter(|k| !new.contains_key(*k)) {
        changes.insert(name.clone(), Value::Null);
    }
    changes
}

/// The patch of the Node's metadata that applies `changes` (null removes a key).
pub fn metadata_patch(changes: &MetadataChanges) -> Value {
    let as_map = |m: &BTreeMap<String, Option<String>>| -> Map<String, Value> {
        m.iter()
            .map(|(k, v)| (k.clone(), v.as_ref().map_or(Value::Null, |v| json!(v))))
            .collect()
    };
    let mut metadata = Map::new();
    if !changes.labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(as_map(&changes.labels)));
    }
    if !changes.annotations.is_empty() {
        metadata.insert(
            "annotations".into(),
            Value::Object(as_map(&changes.annotations)),
        );
    }
    json!({ "metadata": metadata })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::node_status::model::{ConditionStatus, NodeAddress, Time};
    use crate::domain::units::quantity::Quantity;

    fn inputs(now: i64) -> StatusInputs {
        StatusInputs {
            node_name: "n1".into(),
            now: Time(now),
            addresses: vec![
                NodeAddress::new("InternalIP", "10.0.0.5"),
                NodeAddress::new("Hostname", "n1"),
            ],
            capacity: [("cpu", "2"), ("memory", "4Gi"), ("pods", "110")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), Quantity::parse(v).expect("q")))
                .collect(),
            kubelet_port: 10250,
            max_images: 50,
            ..StatusInputs::default()
        }
    }

    const MINUTE: Duration = Duration::from_secs(60);
    const REPORT: Duration = Duration::from_secs(300);

    #[test]
    fn heartbeats_alone_are_sent_only_every_report_frequency() {
        let first = compute_status(&NodeStatus::default(), &inputs(0)).status;
        let later = compute_status(&first, &inputs(10)).status;
        assert!(should_report(&NodeStatus::default(), &first, None, REPORT));
        assert!(!should_report(&first, &later, Some(MINUTE), REPORT));
        assert!(should_report(&first, &later, Some(REPORT), REPORT));
        let mut changed = inputs(20);
        changed.not_ready = vec!["container runtime is down".into()];
        let not_ready = compute_status(&later, &changed).status;
        assert!(should_report(&first, &not_ready, Some(MINUTE), REPORT));
    }

    /// `volumesInUse` is the kubelet's, sent at once when it changes (null clears it);
    /// `volumesAttached` is the attach-detach controller's: kept, never sent.
    #[test]
    fn volumes_in_use_are_sent_when_they_change_and_volumes_attached_never() {
        let mut held = compute_status(&NodeStatus::default(), &inputs(0)).status;
        held.volumes_attached = vec![crate::domain::node_status::model::AttachedVolume {
            name: "kubernetes.io/csi/d^v1".into(),
            device_path: String::new(),
        }];
        let mut using = inputs(10);
        using.volumes_in_use = vec!["kubernetes.io/csi/d^v1".into()];
        let report = report_status(&held, &using, Some(MINUTE), REPORT);
        assert_eq!(report.status.volumes_attached, held.volumes_attached);
        let patch = report.patch.expect("sent at once");
        assert_eq!(
            patch["status"]["volumesInUse"],
            serde_json::json!(["kubernetes.io/csi/d^v1"])
        );
        assert!(patch["status"].get("volumesAttached").is_none());
        let released = report_status(&report.status, &inputs(20), Some(MINUTE), REPORT);
        assert_eq!(
            released.patch.expect("sent at once")["status"]["volumesInUse"],
            Value::Null
        );
    }

    /// The node controller's mark after a silence: every condition `Unknown`.
    fn marked_unknown(status: &NodeStatus, at: i64) -> NodeStatus {
        let mut marked = status.clone();
        for c in &mut marked.conditions {
            c.status = ConditionStatus::Unknown;
            c.reason = "NodeStatusUnknown".into();
            c.message = "Kubelet stopped posting node status.".into();
            c.last_transition_time = Some(Time(at));
        }
        marked
    }

    #[test]
    fn a_condition_changed_by_someone_else_is_corrected_at_once() {
        let sent = compute_status(&NodeStatus::default(), &inputs(0)).status;
        // A minute later, nothing changed: only heartbeats, not sent.
        let quiet = report_status(&sent, &inputs(60), Some(MINUTE), REPORT);
        assert_eq!(quiet.patch, None);
        assert!(quiet.events.is_empty());
        // The node controller marked the node Unknown meanwhile: sent at the next period,
        // well before the report frequency, with fresh transition times and events.
        let held = marked_unknown(&sent, 100);
        let report = report_status(&held, &inputs(110), Some(Duration::from_secs(110)), REPORT);
        let patch = report.patch.expect("sent");
        let ready = report
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .expect("Ready");
        assert_eq!(ready.status, ConditionStatus::True);
        assert_eq!(ready.reason, "KubeletReady");
        assert_eq!(ready.last_transition_time, Some(Time(110)));
        let conditions = patch["status"]["conditions"]
            .as_array()
            .expect("conditions");
        assert_eq!(conditions.len(), 4);
        assert!(
            conditions
                .iter()
                .all(|c| c["status"] != "Unknown"
                    && c["lastTransitionTime"] == "1970-01-01T00:01:50Z")
        );
        let mut reasons: Vec<&str> = report.events.iter().map(|e| e.reason.as_str()).collect();
        reasons.sort_unstable();
        assert_eq!(
            reasons,
            [
                "NodeHasNoDiskPressure",
                "NodeHasSufficientMemory",
                "NodeHasSufficientPID",
                "NodeReady"
            ]
        );
        // Once the API holds the corrected status, nothing more is sent.
        let after = report_status(
            &report.status,
            &inputs(120),
            Some(Duration::from_secs(10)),
            REPORT,
        );
        assert_eq!(after.patch, None);
    }

    /// A heartbeat-only patch carries the conditions and nothing else.
    #[test]
    fn golden_heartbeat_patch() {
        let first = compute_status(&NodeStatus::default(), &inputs(0)).status;
        let later = compute_status(&first, &inputs(300)).status;
        let patch = status_patch(&first, &later);
        let status = patch["status"].as_object().expect("object");
        assert_eq!(status.keys().collect::<Vec<_>>(), ["conditions"]);
        assert_eq!(
            patch["status"]["conditions"][3],
            json!({"type": "Ready", "status": "True",
                   "lastHeartbeatTime": "1970-01-01T00:05:00Z",
                   "lastTransitionTime": "1970-01-01T00:00:00Z",
                   "reason": "KubeletReady", "message": "kubelet is posting ready status"})
        );
    }

    /// New addresses replace the old list whole; a removed resource is nulled.
    #[test]
    fn golden_addresses_and_capacity_patch() {
        let first = compute_status(&NodeStatus::default(), &inputs(0)).status;
        let mut next = inputs(10);
        next.addresses[0] = NodeAddress::new("InternalIP", "10.0.0.6");
        next.capacity.remove("pods");
        next.capacity
            .insert("hugepages-2Mi".into(), Quantity::parse("0").expect("q"));
        let second = compute_status(&first, &next).status;
        let patch = status_patch(&first, &second);
        assert_eq!(
            patch["status"]["addresses"],
            json!([
                {"type": "InternalIP", "address": "10.0.0.6"},
                {"type": "Hostname", "address": "n1"},
                {"$patch": "replace"}
            ])
        );
        assert_eq!(
            patch["status"]["capacity"],
            json!({"hugepages-2Mi": "0", "pods": null})
        );
        assert!(patch["status"].get("nodeInfo").is_none());
    }

    #[test]
    fn the_first_patch_after_registration_sends_everything_set() {
        let first = compute_status(&NodeStatus::default(), &inputs(0)).status;
        let patch = status_patch(&NodeStatus::default(), &first);
        let keys: Vec<&String> = patch["status"].as_object().expect("obj").keys().collect();
        assert_eq!(
            keys,
            ["conditions", "addresses", "capacity", "daemonEndpoints"]
        );
    }

    #[test]
    fn golden_metadata_patch() {
        let changes = MetadataChanges {
            labels: BTreeMap::from([
                ("kubernetes.io/arch".to_string(), Some("amd64".to_string())),
                ("gone".to_string(), None),
            ]),
            annotations: BTreeMap::new(),
        };
        assert_eq!(
            metadata_patch(&changes),
            json!({"metadata": {"labels": {"gone": null, "kubernetes.io/arch": "amd64"}}})
        );
    }
}
