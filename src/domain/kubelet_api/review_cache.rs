//! The kubelet API's cache of webhook answers, as upstream's: TokenReview answers
//! (`cached_token_authenticator.go`, built by the kubelet with `cacheErrs=false` and
//! `cacheTTL` for both successes and failures) and SubjectAccessReview answers
//! (`plugin/pkg/authorizer/webhook`: `cacheAuthorizedTTL` for allowed, `cacheUnauthorizedTTL`
//! for the rest). An error (no answer) is never cached, so the next request asks again.
//!
//! Time is the caller's monotonic clock, given as a [`Duration`] since any fixed origin: the
//! decisions here need no clock of their own, and tests drive them with plain numbers.

use std::collections::HashMap;
use std::time::Duration;

use super::auth::{Decision, UserInfo};

/// How long a TokenReview's answer is kept: `answer` is `None` when the review failed (not
/// cached), `Some(None)` when the token is not valid, `Some(Some(user))` when it is. A zero
/// TTL caches nothing.
pub fn token_answer_ttl(
    cache_ttl: Duration,
    answer: Option<&Option<UserInfo>>,
) -> Option<Duration> {
    answer.and(Some(cache_ttl)).filter(|ttl| !ttl.is_zero())
}

/// How long a SubjectAccessReview's answer is kept: `answer` is `None` when the review
/// failed (not cached); allowed answers for `authorized`, the others for `unauthorized`.
pub fn decision_ttl(
    authorized: Duration,
    unauthorized: Duration,
    answer: Option<&Decision>,
) -> Option<Duration> {
    let ttl = match answer? {
        Decision::Allow => authorized,
        Decision::Deny => unauthorized,
    };
    (!ttl.is_zero()).then_some(ttl)
}

/// Answers kept until they expire, at most `capacity` of them: a flood of distinct tokens
/// cannot grow memory without end (when full, expired answers go first, then the ones
/// closest to expiry).
#[derive(Debug)]
pub struct ReviewCache<V> {
    entries: HashMap<String, (Duration, V)>,
    capacity: usize,
}

impl<V: Clone> ReviewCache<V> {
    pub fn new(capacity: usize) -> Self {
        ReviewCache {
            entries: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// The answer kept for `key`, unless it expired by `now` (then it is forgotten).
    pub fn get(&mut self, key: &str, now: Duration) -> Option<V> {
        match self.entries.get(key) {
            Some((expiry, value)) if *expiry > now => Some(value.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `ttl` from `now`; `None` (an error, or a zero TTL) keeps nothing.
    pub fn put(&mut self, key: String, value: V, ttl: Option<Duration>, now: Duration) {
        let Some(ttl) = ttl else {
            return;
        };
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (expiry, _)| *expiry > now);
            while self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (expiry, _))| *expiry)
                    .map(|(k, _)| k.clone());
                match soonest {
                    Some(k) => self.entries.remove(&k),
                    None => break,
                };
            }
        }
        self.entries.insert(key, (now.saturating_add(ttl), value));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The SubjectAccessReview cache key: everything the review asks (upstream keys on the
/// review's whole spec), so users, groups or extras that differ never share an answer.
pub fn decision_key(attrs: &super::auth::Attributes) -> String {
    let mut key = String::new();
    let mut field = |s: &str| {
        // Length-prefixed, so no field's text can pass for a field boundary.
        key.push_str(&s.len().to_string());
        key.push(':');
        key.push_str(s);
    };
    field(&attrs.user.name);
    field(&attrs.user.uid);
    for group in &attrs.user.groups {
        field(group);
    }
    field("|extra");
    for (name, values) in &attrs.user.extra {
        field(name);
        for value in values {
            field(value);
        }
        field("|");
    }
    for part in [
        &attrs.verb,
        &attrs.namespace,
        &attrs.api_group,
        &attrs.api_version,
        &attrs.resource,
        &attrs.subresource,
        &attrs.name,
    ] {
        field(part);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::kubelet_api::auth::{request_attributes, x509_user};

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn alice() -> UserInfo {
        UserInfo {
            name: "alice".into(),
            ..UserInfo::default()
        }
    }

    #[test]
    fn token_answers_are_kept_for_cache_ttl_and_errors_not_at_all() {
        let ttl = S(120);
        assert_eq!(token_answer_ttl(ttl, Some(&Some(alice()))), Some(ttl));
        assert_eq!(
            token_answer_ttl(ttl, Some(&None)),
            Some(ttl),
            "a refused token is cached too"
        );
        assert_eq!(token_answer_ttl(ttl, None), None, "an error is not cached");
        assert_eq!(token_answer_ttl(Duration::ZERO, Some(&Some(alice()))), None);
    }

    #[test]
    fn decisions_are_kept_for_their_own_ttl() {
        let (yes, no) = (S(300), S(30));
        assert_eq!(decision_ttl(yes, no, Some(&Decision::Allow)), Some(yes));
        assert_eq!(decision_ttl(yes, no, Some(&Decision::Deny)), Some(no));
        assert_eq!(decision_ttl(yes, no, None), None);
        assert_eq!(
            decision_ttl(yes, Duration::ZERO, Some(&Decision::Deny)),
            None
        );
    }

    #[test]
    fn an_answer_expires_at_its_ttl_on_the_clock() {
        let mut cache = ReviewCache::new(16);
        let start = S(1_000);
        cache.put("t".into(), Some(alice()), Some(S(120)), start);
        assert_eq!(cache.get("t", start), Some(Some(alice())));
        assert_eq!(
            cache.get("t", start + S(119)),
            Some(Some(alice())),
            "fresh just before its TTL"
        );
        assert_eq!(cache.get("t", start + S(120)), None, "gone at its TTL");
        assert!(cache.is_empty(), "an expired answer is forgotten");
        cache.put("e".into(), Some(alice()), None, start);
        assert_eq!(cache.get("e", start), None, "an error keeps nothing");
    }

    #[test]
    fn allowed_outlive_denied_as_configured() {
        let mut cache = ReviewCache::new(16);
        let now = S(5);
        let ttl = |d| decision_ttl(S(300), S(30), Some(&d));
        cache.put("yes".into(), Decision::Allow, ttl(Decision::Allow), now);
        cache.put("no".into(), Decision::Deny, ttl(Decision::Deny), now);
        assert_eq!(cache.get("no", now + S(29)), Some(Decision::Deny));
        assert_eq!(cache.get("no", now + S(30)), None);
        assert_eq!(cache.get("yes", now + S(299)), Some(Decision::Allow));
        assert_eq!(cache.get("yes", now + S(300)), None);
    }

    #[test]
    fn a_full_cache_drops_expired_then_soonest_to_expire() {
        let mut cache = ReviewCache::new(3);
        cache.put("old".into(), 1, Some(S(10)), S(0));
        cache.put("short".into(), 2, Some(S(50)), S(0));
        cache.put("long".into(), 3, Some(S(500)), S(0));
        // At 20 s "old" has expired: it makes room.
        cache.put("new".into(), 4, Some(S(100)), S(20));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("short", S(20)), Some(2));
        // Nothing expired: the one closest to expiry ("short", at 50 s) goes.
        cache.put("newer".into(), 5, Some(S(100)), S(21));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("short", S(21)), None);
        assert_eq!(cache.get("long", S(21)), Some(3));
        assert_eq!(cache.get("newer", S(21)), Some(5));
    }

    #[test]
    fn decision_keys_differ_by_every_reviewed_field() {
        let user = x509_user("bob", &["team".into()]).unwrap_or_default();
        let base = request_attributes(user.clone(), "GET", "/pods", "node-1");
        let mut other_extra = base.clone();
        other_extra
            .user
            .extra
            .insert("scopes".into(), vec!["a".into()]);
        let mut other_group = base.clone();
        other_group.user.groups = vec!["team,system:authenticated".into()];
        let others = [
            request_attributes(user.clone(), "POST", "/pods", "node-1"),
            request_attributes(user.clone(), "GET", "/stats/summary", "node-1"),
            request_attributes(user, "GET", "/pods", "node-2"),
            other_extra,
            other_group,
        ];
        for other in &others {
            assert_ne!(decision_key(&base), decision_key(other), "{other:?}");
        }
        // The path below a subresource is not reviewed: the same answer serves both.
        let same = request_attributes(base.user.clone(), "GET", "/runningpods/", "node-1");
        assert_eq!(decision_key(&base), decision_key(&same));
    }
}
