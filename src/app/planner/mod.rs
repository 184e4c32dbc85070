//! The dry-run planner: every decision rkubelet would take with this configuration on
//! this node, as a typed [`Plan`], changing nothing.
//!
//! [`compute_plan`] is a pure function of its inputs (the resolved configuration, the
//! machine, the desired pods, what the runtime holds, which images are present, the
//! time, the cgroup version); gathering those inputs through read-only ports is
//! [`run`]'s job (see `gather`). Each pod's actions are the sync's own plan
//! (`plan_pod_sync`), so the dry run shows what a sync would do: crash-loop holds with
//! upstream's message, image pulls and why an image holds a container. The JSON form
//! of the plan is a stable interface, described in `docs/plan.schema.json`.

pub mod cgroups;
pub mod cluster;
pub mod gather;
pub mod readonly;
pub mod render;
pub mod snapshot;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::app::eviction::observe::Observation;
use crate::domain::admission::NodeInfo;
use crate::domain::config::layers::Source;
use crate::domain::config::states;
use crate::domain::config::ResolvedConfig;
use crate::domain::eviction::manager::{
    choose_pod, synchronize, Eviction, EvictionState, NodeReclaim,
};
use crate::domain::eviction::{self, Threshold};
use crate::domain::kuberuntime::actions::KillReason;
use crate::domain::kuberuntime::dns::ResolvConf;
use crate::domain::kuberuntime::plan::{images_to_inspect, ImageFacts, ImagePresence};
use crate::domain::kuberuntime::pod_sync::{dry_run, ContainerHold, DryRun, Effect, RuntimeView};
use crate::domain::kuberuntime::requests::{
    ContainerConfig, ContainerSecurity, NamespaceMode, RequestContext, SecurityProfile,
};
use crate::domain::kuberuntime::runtime::{ContainerState, ImageUser, PodRuntimeStatus};
use crate::domain::kuberuntime::teardown::{self, Stopping};
use crate::domain::node::reserved::ResourceList;
use crate::domain::node::{NodeNameSource, NodeSettings};
use crate::domain::pod::{qos_class, ContainerKind, Pod, CONFIG_SOURCE_ANNOTATION};
use crate::domain::units::duration::GoDuration;

pub use crate::domain::cgroup::CgroupVersion;
pub use gather::run;
pub use snapshot::Snapshot;

/// Version of the plan's JSON schema; bumped on any incompatible change.
pub const PLAN_SCHEMA_VERSION: u32 = 4;

/// Exit status: valid configuration, nothing to do.
pub const EXIT_NO_ACTIONS: u8 = 0;
/// Exit status: the configuration is invalid (every problem printed).
pub const EXIT_INVALID: u8 = 1;
/// Exit status: valid configuration, the plan has actions.
pub const EXIT_ACTIONS: u8 = 2;

/// Everything the plan is computed from.
#[derive(Debug, Clone)]
pub struct PlanInputs {
    pub resolved: ResolvedConfig,
    pub cgroup_version: CgroupVersion,
    pub node_stats: BTreeMap<String, String>,
    /// The pods every source wants now.
    pub desired: Vec<Pod>,
    /// False when a source could not be read: like the pod loop, which terminates
    /// unwanted pods only once every source has spoken, the plan then removes nothing.
    pub sources_complete: bool,
    /// Problems that do not invalidate the configuration (an unreachable runtime or
    /// URL, no pod source).
    pub warnings: Vec<String>,
    /// Manifests no pod was planned from, each with every problem it has.
    pub skipped_manifests: Vec<String>,
    /// What the runtime holds, one entry per pod uid.
    pub observed: Vec<PodRuntimeStatus>,
    /// Whether the images the plan asks about ([`images_wanted`]) are on the node; one
    /// missing here is planned as present, with a warning.
    pub images: BTreeMap<String, ImagePresence>,
    /// Wall-clock time of the plan (Unix nanoseconds): crash-loop back-off counts from
    /// the runtime's exit times up to it.
    pub now_unix_nanos: i64,
    /// Connected mode: the Node on the API server and what it would be given.
    pub cluster: Option<cluster::ClusterObservation>,
    /// Live dry run: the node as the eviction manager observes it now.
    pub eviction: Option<Observation>,
    /// With the static CPU manager: the machine's CPU topology and the
    /// `cpu_manager_state` file's contents (`None` when there is none).
    pub cpu_manager: Option<CpuManagerInputs>,
    /// The device manager's state as its checkpoint left it (empty without one).
    pub devices: crate::domain::devices::DeviceManagerState,
}

/// What the static CPU manager's plan is computed from.
#[derive(Debug, Clone)]
pub struct CpuManagerInputs {
    pub topology: crate::domain::resource_managers::topology::MachineTopology,
    pub state: Option<String>,
    pub state_path: String,
}

/// The images whose presence the plan needs: those of the containers the desired pods
/// would start now (see `images_to_inspect`), each once.
pub fn images_wanted(
    desired: &[Pod],
    observed: &[PodRuntimeStatus],
    now_unix_nanos: i64,
) -> Vec<String> {
    let by_uid: BTreeMap<&str, &PodRuntimeStatus> =
        observed.iter().map(|s| (s.uid.as_str(), s)).collect();
    let mut images: Vec<String> = Vec::new();
    for pod in desired {
        let empty;
        let status = match by_uid.get(pod.metadata.uid.as_str()) {
            Some(status) => *status,
            None => {
                empty = empty_status(pod);
                &empty
            }
        };
        for image in images_to_inspect(pod, status, now_unix_nanos) {
            if !images.contains(&image) {
                images.push(image);
            }
        }
    }
    images
}

fn empty_status(pod: &Pod) -> PodRuntimeStatus {
    PodRuntimeStatus {
        uid: pod.metadata.uid.clone(),
        ..PodRuntimeStatus::default()
    }
}

/// The plan; see `docs/plan.schema.json` for the JSON form.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub schema_version: u32,
    pub valid: bool,
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
    /// Static pod manifests skipped as bad, each with its problems: the plan covers the
    /// others, and the exit status is 1.
    pub skipped_manifests: Vec<String>,
    /// Number of runtime actions (sandboxes, containers, pods to kill or start, image pulls).
    pub action_count: usize,
    pub config: Vec<ConfigEntry>,
    /// Flags and fields given that rkubelet accepts but does not act on.
    pub not_implemented: Vec<NotImplemented>,
    pub node: Option<NodePlan>,
    pub cgroups: Option<cgroups::CgroupPlan>,
    pub pods: Vec<PodPlan>,
    pub pods_to_remove: Vec<PodRemoval>,
    /// Connected mode: the Node it would register or how it would patch it.
    pub cluster: Option<cluster::ClusterPlan>,
}

impl Plan {
    /// A plan that is only the problems of an invalid configuration.
    pub fn invalid(problems: Vec<String>) -> Plan {
        Plan {
            schema_version: PLAN_SCHEMA_VERSION,
            valid: false,
            problems,
            warnings: Vec::new(),
            skipped_manifests: Vec::new(),
            action_count: 0,
            config: Vec::new(),
            not_implemented: Vec::new(),
            node: None,
            cgroups: None,
            pods: Vec::new(),
            pods_to_remove: Vec::new(),
            cluster: None,
        }
    }

    /// 1 invalid or a manifest skipped, 2 valid with actions, 0 valid and nothing to do.
    pub fn exit_code(&self) -> u8 {
        if !self.valid || !self.skipped_manifests.is_empty() {
            EXIT_INVALID
        } else if self.action_count > 0 {
            EXIT_ACTIONS
        } else {
            EXIT_NO_ACTIONS
        }
    }
}

/// One top-level configuration field, its effective value and its last writer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigEntry {
    pub field: String,
    pub value: Value,
    pub source: Source,
}

/// A flag (`--name`) or field given that is accepted but not implemented, with the
/// value given.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotImplemented {
    pub name: String,
    pub value: String,
}

/// A reservation as given and as in force.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub given: BTreeMap<String, String>,
    pub effective: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThresholdPlan {
    pub signal: String,
    pub operator: String,
    pub value: String,
    /// Go duration; "0s" for a hard threshold.
    pub grace_period: String,
    pub minimum_reclaim: Option<String>,
    /// From the snapshot's node statistics, when it has the signal.
    pub observed: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionPlan {
    pub hard: Vec<ThresholdPlan>,
    pub soft: Vec<ThresholdPlan>,
    pub merge_default_eviction_settings: bool,
    /// The given `evictionHard` replaced the defaults.
    pub defaults_replaced: bool,
    /// The default hard thresholds that no longer apply (`signal<value`).
    pub defaults_not_applied: Vec<String>,
    pub note: String,
    /// Live dry run: what the eviction manager would decide on the node as it is now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<EvictionDecisionPlan>,
}

/// One eviction cycle on the node as observed now, from the eviction manager's own
/// domain calls (`synchronize`, `choose_pod`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionDecisionPlan {
    /// Each signal observed: `<available> of <capacity>`.
    pub observed: BTreeMap<String, String>,
    /// The thresholds met now (`signal<value`); a soft one counts only once past its
    /// grace period, which one observation cannot show.
    pub thresholds_met: Vec<String>,
    /// Node-level reclaim tried first; a pod is evicted only if it does not suffice.
    pub reclaim_first: Vec<NodeReclaim>,
    /// The pods in eviction order for the starved resource.
    pub ranked: Vec<String>,
    /// The pods that would be evicted (one for a threshold; every one over a local
    /// storage limit), with upstream's message.
    pub would_evict: Vec<Eviction>,
    /// Critical pods that would be ranked first but are left alone.
    pub protected: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlan {
    pub name: String,
    pub name_source: NodeNameSource,
    pub capacity: BTreeMap<String, String>,
    pub online_cpus: String,
    pub reserved_cpus: Option<String>,
    pub system_reserved: Reservation,
    pub kube_reserved: Reservation,
    /// What `--reserved-cpus` did to the cpu reservations, in words.
    pub reserved_cpus_effect: Vec<String>,
    pub allocatable: BTreeMap<String, String>,
    pub eviction: EvictionPlan,
    pub stats: BTreeMap<String, String>,
    /// Container log rotation, in words.
    pub container_logs: String,
}

/// Why a pod or container is killed: a stable code and the domain's words.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reason {
    pub code: String,
    pub message: String,
}

/// A pod the node refuses, in upstream's words.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejected {
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxCreation {
    pub attempt: u32,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStart {
    pub name: String,
    pub image: String,
    pub reason: String,
    /// The security settings the container would be created with.
    pub security: ContainerSecurityPlan,
    /// The volume subpaths bound before it is created.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sub_paths: Vec<SubPathBind>,
}

/// A subpath opened under its volume and bound where the runtime mounts it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubPathBind {
    pub volume: String,
    pub path: String,
    pub target: String,
}

/// A container's security settings as the CRI request carries them (before the image's
/// user when its image is still to be pulled).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSecurityPlan {
    /// `None`: the image's user.
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    /// The image's user when it names one rather than a uid.
    pub run_as_username: Option<String>,
    pub supplemental_groups: Vec<i64>,
    pub privileged: bool,
    pub read_only_root_filesystem: bool,
    pub no_new_privs: bool,
    /// Added and dropped capabilities; `None`: the runtime's default set.
    pub capabilities: Option<BTreeMap<String, Vec<String>>>,
    /// `RuntimeDefault`, `Unconfined` or `Localhost:<path>`.
    pub seccomp: String,
    /// Like `seccomp`; `None` when none is asked for.
    pub apparmor: Option<String>,
    /// `user:role:type:level`; `None` without SELinux options.
    pub selinux: Option<String>,
    /// PID, IPC and network namespaces: `Container`, `Pod` or `Node`.
    pub namespaces: BTreeMap<String, String>,
    pub masked_paths: Vec<String>,
    pub readonly_paths: Vec<String>,
}

fn profile_name(p: &SecurityProfile) -> String {
    match p {
        SecurityProfile::RuntimeDefault => "RuntimeDefault".into(),
        SecurityProfile::Unconfined => "Unconfined".into(),
        SecurityProfile::Localhost(r) => format!("Localhost:{r}"),
    }
}

fn security_plan(s: &ContainerSecurity) -> ContainerSecurityPlan {
    let mode = |m: NamespaceMode| format!("{m:?}");
    ContainerSecurityPlan {
        run_as_user: s.run_as_user,
        run_as_group: s.run_as_group,
        run_as_username: (!s.run_as_username.is_empty()).then(|| s.run_as_username.clone()),
        supplemental_groups: s.supplemental_groups.clone(),
        privileged: s.privileged,
        read_only_root_filesystem: s.readonly_rootfs,
        no_new_privs: s.no_new_privs,
        capabilities: s.capabilities.as_ref().map(|c| {
            BTreeMap::from([
                ("add".to_owned(), c.add.clone()),
                ("drop".to_owned(), c.drop.clone()),
            ])
        }),
        seccomp: profile_name(&s.seccomp),
        apparmor: s.apparmor.as_ref().map(profile_name),
        selinux: s
            .selinux_options
            .as_ref()
            .map(|o| format!("{}:{}:{}:{}", o.user, o.role, o.kind, o.level)),
        namespaces: BTreeMap::from_iter(
            [
                ("pid".to_owned(), mode(s.namespace_options.pid)),
                ("ipc".to_owned(), mode(s.namespace_options.ipc)),
                ("network".to_owned(), mode(s.namespace_options.network)),
            ]
            .into_iter()
            // Only a pod's own; its block of IDs is handed out when the sandbox is made.
            .chain(
                s.namespace_options
                    .user
                    .as_ref()
                    .map(|u| ("user".to_owned(), mode(u.mode))),
            ),
        ),
        masked_paths: s.masked_paths.clone(),
        readonly_paths: s.readonly_paths.clone(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerKill {
    pub id: String,
    pub name: String,
    pub reason: Reason,
}

/// An image the sync would pull, with the containers waiting for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImagePull {
    pub image: String,
    pub containers: Vec<String>,
}

/// A container the sync would not start now, in upstream's words.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldContainer {
    pub name: String,
    pub image: String,
    pub init: bool,
    /// An ephemeral container (`kubectl debug`); absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ephemeral: bool,
    /// `CrashLoopBackOff`, `ImagePullBackOff`, `ErrImageNeverPull`,
    /// `CreateContainerConfigError`, `ErrImageInspect`.
    pub reason: String,
    pub message: String,
    /// Go duration until the sync looks again, in whole seconds rounded up.
    pub retry_after: String,
}

/// The sync plan for one pod, in plan form.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodActionsPlan {
    /// Why the node refuses to run the pod (`PodFeatureUnsupported`, `SysctlForbidden`,
    /// `AppArmor`); nothing of it is started.
    pub rejected: Option<Rejected>,
    pub kill_pod: Option<Reason>,
    pub create_sandbox: Option<SandboxCreation>,
    /// The sandbox kept and started into, when no new one is created.
    pub keep_sandbox: Option<String>,
    /// Started before the init containers, as upstream starts them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub start_ephemeral_containers: Vec<ContainerStart>,
    pub start_init_containers: Vec<ContainerStart>,
    pub start_containers: Vec<ContainerStart>,
    pub kill_containers: Vec<ContainerKill>,
    pub pull_images: Vec<ImagePull>,
    pub held_containers: Vec<HeldContainer>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlan {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    /// The source that wants it (`file`, `http`).
    pub source: String,
    pub qos_class: String,
    /// The pod's cgroup in the driver's spelling; absent without `cgroupsPerQOS`.
    pub cgroup: Option<String>,
    /// Containers the runtime reports running now.
    pub running: Vec<String>,
    pub actions: PodActionsPlan,
    pub action_count: usize,
    /// Its claim-backed and CSI volumes: what would be mounted, or why it would wait.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<PodVolumePlan>,
    /// With the static CPU manager: each container's CPU set (its exclusive CPUs, else
    /// the shared pool), or why the CPU manager would refuse the pod.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cpus: BTreeMap<String, String>,
    /// Each container's device plugin resources: how many it asks for, and the device
    /// ids it holds when the device manager's checkpoint says.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, BTreeMap<String, DevicesPlan>>,
}

/// One resource of a container's devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicesPlan {
    pub count: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
}

/// One of a pod's claim-backed or CSI volumes as the volume manager would set it up.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodVolumePlan {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits: Option<String>,
}

/// A pod the runtime holds that no source wants: the pod loop stops and removes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRemoval {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    pub reason: Reason,
    pub stop_containers: Vec<String>,
    pub remove_containers: Vec<String>,
    pub remove_sandboxes: Vec<String>,
}

fn strings(list: &ResourceList) -> BTreeMap<String, String> {
    list.iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect()
}

fn kill_reason(reason: &KillReason) -> Reason {
    let code = match reason {
        KillReason::SpecChanged { .. } => "SpecChanged",
        KillReason::UnknownState => "UnknownState",
        KillReason::SandboxChanged => "SandboxChanged",
        KillReason::RestartPolicyDoesNotAllow => "RestartPolicyDoesNotAllow",
        KillReason::InitContainerFailed { .. } => "InitContainerFailed",
        KillReason::NothingToKeep => "NothingToKeep",
        KillReason::PodTerminating => "PodTerminating",
        KillReason::Rejected { .. } => "Rejected",
    };
    Reason {
        code: code.into(),
        message: reason.to_string(),
    }
}

fn config_entries(resolved: &ResolvedConfig) -> Vec<ConfigEntry> {
    let Ok(Value::Object(map)) = serde_json::to_value(&resolved.config) else {
        return Vec::new();
    };
    map.into_iter()
        .map(|(field, value)| {
            let source = resolved
                .origins
                .get(&field)
                .cloned()
                .unwrap_or(Source::Default);
            ConfigEntry {
                field,
                value,
                source,
            }
        })
        .collect()
}

fn threshold(t: &Threshold, stats: &BTreeMap<String, String>) -> ThresholdPlan {
    ThresholdPlan {
        signal: t.signal.to_string(),
        operator: t.operator.to_string(),
        value: t.value.to_string(),
        grace_period: t.grace_period.to_string(),
        minimum_reclaim: t.min_reclaim.as_ref().map(ToString::to_string),
        observed: stats.get(t.signal.as_str()).cloned(),
    }
}

fn reserved_cpus_effect(
    settings: &NodeSettings,
    given_system: &BTreeMap<String, String>,
    given_kube: &BTreeMap<String, String>,
) -> Vec<String> {
    let Some(cpus) = &settings.reserved_cpus else {
        return Vec::new();
    };
    let mut effect = Vec::new();
    let cpu = |list: &ResourceList| list.get("cpu").map(ToString::to_string);
    let system_now = cpu(&settings.system_reserved).unwrap_or_default();
    match given_system.get("cpu") {
        Some(before) => effect.push(format!(
            "systemReserved cpu {before} replaced by {system_now} (the {} CPU(s) of reservedSystemCPUs {:?})",
            cpus.len(),
            cpus.to_string()
        )),
        None => effect.push(format!(
            "systemReserved cpu set to {system_now} (the {} CPU(s) of reservedSystemCPUs {:?})",
            cpus.len(),
            cpus.to_string()
        )),
    }
    if let Some(before) = given_kube.get("cpu") {
        effect.push(format!(
            "kubeReserved cpu {before} removed: reservedSystemCPUs covers both reservations"
        ));
    }
    effect
}

/// What one eviction cycle would decide on `observation` (see [`EvictionDecisionPlan`]).
fn eviction_decision(
    resolved: &ResolvedConfig,
    observation: &Observation,
    pods: &[Pod],
    now: i64,
) -> EvictionDecisionPlan {
    let config = resolved.node.eviction_config();
    let dedicated = observation.dedicated_image_fs;
    let summary = &observation.summary;
    let mut plan = EvictionDecisionPlan {
        observed: BTreeMap::new(),
        thresholds_met: Vec::new(),
        reclaim_first: Vec::new(),
        ranked: Vec::new(),
        would_evict: Vec::new(),
        protected: Vec::new(),
    };
    let Some(sync) = synchronize(
        &config,
        &EvictionState::default(),
        summary,
        pods,
        dedicated,
        now,
    ) else {
        return plan;
    };
    plan.observed = sync
        .observations
        .iter()
        .map(|(signal, o)| {
            (
                signal.to_string(),
                format!("{} of {}", o.available, o.capacity),
            )
        })
        .collect();
    plan.thresholds_met = sync
        .thresholds
        .iter()
        .map(|t| format!("{}<{}", t.signal, t.value))
        .collect();
    plan.would_evict.clone_from(&sync.local_storage);
    plan.protected.clone_from(&sync.protected);
    if let Some(starved) = &sync.starved {
        plan.reclaim_first = starved.reclaim.to_vec();
        let choice = choose_pod(&config, &sync, starved, pods, summary, dedicated);
        plan.ranked = choice.ranked;
        plan.protected.extend(choice.protected);
        plan.would_evict.extend(choice.eviction);
    }
    plan
}

fn eviction_plan(
    resolved: &ResolvedConfig,
    s: &NodeSettings,
    stats: &BTreeMap<String, String>,
    inputs: &PlanInputs,
) -> EvictionPlan {
    let decision = inputs.eviction.as_ref().map(|observation| {
        eviction_decision(
            resolved,
            observation,
            &inputs.desired,
            inputs.now_unix_nanos,
        )
    });
    // Live, the thresholds show what the eviction manager observes; a snapshot shows
    // its recorded statistics.
    let stats = decision.as_ref().map_or(stats, |d| &d.observed);
    let merge_defaults = resolved.node.eviction.merge_default_eviction_settings;
    let defaults_not_applied: Vec<String> = if s.eviction_defaults_replaced {
        eviction::default_eviction_hard()
            .into_iter()
            .filter(|(k, _)| !s.hard_thresholds.iter().any(|t| t.signal.as_str() == k))
            .map(|(k, v)| format!("{k}<{v}"))
            .collect()
    } else {
        Vec::new()
    };
    let note = if s.eviction_defaults_replaced {
        format!(
            "evictionHard (from {}) replaced the default thresholds; these no longer apply: {}. Set mergeDefaultEvictionSettings: true to keep them.",
            resolved
                .origins
                .get("evictionHard")
                .map_or_else(|| "default".to_string(), ToString::to_string),
            defaults_not_applied.join(", ")
        )
    } else if merge_defaults {
        "mergeDefaultEvictionSettings is true: the default thresholds apply for every signal evictionHard does not give.".into()
    } else {
        "The default hard thresholds apply.".into()
    };
    EvictionPlan {
        hard: s
            .hard_thresholds
            .iter()
            .map(|t| threshold(t, stats))
            .collect(),
        soft: s
            .soft_thresholds
            .iter()
            .map(|t| threshold(t, stats))
            .collect(),
        merge_default_eviction_settings: merge_defaults,
        defaults_replaced: s.eviction_defaults_replaced,
        defaults_not_applied,
        note,
        decision,
    }
}

/// A container the dry run creates, as the plan shows it.
fn start(config: &ContainerConfig, name: &str, image: &str, reason: &str) -> ContainerStart {
    ContainerStart {
        name: name.to_owned(),
        image: image.to_owned(),
        reason: reason.to_owned(),
        security: security_plan(&config.security),
        sub_paths: config
            .mounts
            .iter()
            .filter_map(|m| m.sub_path.as_ref())
            .map(|s| SubPathBind {
                volume: s.volume.clone(),
                path: s.path.clone(),
                target: s.target.display().to_string(),
            })
            .collect(),
    }
}

fn held(hold: &ContainerHold) -> HeldContainer {
    let held = &hold.held;
    HeldContainer {
        name: hold.name.clone(),
        image: hold.image.clone(),
        init: hold.kind == ContainerKind::Init,
        ephemeral: hold.kind == ContainerKind::Ephemeral,
        reason: held.waiting.reason.clone(),
        message: held.waiting.message.clone(),
        // Whole seconds, rounded up: when to look again, not a stopwatch.
        retry_after: GoDuration::from_nanos(
            i64::try_from(
                held.retry_after
                    .as_secs()
                    .saturating_add(u64::from(held.retry_after.subsec_nanos() > 0)),
            )
            .unwrap_or(i64::MAX / 1_000_000_000)
            .saturating_mul(1_000_000_000),
        )
        .to_string(),
    }
}

/// The dry run's effects, as the plan shows them.
fn actions_plan(run: &DryRun) -> (PodActionsPlan, usize) {
    let keep_sandbox = run.plan.as_ref().and_then(|plan| {
        let a = &plan.actions;
        (!a.create_sandbox && !a.sandbox_id.is_empty()).then(|| a.sandbox_id.clone())
    });
    let mut out = PodActionsPlan {
        rejected: run.outcome.rejected.as_ref().map(|r| Rejected {
            reason: r.reason.clone(),
            message: r.message.clone(),
        }),
        kill_pod: None,
        create_sandbox: None,
        keep_sandbox,
        start_ephemeral_containers: Vec::new(),
        start_init_containers: Vec::new(),
        start_containers: Vec::new(),
        kill_containers: Vec::new(),
        pull_images: Vec::new(),
        held_containers: run.outcome.holds.iter().map(held).collect(),
    };
    for effect in &run.effects {
        match effect {
            Effect::StopPod { reason, .. } => out.kill_pod = Some(kill_reason(reason)),
            Effect::StopContainer {
                name, id, reason, ..
            } => out.kill_containers.push(ContainerKill {
                id: id.clone(),
                name: name.clone(),
                reason: kill_reason(reason),
            }),
            Effect::CreateSandbox { creation, .. } => {
                out.create_sandbox = Some(SandboxCreation {
                    attempt: creation.attempt,
                    reason: creation.reason.clone(),
                })
            }
            Effect::PullImage {
                image, containers, ..
            } => out.pull_images.push(ImagePull {
                image: image.clone(),
                containers: containers.clone(),
            }),
            Effect::CreateContainer {
                kind,
                name,
                image,
                reason,
                config,
                ..
            } => {
                let list = match kind {
                    ContainerKind::Ephemeral => &mut out.start_ephemeral_containers,
                    ContainerKind::Init => &mut out.start_init_containers,
                    ContainerKind::Regular => &mut out.start_containers,
                };
                list.push(start(config, name, image, reason));
            }
            _ => {}
        }
    }
    let count = usize::from(out.kill_pod.is_some())
        + usize::from(out.create_sandbox.is_some())
        + out.start_ephemeral_containers.len()
        + out.start_init_containers.len()
        + out.start_containers.len()
        + out.kill_containers.len()
        + out.pull_images.len();
    (out, count)
}

/// What a pod sync asks of the world, as the planner has it.
struct PlanContext<'a> {
    requests: &'a RequestContext,
    images: &'a BTreeMap<String, ImagePresence>,
    now_unix_nanos: i64,
}

fn pod_plan(
    pod: &Pod,
    status: Option<&PodRuntimeStatus>,
    cgroup: Option<String>,
    cx: &PlanContext<'_>,
) -> PodPlan {
    let empty = empty_status(pod);
    let status = status.unwrap_or(&empty);
    // The sync's own machine, every effect answered as done: the planner keeps no pull
    // back-off (a pull is planned as a fresh start would make it) and reads no API object.
    let view = RuntimeView {
        status: status.clone(),
        sandbox_of: BTreeMap::new(),
    };
    let run = dry_run(
        pod,
        cx.requests,
        cx.now_unix_nanos,
        &view,
        cx.images,
        cgroup.as_deref().unwrap_or_default(),
    );
    let (actions, action_count) = actions_plan(&run);
    let mut running: Vec<String> = status
        .containers
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| c.name.clone())
        .collect();
    running.sort();
    running.dedup();
    PodPlan {
        volumes: Vec::new(),
        cpus: BTreeMap::new(),
        devices: BTreeMap::new(),
        uid: pod.metadata.uid.clone(),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        source: pod
            .metadata
            .annotations
            .get(CONFIG_SOURCE_ANNOTATION)
            .cloned()
            .unwrap_or_default(),
        qos_class: qos_class(&pod.spec).to_string(),
        cgroup,
        running,
        actions,
        action_count,
    }
}

/// The pod plan before its sync plan: what `cgroup_plan` fills in (the pod's cgroup).
/// The pod's claim-backed and CSI volumes as the volume manager's domain plans them,
/// with the Node's name and labels, and its attached volumes taken as reported in use
/// (the status loop would report them before the sync waits on their attachment).
fn volume_plans(
    pod: &Pod,
    objects: &crate::domain::volumes::PodObjects,
    requests: &RequestContext,
    inputs: &PlanInputs,
) -> Vec<PodVolumePlan> {
    use crate::domain::csi::volume::attachment;
    use crate::domain::volumes::claim::{claim_name_of, PersistentVolumeSource};
    use crate::domain::volumes::{plan::plan_volumes, Fetched, PodFacts};
    let wanted: BTreeSet<&str> = pod
        .spec
        .volumes
        .iter()
        .filter(|v| v.csi.is_some() || claim_name_of(pod, v).is_some())
        .map(|v| v.name.as_str())
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    let node_name = inputs.resolved.node.node_name.clone();
    let existing = inputs
        .cluster
        .as_ref()
        .and_then(|c| c.existing.as_ref().ok())
        .and_then(Option::as_ref);
    let reported = objects
        .persistent_volumes
        .values()
        .filter_map(|pv| match pv {
            Fetched::Found(pv) => match &pv.source {
                PersistentVolumeSource::Csi(source) => {
                    attachment(source.as_ref(), &node_name, objects)
                }
                _ => None,
            },
            _ => None,
        })
        .map(|a| a.unique_name)
        .collect();
    let facts = PodFacts {
        node_labels: existing
            .map(|n| n.metadata.labels.clone())
            .unwrap_or_default(),
        node_name,
        volumes_reported_in_use: reported,
        ..PodFacts::default()
    };
    plan_volumes(requests, pod, objects, &facts)
        .into_iter()
        .filter(|p| wanted.contains(p.name.as_str()))
        .map(|p| match p.action {
            Ok(action) => PodVolumePlan {
                name: p.name,
                mount: Some(describe_mount(
                    &p.spec_name,
                    &action,
                    objects,
                    &facts.node_name,
                )),
                waits: None,
            },
            Err(e) => PodVolumePlan {
                name: p.name,
                mount: None,
                waits: Some(e.to_string()),
            },
        })
        .collect()
}

/// A claim's or CSI volume's set-up, in words.
fn describe_mount(
    spec_name: &str,
    action: &crate::domain::volumes::plan::VolumeAction,
    objects: &crate::domain::volumes::PodObjects,
    node_name: &str,
) -> String {
    use crate::domain::volumes::plan::VolumeAction;
    match action {
        VolumeAction::Csi(p) => {
            let mut words = format!(
                "{spec_name}: CSI driver {} volume {}",
                p.driver, p.volume_handle
            );
            if let Some(stage) = &p.stage {
                words.push_str(&format!(", staged at {}", stage.staging_path.display()));
            }
            words.push_str(&format!(
                ", published at {}{}",
                p.target_path.display(),
                if p.readonly { " read-only" } else { "" }
            ));
            if let Some(map) = &p.block {
                words.push_str(&format!(
                    ", a block device given to containers from {}, held at {}",
                    map.pod_link.display(),
                    map.global_map.display()
                ));
            }
            let id =
                crate::domain::csi::volume::attachment_name(&p.volume_handle, &p.driver, node_name);
            if objects.volume_attachments.contains_key(&id) {
                words.push_str(&format!(", attached first (VolumeAttachment {id})"));
            }
            words
        }
        VolumeAction::Local { path, .. } => {
            format!("{spec_name}: local folder {}", path.display())
        }
        VolumeAction::HostPath { path, .. } => {
            format!("{spec_name}: host path {}", path.display())
        }
        other => format!("{spec_name}: {other:?}"),
    }
}

/// The static CPU manager's decisions for the desired pods, admitted in order as the pod
/// loop would (the state file's assignments kept): each container's CPU set once all are
/// admitted, or the
/// refusal as `"<reason>: <message>"` under `"*"`. A manager that would not start is a
/// warning.
fn cpu_plans(
    inputs: &PlanInputs,
    desired: &[&Pod],
    mut pods: Vec<PodPlan>,
    warnings: &mut Vec<String>,
) -> Vec<PodPlan> {
    use crate::domain::resource_managers::cpu_manager::CpuManager;
    use crate::domain::resource_managers::OptionGates;
    let (Some(cpu), node) = (&inputs.cpu_manager, &inputs.resolved.node) else {
        return pods;
    };
    let reservation = crate::domain::node::allocatable::node_allocatable_reservation(
        &node.node.capacity,
        &node.node.system_reserved,
        &node.node.kube_reserved,
        &node.node.hard_thresholds,
    );
    let gate = |name: &str| node.feature_gates.enabled(name);
    let manager = CpuManager::new(
        &node.cpu_manager,
        &cpu.topology,
        &reservation,
        node.node.reserved_cpus.as_ref(),
        OptionGates::cpu_manager(&node.feature_gates),
        OptionGates {
            alpha: gate("TopologyManagerPolicyAlphaOptions"),
            beta: gate("TopologyManagerPolicyBetaOptions"),
        },
        cpu.state.as_deref(),
        &cpu.state_path,
    );
    let mut manager = match manager {
        Ok(Some(m)) => m,
        Ok(None) => return pods,
        Err(e) => {
            warnings.push(format!(
                "the CPU manager would not start: {}",
                crate::ports::error::Chain(&e)
            ));
            return pods;
        }
    };
    let refusals: Vec<Option<String>> = desired
        .iter()
        .map(|pod| {
            let r = manager
                .admit(pod, None, Some(&inputs.devices))
                .result
                .err()?;
            Some(format!("{}: {}", r.reason, r.message))
        })
        .collect();
    // The sets once every pod is admitted: the shared pool as the reconcile loop leaves it.
    for ((pod, plan), refusal) in desired.iter().zip(pods.iter_mut()).zip(refusals) {
        if let Some(refusal) = refusal {
            plan.cpus.insert("*".into(), refusal);
            continue;
        }
        for c in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
            let set = manager.container_cpuset(&pod.metadata.uid, &c.name);
            plan.cpus.insert(c.name.clone(), set.to_string());
        }
    }
    pods
}

/// Each container's devices as the device manager would see them (`planned_devices`).
fn device_plans(
    pod: &Pod,
    devices: &crate::domain::devices::DeviceManagerState,
) -> BTreeMap<String, BTreeMap<String, DevicesPlan>> {
    pod.spec
        .init_containers
        .iter()
        .chain(&pod.spec.containers)
        .filter_map(|c| {
            let planned: BTreeMap<String, DevicesPlan> = devices
                .planned_devices(&pod.metadata.uid, c)
                .into_iter()
                .map(|d| {
                    let plan = DevicesPlan {
                        count: d.count,
                        ids: d.ids,
                    };
                    (d.resource, plan)
                })
                .collect();
            (!planned.is_empty()).then(|| (c.name.clone(), planned))
        })
        .collect()
}

fn pod_skeleton(pod: &Pod) -> PodPlan {
    PodPlan {
        uid: pod.metadata.uid.clone(),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        source: String::new(),
        qos_class: String::new(),
        cgroup: None,
        running: Vec::new(),
        volumes: Vec::new(),
        cpus: BTreeMap::new(),
        devices: BTreeMap::new(),
        actions: PodActionsPlan {
            rejected: None,
            kill_pod: None,
            create_sandbox: None,
            keep_sandbox: None,
            start_ephemeral_containers: Vec::new(),
            start_init_containers: Vec::new(),
            start_containers: Vec::new(),
            kill_containers: Vec::new(),
            pull_images: Vec::new(),
            held_containers: Vec::new(),
        },
        action_count: 0,
    }
}

fn removal(status: &PodRuntimeStatus) -> PodRemoval {
    let removal = teardown::removal(status);
    let name = if status.name.is_empty() {
        status.uid.clone()
    } else {
        format!("{}/{}", status.namespace, status.name)
    };
    PodRemoval {
        uid: status.uid.clone(),
        name: status.name.clone(),
        namespace: status.namespace.clone(),
        reason: Reason {
            code: "NotDesired".into(),
            message: format!(
                "The runtime holds pod {name} but no source wants it (its manifest was removed, or changed and so became a new pod); it will be stopped and removed."
            ),
        },
        // The spec is gone: the plan the termination would take with what the
        // containers recorded (the same domain functions).
        stop_containers: teardown::termination_plan(None, status, Stopping::Spec)
            .stopped()
            .map(|c| c.id.clone())
            .collect(),
        remove_containers: removal.containers,
        remove_sandboxes: removal.sandboxes,
    }
}

/// The plan for `inputs`; see the module documentation. Pure: no clock, no I/O.
pub fn compute_plan(inputs: &PlanInputs) -> Plan {
    let resolved = &inputs.resolved;
    let settings = &resolved.node.node;
    let (given_system, given_kube) = (
        strings(&settings.given_system_reserved),
        strings(&settings.given_kube_reserved),
    );
    let node = NodePlan {
        name: resolved.node.node_name.clone(),
        name_source: resolved.node.node_name_source,
        capacity: strings(&settings.capacity),
        online_cpus: settings.online_cpus.to_string(),
        reserved_cpus: settings.reserved_cpus.as_ref().map(ToString::to_string),
        system_reserved: Reservation {
            given: given_system.clone(),
            effective: strings(&settings.system_reserved),
        },
        kube_reserved: Reservation {
            given: given_kube.clone(),
            effective: strings(&settings.kube_reserved),
        },
        reserved_cpus_effect: reserved_cpus_effect(settings, &given_system, &given_kube),
        allocatable: strings(&settings.allocatable),
        eviction: eviction_plan(resolved, settings, &inputs.node_stats, inputs),
        stats: inputs.node_stats.clone(),
        container_logs: resolved.node.log_rotation.describe(),
    };

    let observed: BTreeMap<&str, &PodRuntimeStatus> = inputs
        .observed
        .iter()
        .map(|p| (p.uid.as_str(), p))
        .collect();
    // Connected: the API pods the node would admit run beside the static pods.
    let (api_pods, api_run) = match &inputs.cluster {
        Some(cluster) => {
            let existing = cluster.existing.as_ref().ok().and_then(Option::as_ref);
            let node_info = NodeInfo {
                name: resolved.node.node_name.clone(),
                labels: existing
                    .map(|n| n.metadata.labels.clone())
                    .unwrap_or_default(),
                allocatable: settings.allocatable.clone(),
                taints: existing.map_or_else(
                    || resolved.node.register_with_taints.clone(),
                    |n| n.spec.taints.clone(),
                ),
            };
            cluster::api_pod_plans(cluster, &inputs.desired, &node_info)
        }
        None => (Vec::new(), Vec::new()),
    };
    let mut desired: Vec<&Pod> = inputs.desired.iter().chain(&api_run).collect();
    desired.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name, &a.metadata.uid).cmp(&(
            &b.metadata.namespace,
            &b.metadata.name,
            &b.metadata.uid,
        ))
    });
    // Two sources (or manifests) giving the same uid: the first one read wins, as in
    // the pod manager.
    let mut seen = BTreeSet::new();
    desired.retain(|p| seen.insert(p.metadata.uid.as_str()));
    // The pods' cgroups first: the sandbox config carries its pod's as cgroup parent.
    let mut pods: Vec<PodPlan> = desired.iter().map(|pod| pod_skeleton(pod)).collect();
    let cgroups = cgroups::cgroup_plan(
        &resolved.node,
        &desired,
        inputs.cgroup_version,
        resolved.options.cpu_weight_curve,
        &mut pods,
    );

    let mut warnings = inputs.warnings.clone();
    let mut images = inputs.images.clone();
    let unknown: Vec<String> =
        images_wanted(&inputs.desired, &inputs.observed, inputs.now_unix_nanos)
            .into_iter()
            .filter(|image| !images.contains_key(image))
            .collect();
    if !unknown.is_empty() {
        warnings.push(format!(
            "whether these images are on the node is not known (the snapshot does not record them, or the runtime did not answer): {}; planned as present, so no pull is shown for them",
            unknown.join(", ")
        ));
        let unknown_facts = || {
            ImagePresence::Present(ImageFacts {
                id: String::new(),
                user: ImageUser::root(),
            })
        };
        images.extend(unknown.into_iter().map(|i| (i, unknown_facts())));
    }
    // The host's resolv.conf is not read: DNS is not part of the printed plan.
    let requests = RequestContext::from_config(resolved, ResolvConf::default());
    let cx = PlanContext {
        requests: &requests,
        images: &images,
        now_unix_nanos: inputs.now_unix_nanos,
    };
    let no_objects = crate::domain::volumes::PodObjects::default();
    let pods: Vec<PodPlan> = desired
        .iter()
        .zip(pods)
        .map(|(pod, skeleton)| {
            let status = observed.get(pod.metadata.uid.as_str()).copied();
            let mut plan = pod_plan(pod, status, skeleton.cgroup, &cx);
            let objects = inputs
                .cluster
                .as_ref()
                .and_then(|c| c.volume_objects.get(&pod.metadata.uid))
                .unwrap_or(&no_objects);
            plan.volumes = volume_plans(pod, objects, &requests, inputs);
            plan.devices = device_plans(pod, &inputs.devices);
            plan
        })
        .collect();
    let pods = cpu_plans(inputs, &desired, pods, &mut warnings);

    let pods_to_remove: Vec<PodRemoval> = if inputs.sources_complete {
        let mut removals: Vec<PodRemoval> = inputs
            .observed
            .iter()
            .filter(|p| !seen.contains(p.uid.as_str()))
            .map(removal)
            .collect();
        removals.sort_by(|a, b| a.uid.cmp(&b.uid));
        removals
    } else {
        let unwanted = inputs
            .observed
            .iter()
            .filter(|p| !seen.contains(p.uid.as_str()))
            .count();
        if unwanted > 0 {
            warnings.push(format!(
                "{unwanted} pod(s) in the runtime are not desired, but a pod source could not be read, so none is planned for removal (the pod loop waits for every source too)"
            ));
        }
        Vec::new()
    };

    let cluster = inputs.cluster.as_ref().map(|c| {
        let mut plan = cluster::cluster_plan(c);
        plan.action_count += api_pods.iter().filter(|p| p.action != "run").count();
        plan.pods = api_pods;
        plan
    });
    let action_count = pods.iter().map(|p| p.action_count).sum::<usize>()
        + pods_to_remove.len()
        + cluster.as_ref().map_or(0, |c| c.action_count);
    Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        valid: true,
        problems: Vec::new(),
        warnings,
        skipped_manifests: inputs.skipped_manifests.clone(),
        action_count,
        config: config_entries(resolved),
        not_implemented: states::not_implemented_given(resolved)
            .into_iter()
            .map(|(name, value)| NotImplemented { name, value })
            .collect(),
        node: Some(node),
        cgroups,
        pods,
        pods_to_remove,
        cluster,
    }
}

#[cfg(test)]
mod tests;
