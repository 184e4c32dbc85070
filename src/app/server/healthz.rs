//! The healthz port (`healthzPort`, 10248): `/healthz` and its `/healthz/ping`, as
//! upstream's `healthz.InstallHandler` on that port, and nothing else (404): it has no
//! authentication, so `/pods` and `/configz` (which shows `staticPodURLHeader`) are served
//! only by the authenticated kubelet API. Plain hyper, no framework, so the first answer
//! comes within milliseconds of start-up and costs little memory.

use crate::ports::error::Chain;
use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use thiserror::Error;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::domain::kubelet_api::healthz;

/// Produces the current configuration for `/configz`; called on every request so it may read
/// live state (e.g. behind a lock).
pub type ConfigzSource = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// The named health checks behind `/healthz`, run on every request: each `Err` carries
/// why (logged; the answer withholds it, as upstream's does).
pub type HealthChecks =
    Arc<dyn Fn() -> Vec<(&'static str, Result<(), HealthCheckFailure>)> + Send + Sync>;

/// Why a health check failed.
pub type HealthCheckFailure = Box<dyn std::error::Error + Send + Sync>;

/// What the endpoints serve, each read live on every request.
#[derive(Clone)]
pub struct Endpoints {
    /// The configuration, wrapped as `{"kubeletconfig": ...}`.
    pub configz: ConfigzSource,
    /// The pods this kubelet runs with their status, as a `v1.PodList` (upstream's `/pods`).
    pub pods: ConfigzSource,
    /// `/healthz`'s checks beyond `ping` and `log` on the healthz port (the PLEG's).
    pub checks: HealthChecks,
    /// The kubelet API's `/healthz` checks beyond `ping` and `log` (`syncloop`, then the
    /// PLEG's).
    pub api_checks: HealthChecks,
}

/// `/healthz`: `ok` (with `verbose`, every check's line), or upstream's failure answer
/// (500, one line per check, the reasons withheld and logged).
pub(crate) fn healthz_answer(checks: &HealthChecks, verbose: bool) -> Response<Body> {
    let results = run_checks(checks);
    for (name, result) in &results {
        if let Err(reason) = result {
            warn!(check = name, %reason, "healthz check failed");
        }
    }
    let (code, body) = healthz::root_answer(&results, verbose);
    response(status_of(code), TEXT, body)
}

/// `/healthz/<name>`: the check's own answer; `None` when no check has that name.
pub(crate) fn check_answer(checks: &HealthChecks, name: &str) -> Option<Response<Body>> {
    let (code, body) = healthz::named_check(name, &run_checks(checks))?;
    Some(response(status_of(code), TEXT, body))
}

/// Runs the checks; each failure printed with its causes (the domain words the answer).
fn run_checks(checks: &HealthChecks) -> Vec<(&'static str, Result<(), String>)> {
    checks()
        .into_iter()
        .map(|(name, result)| (name, result.map_err(|e| Chain(e.as_ref()).to_string())))
        .collect()
}

fn status_of(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Why the server stopped other than by shutdown.
#[derive(Debug, Error)]
pub enum ServerError {
    /// The listening socket itself is unusable (not a per-connection failure).
    #[error("failed to accept connections on {addr}")]
    Accept {
        addr: String,
        #[source]
        source: io::Error,
    },
}

/// A slowloris guard: a client must send its headers within this time.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a resource error (EMFILE and kin) so accept does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

type Body = Full<Bytes>;

fn response(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}

const TEXT: &str = "text/plain; charset=utf-8";

/// Answers one request on the healthz port. Pure apart from running the checks, so it is
/// tested directly too.
fn route(method: &Method, path: &str, checks: &HealthChecks) -> Response<Body> {
    let known = matches!(path, "/healthz" | "/healthz/ping");
    if !known {
        // Go's net/http wording, which operators and probes already know.
        return response(StatusCode::NOT_FOUND, TEXT, "404 page not found\n");
    }
    // hyper strips the body of HEAD answers itself.
    if method != Method::GET && method != Method::HEAD {
        let mut resp = response(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "405 method not allowed\n",
        );
        resp.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return resp;
    }
    match path {
        "/healthz" => healthz_answer(checks, false),
        // Upstream's `ping` check on its own path.
        _ => check_answer(checks, "ping").unwrap_or_else(|| response(StatusCode::OK, TEXT, "ok")),
    }
}

/// Errors of one connection attempt that say nothing about the listener: retry at once.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// Resolves once shutdown is requested, or once nobody can request it any more.
pub(crate) async fn shutdown_requested(shutdown: &mut watch::Receiver<bool>) {
    // A dropped sender means the owner is gone: treat it as shutdown rather than serve forever.
    let _ = shutdown.wait_for(|stop| *stop).await;
}

async fn serve_connection(
    stream: TcpStream,
    checks: HealthChecks,
    mut shutdown: watch::Receiver<bool>,
) {
    let service = service_fn(move |req: Request<Incoming>| {
        let resp = route(req.method(), req.uri().path(), &checks);
        async move { Ok::<_, Infallible>(resp) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        res = conn.as_mut() => res,
        () = shutdown_requested(&mut shutdown) => {
            // Finish the request in flight, then close; idle keep-alives close at once.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        debug!(error = %Chain(&e), "health connection ended with an error");
    }
}

/// Serves `/healthz` on `listener` until `shutdown` becomes true (or its sender is
/// dropped), then lets in-flight requests finish and returns.
///
/// `GET|HEAD /healthz` answers `ok` (or the failed checks, 500); `GET|HEAD /healthz/ping`
/// answers `ok`; other paths 404; other methods on those paths 405.
///
/// # Errors
/// [`ServerError::Accept`] when the listener cannot accept any more (EINVAL: not listening).
/// Per-connection failures and resource exhaustion are logged and survived.
pub async fn serve_health(
    listener: TcpListener,
    checks: HealthChecks,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "<unknown>".to_owned(), |a| a.to_string());
    info!(%addr, "serving healthz");
    let mut connections = JoinSet::new();
    let result = loop {
        tokio::select! {
            () = shutdown_requested(&mut shutdown) => break Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    // As Go's servers: answers go out without waiting for delayed ACKs.
                    let _ = stream.set_nodelay(true);
                    connections.spawn(serve_connection(
                        stream,
                        Arc::clone(&checks),
                        shutdown.clone(),
                    ));
                }
                Err(e) if is_connection_error(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                    break Err(ServerError::Accept { addr: addr.clone(), source: e });
                }
                Err(e) => {
                    warn!(%addr, error = %Chain(&e), "accept failed; backing off");
                    tokio::select! {
                        () = shutdown_requested(&mut shutdown) => break Ok(()),
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    }
                }
            },
            // Reap finished connections so the set does not grow for the process lifetime.
            Some(done) = connections.join_next(), if !connections.is_empty() => {
                if let Err(e) = done {
                    warn!(error = %Chain(&e), "health connection task failed");
                }
            }
        }
    };
    drop(listener);
    if result.is_err() {
        // Nobody flipped the shutdown signal the connections watch: stop them here.
        connections.abort_all();
    }
    // On shutdown, connections see the same signal; wait for their graceful ends.
    while let Some(done) = connections.join_next().await {
        if let Err(e) = done {
            warn!(error = %Chain(&e), "health connection task failed");
        }
    }
    info!(%addr, "healthz server stopped");
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::task::JoinHandle;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    /// Fails a broken test instead of hanging it; never reached when the code works.
    const TEST_DEADLINE: Duration = Duration::from_secs(10);

    struct Running {
        addr: SocketAddr,
        stop: watch::Sender<bool>,
        task: JoinHandle<Result<(), ServerError>>,
    }

    async fn start(checks: HealthChecks) -> Result<Running, io::Error> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, shutdown) = watch::channel(false);
        let task = tokio::spawn(serve_health(listener, checks, shutdown));
        Ok(Running { addr, stop, task })
    }

    fn healthy() -> HealthChecks {
        Arc::new(|| vec![("pleg", Ok(()))])
    }

    /// The parts of an HTTP/1.1 answer the tests look at.
    #[derive(Debug)]
    struct Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Answer {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    fn parse(raw: &str) -> Option<Answer> {
        let (head, body) = raw.split_once("\r\n\r\n")?;
        let mut lines = head.split("\r\n");
        let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        Some(Answer {
            status,
            headers,
            body: body.to_owned(),
        })
    }

    /// One request on a fresh connection that the server closes after answering.
    async fn request(addr: SocketAddr, method: &str, path: &str) -> Result<Answer, io::Error> {
        let mut stream = TcpStream::connect(addr).await?;
        let req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream.write_all(req.as_bytes()).await?;
        let mut raw = Vec::new();
        tokio::time::timeout(TEST_DEADLINE, stream.read_to_end(&mut raw)).await??;
        let text = String::from_utf8_lossy(&raw);
        parse(&text).ok_or_else(|| io::Error::other(format!("unparsable answer: {text:?}")))
    }

    async fn stop(running: Running) -> Result<(), Box<dyn std::error::Error>> {
        running.stop.send_replace(true);
        tokio::time::timeout(TEST_DEADLINE, running.task).await???;
        Ok(())
    }

    #[tokio::test]
    async fn healthz_answers_ok() -> TestResult {
        let running = start(healthy()).await?;
        let answer = request(running.addr, "GET", "/healthz").await?;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, "ok");
        assert_eq!(answer.header("content-type"), Some(TEXT));
        stop(running).await
    }

    #[tokio::test]
    async fn only_healthz_is_served_without_authentication() -> TestResult {
        let running = start(healthy()).await?;
        let answer = request(running.addr, "GET", "/healthz/ping").await?;
        assert_eq!((answer.status, answer.body.as_str()), (200, "ok"));
        // What the authenticated kubelet API serves is not here: /configz shows
        // staticPodURLHeader, /pods every pod's spec.
        for path in [
            "/pods",
            "/pods/",
            "/configz",
            "/metrics",
            "/metrics/cadvisor",
            "/stats/summary",
            "/debug/pprof/",
            "/runningpods/",
            "/healthz/log",
            "/healthz/syncloop",
            "/",
        ] {
            let answer = request(running.addr, "GET", path).await?;
            assert_eq!(
                (answer.status, answer.body.as_str()),
                (404, "404 page not found\n"),
                "{path}"
            );
        }
        stop(running).await
    }

    #[tokio::test]
    async fn unknown_paths_are_404_and_other_methods_405() -> TestResult {
        let running = start(healthy()).await?;
        let answer = request(running.addr, "GET", "/metrics").await?;
        assert_eq!(answer.status, 404);
        let answer = request(running.addr, "GET", "/healthz/extra").await?;
        assert_eq!(answer.status, 404);
        let answer = request(running.addr, "POST", "/healthz").await?;
        assert_eq!(answer.status, 405);
        assert_eq!(answer.header("allow"), Some("GET, HEAD"));
        let answer = request(running.addr, "DELETE", "/healthz/ping").await?;
        assert_eq!(answer.status, 405);
        stop(running).await
    }

    #[tokio::test]
    async fn head_answers_without_a_body() -> TestResult {
        let running = start(healthy()).await?;
        let answer = request(running.addr, "HEAD", "/healthz").await?;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, "");
        stop(running).await
    }

    #[tokio::test]
    async fn shutdown_closes_idle_keep_alive_connections() -> TestResult {
        let running = start(healthy()).await?;
        // A keep-alive client that got its answer and now sits idle.
        let mut idle = TcpStream::connect(running.addr).await?;
        idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            .await?;
        let mut buf = vec![0u8; 1024];
        let n = tokio::time::timeout(TEST_DEADLINE, idle.read(&mut buf)).await??;
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));

        let addr = running.addr;
        stop(running).await?;
        // The server closed the idle connection and stopped listening.
        let n = tokio::time::timeout(TEST_DEADLINE, idle.read(&mut buf)).await??;
        assert_eq!(n, 0);
        assert!(TcpStream::connect(addr).await.is_err());
        Ok(())
    }

    #[tokio::test]
    async fn a_dropped_shutdown_sender_stops_the_server() -> TestResult {
        let running = start(healthy()).await?;
        drop(running.stop);
        tokio::time::timeout(TEST_DEADLINE, running.task).await???;
        Ok(())
    }

    #[test]
    fn a_failing_check_fails_healthz_in_upstreams_form() {
        let checks: HealthChecks = Arc::new(|| {
            vec![(
                "pleg",
                Err("pleg was last seen active 3m1s ago; threshold is 3m0s".into()),
            )]
        });
        let answer = route(&Method::GET, "/healthz", &checks);
        assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            route(&Method::GET, "/healthz", &healthy()).status(),
            StatusCode::OK
        );
        let stalled: HealthChecks = Arc::new(|| vec![("pleg", Err("stalled".into()))]);
        let body = healthz_answer(&stalled, false);
        let bytes = futures_util::FutureExt::now_or_never(http_body_util::BodyExt::collect(
            body.into_body(),
        ))
        .and_then(Result::ok)
        .map(|b| b.to_bytes())
        .unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            "[+]ping ok\n[+]log ok\n[-]pleg failed: reason withheld\nhealthz check failed\n"
        );
    }

    #[test]
    fn route_is_exact_about_paths() {
        let checks = healthy();
        assert_eq!(
            route(&Method::GET, "/healthz", &checks).status(),
            StatusCode::OK
        );
        assert_eq!(
            route(&Method::GET, "/", &checks).status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            route(&Method::PUT, "/nope", &checks).status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            route(&Method::GET, "/configz", &checks).status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            route(&Method::PUT, "/healthz", &checks).status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
