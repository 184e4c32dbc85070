//! The dry run: the sync machine driven as the planner drives it.

use std::collections::BTreeMap;

use super::{
    Answer, Effect, Need, PlanningFacts, PodSync, PulledImage, RuntimeView, Step, SyncOutcome,
};
use crate::domain::kuberuntime::plan::{ImagePresence, SyncPlan};
use crate::domain::kuberuntime::requests::RequestContext;
use crate::domain::pod::Pod;
use crate::domain::units::duration::GoDuration;
use crate::domain::volumes::PodInputs;

/// A dry run of one sync: every effect the sync would ask for, answered as done, with
/// the facts the planner has (the runtime's view, the images it knows, no pull
/// back-off, no API objects; a new sandbox's IP and a pulled image's user unknown).
#[derive(Debug, Clone)]
pub struct DryRun {
    pub plan: Option<SyncPlan>,
    pub effects: Vec<Effect>,
    pub outcome: SyncOutcome,
}

/// Drives [`PodSync`] as the dry-run planner does; see [`DryRun`].
pub fn dry_run(
    pod: &Pod,
    requests: &RequestContext,
    now_unix_nanos: i64,
    view: &RuntimeView,
    images: &BTreeMap<String, ImagePresence>,
    cgroup_parent: &str,
) -> DryRun {
    let mut sync = PodSync::new(pod, requests, now_unix_nanos);
    let mut effects = Vec::new();
    // Each step is answered, so the machine ends; the bound keeps a defect from looping.
    for _ in 0..10_000 {
        let answer = match sync.step() {
            Step::Done(outcome) => {
                return DryRun {
                    plan: sync.take_plan(),
                    effects,
                    outcome: *outcome,
                }
            }
            Step::Need(need) => match need {
                Need::Runtime => Answer::Runtime(Ok(view.clone())),
                Need::Inputs { images: wanted } => Answer::Inputs(Box::new(PlanningFacts {
                    images: wanted
                        .iter()
                        .filter_map(|i| Some((i.clone(), images.get(i)?.clone())))
                        .collect(),
                    image_backoff: BTreeMap::new(),
                    cgroup_parent: cgroup_parent.to_owned(),
                    pod_inputs: PodInputs::default(),
                })),
                Need::SandboxStatus { .. } => Answer::SandboxStatus(None),
                Need::NodeHosts => Answer::NodeHosts(String::new()),
                Need::PulledImage { .. } => Answer::PulledImage(PulledImage::NotKnown),
                Need::RuntimeAfter { .. } => Answer::RuntimeAfter(None),
            },
            Step::Do(effect) => {
                let answer = match &effect {
                    Effect::SetUpVolumes { .. } => Answer::Volumes {
                        failed: Vec::new(),
                        refresh_after: None,
                    },
                    Effect::CreateSandbox { .. } => Answer::SandboxCreated(String::new()),
                    Effect::PullImage { .. } => Answer::Pulled {
                        took: GoDuration::from_nanos(0),
                    },
                    Effect::CreateContainer { name, .. } => {
                        Answer::ContainerCreated(format!("(new {name})"))
                    }
                    _ => Answer::Done,
                };
                effects.push(effect);
                answer
            }
        };
        sync.feed(answer);
    }
    DryRun {
        plan: sync.take_plan(),
        effects,
        outcome: sync.outcome_so_far(),
    }
}
