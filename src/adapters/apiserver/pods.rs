//! The node's pods through kube-rs: a list, and kube-runtime's watcher, with a field
//! selector; status patches; deletion with a uid precondition. Pods are read as `DynamicObject`s and handed on as
//! JSON, so a pod whose spec the domain cannot decode affects only itself.

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod as KubePod;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher;
use serde_json::Value;

use super::errors::{conversion, Answer};
use super::{Budget, Connection, KubeClients};
use crate::ports::api::{
    CallError, CallErrorKind, PodApi, PodList, PodWatch, PodWatchEvent, PodsError,
};

/// How long one watch request lasts before the server ends it (client-go picks 5-10 min).
const WATCH_TIMEOUT_SECS: u32 = 290;

fn pods_resource() -> ApiResource {
    ApiResource::erase::<KubePod>(&())
}

fn call_error(verb: &'static str, namespace: &str, name: &str, source: CallError) -> PodsError {
    PodsError::Call {
        verb,
        namespace: namespace.into(),
        name: name.into(),
        source,
    }
}

fn answer_error(
    verb: &'static str,
    namespace: &str,
    name: &str,
    answer: Answer,
    source: CallError,
) -> PodsError {
    let (namespace, name) = (namespace.to_owned(), name.to_owned());
    match answer {
        Answer::NotFound => PodsError::NotFound { namespace, name },
        Answer::Conflict => PodsError::Conflict { namespace, name },
        _ => PodsError::Call {
            verb,
            namespace,
            name,
            source,
        },
    }
}

impl KubeClients {
    fn all_pods(&self) -> Api<DynamicObject> {
        Api::all_with(self.connection.client.clone(), &pods_resource())
    }

    fn pods_in(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.connection.client.clone(), namespace, &pods_resource())
    }
}

fn to_json(object: &DynamicObject) -> Result<Value, CallError> {
    let mut value = serde_json::to_value(object).map_err(conversion)?;
    value["apiVersion"] = "v1".into();
    value["kind"] = "Pod".into();
    Ok(value)
}

/// What one of the watcher's events means for the node's pods.
#[derive(Debug, Clone, PartialEq)]
enum Change<K> {
    Listed(Vec<K>),
    Applied(K),
    Deleted(K),
}

/// The watcher's (re)list arrives as `Init`, one `InitApply` per object, then
/// `InitDone`: the objects are gathered and handed on as one whole set, so a pod deleted
/// during a gap (410 Gone) leaves it. A list that failed half-way starts again with a new
/// `Init`, dropping what it had gathered.
#[derive(Debug)]
struct Relist<K> {
    listing: Vec<K>,
}

impl<K> Default for Relist<K> {
    fn default() -> Self {
        Relist {
            listing: Vec::new(),
        }
    }
}

impl<K> Relist<K> {
    fn step(&mut self, event: watcher::Event<K>) -> Option<Change<K>> {
        match event {
            watcher::Event::Init => {
                self.listing.clear();
                None
            }
            watcher::Event::InitApply(object) => {
                self.listing.push(object);
                None
            }
            watcher::Event::InitDone => Some(Change::Listed(std::mem::take(&mut self.listing))),
            watcher::Event::Apply(object) => Some(Change::Applied(object)),
            watcher::Event::Delete(object) => Some(Change::Deleted(object)),
        }
    }
}

/// The watcher's failure as the port's (it recovers by itself, after its back-off).
fn watch_error(connection: &Connection, error: watcher::Error) -> PodsError {
    match error {
        watcher::Error::WatchError(status) if status.code == 410 => PodsError::Gone {
            message: status.message,
        },
        watcher::Error::InitialListFailed(e) => {
            call_error("list", "", "", connection.classify(e).1)
        }
        watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => {
            call_error("watch", "", "", connection.classify(e).1)
        }
        watcher::Error::WatchError(status) => call_error(
            "watch",
            "",
            "",
            connection.about(CallError::new(CallErrorKind::Other, status.message)),
        ),
        watcher::Error::NoResourceVersion => call_error(
            "list",
            "",
            "",
            connection.about(CallError::new(
                CallErrorKind::Decode,
                "no metadata.resourceVersion in the answer".to_owned(),
            )),
        ),
    }
}

/// Whether the server said the watch's version is gone (410): it answers, so the
/// watcher lists again at once rather than after a back-off.
fn is_gone(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
}

type WatcherEvents = BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>>;

/// kube-runtime's watcher over the connection's client, with upstream's back-off.
struct KubePodWatch {
    /// In a mutex only so the watch is `Sync`; one reader at a time anyway.
    events: tokio::sync::Mutex<WatcherEvents>,
    relist: Relist<DynamicObject>,
    connection: Arc<Connection>,
    /// Upstream's reflector back-off (kube-runtime's `DefaultBackoff`): 800 ms doubling
    /// to 30 s with jitter, reset after 2 minutes without a failure. Applied here rather
    /// than with `StreamBackoff`, which waits after every error: after an outage the
    /// first watch meets 410 Gone, and the list must follow at once (upstream's reflector
    /// relists without waiting), not up to 30 s later.
    backoff: watcher::DefaultBackoff,
    /// When the next request may go, after a failure. A deadline rather than a wait, so
    /// that a caller which stops polling mid-wait (a `select!` taking another branch)
    /// still waits it out on its next poll.
    retry_at: Option<tokio::time::Instant>,
}

#[async_trait]
impl PodWatch for KubePodWatch {
    async fn next(&mut self) -> Option<Result<PodWatchEvent, PodsError>> {
        loop {
            if let Some(at) = self.retry_at {
                tokio::time::sleep_until(at).await;
                self.retry_at = None;
            }
            let event = match self.events.get_mut().next().await? {
                Ok(event) => event,
                Err(error) => {
                    if is_gone(&error) {
                        self.backoff.reset();
                    } else {
                        self.retry_at = self
                            .backoff
                            .next()
                            .map(|wait| tokio::time::Instant::now() + wait);
                    }
                    return Some(Err(watch_error(&self.connection, error)));
                }
            };
            let Some(change) = self.relist.step(event) else {
                continue;
            };
            let converted = match change {
                Change::Listed(objects) => objects
                    .iter()
                    .map(to_json)
                    .collect::<Result<Vec<_>, _>>()
                    .map(PodWatchEvent::Listed),
                Change::Applied(object) => to_json(&object).map(PodWatchEvent::Applied),
                Change::Deleted(object) => to_json(&object).map(PodWatchEvent::Deleted),
            };
            return Some(converted.map_err(|source| call_error("watch", "", "", source)));
        }
    }
}

#[async_trait]
impl PodApi for KubeClients {
    async fn list_pods(&self, field_selector: &str) -> Result<PodList, PodsError> {
        let api = self.all_pods();
        let params = ListParams::default().fields(field_selector);
        let list = self
            .connection
            .call(Budget::Api, api.list(&params))
            .await
            .map_err(|e| call_error("list", "", "", e))?
            .map_err(|e| call_error("list", "", "", self.connection.classify(e).1))?;
        let items = list
            .items
            .iter()
            .map(to_json)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| call_error("list", "", "", e))?;
        Ok(PodList {
            items,
            resource_version: list.metadata.resource_version.unwrap_or_default(),
        })
    }

    fn watch_pods(&self, field_selector: &str) -> Box<dyn PodWatch> {
        // The client-side rate limit and the call timeout apply to each list and each
        // watch's opening, as they did to the calls the watcher replaced.
        let client = self.connection.paced_client(Budget::Api);
        let api = Api::<DynamicObject>::all_with(client, &pods_resource());
        // A consistent list (no `resourceVersion=0`): after 410 Gone, a list from a
        // lagging watch cache could bring back a pod already seen deleted. Bookmarks are
        // on by default; v1.26 has no streaming lists.
        let config = watcher::Config::default()
            .fields(field_selector)
            .timeout(WATCH_TIMEOUT_SECS);
        let events = watcher::watcher(api, config).boxed();
        Box::new(KubePodWatch {
            events: tokio::sync::Mutex::new(events),
            relist: Relist::default(),
            connection: self.connection.clone(),
            backoff: watcher::DefaultBackoff::default(),
            retry_at: None,
        })
    }

    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, PodsError> {
        let api = self.pods_in(namespace);
        let params = PatchParams::default();
        let stored = self
            .connection
            .call(
                Budget::Api,
                api.patch_status(name, &params, &Patch::Strategic(patch)),
            )
            .await
            .map_err(|e| call_error("patch status of", namespace, name, e))?;
        match stored {
            Ok(pod) => to_json(&pod).map_err(|e| call_error("patch status of", namespace, name, e)),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                Err(answer_error(
                    "patch status of",
                    namespace,
                    name,
                    answer,
                    source,
                ))
            }
        }
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period_seconds: i64,
    ) -> Result<(), PodsError> {
        let api = self.pods_in(namespace);
        let params = DeleteParams {
            grace_period_seconds: u32::try_from(grace_period_seconds.max(0)).ok(),
            preconditions: Some(Preconditions {
                uid: Some(uid.into()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let deleted = self
            .connection
            .call(Budget::Api, api.delete(name, &params))
            .await
            .map_err(|e| call_error("delete", namespace, name, e))?;
        match deleted {
            Ok(_) => Ok(()),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                Err(answer_error("delete", namespace, name, answer, source))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::adapters::apiserver::{ClientSettings, Limits};

    #[test]
    fn the_watchers_events_become_whole_lists_and_changes() {
        use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
        type Case = (
            &'static str,
            Vec<watcher::Event<&'static str>>,
            Vec<Change<&'static str>>,
        );
        let cases: Vec<Case> = vec![
            (
                "a list is handed on whole at its end",
                vec![Init, InitApply("a"), InitApply("b"), InitDone],
                vec![Change::Listed(vec!["a", "b"])],
            ),
            (
                "a node without pods lists an empty set",
                vec![Init, InitDone],
                vec![Change::Listed(vec![])],
            ),
            (
                "a list that failed half-way starts again without what it gathered",
                vec![Init, InitApply("a"), Init, InitApply("b"), InitDone],
                vec![Change::Listed(vec!["b"])],
            ),
            (
                "changes pass one by one",
                vec![Apply("a"), Delete("a")],
                vec![Change::Applied("a"), Change::Deleted("a")],
            ),
            (
                "a relist after 410 is a new whole set",
                vec![
                    Init,
                    InitApply("a"),
                    InitDone,
                    Apply("b"),
                    Init,
                    InitApply("b"),
                    InitDone,
                ],
                vec![
                    Change::Listed(vec!["a"]),
                    Change::Applied("b"),
                    Change::Listed(vec!["b"]),
                ],
            ),
        ];
        for (case, events, expected) in cases {
            let mut relist = Relist::default();
            let changes: Vec<_> = events.into_iter().filter_map(|e| relist.step(e)).collect();
            assert_eq!(changes, expected, "{case}");
        }
    }

    fn pod(name: &str, version: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                            "resourceVersion": version},
               "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}]}})
    }

    fn list(items: &[Value], version: &str) -> String {
        json!({"apiVersion": "v1", "kind": "PodList", "items": items,
               "metadata": {"resourceVersion": version}})
        .to_string()
    }

    fn events(events: &[(&str, Value)]) -> String {
        events
            .iter()
            .map(|(kind, object)| format!("{}\n", json!({"type": kind, "object": object})))
            .collect()
    }

    /// An API server that answers each request with the next scripted body (a watch's
    /// body ends, as when the server ends the watch) and records the requests.
    fn scripted(answers: Vec<String>) -> (KubeClients, Arc<Mutex<Vec<String>>>) {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(VecDeque::from(answers)));
        let seen = Arc::clone(&requests);
        let service = tower::service_fn(move |request: hyper::Request<kube::client::Body>| {
            let seen = Arc::clone(&seen);
            let answers = Arc::clone(&answers);
            async move {
                seen.lock()
                    .expect("requests")
                    .push(request.uri().to_string());
                let answer = answers.lock().expect("answers").pop_front();
                let response = match answer {
                    Some(body) => hyper::Response::new(kube::client::Body::from(body.into_bytes())),
                    // The script is over: a watch that never answers.
                    None => std::future::pending().await,
                };
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        (clients_over(service), requests)
    }

    /// The adapter's clients over a test service standing in for the API server.
    fn clients_over<S>(service: S) -> KubeClients
    where
        S: tower::Service<
                hyper::Request<kube::client::Body>,
                Response = hyper::Response<kube::client::Body>,
            > + Send
            + Sync
            + Clone
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let settings = ClientSettings::default();
        KubeClients {
            connection: Arc::new(Connection {
                client: kube::Client::new(service, "default"),
                server: "https://api:6443".into(),
                limits: Arc::new(Limits::new(&settings)),
                timeout: settings.call_timeout,
            }),
        }
    }

    fn names(items: &[Value]) -> Vec<&str> {
        items
            .iter()
            .filter_map(|p| p["metadata"]["name"].as_str())
            .collect()
    }

    /// The watch lists with the node's field selector, watches from the list's version
    /// with bookmarks, resumes from the last bookmark when the server ends the watch,
    /// and lists again after 410 Gone: the new list no longer holds the pod deleted in
    /// the gap.
    #[tokio::test(start_paused = true)]
    async fn the_watch_lists_watches_resumes_and_relists_after_gone() {
        let gone = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 410,
                          "reason": "Expired", "message": "too old resource version: 12 (40)",
                          "metadata": {}});
        let bookmark =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"resourceVersion": "12"}});
        let (clients, requests) = scripted(vec![
            list(&[pod("a", "5")], "10"),
            events(&[("ADDED", pod("b", "11")), ("BOOKMARK", bookmark)]),
            events(&[("ERROR", gone)]),
            list(&[pod("b", "11")], "40"),
            events(&[("DELETED", pod("b", "41"))]),
        ]);
        let mut watch = clients.watch_pods("spec.nodeName=n1");

        match watch
            .next()
            .await
            .expect("the watch goes on")
            .expect("listed")
        {
            PodWatchEvent::Listed(items) => assert_eq!(names(&items), ["a"]),
            other => panic!("expected the list, got {other:?}"),
        }
        match watch
            .next()
            .await
            .expect("the watch goes on")
            .expect("added")
        {
            PodWatchEvent::Applied(pod) => assert_eq!(pod["metadata"]["name"], "b"),
            other => panic!("expected b applied, got {other:?}"),
        }
        match watch.next().await.expect("the watch goes on") {
            Err(PodsError::Gone { message }) => assert!(message.contains("too old"), "{message}"),
            other => panic!("expected 410 Gone, got {other:?}"),
        }
        match watch
            .next()
            .await
            .expect("the watch goes on")
            .expect("listed again")
        {
            PodWatchEvent::Listed(items) => assert_eq!(names(&items), ["b"]),
            other => panic!("expected the relist, got {other:?}"),
        }
        match watch
            .next()
            .await
            .expect("the watch goes on")
            .expect("deleted")
        {
            PodWatchEvent::Deleted(pod) => {
                assert_eq!(pod["metadata"]["name"], "b");
                assert_eq!(pod["kind"], "Pod");
            }
            other => panic!("expected b deleted, got {other:?}"),
        }

        let requests = requests.lock().expect("requests").clone();
        let has = |i: usize, parts: &[&str]| {
            let uri = &requests[i];
            for part in parts {
                assert!(uri.contains(part), "request {i} {uri} lacks {part}");
            }
        };
        let node = "fieldSelector=spec.nodeName%3Dn1";
        has(0, &["/api/v1/pods?", node]);
        assert!(!requests[0].contains("watch=true"), "{}", requests[0]);
        let watch = [
            "watch=true",
            "allowWatchBookmarks=true",
            "timeoutSeconds=290",
            node,
        ];
        has(1, &watch);
        has(1, &["resourceVersion=10"]);
        has(2, &watch);
        has(2, &["resourceVersion=12"]);
        has(3, &[node]);
        assert!(!requests[3].contains("watch=true"), "{}", requests[3]);
        has(4, &["resourceVersion=40"]);
    }

    /// Failures are reported, then retried after upstream's back-off: 800 ms doubling,
    /// even when the caller stops polling during the wait.
    #[tokio::test(start_paused = true)]
    async fn failures_are_reported_and_retried_after_a_back_off() {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let service = tower::service_fn(move |_: hyper::Request<kube::client::Body>| {
            seen.lock()
                .expect("requests")
                .push(tokio::time::Instant::now());
            async {
                let mut answer = hyper::Response::new(kube::client::Body::from(
                    json!({"kind": "Status", "apiVersion": "v1", "code": 503,
                           "status": "Failure", "message": "unavailable", "metadata": {}})
                    .to_string()
                    .into_bytes(),
                ));
                *answer.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
                Ok::<_, std::convert::Infallible>(answer)
            }
        });
        let clients = clients_over(service);
        let mut watch = clients.watch_pods("spec.nodeName=n1");
        for _ in 0..4 {
            match watch.next().await {
                Some(Err(PodsError::Call { verb, source, .. })) => {
                    assert_eq!(verb, "list");
                    assert!(source.message.contains("unavailable"), "{}", source.message);
                }
                other => panic!("expected a failed list, got {other:?}"),
            }
            // A caller that polls once and gives up mid-wait (the pod source gathers a
            // burst with `now_or_never`) neither gets an answer nor cuts the wait short.
            assert!(futures_util::FutureExt::now_or_never(watch.next()).is_none());
        }
        let at = requests.lock().expect("requests").clone();
        assert_eq!(at.len(), 4);
        // Jitter adds up to the delay itself: [0.8, 1.6), [1.6, 3.2), [3.2, 6.4) s. Tokio's
        // timer rounds a deadline up to the next millisecond, so the top is reachable.
        for (i, low) in [800u64, 1600, 3200].into_iter().enumerate() {
            let gap = at[i + 1] - at[i];
            let low = Duration::from_millis(low);
            assert!(gap >= low && gap <= low * 2, "gap {i}: {gap:?}");
        }
    }

    /// After an outage the first watch meets 410 Gone: the list follows at once, not
    /// after the back-off the outage's failures built up (upstream's reflector relists
    /// without waiting).
    #[tokio::test(start_paused = true)]
    async fn after_an_outage_gone_is_followed_by_a_list_at_once() {
        let gone = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 410,
                          "reason": "Expired", "message": "too old resource version: 10 (90)",
                          "metadata": {}});
        let unavailable = json!({"kind": "Status", "apiVersion": "v1", "code": 503,
                                 "status": "Failure", "message": "unavailable", "metadata": {}});
        let script: Vec<(u16, String)> = vec![
            (200, list(&[pod("a", "5")], "10")),
            (503, unavailable.to_string()),
            (503, unavailable.to_string()),
            (503, unavailable.to_string()),
            (200, events(&[("ERROR", gone)])),
            (200, list(&[], "90")),
        ];
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let service = tower::service_fn(move |request: hyper::Request<kube::client::Body>| {
            seen.lock()
                .expect("requests")
                .push((tokio::time::Instant::now(), request.uri().to_string()));
            let next = script.lock().expect("script").pop_front();
            async move {
                let Some((status, body)) = next else {
                    return std::future::pending().await;
                };
                let mut answer = hyper::Response::new(kube::client::Body::from(body.into_bytes()));
                *answer.status_mut() =
                    hyper::StatusCode::from_u16(status).expect("a scripted status");
                Ok::<_, std::convert::Infallible>(answer)
            }
        });
        let clients = clients_over(service);
        let mut watch = clients.watch_pods("spec.nodeName=n1");
        assert!(matches!(
            watch.next().await,
            Some(Ok(PodWatchEvent::Listed(_)))
        ));
        for _ in 0..3 {
            assert!(matches!(
                watch.next().await,
                Some(Err(PodsError::Call { .. }))
            ));
        }
        assert!(matches!(
            watch.next().await,
            Some(Err(PodsError::Gone { .. }))
        ));
        match watch.next().await {
            Some(Ok(PodWatchEvent::Listed(items))) => assert!(items.is_empty()),
            other => panic!("expected the relist, got {other:?}"),
        }
        let requests = requests.lock().expect("requests").clone();
        assert_eq!(requests.len(), 6, "{requests:?}");
        // The outage's watches backed off (about 0.8, 1.6, 3.2 s apart)...
        assert!(requests[3].0 - requests[2].0 >= Duration::from_millis(1600));
        assert!(requests[4].0 - requests[3].0 >= Duration::from_millis(3200));
        // ...the list after 410 did not.
        assert!(!requests[5].1.contains("watch=true"), "{}", requests[5].1);
        assert_eq!(requests[5].0, requests[4].0);
    }
}
