//! The node's private key, certificate requests and certificate dates.

use thiserror::Error;

use crate::domain::node_status::certificate::NodeSubject;

/// A PKCS#10 request and upstream's name for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateRequest {
    pub pem: Vec<u8>,
    /// `node-csr-<digest of the public key, subject and usages>` (upstream's
    /// `digestedName`): the same key asks under the same name after a restart.
    pub digest_name: String,
}

/// A certificate's validity, in Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

#[derive(Debug, Error)]
pub enum PkiError {
    #[error("private key: {0}")]
    Key(String),
    #[error("certificate request: {0}")]
    Request(String),
    #[error("certificate: {0}")]
    Certificate(String),
}

pub trait Pki: Send + Sync {
    /// A new ECDSA P-256 private key, PEM (PKCS#8), as upstream's kubelet makes.
    fn generate_key(&self) -> Result<String, PkiError>;

    /// Whether `pem` holds a private key this node can use.
    fn valid_key(&self, pem: &str) -> bool;

    /// A request for `subject` signed by `key_pem`.
    fn certificate_request(
        &self,
        key_pem: &str,
        subject: &NodeSubject,
        usages: &[&str],
    ) -> Result<CertificateRequest, PkiError>;

    /// The validity of the first certificate in `pem`.
    fn validity(&self, pem: &[u8]) -> Result<Validity, PkiError>;

    /// A self-signed serving certificate and its key (PEM), as upstream's kubelet makes
    /// when no `tlsCertFile` is given: `<host>@<unix time>`, valid a year, for `hosts`
    /// (names and IP addresses).
    fn self_signed_serving(
        &self,
        hosts: &[String],
        unix_now: i64,
    ) -> Result<(String, String), PkiError>;

    /// The subject's common name and organizations of a DER certificate (a client's).
    fn subject(&self, der: &[u8]) -> Result<(String, Vec<String>), PkiError>;

    /// A digest of a bearer token keyed with a secret of this process (upstream's
    /// HMAC-SHA256 cache key): what the review cache keeps, so no token stays in
    /// memory after its request and none can be read back from the cache.
    fn token_digest(&self, token: &str) -> String;
}
