//! `/exec`, `/attach`, `/portForward`: the runtime's streaming server URL (CRI `Exec`,
//! `Attach`, `PortForward`), then the client's upgraded connection (SPDY or WebSocket, as
//! the API server sends it) proxied to it both ways, as upstream's `proxyStream`.

use std::collections::BTreeMap;
use std::sync::Arc;

use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, HOST};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tracing::{debug, warn};

use super::api::Body;
use crate::domain::kubelet_api::streaming::StreamOptions;
use crate::domain::kuberuntime::labels::{CONTAINER_NAME_LABEL, POD_UID_LABEL};
use crate::domain::kuberuntime::runtime::{
    ContainerEntry, ContainerFilter, ContainerState, SandboxFilter, SandboxState,
};
use crate::domain::units::go_quote;
use crate::ports::error::Chain;
use crate::ports::runtime::{RuntimeError, RuntimeService, StreamRequest};

/// Which streaming call a path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Exec,
    Attach,
    PortForward,
}

/// What the request asked for, read before the pod is looked up
/// (`domain::kubelet_api::streaming`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// An exec's or attach's streams (and an exec's command).
    Streams(StreamOptions),
    /// A port-forward's ports (none for SPDY: its streams name them).
    Ports(Vec<u16>),
}

fn plain(status: StatusCode, body: String) -> Response<Body> {
    let mut resp = Response::new(
        http_body_util::Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = status;
    resp
}

/// The runtime's id of the pod's running container, or of its ready sandbox.
async fn target(
    runtime: &dyn RuntimeService,
    kind: Kind,
    pod_uid: &str,
    container: &str,
) -> Option<String> {
    if kind == Kind::PortForward {
        let labels = BTreeMap::from([(POD_UID_LABEL.to_owned(), pod_uid.to_owned())]);
        let filter = SandboxFilter {
            state: Some(SandboxState::Ready),
            labels,
            ..SandboxFilter::default()
        };
        let sandboxes = runtime.list_pod_sandboxes(&filter).await.ok()?;
        return sandboxes.into_iter().next().map(|s| s.status.id);
    }
    running_container(runtime, pod_uid, container).await
}

/// The runtime's id of the pod's running container named `container`.
pub async fn running_container(
    runtime: &dyn RuntimeService,
    pod_uid: &str,
    container: &str,
) -> Option<String> {
    let containers = instances_of(runtime, pod_uid, container, Some(ContainerState::Running))
        .await
        .ok()?;
    containers.into_iter().next().map(|c| c.status.id)
}

/// The runtime's instances of the pod's container `container`, in `state` when given.
pub async fn instances_of(
    runtime: &dyn RuntimeService,
    pod_uid: &str,
    container: &str,
    state: Option<ContainerState>,
) -> Result<Vec<ContainerEntry>, RuntimeError> {
    let labels = BTreeMap::from([
        (POD_UID_LABEL.to_owned(), pod_uid.to_owned()),
        (CONTAINER_NAME_LABEL.to_owned(), container.to_owned()),
    ]);
    let filter = ContainerFilter {
        state,
        labels,
        ..ContainerFilter::default()
    };
    runtime.list_containers(&filter).await
}

/// Answers a streaming request for the pod `pod_uid` (found by the caller), with what the
/// request `asked` (read, and refused when bad, by the caller).
pub async fn stream(
    runtime: Arc<dyn RuntimeService>,
    kind: Kind,
    pod_uid: &str,
    pod_name: &str,
    container: &str,
    asked: Asked,
    req: Request<Incoming>,
) -> Response<Body> {
    let Some(id) = target(runtime.as_ref(), kind, pod_uid, container).await else {
        // Upstream's `GetExec`/`GetAttach`/`GetPortForward` errors, written as 500s.
        let message = if kind == Kind::PortForward {
            format!("pod not found ({})", go_quote(pod_name))
        } else {
            format!("container not found ({})", go_quote(container))
        };
        return plain(StatusCode::INTERNAL_SERVER_ERROR, message);
    };
    let request = match (kind, asked) {
        (Kind::Exec, Asked::Streams(o)) => StreamRequest::Exec {
            container_id: id,
            cmd: o.command,
            tty: o.tty,
            stdin: o.stdin,
            stdout: o.stdout,
            stderr: o.stderr,
        },
        (Kind::Attach, Asked::Streams(o)) => StreamRequest::Attach {
            container_id: id,
            tty: o.tty,
            stdin: o.stdin,
            stdout: o.stdout,
            stderr: o.stderr,
        },
        (Kind::PortForward, Asked::Ports(ports)) => StreamRequest::PortForward {
            sandbox_id: id,
            ports: ports.into_iter().map(i32::from).collect(),
        },
        (kind, asked) => {
            warn!(?kind, ?asked, "a streaming request read as another kind");
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error".into());
        }
    };
    let url = match runtime.streaming_url(&request).await {
        Ok(url) => url,
        Err(e) => {
            warn!(error = %Chain(&e), uri = %req.uri(), "the runtime gave no streaming URL");
            return plain(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"));
        }
    };
    proxy(req, &url).await
}

/// Sends the client's request to `url` and, when it upgrades, joins both connections.
async fn proxy(mut req: Request<Incoming>, url: &str) -> Response<Body> {
    let bad_gateway = |why: String| plain(StatusCode::BAD_GATEWAY, format!("{why}\n"));
    let Ok(uri) = url.parse::<Uri>() else {
        return bad_gateway(format!("bad streaming URL {url:?}"));
    };
    let Some(authority) = uri.authority().map(|a| a.as_str().to_owned()) else {
        return bad_gateway(format!("bad streaming URL {url:?}"));
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let stream = match tokio::net::TcpStream::connect(&authority).await {
        Ok(s) => {
            // The stream's small frames (SPDY's stream set-up, a shell's keystrokes) must
            // not wait for the peer's delayed ACK; Go's dialer sets this too.
            let _ = s.set_nodelay(true);
            s
        }
        Err(e) => {
            return bad_gateway(format!(
                "cannot reach the streaming server {authority}: {e}"
            ))
        }
    };
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(pair) => pair,
        Err(e) => return bad_gateway(format!("streaming server {authority}: {e}")),
    };
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            debug!(error = %e, "streaming server connection ended");
        }
    });
    let mut upstream = Request::builder().method(req.method().clone()).uri(path);
    for (name, value) in req.headers() {
        if name != HOST {
            upstream = upstream.header(name, value);
        }
    }
    let upstream = upstream
        .header(
            HOST,
            HeaderValue::from_str(&authority).unwrap_or(HeaderValue::from_static("localhost")),
        )
        .body(Empty::<Bytes>::new());
    let Ok(upstream) = upstream else {
        return bad_gateway("cannot build the streaming request".into());
    };
    let mut answer = match sender.send_request(upstream).await {
        Ok(a) => a,
        Err(e) => return bad_gateway(format!("streaming server {authority}: {e}")),
    };
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = answer.status();
        let headers = answer.headers().clone();
        let body = answer
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let mut resp = plain(status, String::new());
        *resp.body_mut() = http_body_util::Full::new(body)
            .map_err(|never| match never {})
            .boxed_unsync();
        *resp.headers_mut() = headers;
        return resp;
    }
    let mut resp = plain(StatusCode::SWITCHING_PROTOCOLS, String::new());
    *resp.headers_mut() = answer.headers().clone();
    let server_side = hyper::upgrade::on(&mut answer);
    let client_side = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match tokio::try_join!(client_side, server_side) {
            Ok((client, server)) => {
                let mut client = TokioIo::new(client);
                let mut server = TokioIo::new(server);
                if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut server).await {
                    debug!(error = %e, "stream ended");
                }
            }
            Err(e) => debug!(error = %e, "upgrade failed"),
        }
    });
    resp
}
