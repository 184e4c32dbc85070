//! The eviction manager's decisions (upstream's `synchronize`, pure): from the
//! configuration, the state of the last cycle, this cycle's stats and the active pods,
//! the node conditions to report, the pods over a local storage limit, the threshold to
//! reclaim and how to reclaim on the node first, and then the pod to evict with its
//! message, grace period and `DisruptionTarget` condition.
//!
//! One cycle is three steps, so the app can reclaim between them:
//! [`synchronize`], then for a starved resource the node reclaim steps it names followed
//! by [`reclaim_sufficient`] on fresh stats, then [`choose_pod`].

use std::collections::BTreeMap;

use serde::Serialize;

use super::protected_from_eviction;
use super::rank::{pod_limit, rank, Ranking};
use super::signals::{make_signal_observations, NodeSummary, Observations, PodStats};
use super::thresholds::{
    merge_thresholds, node_conditions, node_conditions_last_observed_at,
    node_conditions_observed_since, reclaimable_threshold, sort_by_eviction_priority,
    threshold_met_info, thresholds_first_observed_at, thresholds_met, thresholds_met_grace_period,
    thresholds_updated_stats, PressureCondition, Resource, ThresholdsObservedAt,
};
use super::{Signal, Threshold, EVICTED_REASON};
use crate::domain::pod::{format_pod, Pod};
use crate::domain::units::quantity::{Format, Quantity};

/// Event annotations upstream puts on an `Evicted` event.
pub const OFFENDING_CONTAINERS_KEY: &str = "offending_containers";
pub const OFFENDING_CONTAINERS_USAGE_KEY: &str = "offending_containers_usage";
pub const STARVED_RESOURCE_KEY: &str = "starved_resource";
/// The pod condition an eviction sets, with upstream's reason.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
pub const TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";

/// How the manager is configured.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionConfig {
    /// Hard and soft thresholds (with the `allocatableMemory.available` copies).
    pub thresholds: Vec<Threshold>,
    /// `evictionPressureTransitionPeriod`.
    pub pressure_transition_period_nanos: i64,
    /// `evictionMaxPodGracePeriod`: the grace period of a soft eviction.
    pub max_pod_grace_period_seconds: i64,
    /// `localStorageCapacityIsolation`: enforce ephemeral-storage limits and emptyDir
    /// size limits.
    pub local_storage_capacity_isolation: bool,
}

impl EvictionConfig {
    /// Nothing to watch: no threshold and no local storage limit to enforce.
    pub fn is_idle(&self) -> bool {
        self.thresholds.is_empty() && !self.local_storage_capacity_isolation
    }
}

/// What the manager remembers between cycles (the times are wall clock, Unix nanoseconds).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvictionState {
    /// The conditions reported now.
    pub node_conditions: Vec<PressureCondition>,
    pub node_conditions_last_observed_at: BTreeMap<PressureCondition, i64>,
    pub thresholds_first_observed_at: ThresholdsObservedAt,
    /// Thresholds met (grace periods passed) and not yet resolved by their minimum reclaim.
    pub thresholds_met: Vec<Threshold>,
    pub last_observations: Observations,
}

impl EvictionState {
    pub fn has(&self, condition: PressureCondition) -> bool {
        self.node_conditions.contains(&condition)
    }
}

/// A way to reclaim a resource on the node before evicting pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeReclaim {
    /// Remove every dead container and sandbox that may go.
    DeadContainers,
    /// Remove every image no container uses.
    UnusedImages,
}

/// The ways to reclaim the resource a signal measures (upstream
/// `buildSignalToNodeReclaimFuncs`): disk by dead containers then unused images; with a
/// dedicated image filesystem only its own signals; memory and pids none.
pub fn node_reclaims(signal: Signal, dedicated_image_fs: bool) -> &'static [NodeReclaim] {
    const BOTH: &[NodeReclaim] = &[NodeReclaim::DeadContainers, NodeReclaim::UnusedImages];
    match signal {
        Signal::ImageFsAvailable
        | Signal::ImageFsInodesFree
        | Signal::ContainerFsAvailable
        | Signal::ContainerFsInodesFree => BOTH,
        Signal::NodeFsAvailable | Signal::NodeFsInodesFree if !dedicated_image_fs => BOTH,
        _ => &[],
    }
}

/// The starved resource of a cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Starved {
    pub threshold: Threshold,
    pub resource: Resource,
    /// To try, in order, before evicting a pod.
    pub reclaim: &'static [NodeReclaim],
}

/// Why a pod is evicted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum EvictionCause {
    /// A threshold on this signal.
    Threshold { signal: Signal },
    /// An emptyDir over its `sizeLimit`.
    EmptyDirLimit { volume: String },
    /// The pod over the sum of its containers' `ephemeral-storage` limits.
    PodEphemeralStorageLimit,
    /// A container over its `ephemeral-storage` limit.
    ContainerEphemeralStorageLimit { container: String },
}

/// A pod condition the eviction sets (`DisruptionTarget`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionCondition {
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// One pod to evict and how: the status it ends in (phase `Failed`, reason `Evicted`,
/// `message`, `condition`), the grace period override, the `Evicted` event's
/// annotations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Eviction {
    pub pod_uid: String,
    /// `name_namespace(uid)`.
    pub pod: String,
    pub cause: EvictionCause,
    /// Seconds; 0 for hard thresholds and local storage limits.
    pub grace_period_override: i64,
    pub reason: &'static str,
    pub message: String,
    pub annotations: BTreeMap<String, String>,
    pub condition: Option<EvictionCondition>,
}

fn eviction(
    pod: &Pod,
    cause: EvictionCause,
    grace: i64,
    message: String,
    annotations: BTreeMap<String, String>,
    condition: bool,
) -> Eviction {
    Eviction {
        pod_uid: pod.metadata.uid.clone(),
        pod: format_pod(pod),
        cause,
        grace_period_override: grace,
        reason: EVICTED_REASON,
        condition: condition.then(|| EvictionCondition {
            type_: DISRUPTION_TARGET,
            status: "True",
            reason: TERMINATION_BY_KUBELET,
            message: message.clone(),
        }),
        message,
        annotations,
    }
}

/// One cycle's findings (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Synchronized {
    /// The state to keep for the next cycle.
    pub state: EvictionState,
    pub observations: Observations,
    /// Pods over a local storage limit: upstream evicts all of them and stops the cycle.
    pub local_storage: Vec<Eviction>,
    /// Critical pods over a local storage limit, left alone (`name_namespace(uid)`).
    pub protected: Vec<String>,
    /// The thresholds that drive eviction now: met, past their grace period, on fresh
    /// stats, memory first.
    pub thresholds: Vec<Threshold>,
    /// The resource to reclaim, when a threshold drives eviction.
    pub starved: Option<Starved>,
}

/// One cycle up to the starved resource (upstream `synchronize` before reclaiming):
/// `None` when there is nothing to watch.
pub fn synchronize(
    config: &EvictionConfig,
    state: &EvictionState,
    summary: &NodeSummary,
    pods: &[Pod],
    dedicated_image_fs: bool,
    now: i64,
) -> Option<Synchronized> {
    if config.is_idle() {
        return None;
    }
    let observations = make_signal_observations(summary);
    let mut thresholds = thresholds_met(&config.thresholds, &observations, false);
    if !state.thresholds_met.is_empty() {
        let unresolved = thresholds_met(&state.thresholds_met, &observations, true);
        thresholds = merge_thresholds(thresholds, unresolved);
    }
    let first_observed_at =
        thresholds_first_observed_at(&thresholds, &state.thresholds_first_observed_at, now);
    let observed_now = node_conditions(&thresholds);
    let last_observed_at = node_conditions_last_observed_at(
        &observed_now,
        &state.node_conditions_last_observed_at,
        now,
    );
    let conditions = node_conditions_observed_since(
        &last_observed_at,
        config.pressure_transition_period_nanos,
        now,
    );
    let thresholds = thresholds_met_grace_period(&first_observed_at, now);
    let mut acting = thresholds_updated_stats(&thresholds, &observations, &state.last_observations);
    let new_state = EvictionState {
        node_conditions: conditions,
        node_conditions_last_observed_at: last_observed_at,
        thresholds_first_observed_at: first_observed_at,
        thresholds_met: thresholds,
        last_observations: observations.clone(),
    };
    let (local_storage, protected) = if config.local_storage_capacity_isolation {
        local_storage_evictions(pods, summary, dedicated_image_fs)
    } else {
        (Vec::new(), Vec::new())
    };
    sort_by_eviction_priority(&mut acting);
    let starved = if local_storage.is_empty() {
        reclaimable_threshold(&acting).map(|(threshold, resource)| Starved {
            reclaim: node_reclaims(threshold.signal, dedicated_image_fs),
            threshold,
            resource,
        })
    } else {
        None
    };
    Some(Synchronized {
        state: new_state,
        observations,
        local_storage,
        protected,
        thresholds: acting,
        starved,
    })
}

/// After node-level reclaim: whether fresh stats meet no threshold any more, minimum
/// reclaims included (upstream `reclaimNodeLevelResources`), so no pod need go.
pub fn reclaim_sufficient(config: &EvictionConfig, summary: &NodeSummary) -> bool {
    let observations = make_signal_observations(summary);
    thresholds_met(&config.thresholds, &observations, true).is_empty()
}

/// The ranking and the pod to evict for a starved resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// Every active pod's `name_namespace(uid)`, in eviction order.
    pub ranked: Vec<String>,
    /// The first pod in that order that is not critical.
    pub eviction: Option<Eviction>,
    /// Critical pods ranked before it, left alone.
    pub protected: Vec<String>,
}

/// Ranks the active pods for the starved resource and picks the first that may be
/// evicted (static, mirror and system-critical pods may not), one per cycle.
pub fn choose_pod(
    config: &EvictionConfig,
    sync: &Synchronized,
    starved: &Starved,
    pods: &[Pod],
    summary: &NodeSummary,
    dedicated_image_fs: bool,
) -> Choice {
    let stats = summary.pod_stats();
    let refs: Vec<&Pod> = pods.iter().collect();
    let ranked = rank(
        &refs,
        &stats,
        Ranking::for_signal(starved.threshold.signal, dedicated_image_fs),
    );
    let grace = if starved.threshold.is_hard() {
        0
    } else {
        config.max_pod_grace_period_seconds
    };
    let mut protected = Vec::new();
    let mut chosen = None;
    for pod in &ranked {
        if protected_from_eviction(pod) {
            protected.push(format_pod(pod));
            continue;
        }
        let (message, annotations) = eviction_message(
            starved.resource,
            pod,
            stats.get(pod.metadata.uid.as_str()).copied(),
            &sync.thresholds,
            &sync.observations,
        );
        let cause = EvictionCause::Threshold {
            signal: starved.threshold.signal,
        };
        chosen = Some(eviction(pod, cause, grace, message, annotations, true));
        break;
    }
    Choice {
        ranked: ranked.iter().map(|p| format_pod(p)).collect(),
        eviction: chosen,
        protected,
    }
}

/// Upstream's eviction message and event annotations: the starved resource, the
/// threshold and what is available, and each container using more than it requests.
pub fn eviction_message(
    resource: Resource,
    pod: &Pod,
    stats: Option<&PodStats>,
    thresholds: &[Threshold],
    observations: &Observations,
) -> (String, BTreeMap<String, String>) {
    let mut message = format!("The node was low on resource: {resource}. ");
    if let Some((quantity, available)) = threshold_met_info(resource, thresholds, observations) {
        message.push_str(&format!(
            "Threshold quantity: {quantity}, available: {available}. "
        ));
    }
    let mut annotations = BTreeMap::new();
    let Some(stats) = stats else {
        return (message, annotations);
    };
    let mut offending = Vec::new();
    let mut usages = Vec::new();
    for container_stats in &stats.containers {
        let Some(container) = pod
            .spec
            .containers
            .iter()
            .find(|c| c.name == container_stats.name)
        else {
            continue;
        };
        let request = container
            .resources
            .requests
            .get(resource.as_str())
            .copied()
            .unwrap_or_else(|| Quantity::new(0, Format::DecimalSI));
        let usage = match resource {
            Resource::EphemeralStorage => match (container_stats.rootfs, container_stats.logs) {
                (Some(root), Some(logs)) => Some(root.used_bytes.saturating_add(logs.used_bytes)),
                _ => None,
            },
            Resource::Memory => container_stats.memory_working_set_bytes,
            _ => None,
        };
        let Some(usage) = usage else {
            continue;
        };
        let usage = Quantity::new(i64::try_from(usage).unwrap_or(i64::MAX), Format::BinarySI);
        if usage > request {
            message.push_str(&format!(
                "Container {} was using {usage}, request is {request}, has larger consumption of {resource}. ",
                container.name
            ));
            offending.push(container.name.clone());
            usages.push(usage.to_string());
        }
    }
    annotations.insert(OFFENDING_CONTAINERS_KEY.into(), offending.join(","));
    annotations.insert(OFFENDING_CONTAINERS_USAGE_KEY.into(), usages.join(","));
    annotations.insert(STARVED_RESOURCE_KEY.into(), resource.to_string());
    (message, annotations)
}

/// Pods over a local storage limit (upstream `localStorageEviction`): an emptyDir over
/// its `sizeLimit`, the pod over its containers' summed `ephemeral-storage` limits, or a
/// container over its own (its logs, plus its writable layer when images share the
/// node's filesystem). Critical pods are returned apart, not evicted.
pub fn local_storage_evictions(
    pods: &[Pod],
    summary: &NodeSummary,
    dedicated_image_fs: bool,
) -> (Vec<Eviction>, Vec<String>) {
    let stats = summary.pod_stats();
    let mut evicted = Vec::new();
    let mut protected = Vec::new();
    for pod in pods {
        let Some(pod_stats) = stats.get(pod.metadata.uid.as_str()) else {
            continue;
        };
        let Some((cause, message)) = over_local_limit(pod, pod_stats, dedicated_image_fs) else {
            continue;
        };
        if protected_from_eviction(pod) {
            protected.push(format_pod(pod));
            continue;
        }
        evicted.push(eviction(pod, cause, 0, message, BTreeMap::new(), false));
    }
    (evicted, protected)
}

fn bytes(value: u64) -> Quantity {
    Quantity::new(i64::try_from(value).unwrap_or(i64::MAX), Format::BinarySI)
}

/// The first local storage limit the pod is over, and upstream's message for it.
fn over_local_limit(
    pod: &Pod,
    stats: &PodStats,
    dedicated_image_fs: bool,
) -> Option<(EvictionCause, String)> {
    for volume in &pod.spec.volumes {
        let Some(limit) = volume.empty_dir.as_ref().and_then(|e| e.size_limit) else {
            continue;
        };
        let used = stats.volumes.iter().find(|v| v.name == volume.name);
        if let Some(used) = used {
            if limit > Quantity::new(0, Format::DecimalSI) && bytes(used.usage.used_bytes) > limit {
                return Some((
                    EvictionCause::EmptyDirLimit {
                        volume: volume.name.clone(),
                    },
                    format!(
                        "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                        volume.name,
                        limit.to_string()
                    ),
                ));
            }
        }
    }
    if let Some(limit) = pod_limit(pod, "ephemeral-storage") {
        if bytes(stats.ephemeral_storage().used_bytes) > limit {
            return Some((
                EvictionCause::PodEphemeralStorageLimit,
                format!(
                    "Pod ephemeral local storage usage exceeds the total limit of containers {limit}. "
                ),
            ));
        }
    }
    for container_stats in &stats.containers {
        let Some(limit) = pod
            .spec
            .containers
            .iter()
            .find(|c| c.name == container_stats.name)
            .and_then(|c| c.resources.limits.get("ephemeral-storage"))
            .filter(|l| !l.is_zero())
        else {
            continue;
        };
        let mut used = container_stats.logs.map_or(0, |l| l.used_bytes);
        if !dedicated_image_fs {
            used = used.saturating_add(container_stats.rootfs.map_or(0, |r| r.used_bytes));
        }
        if bytes(used) > *limit {
            return Some((
                EvictionCause::ContainerEphemeralStorageLimit {
                    container: container_stats.name.clone(),
                },
                format!(
                    "Container {} exceeded its local ephemeral storage limit {:?}. ",
                    container_stats.name,
                    limit.to_string()
                ),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests;
