//! The kubelet API's TLS: the serving certificate (`tlsCertFile`/`tlsPrivateKeyFile`, or a
//! self-signed `kubelet.crt`/`kubelet.key` in `--cert-dir` made once as upstream does),
//! client certificates verified against `authentication.x509.clientCAFile` (optional: a
//! client without one goes on to token or anonymous authentication), `tlsMinVersion` and
//! `tlsCipherSuites` mapped to rustls, and ALPN for HTTP/2 and HTTP/1.1.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use thiserror::Error;
use tracing::{debug, info, warn};

use crate::domain::kubelet_api::settings::{self_signed_hosts, ServerSettings, TlsMinVersion};
use crate::domain::node_status::certificate::{prefixed_current_pair_name, SERVER_PAIR_PREFIX};
use crate::ports::cert_store::{CertStore, CertStoreError, FileStamp};
use crate::ports::error::Chain;
use crate::ports::pki::{Pki, PkiError};

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("failed to read {what} {}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
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
        source: CertStoreError,
    },
    #[error("failed to make a self-signed serving certificate")]
    SelfSigned(#[source] PkiError),
    #[error("TLS settings refused by rustls")]
    Rustls(#[source] rustls::Error),
    #[error("the client CA file {} cannot verify clients: {problem}", path.display())]
    ClientCa { path: PathBuf, problem: String },
    #[error("the key in {} is refused by rustls", path.display())]
    Key {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
}

/// Upstream's files in `--cert-dir` when no serving certificate is given.
pub const SELF_SIGNED_CERT: &str = "kubelet.crt";
pub const SELF_SIGNED_KEY: &str = "kubelet.key";

fn read(files: &dyn CertStore, what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    // The OS's error is the cause: the message names the file already.
    files.read_file(path).map_err(|e| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source: e.source,
    })
}

fn certificates(
    files: &dyn CertStore,
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    pem_certificates(what, path, &read(files, what, path)?)
}

/// The certificates of `pem`, read from `path`.
fn pem_certificates(
    what: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
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
    files: &dyn CertStore,
    unix_now: i64,
) -> Result<(PathBuf, PathBuf), TlsError> {
    if let Some((cert, key)) = &settings.tls_files {
        return Ok((cert.clone(), key.clone()));
    }
    let cert = settings.cert_dir.join(SELF_SIGNED_CERT);
    let key = settings.cert_dir.join(SELF_SIGNED_KEY);
    if files.file_stamp(&cert).is_some() && files.file_stamp(&key).is_some() {
        return Ok((cert, key));
    }
    let (cert_pem, key_pem) = pki
        .self_signed_serving(&self_signed_hosts(hostname), unix_now)
        .map_err(TlsError::SelfSigned)?;
    let wrote = files.write_serving_pair(&cert, &cert_pem, &key, &key_pem);
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

/// Where the serving certificate comes from.
enum Serving {
    Files {
        cert: PathBuf,
        key: PathBuf,
    },
    /// `serverTLSBootstrap`: the current issued pair, reloaded when it changes.
    Bootstrapped(PathBuf),
}

/// The server's TLS configuration with the certificate and key files.
pub fn server_config(
    settings: &ServerSettings,
    files: Arc<dyn CertStore>,
    cert_file: &Path,
    key_file: &Path,
) -> Result<ServerConfig, TlsError> {
    config(
        settings,
        files,
        Serving::Files {
            cert: cert_file.to_path_buf(),
            key: key_file.to_path_buf(),
        },
    )
}

/// The server's TLS configuration with `serverTLSBootstrap`: the certificate is
/// `kubelet-server-current.pem` in `--cert-dir` (certificate and key), read again when it
/// changes; until one is issued every handshake fails, as upstream's `GetCertificate`
/// answers "no serving certificate available for the kubelet".
pub fn bootstrapped_server_config(
    settings: &ServerSettings,
    files: Arc<dyn CertStore>,
) -> Result<ServerConfig, TlsError> {
    let current = settings
        .cert_dir
        .join(prefixed_current_pair_name(SERVER_PAIR_PREFIX));
    config(settings, files, Serving::Bootstrapped(current))
}

fn config(
    settings: &ServerSettings,
    files: Arc<dyn CertStore>,
    serving: Serving,
) -> Result<ServerConfig, TlsError> {
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
            for cert in certificates(files.as_ref(), "authentication.x509.clientCAFile", path)? {
                roots.add(cert).map_err(|e| TlsError::ClientCa {
                    path: path.clone(),
                    problem: e.to_string(),
                })?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
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
    let mut config = match serving {
        Serving::Files { cert, key } => {
            let chain = certificates(files.as_ref(), "tlsCertFile", &cert)?;
            let key_pem = read(files.as_ref(), "tlsPrivateKeyFile", &key)?;
            let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Invalid {
                what: "tlsPrivateKeyFile",
                path: key.clone(),
                problem: format!("no private key in it: {e}"),
            })?;
            builder
                .with_single_cert(chain, key)
                .map_err(TlsError::Rustls)?
        }
        Serving::Bootstrapped(path) => builder.with_cert_resolver(Arc::new(IssuedCertificate {
            path,
            files,
            provider,
            loaded: Mutex::new(None),
        })),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The issued serving pair, loaded on the first handshake after the file changed.
struct IssuedCertificate {
    path: PathBuf,
    files: Arc<dyn CertStore>,
    provider: Arc<CryptoProvider>,
    /// The file's stamp when loaded, and what it held.
    loaded: Mutex<Option<(FileStamp, Arc<CertifiedKey>)>>,
}

impl std::fmt::Debug for IssuedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCertificate")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl IssuedCertificate {
    fn load(&self) -> Result<CertifiedKey, TlsError> {
        const WHAT: &str = "issued serving certificate";
        let pem = read(self.files.as_ref(), WHAT, &self.path)?;
        let chain = pem_certificates(WHAT, &self.path, &pem)?;
        let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError::Invalid {
            what: WHAT,
            path: self.path.clone(),
            problem: format!("no private key in it: {e}"),
        })?;
        let signing = self
            .provider
            .key_provider
            .load_private_key(key)
            .map_err(|source| TlsError::Key {
                path: self.path.clone(),
                source,
            })?;
        Ok(CertifiedKey::new(chain, signing))
    }
}

impl ResolvesServerCert for IssuedCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let Ok(mut loaded) = self.loaded.lock() else {
            return None;
        };
        let Some(stamp) = self.files.file_stamp(&self.path) else {
            debug!(path = %self.path.display(), "no serving certificate available for the kubelet");
            return loaded.as_ref().map(|(_, k)| Arc::clone(k));
        };
        if let Some((loaded_stamp, key)) = loaded.as_ref() {
            if *loaded_stamp == stamp {
                return Some(Arc::clone(key));
            }
        }
        match self.load() {
            Ok(key) => {
                info!(path = %self.path.display(), "serving the issued serving certificate");
                let key = Arc::new(key);
                *loaded = Some((stamp, Arc::clone(&key)));
                Some(key)
            }
            Err(e) => {
                let problem = Chain(&e);
                warn!(path = %self.path.display(), %problem, "unusable serving certificate");
                loaded.as_ref().map(|(_, k)| Arc::clone(k))
            }
        }
    }
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
