//! A pod's requests and limits as upstream sums them, for eviction ranking and node
//! admission.

use super::{Container, Pod};
use crate::domain::units::quantity::Quantity;

/// What the pod requests of `resource` (upstream v1.26 `GetResourceRequestQuantity`):
/// the sum over its containers, or the largest init container's request if more. Zero
/// (in bytes) when nothing requests it.
pub fn pod_request(pod: &Pod, resource: &str) -> i128 {
    let request = |c: &Container| c.resources.requests.get(resource).map(Quantity::nanos);
    let sum: i128 = pod.spec.containers.iter().filter_map(request).sum();
    let init = pod
        .spec
        .init_containers
        .iter()
        .filter_map(request)
        .max()
        .unwrap_or(0);
    sum.max(init)
}

/// The pod's limit of `resource` (upstream `PodRequestsAndLimits`): the containers'
/// limits summed, or the largest init container's if more; `None` when no container
/// states one.
pub fn pod_limit(pod: &Pod, resource: &str) -> Option<Quantity> {
    let limit = |c: &Container| c.resources.limits.get(resource).copied();
    let mut found = false;
    let mut sum: Option<Quantity> = None;
    for q in pod.spec.containers.iter().filter_map(limit) {
        found = true;
        sum = Some(match sum {
            Some(s) => s.checked_add(&q).unwrap_or(s),
            None => q,
        });
    }
    for q in pod.spec.init_containers.iter().filter_map(limit) {
        found = true;
        if sum.is_none_or(|s| q > s) {
            sum = Some(q);
        }
    }
    sum.filter(|_| found)
}
