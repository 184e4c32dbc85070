//! Keys, requests and certificates as plain text: what the node agent's unit tests need
//! of the PKI port (the real one, `adapters::pki`, is tested against rcgen and the API
//! server's signer).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::domain::node_status::certificate::NodeSubject;
use crate::ports::pki::{CertificateRequest, Pki, PkiError, Validity};

const KEY_PREFIX: &str = "FAKE KEY ";
const CERT_PREFIX: &str = "FAKE CERT ";

/// Each key is `FAKE KEY <n>`; a request is `FAKE CSR <key> <subject>`; a certificate is
/// `FAKE CERT <not before> <not after>` in Unix seconds (see [`FakePki::certificate`]).
#[derive(Debug, Default)]
pub struct FakePki {
    keys: AtomicU64,
}

impl FakePki {
    pub fn new() -> Self {
        Self::default()
    }

    /// A certificate valid from `not_before` to `not_after` (Unix seconds).
    pub fn certificate(not_before: i64, not_after: i64) -> Vec<u8> {
        format!("{CERT_PREFIX}{not_before} {not_after}\n").into_bytes()
    }
}

impl Pki for FakePki {
    fn generate_key(&self) -> Result<String, PkiError> {
        let n = self.keys.fetch_add(1, Ordering::Relaxed);
        Ok(format!("{KEY_PREFIX}{n}\n"))
    }

    fn valid_key(&self, pem: &str) -> bool {
        pem.starts_with(KEY_PREFIX)
    }

    fn certificate_request(
        &self,
        key_pem: &str,
        subject: &NodeSubject,
        usages: &[&str],
    ) -> Result<CertificateRequest, PkiError> {
        if !self.valid_key(key_pem) {
            return Err(PkiError::Key("not a fake key".into()));
        }
        let key = key_pem.trim();
        let pem = format!(
            "FAKE CSR {key} CN={} O={} {}\n",
            subject.common_name,
            subject.organization,
            usages.join(",")
        );
        let digest = key.trim_start_matches(KEY_PREFIX);
        Ok(CertificateRequest {
            pem: pem.into_bytes(),
            digest_name: format!("node-csr-fake{digest}"),
        })
    }

    fn validity(&self, pem: &[u8]) -> Result<Validity, PkiError> {
        let text = String::from_utf8_lossy(pem);
        // A pair file: the certificate's line, then the key's (as the PEM reader skips it).
        let dates = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .strip_prefix(CERT_PREFIX)
            .ok_or_else(|| PkiError::Certificate("not a fake certificate".into()))?;
        let mut parts = dates.split(' ').map(str::parse::<i64>);
        match (parts.next(), parts.next()) {
            (Some(Ok(not_before)), Some(Ok(not_after))) => Ok(Validity {
                not_before,
                not_after,
            }),
            _ => Err(PkiError::Certificate(format!("bad dates {dates:?}"))),
        }
    }

    fn self_signed_serving(
        &self,
        hosts: &[String],
        unix_now: i64,
    ) -> Result<(String, String), PkiError> {
        let key = self.generate_key()?;
        let cert = format!("FAKE SERVING {} {unix_now}\n", hosts.join(","));
        Ok((cert, key))
    }

    fn subject(&self, der: &[u8]) -> Result<(String, Vec<String>), PkiError> {
        let text = String::from_utf8_lossy(der);
        let (cn, orgs) = text.split_once(' ').unwrap_or((&text, ""));
        Ok((
            cn.to_owned(),
            orgs.split(',')
                .filter(|o| !o.is_empty())
                .map(str::to_owned)
                .collect(),
        ))
    }

    fn token_digest(&self, token: &str) -> String {
        format!("digest of {token}")
    }
}
