//! Events about the node as upstream's event recorder (client-go `tools/record`) writes
//! them: named `<node>.<hex nanos>` in `default`, about `Node <node>` (whose uid the kubelet
//! sets to the node name), from `kubelet` on the node; a repeated event increments the
//! count of the first by a patch; similar events (same reason, other messages) beyond ten in
//! ten minutes are combined; and at most 25 events per object, then one per five minutes,
//! are written at all.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde_json::{json, Value};

use super::model::{Event, EventSource, ObjectMeta, ObjectReference, Time};
use super::status::NodeEvent;
use crate::domain::token_bucket::TokenBucket;

/// Upstream's `defaultSpamBurst` and `defaultSpamQPS`.
pub const SPAM_BURST: u32 = 25;
pub const SPAM_QPS: f64 = 1.0 / 300.0;
/// Upstream's `defaultAggregateMaxEvents` and `defaultAggregateIntervalInSeconds`.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
pub const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// Upstream's LRU size; here a cache that reaches it starts over.
const CACHE_ENTRIES: usize = 4096;
/// Upstream's `maxTriesPerEvent` and the wait between tries.
pub const MAX_TRIES_PER_EVENT: u32 = 12;
pub const RETRY_WAIT: Duration = Duration::from_secs(10);

/// The reference upstream's kubelet uses for its Node in events.
pub fn node_reference(node_name: &str) -> ObjectReference {
    ObjectReference {
        kind: "Node".into(),
        namespace: String::new(),
        name: node_name.into(),
        uid: node_name.into(),
        api_version: String::new(),
        field_path: String::new(),
    }
}

/// The event the recorder makes for `event` about `object` at `now` (upstream's
/// `makeEvent` plus its source).
pub fn make_event(
    object: &ObjectReference,
    source: &EventSource,
    event: &NodeEvent,
    now_unix_nanos: i64,
) -> Event {
    let namespace = if object.namespace.is_empty() {
        "default".to_string()
    } else {
        object.namespace.clone()
    };
    let t = Time::from_unix_nanos(now_unix_nanos);
    Event {
        metadata: ObjectMeta {
            name: format!("{}.{:x}", object.name, now_unix_nanos),
            namespace,
            ..ObjectMeta::default()
        },
        involved_object: object.clone(),
        reason: event.reason.clone(),
        message: event.message.clone(),
        source: source.clone(),
        first_timestamp: Some(t),
        last_timestamp: Some(t),
        count: 1,
        type_: event.type_.as_str().to_string(),
    }
}

/// What the recorder does with an event.
#[derive(Debug, Clone, PartialEq)]
pub enum EventAction {
    /// Create it.
    Create(Event),
    /// A repeat: patch the existing event (`count`, `lastTimestamp`, `message`); create
    /// `event` instead if that one is gone.
    Patch { event: Event, patch: Value },
    /// Dropped by the spam filter.
    Skip,
}

#[derive(Debug, Clone)]
struct Observation {
    count: i32,
    first_timestamp: Option<Time>,
    name: String,
}

#[derive(Debug, Clone)]
struct AggregateRecord {
    messages: BTreeSet<String>,
    last: Duration,
}

/// Upstream's `EventCorrelator`: aggregation, deduplication and the spam filter.
#[derive(Debug, Default)]
pub struct EventCorrelator {
    aggregates: HashMap<String, AggregateRecord>,
    observed: HashMap<String, Observation>,
    spam: HashMap<String, TokenBucket>,
}

fn object_key(e: &Event) -> String {
    let o = &e.involved_object;
    [
        e.source.component.as_str(),
        &e.source.host,
        &o.kind,
        &o.namespace,
        &o.name,
        &o.uid,
        &o.api_version,
    ]
    .join("\u{0}")
}

fn bounded<V>(map: &mut HashMap<String, V>) {
    if map.len() >= CACHE_ENTRIES {
        map.clear();
    }
}

impl EventCorrelator {
    /// What to do with `event`, made at wall time `now_unix_nanos` and monotonic `now`.
    pub fn correlate(&mut self, event: Event, now_unix_nanos: i64, now: Duration) -> EventAction {
        let object = object_key(&event);
        let aggregate_key = [object.as_str(), &event.type_, &event.reason].join("\u{0}");
        // Upstream's event key also names the part of the object (`getEventKey`).
        let event_key = [
            aggregate_key.as_str(),
            &event.involved_object.field_path,
            &event.message,
        ]
        .join("\u{0}");

        // Aggregation: past the limit of distinct messages, one combined event.
        bounded(&mut self.aggregates);
        let record = self
            .aggregates
            .entry(aggregate_key.clone())
            .or_insert_with(|| AggregateRecord {
                messages: BTreeSet::new(),
                last: now,
            });
        if now.saturating_sub(record.last) > AGGREGATE_INTERVAL {
            record.messages.clear();
        }
        record.messages.insert(event.message.clone());
        record.last = now;
        let (mut event, key) = if record.messages.len() < AGGREGATE_MAX_EVENTS {
            (event, event_key)
        } else {
            let t = Time::from_unix_nanos(now_unix_nanos);
            let combined = Event {
                metadata: ObjectMeta {
                    name: format!("{}.{:x}", event.involved_object.name, now_unix_nanos),
                    namespace: event.metadata.namespace.clone(),
                    ..ObjectMeta::default()
                },
                message: format!("(combined from similar events): {}", event.message),
                first_timestamp: Some(t),
                last_timestamp: Some(t),
                count: 1,
                ..event
            };
            (combined, aggregate_key)
        };

        // Deduplication: a repeat patches the first event's count.
        bounded(&mut self.observed);
        let repeat = self.observed.get(&key).cloned();
        let patch = repeat.map(|seen| {
            event.metadata.name = seen.name;
            event.first_timestamp = seen.first_timestamp;
            event.count = seen.count.saturating_add(1);
            json!({
                "count": event.count,
                "lastTimestamp": event.last_timestamp,
                "message": event.message,
            })
        });
        self.observed.insert(
            key,
            Observation {
                count: event.count,
                first_timestamp: event.first_timestamp,
                name: event.metadata.name.clone(),
            },
        );

        // The spam filter, per object.
        bounded(&mut self.spam);
        let bucket = self
            .spam
            .entry(object)
            .or_insert_with(|| TokenBucket::new(SPAM_QPS, SPAM_BURST, now));
        if !bucket.try_take(now) {
            return EventAction::Skip;
        }
        match patch {
            Some(patch) => EventAction::Patch { event, patch },
            None => EventAction::Create(event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::node_status::status::EventType;

    fn source() -> EventSource {
        EventSource {
            component: "kubelet".into(),
            host: "n1".into(),
        }
    }

    fn node_event(reason: &str, message: &str) -> NodeEvent {
        NodeEvent {
            type_: EventType::Normal,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// The Starting event as the API receives it.
    #[test]
    fn golden_starting_event() {
        let event = make_event(
            &node_reference("n1"),
            &source(),
            &NodeEvent::starting(),
            1_795_232_011_000_000_000,
        );
        assert_eq!(
            serde_json::to_value(&event).expect("json"),
            json!({
                "metadata": {"name": "n1.18e9f200a110ae00", "namespace": "default"},
                "involvedObject": {"kind": "Node", "name": "n1", "uid": "n1"},
                "reason": "Starting",
                "message": "Starting kubelet.",
                "source": {"component": "kubelet", "host": "n1"},
                "firstTimestamp": "2026-11-21T03:33:31Z",
                "lastTimestamp": "2026-11-21T03:33:31Z",
                "count": 1,
                "type": "Normal"
            })
        );
    }

    #[test]
    fn a_repeat_patches_the_first_events_count() {
        let mut c = EventCorrelator::default();
        let at = |s: i64| s * 1_000_000_000;
        let make = |s: i64| {
            make_event(
                &node_reference("n1"),
                &source(),
                &NodeEvent::status("n1", "NodeReady"),
                at(s),
            )
        };
        let first = match c.correlate(make(100), at(100), Duration::from_secs(0)) {
            EventAction::Create(e) => e,
            other => panic!("{other:?}"),
        };
        match c.correlate(make(130), at(130), Duration::from_secs(30)) {
            EventAction::Patch { event, patch } => {
                assert_eq!(event.metadata.name, first.metadata.name);
                assert_eq!(event.count, 2);
                assert_eq!(
                    patch,
                    json!({"count": 2, "lastTimestamp": "1970-01-01T00:02:10Z",
                           "message": "Node n1 status is now: NodeReady"})
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn similar_events_are_combined_after_ten_messages() {
        let mut c = EventCorrelator::default();
        let mut actions = Vec::new();
        for i in 0..11 {
            let e = make_event(
                &node_reference("n1"),
                &source(),
                &node_event("Rebooted", &format!("boot {i}")),
                i,
            );
            actions.push(c.correlate(e, i, Duration::from_secs(1)));
        }
        match &actions[9] {
            EventAction::Create(e) => {
                assert_eq!(e.message, "(combined from similar events): boot 9")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&actions[10], EventAction::Patch { event, .. } if event.count == 2));
    }

    #[test]
    fn the_spam_filter_passes_25_then_one_per_five_minutes() {
        let mut c = EventCorrelator::default();
        let mut written = 0;
        for i in 0..40 {
            let e = make_event(
                &node_reference("n1"),
                &source(),
                &node_event(&format!("R{i}"), "m"),
                i,
            );
            if c.correlate(e, i, Duration::from_secs(0)) != EventAction::Skip {
                written += 1;
            }
        }
        assert_eq!(written, 25);
        let later = make_event(&node_reference("n1"), &source(), &node_event("X", "m"), 0);
        assert_ne!(
            c.correlate(later, 0, Duration::from_secs(300)),
            EventAction::Skip
        );
    }
}
