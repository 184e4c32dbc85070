//! Narrow ports to the API server, one per kind of object the node writes: nodes, leases,
//! events, certificate signing requests; and the connector that makes a set of them from a
//! kubeconfig (rebuilt when the client certificate rotates). Objects are the domain's
//! API-shaped types; patch bodies are computed by the domain.

pub mod certificates;
pub mod connect;
pub mod events;
pub mod leases;
pub mod mirror_pods;
pub mod nodes;
pub mod objects;
pub mod pods;
pub mod storage;

use std::fmt;

use thiserror::Error;

pub use certificates::{CertificateApi, CertificatesError, CsrRef, CsrRequest};
pub use connect::{
    ApiClients, ApiConnector, ApiRequestObserver, ApiRequestRecord, ConnectError, KubeconfigSummary,
};
pub use events::{EventApi, EventsError};
pub use leases::{LeaseApi, LeasesError};
pub use mirror_pods::{MirrorList, MirrorPodApi, MirrorPodsError};
pub use nodes::{NodeApi, NodesError};
pub use objects::{ObjectsError, PodObjectsApi, TokenRequest};
pub use pods::{PodApi, PodList, PodWatch, PodWatchEvent, PodsError};
pub use storage::{CsiNodeApi, CsiNodeObject};

/// The boxed cause of a failed call (the client library's error), kept for the log.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What kind of failure a call met, for the caller's decision (retry, back off, give up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallErrorKind {
    /// No connection: refused, reset, DNS, TLS handshake (wrong CA, expired certificate).
    Unreachable,
    /// No answer within the call's timeout.
    Timeout,
    /// 401: the credentials were refused.
    Unauthorized,
    /// 403.
    Forbidden,
    /// 400/422: the object or patch was refused.
    Invalid,
    /// 429.
    Throttled,
    /// 5xx.
    Server,
    /// The answer could not be read.
    Decode,
    /// Anything else.
    Other,
}

impl fmt::Display for CallErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CallErrorKind::Unreachable => "the API server is unreachable",
            CallErrorKind::Timeout => "the API server did not answer in time",
            CallErrorKind::Unauthorized => "unauthorized",
            CallErrorKind::Forbidden => "forbidden",
            CallErrorKind::Invalid => "refused as invalid",
            CallErrorKind::Throttled => "throttled by the API server",
            CallErrorKind::Server => "API server error",
            CallErrorKind::Decode => "unreadable answer",
            CallErrorKind::Other => "failed",
        })
    }
}

/// A failed API call: its kind, the server's or the client's message, and the cause.
#[derive(Debug, Error)]
#[error("{kind}: {message}")]
pub struct CallError {
    pub kind: CallErrorKind,
    pub message: String,
    #[source]
    pub source: Option<Cause>,
}

impl CallError {
    pub fn new(kind: CallErrorKind, message: impl Into<String>) -> CallError {
        CallError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// Whether waiting and trying again may help (the server or the network, not the
    /// request).
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            CallErrorKind::Unreachable
                | CallErrorKind::Timeout
                | CallErrorKind::Throttled
                | CallErrorKind::Server
        )
    }
}
