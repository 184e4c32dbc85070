//! The API server through kube-rs (rustls): clients from a kubeconfig, client-side rate
//! limits as upstream's (`kubeAPIQPS`/`kubeAPIBurst`, a token bucket shared by a
//! connection's calls except the heartbeat's and the events'; `eventRecordQPS`/`eventBurst`
//! for the events), a timeout on every call, and kube's errors mapped to the
//! ports'. Objects cross between the domain's API-shaped types and k8s-openapi's through
//! serde, so no field is mapped by hand.

pub mod auth;
mod errors;
mod kubeconfig;
mod mirror_pods;
mod objects;
mod observed;
mod pods;
mod storage;

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::api::coordination::v1::Lease as KubeLease;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Node as KubeNode};
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::domain::node_status::model::{with_type_meta, Event, Lease, NodeObject};
use crate::domain::token_bucket::TokenBucket;
use crate::ports::api::{
    ApiClients, ApiConnector, ApiRequestObserver, CallError, Cause, CertificateApi,
    CertificatesError, ConnectError, CsrRef, CsrRequest, EventApi, EventsError, KubeconfigSummary,
    LeaseApi, LeasesError, NodeApi, NodesError,
};
use crate::ports::error::Chain;
use errors::{classify, conversion, timed_out, Answer};

/// How the connector's clients behave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientSettings {
    /// `kubeAPIQPS`; 0 or less: no limit.
    pub qps: f64,
    /// `kubeAPIBurst`.
    pub burst: u32,
    /// `eventRecordQPS`; 0 or less: no limit.
    pub event_qps: f64,
    /// `eventBurst`.
    pub event_burst: u32,
    /// The bound of every call.
    pub call_timeout: Duration,
}

impl Default for ClientSettings {
    /// Upstream v1.26's defaults: 5 requests a second, bursts of 10, for both.
    fn default() -> Self {
        ClientSettings {
            qps: 5.0,
            burst: 10,
            event_qps: 5.0,
            event_burst: 10,
            call_timeout: Duration::from_secs(10),
        }
    }
}

/// Makes kube-rs clients from kubeconfig files.
#[derive(Clone, Default)]
pub struct KubeConnector {
    pub settings: ClientSettings,
    /// Told of every request the clients make (the REST client metrics).
    pub observer: Option<Arc<dyn ApiRequestObserver>>,
}

impl KubeConnector {
    pub fn new(settings: ClientSettings) -> Self {
        KubeConnector {
            settings,
            observer: None,
        }
    }
}

impl std::fmt::Debug for KubeConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeConnector")
            .field("settings", &self.settings)
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

/// The client-side rate limit of one connection.
#[derive(Debug)]
struct Limiter {
    bucket: Mutex<TokenBucket>,
    origin: tokio::time::Instant,
}

impl Limiter {
    fn new(qps: f64, burst: u32) -> Limiter {
        Limiter {
            bucket: Mutex::new(TokenBucket::new(qps, burst, Duration::ZERO)),
            origin: tokio::time::Instant::now(),
        }
    }

    /// Wait for a token (requests queue in order, as client-go's limiter).
    async fn acquire(&self) {
        let now = self.origin.elapsed();
        let wait = self
            .bucket
            .lock()
            .map(|mut b| b.reserve(now))
            .unwrap_or_default();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// Which client-side rate limit a call waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Budget {
    /// None: the heartbeat (Node and Lease), as upstream's heartbeat client.
    Heartbeat,
    /// `kubeAPIQPS`/`kubeAPIBurst`.
    Api,
    /// `eventRecordQPS`/`eventBurst`, as upstream's event client.
    Events,
}

/// A connection's two rate limits.
#[derive(Debug)]
struct Limits {
    api: Limiter,
    events: Limiter,
}

impl Limits {
    fn new(settings: &ClientSettings) -> Limits {
        Limits {
            api: Limiter::new(settings.qps, settings.burst),
            events: Limiter::new(settings.event_qps, settings.event_burst),
        }
    }

    async fn wait(&self, budget: Budget) {
        match budget {
            Budget::Heartbeat => {}
            Budget::Api => self.api.acquire().await,
            Budget::Events => self.events.acquire().await,
        }
    }
}

/// One connection: the kube client, its limits and timeout.
#[derive(Clone)]
struct Connection {
    client: kube::Client,
    /// For error messages: which server a failure is about.
    server: String,
    limits: Arc<Limits>,
    timeout: Duration,
}

impl Connection {
    /// Run `call` within the timeout, after a token from its budget.
    async fn call<T, F>(&self, budget: Budget, call: F) -> Result<Result<T, kube::Error>, CallError>
    where
        F: Future<Output = Result<T, kube::Error>>,
    {
        self.limits.wait(budget).await;
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| self.about(timed_out(self.timeout)))
    }

    /// The connection's client whose every request first waits for a token of `budget`
    /// and whose answer must begin within the timeout, for callers that send requests
    /// themselves (kube-runtime's watcher). A watch's stream may then last minutes.
    fn paced_client(self: &Arc<Self>, budget: Budget) -> kube::Client {
        let connection = Arc::clone(self);
        let service = tower::service_fn(move |request: hyper::Request<kube::client::Body>| {
            let connection = Arc::clone(&connection);
            async move {
                connection.limits.wait(budget).await;
                match tokio::time::timeout(connection.timeout, connection.client.send(request))
                    .await
                {
                    Ok(answer) => answer.map_err(Cause::from),
                    Err(_) => Err(Cause::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no answer within {:?}", connection.timeout),
                    ))),
                }
            }
        });
        kube::Client::new(service, self.client.default_namespace())
    }

    /// A kube error as the ports' call error, naming the server.
    fn classify(&self, error: kube::Error) -> (Answer, CallError) {
        let (answer, e) = classify(error);
        (answer, self.about(e))
    }

    fn about(&self, mut error: CallError) -> CallError {
        error.message = format!("{}: {}", self.server, error.message);
        error
    }
}

fn to_kube<T: DeserializeOwned>(
    object: &impl Serialize,
    api_version: &str,
    kind: &str,
) -> Result<T, CallError> {
    let value = with_type_meta(object, api_version, kind).map_err(conversion)?;
    serde_json::from_value(value).map_err(conversion)
}

fn from_kube<T: DeserializeOwned>(object: &impl Serialize) -> Result<T, CallError> {
    let value = serde_json::to_value(object).map_err(conversion)?;
    serde_json::from_value(value).map_err(conversion)
}

#[async_trait]
impl ApiConnector for KubeConnector {
    fn inspect(&self, path: &Path) -> Result<KubeconfigSummary, ConnectError> {
        kubeconfig::inspect(path)
    }

    async fn connect(&self, path: &Path) -> Result<ApiClients, ConnectError> {
        let config = kubeconfig::client_config(path).await?;
        self.clients(config, path)
    }

    async fn connect_as(&self, path: &Path, pair: &Path) -> Result<ApiClients, ConnectError> {
        let mut config = kubeconfig::client_config(path).await?;
        let pair = pair.display().to_string();
        config.auth_info.client_certificate = Some(pair.clone());
        config.auth_info.client_key = Some(pair);
        config.auth_info.client_certificate_data = None;
        config.auth_info.client_key_data = None;
        self.clients(config, path)
    }
}

impl KubeConnector {
    /// Clients over one connection made from `config` (read from `path`).
    fn clients(
        &self,
        mut config: kube::config::Config,
        path: &Path,
    ) -> Result<ApiClients, ConnectError> {
        let server = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string();
        config.connect_timeout = Some(self.settings.call_timeout);
        config.read_timeout = None;
        // The loops back off themselves; kube's retries would multiply their requests.
        config.default_retry = false;
        let client = observed::observed_client(config, self.observer.as_ref()).map_err(|e| {
            ConnectError::Client {
                path: path.to_path_buf(),
                server: server.clone(),
                problem: Chain(&e).to_string(),
                source: Some(Box::new(e)),
            }
        })?;
        let connection = Arc::new(Connection {
            client,
            server: server.clone(),
            limits: Arc::new(Limits::new(&self.settings)),
            timeout: self.settings.call_timeout,
        });
        let clients = Arc::new(KubeClients { connection });
        Ok(ApiClients {
            server,
            nodes: clients.clone(),
            leases: clients.clone(),
            events: clients.clone(),
            mirror_pods: clients.clone(),
            certificates: clients.clone(),
            objects: clients.clone(),
            storage: clients.clone(),
            pods: clients,
        })
    }
}

/// The ports over one connection.
struct KubeClients {
    connection: Arc<Connection>,
}

impl KubeClients {
    fn nodes(&self) -> Api<KubeNode> {
        Api::all(self.connection.client.clone())
    }

    fn csrs(&self) -> Api<CertificateSigningRequest> {
        Api::all(self.connection.client.clone())
    }
}

fn node_error(verb: &'static str, name: &str, answer: Answer, source: CallError) -> NodesError {
    match answer {
        Answer::NotFound => NodesError::NotFound { name: name.into() },
        Answer::AlreadyExists => NodesError::AlreadyExists { name: name.into() },
        _ => NodesError::Call {
            verb,
            name: name.into(),
            source,
        },
    }
}

impl KubeClients {
    async fn node_call<F>(
        &self,
        verb: &'static str,
        name: &str,
        call: F,
    ) -> Result<NodeObject, NodesError>
    where
        F: Future<Output = Result<KubeNode, kube::Error>>,
    {
        let call_error = |source| NodesError::Call {
            verb,
            name: name.into(),
            source,
        };
        // The heartbeat is not rate limited, as upstream's heartbeat client.
        match self
            .connection
            .call(Budget::Heartbeat, call)
            .await
            .map_err(call_error)?
        {
            Ok(node) => from_kube(&node).map_err(call_error),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                Err(node_error(verb, name, answer, source))
            }
        }
    }
}

#[async_trait]
impl NodeApi for KubeClients {
    async fn get_node(&self, name: &str) -> Result<NodeObject, NodesError> {
        let api = self.nodes();
        self.node_call("get", name, api.get(name)).await
    }

    async fn get_node_from_cache(&self, name: &str) -> Result<NodeObject, NodesError> {
        let api = self.nodes();
        self.node_call(
            "get",
            name,
            api.get_with(name, &kube::api::GetParams::any()),
        )
        .await
    }

    async fn create_node(&self, node: &NodeObject) -> Result<NodeObject, NodesError> {
        let name = node.metadata.name.as_str();
        let kube_node: KubeNode =
            to_kube(node, "v1", "Node").map_err(|source| NodesError::Call {
                verb: "create",
                name: name.into(),
                source,
            })?;
        let api = self.nodes();
        self.node_call(
            "create",
            name,
            api.create(&PostParams::default(), &kube_node),
        )
        .await
    }

    async fn patch_node_status(&self, name: &str, patch: &Value) -> Result<NodeObject, NodesError> {
        let api = self.nodes();
        let params = PatchParams::default();
        self.node_call(
            "patch status of",
            name,
            api.patch_status(name, &params, &Patch::Strategic(patch)),
        )
        .await
    }

    async fn patch_node(&self, name: &str, patch: &Value) -> Result<NodeObject, NodesError> {
        let api = self.nodes();
        let params = PatchParams::default();
        self.node_call(
            "patch",
            name,
            api.patch(name, &params, &Patch::Strategic(patch)),
        )
        .await
    }
}

impl KubeClients {
    async fn lease_call<F>(
        &self,
        verb: &'static str,
        namespace: &str,
        name: &str,
        call: F,
    ) -> Result<Lease, LeasesError>
    where
        F: Future<Output = Result<KubeLease, kube::Error>>,
    {
        let call_error = |source| LeasesError::Call {
            verb,
            namespace: namespace.into(),
            name: name.into(),
            source,
        };
        match self
            .connection
            .call(Budget::Heartbeat, call)
            .await
            .map_err(call_error)?
        {
            Ok(lease) => from_kube(&lease).map_err(call_error),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                let (namespace, name) = (namespace.to_string(), name.to_string());
                Err(match answer {
                    Answer::NotFound => LeasesError::NotFound { namespace, name },
                    Answer::AlreadyExists => LeasesError::AlreadyExists { namespace, name },
                    Answer::Conflict => LeasesError::Conflict { namespace, name },
                    Answer::Other => LeasesError::Call {
                        verb,
                        namespace,
                        name,
                        source,
                    },
                })
            }
        }
    }

    fn leases(&self, namespace: &str) -> Api<KubeLease> {
        Api::namespaced(self.connection.client.clone(), namespace)
    }
}

#[async_trait]
impl LeaseApi for KubeClients {
    async fn get_lease(&self, namespace: &str, name: &str) -> Result<Lease, LeasesError> {
        let api = self.leases(namespace);
        self.lease_call("get", namespace, name, api.get(name)).await
    }

    async fn create_lease(&self, lease: &Lease) -> Result<Lease, LeasesError> {
        let (namespace, name) = (&lease.metadata.namespace, &lease.metadata.name);
        let kube_lease: KubeLease =
            to_kube(lease, "coordination.k8s.io/v1", "Lease").map_err(|source| {
                LeasesError::Call {
                    verb: "create",
                    namespace: namespace.clone(),
                    name: name.clone(),
                    source,
                }
            })?;
        let api = self.leases(namespace);
        self.lease_call(
            "create",
            namespace,
            name,
            api.create(&PostParams::default(), &kube_lease),
        )
        .await
    }

    async fn update_lease(&self, lease: &Lease) -> Result<Lease, LeasesError> {
        let (namespace, name) = (&lease.metadata.namespace, &lease.metadata.name);
        let kube_lease: KubeLease =
            to_kube(lease, "coordination.k8s.io/v1", "Lease").map_err(|source| {
                LeasesError::Call {
                    verb: "update",
                    namespace: namespace.clone(),
                    name: name.clone(),
                    source,
                }
            })?;
        let api = self.leases(namespace);
        self.lease_call(
            "update",
            namespace,
            name,
            api.replace(name, &PostParams::default(), &kube_lease),
        )
        .await
    }
}

impl KubeClients {
    async fn event_call<F>(
        &self,
        verb: &'static str,
        namespace: &str,
        name: &str,
        call: F,
    ) -> Result<Event, EventsError>
    where
        F: Future<Output = Result<KubeEvent, kube::Error>>,
    {
        let call_error = |source| EventsError::Call {
            verb,
            namespace: namespace.into(),
            name: name.into(),
            source,
        };
        match self
            .connection
            .call(Budget::Events, call)
            .await
            .map_err(call_error)?
        {
            Ok(event) => from_kube(&event).map_err(call_error),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                Err(match answer {
                    Answer::NotFound => EventsError::NotFound {
                        namespace: namespace.into(),
                        name: name.into(),
                    },
                    _ => call_error(source),
                })
            }
        }
    }
}

#[async_trait]
impl EventApi for KubeClients {
    async fn create_event(&self, event: &Event) -> Result<Event, EventsError> {
        let (namespace, name) = (&event.metadata.namespace, &event.metadata.name);
        let kube_event: KubeEvent =
            to_kube(event, "v1", "Event").map_err(|source| EventsError::Call {
                verb: "create",
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
        let api: Api<KubeEvent> = Api::namespaced(self.connection.client.clone(), namespace);
        self.event_call(
            "create",
            namespace,
            name,
            api.create(&PostParams::default(), &kube_event),
        )
        .await
    }

    async fn patch_event(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Event, EventsError> {
        let api: Api<KubeEvent> = Api::namespaced(self.connection.client.clone(), namespace);
        let params = PatchParams::default();
        self.event_call(
            "patch",
            namespace,
            name,
            api.patch(name, &params, &Patch::Strategic(patch)),
        )
        .await
    }
}

/// What a CSR's status says.
enum CsrOutcome {
    Pending,
    Issued(Vec<u8>),
    Denied { reason: String, message: String },
    Failed { reason: String, message: String },
}

fn csr_outcome(csr: &CertificateSigningRequest) -> CsrOutcome {
    let Some(status) = &csr.status else {
        return CsrOutcome::Pending;
    };
    for c in status.conditions.iter().flatten() {
        let reason = c.reason.clone().unwrap_or_default();
        let message = c.message.clone().unwrap_or_default();
        match c.type_.as_str() {
            "Denied" => return CsrOutcome::Denied { reason, message },
            "Failed" => return CsrOutcome::Failed { reason, message },
            _ => {}
        }
    }
    let approved = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Approved");
    match &status.certificate {
        Some(cert) if approved && !cert.0.is_empty() => CsrOutcome::Issued(cert.0.clone()),
        _ => CsrOutcome::Pending,
    }
}

impl KubeClients {
    fn csr_call_error(verb: &'static str, name: &str, source: CallError) -> CertificatesError {
        CertificatesError::Call {
            verb,
            name: name.into(),
            source,
        }
    }

    /// Check one observed state of the CSR.
    fn settle(
        csr: &CsrRef,
        object: &CertificateSigningRequest,
    ) -> Option<Result<Vec<u8>, CertificatesError>> {
        if object.metadata.uid.as_deref() != Some(csr.uid.as_str()) {
            return Some(Err(CertificatesError::Gone {
                name: csr.name.clone(),
            }));
        }
        match csr_outcome(object) {
            CsrOutcome::Pending => None,
            CsrOutcome::Issued(pem) => Some(Ok(pem)),
            CsrOutcome::Denied { reason, message } => Some(Err(CertificatesError::Denied {
                name: csr.name.clone(),
                reason,
                message,
            })),
            CsrOutcome::Failed { reason, message } => Some(Err(CertificatesError::Failed {
                name: csr.name.clone(),
                reason,
                message,
            })),
        }
    }
}

#[async_trait]
impl CertificateApi for KubeClients {
    async fn create_csr(&self, request: &CsrRequest) -> Result<CsrRef, CertificatesError> {
        let name = request.name.clone().unwrap_or_default();
        let mut object = CertificateSigningRequest {
            spec: CertificateSigningRequestSpec {
                request: k8s_openapi::ByteString(request.request_pem.clone()),
                signer_name: request.signer_name.clone(),
                usages: Some(request.usages.clone()),
                expiration_seconds: request.expiration_seconds,
                ..CertificateSigningRequestSpec::default()
            },
            ..CertificateSigningRequest::default()
        };
        match &request.name {
            Some(n) => object.metadata.name = Some(n.clone()),
            None => object.metadata.generate_name = Some("csr-".into()),
        }
        let api = self.csrs();
        let created = self
            .connection
            .call(Budget::Api, api.create(&PostParams::default(), &object))
            .await
            .map_err(|e| Self::csr_call_error("create", &name, e))?;
        let stored = match created {
            Ok(stored) => stored,
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                if answer != Answer::AlreadyExists {
                    return Err(Self::csr_call_error("create", &name, source));
                }
                // A restart during bootstrap: the same key asks under the same name.
                let existing = self
                    .connection
                    .call(Budget::Api, api.get(&name))
                    .await
                    .map_err(|e| Self::csr_call_error("get", &name, e))?
                    .map_err(|e| {
                        Self::csr_call_error("get", &name, self.connection.classify(e).1)
                    })?;
                if existing.spec.request.0 != request.request_pem {
                    return Err(CertificatesError::Exists { name });
                }
                existing
            }
        };
        Ok(CsrRef {
            name: stored.metadata.name.unwrap_or(name),
            uid: stored.metadata.uid.unwrap_or_default(),
        })
    }

    async fn wait_for_certificate(
        &self,
        csr: &CsrRef,
        within: Duration,
    ) -> Result<Vec<u8>, CertificatesError> {
        let deadline = tokio::time::Instant::now() + within;
        let api = self.csrs();
        let timed_out = || CertificatesError::TimedOut {
            name: csr.name.clone(),
            waited: within,
        };
        loop {
            // Read the current state, then watch from it (a watch may end early: read again).
            let current = self
                .connection
                .call(Budget::Api, api.get(&csr.name))
                .await
                .map_err(|e| Self::csr_call_error("get", &csr.name, e))?;
            let current = match current {
                Ok(c) => c,
                Err(e) => {
                    let (answer, source) = self.connection.classify(e);
                    if answer == Answer::NotFound {
                        return Err(CertificatesError::Gone {
                            name: csr.name.clone(),
                        });
                    }
                    return Err(Self::csr_call_error("get", &csr.name, source));
                }
            };
            if let Some(done) = Self::settle(csr, &current) {
                return done;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Err(timed_out());
            }
            let watch_secs = u32::try_from(left.as_secs().clamp(1, 290)).unwrap_or(290);
            let params = WatchParams::default()
                .fields(&format!("metadata.name={}", csr.name))
                .timeout(watch_secs);
            let version = current
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default();
            self.connection.limits.wait(Budget::Api).await;
            let watched = async {
                let mut stream = api.watch(&params, &version).await?.boxed();
                while let Some(event) = stream.try_next().await? {
                    match event {
                        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                            if let Some(done) = Self::settle(csr, &o) {
                                return Ok(Some(done));
                            }
                        }
                        WatchEvent::Deleted(_) => {
                            return Ok(Some(Err(CertificatesError::Gone {
                                name: csr.name.clone(),
                            })))
                        }
                        WatchEvent::Bookmark(_) | WatchEvent::Error(_) => break,
                    }
                }
                Ok::<_, kube::Error>(None)
            };
            match tokio::time::timeout(left, watched).await {
                Err(_) => return Err(timed_out()),
                Ok(Ok(Some(done))) => return done,
                Ok(Ok(None)) => {}
                Ok(Err(e)) => {
                    return Err(Self::csr_call_error(
                        "watch",
                        &csr.name,
                        self.connection.classify(e).1,
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::node_status::model::{Lease, LeaseSpec, MicroTime, ObjectMeta};

    /// The domain's objects survive the trip through k8s-openapi's types unchanged: no
    /// field is dropped by a misspelt name.
    #[test]
    fn objects_round_trip_through_k8s_openapi() {
        let mut node = NodeObject::default();
        node.metadata.name = "n1".into();
        node.metadata
            .labels
            .insert("kubernetes.io/os".into(), "linux".into());
        node.spec.provider_id = "fake://n1".into();
        node.status.daemon_endpoints.kubelet_endpoint.port = 10250;
        node.status.node_info.machine_id = "m".into();
        node.status.node_info.kube_proxy_version =
            crate::domain::version::KUBERNETES.git_version.into();
        node.status.capacity.insert(
            "cpu".into(),
            crate::domain::units::quantity::Quantity::parse("2").expect("q"),
        );
        let kube_node: KubeNode = to_kube(&node, "v1", "Node").expect("to kube");
        let back: NodeObject = from_kube(&kube_node).expect("from kube");
        assert_eq!(back, node);

        let lease = Lease {
            metadata: ObjectMeta {
                name: "n1".into(),
                namespace: "kube-node-lease".into(),
                ..ObjectMeta::default()
            },
            spec: LeaseSpec {
                holder_identity: Some("n1".into()),
                lease_duration_seconds: Some(40),
                renew_time: Some(MicroTime(1_795_232_011_123_456)),
            },
        };
        let kube_lease: KubeLease = to_kube(&lease, "coordination.k8s.io/v1", "Lease").expect("to");
        assert_eq!(from_kube::<Lease>(&kube_lease).expect("from"), lease);
    }

    #[tokio::test(start_paused = true)]
    async fn the_limiter_lets_a_burst_through_then_paces() {
        let limiter = Limiter::new(5.0, 10);
        let start = tokio::time::Instant::now();
        for _ in 0..12 {
            limiter.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::from_millis(400));
    }

    #[tokio::test(start_paused = true)]
    async fn events_have_their_own_budget_and_the_heartbeat_none() {
        let limits = Limits::new(&ClientSettings {
            qps: 1.0,
            burst: 1,
            event_qps: 1.0,
            event_burst: 2,
            call_timeout: Duration::from_secs(1),
        });
        let start = tokio::time::Instant::now();
        limits.wait(Budget::Api).await;
        // The API budget is spent; events and the heartbeat do not wait for it.
        limits.wait(Budget::Events).await;
        limits.wait(Budget::Events).await;
        limits.wait(Budget::Heartbeat).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        limits.wait(Budget::Api).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }
}
