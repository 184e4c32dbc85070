//! The network prober: HTTP(S) GETs over hyper (TLS by rustls, unverified as
//! upstream's probes are), TCP connects over tokio, gRPC health checks over tonic.
//! Messages follow upstream's (Go's error texts where it reports them).

mod grpc;
mod http;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::net::TcpStream;

use crate::domain::probe::target::join_host_port;
use crate::domain::probe::{HandlerOutcome, HttpTarget};
use crate::ports::error::Chain;
use crate::ports::prober::{Prober, ProberError};

/// The real prober; cheap to share (one TLS configuration for every probe).
#[derive(Clone)]
pub struct NetworkProber {
    tls: Arc<rustls::ClientConfig>,
}

impl Default for NetworkProber {
    fn default() -> Self {
        Self::new()
    }
}

impl NetworkProber {
    pub fn new() -> Self {
        Self {
            tls: Arc::new(http::insecure_tls_config()),
        }
    }
}

/// An I/O error as Go words it (`connection refused`, not `Connection refused (os
/// error 111)`).
/// An I/O error as Go prints it (see [`go_io_error`]), keeping the error.
#[derive(Debug)]
pub(super) struct GoIoError(pub std::io::Error);

impl std::fmt::Display for GoIoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&go_io_error(&self.0))
    }
}

impl std::error::Error for GoIoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Why a TCP connection did not open, in Go's dialer's words.
#[derive(Debug, thiserror::Error)]
pub(super) enum DialError {
    #[error("dial tcp {addr}: connect")]
    Connect {
        addr: String,
        #[source]
        source: GoIoError,
    },
    #[error("dial tcp {addr}: i/o timeout")]
    Timeout { addr: String },
}

fn go_io_error(error: &std::io::Error) -> String {
    let text = error.to_string();
    let text = match text.find(" (os error") {
        Some(i) => &text[..i],
        None => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Opens a TCP connection to `host:port` within `timeout`, or the failure as Go's
/// dialer reports it.
async fn dial(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, DialError> {
    let addr = join_host_port(host, port);
    match tokio::time::timeout(timeout, TcpStream::connect((host, port))).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(error)) => Err(DialError::Connect {
            addr,
            source: GoIoError(error),
        }),
        Err(_) => Err(DialError::Timeout { addr }),
    }
}

#[async_trait]
impl Prober for NetworkProber {
    async fn http_get(&self, target: &HttpTarget, timeout: Duration) -> HandlerOutcome {
        http::probe(Arc::clone(&self.tls), target, timeout).await
    }

    async fn http_hook(&self, target: &HttpTarget) -> Result<(), ProberError> {
        http::hook(Arc::clone(&self.tls), target).await
    }

    async fn tcp(&self, host: &str, port: u16, timeout: Duration) -> HandlerOutcome {
        match dial(host, port, timeout).await {
            Ok(_) => HandlerOutcome::Success(String::new()),
            Err(error) => HandlerOutcome::Failure(Chain(&error).to_string()),
        }
    }

    async fn grpc(
        &self,
        host: &str,
        port: u16,
        service: &str,
        timeout: Duration,
    ) -> HandlerOutcome {
        grpc::probe(host, port, service, timeout).await
    }
}

#[cfg(test)]
mod tests;
