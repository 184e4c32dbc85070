//! Who calls the kubelet API and what they may do: bearer tokens checked by the API
//! server (TokenReview) and requests authorized by it (SubjectAccessReview).

use async_trait::async_trait;
use thiserror::Error;

use crate::domain::kubelet_api::auth::{Attributes, Decision, UserInfo};

#[derive(Debug, Error)]
pub enum AuthError {
    /// The review could not be made (API server unreachable, refused the review).
    #[error("{what} failed: {message}")]
    Review {
        what: &'static str,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

/// Checks bearer tokens.
#[async_trait]
pub trait Authenticator: Send + Sync {
    /// The token's user, or `None` when the token is not valid.
    /// # Errors
    /// [`AuthError::Review`] when no answer could be had (the request is then refused).
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError>;
}

/// Decides whether a user may make a request.
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// # Errors
    /// [`AuthError::Review`] when no answer could be had.
    async fn authorize(&self, attributes: &Attributes) -> Result<Decision, AuthError>;
}
