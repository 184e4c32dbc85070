//! The kubelet API's webhook authentication and authorization: TokenReview and
//! SubjectAccessReview through kube-rs, with the kubelet's own credentials. The client is
//! made on first use (TLS bootstrap may write the kubeconfig after start-up) and made
//! again after a failure (a rotated client certificate).
//!
//! Every review shares one connection to the API server, as client-go's do: the client
//! offers HTTP/2 in ALPN (kube's stock connector offers HTTP/1.1 only, so concurrent
//! reviews each opened a TLS connection that its pool then kept idle for 90 s), and the
//! first review on a new client goes alone, so a burst does not race to open connections
//! before the first one tells which protocol the server speaks. Over HTTP/1.1 (a server
//! without h2) at most [`MAX_IDLE_CONNECTIONS`] stay open between bursts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::client::ConfigExt;
use tower::ServiceBuilder;

use super::kubeconfig::client_config;
use super::observed::ObservedLayer;
use crate::domain::kubelet_api::auth::{Attributes, Decision, UserInfo};
use crate::ports::api::ApiRequestObserver;
use crate::ports::auth::{AuthError, Authenticator, Authorizer};
use crate::ports::error::Chain;

/// Idle HTTP/1.1 connections kept to the API server when it does not speak HTTP/2.
pub const MAX_IDLE_CONNECTIONS: usize = 2;
/// client-go's HTTP/2 health check: a ping after this long without a frame...
const PING_AFTER: Duration = Duration::from_secs(30);
/// ...and the connection is dropped when the ping has no answer within this.
const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// The reviews' client: kube's stack over a connector that offers h2 and HTTP/1.1.
///
/// # Errors
/// kube's, when the configuration gives no TLS settings or credentials.
fn review_client(
    config: &kube::Config,
    connect_timeout: Duration,
    observer: Option<&Arc<dyn ApiRequestObserver>>,
) -> Result<kube::Client, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(http);
    let client: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
            .http2_keep_alive_interval(PING_AFTER)
            .http2_keep_alive_timeout(PING_TIMEOUT)
            .build(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(client);
    let builder = kube::client::ClientBuilder::new(service, config.default_namespace.clone());
    let host: Arc<str> = Arc::from(
        config
            .cluster_url
            .authority()
            .map(|a| a.as_str())
            .unwrap_or_default(),
    );
    Ok(match observer {
        Some(observer) => builder
            .with_layer(&ObservedLayer {
                observer: Arc::clone(observer),
                host,
            })
            .build(),
        None => builder.build(),
    })
}

/// TokenReview and SubjectAccessReview with the kubeconfig's credentials.
pub struct KubeReviewer {
    kubeconfig: PathBuf,
    timeout: Duration,
    client: Mutex<Option<kube::Client>>,
    /// Whether the current client has had an answer (its connection is up, and the pool
    /// knows whether it multiplexes).
    warm: AtomicBool,
    /// Held by the one review a cold client makes.
    first: tokio::sync::Mutex<()>,
    /// Told of every request, as the node's own clients tell it (`rest_client_*`).
    observer: Option<Arc<dyn ApiRequestObserver>>,
}

impl KubeReviewer {
    pub fn new(kubeconfig: PathBuf, timeout: Duration) -> Self {
        KubeReviewer {
            kubeconfig,
            timeout,
            client: Mutex::new(None),
            warm: AtomicBool::new(false),
            first: tokio::sync::Mutex::new(()),
            observer: None,
        }
    }

    /// Tells `observer` of every review request.
    #[must_use]
    pub fn observed_by(mut self, observer: Arc<dyn ApiRequestObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    async fn client(&self, what: &'static str) -> Result<kube::Client, AuthError> {
        if let Some(client) = self.client.lock().ok().and_then(|c| c.clone()) {
            return Ok(client);
        }
        let fail = |message: String, source: Option<Box<dyn std::error::Error + Send + Sync>>| {
            AuthError::Review {
                what,
                message,
                source,
            }
        };
        let config = client_config(&self.kubeconfig)
            .await
            .map_err(|e| fail(e.to_string(), Some(Box::new(e))))?;
        let client = review_client(&config, self.timeout, self.observer.as_ref())
            .map_err(|e| fail(Chain(&e).to_string(), Some(Box::new(e))))?;
        if let Ok(mut slot) = self.client.lock() {
            *slot = Some(client.clone());
        }
        Ok(client)
    }

    fn forget_client(&self) {
        if let Ok(mut slot) = self.client.lock() {
            *slot = None;
        }
        self.warm.store(false, Ordering::SeqCst);
    }

    async fn create<K>(&self, what: &'static str, object: &K) -> Result<K, AuthError>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
        K::DynamicType: Default,
    {
        // A cold client's first review goes alone; the others follow once it is answered.
        let first = if self.warm.load(Ordering::SeqCst) {
            None
        } else {
            let held = self.first.lock().await;
            (!self.warm.load(Ordering::SeqCst)).then_some(held)
        };
        let api: Api<K> = Api::all(self.client(what).await?);
        let answer =
            tokio::time::timeout(self.timeout, api.create(&PostParams::default(), object)).await;
        // The client is kept while the server answers (an overloaded server's 429 or 5xx
        // needs no new connection); refused credentials (a rotated certificate) or no
        // answer make it again.
        let keep = match &answer {
            Ok(Ok(_)) => true,
            Ok(Err(kube::Error::Api(status))) => !matches!(status.code, 401 | 403),
            _ => false,
        };
        if keep {
            self.warm.store(true, Ordering::SeqCst);
        }
        drop(first);
        match answer {
            Ok(Ok(created)) => Ok(created),
            Ok(Err(e)) => {
                if !keep {
                    self.forget_client();
                }
                Err(AuthError::Review {
                    what,
                    message: Chain(&e).to_string(),
                    source: Some(Box::new(e)),
                })
            }
            Err(_) => Err(AuthError::Review {
                what,
                message: format!("no answer within {:?}", self.timeout),
                source: None,
            }),
        }
    }
}

#[async_trait]
impl Authenticator for KubeReviewer {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = self.create("TokenReview", &review).await?;
        let Some(status) = answer.status.filter(|s| s.authenticated == Some(true)) else {
            return Ok(None);
        };
        let user = status.user.unwrap_or_default();
        Ok(Some(UserInfo {
            name: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default().into_iter().collect(),
        }))
    }
}

#[async_trait]
impl Authorizer for KubeReviewer {
    async fn authorize(&self, attrs: &Attributes) -> Result<Decision, AuthError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(attrs.user.name.clone()),
                uid: Some(attrs.user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(attrs.user.groups.clone()),
                extra: Some(attrs.user.extra.clone().into_iter().collect()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(attrs.namespace.clone()),
                    verb: Some(attrs.verb.clone()),
                    group: Some(attrs.api_group.clone()),
                    version: Some(attrs.api_version.clone()),
                    resource: Some(attrs.resource.clone()),
                    subresource: Some(attrs.subresource.clone()),
                    name: Some(attrs.name.clone()),
                    ..ResourceAttributes::default()
                }),
                non_resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let answer = self.create("SubjectAccessReview", &review).await?;
        Ok(match answer.status {
            Some(status) if status.allowed => Decision::Allow,
            _ => Decision::Deny,
        })
    }
}
