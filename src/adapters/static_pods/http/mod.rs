//! The static pod URL source (`--manifest-url`): the pods defined by the
//! body of an HTTP GET, as upstream's HTTP config source reads them.
//!
//! The URL is fetched at once, then every check frequency (20 s by default),
//! with the `--manifest-url-header` headers; each fetch must finish within
//! 10 s so a hung server cannot stall the source. The body is one pod (YAML
//! or JSON) or a v1 `PodList`, at most 10 MiB. Like the file source it sends
//! the whole set ([`PodSetUpdate`]), and only when the set changed.
//!
//! As upstream does:
//! - a failed fetch (connection error, timeout, a status other than
//!   200 OK, an oversized body) is logged and keeps the last set;
//! - an empty body means no pods: an empty set is sent, and logged;
//! - a body that does not decode keeps the last set's pods; the error comes
//!   with them in [`PodSetUpdate::errors`] so the operator sees it.
//!
//! Only plain `http://` URLs are supported yet: an `https://` URL is refused
//! by [`HttpSource::new`] with [`HttpSourceError::HttpsUnsupported`].

use crate::ports::error::Chain;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{changed_update, Snapshot};
use crate::domain::pod::static_pod::{decode_static_pods, PodSourceKind, MAX_MANIFEST_BYTES};
use crate::domain::units::time::rfc3339_nanos;
use crate::ports::clock::Clock;
use crate::ports::pod_source::{PodSetUpdate, PodSource, PodSourceError};

/// Upstream's default `--http-check-frequency`.
pub const DEFAULT_CHECK_FREQUENCY: Duration = Duration::from_secs(20);

/// Upstream's client timeout for the whole fetch, body included.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Failures in a row logged as warnings before they drop to debug, as
/// upstream does, so a server that is down does not flood the log.
const LOUD_FAILURES: u32 = 3;

/// Why the source cannot be built, or why one fetch failed. Fetch failures
/// are logged, never fatal: the source tries again at the next check.
/// Header values are never shown: they often carry credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpSourceError {
    #[error("manifest URL {url:?} is not a valid URL: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("manifest URL {url} uses https, which is not supported yet; use an http:// URL")]
    HttpsUnsupported { url: String },
    #[error("manifest URL {url} must be an absolute http:// URL")]
    NotHttp { url: String },
    #[error("manifest URL header name {name:?} is not a valid header name")]
    HeaderName { name: String },
    #[error("manifest URL header {name} has a value that is not a valid header value")]
    HeaderValue { name: String },
    #[error("cannot fetch {url}: {reason}")]
    Fetch { url: String, reason: String },
    #[error("fetching {url} took more than {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    /// Upstream's `%v: %v` of the URL and the status line.
    #[error("{url}: {status}")]
    Status { url: String, status: StatusCode },
    #[error("cannot read the body from {url}: {reason}")]
    Body { url: String, reason: String },
    #[error("the body from {url} is more than the limit of {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error("zero-length data received from {url}")]
    ZeroLength { url: String },
}

/// The URL source; see the module documentation.
pub struct HttpSource {
    url: String,
    uri: Uri,
    headers: HeaderMap,
    node_name: String,
    check_frequency: Duration,
    request_timeout: Duration,
    clock: Arc<dyn Clock>,
    client: Client<HttpConnector, Empty<Bytes>>,
    /// The last set sent.
    last: Option<Snapshot>,
    /// The last body decoded: an identical body needs no decoding.
    last_body: Option<Bytes>,
    failures: u32,
    next_check: Instant,
}

impl HttpSource {
    /// A source for `url` on node `node_name`, fetched every
    /// `check_frequency` with every value of `headers` (upstream's
    /// `staticPodURLHeader`). `clock` stamps the pods' first-seen annotation.
    /// Fails on a URL that is not `http://` or a header that cannot be sent.
    pub fn new(
        url: impl Into<String>,
        headers: BTreeMap<String, Vec<String>>,
        node_name: impl Into<String>,
        check_frequency: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, HttpSourceError> {
        let url = url.into();
        let uri = parse_url(&url)?;
        let headers = header_map(&headers)?;
        let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        Ok(Self {
            url,
            uri,
            headers,
            node_name: node_name.into(),
            check_frequency,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            clock,
            client,
            last: None,
            last_body: None,
            failures: 0,
            next_check: Instant::now(),
        })
    }

    /// Replaces the 10 s limit on one fetch, body included.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// One GET of the URL: the body of a 200 OK answer within the size and
    /// time limits.
    async fn fetch(&self) -> Result<Bytes, HttpSourceError> {
        match tokio::time::timeout(self.request_timeout, self.fetch_unlimited()).await {
            Ok(result) => result,
            Err(_) => Err(HttpSourceError::Timeout {
                url: self.url.clone(),
                timeout: self.request_timeout,
            }),
        }
    }

    async fn fetch_unlimited(&self) -> Result<Bytes, HttpSourceError> {
        let mut request = Request::new(Empty::<Bytes>::new());
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| HttpSourceError::Fetch {
                url: self.url.clone(),
                reason: Chain(&e).to_string(),
            })?;
        let status = response.status();
        // Upstream reads the body first; an error page is not worth reading.
        if status != StatusCode::OK {
            return Err(HttpSourceError::Status {
                url: self.url.clone(),
                status,
            });
        }
        let body = Limited::new(response.into_body(), MAX_MANIFEST_BYTES)
            .collect()
            .await
            .map_err(|e| {
                if e.downcast_ref::<LengthLimitError>().is_some() {
                    HttpSourceError::TooLarge {
                        url: self.url.clone(),
                        limit: MAX_MANIFEST_BYTES,
                    }
                } else {
                    HttpSourceError::Body {
                        url: self.url.clone(),
                        reason: Chain(e.as_ref()).to_string(),
                    }
                }
            })?;
        Ok(body.to_bytes())
    }

    /// The set a fetch yields, or `None` when the last set stands (a failed
    /// fetch, or the same body as last time).
    fn snapshot(&mut self, fetched: Result<Bytes, HttpSourceError>) -> Option<Snapshot> {
        let body = match fetched {
            Ok(body) => body,
            Err(error) => {
                self.note_failure(&error);
                return None;
            }
        };
        if body.is_empty() {
            // Upstream sends an empty set and reports the fetch as failed.
            self.note_failure(&HttpSourceError::ZeroLength {
                url: self.url.clone(),
            });
            self.last_body = Some(body);
            return Some(Snapshot {
                pods: Vec::new(),
                errors: Vec::new(),
            });
        }
        self.note_success();
        if self.last_body.as_ref() == Some(&body) {
            return None;
        }
        let seen = rfc3339_nanos(self.clock.now_unix_nanos());
        let decoded = decode_static_pods(
            &self.url,
            &body,
            &self.node_name,
            PodSourceKind::Http,
            &seen,
        );
        self.last_body = Some(body);
        Some(match decoded {
            Ok(pods) => Snapshot {
                pods,
                errors: Vec::new(),
            },
            // Upstream keeps running the last good pods on a bad body.
            Err(error) => Snapshot {
                pods: self
                    .last
                    .as_ref()
                    .map(|last| last.pods.clone())
                    .unwrap_or_default(),
                errors: vec![error],
            },
        })
    }

    fn note_failure(&mut self, error: &HttpSourceError) {
        self.failures = self.failures.saturating_add(1);
        if self.failures < LOUD_FAILURES {
            warn!(url = %self.url, error = %Chain(&error), "cannot read pods from URL");
        } else if self.failures == LOUD_FAILURES {
            warn!(url = %self.url, error = %Chain(&error), "cannot read pods from URL; logging further failures at debug level");
        } else {
            debug!(url = %self.url, error = %Chain(&error), "cannot read pods from URL");
        }
    }

    fn note_success(&mut self) {
        if self.failures > 0 {
            info!(url = %self.url, "read pods from URL again");
            self.failures = 0;
        }
    }
}

#[async_trait]
impl PodSource for HttpSource {
    /// One fetch and decode, without the source's memory of earlier sets (the dry-run
    /// planner reads the URL once). An empty body is no pods, as upstream; a failed
    /// fetch is the error.
    async fn read_once(&self) -> Result<PodSetUpdate, PodSourceError> {
        let body = self.fetch().await.map_err(|e| PodSourceError::Read {
            origin: self.url.clone(),
            source: Box::new(e),
        })?;
        let mut update = PodSetUpdate {
            source: PodSourceKind::Http.as_str().to_string(),
            pods: Vec::new(),
            errors: Vec::new(),
        };
        if body.is_empty() {
            return Ok(update);
        }
        let seen = rfc3339_nanos(self.clock.now_unix_nanos());
        match decode_static_pods(
            &self.url,
            &body,
            &self.node_name,
            PodSourceKind::Http,
            &seen,
        ) {
            Ok(pods) => update.pods = pods,
            Err(error) => update.errors.push(error),
        }
        Ok(update)
    }

    async fn next(&mut self) -> Option<PodSetUpdate> {
        loop {
            // The first deadline is the construction time: the first fetch is at once.
            tokio::time::sleep_until(self.next_check).await;
            let fetched = self.fetch().await;
            self.next_check = Instant::now() + self.check_frequency;
            let Some(snapshot) = self.snapshot(fetched) else {
                continue;
            };
            let url = &self.url;
            let update = changed_update(
                &mut self.last,
                snapshot,
                PodSourceKind::Http,
                "keeping the last static pods from URL",
                |snapshot| {
                    info!(
                        url = %url,
                        pods = snapshot.pods.len(),
                        errors = snapshot.errors.len(),
                        "static pods from URL changed"
                    )
                },
            );
            if update.is_some() {
                return update;
            }
        }
    }
}

/// The URL as a request target: absolute, `http://`, with a host.
fn parse_url(url: &str) -> Result<Uri, HttpSourceError> {
    let uri: Uri = url.parse().map_err(|e| HttpSourceError::InvalidUrl {
        url: url.to_string(),
        reason: format!("{e}"),
    })?;
    match uri.scheme_str() {
        Some(scheme) if scheme.eq_ignore_ascii_case("https") => {
            Err(HttpSourceError::HttpsUnsupported {
                url: url.to_string(),
            })
        }
        Some(scheme) if scheme.eq_ignore_ascii_case("http") && uri.host().is_some() => Ok(uri),
        _ => Err(HttpSourceError::NotHttp {
            url: url.to_string(),
        }),
    }
}

/// Every value of every header, in the order given.
fn header_map(headers: &BTreeMap<String, Vec<String>>) -> Result<HeaderMap, HttpSourceError> {
    let mut map = HeaderMap::new();
    for (name, values) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| HttpSourceError::HeaderName { name: name.clone() })?;
        for value in values {
            let value = HeaderValue::from_str(value)
                .map_err(|_| HttpSourceError::HeaderValue { name: name.clone() })?;
            map.append(header.clone(), value);
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests;
