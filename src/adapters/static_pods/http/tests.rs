use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Mutex;

use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Response;
use hyper_util::rt::TokioIo;

use super::*;
use crate::adapters::fake::FakeClock;
use crate::adapters::static_pods::test_support::{names, seen};

const NODE: &str = "node1";
const WAIT: Duration = Duration::from_secs(10);
/// Many check periods: long enough for several fetches to happen.
const QUIET: Duration = Duration::from_millis(300);
const FREQUENCY: Duration = Duration::from_millis(10);
const START: i64 = 1_700_000_000_123_000_000;

fn manifest(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: {image}\n"
    )
}

fn pod_list(names: &[&str]) -> String {
    let items: Vec<String> = names
        .iter()
        .map(|name| {
            format!(
                r#"{{"metadata":{{"name":"{name}"}},"spec":{{"containers":[{{"name":"c","image":"img/{name}"}}]}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"apiVersion":"v1","kind":"PodList","items":[{}]}}"#,
        items.join(",")
    )
}

/// What the test server answers, and what it was asked.
struct State {
    status: StatusCode,
    body: Bytes,
    delay: Duration,
    requests: Vec<HeaderMap>,
}

/// A local HTTP server whose answer the test changes as it goes.
struct Server {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl Server {
    async fn start(body: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State {
            status: StatusCode::OK,
            body: Bytes::from(body.to_string()),
            delay: Duration::ZERO,
            requests: Vec::new(),
        }));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                let service = service_fn(move |request: Request<Incoming>| {
                    let state = state.clone();
                    async move {
                        let (status, body, delay) = {
                            let mut state = state.lock().expect("lock");
                            state.requests.push(request.headers().clone());
                            (state.status, state.body.clone(), state.delay)
                        };
                        tokio::time::sleep(delay).await;
                        let mut response = Response::new(Full::new(body));
                        *response.status_mut() = status;
                        Ok::<_, Infallible>(response)
                    }
                });
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, state }
    }

    fn url(&self) -> String {
        format!("http://{}/pods", self.addr)
    }

    fn serve(&self, status: StatusCode, body: &str) {
        let mut state = self.state.lock().expect("lock");
        state.status = status;
        state.body = Bytes::from(body.to_string());
    }

    fn requests(&self) -> usize {
        self.state.lock().expect("lock").requests.len()
    }
}

fn source(server: &Server, headers: BTreeMap<String, Vec<String>>) -> (HttpSource, Arc<FakeClock>) {
    let clock = Arc::new(FakeClock::new(START));
    let source = HttpSource::new(server.url(), headers, NODE, FREQUENCY, clock.clone())
        .expect("valid source");
    (source, clock)
}

async fn next(source: &mut HttpSource) -> PodSetUpdate {
    match tokio::time::timeout(WAIT, source.next()).await {
        Ok(Some(update)) => update,
        Ok(None) => panic!("source stopped"),
        Err(_) => panic!("no update within {WAIT:?}"),
    }
}

/// Proves the source sends nothing while the server is asked several times.
async fn assert_quiet(source: &mut HttpSource, server: &Server) {
    let before = server.requests();
    if let Ok(update) = tokio::time::timeout(QUIET, source.next()).await {
        panic!("unexpected update: {update:?}");
    }
    assert!(
        server.requests() >= before + 2,
        "the source kept fetching: {} then {}",
        before,
        server.requests()
    );
}

#[tokio::test]
async fn first_set_is_decoded_as_static_pods_and_every_header_value_is_sent() {
    let server = Server::start(&manifest("web", "img/web")).await;
    let headers = BTreeMap::from([
        (
            "X-Token".to_string(),
            vec!["one".to_string(), "two".to_string()],
        ),
        ("Accept".to_string(), vec!["application/yaml".to_string()]),
    ]);
    let (mut src, _clock) = source(&server, headers);

    let update = next(&mut src).await;
    assert_eq!(update.source, "http");
    assert_eq!(names(&update), ["web-node1"]);
    assert!(update.errors.is_empty(), "{:?}", update.errors);
    let pod = &update.pods[0];
    assert_eq!(pod.spec.node_name, NODE);
    assert_eq!(seen(pod), Some("2023-11-14T22:13:20.123Z"));

    let state = server.state.lock().expect("lock");
    let sent = &state.requests[0];
    let tokens: Vec<_> = sent.get_all("x-token").iter().collect();
    assert_eq!(tokens, ["one", "two"]);
    assert_eq!(
        sent.get("accept").map(HeaderValue::as_bytes),
        Some(&b"application/yaml"[..])
    );
}

#[tokio::test]
async fn only_a_changed_set_is_sent_and_first_seen_stays() {
    let server = Server::start(&pod_list(&["web"])).await;
    let (mut src, clock) = source(&server, BTreeMap::new());
    let first = next(&mut src).await;
    assert_eq!(names(&first), ["web-node1"]);

    assert_quiet(&mut src, &server).await;

    clock.advance(Duration::from_secs(60));
    server.serve(StatusCode::OK, &pod_list(&["web", "db"]));
    let changed = next(&mut src).await;
    assert_eq!(names(&changed), ["web-node1", "db-node1"]);
    // Same content, origin and node: the same pod, first seen at the start.
    assert_eq!(changed.pods[0].metadata.uid, first.pods[0].metadata.uid);
    assert_eq!(seen(&changed.pods[0]), Some("2023-11-14T22:13:20.123Z"));
    assert_eq!(seen(&changed.pods[1]), Some("2023-11-14T22:14:20.123Z"));
}

#[tokio::test]
async fn a_failed_fetch_keeps_the_last_set() {
    let server = Server::start(&manifest("web", "img/web")).await;
    let (mut src, _clock) = source(&server, BTreeMap::new());
    assert_eq!(names(&next(&mut src).await), ["web-node1"]);

    server.serve(StatusCode::INTERNAL_SERVER_ERROR, "boom");
    assert_quiet(&mut src, &server).await;
    let error = src.fetch().await.expect_err("500 fails");
    assert_eq!(
        error.to_string(),
        format!("{}: 500 Internal Server Error", server.url())
    );

    // Back with the same pods: nothing changed for the consumer.
    server.serve(StatusCode::OK, &manifest("web", "img/web"));
    assert_quiet(&mut src, &server).await;

    server.serve(StatusCode::OK, &manifest("web", "img/web:2"));
    let changed = next(&mut src).await;
    assert_eq!(names(&changed), ["web-node1"]);
    assert_eq!(changed.pods[0].spec.containers[0].image, "img/web:2");
}

#[tokio::test]
async fn an_invalid_manifest_is_reported_with_the_url_and_the_pods_stay() {
    let server = Server::start(&manifest("web", "img/web")).await;
    let (mut src, _clock) = source(&server, BTreeMap::new());
    let first = next(&mut src).await;

    server.serve(StatusCode::OK, "kind: [unclosed");
    let broken = next(&mut src).await;
    assert_eq!(broken.pods, first.pods);
    assert_eq!(broken.errors.len(), 1);
    let message = broken.errors[0].to_string();
    assert!(message.contains(&server.url()), "{message}");
    // The same broken body is not reported again.
    assert_quiet(&mut src, &server).await;

    server.serve(StatusCode::OK, &manifest("web", "img/web"));
    let fixed = next(&mut src).await;
    assert_eq!(fixed.pods, first.pods);
    assert!(fixed.errors.is_empty());
}

#[tokio::test]
async fn an_empty_body_is_an_empty_set() {
    let server = Server::start(&manifest("web", "img/web")).await;
    let (mut src, _clock) = source(&server, BTreeMap::new());
    assert_eq!(next(&mut src).await.pods.len(), 1);

    server.serve(StatusCode::OK, "");
    let empty = next(&mut src).await;
    assert!(
        empty.pods.is_empty() && empty.errors.is_empty(),
        "{empty:?}"
    );
    assert_quiet(&mut src, &server).await;

    server.serve(StatusCode::OK, &manifest("web", "img/web"));
    assert_eq!(names(&next(&mut src).await), ["web-node1"]);
}

#[tokio::test]
async fn an_oversized_body_is_refused() {
    let server = Server::start(&"x".repeat(MAX_MANIFEST_BYTES + 1)).await;
    let (src, _clock) = source(&server, BTreeMap::new());
    let error = src.fetch().await.expect_err("too large");
    assert!(matches!(error, HttpSourceError::TooLarge { .. }), "{error}");
    assert!(error.to_string().contains(&server.url()), "{error}");
}

#[tokio::test]
async fn a_hung_server_times_out() {
    let server = Server::start(&manifest("web", "img/web")).await;
    server.state.lock().expect("lock").delay = Duration::from_secs(30);
    let (src, _clock) = source(&server, BTreeMap::new());
    let src = src.with_request_timeout(Duration::from_millis(50));
    let error = tokio::time::timeout(WAIT, src.fetch())
        .await
        .expect("the timeout fires first")
        .expect_err("times out");
    assert!(matches!(error, HttpSourceError::Timeout { .. }), "{error}");
}

#[tokio::test]
async fn a_refused_connection_names_the_url_and_the_cause() {
    // Bind then drop: nothing listens on that port any more.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/pods", listener.local_addr().expect("addr"));
    drop(listener);
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(START));
    let src = HttpSource::new(url.as_str(), BTreeMap::new(), NODE, FREQUENCY, clock)
        .expect("valid source");
    let error = src.fetch().await.expect_err("refused").to_string();
    assert!(error.contains(&url), "{error}");
    assert!(error.to_lowercase().contains("refused"), "{error}");
}

#[test]
fn https_and_other_bad_urls_and_headers_are_refused() {
    let make = |url: &str, headers: BTreeMap<String, Vec<String>>| {
        let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(START));
        HttpSource::new(url, headers, NODE, FREQUENCY, clock).err()
    };
    let https = make("https://cfg.example/pods", BTreeMap::new()).expect("refused");
    assert!(
        matches!(https, HttpSourceError::HttpsUnsupported { .. }),
        "{https}"
    );
    assert_eq!(
        https.to_string(),
        "manifest URL https://cfg.example/pods uses https, which is not supported yet; use an http:// URL"
    );
    for url in [
        "ftp://cfg/pods",
        "/pods",
        "cfg.example/pods",
        "http:///pods",
    ] {
        assert!(make(url, BTreeMap::new()).is_some(), "{url} accepted");
    }
    assert!(make("http://a b/", BTreeMap::new()).is_some());

    let bad_name = BTreeMap::from([("Bad Name".to_string(), vec!["v".to_string()])]);
    assert!(matches!(
        make("http://cfg/pods", bad_name),
        Some(HttpSourceError::HeaderName { .. })
    ));
    let bad_value = BTreeMap::from([("X-Secret".to_string(), vec!["a\nb".to_string()])]);
    let error = make("http://cfg/pods", bad_value).expect("refused");
    assert!(matches!(error, HttpSourceError::HeaderValue { .. }));
    assert!(
        !error.to_string().contains("a\nb"),
        "the value is not shown"
    );
}
