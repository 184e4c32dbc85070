//! Authentication and authorization of kubelet API requests, as upstream's filter: a
//! verified client certificate, else a bearer token (TokenReview), else anonymous when
//! enabled; then the authorizer (AlwaysAllow, or SubjectAccessReview).
//!
//! Webhook answers are cached as `domain::kubelet_api::review_cache` decides (TokenReview
//! for `authentication.webhook.cacheTTL`, successes and failures alike; SubjectAccessReview
//! for `cacheAuthorizedTTL`/`cacheUnauthorizedTTL`; errors never). Concurrent identical
//! reviews are made once and their answer shared (upstream's `singleflight`), and at most
//! [`MAX_REVIEWS_IN_FLIGHT`] reviews wait on the API server at a time: a flood of requests
//! with distinct tokens queues here instead of opening connections to it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Semaphore};
use tracing::{debug, warn};

use crate::domain::kubelet_api::auth::{
    add_authenticated_group, anonymous_user, authorization_error_message, forbidden_message,
    request_attributes, x509_user, Attributes, Decision, UserInfo, UNAUTHORIZED,
};
use crate::domain::kubelet_api::review_cache::{
    decision_key, decision_ttl, token_answer_ttl, ReviewCache,
};
use crate::domain::kubelet_api::settings::{AuthorizationMode, ServerSettings};
use crate::ports::auth::{Authenticator, Authorizer};
use crate::ports::clock::Clock;
use crate::ports::error::Chain;
use crate::ports::pki::Pki;

/// A bound on each cache, so a flood of distinct tokens cannot grow memory without end.
const CACHE_ENTRIES: usize = 4096;

/// Reviews (TokenReview and SubjectAccessReview together) waiting on the API server at
/// once; more wait their turn.
pub const MAX_REVIEWS_IN_FLIGHT: usize = 32;

/// A review's outcome as its waiters share it: the answer, or why there is none.
type Shared<V> = Result<V, String>;

/// Concurrent reviews of one key: the first caller makes the review, later callers wait
/// for its outcome. A first caller that goes away (its client hung up) hands the review to
/// one of those waiting.
struct Flights<V> {
    waiting: Mutex<HashMap<String, watch::Receiver<Option<Shared<V>>>>>,
}

/// Forgets a key's flight when its maker finishes or goes away.
struct Landing<'a, V> {
    flights: &'a Flights<V>,
    key: &'a str,
}

impl<V> Drop for Landing<'_, V> {
    fn drop(&mut self) {
        if let Ok(mut waiting) = self.flights.waiting.lock() {
            waiting.remove(self.key);
        }
    }
}

impl<V: Clone> Flights<V> {
    fn new() -> Self {
        Flights {
            waiting: Mutex::new(HashMap::new()),
        }
    }

    async fn once<F, Fut>(&self, key: &str, review: F) -> Shared<V>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Shared<V>>,
    {
        let mut review = Some(review);
        loop {
            let joined = {
                let Ok(mut waiting) = self.waiting.lock() else {
                    return Err("the review table is poisoned".into());
                };
                match waiting.get(key) {
                    Some(rx) => Ok(rx.clone()),
                    None => {
                        let (tx, rx) = watch::channel(None);
                        waiting.insert(key.to_owned(), rx);
                        Err(tx)
                    }
                }
            };
            match joined {
                Ok(mut rx) => {
                    if let Ok(outcome) = rx.wait_for(Option::is_some).await {
                        if let Some(outcome) = outcome.clone() {
                            return outcome;
                        }
                    }
                    // Its maker went away without an answer: try again (maybe as maker).
                }
                Err(tx) => {
                    let landing = Landing { flights: self, key };
                    let Some(review) = review.take() else {
                        return Err("review already made".into());
                    };
                    let outcome = review().await;
                    tx.send_replace(Some(outcome.clone()));
                    drop(landing);
                    return outcome;
                }
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.waiting.lock().map(|w| w.len()).unwrap_or(0)
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
    clock: Arc<dyn Clock>,
    tokens: Mutex<ReviewCache<Option<UserInfo>>>,
    decisions: Mutex<ReviewCache<Decision>>,
    token_flights: Flights<Option<UserInfo>>,
    decision_flights: Flights<Decision>,
    in_flight: Semaphore,
}

/// What the filter needs of one request.
pub struct Credentials<'a> {
    /// The client certificate rustls verified against the client CA, DER.
    pub client_certificate: Option<&'a [u8]>,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
}

/// The bearer token of an `Authorization` header, as upstream's `bearertoken`
/// authenticator reads it: `Bearer` (any case), a space, then the token up to the next
/// space; an empty token is a bad one, not a missing one.
fn bearer_token(header: &str) -> Option<&str> {
    let mut parts = header.trim().splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

impl Guard {
    pub fn new(
        settings: ServerSettings,
        node_name: String,
        pki: Arc<dyn Pki>,
        authenticator: Option<Arc<dyn Authenticator>>,
        authorizer: Option<Arc<dyn Authorizer>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Guard {
            settings,
            node_name,
            pki,
            authenticator,
            authorizer,
            clock,
            tokens: Mutex::new(ReviewCache::new(CACHE_ENTRIES)),
            decisions: Mutex::new(ReviewCache::new(CACHE_ENTRIES)),
            token_flights: Flights::new(),
            decision_flights: Flights::new(),
            in_flight: Semaphore::new(MAX_REVIEWS_IN_FLIGHT),
        }
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.clock.monotonic_nanos())
    }

    /// The token's user from the cache, or from one TokenReview shared by every
    /// concurrent request with the same token.
    async fn review_token(
        &self,
        authenticator: &dyn Authenticator,
        token: &str,
        ttl: Duration,
    ) -> Shared<Option<UserInfo>> {
        let key = self.pki.token_digest(token);
        let cached = self
            .tokens
            .lock()
            .ok()
            .and_then(|mut c| c.get(&key, self.now()));
        if let Some(user) = cached {
            return Ok(user);
        }
        self.token_flights
            .once(&key, || async {
                let _permit = self.in_flight.acquire().await;
                let answer = authenticator.authenticate_token(token).await;
                let ttl = token_answer_ttl(ttl, answer.as_ref().ok());
                if let (Ok(user), Ok(mut cache)) = (&answer, self.tokens.lock()) {
                    cache.put(key.clone(), user.clone(), ttl, self.now());
                }
                answer.map_err(|e| Chain(&e).to_string())
            })
            .await
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
        let token = credentials.authorization.and_then(bearer_token);
        if let (Some(token), Some(authenticator), Some(ttl)) =
            (token, &self.authenticator, self.settings.token_review_ttl)
        {
            // Upstream's union fails on a token it could not authenticate: no anonymous
            // fallback for a request that brought a bad token.
            if token.is_empty() {
                return Err(unauthorized());
            }
            return match self.review_token(authenticator.as_ref(), token, ttl).await {
                Ok(Some(mut user)) => {
                    add_authenticated_group(&mut user);
                    Ok(user)
                }
                Ok(None) => Err(unauthorized()),
                Err(error) => {
                    warn!(%error, "Unable to authenticate the request due to an error");
                    Err(unauthorized())
                }
            };
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
        let forbidden = || Refusal {
            status: 403,
            body: forbidden_message(attrs),
        };
        let Some(authorizer) = &self.authorizer else {
            // Webhook mode without an API server (standalone): nobody is allowed.
            return Err(forbidden());
        };
        let key = decision_key(attrs);
        let cached = self
            .decisions
            .lock()
            .ok()
            .and_then(|mut c| c.get(&key, self.now()));
        let decision = match cached {
            Some(decision) => Ok(decision),
            None => {
                self.decision_flights
                    .once(&key, || async {
                        let _permit = self.in_flight.acquire().await;
                        let answer = authorizer.authorize(attrs).await;
                        let ttl =
                            decision_ttl(authorized_ttl, unauthorized_ttl, answer.as_ref().ok());
                        if let (Ok(decision), Ok(mut cache)) = (&answer, self.decisions.lock()) {
                            cache.put(key.clone(), *decision, ttl, self.now());
                        }
                        answer.map_err(|e| Chain(&e).to_string())
                    })
                    .await
            }
        };
        match decision {
            Ok(Decision::Allow) => Ok(()),
            Ok(Decision::Deny) => Err(forbidden()),
            Err(error) => {
                warn!(%error, user = %attrs.user.name, "authorization error");
                Err(Refusal {
                    status: 500,
                    body: authorization_error_message(attrs),
                })
            }
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
    use crate::adapters::fake::{FakeClock, FakePki};
    use crate::ports::auth::AuthError;
    use async_trait::async_trait;
    use futures_util::future::join_all;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A fake API server's reviews: counts them, can fail them, and can hold them until
    /// the test opens `gate`.
    struct Reviews {
        calls: AtomicUsize,
        allow: &'static str,
        fail: AtomicBool,
        gate: Option<Semaphore>,
        active: AtomicUsize,
        most_active: AtomicUsize,
    }

    impl Reviews {
        fn new(allow: &'static str) -> Self {
            Reviews {
                calls: AtomicUsize::new(0),
                allow,
                fail: AtomicBool::new(false),
                gate: None,
                active: AtomicUsize::new(0),
                most_active: AtomicUsize::new(0),
            }
        }

        fn gated(allow: &'static str) -> Self {
            Reviews {
                gate: Some(Semaphore::new(0)),
                ..Reviews::new(allow)
            }
        }

        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }

        async fn review(&self) -> Result<(), AuthError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_active.fetch_max(now, Ordering::SeqCst);
            if let Some(gate) = &self.gate {
                if let Ok(permit) = gate.acquire().await {
                    permit.forget();
                }
            }
            self.active.fetch_sub(1, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) {
                return Err(AuthError::Review {
                    what: "TokenReview",
                    message: "connection refused".into(),
                    source: None,
                });
            }
            Ok(())
        }
    }

    #[async_trait]
    impl Authenticator for Reviews {
        async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError> {
            self.review().await?;
            Ok((token == "good").then(|| UserInfo {
                name: "alice".into(),
                ..UserInfo::default()
            }))
        }
    }

    #[async_trait]
    impl Authorizer for Reviews {
        async fn authorize(&self, attrs: &Attributes) -> Result<Decision, AuthError> {
            self.review().await?;
            Ok(if attrs.user.name == self.allow {
                Decision::Allow
            } else {
                Decision::Deny
            })
        }
    }

    fn guard_with(anonymous: bool, reviews: Arc<Reviews>, clock: Arc<FakeClock>) -> Guard {
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
            clock,
        )
    }

    fn guard(anonymous: bool, reviews: Arc<Reviews>) -> Guard {
        guard_with(anonymous, reviews, Arc::new(FakeClock::new(0)))
    }

    fn creds<'a>(cert: Option<&'a [u8]>, auth: Option<&'a str>) -> Credentials<'a> {
        Credentials {
            client_certificate: cert,
            authorization: auth,
        }
    }

    #[tokio::test]
    async fn no_credentials_is_401_unless_anonymous() {
        let reviews = Arc::new(Reviews::new("alice"));
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
    async fn a_bad_token_is_401_even_with_anonymous_on() {
        let reviews = Arc::new(Reviews::new("system:anonymous"));
        let g = guard(true, reviews);
        for header in ["Bearer bad", "bearer  bad"] {
            let refused = g.check(&creds(None, Some(header)), "GET", "/pods").await;
            assert_eq!(refused.err().map(|r| r.status), Some(401), "{header:?}");
        }
        // Another scheme, or no token after the scheme, is no bearer token: anonymous.
        for header in ["Basic YTpi", "Bearer "] {
            let user = g.check(&creds(None, Some(header)), "GET", "/pods").await;
            assert_eq!(
                user.map(|u| u.name).map_err(|r| r.body),
                Ok("system:anonymous".into()),
                "{header:?}"
            );
        }
    }

    #[test]
    fn bearer_tokens_are_read_as_upstream() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("  BEARER abc  "), Some("abc"));
        assert_eq!(bearer_token("Bearer abc def"), Some("abc"));
        assert_eq!(bearer_token("Bearer  abc"), Some(""));
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Basic abc"), None);
    }

    #[tokio::test]
    async fn tokens_and_decisions_are_cached() {
        let reviews = Arc::new(Reviews::new("alice"));
        let g = guard(false, reviews.clone());
        for _ in 0..3 {
            let user = g
                .check(&creds(None, Some("Bearer good")), "GET", "/stats/summary")
                .await
                .map_err(|r| r.body);
            assert_eq!(user.map(|u| u.name), Ok("alice".into()));
        }
        assert_eq!(reviews.calls(), 2);
        for _ in 0..3 {
            let refused = g
                .check(&creds(None, Some("Bearer bad")), "GET", "/pods")
                .await;
            assert_eq!(refused.err().map(|r| r.status), Some(401));
        }
        assert_eq!(reviews.calls(), 3, "a refused token is cached too");
    }

    #[tokio::test]
    async fn answers_expire_on_the_clock_and_errors_are_not_kept() {
        let reviews = Arc::new(Reviews::new("alice"));
        let clock = Arc::new(FakeClock::new(0));
        let g = guard_with(false, reviews.clone(), clock.clone());
        let good = creds(None, Some("Bearer good"));
        assert!(g.check(&good, "GET", "/pods").await.is_ok());
        assert_eq!(reviews.calls(), 2);
        // Within the authorized TTL (5 m) and cacheTTL (2 m): no review.
        clock.advance(Duration::from_secs(119));
        assert!(g.check(&good, "GET", "/pods").await.is_ok());
        assert_eq!(reviews.calls(), 2);
        // cacheTTL is over, the decision is still fresh: one TokenReview.
        clock.advance(Duration::from_secs(1));
        assert!(g.check(&good, "GET", "/pods").await.is_ok());
        assert_eq!(reviews.calls(), 3);
        // Both over; the API server fails: 401, and nothing is kept.
        clock.advance(Duration::from_secs(300));
        reviews.fail.store(true, Ordering::SeqCst);
        let refused = g.check(&good, "GET", "/pods").await;
        assert_eq!(refused.err().map(|r| r.status), Some(401));
        assert_eq!(reviews.calls(), 4);
        reviews.fail.store(false, Ordering::SeqCst);
        assert!(g.check(&good, "GET", "/pods").await.is_ok());
        assert_eq!(reviews.calls(), 6, "the error was not cached");
    }

    #[tokio::test]
    async fn denials_are_kept_for_the_unauthorized_ttl() {
        let reviews = Arc::new(Reviews::new("nobody"));
        let clock = Arc::new(FakeClock::new(0));
        let g = guard_with(false, reviews.clone(), clock.clone());
        let cert = creds(Some(b"carol team"), None);
        for _ in 0..2 {
            let refused = g.check(&cert, "GET", "/pods").await;
            assert_eq!(refused.err().map(|r| r.status), Some(403));
        }
        assert_eq!(reviews.calls(), 1);
        clock.advance(Duration::from_secs(30));
        let _ = g.check(&cert, "GET", "/pods").await;
        assert_eq!(reviews.calls(), 2, "30 s later the denial is asked again");
    }

    #[tokio::test]
    async fn authorization_errors_are_500_and_not_kept() {
        let reviews = Arc::new(Reviews::new("carol"));
        reviews.fail.store(true, Ordering::SeqCst);
        let g = guard(false, reviews.clone());
        let cert = creds(Some(b"carol"), None);
        let refused = g.check(&cert, "GET", "/pods").await;
        assert_eq!(
            refused.err().map(|r| (r.status, r.body)),
            Some((
                500,
                "Authorization error (user=carol, verb=get, resource=nodes, subresource=proxy)"
                    .into()
            ))
        );
        reviews.fail.store(false, Ordering::SeqCst);
        assert!(g.check(&cert, "GET", "/pods").await.is_ok());
        assert_eq!(reviews.calls(), 2);
    }

    /// Lets the held reviews run until `done` says so (a bounded number of turns).
    async fn until(done: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if done() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("never happened");
    }

    #[tokio::test]
    async fn concurrent_identical_reviews_are_made_once() {
        let reviews = Arc::new(Reviews::gated("alice"));
        let g = guard(false, reviews.clone());
        let good = creds(None, Some("Bearer good"));
        let requests = join_all((0..50).map(|_| g.check(&good, "GET", "/pods")));
        let release = async {
            until(|| reviews.calls() == 1).await;
            // Every request waits on that one TokenReview.
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
            assert_eq!(reviews.calls(), 1);
            assert_eq!(g.token_flights.len(), 1);
            if let Some(gate) = &reviews.gate {
                gate.add_permits(1000);
            }
        };
        let (answers, ()) = tokio::join!(requests, release);
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        // One TokenReview and one SubjectAccessReview for all fifty.
        assert_eq!(reviews.calls(), 2);
        assert_eq!(g.token_flights.len(), 0);
        assert_eq!(g.decision_flights.len(), 0);
    }

    #[tokio::test]
    async fn a_waiter_takes_over_when_the_first_caller_goes_away() {
        let reviews = Arc::new(Reviews::gated("alice"));
        let g = guard(false, reviews.clone());
        let good = creds(None, Some("Bearer good"));
        let mut first = Box::pin(g.check(&good, "GET", "/pods"));
        let second = g.check(&good, "GET", "/pods");
        tokio::pin!(second);
        // Both start; the first makes the review, the second waits on it.
        assert!(futures_util::FutureExt::now_or_never(first.as_mut()).is_none());
        assert!(futures_util::FutureExt::now_or_never(second.as_mut()).is_none());
        assert_eq!(reviews.calls(), 1);
        // The first client hangs up: its review is dropped.
        drop(first);
        if let Some(gate) = &reviews.gate {
            gate.add_permits(1000);
        }
        assert!(second.await.is_ok());
        assert_eq!(reviews.calls(), 3, "the second made its own TokenReview");
    }

    #[tokio::test]
    async fn reviews_in_flight_are_bounded() {
        let reviews = Arc::new(Reviews::gated("alice"));
        let g = guard(false, reviews.clone());
        let headers: Vec<String> = (0..200).map(|i| format!("Bearer random-{i}")).collect();
        let all: Vec<Credentials<'_>> = headers.iter().map(|h| creds(None, Some(h))).collect();
        let requests = join_all(all.iter().map(|c| g.check(c, "GET", "/pods")));
        let release = async {
            until(|| reviews.active.load(Ordering::SeqCst) == MAX_REVIEWS_IN_FLIGHT).await;
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
            assert_eq!(reviews.calls(), MAX_REVIEWS_IN_FLIGHT);
            if let Some(gate) = &reviews.gate {
                gate.add_permits(1000);
            }
        };
        let (answers, ()) = tokio::join!(requests, release);
        assert!(answers
            .iter()
            .all(|a| a.as_ref().err().map(|r| r.status) == Some(401)));
        assert_eq!(reviews.calls(), 200);
        assert_eq!(
            reviews.most_active.load(Ordering::SeqCst),
            MAX_REVIEWS_IN_FLIGHT
        );
    }

    #[tokio::test]
    async fn client_certificates_name_the_user() {
        let reviews = Arc::new(Reviews::new("kube-apiserver-kubelet-client"));
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
