//! One pod sync as a step machine: the app loops on [`PodSync::step`], gathers the fact
//! it names ([`Step::Need`]), carries out the effect it asks for ([`Step::Do`]) and feeds
//! the answer back ([`PodSync::feed`]) until [`Step::Done`] gives the outcome.
//!
//! Every decision of upstream's `SyncPod` is made here, once per sync: the plan
//! ([`plan_pod_sync`]), what a failed mount holds, the kills and their grace, the sandbox,
//! the hosts file, the credentials of each pull, the order of the containers (init
//! containers one at a time, the first held one stopping the sync), what each failure
//! holds a container with and which events it records, when the sync has settled, and
//! which dead instances go. Facts that exist only once something is done are asked for
//! when they exist: the new sandbox's IP (the containers' configs are completed with it),
//! a pulled image's id and user. The dry-run planner drives the same machine against
//! the read-only runtime, answering every effect as done.

mod dry_run;
mod steps;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use dry_run::{dry_run, DryRun};
pub use steps::{
    Answer, ContainerHold, Created, Effect, Need, PlanningFacts, PulledImage, RuntimeView, Step,
    SyncOutcome,
};

use crate::domain::events as pod_events;
use crate::domain::kuberuntime::credentials::{pod_keyring, Keyring};
use crate::domain::kuberuntime::gc::{
    dead_containers, dead_sandboxes, DEAD_CONTAINERS_PER_CONTAINER,
};
use crate::domain::kuberuntime::hosts::{etc_hosts_file, hosts_ip, HostsFile};
use crate::domain::kuberuntime::plan::{
    complete_after_pull, images_to_inspect, plan_pod_sync, ContainerAction, ContainerPlan, Held,
    SandboxCreation, SyncInputs, SyncPlan, RETRY_AFTER_ERROR,
};
use crate::domain::kuberuntime::requests::{pod_log_dir_of, ContainerConfig, RequestContext};
use crate::domain::kuberuntime::runtime::{SandboxState, SandboxStatus};
use crate::domain::kuberuntime::teardown::{self, Stopping};
use crate::domain::kuberuntime::termination;
use crate::domain::node_status::status::NodeEvent;
use crate::domain::pod::{Container, ContainerKind, Pod};
use crate::domain::status::Waiting;
use crate::domain::volumes::subpath::SubPath;

/// What an answer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaiting {
    Runtime,
    Inputs,
    Volumes,
    Cgroup,
    Sandbox,
    SandboxStatus,
    NodeHosts,
    Pull,
    PulledImage,
    MessageFile,
    SubPaths,
    Create,
    Start,
    PostStart,
    RuntimeAfter,
    DeadContainer,
}

/// Where a container's start is: what is asked next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Begin,
    Inspect,
    MessageFile,
    SubPaths,
    Create,
    Start,
    PostStart,
}

/// What the machine does when nothing is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Begin,
    /// Waiting for an answer.
    Waiting,
    HostsFile,
    /// Container `at` of the init containers then the containers.
    Container {
        at: usize,
        stage: Stage,
    },
    AfterContainers,
    CollectDead,
    DeadSandboxes,
    Finished,
}

/// The container being started.
#[derive(Debug, Clone)]
struct Current {
    at: usize,
    step: ContainerPlan,
    /// The request, completed after a pull; shared by the steps (see `ContainerAction`).
    config: Option<Arc<ContainerConfig>>,
    id: String,
}

/// One sync of one pod; see the module documentation.
pub struct PodSync<'a> {
    pod: &'a Pod,
    requests: &'a RequestContext,
    now_unix_nanos: i64,
    phase: Phase,
    /// Steps decided and not yet handed out, each with what its answer is for.
    outbox: VecDeque<(Step, Option<Awaiting>)>,
    /// What the last step handed out waits for.
    awaiting: Option<Awaiting>,
    view: RuntimeView,
    facts: PlanningFacts,
    plan: Option<SyncPlan>,
    outcome: SyncOutcome,
    sandbox_id: String,
    new_sandbox: Option<SandboxStatus>,
    sandbox_ip: String,
    keyring: Keyring,
    /// A host-network pod's hosts file, until the node's is read.
    hosts: Option<HostsFile>,
    /// The result of each image pulled in this sync (one pull per image).
    pulls: BTreeMap<String, Result<(), Held>>,
    current: Option<Current>,
    started: Vec<String>,
    /// Dead containers asked to be removed, in order, and those that went.
    dead_asked: VecDeque<String>,
    dead_removed: BTreeSet<String>,
}

impl<'a> PodSync<'a> {
    pub fn new(pod: &'a Pod, requests: &'a RequestContext, now_unix_nanos: i64) -> Self {
        Self {
            pod,
            requests,
            now_unix_nanos,
            phase: Phase::Begin,
            outbox: VecDeque::new(),
            awaiting: None,
            view: RuntimeView::default(),
            facts: PlanningFacts::default(),
            plan: None,
            outcome: SyncOutcome::default(),
            sandbox_id: String::new(),
            new_sandbox: None,
            sandbox_ip: String::new(),
            keyring: Keyring::default(),
            hosts: None,
            pulls: BTreeMap::new(),
            current: None,
            started: Vec::new(),
            dead_asked: VecDeque::new(),
            dead_removed: BTreeSet::new(),
        }
    }

    /// The plan, once the machine has made it.
    pub fn plan(&self) -> Option<&SyncPlan> {
        self.plan.as_ref()
    }

    fn take_plan(&mut self) -> Option<SyncPlan> {
        self.plan.take()
    }

    fn outcome_so_far(&self) -> SyncOutcome {
        self.outcome.clone()
    }

    /// The next step. A `Need` or a `Do` is answered with [`PodSync::feed`] before the
    /// next call.
    pub fn step(&mut self) -> Step {
        loop {
            if let Some((step, awaiting)) = self.outbox.pop_front() {
                self.awaiting = awaiting;
                return step;
            }
            match self.phase {
                Phase::Finished => return Step::Done(Box::new(self.outcome.clone())),
                // Asked for an answer that did not come: nothing more can be decided.
                Phase::Waiting => {
                    self.outcome.failed = true;
                    self.outcome.retry(RETRY_AFTER_ERROR);
                    self.phase = Phase::Finished;
                }
                _ => self.advance(),
            }
        }
    }

    /// The answer to the step [`PodSync::step`] gave last.
    pub fn feed(&mut self, answer: Answer) {
        if let Some(awaiting) = self.awaiting.take() {
            self.take(awaiting, answer);
        }
    }

    fn ask(&mut self, need: Need, awaiting: Awaiting) {
        self.outbox.push_back((Step::Need(need), Some(awaiting)));
        self.phase = Phase::Waiting;
    }

    fn call(&mut self, effect: Effect, awaiting: Awaiting) {
        self.outbox.push_back((Step::Do(effect), Some(awaiting)));
        self.phase = Phase::Waiting;
    }

    fn tell(&mut self, effect: Effect) {
        self.outbox.push_back((Step::Do(effect), None));
    }

    fn event(&mut self, container: Option<&str>, event: NodeEvent) {
        self.tell(Effect::Event {
            container: container.map(str::to_owned),
            event,
        });
    }

    fn warn(&mut self, message: String) {
        self.tell(Effect::Warn(message));
    }

    /// Stops the sync as failed: the worker backs off and syncs again.
    fn fail(&mut self) {
        self.outcome.failed = true;
        self.outcome.retry(RETRY_AFTER_ERROR);
        self.phase = Phase::Finished;
    }

    fn advance(&mut self) {
        match self.phase {
            Phase::Begin => self.ask(Need::Runtime, Awaiting::Runtime),
            Phase::HostsFile => self.hosts_file(),
            Phase::Container { at, stage } => self.container(at, stage),
            Phase::AfterContainers => self.after_containers(),
            Phase::CollectDead => self.collect_dead(),
            Phase::DeadSandboxes => self.dead_sandboxes(),
            Phase::Waiting | Phase::Finished => {}
        }
    }

    fn take(&mut self, awaiting: Awaiting, answer: Answer) {
        match (awaiting, answer) {
            (Awaiting::Runtime, Answer::Runtime(Ok(view))) => {
                self.outcome.runtime = view.status.clone();
                self.view = view;
                let images = images_to_inspect(self.pod, &self.view.status, self.now_unix_nanos);
                self.ask(Need::Inputs { images }, Awaiting::Inputs);
            }
            (Awaiting::Runtime, Answer::Runtime(Err(error))) => {
                self.warn(format!(
                    "cannot read the pod's runtime status; retrying: {error}"
                ));
                self.fail();
            }
            (Awaiting::Inputs, Answer::Inputs(facts)) => {
                self.facts = *facts;
                self.plan_sync();
            }
            (
                Awaiting::Volumes,
                Answer::Volumes {
                    failed,
                    refresh_after,
                },
            ) => self.volumes_set_up(&failed, refresh_after),
            (Awaiting::Cgroup, Answer::Done) => self.cgroup_ready(),
            (Awaiting::Cgroup, Answer::Failed(error)) => {
                self.warn(format!(
                    "failed to create the pod's cgroup; retrying: {error}"
                ));
                self.fail();
            }
            (Awaiting::Sandbox, Answer::SandboxCreated(id)) => {
                self.sandbox_id.clone_from(&id);
                self.ask(Need::SandboxStatus { id }, Awaiting::SandboxStatus);
            }
            (Awaiting::Sandbox, Answer::Failed(error)) => {
                self.warn(format!("failed to create pod sandbox; retrying: {error}"));
                self.event(None, pod_events::failed_create_sandbox(&error));
                self.fail();
            }
            (Awaiting::SandboxStatus, Answer::SandboxStatus(status)) => {
                self.sandbox_created(status)
            }
            (Awaiting::NodeHosts, Answer::NodeHosts(node_hosts)) => {
                if let Some(file) = self.hosts.take() {
                    self.write_hosts_file(&file, &node_hosts);
                }
                self.containers_begin();
            }
            (Awaiting::RuntimeAfter, Answer::RuntimeAfter(status)) => {
                if let Some(status) = status {
                    self.outcome.runtime = status;
                }
                self.settle();
            }
            (Awaiting::DeadContainer, answer) => {
                if let Some(id) = self.dead_asked.pop_front() {
                    if matches!(answer, Answer::Done) {
                        self.dead_removed.insert(id);
                    }
                }
                if self.dead_asked.is_empty() {
                    self.phase = Phase::DeadSandboxes;
                }
            }
            (
                awaiting @ (Awaiting::Pull
                | Awaiting::PulledImage
                | Awaiting::MessageFile
                | Awaiting::SubPaths
                | Awaiting::Create
                | Awaiting::Start
                | Awaiting::PostStart),
                answer,
            ) => self.container_answer(awaiting, answer),
            (awaiting, answer) => {
                self.warn(format!(
                    "the pod sync asked for {awaiting:?} and was answered {answer:?}"
                ));
                self.fail();
            }
        }
    }

    fn plan_sync(&mut self) {
        let plan = plan_pod_sync(&SyncInputs {
            pod: self.pod,
            runtime: &self.view.status,
            images: &self.facts.images,
            image_backoff: &self.facts.image_backoff,
            now_unix_nanos: self.now_unix_nanos,
            requests: self.requests,
            cgroup_parent: &self.facts.cgroup_parent,
            pod_inputs: &self.facts.pod_inputs,
        });
        // Volumes are set up on every sync, so object updates reach running containers;
        // a pod stopped for good or refused gets none.
        let set_up = !(plan.kill_only || plan.rejected.is_some());
        let all = plan.create_sandbox.is_some();
        self.plan = Some(plan);
        if set_up {
            self.call(Effect::SetUpVolumes { all }, Awaiting::Volumes);
        } else {
            self.volumes_set_up(&[], None);
        }
    }

    fn volumes_set_up(&mut self, failed: &[String], refresh_after: Option<Duration>) {
        let Some(plan) = self.plan.clone() else {
            return self.fail();
        };
        if let Some(refresh) = refresh_after {
            self.outcome.retry(refresh);
        }
        // A running pod's volume that could not be refreshed keeps its last contents;
        // the failure is the pod's event, as upstream's reconciler reports it.
        for message in failed {
            self.event(None, pod_events::failed_mount(message));
        }
        if !failed.is_empty() && plan.create_sandbox.is_some() {
            // No sandbox until every volume is there (upstream's WaitForAttachAndMount).
            // A failed sync: the worker backs off (2 s doubling to 10 s) while it
            // repeats, rather than set up, fail and record every 2 s.
            let held = Held {
                waiting: Waiting::new("ContainerCreating", failed.join("; ")),
                retry_after: RETRY_AFTER_ERROR,
            };
            self.outcome.failed = true;
            let pod = self.pod;
            for (kind, c) in pod
                .spec
                .init_containers
                .iter()
                .map(|c| (ContainerKind::Init, c))
                .chain(
                    pod.spec
                        .containers
                        .iter()
                        .map(|c| (ContainerKind::Regular, c)),
                )
            {
                let step = ContainerPlan {
                    kind,
                    index: 0,
                    name: c.name.clone(),
                    image: c.image.clone(),
                    reason: String::new(),
                    action: ContainerAction::Held(held.clone()),
                };
                self.outcome.hold(&step, held.clone());
            }
            self.phase = Phase::Finished;
            return;
        }
        if let Some(unhonoured) = &plan.unhonoured {
            self.warn(format!(
                "fields not honoured in a running pod: {}",
                unhonoured.message
            ));
            self.event(
                None,
                pod_events::refused_or_evicted(&unhonoured.reason, &unhonoured.message),
            );
        }
        if plan.is_empty() {
            self.outcome.settled = self.outcome.runtime.all_live();
            self.phase = Phase::CollectDead;
            return;
        }
        if let Some(rejection) = &plan.rejected {
            self.warn(format!(
                "pod rejected: {}: {}",
                rejection.reason, rejection.message
            ));
            // As upstream's `rejectPod`: the event beside the Failed status.
            self.event(
                None,
                pod_events::refused_or_evicted(&rejection.reason, &rejection.message),
            );
            self.outcome.rejected = Some(rejection.clone());
        }
        let status = &self.view.status;
        let grace = teardown::grace_period(Some(self.pod), status, Stopping::Spec);
        let sandbox_ip = teardown::hooks_sandbox_ip(status).to_owned();
        if let Some(reason) = &plan.kill_pod {
            let stop = teardown::termination_plan(Some(self.pod), status, Stopping::Spec);
            self.tell(Effect::StopPod {
                reason: reason.clone(),
                plan: stop,
                sandbox_ip: sandbox_ip.clone(),
            });
        }
        for kill in &plan.kill_containers {
            self.tell(Effect::StopContainer {
                name: kill.name.clone(),
                id: kill.id.clone(),
                reason: kill.reason.clone(),
                grace_secs: grace,
                sandbox_ip: sandbox_ip.clone(),
            });
        }
        if plan.kill_only {
            self.phase = Phase::Finished;
            return;
        }
        self.call(Effect::EnsurePodCgroup, Awaiting::Cgroup);
    }

    fn cgroup_ready(&mut self) {
        let Some(plan) = self.plan.clone() else {
            return self.fail();
        };
        if plan.create_sandbox.is_some() && !self.view.status.sandboxes.is_empty() {
            self.event(None, pod_events::sandbox_changed());
        }
        self.sandbox_ip = self
            .view
            .status
            .sandboxes
            .iter()
            .find(|s| s.state == SandboxState::Ready)
            .map(|s| s.ip.clone())
            .unwrap_or_default();
        match plan.create_sandbox {
            // Upstream makes the config (the RuntimeClass's handler, the FQDN) as it
            // creates the sandbox: the same event and retry as a runtime's refusal.
            Some(SandboxCreation {
                config_error: Some(error),
                ..
            }) => {
                self.warn(format!("failed to create pod sandbox; retrying: {error}"));
                self.event(None, pod_events::failed_create_sandbox(&error.to_string()));
                self.fail();
            }
            Some(creation) => {
                for unhonoured in &creation.dns_warnings {
                    if let Some(event) = pod_events::dns_warning(self.pod, unhonoured) {
                        self.event(None, event);
                    }
                }
                self.call(
                    Effect::CreateSandbox {
                        creation,
                        config: Box::new(plan.sandbox),
                    },
                    Awaiting::Sandbox,
                );
            }
            None => {
                self.sandbox_id = plan.sandbox_id;
                self.phase = Phase::HostsFile;
            }
        }
    }

    /// The containers' configs were planned before the sandbox had an IP: they are
    /// planned again with it (`status.podIP` in the environment and the managed
    /// `/etc/hosts`), as upstream makes them from the new sandbox's status.
    fn sandbox_created(&mut self, status: Option<SandboxStatus>) {
        if let Some(status) = status {
            let ip = status.ip.clone();
            self.new_sandbox = Some(status);
            self.sandbox_ip.clone_from(&ip);
            if !ip.is_empty() && self.facts.pod_inputs.facts.pod_ip.is_empty() {
                let mut with_ip = self.facts.pod_inputs.clone();
                with_ip.facts.pod_ip = ip;
                let again = plan_pod_sync(&SyncInputs {
                    pod: self.pod,
                    runtime: &self.view.status,
                    images: &self.facts.images,
                    image_backoff: &self.facts.image_backoff,
                    now_unix_nanos: self.now_unix_nanos,
                    requests: self.requests,
                    cgroup_parent: &self.facts.cgroup_parent,
                    pod_inputs: &with_ip,
                });
                if let Some(plan) = self.plan.as_mut() {
                    plan.init_containers = again.init_containers;
                    plan.containers = again.containers;
                }
            }
        }
        self.phase = Phase::HostsFile;
    }

    fn starts(&self) -> bool {
        self.plan.as_ref().is_some_and(|plan| {
            plan.steps()
                .any(|step| matches!(step.action, ContainerAction::Start(_)))
        })
    }

    /// The pod's managed `/etc/hosts`, written before its containers are created with it
    /// (a host-network pod's once the node's is read).
    fn hosts_file(&mut self) {
        if !self.starts() {
            return self.containers_begin();
        }
        let hostname = self
            .plan
            .as_ref()
            .map(|p| p.sandbox.hostname.clone())
            .unwrap_or_default();
        let ip = hosts_ip(
            self.pod,
            &self.sandbox_ip,
            &self.facts.pod_inputs.facts.host_ip,
        );
        match HostsFile::of(self.requests, self.pod, ip, &hostname) {
            None => self.containers_begin(),
            Some(file @ HostsFile::FromNode { .. }) => {
                self.hosts = Some(file);
                self.ask(Need::NodeHosts, Awaiting::NodeHosts);
            }
            Some(file) => {
                self.write_hosts_file(&file, "");
                self.containers_begin();
            }
        }
    }

    fn write_hosts_file(&mut self, file: &HostsFile, node_hosts: &str) {
        self.tell(Effect::WriteHostsFile {
            path: etc_hosts_file(self.requests, &self.pod.metadata.uid),
            content: file.content(node_hosts),
        });
    }

    fn containers_begin(&mut self) {
        let (keyring, missing) = pod_keyring(self.pod, &self.facts.pod_inputs.objects);
        self.keyring = keyring;
        if self.starts() && !missing.is_empty() {
            self.warn(format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                missing.join(", ")
            ));
        }
        self.phase = Phase::Container {
            at: 0,
            stage: Stage::Begin,
        };
    }

    /// The container plan at `at` in start order.
    fn step_at(&self, at: usize) -> Option<ContainerPlan> {
        self.plan.as_ref()?.steps().nth(at).cloned()
    }

    fn spec_of(&self, step: &ContainerPlan) -> Option<&'a Container> {
        let pod: &'a Pod = self.pod;
        pod.spec.container(step.kind, step.index)
    }

    fn container(&mut self, at: usize, stage: Stage) {
        if stage == Stage::Begin {
            return self.container_begin(at);
        }
        let Some(current) = self.current.clone() else {
            return self.fail();
        };
        let name = current.step.name.clone();
        let Some(config) = current.config.clone() else {
            return self.fail();
        };
        let next = |stage| Phase::Container { at, stage };
        match stage {
            Stage::Begin => {}
            Stage::Inspect => self.ask(
                Need::PulledImage {
                    image: config.image.clone(),
                },
                Awaiting::PulledImage,
            ),
            Stage::MessageFile => {
                let mount = self.spec_of(&current.step).and_then(|spec| {
                    termination::message_mount(self.requests, self.pod, spec, config.attempt)
                });
                match mount {
                    Some(mount) => self.call(
                        Effect::CreateMessageFile {
                            container: name,
                            path: PathBuf::from(mount.host_path),
                        },
                        Awaiting::MessageFile,
                    ),
                    None => self.phase = next(Stage::SubPaths),
                }
            }
            Stage::SubPaths => {
                let sub_paths: Vec<SubPath> = config
                    .mounts
                    .iter()
                    .filter_map(|m| m.sub_path.clone())
                    .collect();
                if sub_paths.is_empty() {
                    self.phase = next(Stage::Create);
                } else {
                    self.call(
                        Effect::BindSubPaths {
                            container: name,
                            sub_paths,
                        },
                        Awaiting::SubPaths,
                    );
                }
            }
            Stage::Create => {
                let sandbox = self
                    .plan
                    .as_ref()
                    .map(|p| p.sandbox.clone())
                    .unwrap_or_default();
                self.call(
                    Effect::CreateContainer {
                        kind: current.step.kind,
                        index: current.step.index,
                        name,
                        image: current.step.image.clone(),
                        reason: current.step.reason.clone(),
                        sandbox_id: self.sandbox_id.clone(),
                        config: Box::new(Arc::unwrap_or_clone(config)),
                        sandbox: Box::new(sandbox),
                    },
                    Awaiting::Create,
                );
            }
            Stage::Start => self.call(
                Effect::StartContainer {
                    container: name,
                    id: current.id.clone(),
                },
                Awaiting::Start,
            ),
            Stage::PostStart => {
                let has_hook = self
                    .spec_of(&current.step)
                    .and_then(|spec| spec.lifecycle.as_ref())
                    .is_some_and(|l| l.post_start.is_some());
                if has_hook {
                    self.call(
                        Effect::PostStart {
                            kind: current.step.kind,
                            index: current.step.index,
                            id: current.id.clone(),
                            sandbox_id: self.sandbox_id.clone(),
                        },
                        Awaiting::PostStart,
                    );
                } else {
                    self.container_done(false);
                }
            }
        }
    }

    /// Held as planned, or the pull (once per image and sync), or the request as planned.
    fn container_begin(&mut self, at: usize) {
        let Some(step) = self.step_at(at) else {
            self.phase = Phase::AfterContainers;
            return;
        };
        let start = match &step.action {
            ContainerAction::Held(held) => {
                let held = held.clone();
                for event in pod_events::held_events(self.pod, &step.name, &step.image, &held) {
                    self.event(Some(&step.name), event);
                }
                self.current = Some(Current {
                    at,
                    step: step.clone(),
                    config: None,
                    id: String::new(),
                });
                self.outcome.hold(&step, held);
                return self.container_done(true);
            }
            ContainerAction::Start(start) => start.clone(),
        };
        for skipped in &start.skipped_env {
            self.event(None, pod_events::invalid_env_names(skipped));
        }
        self.current = Some(Current {
            at,
            step: step.clone(),
            config: Some(Arc::new(start.config.clone())),
            id: String::new(),
        });
        if !start.pull_image {
            // The spec's image, as upstream words it (the config may name the image id).
            self.event(Some(&step.name), pod_events::already_present(&step.image));
            self.phase = Phase::Container {
                at,
                stage: Stage::MessageFile,
            };
            return;
        }
        let image = start.config.image.clone();
        match self.pulls.get(&image).cloned() {
            Some(Ok(())) => {
                self.phase = Phase::Container {
                    at,
                    stage: Stage::Inspect,
                }
            }
            Some(Err(held)) => self.pull_failed(held),
            None => {
                self.event(Some(&step.name), pod_events::pulling(&image));
                let containers = self
                    .plan
                    .as_ref()
                    .map(|p| p.image_pulls())
                    .unwrap_or_default()
                    .into_iter()
                    .find(|(i, _)| *i == image)
                    .map(|(_, names)| names)
                    .unwrap_or_default();
                self.call(
                    Effect::PullImage {
                        container: step.name.clone(),
                        credentials: self.keyring.lookup(&image),
                        image,
                        containers,
                    },
                    Awaiting::Pull,
                );
            }
        }
    }

    fn pull_failed(&mut self, held: Held) {
        let Some(current) = self.current.clone() else {
            return self.fail();
        };
        self.event(
            Some(&current.step.name),
            pod_events::container_error(&held.waiting.reason),
        );
        self.hold_current(held);
    }

    fn hold_current(&mut self, held: Held) {
        let Some(current) = self.current.clone() else {
            return self.fail();
        };
        self.outcome.hold(&current.step, held);
        self.container_done(true);
    }

    /// Held for a failed call, to try again soon.
    fn hold_failed(&mut self, reason: &str, message: String, event: bool) {
        if event {
            let name = self.current.as_ref().map(|c| c.step.name.clone());
            self.event(name.as_deref(), pod_events::container_error(&message));
        }
        self.hold_current(Held {
            waiting: Waiting::new(reason, message),
            retry_after: RETRY_AFTER_ERROR,
        });
    }

    /// The next container; an init container held stops the sync (init containers run
    /// one at a time).
    fn container_done(&mut self, held: bool) {
        let Some(current) = self.current.take() else {
            return self.fail();
        };
        if held && current.step.kind == ContainerKind::Init {
            self.phase = Phase::Finished;
            return;
        }
        self.phase = Phase::Container {
            at: current.at + 1,
            stage: Stage::Begin,
        };
    }

    fn container_answer(&mut self, awaiting: Awaiting, answer: Answer) {
        let Some(current) = self.current.clone() else {
            return self.fail();
        };
        let at = current.at;
        let name = current.step.name.clone();
        let image = current
            .config
            .as_ref()
            .map(|c| c.image.clone())
            .unwrap_or_default();
        let next = |stage| Phase::Container { at, stage };
        match (awaiting, answer) {
            (Awaiting::Pull, Answer::Pulled { took }) => {
                // One pull at a time per sync: the pull is all of the wait.
                self.event(Some(&name), pod_events::pulled(&image, took, took));
                self.pulls.insert(image, Ok(()));
                self.phase = next(Stage::Inspect);
            }
            (Awaiting::Pull, Answer::PullFailed { error, retry_after }) => {
                self.event(Some(&name), pod_events::pull_failed(&image, &error));
                let held = Held {
                    waiting: Waiting::new(
                        "ErrImagePull",
                        format!("Failed to pull image {image:?}: {error}"),
                    ),
                    retry_after,
                };
                self.pulls.insert(image, Err(held.clone()));
                self.pull_failed(held);
            }
            (Awaiting::PulledImage, Answer::PulledImage(pulled)) => match pulled {
                PulledImage::Facts(facts) => {
                    let Some(config) = current.config.as_ref() else {
                        return self.fail();
                    };
                    match complete_after_pull(
                        self.pod,
                        current.step.kind,
                        current.step.index,
                        config,
                        &facts,
                    ) {
                        Ok(config) => {
                            if let Some(c) = self.current.as_mut() {
                                c.config = Some(Arc::new(config));
                            }
                            self.phase = next(Stage::MessageFile);
                        }
                        Err(held) => {
                            for event in
                                pod_events::held_events(self.pod, &name, &current.step.image, &held)
                            {
                                self.event(Some(&name), event);
                            }
                            self.hold_current(held);
                        }
                    }
                }
                PulledImage::NotKnown => self.phase = next(Stage::MessageFile),
                PulledImage::Missing => self.hold_failed(
                    "ErrImageInspect",
                    format!("Failed to inspect image {image:?}: not present after its pull"),
                    false,
                ),
                PulledImage::Failed(error) => self.hold_failed(
                    "ErrImageInspect",
                    format!("Failed to inspect image {image:?}: {error}"),
                    false,
                ),
            },
            (Awaiting::MessageFile, Answer::Done) => self.phase = next(Stage::SubPaths),
            (Awaiting::MessageFile, Answer::Failed(cause)) => {
                let path = current
                    .config
                    .as_ref()
                    .and_then(|config| {
                        let spec = self.spec_of(&current.step)?;
                        termination::message_mount(self.requests, self.pod, spec, config.attempt)
                    })
                    .map(|m| m.host_path)
                    .unwrap_or_default();
                self.hold_failed(
                    "CreateContainerError",
                    format!("cannot create {path}: {cause}"),
                    true,
                );
            }
            (Awaiting::SubPaths, Answer::Done) => self.phase = next(Stage::Create),
            (Awaiting::SubPaths, Answer::Failed(message)) => {
                self.event(Some(&name), pod_events::container_error(&message));
                self.hold_current(Held {
                    waiting: Waiting::new("CreateContainerConfigError", message),
                    retry_after: RETRY_AFTER_ERROR,
                });
            }
            (Awaiting::Create, Answer::ContainerCreated(id)) => {
                self.event(Some(&name), pod_events::created(&name));
                if let Some(c) = self.current.as_mut() {
                    c.id = id;
                }
                self.phase = next(Stage::Start);
            }
            (Awaiting::Create, Answer::Failed(message)) => {
                self.hold_failed("CreateContainerError", message, true)
            }
            (Awaiting::Start, Answer::Done) => {
                self.event(Some(&name), pod_events::started(&name));
                self.started.push(current.id.clone());
                self.phase = next(Stage::PostStart);
            }
            (Awaiting::Start, Answer::Failed(message)) => {
                self.hold_failed("RunContainerError", message, true)
            }
            (Awaiting::PostStart, Answer::Done) => self.container_done(false),
            // The hook's runner records `FailedPostStartHook` and kills the container.
            (Awaiting::PostStart, Answer::Failed(message)) => {
                self.hold_failed("PostStartHookError", message, false)
            }
            (awaiting, answer) => {
                self.warn(format!(
                    "the pod sync asked for {awaiting:?} and was answered {answer:?}"
                ));
                self.fail();
            }
        }
    }

    /// The status shows what this sync did (the sandbox and the containers it started),
    /// so `Running` reaches the API in this sync's write and not a relist later.
    fn after_containers(&mut self) {
        let Some(plan) = self.plan.as_ref() else {
            return self.fail();
        };
        if !(self.starts() || plan.create_sandbox.is_some()) {
            return self.settle();
        }
        let killed = plan.kill_pod.is_some() || !plan.kill_containers.is_empty();
        let sandbox_asked = plan.create_sandbox.is_some();
        // When the sync only added, the view from its start and the new instances are
        // the status; otherwise (or without the new sandbox's status) the pod is read.
        let created =
            (!killed && (self.new_sandbox.is_some() || !sandbox_asked)).then(|| Created {
                base: self.outcome.runtime.clone(),
                sandbox: self.new_sandbox.clone(),
                containers: self.started.clone(),
            });
        self.ask(Need::RuntimeAfter { created }, Awaiting::RuntimeAfter);
    }

    fn settle(&mut self) {
        let Some(plan) = self.plan.as_ref() else {
            return self.fail();
        };
        self.outcome.settled = !self.outcome.failed
            && plan.kill_pod.is_none()
            && plan.kill_containers.is_empty()
            && self.outcome.waiting.is_empty()
            && self.outcome.runtime.all_live();
        self.phase = Phase::CollectDead;
    }

    /// Upstream's container GC, per pod: exited instances beyond the newest per
    /// container, then sandboxes that are neither the newest nor hold a container.
    fn collect_dead(&mut self) {
        let status = &self.view.status;
        let dead: Vec<Effect> = dead_containers(status, DEAD_CONTAINERS_PER_CONTAINER)
            .into_iter()
            .map(|c| Effect::RemoveDeadContainer {
                name: c.name.clone(),
                id: c.id.clone(),
                attempt: c.attempt,
                log_dir: pod_log_dir_of(
                    &self.requests.pod_logs_dir,
                    &status.namespace,
                    &status.name,
                    &status.uid,
                )
                .join(&c.name),
            })
            .collect();
        if dead.is_empty() {
            self.phase = Phase::DeadSandboxes;
            return;
        }
        for effect in dead {
            if let Effect::RemoveDeadContainer { id, .. } = &effect {
                self.dead_asked.push_back(id.clone());
            }
            self.outbox
                .push_back((Step::Do(effect), Some(Awaiting::DeadContainer)));
        }
        self.phase = Phase::Waiting;
    }

    fn dead_sandboxes(&mut self) {
        let removed = &self.dead_removed;
        let in_use: BTreeSet<&str> = self
            .view
            .sandbox_of
            .iter()
            .filter(|(container, _)| !removed.contains(container.as_str()))
            .map(|(_, sandbox)| sandbox.as_str())
            .collect();
        let dead: Vec<String> = dead_sandboxes(&self.view.status, &in_use)
            .into_iter()
            .map(|s| s.id.clone())
            .collect();
        for id in dead {
            self.tell(Effect::RemoveDeadSandbox { id });
        }
        self.phase = Phase::Finished;
    }
}

#[cfg(test)]
mod tests;
