//! HTTP(S) probes: one GET per connection (upstream disables keep-alives), redirects
//! followed by hand as Go's client does with upstream's redirect checker, at most
//! 10 KiB of body read.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::{dial, DialError, GoIoError};
use crate::domain::probe::{HandlerOutcome, HttpTarget};
use crate::ports::error::Chain;
use crate::ports::prober::ProberError;

/// Upstream's `maxRespBodyLength`.
const MAX_BODY: usize = 10 * 1024;
/// Go's client stops after this many redirects.
const MAX_REDIRECTS: usize = 10;

/// Accepts any server certificate: upstream's probes set `InsecureSkipVerify`.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

pub(super) fn insecure_tls_config() -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|_| {
            // ring supports the default versions; this branch is not reached.
            rustls::ClientConfig::builder_with_protocol_versions(rustls::DEFAULT_VERSIONS)
        })
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
        .with_no_client_auth()
}

/// One response: its status, where it redirects to, the start of its body.
struct Answer {
    status: StatusCode,
    location: Option<String>,
    body: String,
}

/// Why one GET got no answer; each reads as Go's client error does.
#[derive(Debug, thiserror::Error)]
enum GetError {
    #[error(transparent)]
    Dial(#[from] DialError),
    #[error("invalid server name {host:?}")]
    ServerName {
        host: String,
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// The TLS handshake failed.
    #[error(transparent)]
    Tls(GoIoError),
    #[error(transparent)]
    Http(#[from] hyper::Error),
    #[error(transparent)]
    Request(#[from] hyper::http::Error),
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

async fn get_once(tls: Arc<rustls::ClientConfig>, target: &HttpTarget) -> Result<Answer, GetError> {
    // The deadline is the caller's (the whole probe's).
    let tcp = dial(&target.host, target.port, Duration::from_secs(3600)).await?;
    let stream: Box<dyn Io> = if target.https {
        let name =
            ServerName::try_from(target.host.clone()).map_err(|source| GetError::ServerName {
                host: target.host.clone(),
                source,
            })?;
        let tls = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|e| GetError::Tls(GoIoError(e)))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let driver = tokio::spawn(connection);
    let mut request = Request::get(&target.path);
    let mut host = target.authority();
    for (name, value) in &target.headers {
        if name.eq_ignore_ascii_case("Host") {
            host.clone_from(value);
        } else {
            request = request.header(name.as_str(), value.as_str());
        }
    }
    let request = request
        .header("Host", host)
        .header("Connection", "close")
        .body(Empty::<Bytes>::new())?;
    let response = match sender.send_request(request).await {
        Ok(r) => r,
        Err(e) => {
            driver.abort();
            return Err(e.into());
        }
    };
    let status = response.status();
    let location = response
        .headers()
        .get(hyper::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while bytes.len() < MAX_BODY {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    bytes.extend_from_slice(&data);
                }
            }
            // A body cut short still gives its status, as upstream's truncation.
            Some(Err(_)) | None => break,
        }
    }
    bytes.truncate(MAX_BODY);
    driver.abort();
    Ok(Answer {
        status,
        location,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// The target a `Location` sends `from` to: absolute, scheme-relative, absolute path
/// or relative path. `None` when it cannot be followed (another scheme).
fn redirect_target(from: &HttpTarget, location: &str) -> Option<HttpTarget> {
    let mut next = from.clone();
    let rest = if let Some(rest) = location.strip_prefix("http://") {
        next.https = false;
        Some(rest)
    } else if let Some(rest) = location.strip_prefix("https://") {
        next.https = true;
        Some(rest)
    } else {
        location.strip_prefix("//")
    };
    match rest {
        Some(rest) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, "/"),
            };
            let uri: hyper::http::uri::Authority = authority.parse().ok()?;
            next.host = uri.host().trim_matches(['[', ']']).to_owned();
            next.port = uri.port_u16().unwrap_or(if next.https { 443 } else { 80 });
            next.path = path.to_owned();
        }
        None if location.starts_with('/') => next.path = location.to_owned(),
        None if location.contains("://") => return None,
        None => {
            let base = from.path.split('?').next().unwrap_or("/");
            let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
            next.path = format!("{dir}{location}");
        }
    }
    Some(next)
}

fn follows(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// The GET with its redirects followed: the last answer, or Go's client error.
async fn fetch(tls: Arc<rustls::ClientConfig>, target: &HttpTarget) -> Result<Answer, ProberError> {
    let mut current = target.clone();
    let mut hops = 0;
    loop {
        let answer = get_once(Arc::clone(&tls), &current)
            .await
            .map_err(|error| ProberError::Get {
                url: current.url(),
                source: Box::new(error),
            })?;
        let next = answer
            .location
            .as_deref()
            .filter(|_| follows(answer.status))
            .and_then(|location| redirect_target(&current, location));
        if let Some(next) = next {
            // Another host ends the chain: its redirect is the answer.
            if next.host == target.host {
                if hops >= MAX_REDIRECTS - 1 {
                    return Err(ProberError::Redirects {
                        url: next.url(),
                        max: MAX_REDIRECTS,
                    });
                }
                hops += 1;
                current = next;
                continue;
            }
        }
        return Ok(answer);
    }
}

async fn follow(tls: Arc<rustls::ClientConfig>, target: &HttpTarget) -> HandlerOutcome {
    let answer = match fetch(tls, target).await {
        Ok(answer) => answer,
        Err(error) => return HandlerOutcome::Failure(Chain(&error).to_string()),
    };
    let code = answer.status.as_u16();
    match code {
        200..=299 => HandlerOutcome::Success(answer.body),
        300..=399 => HandlerOutcome::Warning(format!(
            "Probe terminated redirects, Response body: {}",
            answer.body
        )),
        _ => HandlerOutcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
    }
}

/// A lifecycle hook's GET: any answer will do, whatever its status (upstream's
/// handler runner); only a request that fails is an error.
pub(super) async fn hook(
    tls: Arc<rustls::ClientConfig>,
    target: &HttpTarget,
) -> Result<(), ProberError> {
    fetch(tls, target).await.map(|_| ())
}

pub(super) async fn probe(
    tls: Arc<rustls::ClientConfig>,
    target: &HttpTarget,
    timeout: Duration,
) -> HandlerOutcome {
    match tokio::time::timeout(timeout, follow(tls, target)).await {
        Ok(outcome) => outcome,
        Err(_) => HandlerOutcome::Failure(format!(
            "Get {:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            target.url()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path: &str) -> HttpTarget {
        HttpTarget {
            https: false,
            host: "10.0.0.5".into(),
            port: 8080,
            path: path.into(),
            headers: Vec::new(),
        }
    }

    #[test]
    fn redirect_locations_resolve_as_a_browser_would() {
        let from = target("/a/b?x=1");
        let url = |l: &str| redirect_target(&from, l).map(|t| t.url());
        assert_eq!(url("/c").as_deref(), Some("http://10.0.0.5:8080/c"));
        assert_eq!(url("d").as_deref(), Some("http://10.0.0.5:8080/a/d"));
        assert_eq!(url("http://other:9/e").as_deref(), Some("http://other:9/e"));
        assert_eq!(url("https://other").as_deref(), Some("https://other:443/"));
        assert_eq!(
            url("//[fd00::1]:81/f").as_deref(),
            Some("http://[fd00::1]:81/f")
        );
        assert_eq!(url("ftp://x/"), None);
    }
}
