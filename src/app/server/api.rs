//! The kubelet API on `address:port` (10250) over TLS, and the read-only port when set:
//! `/healthz`, `/pods`, `/runningpods/`, `/configz`, `/containerLogs/{ns}/{pod}/{container}`.
//! Every request on the secure port passes [`Guard`] first; the read-only port serves
//! only what upstream serves there without authentication.

use std::convert::Infallible;
use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{
    HeaderValue, ACCEPT, AUTHORIZATION, CONNECTION, CONTENT_TYPE, UPGRADE, X_CONTENT_TYPE_OPTIONS,
};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncSeek, AsyncSeekExt, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use super::auth::{Credentials, Guard};
use super::healthz::{shutdown_requested, Endpoints, ServerError};
use super::stream::{instances_of, running_container, stream, Asked, Kind};
use crate::app::pods::PodStatusStore;
use crate::domain::kubelet_api::healthz::is_verbose;
use crate::domain::kubelet_api::logs::{
    decode_segment, instance_to_read, parse_cri_line, parse_log_options, query_pairs,
    restart_of_log_file, scan_newlines_back, status_shows_instance_running, LogOptions, LogWriter,
};
use crate::domain::kubelet_api::routes::{route, run_command, Port, Route, DEBUGGING_DISABLED};
use crate::domain::kubelet_api::streaming::{is_websocket, port_forward_ports, stream_options};
use crate::domain::kuberuntime::requests::pod_log_dir_in;
use crate::domain::kuberuntime::runtime::ContainerState;
use crate::domain::status::ApiContainerState;
use crate::domain::units::go_quote;
use crate::ports::clock::Clock;
use crate::ports::container_logs::{ContainerLogs, ContainerLogsError, FileIdentity, OpenLog};
use crate::ports::error::Chain;
use crate::ports::runtime::RuntimeService;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
/// A TLS client must finish its handshake, and send its headers, within this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a followed log is checked for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// Read size of log files.
const LOG_BLOCK: usize = 64 * 1024;

/// What the API serves, shared by its connections.
pub struct KubeletApi {
    /// `None` on the read-only port.
    pub guard: Option<Arc<Guard>>,
    pub endpoints: Endpoints,
    pub pods: PodStatusStore,
    pub pod_logs_dir: PathBuf,
    /// The log files `/containerLogs` reads.
    pub logs: Arc<dyn ContainerLogs>,
    /// `enableDebuggingHandlers`.
    pub debugging: bool,
    pub clock: Arc<dyn Clock>,
    /// For exec, attach and port-forward.
    pub runtime: Arc<dyn RuntimeService>,
    /// For `/stats/summary` and `/metrics*`; `None`: not served.
    pub stats: Option<Arc<crate::app::stats_provider::StatsProvider>>,
}

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn response(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn json(value: &serde_json::Value) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(bytes) => response(StatusCode::OK, JSON, bytes),
        Err(e) => response(StatusCode::INTERNAL_SERVER_ERROR, TEXT, format!("{e}\n")),
    }
}

fn not_found() -> Response<Body> {
    response(StatusCode::NOT_FOUND, TEXT, "404 page not found\n")
}

impl KubeletApi {
    async fn handle(
        &self,
        req: Request<Incoming>,
        client_certificate: Option<&[u8]>,
    ) -> Response<Body> {
        let path = req.uri().path().to_owned();
        let method = req.method().clone();
        if let Some(guard) = &self.guard {
            let credentials = Credentials {
                client_certificate,
                authorization: req
                    .headers()
                    .get(AUTHORIZATION)
                    .and_then(|v| v.to_str().ok()),
            };
            if let Err(refusal) = guard.check(&credentials, method.as_str(), &path).await {
                debug!(%path, status = refusal.status, "refused");
                return response(status(refusal.status), TEXT, refusal.body);
            }
        }
        let read_only = self.guard.is_none();
        match path.as_str() {
            "/healthz" => {
                let verbose = is_verbose(req.uri().query().unwrap_or(""));
                super::healthz::healthz_answer(&self.endpoints.api_checks, verbose)
                    .map(|b| b.map_err(|never| match never {}).boxed_unsync())
            }
            "/pods" | "/pods/" => json(&(self.endpoints.pods)()),
            p if super::stats_endpoints::is_stats_path(p) => match &self.stats {
                Some(stats) => {
                    let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
                    let (content_type, body) =
                        super::stats_endpoints::answer(stats, p, accept).await;
                    response(StatusCode::OK, content_type, body)
                }
                None => not_found(),
            },
            _ => self.routed(req, &path, read_only).await,
        }
    }

    /// The handlers [`route`] picks beyond the default ones.
    async fn routed(&self, req: Request<Incoming>, path: &str, read_only: bool) -> Response<Body> {
        let port = if read_only {
            Port::ReadOnly
        } else {
            Port::Secure {
                debugging: self.debugging,
            }
        };
        let kind = match route(path, port) {
            Route::HealthzCheck(name) => {
                return super::healthz::check_answer(&self.endpoints.api_checks, name)
                    .map_or_else(not_found, |answer| {
                        answer.map(|b| b.map_err(|never| match never {}).boxed_unsync())
                    })
            }
            Route::Healthz | Route::Pods | Route::NotFound => return not_found(),
            Route::DebuggingDisabled => {
                return response(StatusCode::METHOD_NOT_ALLOWED, TEXT, DEBUGGING_DISABLED)
            }
            Route::Configz => {
                return json(&serde_json::json!({ "kubeletconfig": (self.endpoints.configz)() }))
            }
            Route::RunningPods => return json(&self.running_pods()),
            Route::ContainerLogs(rest) => {
                let query = req.uri().query().unwrap_or("").to_owned();
                return self.container_logs(rest, &query).await;
            }
            Route::Run(rest) => return self.run(rest, &req).await,
            Route::Exec(rest) => (Kind::Exec, rest),
            Route::Attach(rest) => (Kind::Attach, rest),
            Route::PortForward(rest) => (Kind::PortForward, rest),
        };
        let rest = kind.1.to_owned();
        self.streaming(kind.0, &rest, req).await
    }

    /// `POST /run/{ns}/{pod}[/{uid}]/{container}?cmd=...`: the command's output (stdout
    /// then stderr), as upstream's `getRun`; a command that fails answers 500 with
    /// upstream's text.
    async fn run(&self, rest: &str, req: &Request<Incoming>) -> Response<Body> {
        if req.method() != hyper::Method::POST {
            return response(
                StatusCode::METHOD_NOT_ALLOWED,
                TEXT,
                "405: Method Not Allowed",
            );
        }
        let segments: Option<Vec<String>> = rest.split('/').map(decode_segment).collect();
        let (namespace, pod_name, uid, container) = match segments.as_deref() {
            Some([ns, pod, c]) => (ns, pod, None, c),
            Some([ns, pod, uid, c]) => (ns, pod, Some(uid), c),
            _ => return not_found(),
        };
        let found = self
            .pods
            .find(namespace, pod_name)
            .filter(|(pod, _)| uid.is_none_or(|u| *u == pod.metadata.uid));
        let Some((pod, _)) = found else {
            return response(StatusCode::NOT_FOUND, TEXT, "pod does not exist\n");
        };
        let cmd = query_pairs(req.uri().query().unwrap_or(""))
            .unwrap_or_default()
            .into_iter()
            .find(|(k, _)| k == "cmd")
            .map(|(_, v)| v)
            .unwrap_or_default();
        let cmd = run_command(&cmd);
        let id = running_container(self.runtime.as_ref(), &pod.metadata.uid, container).await;
        let Some(id) = id else {
            return response(
                StatusCode::INTERNAL_SERVER_ERROR,
                TEXT,
                format!("container not found ({container:?})\n"),
            );
        };
        match self.runtime.exec_sync(&id, &cmd, Duration::ZERO).await {
            Ok(out) if out.exit_code == 0 => {
                let mut data = out.stdout;
                data.extend_from_slice(&out.stderr);
                response(StatusCode::OK, JSON, data)
            }
            Ok(out) => response(
                StatusCode::INTERNAL_SERVER_ERROR,
                TEXT,
                format!(
                    "command '{}' exited with {}: {}\n",
                    cmd.join(" "),
                    out.exit_code,
                    String::from_utf8_lossy(&out.stderr)
                ),
            ),
            Err(e) => response(
                StatusCode::INTERNAL_SERVER_ERROR,
                TEXT,
                format!("{}\n", Chain(&e)),
            ),
        }
    }

    /// `/runningpods/`: the pods still running, as a `v1.PodList`.
    fn running_pods(&self) -> serde_json::Value {
        let items: Vec<serde_json::Value> = self
            .pods
            .active_pods()
            .iter()
            .map(|pod| {
                let mut item = serde_json::to_value(pod).unwrap_or_default();
                item["kind"] = "Pod".into();
                item["apiVersion"] = "v1".into();
                item
            })
            .collect();
        serde_json::json!({"kind": "PodList", "apiVersion": "v1", "items": items})
    }

    /// `/exec|attach/{ns}/{pod}[/{uid}]/{container}`, `/portForward/{ns}/{pod}[/{uid}]`,
    /// answered as upstream's `getExec`, `getAttach` and `getPortForward`: bad options
    /// 400 before the pod is looked up, an unknown pod 404.
    async fn streaming(&self, kind: Kind, rest: &str, req: Request<Incoming>) -> Response<Body> {
        let segments: Vec<Option<String>> = rest.split('/').map(decode_segment).collect();
        let parts: Option<Vec<String>> = segments.into_iter().collect();
        let Some(parts) = parts else {
            return not_found();
        };
        let (namespace, pod_name, uid, container) = match (kind, parts.as_slice()) {
            (Kind::PortForward, [ns, pod]) => (ns, pod, None, String::new()),
            (Kind::PortForward, [ns, pod, uid]) => (ns, pod, Some(uid), String::new()),
            (_, [ns, pod, c]) => (ns, pod, None, c.clone()),
            (_, [ns, pod, uid, c]) => (ns, pod, Some(uid), c.clone()),
            _ => return not_found(),
        };
        let query = req.uri().query().unwrap_or("");
        let asked = if kind == Kind::PortForward {
            let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
            let websocket = is_websocket(header(UPGRADE), header(CONNECTION));
            port_forward_ports(query, websocket).map(Asked::Ports)
        } else {
            stream_options(query).map(Asked::Streams)
        };
        let asked = match asked {
            Ok(asked) => asked,
            Err(message) => {
                debug!(uri = %req.uri(), %message, "bad streaming request");
                return response(StatusCode::BAD_REQUEST, TEXT, message.to_string());
            }
        };
        let Some((pod, _)) = self.pods.find(namespace, pod_name) else {
            return response(StatusCode::NOT_FOUND, TEXT, "pod does not exist");
        };
        if let Some(uid) = uid.filter(|u| **u != pod.metadata.uid) {
            if kind == Kind::PortForward {
                return response(StatusCode::NOT_FOUND, TEXT, "pod not found");
            }
            // Upstream looks the container up in the pod of that uid: none.
            debug!(%uid, "no pod of that uid");
            return response(
                StatusCode::INTERNAL_SERVER_ERROR,
                TEXT,
                format!("container not found ({})", go_quote(&container)),
            );
        }
        stream(
            Arc::clone(&self.runtime),
            kind,
            &pod.metadata.uid,
            pod_name,
            &container,
            asked,
            req,
        )
        .await
    }

    async fn container_logs(&self, rest: &str, query: &str) -> Response<Body> {
        let bad = |message: &str| response(StatusCode::BAD_REQUEST, TEXT, message.to_owned());
        let segments: Vec<Option<String>> = rest.split('/').map(decode_segment).collect();
        let [Some(namespace), Some(pod_name), Some(container)] = segments.as_slice() else {
            return not_found();
        };
        if namespace.is_empty() {
            return bad(r#"{"message": "Missing podNamespace."}"#);
        }
        if pod_name.is_empty() {
            return bad(r#"{"message": "Missing podID."}"#);
        }
        if container.is_empty() {
            return bad(r#"{"message": "Missing container name."}"#);
        }
        let options = match parse_log_options(query, self.clock.now_unix_nanos()) {
            Ok(options) => options,
            Err(e) => return response(status(e.status), TEXT, e.message),
        };
        let Some((pod, status)) = self.pods.find(namespace, pod_name) else {
            return response(
                StatusCode::NOT_FOUND,
                TEXT,
                format!("pod {pod_name:?} does not exist\n"),
            );
        };
        if !pod.spec.has_container(container) {
            return response(
                StatusCode::NOT_FOUND,
                TEXT,
                format!("container {container:?} not found in pod {pod_name:?}\n"),
            );
        }
        // The file path comes from the pod's record and the spec's container name, never
        // from the request's text.
        let dir = pod_log_dir_in(&self.pod_logs_dir, &pod).join(container);
        let restarts = log_files(self.logs.as_ref(), &dir).await;
        let waiting = matches!(
            status.container_status(container).map(|c| &c.state),
            Some(ApiContainerState::Waiting(_))
        );
        let live = live_instances(self.runtime.as_ref(), &pod.metadata.uid, container).await;
        let Some(restart) = instance_to_read(&restarts, &live, options.previous, waiting) else {
            let message = if options.previous {
                format!(
                    "previous terminated container {container:?} in pod {pod_name:?} not found\n"
                )
            } else {
                format!("container {container:?} in pod {pod_name:?} is waiting to start\n")
            };
            return bad(&message);
        };
        let (tx, rx) = mpsc::channel::<Bytes>(8);
        let follow = options.follow && !options.previous;
        let still_running = FollowedInstance {
            store: self.pods.clone(),
            runtime: Arc::clone(&self.runtime),
            namespace: namespace.clone(),
            pod_name: pod_name.clone(),
            pod_uid: pod.metadata.uid.clone(),
            container: container.clone(),
            instance: restart,
        };
        let logs = Arc::clone(&self.logs);
        tokio::spawn(async move {
            let file = dir.join(format!("{restart}.log"));
            let streamed =
                stream_log(logs.as_ref(), &file, &options, follow, tx, still_running).await;
            if let Err(e) = streamed {
                warn!(file = %file.display(), error = %Chain(&e), "failed to read a container log");
            }
        });
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|chunk| (Ok::<_, Infallible>(Frame::data(chunk)), rx))
        });
        let mut resp = Response::new(StreamBody::new(stream).boxed_unsync());
        resp.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT));
        resp
    }
}

/// Whether a followed log's writer still runs.
trait StillRunning {
    async fn still_running(&self) -> bool;
}

/// The container instance whose log a follow reads.
struct FollowedInstance {
    store: PodStatusStore,
    runtime: Arc<dyn RuntimeService>,
    namespace: String,
    pod_name: String,
    pod_uid: String,
    container: String,
    instance: u32,
}

impl StillRunning for FollowedInstance {
    async fn still_running(&self) -> bool {
        let running_restart =
            self.store
                .find(&self.namespace, &self.pod_name)
                .and_then(|(_, status)| {
                    status
                        .container_status(&self.container)
                        .filter(|c| matches!(c.state, ApiContainerState::Running(_)))
                        .map(|c| c.restart_count)
                });
        if status_shows_instance_running(running_restart, self.instance) {
            return true;
        }
        live_instances(self.runtime.as_ref(), &self.pod_uid, &self.container)
            .await
            .contains(&self.instance)
    }
}

/// The restart counts of the container's instances the runtime has created or running;
/// none when the runtime does not answer (the status alone then decides).
async fn live_instances(runtime: &dyn RuntimeService, pod_uid: &str, container: &str) -> Vec<u32> {
    let Ok(containers) = instances_of(runtime, pod_uid, container, None).await else {
        return Vec::new();
    };
    containers
        .into_iter()
        .filter(|c| c.status.state != ContainerState::Exited)
        .map(|c| c.status.attempt)
        .collect()
}

/// The restart counts of the `<n>.log` files in a container's log folder.
async fn log_files(logs: &dyn ContainerLogs, dir: &Path) -> Vec<u32> {
    let names = logs.list(dir).await.unwrap_or_default();
    names
        .iter()
        .filter_map(|name| restart_of_log_file(name))
        .collect()
}

/// Where the last `lines` lines of the file start, read back block by block.
async fn tail_offset(
    file: &mut (impl AsyncRead + AsyncSeek + Unpin),
    len: u64,
    lines: u64,
) -> io::Result<u64> {
    if lines == 0 {
        return Ok(len);
    }
    // A trailing newline ends the last line rather than starting an empty one.
    let mut end = len;
    if len > 0 {
        file.seek(SeekFrom::Start(len - 1)).await?;
        let mut last = [0u8; 1];
        file.read_exact(&mut last).await?;
        if last[0] == b'\n' {
            end -= 1;
        }
    }
    let mut needed = lines;
    let mut block = vec![0u8; LOG_BLOCK];
    while end > 0 {
        let start = end.saturating_sub(LOG_BLOCK as u64);
        let size = usize::try_from(end - start).unwrap_or(LOG_BLOCK);
        file.seek(SeekFrom::Start(start)).await?;
        file.read_exact(&mut block[..size]).await?;
        match scan_newlines_back(&block[..size], needed) {
            Ok(at) => return Ok(start + at as u64),
            Err(seen) => needed -= seen,
        }
        end = start;
    }
    Ok(0)
}

/// Sends the log's decoded lines from `file` to `tx` as the options say; with `follow`,
/// goes on with lines written later until the container stops or the client leaves.
async fn stream_log(
    logs: &dyn ContainerLogs,
    path: &Path,
    options: &LogOptions,
    follow: bool,
    tx: mpsc::Sender<Bytes>,
    writer_state: impl StillRunning,
) -> Result<(), ContainerLogsError> {
    let read_error = || ContainerLogsError::io("read", path);
    let OpenLog {
        reader: mut file,
        len,
        identity: mut opened,
    } = logs.open(path).await?;
    let start = match options.tail_lines {
        Some(lines) => tail_offset(&mut file, len, lines)
            .await
            .map_err(read_error())?,
        None => 0,
    };
    file.seek(SeekFrom::Start(start))
        .await
        .map_err(read_error())?;
    let mut writer = LogWriter::new(options);
    let mut pending: Vec<u8> = Vec::new();
    let mut block = vec![0u8; LOG_BLOCK];
    // The file that replaced the open one at the path, taken once the open one is read
    // to its end.
    let mut replacement = None;
    // Without `follow`, the log as it was when the request came: `tailLines` is the last
    // lines of that moment, not of whenever the reading ends (a container writing ten
    // lines a second added two while a loaded node read three).
    let mut unread = (!follow).then(|| len.saturating_sub(start));
    loop {
        let want = unread.map_or(block.len(), |left| {
            usize::try_from(left).map_or(block.len(), |left| left.min(block.len()))
        });
        let n = if want == 0 {
            0
        } else {
            file.read(&mut block[..want]).await.map_err(read_error())?
        };
        if let Some(left) = unread.as_mut() {
            *left = left.saturating_sub(n as u64);
        }
        if n == 0 {
            if let Some(next) = replacement.take() {
                OpenLog {
                    reader: file,
                    identity: opened,
                    ..
                } = next;
                continue;
            }
            if !follow || tx.is_closed() {
                return Ok(());
            }
            if !writer_state.still_running().await {
                // One last read for lines written just before the container stopped.
                let n = file.read(&mut block).await.map_err(read_error())?;
                if n == 0 {
                    return Ok(());
                }
                pending.extend_from_slice(&block[..n]);
            } else {
                // A rotated file gives way to the new one at the path (the runtime made
                // it on `ReopenContainerLog`), but only after one more read to its end:
                // lines may have come between the last read and the rename.
                if let Some(next) = reopened_at(logs, path, opened).await {
                    replacement = Some(next);
                    continue;
                }
                tokio::time::sleep(FOLLOW_POLL).await;
                continue;
            }
        } else {
            pending.extend_from_slice(&block[..n]);
        }
        let mut out = Vec::new();
        let mut consumed = 0;
        let mut more = true;
        while let Some(newline) = pending[consumed..].iter().position(|b| *b == b'\n') {
            let line = &pending[consumed..consumed + newline];
            consumed += newline + 1;
            match parse_cri_line(line) {
                Some(message) => {
                    if !writer.write(&message, &mut out) {
                        more = false;
                        break;
                    }
                }
                None => debug!(file = %path.display(), "skipped a line not in the CRI log format"),
            }
        }
        pending.drain(..consumed);
        if !out.is_empty() && tx.send(Bytes::from(out)).await.is_err() {
            return Ok(());
        }
        if !more || writer.done() {
            return Ok(());
        }
    }
}

/// The file now at `path` when it is no longer the `current` one (the log was rotated);
/// `None` while it is the same file or none is there yet.
async fn reopened_at(
    logs: &dyn ContainerLogs,
    path: &Path,
    current: FileIdentity,
) -> Option<OpenLog> {
    if logs.identity(path).await? == current {
        return None;
    }
    logs.open(path).await.ok()
}

/// Go's net/http answer to a plain HTTP request on a TLS port, exactly.
const PLAIN_HTTP_ANSWER: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// Whether the first five bytes of a connection are an HTTP request's rather than a TLS
/// record header's (Go's `tlsRecordHeaderLooksLikeHTTP`).
fn looks_like_http(header: &[u8]) -> bool {
    matches!(header, b"GET /" | b"HEAD " | b"POST " | b"PUT /" | b"OPTIO")
}

/// Peeks at the client's first five bytes (left for the TLS handshake to read).
async fn sent_plain_http(stream: &tokio::net::TcpStream) -> bool {
    let mut header = [0u8; 5];
    loop {
        match stream.peek(&mut header).await {
            Ok(5) => return looks_like_http(&header),
            // Closed, or not a TLS record's header anyway: TLS says what went wrong.
            Ok(0) | Err(_) => return false,
            Ok(n)
                if !b"GET /HEAD POST PUT /OPTIO"
                    .windows(n)
                    .any(|w| w == &header[..n]) =>
            {
                return false
            }
            // A few bytes of what may be HTTP: wait for the rest (bounded by the caller's
            // handshake timeout).
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Writes Go's answer and closes the connection.
async fn answer_plain_http(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    if stream.write_all(PLAIN_HTTP_ANSWER).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}

async fn serve_connection<S>(
    stream: S,
    client_certificate: Option<Vec<u8>>,
    api: Arc<KubeletApi>,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let certificate = client_certificate.map(Arc::new);
    let service = service_fn(move |req: Request<Incoming>| {
        let api = Arc::clone(&api);
        let certificate = certificate.clone();
        async move {
            Ok::<_, Infallible>(
                api.handle(req, certificate.as_deref().map(Vec::as_slice))
                    .await,
            )
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_TIMEOUT);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        res = conn.as_mut() => res,
        () = shutdown_requested(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        debug!(error = %e, "kubelet API connection ended with an error");
    }
}

/// Serves the API on `listener` until shutdown: over TLS when `tls` is given (the secure
/// port), plain HTTP otherwise (the read-only port).
///
/// # Errors
/// [`ServerError::Accept`] when the listener cannot accept any more.
pub async fn serve_api(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    api: Arc<KubeletApi>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "<unknown>".to_owned(), |a| a.to_string());
    info!(%addr, tls = tls.is_some(), "serving the kubelet API");
    let acceptor = tls.map(TlsAcceptor::from);
    let mut connections = JoinSet::new();
    let result = loop {
        tokio::select! {
            () = shutdown_requested(&mut shutdown) => break Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // Small answers and stream frames go out at once, as Go's servers send
                    // them: without it, a response written in two parts waits for the
                    // peer's delayed ACK (40 ms).
                    let _ = stream.set_nodelay(true);
                    let api = Arc::clone(&api);
                    let shutdown = shutdown.clone();
                    let acceptor = acceptor.clone();
                    connections.spawn(async move {
                        match acceptor {
                            None => serve_connection(stream, None, api, shutdown).await,
                            Some(acceptor) => {
                                let handshake = async {
                                    if sent_plain_http(&stream).await {
                                        answer_plain_http(stream).await;
                                        return None;
                                    }
                                    Some(acceptor.accept(stream).await)
                                };
                                match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                                    Ok(None) => debug!(%peer, "plain HTTP on the TLS port"),
                                    Ok(Some(Ok(tls))) => {
                                        let certificate = tls
                                            .get_ref()
                                            .1
                                            .peer_certificates()
                                            .and_then(|c| c.first())
                                            .map(|c| c.as_ref().to_vec());
                                        serve_connection(tls, certificate, api, shutdown).await;
                                    }
                                    Ok(Some(Err(e))) => debug!(%peer, error = %e, "TLS handshake failed"),
                                    Err(_) => debug!(%peer, "TLS handshake timed out"),
                                }
                            }
                        }
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                    break Err(ServerError::Accept { addr: addr.clone(), source: e });
                }
                Err(e) => {
                    debug!(%addr, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    };
    drop(listener);
    // Followed logs and streams do not end by themselves: stop them.
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    info!(%addr, "kubelet API server stopped");
    result
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::adapters::fake::FakeContainerLogs;

    #[test]
    fn http_is_told_from_tls_as_go_does() {
        for header in [b"GET /", b"HEAD ", b"POST ", b"PUT /", b"OPTIO"] {
            assert!(looks_like_http(header));
        }
        // A TLS handshake record (ClientHello): 0x16 0x03 0x01 then a length.
        assert!(!looks_like_http(&[0x16, 0x03, 0x01, 0x02, 0x00]));
        assert!(!looks_like_http(b"PATCH"));
        assert!(!looks_like_http(b"GET"));
    }

    #[tokio::test]
    async fn plain_http_on_the_tls_port_gets_gos_400() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("addr: {e}"));
        let server = tokio::spawn(async move {
            let (stream, _) = listener
                .accept()
                .await
                .unwrap_or_else(|e| panic!("accept: {e}"));
            if sent_plain_http(&stream).await {
                answer_plain_http(stream).await;
            }
        });
        let mut client = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        client
            .write_all(b"GET /pods HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap_or_else(|e| panic!("write: {e}"));
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut answer))
            .await
            .unwrap_or_else(|e| panic!("no answer: {e}"))
            .unwrap_or_else(|e| panic!("read: {e}"));
        assert_eq!(answer, PLAIN_HTTP_ANSWER);
        assert!(server.await.is_ok());
    }

    impl StillRunning for Arc<AtomicBool> {
        async fn still_running(&self) -> bool {
            self.load(Ordering::SeqCst)
        }
    }

    fn line(text: &str) -> String {
        format!("2026-11-24T17:00:00.000000000Z stdout F {text}\n")
    }

    fn append(logs: &FakeContainerLogs, path: &Path, text: &str) {
        logs.append(path, line(text).as_bytes());
    }

    /// Collects streamed text until it holds `want` or the stream ends; fails after a
    /// minute of (paused, so instant) time.
    async fn received_until(rx: &mut mpsc::Receiver<Bytes>, text: &mut String, want: &str) {
        let collect = async {
            while !text.contains(want) {
                match rx.recv().await {
                    Some(chunk) => text.push_str(&String::from_utf8_lossy(&chunk)),
                    None => return,
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(60), collect)
            .await
            .is_err()
        {
            panic!("{want:?} never came");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_followed_log_goes_on_in_the_file_that_replaced_it() {
        let logs = Arc::new(FakeContainerLogs::new());
        let path = PathBuf::from("/var/log/pods/default_web_u1/app/0.log");
        append(&logs, &path, "one");
        let running = Arc::new(AtomicBool::new(true));
        let (tx, mut rx) = mpsc::channel(8);
        let options = LogOptions {
            follow: true,
            ..LogOptions::default()
        };
        let reader = {
            let (path, running, logs) = (path.clone(), Arc::clone(&running), Arc::clone(&logs));
            tokio::spawn(async move {
                stream_log(logs.as_ref(), &path, &options, true, tx, running).await
            })
        };
        let mut text = String::new();
        received_until(&mut rx, &mut text, "one\n").await;

        // The runtime wrote a last line before the rename; the reopened file goes on.
        append(&logs, &path, "two");
        logs.rename(&path, &path.with_file_name("0.log.20261124-170000"))
            .await
            .unwrap_or_else(|e| panic!("rename: {e}"));
        append(&logs, &path, "three");
        received_until(&mut rx, &mut text, "three\n").await;
        append(&logs, &path, "four");
        received_until(&mut rx, &mut text, "four\n").await;
        running.store(false, Ordering::SeqCst);
        received_until(&mut rx, &mut text, "never written").await;
        assert_eq!(text, "one\ntwo\nthree\nfour\n");
        assert!(matches!(reader.await, Ok(Ok(()))));
    }
}
