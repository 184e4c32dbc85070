//! The prober against real local servers: a hyper HTTP server, a TCP listener, an
//! HTTP/2 server answering the gRPC health check.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::*;

type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// An HTTP server on 127.0.0.1 answering by path; records each request's path and
/// User-Agent.
async fn http_server() -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let log = Arc::clone(&log);
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let agent = req
                    .headers()
                    .get("user-agent")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let path = req.uri().path().to_owned();
                log.lock().expect("log").push((path.clone(), agent));
                let (status, location) = match path.as_str() {
                    "/ok" => (200, None),
                    "/same" => (302, Some("/ok".to_owned())),
                    "/other" => (302, Some(format!("http://127.0.0.2:{}/ok", addr.port()))),
                    "/loop" => (301, Some("/loop".to_owned())),
                    _ => (503, None),
                };
                let mut response = Response::builder().status(status);
                if let Some(location) = location {
                    response = response.header("Location", location);
                }
                let body = Full::new(Bytes::from_static(b"body"));
                async move { Ok::<_, Infallible>(response.body(body).expect("response")) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    (addr, seen)
}

fn target(addr: SocketAddr, path: &str) -> HttpTarget {
    HttpTarget {
        https: false,
        host: addr.ip().to_string(),
        port: addr.port(),
        path: path.into(),
        headers: vec![("User-Agent".into(), "kube-probe/1.26".into())],
    }
}

const TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::test]
async fn http_answers_as_upstreams_prober() {
    let (addr, seen) = http_server().await;
    let prober = NetworkProber::new();
    assert_eq!(
        prober.http_get(&target(addr, "/ok"), TIMEOUT).await,
        HandlerOutcome::Success("body".into())
    );
    assert_eq!(
        prober.http_get(&target(addr, "/missing"), TIMEOUT).await,
        HandlerOutcome::Failure("HTTP probe failed with statuscode: 503".into())
    );
    // The same host is followed; another host ends with a warning.
    assert_eq!(
        prober.http_get(&target(addr, "/same"), TIMEOUT).await,
        HandlerOutcome::Success("body".into())
    );
    assert_eq!(
        prober.http_get(&target(addr, "/other"), TIMEOUT).await,
        HandlerOutcome::Warning("Probe terminated redirects, Response body: body".into())
    );
    assert_eq!(
        prober.http_get(&target(addr, "/loop"), TIMEOUT).await,
        HandlerOutcome::Failure(format!(
            "Get \"http://{addr}/loop\": stopped after 10 redirects"
        ))
    );
    // A hook takes any answer: a 503 is fine, no answer is not.
    assert!(prober.http_hook(&target(addr, "/missing")).await.is_ok());
    let seen = seen.lock().expect("seen").clone();
    assert!(seen.iter().all(|(_, agent)| agent == "kube-probe/1.26"));
    assert_eq!(seen.iter().filter(|(p, _)| p == "/loop").count(), 10);
}

#[tokio::test]
async fn http_and_tcp_to_a_closed_port_fail_with_gos_words() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let prober = NetworkProber::new();
    assert_eq!(
        prober.tcp("127.0.0.1", addr.port(), TIMEOUT).await,
        HandlerOutcome::Success(String::new())
    );
    drop(listener);
    assert_eq!(
        prober.tcp("127.0.0.1", addr.port(), TIMEOUT).await,
        HandlerOutcome::Failure(format!("dial tcp {addr}: connect: connection refused"))
    );
    assert_eq!(
        prober.http_get(&target(addr, "/"), TIMEOUT).await,
        HandlerOutcome::Failure(format!(
            "Get \"http://{addr}/\": dial tcp {addr}: connect: connection refused"
        ))
    );
    assert_eq!(
        prober
            .http_hook(&target(addr, "/"))
            .await
            .map_err(|e| crate::ports::error::Chain(&e).to_string()),
        Err(format!(
            "Get \"http://{addr}/\": dial tcp {addr}: connect: connection refused"
        ))
    );
}

/// An HTTP/2 server answering every gRPC call with a `HealthCheckResponse` whose
/// status is read from `status` at each call.
async fn grpc_health_server(status: Arc<Mutex<i32>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let status = Arc::clone(&status);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(stream).await else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    assert_eq!(request.uri().path(), "/grpc.health.v1.Health/Check");
                    let response = hyper::Response::builder()
                        .header("content-type", "application/grpc")
                        .body(())
                        .expect("response");
                    let Ok(mut send) = respond.send_response(response, false) else {
                        return;
                    };
                    let value = *status.lock().expect("status");
                    let message =
                        prost::Message::encode_to_vec(&grpc::HealthCheckResponse { status: value });
                    let mut frame = vec![0u8];
                    frame.extend_from_slice(
                        &u32::try_from(message.len()).unwrap_or(0).to_be_bytes(),
                    );
                    frame.extend_from_slice(&message);
                    let _ = send.send_data(Bytes::from(frame), false);
                    let mut trailers = hyper::HeaderMap::new();
                    trailers.insert("grpc-status", hyper::header::HeaderValue::from_static("0"));
                    let _ = send.send_trailers(trailers);
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn grpc_serving_then_not_serving() {
    let status = Arc::new(Mutex::new(1));
    let addr = grpc_health_server(Arc::clone(&status)).await;
    let prober = NetworkProber::new();
    assert_eq!(
        prober.grpc("127.0.0.1", addr.port(), "", TIMEOUT).await,
        HandlerOutcome::Success("service healthy".into())
    );
    *status.lock().expect("status") = 2;
    assert_eq!(
        prober.grpc("127.0.0.1", addr.port(), "app", TIMEOUT).await,
        HandlerOutcome::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
    );
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let HandlerOutcome::Failure(message) = prober.grpc("127.0.0.1", port, "", TIMEOUT).await else {
        panic!("a failure");
    };
    assert!(
        message.starts_with(&format!(
            "error: failed to connect service at \"127.0.0.1:{port}\""
        )),
        "{message}"
    );
}
