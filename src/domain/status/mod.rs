//! A pod's status as the API shows it (`v1.PodStatus`), computed from its spec,
//! what the runtime reports, and why the last sync could not start a container.
//!
//! Follows upstream's conversion of runtime records (`convertToAPIContainerStatuses`):
//! the newest instance of each container gives its state, the one before it its last
//! state, and a container the kubelet is holding back (image pull failed, crash-loop
//! back-off) shows as waiting with that reason.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::kuberuntime::actions::pod_phase;
use crate::domain::kuberuntime::runtime::{
    ContainerState, ContainerStatus, PodRuntimeStatus, SandboxState,
};
use crate::domain::pod::{qos_class, Container, Pod};
use crate::domain::units::time::rfc3339_seconds;

mod patch;
pub use patch::{host_network_pod_ip, same_status, stamp_status, status_patch};

/// Why a container is not running although the kubelet wants it to: set by a sync
/// that tried and failed, or chose to wait.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Waiting {
    /// Upstream's reason words: `ErrImagePull`, `ImagePullBackOff`, `ErrImageNeverPull`,
    /// `CrashLoopBackOff`, `CreateContainerError`, `CreateContainerConfigError`, ...
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl Waiting {
    pub fn new(reason: &str, message: impl Into<String>) -> Self {
        Self {
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Running {
    pub started_at: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Terminated {
    pub exit_code: i32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub started_at: String,
    pub finished_at: String,
    #[serde(rename = "containerID", skip_serializing_if = "String::is_empty")]
    pub container_id: String,
}

/// `v1.ContainerState`: exactly one member is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ApiContainerState {
    Waiting(Waiting),
    Running(Running),
    Terminated(Terminated),
}

impl Default for ApiContainerState {
    fn default() -> Self {
        ApiContainerState::Waiting(Waiting::default())
    }
}

/// A container state that may be absent, `null` or `{}` (Go's empty struct).
fn optional_state<'de, D>(deserializer: D) -> Result<Option<ApiContainerState>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let value = Option::<serde_json::Value>::deserialize(deserializer)?;
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Object(map)) if map.is_empty() => Ok(None),
        Some(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiContainerStatus {
    pub name: String,
    pub image: String,
    /// The image's digest reference from the runtime; empty until a container exists.
    #[serde(rename = "imageID")]
    pub image_id: String,
    #[serde(rename = "containerID", skip_serializing_if = "String::is_empty")]
    pub container_id: String,
    pub ready: bool,
    pub started: bool,
    pub restart_count: u32,
    pub state: ApiContainerState,
    /// The API server sends an empty `lastState: {}` for none.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_state"
    )]
    pub last_state: Option<ApiContainerState>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiPodStatus {
    pub phase: String,
    /// Why the node ended or refused the pod (`Evicted`, `PodFeatureUnsupported`,
    /// `SysctlForbidden`, `AppArmor`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The node's IP, stamped by the status manager ([`stamp_status`]).
    #[serde(rename = "hostIP", skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
    #[serde(rename = "podIP", skip_serializing_if = "String::is_empty")]
    pub pod_ip: String,
    #[serde(rename = "podIPs", skip_serializing_if = "Vec::is_empty")]
    pub pod_ips: Vec<PodIp>,
    /// When the kubelet first reported the pod (RFC 3339), stamped by [`stamp_status`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub qos_class: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub init_container_statuses: Vec<ApiContainerStatus>,
    pub container_statuses: Vec<ApiContainerStatus>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ephemeral_container_statuses: Vec<ApiContainerStatus>,
    /// `Initialized`, `ContainersReady`, `Ready`, `PodScheduled` (see [`pod_conditions`]);
    /// empty for a rejected pod.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PodCondition>,
}

/// `v1.PodIP`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PodIp {
    pub ip: String,
}

/// `v1.PodCondition`; `lastProbeTime` is never set by the kubelet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodCondition {
    #[serde(rename = "type")]
    pub condition_type: String,
    /// `True` or `False`.
    pub status: String,
    /// Stamped by [`stamp_status`]: kept while `status` stays the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl PodCondition {
    fn new(condition_type: &str, status: bool, reason: &str, message: String) -> Self {
        Self {
            condition_type: condition_type.to_owned(),
            status: if status { "True" } else { "False" }.to_owned(),
            last_transition_time: None,
            reason: reason.to_owned(),
            message,
        }
    }
}

/// Go's `%s` of a string slice: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// Upstream's `GeneratePodInitializedCondition`, `GenerateContainersReadyCondition`,
/// `GeneratePodReadyCondition` (no readiness gates) and a scheduled pod, from the
/// container statuses already in `status`.
pub fn pod_conditions(pod: &Pod, status: &ApiPodStatus) -> Vec<PodCondition> {
    let succeeded = status.phase == "Succeeded";
    let find = |statuses: &'_ [ApiContainerStatus], name: &str| {
        statuses.iter().position(|s| s.name == name)
    };
    let mut unknown_init = Vec::new();
    let mut incomplete = Vec::new();
    for c in &pod.spec.init_containers {
        match find(&status.init_container_statuses, &c.name)
            .map(|i| &status.init_container_statuses[i])
        {
            None => unknown_init.push(c.name.as_str()),
            Some(s) => {
                let done = matches!(&s.state, ApiContainerState::Terminated(t) if t.exit_code == 0);
                // A sidecar (restartable init container) counts once it has started.
                let sidecar_up = c.restart_policy.is_some() && s.started;
                if !done && !sidecar_up {
                    incomplete.push(c.name.as_str());
                }
            }
        }
    }
    let initialized = if unknown_init.is_empty() && incomplete.is_empty() {
        PodCondition::new("Initialized", true, "", String::new())
    } else if succeeded && unknown_init.is_empty() {
        PodCondition::new("Initialized", false, "PodCompleted", String::new())
    } else {
        let mut messages = Vec::new();
        if !unknown_init.is_empty() {
            messages.push(format!(
                "containers with unknown status: {}",
                go_list(&unknown_init)
            ));
        }
        if !incomplete.is_empty() {
            messages.push(format!(
                "containers with incomplete status: {}",
                go_list(&incomplete)
            ));
        }
        PodCondition::new(
            "Initialized",
            false,
            "ContainersNotInitialized",
            messages.join(", "),
        )
    };
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    for c in &pod.spec.containers {
        match find(&status.container_statuses, &c.name) {
            None => unknown.push(c.name.as_str()),
            Some(i) if !status.container_statuses[i].ready => unready.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    let containers_ready = if succeeded && unknown.is_empty() {
        PodCondition::new("ContainersReady", false, "PodCompleted", String::new())
    } else if unknown.is_empty() && unready.is_empty() {
        PodCondition::new("ContainersReady", true, "", String::new())
    } else {
        let mut messages = Vec::new();
        if !unknown.is_empty() {
            messages.push(format!(
                "containers with unknown status: {}",
                go_list(&unknown)
            ));
        }
        if !unready.is_empty() {
            messages.push(format!(
                "containers with unready status: {}",
                go_list(&unready)
            ));
        }
        PodCondition::new(
            "ContainersReady",
            false,
            "ContainersNotReady",
            messages.join(", "),
        )
    };
    let ready = PodCondition {
        condition_type: "Ready".to_owned(),
        ..containers_ready.clone()
    };
    vec![
        initialized,
        ready,
        containers_ready,
        PodCondition::new("PodScheduled", true, "", String::new()),
    ]
}

/// Upstream's `ReadinessGatesNotReady`.
pub const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// The pod's `Ready` condition with its readiness gates (upstream's
/// `GeneratePodReadyCondition`): while its containers are not ready it says what
/// `ContainersReady` says; then it is `True` only when every gate's condition, as the API
/// holds it (`api_conditions`, set by controllers), is `True`. Returns whether `Ready`
/// changed. A status without `ContainersReady` (a rejected pod) is left alone.
pub fn apply_readiness_gates(
    pod: &Pod,
    status: &mut ApiPodStatus,
    api_conditions: &[PodCondition],
) -> bool {
    if pod.spec.readiness_gates.is_empty() {
        return false;
    }
    let Some(containers_ready) = status
        .conditions
        .iter()
        .find(|c| c.condition_type == "ContainersReady")
    else {
        return false;
    };
    let mut ready = PodCondition {
        condition_type: "Ready".to_owned(),
        last_transition_time: None,
        ..containers_ready.clone()
    };
    if containers_ready.status == "True" {
        let unready: Vec<String> = pod
            .spec
            .readiness_gates
            .iter()
            .filter_map(|gate| {
                let gate = gate.condition_type.as_str();
                match api_conditions.iter().find(|c| c.condition_type == gate) {
                    None => Some(format!(
                        "corresponding condition of pod readiness gate \"{gate}\" does not exist."
                    )),
                    Some(c) if c.status != "True" => Some(format!(
                        "the status of pod readiness gate \"{gate}\" is not \"True\", but {}",
                        c.status
                    )),
                    Some(_) => None,
                }
            })
            .collect();
        if !unready.is_empty() {
            ready = PodCondition::new(
                "Ready",
                false,
                READINESS_GATES_NOT_READY,
                unready.join(", "),
            );
        }
    }
    let Some(current) = status
        .conditions
        .iter_mut()
        .find(|c| c.condition_type == "Ready")
    else {
        status.conditions.push(ready);
        return true;
    };
    let changed = (&current.status, &current.reason, &current.message)
        != (&ready.status, &ready.reason, &ready.message);
    if changed {
        *current = ready;
    }
    changed
}

/// The phase of a pod the kubelet ended.
pub const PHASE_FAILED: &str = "Failed";

/// The status of a pod the kubelet stopped for good (an eviction): phase `Failed`, the
/// reason and message, and `condition` set as upstream's `UpdatePodCondition` does
/// (replacing one of the same type).
pub fn terminal_status(
    mut status: ApiPodStatus,
    reason: &str,
    message: &str,
    condition: Option<PodCondition>,
) -> ApiPodStatus {
    status.phase = PHASE_FAILED.to_owned();
    status.reason = reason.to_owned();
    status.message = message.to_owned();
    if let Some(condition) = condition {
        status
            .conditions
            .retain(|c| c.condition_type != condition.condition_type);
        status.conditions.push(condition);
    }
    status
}

/// The status of a pod the node refuses to run, as upstream's `rejectPod` sets it:
/// `Failed`, the reason, and `Pod was rejected: <message>`, no container status.
pub fn rejected_pod_status(reason: &str, message: &str) -> ApiPodStatus {
    ApiPodStatus {
        phase: PHASE_FAILED.to_owned(),
        reason: reason.to_owned(),
        message: format!("Pod was rejected: {message}"),
        ..ApiPodStatus::default()
    }
}

impl ApiPodStatus {
    /// The statuses of the regular containers, then of the init and the ephemeral
    /// containers.
    pub fn all_container_statuses(&self) -> impl Iterator<Item = &ApiContainerStatus> {
        self.container_statuses
            .iter()
            .chain(&self.init_container_statuses)
            .chain(&self.ephemeral_container_statuses)
    }

    /// The status of the container (of any kind) called `name`.
    pub fn container_status(&self, name: &str) -> Option<&ApiContainerStatus> {
        self.all_container_statuses().find(|c| c.name == name)
    }

    /// Failed or Succeeded: the kubelet runs nothing more of the pod.
    pub fn is_terminal(&self) -> bool {
        self.phase == PHASE_FAILED || self.phase == "Succeeded"
    }
}

/// The prefix upstream puts on container ids in the API (`containerd://<id>`).
pub fn api_container_id(runtime_name: &str, id: &str) -> String {
    format!("{runtime_name}://{id}")
}

fn terminated(status: &ContainerStatus, runtime_name: &str) -> Terminated {
    // containerd fills in the reason itself; runtimes that do not get upstream's words.
    let reason = match (status.reason.is_empty(), status.exit_code) {
        (false, _) => status.reason.clone(),
        (true, 0) => "Completed".to_owned(),
        (true, _) => "Error".to_owned(),
    };
    Terminated {
        exit_code: status.exit_code,
        reason,
        message: status.message.clone(),
        started_at: rfc3339_seconds(status.started_at_nanos),
        finished_at: rfc3339_seconds(status.finished_at_nanos),
        container_id: api_container_id(runtime_name, &status.id),
    }
}

/// The instance before the newest one: what `lastState` reports.
fn previous_instance<'a>(
    status: &'a PodRuntimeStatus,
    newest: &ContainerStatus,
) -> Option<&'a ContainerStatus> {
    status
        .containers
        .iter()
        .filter(|c| c.name == newest.name && c.id != newest.id)
        .max_by_key(|c| (c.created_at_nanos, c.attempt))
}

fn container_api_status(
    container: &Container,
    status: &PodRuntimeStatus,
    waiting: Option<&Waiting>,
    default_waiting: &str,
    runtime_name: &str,
) -> ApiContainerStatus {
    let newest = status.find_container(&container.name);
    let mut api = ApiContainerStatus {
        name: container.name.clone(),
        image: container.image.clone(),
        image_id: String::new(),
        container_id: String::new(),
        ready: false,
        started: false,
        restart_count: 0,
        state: ApiContainerState::Waiting(Waiting::new(default_waiting, "")),
        last_state: None,
    };
    if let Some(newest) = newest {
        api.container_id = api_container_id(runtime_name, &newest.id);
        api.image_id.clone_from(&newest.image_ref);
        api.restart_count = newest.attempt;
        match newest.state {
            ContainerState::Running => {
                api.state = ApiContainerState::Running(Running {
                    started_at: rfc3339_seconds(newest.started_at_nanos),
                });
                // Until its probes say otherwise (`domain::probe`), a running container
                // is ready and started.
                api.ready = true;
                api.started = true;
            }
            ContainerState::Exited => {
                api.state = ApiContainerState::Terminated(terminated(newest, runtime_name));
            }
            ContainerState::Created | ContainerState::Unknown => {}
        }
        api.last_state = previous_instance(status, newest)
            .filter(|p| p.state == ContainerState::Exited)
            .map(|p| ApiContainerState::Terminated(terminated(p, runtime_name)));
    }
    if let (Some(waiting), false) = (waiting, api.started) {
        // The exited instance becomes the last state; the kubelet is holding this one back.
        if let ApiContainerState::Terminated(t) = &api.state {
            api.last_state = Some(ApiContainerState::Terminated(t.clone()));
        }
        api.state = ApiContainerState::Waiting(waiting.clone());
    }
    api
}

/// Whether every plain init container has succeeded (so app containers may run).
fn initialized(pod: &Pod, status: &PodRuntimeStatus) -> bool {
    pod.spec.init_containers.iter().all(|c| {
        c.restart_policy.is_some()
            || status
                .find_container(&c.name)
                .is_some_and(|s| s.state == ContainerState::Exited && s.exit_code == 0)
    })
}

/// The API status of `pod`. `waiting` maps container names to why the last sync
/// held them back; `runtime_name` prefixes container ids (`containerd`).
pub fn api_pod_status(
    pod: &Pod,
    status: &PodRuntimeStatus,
    waiting: &BTreeMap<String, Waiting>,
    runtime_name: &str,
) -> ApiPodStatus {
    let phase = pod_phase(pod, status);
    let app_default = if initialized(pod, status) {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let convert = |containers: &[Container], default: &str| {
        containers
            .iter()
            .map(|c| container_api_status(c, status, waiting.get(&c.name), default, runtime_name))
            .collect()
    };
    let pod_ip = status
        .sandboxes
        .first()
        .filter(|s| s.state == SandboxState::Ready)
        .map(|s| s.ip.clone())
        .unwrap_or_default();
    let mut api = ApiPodStatus {
        phase: phase.to_string(),
        pod_ips: if pod_ip.is_empty() {
            Vec::new()
        } else {
            vec![PodIp { ip: pod_ip.clone() }]
        },
        pod_ip,
        qos_class: qos_class(&pod.spec).to_string(),
        init_container_statuses: convert(&pod.spec.init_containers, "PodInitializing"),
        container_statuses: convert(&pod.spec.containers, app_default),
        ephemeral_container_statuses: pod
            .spec
            .ephemeral_containers
            .iter()
            .map(|e| {
                let c = &e.container;
                let mut api = container_api_status(
                    c,
                    status,
                    waiting.get(&c.name),
                    app_default,
                    runtime_name,
                );
                // No probe runs in an ephemeral container, and upstream's prober reports
                // readiness for the other containers only.
                api.ready = false;
                api.started = false;
                api
            })
            .collect(),
        ..ApiPodStatus::default()
    };
    // A plain init container is ready once it has succeeded (upstream's prober manager
    // sets this on every status); a sidecar's readiness is a running container's.
    for (container, init) in pod
        .spec
        .init_containers
        .iter()
        .zip(&mut api.init_container_statuses)
    {
        if container.restart_policy.is_none() {
            init.ready =
                matches!(&init.state, ApiContainerState::Terminated(t) if t.exit_code == 0);
        }
    }
    api.conditions = pod_conditions(pod, &api);
    if runtime_name == crate::domain::kuberuntime::runtime::SIMULATED_RUNTIME_NAME {
        api.conditions.push(PodCondition::new(
            SIMULATED_CONDITION,
            true,
            "SimulatedRuntime",
            "the node runs rkubelet's simulated runtime (fake://): no container of this pod really runs"
                .to_owned(),
        ));
    }
    api
}

/// The condition a pod on the simulated runtime shows, in its status and `/pods`.
pub const SIMULATED_CONDITION: &str = "rkubelet.io/Simulated";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::kuberuntime::runtime::SandboxStatus;
    use crate::domain::pod::RestartPolicy;

    fn pod(init: &[&str], apps: &[&str]) -> Pod {
        let container = |name: &&str| Container {
            name: (*name).to_owned(),
            image: "busybox:1.36".to_owned(),
            ..Default::default()
        };
        let mut pod = Pod::default();
        pod.metadata.name = "web".into();
        pod.spec.restart_policy = RestartPolicy::Always;
        pod.spec.init_containers = init.iter().map(container).collect();
        pod.spec.containers = apps.iter().map(container).collect();
        pod
    }

    fn instance(name: &str, id: &str, attempt: u32, state: ContainerState) -> ContainerStatus {
        ContainerStatus {
            attempt,
            created_at_nanos: i64::from(attempt) * 10,
            ..ContainerStatus::new(id, name, state)
        }
    }

    /// The status of a pod with the one container `app`, nothing waiting, on containerd.
    fn app_pod_status(runtime: &PodRuntimeStatus) -> ApiPodStatus {
        api_pod_status(&pod(&[], &["app"]), runtime, &BTreeMap::new(), "containerd")
    }

    fn ready_sandbox() -> SandboxStatus {
        SandboxStatus {
            id: "sb".into(),
            attempt: 0,
            state: SandboxState::Ready,
            created_at_nanos: 0,
            host_network: false,
            ip: "10.1.0.2".into(),
        }
    }

    #[test]
    fn a_pod_with_nothing_yet_is_pending_and_creating() {
        let status = app_pod_status(&PodRuntimeStatus::default());
        assert_eq!(status.phase, "Pending");
        assert_eq!(
            status.container_statuses[0].state,
            ApiContainerState::Waiting(Waiting::new("ContainerCreating", ""))
        );
    }

    fn condition(t: &str, status: &str) -> PodCondition {
        PodCondition {
            condition_type: t.into(),
            status: status.into(),
            ..PodCondition::default()
        }
    }

    /// Upstream's `TestGeneratePodReadyCondition` cases with readiness gates.
    #[test]
    fn ready_needs_every_readiness_gate_true() {
        let mut gated = pod(&[], &["app"]);
        gated.spec.readiness_gates = ["k8s.io/a", "k8s.io/b"]
            .iter()
            .map(|t| crate::domain::pod::PodReadinessGate {
                condition_type: (*t).into(),
            })
            .collect();
        let runtime = PodRuntimeStatus {
            sandboxes: vec![ready_sandbox()],
            containers: vec![instance("app", "c1", 0, ContainerState::Running)],
            ..Default::default()
        };
        let ready_of = |status: &ApiPodStatus| {
            status
                .conditions
                .iter()
                .find(|c| c.condition_type == "Ready")
                .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        };
        // (case, the conditions the API holds, Ready's status, reason and message)
        type Case = (
            &'static str,
            Vec<PodCondition>,
            (&'static str, &'static str, &'static str),
        );
        let cases: Vec<Case> = vec![
            (
                "no gate condition yet",
                vec![],
                (
                    "False",
                    READINESS_GATES_NOT_READY,
                    r#"corresponding condition of pod readiness gate "k8s.io/a" does not exist., corresponding condition of pod readiness gate "k8s.io/b" does not exist."#,
                ),
            ),
            (
                "one false",
                vec![
                    condition("k8s.io/a", "True"),
                    condition("k8s.io/b", "False"),
                ],
                (
                    "False",
                    READINESS_GATES_NOT_READY,
                    r#"the status of pod readiness gate "k8s.io/b" is not "True", but False"#,
                ),
            ),
            (
                "both true",
                vec![condition("k8s.io/a", "True"), condition("k8s.io/b", "True")],
                ("True", "", ""),
            ),
        ];
        for (case, api_conditions, (want_status, want_reason, want_message)) in cases {
            let mut status = api_pod_status(&gated, &runtime, &BTreeMap::new(), "containerd");
            assert_eq!(
                ready_of(&status).map(|r| r.0),
                Some("True".to_owned()),
                "{case}: containers ready"
            );
            apply_readiness_gates(&gated, &mut status, &api_conditions);
            assert_eq!(
                ready_of(&status),
                Some((
                    want_status.to_owned(),
                    want_reason.to_owned(),
                    want_message.to_owned()
                )),
                "{case}"
            );
        }
        // Containers not ready: Ready says what ContainersReady says, whatever the gates.
        let mut status = api_pod_status(
            &gated,
            &PodRuntimeStatus::default(),
            &BTreeMap::new(),
            "containerd",
        );
        let before = ready_of(&status);
        assert!(!apply_readiness_gates(&gated, &mut status, &[]));
        assert_eq!(ready_of(&status), before);
        assert_eq!(before.map(|r| r.1), Some("ContainersNotReady".to_owned()));
        // A pod without gates is left alone.
        let plain = pod(&[], &["app"]);
        let mut status = api_pod_status(&plain, &runtime, &BTreeMap::new(), "containerd");
        assert!(!apply_readiness_gates(&plain, &mut status, &[]));
    }

    /// Upstream's `UpdatePodStatus`: an init container that exited 0 is ready, one that
    /// failed or still runs is not.
    #[test]
    fn a_completed_init_container_is_ready() {
        let mut failed = instance("second", "i2", 0, ContainerState::Exited);
        failed.exit_code = 1;
        let runtime = PodRuntimeStatus {
            sandboxes: vec![ready_sandbox()],
            containers: vec![
                instance("first", "i1", 0, ContainerState::Exited),
                failed,
                instance("third", "i3", 0, ContainerState::Running),
            ],
            ..Default::default()
        };
        let status = api_pod_status(
            &pod(&["first", "second", "third"], &["app"]),
            &runtime,
            &BTreeMap::new(),
            "containerd",
        );
        let ready: Vec<(&str, bool)> = status
            .init_container_statuses
            .iter()
            .map(|s| (s.name.as_str(), s.ready))
            .collect();
        assert_eq!(
            ready,
            [("first", true), ("second", false), ("third", false)]
        );
    }

    /// Upstream's `convertToAPIContainerStatuses` over the ephemeral containers: each
    /// one's state, never ready, and neither the phase nor `Ready` follows it.
    #[test]
    fn ephemeral_containers_report_their_own_statuses() {
        let mut p = pod(&[], &["app"]);
        for name in ["debugger", "later"] {
            p.spec
                .ephemeral_containers
                .push(crate::domain::pod::EphemeralContainer {
                    container: Container {
                        name: name.into(),
                        image: "busybox:1.36".into(),
                        ..Default::default()
                    },
                    target_container_name: "app".into(),
                });
        }
        let mut exited = instance("debugger", "d1", 0, ContainerState::Exited);
        exited.exit_code = 7;
        let runtime = PodRuntimeStatus {
            sandboxes: vec![ready_sandbox()],
            containers: vec![instance("app", "a1", 0, ContainerState::Running), exited],
            ..Default::default()
        };
        let status = api_pod_status(&p, &runtime, &BTreeMap::new(), "containerd");
        assert_eq!(status.phase, "Running");
        let [debugger, later] = status.ephemeral_container_statuses.as_slice() else {
            panic!("two: {:?}", status.ephemeral_container_statuses);
        };
        assert!(!debugger.ready && debugger.restart_count == 0);
        assert_eq!(debugger.container_id, "containerd://d1");
        assert!(
            matches!(&debugger.state, ApiContainerState::Terminated(t) if t.exit_code == 7),
            "{:?}",
            debugger.state
        );
        assert_eq!(
            later.state,
            ApiContainerState::Waiting(Waiting::new("ContainerCreating", ""))
        );
        assert_eq!(status.container_status("debugger"), Some(debugger));
        let json = serde_json::to_value(&status).expect("json");
        assert_eq!(json["ephemeralContainerStatuses"][0]["name"], "debugger");
        let ready = status
            .conditions
            .iter()
            .find(|c| c.condition_type == "Ready");
        assert_eq!(ready.map(|c| c.status.as_str()), Some("True"));
    }

    #[test]
    fn a_pod_on_the_simulated_runtime_says_so() {
        let runtime = PodRuntimeStatus {
            sandboxes: vec![ready_sandbox()],
            containers: vec![instance("app", "a1", 0, ContainerState::Running)],
            ..Default::default()
        };
        let simulated = api_pod_status(
            &pod(&[], &["app"]),
            &runtime,
            &BTreeMap::new(),
            crate::domain::kuberuntime::runtime::SIMULATED_RUNTIME_NAME,
        );
        let condition = simulated
            .conditions
            .iter()
            .find(|c| c.condition_type == SIMULATED_CONDITION)
            .expect("the condition");
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", "SimulatedRuntime")
        );
        assert!(!app_pod_status(&runtime)
            .conditions
            .iter()
            .any(|c| c.condition_type == SIMULATED_CONDITION));
    }

    #[test]
    fn app_containers_wait_for_init_containers() {
        let status = api_pod_status(
            &pod(&["init"], &["app"]),
            &PodRuntimeStatus::default(),
            &BTreeMap::new(),
            "containerd",
        );
        assert_eq!(
            status.container_statuses[0].state,
            ApiContainerState::Waiting(Waiting::new("PodInitializing", ""))
        );
    }

    #[test]
    fn a_running_container_is_ready_with_its_restart_count_and_last_state() {
        let mut previous = instance("app", "c0", 0, ContainerState::Exited);
        previous.exit_code = 1;
        let runtime = PodRuntimeStatus {
            sandboxes: vec![ready_sandbox()],
            containers: vec![previous, instance("app", "c1", 1, ContainerState::Running)],
            ..Default::default()
        };
        let status = app_pod_status(&runtime);
        let app = &status.container_statuses[0];
        assert_eq!(status.phase, "Running");
        assert_eq!(status.pod_ip, "10.1.0.2");
        assert!(app.ready);
        assert_eq!(app.restart_count, 1);
        assert_eq!(app.container_id, "containerd://c1");
        match &app.last_state {
            Some(ApiContainerState::Terminated(t)) => {
                assert_eq!((t.exit_code, t.reason.as_str()), (1, "Error"));
            }
            other => panic!("last state {other:?}"),
        }
    }

    #[test]
    fn a_held_back_container_shows_the_reason_and_keeps_its_exit_as_last_state() {
        let mut exited = instance("app", "c0", 0, ContainerState::Exited);
        exited.exit_code = 1;
        let runtime = PodRuntimeStatus {
            sandboxes: vec![ready_sandbox()],
            containers: vec![exited],
            ..Default::default()
        };
        let waiting = BTreeMap::from([(
            "app".to_owned(),
            Waiting::new(
                "CrashLoopBackOff",
                "back-off 10s restarting failed container",
            ),
        )]);
        let status = api_pod_status(&pod(&[], &["app"]), &runtime, &waiting, "containerd");
        let app = &status.container_statuses[0];
        assert_eq!(
            app.state,
            ApiContainerState::Waiting(waiting["app"].clone())
        );
        assert!(matches!(
            app.last_state,
            Some(ApiContainerState::Terminated(_))
        ));
    }

    #[test]
    fn an_image_pull_failure_shows_as_waiting() {
        let waiting = BTreeMap::from([(
            "app".to_owned(),
            Waiting::new("ErrImagePull", "pull failed"),
        )]);
        let status = api_pod_status(
            &pod(&[], &["app"]),
            &PodRuntimeStatus {
                sandboxes: vec![ready_sandbox()],
                ..Default::default()
            },
            &waiting,
            "containerd",
        );
        assert_eq!(
            status.container_statuses[0].state,
            ApiContainerState::Waiting(Waiting::new("ErrImagePull", "pull failed"))
        );
        assert_eq!(status.phase, "Pending");
    }

    #[test]
    fn an_evicted_pod_is_failed_with_reason_message_and_condition() {
        let running = app_pod_status(&PodRuntimeStatus::default());
        let condition = |message: &str| PodCondition {
            condition_type: "DisruptionTarget".into(),
            status: "True".into(),
            reason: "TerminationByKubelet".into(),
            message: message.into(),
            ..PodCondition::default()
        };
        let status = terminal_status(running, "Evicted", "low", Some(condition("old")));
        let status = terminal_status(status, "Evicted", "low", Some(condition("low")));
        assert!(status.is_terminal());
        assert_eq!(status.conditions.last(), Some(&condition("low")));
        let json = serde_json::to_value(&status).unwrap_or_default();
        assert_eq!(json["phase"], "Failed");
        assert_eq!(json["reason"], "Evicted");
        assert_eq!(
            json["conditions"][status.conditions.len() - 1]["type"],
            "DisruptionTarget"
        );
        let rejected = rejected_pod_status("Evicted", "The node had condition: [DiskPressure]. ");
        assert_eq!(
            rejected.message,
            "Pod was rejected: The node had condition: [DiskPressure]. "
        );
        assert!(rejected.container_statuses.is_empty() && rejected.is_terminal());
    }

    #[test]
    fn conditions_follow_readiness_in_upstreams_words() {
        let runtime = PodRuntimeStatus {
            sandboxes: vec![ready_sandbox()],
            containers: vec![instance("app", "c1", 0, ContainerState::Running)],
            ..Default::default()
        };
        let p = pod(&["init"], &["app", "side"]);
        let mut status = api_pod_status(&p, &runtime, &BTreeMap::new(), "containerd");
        let short = |s: &ApiPodStatus| -> Vec<(String, String, String, String)> {
            s.conditions
                .iter()
                .map(|c| {
                    (
                        c.condition_type.clone(),
                        c.status.clone(),
                        c.reason.clone(),
                        c.message.clone(),
                    )
                })
                .collect()
        };
        let t = |a: &str, b: &str, c: &str, d: &str| {
            (a.to_owned(), b.to_owned(), c.to_owned(), d.to_owned())
        };
        assert_eq!(
            short(&status),
            vec![
                t(
                    "Initialized",
                    "False",
                    "ContainersNotInitialized",
                    "containers with incomplete status: [init]"
                ),
                t(
                    "Ready",
                    "False",
                    "ContainersNotReady",
                    "containers with unready status: [side]"
                ),
                t(
                    "ContainersReady",
                    "False",
                    "ContainersNotReady",
                    "containers with unready status: [side]"
                ),
                t("PodScheduled", "True", "", ""),
            ]
        );
        status.container_statuses.retain(|c| c.name == "app");
        status.container_statuses[0].ready = false;
        let again = pod_conditions(&p, &status);
        assert_eq!(
            again[2].message,
            "containers with unknown status: [side], containers with unready status: [app]"
        );
        let single = pod(&[], &["app"]);
        let status = api_pod_status(&single, &runtime, &BTreeMap::new(), "containerd");
        assert!(status.conditions.iter().all(|c| c.status == "True"));
        let json = serde_json::to_value(&status).unwrap_or_default();
        assert_eq!(
            json["conditions"][1],
            serde_json::json!({"type": "Ready", "status": "True"})
        );
    }

    #[test]
    fn json_uses_the_api_names() {
        let runtime = PodRuntimeStatus {
            sandboxes: vec![ready_sandbox()],
            containers: vec![instance("app", "c1", 0, ContainerState::Running)],
            ..Default::default()
        };
        let status = app_pod_status(&runtime);
        let json = serde_json::to_value(&status).unwrap_or_default();
        assert_eq!(json["podIP"], "10.1.0.2");
        assert_eq!(json["containerStatuses"][0]["restartCount"], 0);
        assert_eq!(
            json["containerStatuses"][0]["containerID"],
            "containerd://c1"
        );
        assert!(json["containerStatuses"][0]["state"]["running"]["startedAt"].is_string());
    }
}
