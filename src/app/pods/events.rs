//! The pod loop's events: each is logged (standalone upstream records to the log only)
//! and, once the node agent runs, handed to its recorder, which correlates and writes it.

use std::collections::BTreeMap;

use std::sync::{Arc, OnceLock};

use tracing::{info, warn};

use crate::app::node::recorder::EventRecorder;
use crate::domain::events::{container_reference, on_simulated_runtime, pod_reference, PodEvent};
use crate::domain::node_status::status::{EventType, NodeEvent};
use crate::domain::pod::{log_ref, Pod};

/// Shared by the pod loop's tasks; connected to the recorder when the node agent starts.
#[derive(Debug, Clone, Default)]
pub struct PodEventSink {
    recorder: Arc<OnceLock<EventRecorder>>,
    /// The node runs the simulated runtime: every event's message says so.
    simulated: bool,
}

impl PodEventSink {
    pub fn new() -> Self {
        Self::default()
    }

    /// The sink of a node whose runtime is simulated (`fake://`) or not: on the simulated
    /// runtime, events say that nothing ran.
    pub fn for_runtime(simulated: bool) -> Self {
        PodEventSink {
            simulated,
            ..Self::default()
        }
    }

    /// From now on events also go to `recorder` (the first connection stays).
    pub fn connect(&self, recorder: EventRecorder) {
        let _ = self.recorder.set(recorder);
    }

    /// An event about one of `pod`'s containers.
    pub fn container(&self, pod: &Pod, container: &str, event: NodeEvent) {
        self.record(
            pod,
            Some(container),
            container_reference(pod, container),
            event,
            BTreeMap::new(),
        );
    }

    /// An event about `pod` itself.
    pub fn pod(&self, pod: &Pod, event: NodeEvent) {
        self.record(pod, None, pod_reference(pod), event, BTreeMap::new());
    }

    /// An event about another object on `pod`'s behalf (its claim), logged with the pod.
    pub fn about(
        &self,
        pod: &Pod,
        object: crate::domain::node_status::model::ObjectReference,
        event: NodeEvent,
    ) {
        self.record(pod, None, object, event, BTreeMap::new());
    }

    /// An event about `pod` with annotations on the event object.
    pub fn pod_annotated(
        &self,
        pod: &Pod,
        event: NodeEvent,
        annotations: BTreeMap<String, String>,
    ) {
        self.record(pod, None, pod_reference(pod), event, annotations);
    }

    fn record(
        &self,
        pod: &Pod,
        container: Option<&str>,
        object: crate::domain::node_status::model::ObjectReference,
        event: NodeEvent,
        annotations: BTreeMap<String, String>,
    ) {
        let event = if self.simulated {
            on_simulated_runtime(event)
        } else {
            event
        };
        let pod_name = log_ref(pod);
        let container = container.unwrap_or_default();
        // One event, one log line: a probe's output may hold newlines.
        let message = event.message.replace('\n', "\\n");
        let reason = event.reason.as_str();
        match event.type_ {
            EventType::Warning => warn!(pod = %pod_name, container, event = reason, "{message}"),
            EventType::Normal => info!(pod = %pod_name, container, event = reason, "{message}"),
        }
        if let Some(recorder) = self.recorder.get() {
            recorder.record_pod(PodEvent {
                object,
                event,
                annotations,
            });
        }
    }
}
