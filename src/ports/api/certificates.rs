//! Certificate signing requests (`certificates.k8s.io/v1`), for the kubelet's client
//! certificate.

use std::time::Duration;

use async_trait::async_trait;
use thiserror::Error;

use super::CallError;

/// A request for a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrRequest {
    /// The object's name; `None` lets the server name it (`csr-` and a suffix).
    pub name: Option<String>,
    /// The PKCS#10 request, PEM.
    pub request_pem: Vec<u8>,
    pub signer_name: String,
    pub usages: Vec<String>,
    pub expiration_seconds: Option<i32>,
}

/// The request as stored: the name and uid to wait on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrRef {
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Error)]
pub enum CertificatesError {
    /// A request of that name exists with another content.
    #[error("certificate signing request {name:?} exists and is not this request")]
    Exists { name: String },
    #[error(
        "certificate signing request {name:?} is denied, reason: {reason:?}, message: {message:?}"
    )]
    Denied {
        name: String,
        reason: String,
        message: String,
    },
    #[error(
        "certificate signing request {name:?} failed, reason: {reason:?}, message: {message:?}"
    )]
    Failed {
        name: String,
        reason: String,
        message: String,
    },
    /// Gone, or replaced by another object of the same name.
    #[error("certificate signing request {name:?} was deleted or replaced while waiting")]
    Gone { name: String },
    #[error(
        "timed out after {waited:?} waiting for certificate signing request {name:?} to be signed"
    )]
    TimedOut { name: String, waited: Duration },
    #[error("{verb} certificate signing request {name:?}: {source}")]
    Call {
        verb: &'static str,
        name: String,
        #[source]
        source: CallError,
    },
}

#[async_trait]
pub trait CertificateApi: Send + Sync {
    /// Create the request; an identical one of the same name is reused (a restart during
    /// bootstrap), as upstream does.
    /// # Errors
    /// [`CertificatesError::Exists`] when the name holds another request.
    async fn create_csr(&self, request: &CsrRequest) -> Result<CsrRef, CertificatesError>;

    /// Wait until the request is approved and signed, at most `within`, and return the
    /// certificate (PEM).
    /// # Errors
    /// [`CertificatesError::Denied`], [`CertificatesError::Failed`],
    /// [`CertificatesError::Gone`], [`CertificatesError::TimedOut`].
    async fn wait_for_certificate(
        &self,
        csr: &CsrRef,
        within: Duration,
    ) -> Result<Vec<u8>, CertificatesError>;
}
