//! Making API clients from a kubeconfig. kube-rs reads client certificates once, so a
//! rotated certificate means connecting again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use thiserror::Error;

use super::{
    Cause, CertificateApi, CsiNodeApi, EventApi, LeaseApi, MirrorPodApi, NodeApi, PodApi,
    PodObjectsApi,
};

/// One request to the API server as the client saw it: upstream's REST client metrics
/// (`rest_client_requests_total`, `rest_client_request_duration_seconds`) count these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRequestRecord<'a> {
    /// `GET`, `POST`, `PATCH`, …
    pub method: &'a str,
    /// The server's `host:port`.
    pub host: &'a str,
    /// The response's status code; `None` when no response came (upstream's `<error>`).
    pub code: Option<u16>,
    /// From the request sent to the response's headers.
    pub took: Duration,
}

/// Told of every request a connection's clients make.
pub trait ApiRequestObserver: Send + Sync {
    fn observe(&self, request: &ApiRequestRecord<'_>);
}

/// The clients of one connection. Node and lease calls (the heartbeat) bypass the
/// client-side rate limit (`kubeAPIQPS`/`kubeAPIBurst`), as upstream's heartbeat client
/// does; events and certificate requests share it.
#[derive(Clone)]
pub struct ApiClients {
    pub server: String,
    pub nodes: Arc<dyn NodeApi>,
    pub leases: Arc<dyn LeaseApi>,
    pub events: Arc<dyn EventApi>,
    pub certificates: Arc<dyn CertificateApi>,
    pub mirror_pods: Arc<dyn MirrorPodApi>,
    /// ConfigMaps, Secrets and tokens for the node's pods (rate-limited).
    pub objects: Arc<dyn PodObjectsApi>,
    /// The node's pods (watch, status, deletion); rate limited like events.
    pub pods: Arc<dyn PodApi>,
    /// The node's CSINode (its registered CSI drivers).
    pub storage: Arc<dyn CsiNodeApi>,
}

/// What a kubeconfig says, read without connecting.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KubeconfigSummary {
    pub server: String,
    /// The CA as given: a file path, or PEM data.
    pub ca_file: Option<PathBuf>,
    pub ca_data: Option<Vec<u8>>,
    pub insecure: bool,
    /// The client certificate (PEM) when the user has one, from a file or data.
    pub client_certificate: Option<Vec<u8>>,
    /// The client certificate's key (PEM), from a file or data.
    pub client_key: Option<Vec<u8>>,
    pub has_token: bool,
}

#[derive(Debug, Error)]
pub enum ConnectError {
    #[error("kubeconfig {}: {problem}", path.display())]
    Kubeconfig {
        path: PathBuf,
        problem: String,
        #[source]
        source: Option<Cause>,
    },
    #[error("API client for {server} from {}: {problem}", path.display())]
    Client {
        path: PathBuf,
        server: String,
        problem: String,
        #[source]
        source: Option<Cause>,
    },
}

#[async_trait]
pub trait ApiConnector: Send + Sync {
    /// Read a kubeconfig without connecting.
    /// # Errors
    /// [`ConnectError::Kubeconfig`] naming the file and the problem (missing, not YAML,
    /// no current context, unreadable certificate file).
    fn inspect(&self, kubeconfig: &Path) -> Result<KubeconfigSummary, ConnectError>;

    /// Clients for the kubeconfig's server and credentials. Nothing is sent yet: an
    /// unreachable server shows in the first call.
    /// # Errors
    /// [`ConnectError::Kubeconfig`] or [`ConnectError::Client`] (a bad CA or key).
    async fn connect(&self, kubeconfig: &Path) -> Result<ApiClients, ConnectError>;

    /// Clients for the kubeconfig's server and CA, with the client certificate and key of
    /// `pair` (one PEM file holding both: `--cert-dir`'s current pair) in place of the
    /// kubeconfig's credentials.
    /// # Errors
    /// As [`ApiConnector::connect`].
    async fn connect_as(&self, kubeconfig: &Path, pair: &Path) -> Result<ApiClients, ConnectError>;
}
