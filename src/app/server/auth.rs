//! Authentication and authorization of kubelet API requests, as upstream's filter: a
//! verified client certificate, else a bearer token (TokenReview, cached for
//! `authentication.webhook.cacheTTL`), else anonymous when enabled; then the
//! authorizer (AlwaysAllow, or SubjectAccessReview cached for
//! `cacheAuthorizedTTL`/`cacheUnauthorizedTTL`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use crate::domain::kubelet_api::auth::{
    add_authenticated_group, anonymous_user, authorization_error_message, forbidden_message,
    request_attributes, x509_user, Attributes, Decision, UserInfo, UNAUTHORIZED,
};
use crate::domain::kubelet_api::settings::{AuthorizationMode, ServerSettings};
use crate::ports::auth::{Authenticator, Authorizer};
use crate::ports::error::Chain;
use crate::ports::pki::Pki;

/// A bound on each cache, so a flood of distinct tokens cannot grow memory without end.
const CACHE_ENTRIES: usize = 4096;

/// Answers kept until their expiry.
struct TtlCache<V> {
    entries: Mutex<HashMap<String, (Instant, V)>>,
}

impl<V: Clone> TtlCache<V> {
    fn new() -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &str) -> Option<V> {
        let entries = self.entries.lock().ok()?;
        let (expiry, value) = entries.get(key)?;
        (*expiry > Instant::now()).then(|| value.clone())
    }

    fn put(&self, key: String, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= CACHE_ENTRIES {
                let now = Instant::now();
                entries.retain(|_, (expiry, _)| *expiry > now);
                if entries.len() >= CACHE_ENTRIES {
                    entries.clear();
                }
            }
            entries.insert(key, (Instant::now() + ttl, value));
        }
    }
}

/// Why a request is refused: the status and upstream's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub body: String,
}

/// The request filter.
pub struct Guard {
    settings: ServerSettings,
    node_name: String,
    pki: Arc<dyn Pki>,
    authenticator: Option<Arc<dyn Authenticator>>,
    authorizer: Option<Arc<dyn Authorizer>>,
    tokens: TtlCache<Option<UserInfo>>,
    decisions: TtlCache<Decision>,
}

/// What the filter needs of one request.
pub struct Credentials<'a> {
    /// The client certificate rustls verified against the client CA, DER.
    pub client_certificate: Option<&'a [u8]>,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
}

impl Guard {
    pub fn new(
        settings: ServerSettings,
        node_name: String,
        pki: Arc<dyn Pki>,
        authenticator: Option<Arc<dyn Authenticator>>,
        authorizer: Option<Arc<dyn Authorizer>>,
    ) -> Self {
        Guard {
            settings,
            node_name,
            pki,
            authenticator,
            authorizer,
            tokens: TtlCache::new(),
            decisions: TtlCache::new(),
        }
    }

    async fn authenticate(&self, credentials: &Credentials<'_>) -> Result<UserInfo, Refusal> {
        let unauthorized = || Refusal {
            status: 401,
            body: UNAUTHORIZED.into(),
        };
        if let Some(der) = credentials.client_certificate {
            match self.pki.subject(der) {
                Ok((cn, orgs)) => {
                    if let Some(user) = x509_user(&cn, &orgs) {
                        return Ok(user);
                    }
                }
                Err(e) => warn!(error = %Chain(&e), "unreadable client certificate"),
            }
        }
        let token = credentials
            .authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        if let (Some(token), Some(authenticator), Some(ttl)) =
            (token, &self.authenticator, self.settings.token_review_ttl)
        {
            let user = match self.tokens.get(token) {
                Some(cached) => cached,
                None => match authenticator.authenticate_token(token).await {
                    Ok(user) => {
                        self.tokens.put(token.to_owned(), user.clone(), ttl);
                        user
                    }
                    Err(e) => {
                        warn!(error = %Chain(&e), "Unable to authenticate the request due to an error");
                        return Err(unauthorized());
                    }
                },
            };
            if let Some(mut user) = user {
                add_authenticated_group(&mut user);
                return Ok(user);
            }
        }
        if self.settings.anonymous {
            return Ok(anonymous_user());
        }
        Err(unauthorized())
    }

    async fn authorize(&self, attrs: &Attributes) -> Result<(), Refusal> {
        let AuthorizationMode::Webhook {
            authorized_ttl,
            unauthorized_ttl,
        } = self.settings.authorization
        else {
            return Ok(());
        };
        let key = format!(
            "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
            attrs.user.name,
            attrs.user.groups.join(","),
            attrs.verb,
            attrs.subresource,
            attrs.user.uid
        );
        let decision = match self.decisions.get(&key) {
            Some(decision) => decision,
            None => {
                let Some(authorizer) = &self.authorizer else {
                    // Webhook mode without an API server (standalone): nobody is allowed.
                    return Err(Refusal {
                        status: 403,
                        body: forbidden_message(attrs),
                    });
                };
                match authorizer.authorize(attrs).await {
                    Ok(decision) => {
                        let ttl = match decision {
                            Decision::Allow => authorized_ttl,
                            Decision::Deny => unauthorized_ttl,
                        };
                        self.decisions.put(key, decision, ttl);
                        decision
                    }
                    Err(e) => {
                        warn!(error = %Chain(&e), user = %attrs.user.name, "authorization error");
                        return Err(Refusal {
                            status: 500,
                            body: authorization_error_message(attrs),
                        });
                    }
                }
            }
        };
        match decision {
            Decision::Allow => Ok(()),
            Decision::Deny => Err(Refusal {
                status: 403,
                body: forbidden_message(attrs),
            }),
        }
    }

    /// Authenticates then authorizes `method path`; the user on success.
    pub async fn check(
        &self,
        credentials: &Credentials<'_>,
        method: &str,
        path: &str,
    ) -> Result<UserInfo, Refusal> {
        let user = self.authenticate(credentials).await?;
        let attrs = request_attributes(user.clone(), method, path, &self.node_name);
        debug!(user = %attrs.user.name, verb = %attrs.verb, resource = %attrs.resource, subresource = %attrs.subresource, "Node request attributes");
        self.authorize(&attrs).await?;
        Ok(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::FakePki;
    use crate::ports::auth::AuthError;
    use async_trait::async_trait;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Reviews {
        calls: AtomicUsize,
        allow: &'static str,
    }

    #[async_trait]
    impl Authenticator for Reviews {
        async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok((token == "good").then(|| UserInfo {
                name: "alice".into(),
                ..UserInfo::default()
            }))
        }
    }

    #[async_trait]
    impl Authorizer for Reviews {
        async fn authorize(&self, attrs: &Attributes) -> Result<Decision, AuthError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(if attrs.user.name == self.allow {
                Decision::Allow
            } else {
                Decision::Deny
            })
        }
    }

    fn guard(anonymous: bool, reviews: Arc<Reviews>) -> Guard {
        let mut settings = crate::domain::kubelet_api::settings::server_settings(
            &crate::domain::config::model::KubeletConfiguration::default(),
            std::path::Path::new("/pki"),
        )
        .unwrap_or_else(|p| panic!("{p:?}"));
        settings.anonymous = anonymous;
        Guard::new(
            settings,
            "node-1".into(),
            Arc::new(FakePki::new()),
            Some(reviews.clone()),
            Some(reviews),
        )
    }

    fn creds<'a>(cert: Option<&'a [u8]>, auth: Option<&'a str>) -> Credentials<'a> {
        Credentials {
            client_certificate: cert,
            authorization: auth,
        }
    }

    #[tokio::test]
    async fn no_credentials_is_401_unless_anonymous() {
        let reviews = Arc::new(Reviews {
            calls: AtomicUsize::new(0),
            allow: "alice",
        });
        let g = guard(false, reviews.clone());
        let refused = g.check(&creds(None, None), "GET", "/pods").await;
        assert_eq!(
            refused.err().map(|r| (r.status, r.body)),
            Some((401, "Unauthorized".into()))
        );
        let g = guard(true, reviews);
        let refused = g.check(&creds(None, None), "GET", "/pods").await;
        assert_eq!(
            refused.err().map(|r| r.body),
            Some(
                "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource=proxy)"
                    .into()
            )
        );
    }

    #[tokio::test]
    async fn tokens_and_decisions_are_cached() {
        let reviews = Arc::new(Reviews {
            calls: AtomicUsize::new(0),
            allow: "alice",
        });
        let g = guard(false, reviews.clone());
        for _ in 0..3 {
            let user = g
                .check(&creds(None, Some("Bearer good")), "GET", "/stats/summary")
                .await
                .map_err(|r| r.body);
            assert_eq!(user.map(|u| u.name), Ok("alice".into()));
        }
        assert_eq!(reviews.calls.load(Ordering::SeqCst), 2);
        let refused = g
            .check(&creds(None, Some("Bearer bad")), "GET", "/pods")
            .await;
        assert_eq!(refused.err().map(|r| r.status), Some(401));
    }

    #[tokio::test]
    async fn client_certificates_name_the_user() {
        let reviews = Arc::new(Reviews {
            calls: AtomicUsize::new(0),
            allow: "kube-apiserver-kubelet-client",
        });
        let g = guard(false, reviews);
        let user = g
            .check(
                &creds(Some(b"kube-apiserver-kubelet-client system:masters"), None),
                "POST",
                "/exec/a/b/c",
            )
            .await
            .map_err(|r| r.body);
        assert_eq!(
            user.map(|u| u.groups),
            Ok(vec!["system:masters".into(), "system:authenticated".into()])
        );
    }
}
