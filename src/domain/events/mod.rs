//! Events about pods, in upstream's reasons and words (`pkg/kubelet/events`, the image
//! manager and the kuberuntime call sites), and the objects they are about: the pod
//! (`kind: Pod`, `apiVersion: v1`) or one of its containers (`fieldPath:
//! spec.containers{name}`). The recorder correlates them as node events are
//! (`node_status::events::EventCorrelator`: a repeat patches a count, similar events are
//! combined, a spam filter per object).

pub mod simulate;

use std::collections::BTreeMap;

use crate::domain::kuberuntime::plan::Held;
use crate::domain::node_status::model::ObjectReference;
use crate::domain::node_status::status::{EventType, NodeEvent};
use crate::domain::pod::{format_pod, Pod};
use crate::domain::probe::ProbeEvent;
use crate::domain::units::duration::GoDuration;

/// Upstream's reasons (`pkg/kubelet/events/event.go`).
pub mod reason {
    pub const CREATED_CONTAINER: &str = "Created";
    pub const STARTED_CONTAINER: &str = "Started";
    pub const FAILED_TO_CREATE_CONTAINER: &str = "Failed";
    pub const FAILED_TO_START_CONTAINER: &str = "Failed";
    pub const KILLING_CONTAINER: &str = "Killing";
    pub const BACK_OFF_START_CONTAINER: &str = "BackOff";
    pub const PULLING_IMAGE: &str = "Pulling";
    pub const PULLED_IMAGE: &str = "Pulled";
    pub const FAILED_TO_PULL_IMAGE: &str = "Failed";
    pub const FAILED_TO_INSPECT_IMAGE: &str = "InspectFailed";
    pub const ERR_IMAGE_NEVER_PULL_POLICY: &str = "ErrImageNeverPull";
    pub const BACK_OFF_PULL_IMAGE: &str = "BackOff";
    pub const FAILED_CREATE_POD_SANDBOX: &str = "FailedCreatePodSandBox";
    pub const DNS_CONFIG_FORMING: &str = "DNSConfigForming";
    pub const MISSING_CLUSTER_DNS: &str = "MissingClusterDNS";
    pub const FAILED_MOUNT: &str = "FailedMount";
    pub const FILE_SYSTEM_RESIZE_SUCCESSFUL: &str = "FileSystemResizeSuccessful";
    pub const VOLUME_RESIZE_FAILED: &str = "VolumeResizeFailed";
    pub const FILE_SYSTEM_RESIZE_FAILED: &str = "FileSystemResizeFailed";
    pub const SANDBOX_CHANGED: &str = "SandboxChanged";
    pub const INVALID_ENVIRONMENT_VARIABLE_NAMES: &str = "InvalidEnvironmentVariableNames";
}

/// An event and the object it is about, as the pod loop hands it to the recorder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    pub object: ObjectReference,
    pub event: NodeEvent,
    /// The event object's annotations (upstream's `AnnotatedEventf`: an eviction's
    /// `offending_containers`, `offending_containers_usage`, `starved_resource`).
    pub annotations: BTreeMap<String, String>,
}

/// The reference upstream's `ref.GetReference` makes for a pod.
pub fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: "Pod".into(),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        api_version: "v1".into(),
        field_path: String::new(),
    }
}

/// Upstream's `GenerateContainerRef`: the pod with `spec.containers{name}` (or
/// `spec.initContainers{name}`, `spec.ephemeralContainers{name}`) as field path. A name
/// in no list (a container found in the runtime only) gets the pod's reference, as
/// upstream's fallback does.
pub fn container_reference(pod: &Pod, container: &str) -> ObjectReference {
    let mut object = pod_reference(pod);
    let spec = &pod.spec;
    if spec.containers.iter().any(|c| c.name == container) {
        object.field_path = format!("spec.containers{{{container}}}");
    } else if spec.init_containers.iter().any(|c| c.name == container) {
        object.field_path = format!("spec.initContainers{{{container}}}");
    } else if spec
        .ephemeral_containers
        .iter()
        .any(|e| e.container.name == container)
    {
        object.field_path = format!("spec.ephemeralContainers{{{container}}}");
    }
    object
}

fn normal(reason: &str, message: String) -> NodeEvent {
    NodeEvent {
        type_: EventType::Normal,
        reason: reason.into(),
        message,
    }
}

fn warning(reason: &str, message: String) -> NodeEvent {
    NodeEvent {
        type_: EventType::Warning,
        reason: reason.into(),
        message,
    }
}

/// What a pod event on the simulated runtime (`fake://`) adds to its message: nothing of
/// what it reports (a pull, a start) happened on the machine.
pub const SIMULATED_NOTE: &str = " (simulated runtime: nothing ran)";

/// The event as a node on the simulated runtime records it: its message says so.
pub fn on_simulated_runtime(mut event: NodeEvent) -> NodeEvent {
    if !event.message.ends_with(SIMULATED_NOTE) {
        event.message.push_str(SIMULATED_NOTE);
    }
    event
}

pub fn pulling(image: &str) -> NodeEvent {
    normal(reason::PULLING_IMAGE, format!("Pulling image {image:?}"))
}

/// After a pull: how long the pull took, and how long including the wait for it.
pub fn pulled(image: &str, pull: GoDuration, total: GoDuration) -> NodeEvent {
    normal(
        reason::PULLED_IMAGE,
        format!("Successfully pulled image {image:?} in {pull} ({total} including waiting)"),
    )
}

pub fn already_present(image: &str) -> NodeEvent {
    normal(
        reason::PULLED_IMAGE,
        format!("Container image {image:?} already present on machine"),
    )
}

pub fn pull_failed(image: &str, error: &str) -> NodeEvent {
    warning(
        reason::FAILED_TO_PULL_IMAGE,
        format!("Failed to pull image {image:?}: {error}"),
    )
}

/// `Failed` with `Error: <what>` (a container not created or started; `what` is the
/// status's reason, e.g. `ErrImagePull`, or the runtime's message).
pub fn container_error(what: &str) -> NodeEvent {
    warning(reason::FAILED_TO_CREATE_CONTAINER, format!("Error: {what}"))
}

pub fn created(container: &str) -> NodeEvent {
    normal(
        reason::CREATED_CONTAINER,
        format!("Created container {container}"),
    )
}

pub fn started(container: &str) -> NodeEvent {
    normal(
        reason::STARTED_CONTAINER,
        format!("Started container {container}"),
    )
}

pub fn sandbox_changed() -> NodeEvent {
    normal(
        reason::SANDBOX_CHANGED,
        "Pod sandbox changed, it will be killed and re-created.".into(),
    )
}

pub fn failed_create_sandbox(error: &str) -> NodeEvent {
    warning(
        reason::FAILED_CREATE_POD_SANDBOX,
        format!("Failed to create pod sandbox: {error}"),
    )
}

/// What the pod's DNS configuration could not honour, as upstream's DNS configurer
/// records it on the pod; `None` for what validation already refuses (a bad policy).
pub fn dns_warning(
    pod: &Pod,
    unhonoured: &crate::domain::kuberuntime::dns::DnsWarning,
) -> Option<NodeEvent> {
    use crate::domain::kuberuntime::dns::DnsWarning;
    match unhonoured {
        DnsWarning::InvalidPolicy(_) => None,
        DnsWarning::MissingClusterDns => Some(warning(
            reason::MISSING_CLUSTER_DNS,
            format!(
                "pod: {:?}. {unhonoured}",
                crate::domain::pod::format_pod(pod)
            ),
        )),
        DnsWarning::NameserversTruncated(_) | DnsWarning::SearchesTruncated(_) => {
            Some(warning(reason::DNS_CONFIG_FORMING, unhonoured.to_string()))
        }
    }
}

/// A volume that could not be set up (`message`: upstream's `MountVolume.SetUp failed
/// for volume ...`).
pub fn failed_mount(message: &str) -> NodeEvent {
    warning(reason::FAILED_MOUNT, message.to_owned())
}

/// A claim's volume grown by its driver on the node (upstream's `legacyCallNodeExpandOnPlugin`).
pub fn volume_resized(volume: &str, node_name: &str) -> NodeEvent {
    normal(
        reason::FILE_SYSTEM_RESIZE_SUCCESSFUL,
        format!("MountVolume.NodeExpandVolume succeeded for volume {volume:?} {node_name}"),
    )
}

/// A claim's volume that could not be grown (`message`: why, after upstream's prefix).
pub fn volume_resize_failed(volume: &str, message: &str) -> NodeEvent {
    warning(
        reason::VOLUME_RESIZE_FAILED,
        format!("NodeExpandVolume.NodeExpandVolume failed for volume {volume:?} : {message}"),
    )
}

/// A grown claim's volume the pod mounts read-only, so not grown: upstream's warning at
/// the mount, on the pod and on the claim.
pub fn volume_resize_refused_read_only(volume: &str) -> NodeEvent {
    warning(
        reason::FILE_SYSTEM_RESIZE_FAILED,
        format!(
            "MountVolume.NodeExpandVolume failed for volume {volume:?} requested read-only file system"
        ),
    )
}

/// `envFrom` keys left out of a container's environment as invalid names (upstream
/// records it on the pod at each container start).
pub fn invalid_env_names(skipped: &crate::domain::volumes::env::SkippedKeys) -> NodeEvent {
    warning(
        reason::INVALID_ENVIRONMENT_VARIABLE_NAMES,
        skipped.message(),
    )
}

/// A pod refused by admission or evicted: upstream's `rejectPod` and `evictPod` record a
/// Warning with the status's reason and the message without "Pod was rejected: ".
pub fn refused_or_evicted(reason: &str, message: &str) -> NodeEvent {
    warning(reason, message.to_owned())
}

/// A pod past its `activeDeadlineSeconds` (upstream's `activeDeadlineHandler`: Normal).
pub fn deadline_exceeded() -> NodeEvent {
    use crate::domain::pod::active_deadline::{
        DEADLINE_EXCEEDED_MESSAGE, DEADLINE_EXCEEDED_REASON,
    };
    normal(
        DEADLINE_EXCEEDED_REASON,
        DEADLINE_EXCEEDED_MESSAGE.to_owned(),
    )
}

/// A probe's or hook's event (`Unhealthy`, `ProbeWarning`, `Killing`, `Failed…Hook`).
pub fn from_probe(event: &ProbeEvent) -> NodeEvent {
    NodeEvent {
        type_: if event.event_type == "Warning" {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: event.reason.into(),
        message: event.message.clone(),
    }
}

/// The events upstream records for a container the sync holds back (its
/// `EnsureImageExists` and `doBackOff`), by the held status's reason; none for the others
/// (they are recorded where they happen).
pub fn held_events(pod: &Pod, container: &str, image: &str, held: &Held) -> Vec<NodeEvent> {
    match held.waiting.reason.as_str() {
        "CrashLoopBackOff" => vec![warning(
            reason::BACK_OFF_START_CONTAINER,
            format!(
                "Back-off restarting failed container {container} in pod {}",
                format_pod(pod)
            ),
        )],
        "ImagePullBackOff" => vec![
            normal(
                reason::BACK_OFF_PULL_IMAGE,
                format!("Back-off pulling image {image:?}"),
            ),
            container_error("ImagePullBackOff"),
        ],
        "ErrImageNeverPull" => vec![
            warning(
                reason::ERR_IMAGE_NEVER_PULL_POLICY,
                held.waiting.message.clone(),
            ),
            container_error("ErrImageNeverPull"),
        ],
        // upstream's startContainer when generateContainerConfig fails.
        "CreateContainerConfigError" => vec![container_error(&held.waiting.message)],
        "InvalidImageName" => vec![
            warning(
                reason::FAILED_TO_INSPECT_IMAGE,
                held.waiting.message.clone(),
            ),
            container_error("InvalidImageName"),
        ],
        "ErrImageInspect" => vec![
            warning(
                reason::FAILED_TO_INSPECT_IMAGE,
                held.waiting.message.clone(),
            ),
            container_error("ImageInspectError"),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
