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

#[async_trait]
pub trait Prober: Send + Sync {
    /// A GET of `target`, following redirects to the same host (at most 10); a
    /// redirect to another host answers `Warning`; 200..400 is healthy.
    async fn http_get(&self, target: &HttpTarget, timeout: Duration) -> HandlerOutcome;
    /// A lifecycle hook's GET (redirects as for probes, no timeout of its own): any
    /// answer is a success whatever its status; the error says why no answer came.
    async fn http_hook(&self, target: &HttpTarget) -> Result<(), String>;
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

const NO_PROBER: &str = "no network prober configured";

#[async_trait]
impl Prober for NoProber {
    async fn http_get(&self, _target: &HttpTarget, _timeout: Duration) -> HandlerOutcome {
        HandlerOutcome::Error(NO_PROBER.into())
    }

    async fn http_hook(&self, _target: &HttpTarget) -> Result<(), String> {
        Err(NO_PROBER.into())
    }

    async fn tcp(&self, _host: &str, _port: u16, _timeout: Duration) -> HandlerOutcome {
        HandlerOutcome::Error(NO_PROBER.into())
    }

    async fn grpc(
        &self,
        _host: &str,
        _port: u16,
        _service: &str,
        _timeout: Duration,
    ) -> HandlerOutcome {
        HandlerOutcome::Error(NO_PROBER.into())
    }
}
