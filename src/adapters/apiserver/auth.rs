//! The kubelet API's webhook authentication and authorization: TokenReview and
//! SubjectAccessReview through kube-rs, with the kubelet's own credentials. The client is
//! made on first use (TLS bootstrap may write the kubeconfig after start-up) and made
//! again after a failure (a rotated client certificate).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::errors::chain_message;
use super::kubeconfig::client_config;
use super::observed::observed_client;
use crate::domain::kubelet_api::auth::{Attributes, Decision, UserInfo};
use crate::ports::api::ApiRequestObserver;
use crate::ports::auth::{AuthError, Authenticator, Authorizer};

/// TokenReview and SubjectAccessReview with the kubeconfig's credentials.
pub struct KubeReviewer {
    kubeconfig: PathBuf,
    timeout: Duration,
    client: Mutex<Option<kube::Client>>,
    /// Told of every request, as the node's own clients tell it (`rest_client_*`).
    observer: Option<Arc<dyn ApiRequestObserver>>,
}

impl KubeReviewer {
    pub fn new(kubeconfig: PathBuf, timeout: Duration) -> Self {
        KubeReviewer {
            kubeconfig,
            timeout,
            client: Mutex::new(None),
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
        let mut config = client_config(&self.kubeconfig)
            .await
            .map_err(|e| fail(e.to_string(), Some(Box::new(e))))?;
        config.connect_timeout = Some(self.timeout);
        config.default_retry = false;
        let client = observed_client(config, self.observer.as_ref())
            .map_err(|e| fail(chain_message(&e), Some(Box::new(e))))?;
        if let Ok(mut slot) = self.client.lock() {
            *slot = Some(client.clone());
        }
        Ok(client)
    }

    fn forget_client(&self) {
        if let Ok(mut slot) = self.client.lock() {
            *slot = None;
        }
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
        let api: Api<K> = Api::all(self.client(what).await?);
        let answer =
            tokio::time::timeout(self.timeout, api.create(&PostParams::default(), object)).await;
        match answer {
            Ok(Ok(created)) => Ok(created),
            Ok(Err(e)) => {
                self.forget_client();
                Err(AuthError::Review {
                    what,
                    message: chain_message(&e),
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
