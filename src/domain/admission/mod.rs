//! Node admission of a new pod (upstream v1.26 `predicateAdmitHandler`): whether it fits
//! the node beside the pods already admitted, with upstream's reasons and messages.
//!
//! The checks, in upstream's order (the first failure is the one reported): resources
//! (`OutOfpods`, `OutOfcpu`, `OutOfmemory`, `OutOfephemeral-storage`, `OutOf<name>` for
//! hugepages and extended resources), required node affinity and node selector
//! (`NodeAffinity`), node name (`NodeName`), host ports (`NodePorts`), untolerated
//! `NoExecute` taints (`TaintToleration`, API pods only), then the OS label and field.
//! The pressure admission of the eviction manager is separate
//! ([`crate::domain::eviction::admission::admit`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::pod::resources::pod_request;
use crate::domain::pod::{is_static_pod, NodeSelector, NodeSelectorRequirement, Pod, Toleration};
use crate::domain::units::quantity::Quantity;

pub use crate::domain::config::model::Taint;

/// The node label naming its operating system.
pub const OS_LABEL: &str = "kubernetes.io/os";
/// The only OS rkubelet runs on.
pub const NODE_OS: &str = "linux";

/// What admission knows of the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The node's allocatable: `cpu`, `memory`, `pods`, `ephemeral-storage`,
    /// `hugepages-<size>` and extended resources.
    pub allocatable: BTreeMap<String, Quantity>,
    pub taints: Vec<Taint>,
}

/// Why a pod was not admitted: upstream's reason and message (the status message is
/// `Pod was rejected: <message>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

impl Rejection {
    fn predicate(name: &str) -> Rejection {
        Rejection {
            reason: name.to_owned(),
            message: format!("Predicate {name} failed"),
        }
    }
}

/// The order pods are admitted and started in: oldest first (upstream sorts a batch of
/// additions by creation time).
pub fn by_creation(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    a.metadata
        .creation_timestamp
        .cmp(&b.metadata.creation_timestamp)
}

/// Upstream's `HandlePodAdditions` for pods not admitted before: in the order they
/// were created, each through the pressure admission (`pressure`, the node's conditions)
/// and then, when the node is known, [`admit_pod`] beside `active` and the pods of the
/// batch admitted before it. The app's pod loop and the dry run both take this.
pub fn admit_new_pods<'a>(
    mut new: Vec<&'a Pod>,
    active: &[Pod],
    node: Option<&NodeInfo>,
    pressure: &[crate::domain::eviction::thresholds::PressureCondition],
) -> Vec<(&'a Pod, Result<(), Rejection>)> {
    new.sort_by(|a, b| by_creation(a, b));
    let mut admitted = active.to_vec();
    new.into_iter()
        .map(|pod| {
            let verdict = crate::domain::eviction::admission::admit(pod, pressure)
                .map_err(|r| Rejection {
                    reason: r.reason.to_owned(),
                    message: r.message,
                })
                .and_then(|()| node.map_or(Ok(()), |node| admit_pod(pod, &admitted, node)));
            if verdict.is_ok() {
                admitted.push(pod.clone());
            }
            (pod, verdict)
        })
        .collect()
}

/// Whether `pod` may run on `node` beside `admitted` (the active pods already admitted,
/// `pod` not among them).
pub fn admit_pod(pod: &Pod, admitted: &[Pod], node: &NodeInfo) -> Result<(), Rejection> {
    if let Some(short) = insufficient_resources(pod, admitted, node)
        .into_iter()
        .next()
    {
        return Err(Rejection {
            reason: format!("OutOf{}", short.resource),
            message: format!(
                "Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}",
                short.resource, short.requested, short.used, short.capacity
            ),
        });
    }
    if !matches_required_affinity(pod, node) {
        return Err(Rejection::predicate("NodeAffinity"));
    }
    if !pod.spec.node_name.is_empty() && pod.spec.node_name != node.name {
        return Err(Rejection::predicate("NodeName"));
    }
    if host_ports_conflict(pod, admitted) {
        return Err(Rejection::predicate("NodePorts"));
    }
    if !is_static_pod(pod) && has_untolerated_no_execute_taint(&node.taints, &pod.spec.tolerations)
    {
        return Err(Rejection::predicate("TaintToleration"));
    }
    if let Some(wanted) = pod.metadata.labels.get(OS_LABEL) {
        let node_os = node
            .labels
            .get(OS_LABEL)
            .filter(|os| os.as_str() == NODE_OS)
            .map_or(NODE_OS, String::as_str);
        if wanted != node_os {
            return Err(Rejection {
                reason: "PodOSSelectorNodeLabelDoesNotMatch".into(),
                message:
                    "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
                        .into(),
            });
        }
    }
    if pod.spec.os.as_ref().is_some_and(|os| os.name != NODE_OS) {
        return Err(Rejection {
            reason: "PodOSNotSupported".into(),
            message: "Failed to admit pod as the OS field doesn't match node OS".into(),
        });
    }
    Ok(())
}

/// One resource the node lacks, in upstream's units (millicores for cpu).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shortage {
    resource: String,
    requested: i128,
    used: i128,
    capacity: i128,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_MILLI: i128 = 1_000_000;

/// A resource's amount in the unit upstream compares it in: millicores for cpu, whole
/// units (rounded up) for the rest.
fn amount(resource: &str, nanos: i128) -> i128 {
    let per = if resource == "cpu" {
        NANOS_PER_MILLI
    } else {
        NANOS_PER_UNIT
    };
    nanos.div_euclid(per) + i128::from(nanos.rem_euclid(per) != 0)
}

/// The pod's request of `resource` with its overhead (upstream
/// `computePodResourceRequest`), in [`amount`]'s unit.
fn request_with_overhead(pod: &Pod, resource: &str) -> i128 {
    let overhead = pod.spec.overhead.get(resource).map_or(0, Quantity::nanos);
    amount(resource, pod_request(pod, resource) + overhead)
}

/// Extended resources are domain-prefixed names outside `kubernetes.io/`; requests.*
/// quota names are not resources.
fn is_extended(resource: &str) -> bool {
    resource.contains('/')
        && !resource.starts_with("kubernetes.io/")
        && !resource.starts_with("requests.")
}

/// Upstream's `IsExtendedResourceName`: [`is_extended`], and `requests.<name>` a
/// qualified name (what a device plugin may register).
pub fn is_extended_resource_name(resource: &str) -> bool {
    is_extended(resource)
        && !resource.contains("kubernetes.io/")
        && crate::domain::node_status::labels::qualified_name_errors(&format!(
            "requests.{resource}"
        ))
        .is_empty()
}

/// Upstream's `noderesources.Fits`: the pod count first, then cpu, memory,
/// ephemeral storage and the scalar resources (hugepages, extended) by name. An
/// extended resource the node does not have at all is not checked (upstream leaves it
/// to the device plugins).
fn insufficient_resources(pod: &Pod, admitted: &[Pod], node: &NodeInfo) -> Vec<Shortage> {
    let capacity = |resource: &str| {
        node.allocatable
            .get(resource)
            .map_or(0, |q| amount(resource, q.nanos()))
    };
    let used = |resource: &str| -> i128 {
        admitted
            .iter()
            .map(|p| request_with_overhead(p, resource))
            .sum()
    };
    let mut short = Vec::new();
    let pods_allowed = capacity("pods");
    let pods_used = i128::try_from(admitted.len()).unwrap_or(i128::MAX);
    if pods_used + 1 > pods_allowed {
        short.push(Shortage {
            resource: "pods".into(),
            requested: 1,
            used: pods_used,
            capacity: pods_allowed,
        });
    }
    let mut scalar: BTreeSet<&str> = BTreeSet::new();
    for c in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
        scalar.extend(c.resources.requests.keys().map(String::as_str));
    }
    scalar.extend(pod.spec.overhead.keys().map(String::as_str));
    let fixed = ["cpu", "memory", "ephemeral-storage"];
    let scalar = scalar
        .into_iter()
        .filter(|r| !fixed.contains(r) && *r != "pods")
        .filter(|r| !is_extended(r) || node.allocatable.contains_key(*r));
    for resource in fixed.into_iter().chain(scalar) {
        let requested = request_with_overhead(pod, resource);
        if requested == 0 {
            continue;
        }
        let (used, capacity) = (used(resource), capacity(resource));
        if requested > capacity - used {
            short.push(Shortage {
                resource: resource.to_owned(),
                requested,
                used,
                capacity,
            });
        }
    }
    short
}

/// `spec.nodeSelector` and the node affinity's required terms (upstream
/// `GetRequiredNodeAffinity(pod).Match(node)`).
fn matches_required_affinity(pod: &Pod, node: &NodeInfo) -> bool {
    let selector_ok = pod
        .spec
        .node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    if !selector_ok {
        return false;
    }
    let Some(required) = pod
        .spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return true;
    };
    node_selector_matches(required, &node.name, &node.labels)
}

/// Upstream's `MatchNodeSelectorTerms`: a node (its name and labels) matches a required
/// node selector (a pod's node affinity, a PersistentVolume's).
pub fn node_selector_matches(
    required: &NodeSelector,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    // Terms are ORed; a term with no requirement matches nothing.
    required.node_selector_terms.iter().any(|term| {
        (!term.match_expressions.is_empty() || !term.match_fields.is_empty())
            && term
                .match_expressions
                .iter()
                .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
            && term.match_fields.iter().all(|r| {
                // Only `metadata.name` is a node field a selector may name.
                r.key == "metadata.name" && requirement_matches(r, Some(node_name))
            })
    })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let as_int = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| r.values.iter().any(|w| w == v)),
        "NotIn" => value.is_none_or(|v| r.values.iter().all(|w| w != v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [bound]) = (value.and_then(as_int), r.values.as_slice()) else {
                return false;
            };
            let Some(bound) = as_int(bound) else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// A host port as upstream compares them: protocol (TCP by default), host IP
/// (`0.0.0.0` when empty), port. Upstream counts the app containers' ports only.
fn host_ports(pod: &Pod) -> Vec<(&str, &str, i32)> {
    pod.spec
        .containers
        .iter()
        .flat_map(|c| &c.ports)
        .filter(|p| p.host_port > 0)
        .map(|p| {
            let protocol = if p.protocol.is_empty() {
                "TCP"
            } else {
                p.protocol.as_str()
            };
            let ip = if p.host_ip.is_empty() {
                "0.0.0.0"
            } else {
                p.host_ip.as_str()
            };
            (protocol, ip, p.host_port)
        })
        .collect()
}

/// Upstream `nodeports.Fits`: two ports clash when protocol and port are equal and
/// either binds every address or both bind the same one.
fn host_ports_conflict(pod: &Pod, admitted: &[Pod]) -> bool {
    let wanted = host_ports(pod);
    if wanted.is_empty() {
        return false;
    }
    let taken: Vec<_> = admitted.iter().flat_map(host_ports).collect();
    wanted.iter().any(|(proto, ip, port)| {
        taken.iter().any(|(p, i, n)| {
            p == proto && n == port && (*ip == "0.0.0.0" || *i == "0.0.0.0" || i == ip)
        })
    })
}

/// Upstream `FindMatchingUntoleratedTaint` over the `NoExecute` taints.
fn has_untolerated_no_execute_taint(taints: &[Taint], tolerations: &[Toleration]) -> bool {
    taints
        .iter()
        .filter(|t| t.effect == "NoExecute")
        .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// Upstream `Toleration.ToleratesTaint`.
pub fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if !tol.effect.is_empty() && tol.effect != taint.effect {
        return false;
    }
    if !tol.key.is_empty() && tol.key != taint.key {
        return false;
    }
    match tol.operator.as_str() {
        "Exists" => true,
        "" | "Equal" => tol.value == taint.value,
        _ => false,
    }
}

#[cfg(test)]
mod tests;
