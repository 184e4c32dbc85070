//! What the sync machine asks and is answered: the facts it needs, the effects it asks
//! for, the answers, and the outcome.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::domain::kuberuntime::actions::KillReason;
use crate::domain::kuberuntime::credentials::AuthConfig;
use crate::domain::kuberuntime::plan::{
    ContainerPlan, Held, ImageFacts, ImagePresence, SandboxCreation,
};
use crate::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};
use crate::domain::kuberuntime::runtime::{PodRuntimeStatus, SandboxStatus};
use crate::domain::kuberuntime::teardown::TerminationPlan;
use crate::domain::node_status::status::NodeEvent;
use crate::domain::pod::ContainerKind;
use crate::domain::securitycontext::Rejection;
use crate::domain::status::Waiting;
use crate::domain::units::duration::GoDuration;
use crate::domain::volumes::subpath::SubPath;
use crate::domain::volumes::PodInputs;

/// What the runtime holds for the pod, as a sync reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeView {
    /// The exited instances' messages already filled in (termination message files).
    pub status: PodRuntimeStatus,
    /// Container id to sandbox id.
    pub sandbox_of: BTreeMap<String, String>,
}

/// What the plan is made from besides the runtime's view.
#[derive(Debug, Clone, Default)]
pub struct PlanningFacts {
    /// The presence of the images [`Need::Inputs`] named.
    pub images: BTreeMap<String, ImagePresence>,
    /// Images whose pull for this pod is in back-off, with the wait left.
    pub image_backoff: BTreeMap<String, Duration>,
    /// The pod's cgroup in the driver's spelling; empty: the runtime's default.
    pub cgroup_parent: String,
    /// The API objects, facts and service links the environment is made from.
    pub pod_inputs: PodInputs,
}

/// What a sync created, so that its status is read without listing the pod again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// The runtime's view from the sync's start, which the new instances join.
    pub base: PodRuntimeStatus,
    /// The new sandbox's status, as read after its creation.
    pub sandbox: Option<SandboxStatus>,
    /// The ids of the containers started.
    pub containers: Vec<String>,
}

/// A fact the sync needs before it can go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// [`Answer::Runtime`].
    Runtime,
    /// [`Answer::Inputs`], with the presence of these images.
    Inputs { images: Vec<String> },
    /// [`Answer::SandboxStatus`] of the sandbox just created (its IP).
    SandboxStatus { id: String },
    /// [`Answer::NodeHosts`]: the node's `/etc/hosts`, for a host-network pod's.
    NodeHosts,
    /// [`Answer::PulledImage`]: what the image service says of an image just pulled.
    PulledImage { image: String },
    /// [`Answer::RuntimeAfter`]: the pod's runtime status after what the sync did. With
    /// `created`, the sync only added, and the view from its start plus the new
    /// instances' statuses is it; otherwise the pod is read again.
    RuntimeAfter { created: Option<Created> },
}

/// An effect the sync asks for; each is answered ([`Answer::Done`] when it has no result).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Set up the pod's volumes from their objects: every one when the sandbox is new,
    /// else the refreshable ones. [`Answer::Volumes`].
    SetUpVolumes { all: bool },
    /// Record an event on the pod, or on one of its containers.
    Event {
        container: Option<String>,
        event: NodeEvent,
    },
    /// A warning to log.
    Warn(String),
    /// Stop the pod (its containers group by group with their `preStop` hooks, then its
    /// sandboxes).
    StopPod {
        reason: KillReason,
        plan: TerminationPlan,
        /// The ready sandbox's IP, for the `preStop` hooks.
        sandbox_ip: String,
    },
    /// Stop one container (its `preStop` hook first) with `grace_secs`.
    StopContainer {
        name: String,
        id: String,
        reason: KillReason,
        grace_secs: i64,
        /// The ready sandbox's IP, for the `preStop` hook.
        sandbox_ip: String,
    },
    /// The pod's cgroup, before its sandbox (upstream's `EnsureExists`). Answered
    /// [`Answer::Done`] or [`Answer::Failed`].
    EnsurePodCgroup,
    /// Create the sandbox (its folders and emptyDirs first). [`Answer::SandboxCreated`]
    /// or [`Answer::Failed`].
    CreateSandbox {
        creation: SandboxCreation,
        config: Box<SandboxConfig>,
    },
    /// Write the pod's `/etc/hosts` (a failure shows as the containers' creation error).
    WriteHostsFile { path: PathBuf, content: String },
    /// Pull `image` with each credential in turn (anonymously without any), for
    /// `containers`. [`Answer::Pulled`] or [`Answer::PullFailed`].
    PullImage {
        container: String,
        image: String,
        credentials: Vec<AuthConfig>,
        containers: Vec<String>,
    },
    /// The instance's termination-message file, writable by any user.
    /// [`Answer::Done`] or [`Answer::Failed`] with the I/O error.
    CreateMessageFile { container: String, path: PathBuf },
    /// Open each subpath under its volume and bind it. [`Answer::Done`] or
    /// [`Answer::Failed`] with the message the container is held with.
    BindSubPaths {
        container: String,
        sub_paths: Vec<SubPath>,
    },
    /// [`Answer::ContainerCreated`] or [`Answer::Failed`].
    CreateContainer {
        kind: ContainerKind,
        index: usize,
        name: String,
        /// The spec's image (the config may name the image's id).
        image: String,
        /// Why it starts.
        reason: String,
        sandbox_id: String,
        config: Box<ContainerConfig>,
        sandbox: Box<SandboxConfig>,
    },
    /// [`Answer::Done`] or [`Answer::Failed`].
    StartContainer { container: String, id: String },
    /// Run the container's `postStart` hook; a failure kills the container.
    /// [`Answer::Done`] or [`Answer::Failed`] with upstream's message.
    PostStart {
        kind: ContainerKind,
        index: usize,
        id: String,
        sandbox_id: String,
    },
    /// Remove an exited instance beyond those kept, and its log files.
    /// [`Answer::Done`] or [`Answer::Failed`].
    RemoveDeadContainer {
        name: String,
        id: String,
        attempt: u32,
        log_dir: PathBuf,
    },
    /// Remove a sandbox neither the newest nor holding a container.
    RemoveDeadSandbox { id: String },
}

/// What a pulled image turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PulledImage {
    Facts(ImageFacts),
    /// Not present after its pull.
    Missing,
    /// The status call failed.
    Failed(String),
    /// Not known (a dry run): the container's config stays as planned.
    NotKnown,
}

/// The answer to a [`Need`] or an [`Effect`].
#[derive(Debug, Clone)]
pub enum Answer {
    Runtime(Result<RuntimeView, String>),
    Inputs(Box<PlanningFacts>),
    Volumes {
        /// The message of each volume that could not be set up.
        failed: Vec<String>,
        /// When a projected token is next refreshed.
        refresh_after: Option<Duration>,
    },
    SandboxStatus(Option<SandboxStatus>),
    NodeHosts(String),
    PulledImage(PulledImage),
    RuntimeAfter(Option<PodRuntimeStatus>),
    /// The effect was carried out.
    Done,
    /// The effect failed: the error with its causes.
    Failed(String),
    SandboxCreated(String),
    Pulled {
        took: GoDuration,
    },
    PullFailed {
        error: String,
        /// When to look again (the pull back-off's delay, at most the error retry).
        retry_after: Duration,
    },
    ContainerCreated(String),
}

/// A container the sync did not start, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerHold {
    pub kind: ContainerKind,
    pub name: String,
    pub image: String,
    pub held: Held,
}

/// What one sync found and decided, for the status manager and the worker.
#[derive(Debug, Clone, Default)]
pub struct SyncOutcome {
    /// The runtime's view: at the end of a sync that created a sandbox or started a
    /// container, at its start otherwise.
    pub runtime: PodRuntimeStatus,
    /// Containers held back, with why.
    pub waiting: BTreeMap<String, Waiting>,
    /// The same, in the order the sync met them, with when to look again.
    pub holds: Vec<ContainerHold>,
    /// Sync again after this long (a back-off ends, a retry is due).
    pub retry_after: Option<Duration>,
    /// The node refuses to run the pod.
    pub rejected: Option<Rejection>,
    /// The sync stopped on a failed runtime call, cgroup or folder; the worker backs off
    /// (`BackoffPolicy::SYNC_ERROR`) while this repeats.
    pub failed: bool,
    /// The sync left nothing for a next sync on the same runtime state: it only added (or
    /// had nothing to do), did not fail, and everything is live. After one that killed or
    /// replaced a sandbox, the next sync removes what is left dead (an old sandbox), so a
    /// relist must wake it.
    pub settled: bool,
}

impl SyncOutcome {
    pub(super) fn retry(&mut self, after: Duration) {
        self.retry_after = Some(self.retry_after.map_or(after, |d| d.min(after)));
    }

    pub(super) fn hold(&mut self, step: &ContainerPlan, held: Held) {
        self.failed |= held.is_error();
        self.waiting.insert(step.name.clone(), held.waiting.clone());
        self.retry(held.retry_after);
        self.holds.push(ContainerHold {
            kind: step.kind,
            name: step.name.clone(),
            image: step.image.clone(),
            held,
        });
    }
}

/// A step of the sync.
#[derive(Debug, Clone)]
pub enum Step {
    Need(Need),
    Do(Effect),
    Done(Box<SyncOutcome>),
}
