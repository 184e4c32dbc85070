//! Keys, certificate requests and certificate dates: rcgen (ECDSA P-256 over ring) and
//! x509-parser. Pure computation, no files.

use base64::Engine;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PublicKeyData};

use crate::domain::node_status::certificate::NodeSubject;
use crate::ports::pki::{CertificateRequest, Pki, PkiError, Validity};

#[derive(Debug, Clone, Copy, Default)]
pub struct RcgenPki;

/// Upstream's `digestedName`: `node-csr-` and the unpadded base64url SHA-512/256 of the
/// public key (PKIX DER), the common name, the organizations and the usages, each
/// base64url-encoded and followed by `|`.
pub fn digested_name(public_key_der: &[u8], subject: &NodeSubject, usages: &[&str]) -> String {
    let encode = |data: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data);
    let mut input = Vec::new();
    let mut write = |data: &[u8]| {
        input.extend_from_slice(encode(data).as_bytes());
        input.push(b'|');
    };
    write(public_key_der);
    write(subject.common_name.as_bytes());
    write(subject.organization.as_bytes());
    for usage in usages {
        write(usage.as_bytes());
    }
    let digest = ring::digest::digest(&ring::digest::SHA512_256, &input);
    format!("node-csr-{}", encode(digest.as_ref()))
}

/// The process's secret for token digests, made once (`None` when the system's random
/// source fails: then an unkeyed SHA-256, which still keeps no token).
fn token_key() -> Option<&'static ring::hmac::Key> {
    static KEY: std::sync::OnceLock<Option<ring::hmac::Key>> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &ring::rand::SystemRandom::new()).ok()
    })
    .as_ref()
}

impl Pki for RcgenPki {
    fn generate_key(&self) -> Result<String, PkiError> {
        KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map(|k| k.serialize_pem())
            .map_err(|e| PkiError::Key(e.to_string()))
    }

    fn valid_key(&self, pem: &str) -> bool {
        KeyPair::from_pem(pem).is_ok()
    }

    fn certificate_request(
        &self,
        key_pem: &str,
        subject: &NodeSubject,
        usages: &[&str],
    ) -> Result<CertificateRequest, PkiError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| PkiError::Key(e.to_string()))?;
        // rcgen takes each alternative name that parses as an IP as an IP address.
        let mut params = CertificateParams::new(subject.alt_names.clone())
            .map_err(|e| PkiError::Request(e.to_string()))?;
        let mut name = DistinguishedName::new();
        name.push(DnType::OrganizationName, subject.organization.clone());
        name.push(DnType::CommonName, subject.common_name.clone());
        params.distinguished_name = name;
        let request = params
            .serialize_request(&key)
            .and_then(|r| r.pem())
            .map_err(|e| PkiError::Request(e.to_string()))?;
        Ok(CertificateRequest {
            pem: request.into_bytes(),
            digest_name: digested_name(&key.subject_public_key_info(), subject, usages),
        })
    }

    fn validity(&self, pem: &[u8]) -> Result<Validity, PkiError> {
        let (_, block) = x509_parser::pem::parse_x509_pem(pem)
            .map_err(|e| PkiError::Certificate(format!("not PEM: {e}")))?;
        let certificate = block
            .parse_x509()
            .map_err(|e| PkiError::Certificate(format!("not X.509: {e}")))?;
        let validity = certificate.validity();
        Ok(Validity {
            not_before: validity.not_before.timestamp(),
            not_after: validity.not_after.timestamp(),
        })
    }

    fn self_signed_serving(
        &self,
        hosts: &[String],
        unix_now: i64,
    ) -> Result<(String, String), PkiError> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| PkiError::Key(e.to_string()))?;
        let mut params = CertificateParams::new(hosts.to_vec())
            .map_err(|e| PkiError::Certificate(e.to_string()))?;
        let mut name = DistinguishedName::new();
        let host = hosts.first().map_or("localhost", String::as_str);
        name.push(DnType::CommonName, format!("{host}@{unix_now}"));
        params.distinguished_name = name;
        let start = time::OffsetDateTime::from_unix_timestamp(unix_now)
            .map_err(|e| PkiError::Certificate(e.to_string()))?;
        params.not_before = start - time::Duration::hours(1);
        params.not_after = start + time::Duration::days(365);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::DigitalSignature,
            rcgen::KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .self_signed(&key)
            .map_err(|e| PkiError::Certificate(e.to_string()))?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    fn subject(&self, der: &[u8]) -> Result<(String, Vec<String>), PkiError> {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| PkiError::Certificate(format!("not X.509: {e}")))?;
        let subject = cert.subject();
        let common_name = subject
            .iter_common_name()
            .next()
            .and_then(|a| a.as_str().ok())
            .unwrap_or_default()
            .to_owned();
        let organizations = subject
            .iter_organization()
            .filter_map(|a| a.as_str().ok().map(str::to_owned))
            .collect();
        Ok((common_name, organizations))
    }

    fn token_digest(&self, token: &str) -> String {
        let tag = match token_key() {
            Some(key) => ring::hmac::sign(key, token.as_bytes()).as_ref().to_vec(),
            None => ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
                .as_ref()
                .to_vec(),
        };
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::node_status::certificate::{node_subject, CLIENT_USAGES};

    #[test]
    fn a_token_digest_is_stable_distinct_and_keeps_nothing_of_the_token() {
        let token = "eyJhbGciOiJSUzI1NiJ9.secret-part";
        let digest = RcgenPki.token_digest(token);
        assert_eq!(digest, RcgenPki.token_digest(token));
        assert_ne!(digest, RcgenPki.token_digest("another"));
        assert!(!digest.contains("secret"), "{digest}");
        // 32 bytes of HMAC-SHA256, base64url without padding.
        assert_eq!(digest.len(), 43);
    }

    #[test]
    fn a_request_for_the_node_with_a_stable_digest_name() {
        let pki = RcgenPki;
        let key = pki.generate_key().expect("key");
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(pki.valid_key(&key));
        assert!(!pki.valid_key("junk"));
        let subject = node_subject("n1");
        let a = pki
            .certificate_request(&key, &subject, CLIENT_USAGES)
            .expect("request");
        let b = pki
            .certificate_request(&key, &subject, CLIENT_USAGES)
            .expect("request");
        assert!(String::from_utf8_lossy(&a.pem).starts_with("-----BEGIN CERTIFICATE REQUEST-----"));
        assert_eq!(a.digest_name, b.digest_name);
        assert!(a.digest_name.starts_with("node-csr-"));
        // 32 bytes of digest in unpadded base64url.
        assert_eq!(a.digest_name.len(), "node-csr-".len() + 43);
        let other = pki.generate_key().expect("key");
        let c = pki
            .certificate_request(&other, &subject, CLIENT_USAGES)
            .expect("request");
        assert_ne!(a.digest_name, c.digest_name);
    }

    #[test]
    fn validity_of_a_self_signed_certificate() {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let mut params = CertificateParams::default();
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = rcgen::date_time_ymd(2026, 1, 2);
        let cert = params.self_signed(&key).expect("cert");
        let validity = RcgenPki.validity(cert.pem().as_bytes()).expect("validity");
        assert_eq!(validity.not_after - validity.not_before, 86_400);
        assert_eq!(validity.not_before, 1_767_225_600);
        assert!(RcgenPki.validity(b"junk").is_err());
    }
}
