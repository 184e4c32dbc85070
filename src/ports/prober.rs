//! Network checks for probes and hooks: an HTTP GET, a TCP connect, a gRPC health
//! check, made from the node into the pod's network. `exec` goes through
//! `RuntimeService::exec_sync`.
//!
//! Every answer is a [`HandlerOutcome`] whose text is upstream's: a connection refused
//! or a timeout is a failure with its message (upstream converts such errors into
//! failures), not an error of the call.

use std::time::Duration;

use async_trait::async_trait;

use crate::domain::probe::{HandlerOutcome, HttpTarget};

/// What failed below a prober's request (a connection, TLS, HTTP), in Go's words.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why an HTTP GET got no answer. Printed with its causes (`ports::error::Chain`) it reads
/// as Go's client error, which upstream's messages quote: `Get "<url>": dial tcp ...`.
#[derive(Debug, thiserror::Error)]
pub enum ProberError {
    /// No network prober in this context (the planner, unit tests).
    #[error("no network prober configured")]
    Unavailable,
    /// The request to `url` failed.
    #[error("Get {url:?}")]
    Get {
        url: String,
        #[source]
        source: Cause,
    },
    /// Go's client gives up after this many redirects.
    #[error("Get {url:?}: stopped after {max} redirects")]
    Redirects { url: String, max: usize },
}

#[async_trait]
pub trait Prober: Send + Sync {
    /// A GET of `target`, following redirects to the same host (at most 10); a
    /// redirect to another host answers `Warning`; 200..400 is healthy.
    async fn http_get(&self, target: &HttpTarget, timeout: Duration) -> HandlerOutcome;
    /// A lifecycle hook's GET (redirects as for probes, no timeout of its own): any
    /// answer is a success whatever its status; the error says why no answer came.
    async fn http_hook(&self, target: &HttpTarget) -> Result<(), ProberError>;
    /// A TCP connection to `host:port` that opens within `timeout` is healthy.
    async fn tcp(&self, host: &str, port: u16, timeout: Duration) -> HandlerOutcome;
    /// `grpc.health.v1.Health/Check` for `service` answering `SERVING` is healthy.
    async fn grpc(&self, host: &str, port: u16, service: &str, timeout: Duration)
        -> HandlerOutcome;
}

/// A prober for contexts without a network (the planner, unit tests): every check
/// answers an error, which a probe worker throws away.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProber;

#[async_trait]
impl Prober for NoProber {
    async fn http_get(&self, _target: &HttpTarget, _timeout: Duration) -> HandlerOutcome {
        HandlerOutcome::Error(ProberError::Unavailable.to_string())
    }

    async fn http_hook(&self, _target: &HttpTarget) -> Result<(), ProberError> {
        Err(ProberError::Unavailable)
    }

    async fn tcp(&self, _host: &str, _port: u16, _timeout: Duration) -> HandlerOutcome {
        HandlerOutcome::Error(ProberError::Unavailable.to_string())
    }

    async fn grpc(
        &self,
        _host: &str,
        _port: u16,
        _service: &str,
        _timeout: Duration,
    ) -> HandlerOutcome {
        HandlerOutcome::Error(ProberError::Unavailable.to_string())
    }
}
