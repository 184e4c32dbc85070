//! Which dead containers and sandboxes of one pod may be removed (upstream's container
//! GC, applied per pod after each sync). Pure: the caller removes them.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::domain::kuberuntime::runtime::{
    ContainerState, ContainerStatus, PodRuntimeStatus, SandboxState, SandboxStatus,
};

/// Dead instances kept per container (upstream `--maximum-dead-containers-per-container`):
/// the newest one carries the restart count and the last state.
pub const DEAD_CONTAINERS_PER_CONTAINER: usize = 1;

/// The exited instances of each container beyond its newest `keep`, and the instances
/// that were created but never started and have a newer instance since (a kubelet killed
/// between CreateContainer and StartContainer leaves one; the next sync creates another,
/// as upstream's does, and the first would otherwise stay for good).
pub fn dead_containers(status: &PodRuntimeStatus, keep: usize) -> Vec<&ContainerStatus> {
    let newest = |c: &ContainerStatus| (c.created_at_nanos, c.attempt);
    let mut by_name: BTreeMap<&str, Vec<&ContainerStatus>> = BTreeMap::new();
    for c in status
        .containers
        .iter()
        .filter(|c| c.state == ContainerState::Exited)
    {
        by_name.entry(c.name.as_str()).or_default().push(c);
    }
    let superseded = status.containers.iter().filter(|c| {
        c.state == ContainerState::Created
            && status
                .find_container(&c.name)
                .is_some_and(|n| newest(n) > newest(c))
    });
    by_name
        .into_values()
        .flat_map(|mut dead| {
            dead.sort_by_key(|c| Reverse(newest(c)));
            dead.into_iter().skip(keep)
        })
        .chain(superseded)
        .collect()
}

/// Sandboxes that are not the newest, not ready, and hold none of the containers still
/// there (`in_use`: the sandbox ids of the remaining containers).
pub fn dead_sandboxes<'a>(
    status: &'a PodRuntimeStatus,
    in_use: &BTreeSet<&str>,
) -> Vec<&'a SandboxStatus> {
    status
        .sandboxes
        .iter()
        .skip(1)
        .filter(|s| s.state == SandboxState::NotReady && !in_use.contains(s.id.as_str()))
        .collect()
}

/// The pod folders (named by uid) to remove: those of pods no source wants, no worker
/// handles and the runtime does not hold.
pub fn orphaned_pod_dirs(
    found: &[String],
    keep: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    found
        .iter()
        .filter(|uid| !keep.contains(*uid))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(name: &str, id: &str, attempt: u32, state: ContainerState) -> ContainerStatus {
        ContainerStatus {
            attempt,
            created_at_nanos: i64::from(attempt),
            ..ContainerStatus::new(id, name, state)
        }
    }

    fn sandbox(id: &str, created: i64, state: SandboxState) -> SandboxStatus {
        SandboxStatus {
            id: id.into(),
            attempt: 0,
            state,
            created_at_nanos: created,
            host_network: false,
            ip: String::new(),
        }
    }

    /// Found by the fault tests (issue 17): rkubelet killed between CreateContainer and
    /// StartContainer left a created instance beside the one the next sync started.
    #[test]
    fn a_created_instance_with_a_newer_one_goes() {
        let status = PodRuntimeStatus {
            containers: vec![
                instance("a", "a0", 0, ContainerState::Created),
                instance("a", "a1", 1, ContainerState::Running),
                instance("b", "b0", 0, ContainerState::Created),
            ],
            ..Default::default()
        };
        let ids: Vec<&str> = dead_containers(&status, 1)
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(
            ids,
            ["a0"],
            "the newest created instance (b0) stays: the sync decides about it"
        );
    }

    #[test]
    fn only_exited_instances_beyond_the_newest_per_container_go() {
        let status = PodRuntimeStatus {
            containers: vec![
                instance("a", "a0", 0, ContainerState::Exited),
                instance("a", "a2", 2, ContainerState::Running),
                instance("a", "a1", 1, ContainerState::Exited),
                instance("b", "b0", 0, ContainerState::Exited),
            ],
            ..Default::default()
        };
        let ids: Vec<&str> = dead_containers(&status, DEAD_CONTAINERS_PER_CONTAINER)
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids, ["a0"]);
        assert_eq!(dead_containers(&status, 0).len(), 3);
    }

    #[test]
    fn old_empty_not_ready_sandboxes_go_the_newest_and_used_ones_stay() {
        let status = PodRuntimeStatus {
            sandboxes: vec![
                sandbox("new", 3, SandboxState::NotReady),
                sandbox("used", 2, SandboxState::NotReady),
                sandbox("empty", 1, SandboxState::NotReady),
                sandbox("ready", 0, SandboxState::Ready),
            ],
            ..Default::default()
        };
        let in_use = BTreeSet::from(["used"]);
        let ids: Vec<&str> = dead_sandboxes(&status, &in_use)
            .iter()
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(ids, ["empty"]);
    }
}
