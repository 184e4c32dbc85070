//! The CPU manager's state (upstream v1.26 `cpumanager/state`): the shared (default) CPU
//! set and each container's exclusive set, and the `cpu_manager_state` checkpoint that
//! keeps them over restarts: its JSON, its checksum (FNV-32a over go-spew's print of the
//! checkpoint struct, as upstream's `checksum.New`), and the checks on restore. The app
//! reads and writes the file; upstream writes it after every change.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::domain::units::cpuset::CpuSet;
use crate::domain::units::go_quote;
use crate::domain::upstream::container_hash::fnv32a;
use crate::domain::upstream::gojson::write_string;

/// Pod UID, container name: the container's exclusive CPUs.
pub type ContainerCpuAssignments = BTreeMap<String, BTreeMap<String, CpuSet>>;

/// The checkpoint file's name in the kubelet's root directory.
pub const CPU_MANAGER_STATE_FILE_NAME: &str = "cpu_manager_state";

/// The in-memory state (upstream's `stateMemory`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuManagerState {
    assignments: ContainerCpuAssignments,
    default_cpu_set: CpuSet,
}

impl CpuManagerState {
    pub fn new(default_cpu_set: CpuSet, assignments: ContainerCpuAssignments) -> CpuManagerState {
        CpuManagerState {
            assignments,
            default_cpu_set,
        }
    }

    pub fn get_cpu_set(&self, pod_uid: &str, container_name: &str) -> Option<&CpuSet> {
        self.assignments.get(pod_uid)?.get(container_name)
    }

    pub fn get_default_cpu_set(&self) -> &CpuSet {
        &self.default_cpu_set
    }

    /// The container's exclusive CPUs, or the shared set when it has none.
    pub fn get_cpu_set_or_default(&self, pod_uid: &str, container_name: &str) -> &CpuSet {
        self.get_cpu_set(pod_uid, container_name)
            .unwrap_or(&self.default_cpu_set)
    }

    pub fn get_cpu_assignments(&self) -> &ContainerCpuAssignments {
        &self.assignments
    }

    pub fn set_cpu_set(&mut self, pod_uid: &str, container_name: &str, cpus: CpuSet) {
        self.assignments
            .entry(pod_uid.to_string())
            .or_default()
            .insert(container_name.to_string(), cpus);
    }

    pub fn set_default_cpu_set(&mut self, cpus: CpuSet) {
        self.default_cpu_set = cpus;
    }

    pub fn set_cpu_assignments(&mut self, assignments: ContainerCpuAssignments) {
        self.assignments = assignments;
    }

    /// Forgets the container's assignment, and the pod once it has none left.
    pub fn delete(&mut self, pod_uid: &str, container_name: &str) {
        if let Some(containers) = self.assignments.get_mut(pod_uid) {
            containers.remove(container_name);
            if containers.is_empty() {
                self.assignments.remove(pod_uid);
            }
        }
    }

    pub fn clear_state(&mut self) {
        self.default_cpu_set = CpuSet::default();
        self.assignments.clear();
    }

    /// The checkpoint file's contents for this state under `policy_name`, as upstream's
    /// `storeState` writes it (JSON with the checksum).
    pub fn to_checkpoint(&self, policy_name: &str) -> String {
        let entries: BTreeMap<String, BTreeMap<String, String>> = self
            .assignments
            .iter()
            .map(|(pod, containers)| {
                let containers = containers
                    .iter()
                    .map(|(name, cpus)| (name.clone(), cpus.to_string()))
                    .collect();
                (pod.clone(), containers)
            })
            .collect();
        let checkpoint = CpuManagerCheckpoint {
            policy_name: policy_name.to_string(),
            default_cpu_set: self.default_cpu_set.to_string(),
            entries: Some(entries),
            checksum: 0,
        };
        checkpoint.marshal()
    }
}

/// The checkpoint as upstream v1.26 stores it (`CPUManagerCheckpointV2`):
/// `{"policyName":..,"defaultCpuSet":..,"entries":{pod:{container:cpus}},"checksum":N}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuManagerCheckpoint {
    pub policy_name: String,
    pub default_cpu_set: String,
    /// `None` only when the file says `"entries": null` (Go then holds a nil map, which
    /// go-spew, and so the checksum, tells from an empty one).
    pub entries: Option<BTreeMap<String, BTreeMap<String, String>>>,
    pub checksum: u64,
}

/// The checkpoint of kubelets before v1.18 (`CPUManagerCheckpointV1`): entries by
/// container id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuManagerCheckpointV1 {
    pub policy_name: String,
    pub default_cpu_set: String,
    pub entries: Option<BTreeMap<String, String>>,
    pub checksum: u64,
}

fn spew_header(out: &mut String, policy_name: &str, default_cpu_set: &str, entries_type: &str) {
    let _ = write!(
        out,
        "(*state.CPUManagerCheckpoint){{PolicyName:(string){policy_name} DefaultCPUSet:(string){default_cpu_set} Entries:({entries_type})"
    );
}

impl CpuManagerCheckpoint {
    /// go-spew's `%#v` of the checkpoint with its checksum zeroed, what upstream hashes.
    pub fn spew(&self) -> String {
        let mut out = String::new();
        spew_header(
            &mut out,
            &self.policy_name,
            &self.default_cpu_set,
            "map[string]map[string]string",
        );
        match &self.entries {
            None => out.push_str("<nil>"),
            Some(entries) => {
                out.push_str("map[");
                for (i, (pod, containers)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    let _ = write!(out, "{pod}:map[");
                    for (j, (name, cpus)) in containers.iter().enumerate() {
                        if j > 0 {
                            out.push(' ');
                        }
                        let _ = write!(out, "{name}:{cpus}");
                    }
                    out.push(']');
                }
                out.push(']');
            }
        }
        out.push_str(" Checksum:(checksum.Checksum)0}");
        out
    }

    /// The checksum upstream stores (`checksum.New` of the checkpoint, checksum zeroed).
    pub fn compute_checksum(&self) -> u64 {
        u64::from(fnv32a(self.spew().as_bytes()))
    }

    /// A stored checksum of 0 is accepted, as upstream does for old files.
    pub fn verify_checksum(&self) -> Result<(), CheckpointError> {
        if self.checksum == 0 || self.checksum == self.compute_checksum() {
            Ok(())
        } else {
            Err(CheckpointError::Corrupt)
        }
    }

    /// The file's contents with a fresh checksum, as Go's `json.Marshal` writes them.
    pub fn marshal(&self) -> String {
        let checksum = self.compute_checksum();
        let mut out = String::from("{\"policyName\":");
        write_string(&mut out, &self.policy_name);
        out.push_str(",\"defaultCpuSet\":");
        write_string(&mut out, &self.default_cpu_set);
        if let Some(entries) = self.entries.as_ref().filter(|e| !e.is_empty()) {
            out.push_str(",\"entries\":{");
            for (i, (pod, containers)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(&mut out, pod);
                out.push_str(":{");
                for (j, (name, cpus)) in containers.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    write_string(&mut out, name);
                    out.push(':');
                    write_string(&mut out, cpus);
                }
                out.push('}');
            }
            out.push('}');
        }
        let _ = write!(out, ",\"checksum\":{checksum}}}");
        out
    }
}

impl CpuManagerCheckpointV1 {
    /// Upstream verifies a v1 checksum over the v1 struct printed under the v2 name.
    pub fn spew(&self) -> String {
        let mut out = String::new();
        spew_header(
            &mut out,
            &self.policy_name,
            &self.default_cpu_set,
            "map[string]string",
        );
        match &self.entries {
            None => out.push_str("<nil>"),
            Some(entries) => {
                out.push_str("map[");
                for (i, (id, cpus)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    let _ = write!(out, "{id}:{cpus}");
                }
                out.push(']');
            }
        }
        out.push_str(" Checksum:(checksum.Checksum)0}");
        out
    }

    pub fn verify_checksum(&self) -> Result<(), CheckpointError> {
        if self.checksum == 0 || self.checksum == u64::from(fnv32a(self.spew().as_bytes())) {
            Ok(())
        } else {
            Err(CheckpointError::Corrupt)
        }
    }
}

/// Why a checkpoint could not be restored, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint is corrupted")]
    Corrupt,
    /// The JSON is malformed or has the wrong types (Go's `encoding/json` wording where
    /// reproduced).
    #[error("{0}")]
    Json(String),
    #[error(
        "error migrating v1 checkpoint state to v2 checkpoint state: containerID '{0}' not found in initial containers list"
    )]
    UnknownContainerId(String),
    #[error("configured policy {} differs from state checkpoint policy {}", go_quote(.configured), go_quote(.checkpoint))]
    PolicyMismatch {
        configured: String,
        checkpoint: String,
    },
    #[error("could not parse default cpu set {}: {reason}", go_quote(.cpus))]
    BadDefaultCpuSet { cpus: String, reason: String },
    #[error(
        "could not parse cpuset {} for container {} in pod {}: {reason}",
        go_quote(.cpus),
        go_quote(.container),
        go_quote(.pod)
    )]
    BadAssignment {
        cpus: String,
        container: String,
        pod: String,
        reason: String,
    },
}

/// A restore failure with the advice upstream gives (`NewCheckpointState`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not restore state from checkpoint: {source}, please drain this node and delete the CPU manager checkpoint file {} before restarting Kubelet", go_quote(.path))]
pub struct StateRestoreError {
    pub path: String,
    pub source: CheckpointError,
}

/// The JSON field of `object` Go's decoder fills for `name`: the exact key, else one
/// equal ignoring case.
fn field<'v>(object: &'v serde_json::Map<String, Value>, name: &str) -> Option<&'v Value> {
    object.get(name).or_else(|| {
        object
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_error(v: &Value, field: &str, go_type: &str, version: &str) -> CheckpointError {
    CheckpointError::Json(format!(
        "json: cannot unmarshal {} into Go struct field CPUManagerCheckpoint{version}.{field} of type {go_type}",
        json_type(v)
    ))
}

fn string_field(
    object: &serde_json::Map<String, Value>,
    name: &str,
    version: &str,
) -> Result<String, CheckpointError> {
    match field(object, name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(type_error(v, name, "string", version)),
    }
}

fn string_map(
    v: &Value,
    name: &str,
    version: &str,
) -> Result<BTreeMap<String, String>, CheckpointError> {
    let Value::Object(map) = v else {
        return Err(type_error(v, name, "map[string]string", version));
    };
    map.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            // Go leaves a string untouched for null, so the key maps to "".
            Value::Null => Ok((k.clone(), String::new())),
            other => Err(type_error(other, name, "string", version)),
        })
        .collect()
}

fn parse_object(blob: &str) -> Result<serde_json::Map<String, Value>, CheckpointError> {
    let value: Value = serde_json::from_str(blob).map_err(|e| {
        if e.is_eof() {
            CheckpointError::Json("unexpected end of JSON input".into())
        } else {
            CheckpointError::Json(e.to_string())
        }
    })?;
    match value {
        Value::Object(map) => Ok(map),
        other => Err(CheckpointError::Json(format!(
            "json: cannot unmarshal {} into Go value of type state.CPUManagerCheckpointV2",
            json_type(&other)
        ))),
    }
}

fn checksum_field(
    object: &serde_json::Map<String, Value>,
    version: &str,
) -> Result<u64, CheckpointError> {
    match field(object, "checksum") {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| type_error(v, "checksum", "checksum.Checksum", version)),
    }
}

impl CpuManagerCheckpoint {
    /// Decodes the file as Go decodes it into `CPUManagerCheckpointV2` (unknown fields
    /// ignored, field names matched ignoring case).
    pub fn unmarshal(blob: &str) -> Result<CpuManagerCheckpoint, CheckpointError> {
        let object = parse_object(blob)?;
        let entries = match field(&object, "entries") {
            // Upstream decodes into a checkpoint whose entries map already exists.
            None => Some(BTreeMap::new()),
            Some(Value::Null) => None,
            Some(Value::Object(pods)) => Some(
                pods.iter()
                    .map(|(pod, containers)| {
                        let containers = match containers {
                            Value::Null => BTreeMap::new(),
                            v => string_map(v, "entries", "")?,
                        };
                        Ok((pod.clone(), containers))
                    })
                    .collect::<Result<_, CheckpointError>>()?,
            ),
            Some(v) => return Err(type_error(v, "entries", "map[string]map[string]string", "")),
        };
        Ok(CpuManagerCheckpoint {
            policy_name: string_field(&object, "policyName", "")?,
            default_cpu_set: string_field(&object, "defaultCpuSet", "")?,
            entries,
            checksum: checksum_field(&object, "")?,
        })
    }
}

impl CpuManagerCheckpointV1 {
    /// Decodes the file as Go decodes it into `CPUManagerCheckpointV1`.
    pub fn unmarshal(blob: &str) -> Result<CpuManagerCheckpointV1, CheckpointError> {
        let object = parse_object(blob)?;
        let entries = match field(&object, "entries") {
            None => Some(BTreeMap::new()),
            Some(Value::Null) => None,
            Some(v) => Some(string_map(v, "entries", "V1")?),
        };
        Ok(CpuManagerCheckpointV1 {
            policy_name: string_field(&object, "policyName", "V1")?,
            default_cpu_set: string_field(&object, "defaultCpuSet", "V1")?,
            entries,
            checksum: checksum_field(&object, "V1")?,
        })
    }
}

/// Container id: (pod UID, container name), for the containers running at start-up
/// (upstream's `containermap.ContainerMap`); only a v1 checkpoint needs it.
pub type InitialContainers = BTreeMap<String, (String, String)>;

/// The state kept in the checkpoint, checked as upstream's `restoreState` does: a v1
/// file (entries by container id) is migrated with `initial_containers`, the policy must
/// be the configured one, and every CPU set must parse. `blob` is `None` when there is
/// no file yet: the state starts empty and the caller writes it
/// ([`CpuManagerState::to_checkpoint`]).
pub fn restore_state(
    blob: Option<&str>,
    policy_name: &str,
    initial_containers: &InitialContainers,
) -> Result<CpuManagerState, CheckpointError> {
    let Some(blob) = blob else {
        return Ok(CpuManagerState::default());
    };
    // Upstream tries the v1 layout first and falls back to v2 when it does not decode
    // or its checksum does not match.
    let v1 = CpuManagerCheckpointV1::unmarshal(blob)
        .and_then(|cp| cp.verify_checksum().map(|()| cp))
        .ok();
    let checkpoint = match v1 {
        Some(v1) => migrate_v1(&v1, initial_containers)?,
        None => {
            let v2 = CpuManagerCheckpoint::unmarshal(blob)?;
            v2.verify_checksum()?;
            v2
        }
    };
    if checkpoint.policy_name != policy_name {
        return Err(CheckpointError::PolicyMismatch {
            configured: policy_name.to_string(),
            checkpoint: checkpoint.policy_name,
        });
    }
    let default_cpu_set = CpuSet::parse(&checkpoint.default_cpu_set).map_err(|e| {
        CheckpointError::BadDefaultCpuSet {
            cpus: checkpoint.default_cpu_set.clone(),
            reason: e.to_string(),
        }
    })?;
    let mut assignments = ContainerCpuAssignments::new();
    for (pod, containers) in checkpoint.entries.iter().flatten() {
        let parsed = assignments.entry(pod.clone()).or_default();
        for (container, cpus) in containers {
            let set = CpuSet::parse(cpus).map_err(|e| CheckpointError::BadAssignment {
                cpus: cpus.clone(),
                container: container.clone(),
                pod: pod.clone(),
                reason: e.to_string(),
            })?;
            parsed.insert(container.clone(), set);
        }
    }
    Ok(CpuManagerState::new(default_cpu_set, assignments))
}

/// [`restore_state`] with upstream's advice around a failure, for the file at `path`.
pub fn restore_state_from_file(
    blob: Option<&str>,
    policy_name: &str,
    initial_containers: &InitialContainers,
    path: &str,
) -> Result<CpuManagerState, StateRestoreError> {
    restore_state(blob, policy_name, initial_containers).map_err(|source| StateRestoreError {
        path: path.to_string(),
        source,
    })
}

fn migrate_v1(
    v1: &CpuManagerCheckpointV1,
    initial_containers: &InitialContainers,
) -> Result<CpuManagerCheckpoint, CheckpointError> {
    let mut entries: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (container_id, cpus) in v1.entries.iter().flatten() {
        let (pod, container) = initial_containers
            .get(container_id)
            .ok_or_else(|| CheckpointError::UnknownContainerId(container_id.clone()))?;
        entries
            .entry(pod.clone())
            .or_default()
            .insert(container.clone(), cpus.clone());
    }
    Ok(CpuManagerCheckpoint {
        policy_name: v1.policy_name.clone(),
        default_cpu_set: v1.default_cpu_set.clone(),
        entries: Some(entries),
        checksum: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[usize]) -> CpuSet {
        CpuSet::new(cpus.iter().copied())
    }

    fn assignments(entries: &[(&str, &str, &[usize])]) -> ContainerCpuAssignments {
        let mut a = ContainerCpuAssignments::new();
        for (pod, container, cpus) in entries {
            a.entry(pod.to_string())
                .or_default()
                .insert(container.to_string(), set(cpus));
        }
        a
    }

    type RestoreCase<'a> = (
        &'static str,
        Option<&'static str>,
        &'a InitialContainers,
        Result<CpuManagerState, &'static str>,
    );

    // state_checkpoint_test.go TestCheckpointStateRestore, with upstream's literal
    // checkpoints and checksums.
    #[test]
    fn restore_upstream_checkpoints() {
        let migration = InitialContainers::from([
            (
                "containerID1".to_string(),
                ("pod".to_string(), "container1".to_string()),
            ),
            (
                "containerID2".to_string(),
                ("pod".to_string(), "container2".to_string()),
            ),
        ]);
        let none = InitialContainers::new();
        let cases: Vec<RestoreCase> = vec![
            (
                "Restore non-existing checkpoint",
                None,
                &none,
                Ok(CpuManagerState::default()),
            ),
            (
                "Restore default cpu set",
                Some(r#"{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 354655845}"#),
                &none,
                Ok(CpuManagerState::new(set(&[4, 5, 6]), ContainerCpuAssignments::new())),
            ),
            (
                "Restore valid checkpoint",
                Some(
                    r#"{
                    "policyName": "none",
                    "defaultCPUSet": "1-3",
                    "entries": {"pod": {"container1": "4-6", "container2": "1-3"}},
                    "checksum": 3610638499
                }"#,
                ),
                &none,
                Ok(CpuManagerState::new(
                    set(&[1, 2, 3]),
                    assignments(&[("pod", "container1", &[4, 5, 6]), ("pod", "container2", &[1, 2, 3])]),
                )),
            ),
            (
                "Restore checkpoint with invalid checksum",
                Some(r#"{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 1337}"#),
                &none,
                Err("checkpoint is corrupted"),
            ),
            (
                "Restore checkpoint with invalid JSON",
                Some("{"),
                &none,
                Err("unexpected end of JSON input"),
            ),
            (
                "Restore checkpoint with invalid policy name",
                Some(r#"{"policyName": "other", "defaultCPUSet": "1-3", "entries": {}, "checksum": 1394507217}"#),
                &none,
                Err(r#"configured policy "none" differs from state checkpoint policy "other""#),
            ),
            (
                "Restore checkpoint with unparsable default cpu set",
                Some(r#"{"policyName": "none", "defaultCPUSet": "1.3", "entries": {}, "checksum": 3021697696}"#),
                &none,
                Err(r#"could not parse default cpu set "1.3": strconv.Atoi: parsing "1.3": invalid syntax"#),
            ),
            (
                "Restore checkpoint with unparsable assignment entry",
                Some(
                    r#"{
                    "policyName": "none",
                    "defaultCPUSet": "1-3",
                    "entries": {"pod": {"container1": "4-6", "container2": "asd"}},
                    "checksum": 962272150
                }"#,
                ),
                &none,
                Err(r#"could not parse cpuset "asd" for container "container2" in pod "pod": strconv.Atoi: parsing "asd": invalid syntax"#),
            ),
            (
                "Restore checkpoint from checkpoint with v1 checksum",
                Some(r#"{"policyName": "none", "defaultCPUSet": "1-3", "checksum": 1694838852}"#),
                &none,
                Ok(CpuManagerState::new(set(&[1, 2, 3]), ContainerCpuAssignments::new())),
            ),
            (
                "Restore checkpoint with migration",
                Some(
                    r#"{
                    "policyName": "none",
                    "defaultCPUSet": "1-3",
                    "entries": {"containerID1": "4-6", "containerID2": "1-3"},
                    "checksum": 3680390589
                }"#,
                ),
                &migration,
                Ok(CpuManagerState::new(
                    set(&[1, 2, 3]),
                    assignments(&[("pod", "container1", &[4, 5, 6]), ("pod", "container2", &[1, 2, 3])]),
                )),
            ),
            (
                "Restore v1 checkpoint with an unknown container id",
                Some(
                    r#"{"policyName": "none", "defaultCPUSet": "1-3",
                    "entries": {"containerID1": "4-6", "containerID2": "1-3"}, "checksum": 3680390589}"#,
                ),
                &none,
                Err("error migrating v1 checkpoint state to v2 checkpoint state: containerID 'containerID1' not found in initial containers list"),
            ),
        ];
        for (description, blob, initial, expected) in cases {
            let got = restore_state(blob, "none", initial).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_string), "{description}");
        }
    }

    #[test]
    fn restore_failure_carries_upstream_advice() {
        let err = restore_state_from_file(
            Some("{"),
            "static",
            &InitialContainers::new(),
            "/var/lib/kubelet/cpu_manager_state",
        )
        .expect_err("invalid JSON");
        assert_eq!(
            err.to_string(),
            "could not restore state from checkpoint: unexpected end of JSON input, please drain this node and delete the CPU manager checkpoint file \"/var/lib/kubelet/cpu_manager_state\" before restarting Kubelet"
        );
    }

    // TestCheckpointStateStore: what is stored restores unchanged; the checksums match
    // upstream's literals for the same content.
    #[test]
    fn store_then_restore_round_trips() {
        let states = [
            CpuManagerState::new(set(&[1, 2, 3]), ContainerCpuAssignments::new()),
            CpuManagerState::new(
                CpuSet::default(),
                assignments(&[("pod", "container1", &[1, 5, 8])]),
            ),
            CpuManagerState::new(
                set(&[0, 1]),
                assignments(&[
                    ("pod-a", "c1", &[2, 3]),
                    ("pod-a", "c2", &[4]),
                    ("pod-b", "c", &[5, 6, 7]),
                ]),
            ),
        ];
        for state in states {
            let blob = state.to_checkpoint("static");
            let restored = restore_state(Some(&blob), "static", &InitialContainers::new());
            assert_eq!(restored, Ok(state), "{blob}");
        }
        let upstream = CpuManagerState::new(
            set(&[1, 2, 3]),
            assignments(&[
                ("pod", "container1", &[4, 5, 6]),
                ("pod", "container2", &[1, 2, 3]),
            ]),
        );
        assert_eq!(
            upstream.to_checkpoint("none"),
            r#"{"policyName":"none","defaultCpuSet":"1-3","entries":{"pod":{"container1":"4-6","container2":"1-3"}},"checksum":3610638499}"#
        );
        assert_eq!(
            CpuManagerState::new(set(&[4, 5, 6]), ContainerCpuAssignments::new())
                .to_checkpoint("none"),
            r#"{"policyName":"none","defaultCpuSet":"4-6","checksum":354655845}"#
        );
    }

    #[test]
    fn checksum_hashes_the_spew_form() {
        let checkpoint = CpuManagerCheckpoint {
            policy_name: "static".into(),
            default_cpu_set: "0-1".into(),
            entries: Some(BTreeMap::from([(
                "uid".to_string(),
                BTreeMap::from([("c".to_string(), "2".to_string())]),
            )])),
            checksum: 7,
        };
        assert_eq!(
            checkpoint.spew(),
            "(*state.CPUManagerCheckpoint){PolicyName:(string)static DefaultCPUSet:(string)0-1 Entries:(map[string]map[string]string)map[uid:map[c:2]] Checksum:(checksum.Checksum)0}"
        );
        let nil_entries = CpuManagerCheckpoint {
            entries: None,
            ..checkpoint.clone()
        };
        assert!(nil_entries
            .spew()
            .contains("Entries:(map[string]map[string]string)<nil> "));
        // A zero checksum is accepted, as upstream accepts files of old kubelets.
        let unchecked = r#"{"policyName":"static","defaultCpuSet":"0-3"}"#;
        assert_eq!(
            restore_state(Some(unchecked), "static", &InitialContainers::new()),
            Ok(CpuManagerState::new(
                set(&[0, 1, 2, 3]),
                ContainerCpuAssignments::new()
            ))
        );
    }

    // TestCheckpointStateHelpers and TestCheckpointStateClear.
    #[test]
    fn state_helpers_and_clear() {
        let mut state = CpuManagerState::default();
        state.set_default_cpu_set(set(&[1, 5, 10]));
        state.set_cpu_assignments(assignments(&[("pod", "container1", &[1, 4])]));
        state.set_cpu_set("pod", "container2", set(&[6]));
        assert_eq!(state.get_cpu_set("pod", "container1"), Some(&set(&[1, 4])));
        assert_eq!(
            state.get_cpu_set_or_default("pod", "container3"),
            &set(&[1, 5, 10])
        );
        state.delete("pod", "container1");
        assert_eq!(state.get_cpu_set("pod", "container1"), None);
        state.delete("pod", "container2");
        assert!(
            state.get_cpu_assignments().is_empty(),
            "the pod goes with its last container"
        );
        state.set_cpu_set("pod", "container1", set(&[1]));
        state.clear_state();
        assert_eq!(state, CpuManagerState::default());
    }
}
