//! How a pod is stopped and removed (upstream's `killPodWithSyncResult` and the pod
//! worker's termination): the grace period, the order the containers stop in, and what
//! is removed after. The sync, the eviction, the termination of a pod no longer wanted
//! and the dry-run planner all take this plan.

use crate::domain::kuberuntime::actions::is_sidecar;
use crate::domain::kuberuntime::runtime::{ContainerState, PodRuntimeStatus, SandboxState};
use crate::domain::pod::Pod;

/// The grace period of a pod whose spec is unknown and whose containers recorded none.
pub const DEFAULT_GRACE_SECS: i64 = 30;
/// Upstream's least grace period when the kubelet itself kills a pod
/// (`minimumGracePeriodInSeconds`).
pub const MINIMUM_GRACE_SECS: i64 = 2;

/// Why the pod stops, which decides its grace period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopping {
    /// Its spec asks (a sync that kills the pod, a pod no longer wanted): the spec's
    /// `terminationGracePeriodSeconds`, or what its containers recorded when the spec is
    /// gone, else [`DEFAULT_GRACE_SECS`].
    Spec,
    /// The kubelet kills it (an eviction) with this grace, at least
    /// [`MINIMUM_GRACE_SECS`].
    KilledWith(i64),
}

/// One live container to stop: each runs its `preStop` hook within the grace period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStop {
    pub name: String,
    pub id: String,
}

/// The plan for stopping a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminationPlan {
    pub grace_secs: i64,
    /// Stopped one group after the other, the containers of a group at once: the
    /// regular containers, then the sidecars (restartable init containers), which serve
    /// the others to the end.
    pub stop_groups: Vec<Vec<ContainerStop>>,
    /// Ready sandboxes, stopped once their containers are.
    pub stop_sandboxes: Vec<String>,
}

impl TerminationPlan {
    /// Every container the plan stops, in order.
    pub fn stopped(&self) -> impl Iterator<Item = &ContainerStop> {
        self.stop_groups.iter().flatten()
    }
}

/// What removing a stopped pod takes: every instance and sandbox the runtime holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    pub containers: Vec<String>,
    pub sandboxes: Vec<String>,
}

/// The grace period for `pod` (the spec when known, else the one its containers
/// recorded, as upstream's `restoreSpecsFromContainerLabels`).
pub fn grace_period(pod: Option<&Pod>, status: &PodRuntimeStatus, stopping: Stopping) -> i64 {
    match stopping {
        Stopping::KilledWith(grace) => grace.max(MINIMUM_GRACE_SECS),
        Stopping::Spec => match pod {
            Some(pod) => pod.termination_grace_period(),
            None => status
                .containers
                .iter()
                .find_map(|c| c.kill_spec.grace_period_secs)
                .unwrap_or(DEFAULT_GRACE_SECS),
        },
    }
}

/// How to stop the pod whose runtime state is `status`; `pod` is its spec when known.
pub fn termination_plan(
    pod: Option<&Pod>,
    status: &PodRuntimeStatus,
    stopping: Stopping,
) -> TerminationPlan {
    let sidecar = |name: &str| {
        pod.is_some_and(|p| {
            p.spec
                .init_containers
                .iter()
                .any(|c| c.name == name && is_sidecar(c))
        })
    };
    let (sidecars, regular): (Vec<ContainerStop>, Vec<ContainerStop>) = status
        .containers
        .iter()
        .filter(|c| c.state != ContainerState::Exited)
        .map(|c| ContainerStop {
            name: c.name.clone(),
            id: c.id.clone(),
        })
        .partition(|c| sidecar(&c.name));
    TerminationPlan {
        grace_secs: grace_period(pod, status, stopping),
        stop_groups: [regular, sidecars]
            .into_iter()
            .filter(|g| !g.is_empty())
            .collect(),
        stop_sandboxes: status
            .sandboxes
            .iter()
            .filter(|s| s.state == SandboxState::Ready)
            .map(|s| s.id.clone())
            .collect(),
    }
}

/// What goes once the pod is stopped.
pub fn removal(status: &PodRuntimeStatus) -> Removal {
    Removal {
        containers: status.containers.iter().map(|c| c.id.clone()).collect(),
        sandboxes: status.sandboxes.iter().map(|s| s.id.clone()).collect(),
    }
}

/// The sandbox IP a kill's hooks reach the pod at: the newest sandbox's, while it is
/// ready.
pub fn hooks_sandbox_ip(status: &PodRuntimeStatus) -> &str {
    status
        .sandboxes
        .first()
        .filter(|s| s.state == SandboxState::Ready)
        .map(|s| s.ip.as_str())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::kuberuntime::runtime::{ContainerStatus, SandboxStatus};
    use crate::domain::pod::{Container, RestartPolicy};

    fn status() -> PodRuntimeStatus {
        let container = |id: &str, name: &str, state| ContainerStatus::new(id, name, state);
        PodRuntimeStatus {
            uid: "u".into(),
            name: "web".into(),
            namespace: "default".into(),
            sandboxes: vec![
                sandbox("s2", SandboxState::Ready),
                sandbox("s1", SandboxState::NotReady),
            ],
            containers: vec![
                container("c1", "app", ContainerState::Running),
                container("c0", "app", ContainerState::Exited),
                container("c2", "proxy", ContainerState::Running),
                container("c3", "init", ContainerState::Exited),
                container("c4", "new", ContainerState::Created),
            ],
        }
    }

    fn sandbox(id: &str, state: SandboxState) -> SandboxStatus {
        SandboxStatus {
            id: id.into(),
            attempt: 0,
            state,
            created_at_nanos: 0,
            host_network: false,
            ip: String::new(),
        }
    }

    fn pod() -> Pod {
        let mut pod = Pod::default();
        pod.spec.termination_grace_period_seconds = Some(7);
        pod.spec.init_containers = vec![
            Container {
                name: "init".into(),
                ..Container::default()
            },
            Container {
                name: "proxy".into(),
                restart_policy: Some(RestartPolicy::Always),
                ..Container::default()
            },
        ];
        pod
    }

    fn ids(group: &[ContainerStop]) -> Vec<&str> {
        group.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn live_containers_stop_before_sidecars_then_ready_sandboxes() {
        let plan = termination_plan(Some(&pod()), &status(), Stopping::Spec);
        let groups: Vec<Vec<&str>> = plan.stop_groups.iter().map(|g| ids(g)).collect();
        assert_eq!(groups, [vec!["c1", "c4"], vec!["c2"]]);
        assert_eq!(plan.stop_sandboxes, ["s2"]);
        assert_eq!(plan.grace_secs, 7);
        // Without the spec nothing is known to be a sidecar: one group.
        let plan = termination_plan(None, &status(), Stopping::Spec);
        assert_eq!(plan.stop_groups.len(), 1);
        assert_eq!(
            removal(&status()),
            Removal {
                containers: vec![
                    "c1".into(),
                    "c0".into(),
                    "c2".into(),
                    "c3".into(),
                    "c4".into()
                ],
                sandboxes: vec!["s2".into(), "s1".into()],
            }
        );
    }

    #[test]
    fn the_grace_period_is_the_specs_the_recorded_one_or_upstreams_least_for_a_kill() {
        let mut s = status();
        assert_eq!(grace_period(Some(&pod()), &s, Stopping::Spec), 7);
        assert_eq!(grace_period(None, &s, Stopping::Spec), DEFAULT_GRACE_SECS);
        s.containers[0].kill_spec.grace_period_secs = Some(12);
        assert_eq!(grace_period(None, &s, Stopping::Spec), 12);
        // An eviction's override, never under upstream's 2 s.
        assert_eq!(grace_period(Some(&pod()), &s, Stopping::KilledWith(0)), 2);
        assert_eq!(grace_period(Some(&pod()), &s, Stopping::KilledWith(20)), 20);
        let mut zero = pod();
        zero.spec.termination_grace_period_seconds = Some(0);
        assert_eq!(grace_period(Some(&zero), &s, Stopping::Spec), 0);
    }
}
