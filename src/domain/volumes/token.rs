//! Service-account tokens (TokenRequest), as upstream's token manager keeps them: one
//! per pod, service account, audience and lifetime, bound to the pod, refreshed when
//! 80 % of its life has passed or it is older than 24 hours.

use super::{TokenKey, DEFAULT_TOKEN_EXPIRATION_SECONDS};
use crate::domain::pod::ServiceAccountTokenProjection;

/// The longest a token is kept before a refresh, whatever its lifetime.
pub const MAX_TOKEN_AGE_SECONDS: i64 = 24 * 60 * 60;

/// What to ask the TokenRequest API for.
pub fn token_key(projection: &ServiceAccountTokenProjection) -> TokenKey {
    TokenKey {
        audience: projection.audience.clone(),
        expiration_seconds: projection
            .expiration_seconds
            .unwrap_or(DEFAULT_TOKEN_EXPIRATION_SECONDS),
    }
}

/// A token as the API server issued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    pub token: String,
    /// When the kubelet received it, seconds since the Unix epoch.
    pub issued_unix: i64,
    /// `status.expirationTimestamp`.
    pub expires_unix: i64,
}

/// Upstream's `requiresRefresh`: past 80 % of the token's life, or older than 24 h.
pub fn requires_refresh(token: &IssuedToken, now_unix: i64) -> bool {
    let life = (token.expires_unix - token.issued_unix).max(0);
    let refresh_at = token.issued_unix + life * 8 / 10;
    now_unix >= refresh_at || now_unix - token.issued_unix > MAX_TOKEN_AGE_SECONDS
}

/// When a fresh token is due, for the next sync: seconds from `now_unix`.
pub fn seconds_until_refresh(token: &IssuedToken, now_unix: i64) -> i64 {
    let life = (token.expires_unix - token.issued_unix).max(0);
    let refresh_at =
        (token.issued_unix + life * 8 / 10).min(token.issued_unix + MAX_TOKEN_AGE_SECONDS);
    (refresh_at - now_unix).max(0)
}
