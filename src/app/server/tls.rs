//! The kubelet API's TLS: the serving certificate (`tlsCertFile`/`tlsPrivateKeyFile`, or a
//! self-signed `kubelet.crt`/`kubelet.key` in `--cert-dir` made once as upstream does),
//! client certificates verified against `authentication.x509.clientCAFile` (optional: a
//! client without one goes on to token or anonymous authentication), `tlsMinVersion` and
//! `tlsCipherSuites` mapped to rustls, and ALPN for HTTP/2 and HTTP/1.1.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use thiserror::Error;
use tracing::info;

use crate::domain::kubelet_api::settings::{self_signed_hosts, ServerSettings, TlsMinVersion};
use crate::ports::pki::{Pki, PkiError};

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("failed to read {what} {}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{what} {}: {problem}", path.display())]
    Invalid {
        what: &'static str,
        path: PathBuf,
        problem: String,
    },
    #[error("failed to write the self-signed serving certificate in {}", dir.display())]
    Write {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to make a self-signed serving certificate")]
    SelfSigned(#[source] PkiError),
    #[error("TLS settings refused by rustls")]
    Rustls(#[source] rustls::Error),
    #[error("the client CA file {} cannot verify clients: {problem}", path.display())]
    ClientCa { path: PathBuf, problem: String },
}

/// Upstream's files in `--cert-dir` when no serving certificate is given.
pub const SELF_SIGNED_CERT: &str = "kubelet.crt";
pub const SELF_SIGNED_KEY: &str = "kubelet.key";

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(what, path)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Invalid {
            what,
            path: path.to_path_buf(),
            problem: format!("not PEM certificates: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Invalid {
            what,
            path: path.to_path_buf(),
            problem: "no certificate in it".into(),
        });
    }
    Ok(certs)
}

/// The serving certificate and key files: given, or upstream's self-signed pair in the
/// certificate folder, made when missing.
pub fn serving_files(
    settings: &ServerSettings,
    hostname: &str,
    pki: &dyn Pki,
    unix_now: i64,
) -> Result<(PathBuf, PathBuf), TlsError> {
    if let Some((cert, key)) = &settings.tls_files {
        return Ok((cert.clone(), key.clone()));
    }
    let cert = settings.cert_dir.join(SELF_SIGNED_CERT);
    let key = settings.cert_dir.join(SELF_SIGNED_KEY);
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    let (cert_pem, key_pem) = pki
        .self_signed_serving(&self_signed_hosts(hostname), unix_now)
        .map_err(TlsError::SelfSigned)?;
    let write = |path: &Path, text: &str, mode: u32| -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(mode)
            .open(path)?;
        file.write_all(text.as_bytes())
    };
    let wrote = std::fs::create_dir_all(&settings.cert_dir)
        .and_then(|()| write(&key, &key_pem, 0o600))
        .and_then(|()| write(&cert, &cert_pem, 0o644));
    wrote.map_err(|source| TlsError::Write {
        dir: settings.cert_dir.clone(),
        source,
    })?;
    info!(cert = %cert.display(), key = %key.display(), "made a self-signed serving certificate");
    Ok((cert, key))
}

/// Go's name of a cipher suite in rustls' spelling (Go's legacy ChaCha names lack the
/// hash).
fn rustls_name(go_name: &str) -> String {
    if go_name.ends_with("CHACHA20_POLY1305") && go_name.starts_with("TLS_ECDHE") {
        format!("{go_name}_SHA256")
    } else {
        go_name.to_owned()
    }
}

fn provider(settings: &ServerSettings) -> CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    if !settings.tls_cipher_suites.is_empty() {
        let wanted: Vec<String> = settings
            .tls_cipher_suites
            .iter()
            .map(|n| rustls_name(n))
            .collect();
        // TLS 1.3's suites are not configurable, as in Go.
        provider.cipher_suites.retain(|s| {
            s.version() == &rustls::version::TLS13 || wanted.contains(&format!("{:?}", s.suite()))
        });
    }
    provider
}

/// The server's TLS configuration.
pub fn server_config(
    settings: &ServerSettings,
    cert_file: &Path,
    key_file: &Path,
) -> Result<ServerConfig, TlsError> {
    let chain = certificates("tlsCertFile", cert_file)?;
    let key_pem = read("tlsPrivateKeyFile", key_file)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Invalid {
        what: "tlsPrivateKeyFile",
        path: key_file.to_path_buf(),
        problem: format!("no private key in it: {e}"),
    })?;
    let provider = Arc::new(provider(settings));
    let versions: &[&rustls::SupportedProtocolVersion] = match settings.tls_min_version {
        TlsMinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsMinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(TlsError::Rustls)?;
    let builder = match &settings.client_ca_file {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("authentication.x509.clientCAFile", path)? {
                roots.add(cert).map_err(|e| TlsError::ClientCa {
                    path: path.clone(),
                    problem: e.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::ClientCa {
                    path: path.clone(),
                    problem: e.to_string(),
                })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(TlsError::Rustls)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_names_map_to_rustls_names() {
        assert_eq!(
            rustls_name("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"),
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
        );
        let mut settings = crate::domain::kubelet_api::settings::server_settings(
            &crate::domain::config::model::KubeletConfiguration::default(),
            Path::new("/pki"),
        )
        .unwrap_or_else(|p| panic!("{p:?}"));
        settings.tls_cipher_suites = vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into()];
        let names: Vec<String> = provider(&settings)
            .cipher_suites
            .iter()
            .map(|s| format!("{:?}", s.suite()))
            .collect();
        assert!(names.contains(&"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_owned()));
        assert!(!names.contains(&"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384".to_owned()));
        assert!(names.contains(&"TLS13_AES_128_GCM_SHA256".to_owned()));
    }
}
