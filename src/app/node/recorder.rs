//! The event recorder: node and pod events go through a bounded queue to one task that correlates
//! them (deduplication, aggregation, spam filter) and writes them, retrying a failed write
//! up to upstream's twelve tries ten seconds apart.

use std::collections::BTreeMap;

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::failures::FailureLog;
use crate::domain::events::PodEvent;
use crate::domain::node_status::events::{
    make_event, node_reference, EventAction, EventCorrelator, MAX_TRIES_PER_EVENT, RETRY_WAIT,
};
use crate::domain::node_status::model::{EventSource, ObjectReference};
use crate::domain::node_status::status::NodeEvent;
use crate::ports::api::{ApiClients, EventsError};
use crate::ports::clock::Clock;

/// Upstream's `maxQueuedEvents`.
const QUEUE: usize = 1000;

/// An event and what it is about (`None`: the node).
#[derive(Debug, Clone)]
pub struct Recorded {
    object: Option<ObjectReference>,
    event: NodeEvent,
    annotations: BTreeMap<String, String>,
}

/// Where the node's loops and the pod loop send their events.
#[derive(Debug, Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Recorded>,
}

impl EventRecorder {
    /// A recorder and the receiving end for [`run_recorder`].
    pub fn new() -> (EventRecorder, mpsc::Receiver<Recorded>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (EventRecorder { tx }, rx)
    }

    /// An event about the node.
    pub fn record(&self, event: NodeEvent) {
        debug!(reason = %event.reason, message = %event.message, "Event recorded");
        self.send(Recorded {
            object: None,
            event,
            annotations: BTreeMap::new(),
        });
    }

    /// An event about a pod or one of its containers.
    pub fn record_pod(&self, event: PodEvent) {
        self.send(Recorded {
            object: Some(event.object),
            event: event.event,
            annotations: event.annotations,
        });
    }

    fn send(&self, recorded: Recorded) {
        if self.tx.try_send(recorded).is_err() {
            warn!("event queue full or closed; event dropped");
        }
    }
}

fn transient(error: &EventsError) -> bool {
    match error {
        EventsError::Call { source, .. } => source.is_transient(),
        EventsError::NotFound { .. } => false,
    }
}

/// Write events as they come until every recorder is dropped.
pub async fn run_recorder(
    mut rx: mpsc::Receiver<Recorded>,
    clients: watch::Receiver<ApiClients>,
    clock: Arc<dyn Clock>,
    node_name: String,
) {
    let origin = Instant::now();
    let mut correlator = EventCorrelator::default();
    let source = EventSource {
        component: "kubelet".into(),
        host: node_name.clone(),
    };
    let node = node_reference(&node_name);
    let mut failures = FailureLog::new("writing an event");
    // Event names carry the time in nanoseconds: never the same twice, even from a clock
    // that did not move.
    let mut last_nanos = i64::MIN;
    while let Some(Recorded {
        object,
        event: node_event,
        annotations,
    }) = rx.recv().await
    {
        let nanos = clock.now_unix_nanos().max(last_nanos.saturating_add(1));
        last_nanos = nanos;
        let mut event = make_event(
            object.as_ref().unwrap_or(&node),
            &source,
            &node_event,
            nanos,
        );
        event.metadata.annotations = annotations;
        let action = correlator.correlate(event, nanos, origin.elapsed());
        for attempt in 1..=MAX_TRIES_PER_EVENT {
            let api = clients.borrow().events.clone();
            let result = match &action {
                EventAction::Skip => Ok(()),
                EventAction::Create(e) => api.create_event(e).await.map(|_| ()),
                EventAction::Patch { event, patch } => {
                    match api
                        .patch_event(&event.metadata.namespace, &event.metadata.name, patch)
                        .await
                    {
                        // The first one is gone (expired): create it anew.
                        Err(EventsError::NotFound { .. }) => {
                            api.create_event(event).await.map(|_| ())
                        }
                        other => other.map(|_| ()),
                    }
                }
            };
            match result {
                Ok(()) => {
                    failures.succeeded();
                    break;
                }
                Err(e) => {
                    failures.failed(&e);
                    if !transient(&e) || attempt == MAX_TRIES_PER_EVENT {
                        warn!(reason = %node_event.reason, error = %e, "Unable to write event; dropped");
                        break;
                    }
                    tokio::time::sleep(RETRY_WAIT).await;
                }
            }
        }
    }
}
