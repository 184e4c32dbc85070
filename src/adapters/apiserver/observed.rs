//! A tower layer under kube-rs' client that tells an [`ApiRequestObserver`] of every
//! request: its method, the server's host, the status code (or none) and how long the
//! response's headers took, as client-go's metrics hooks see a request.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::{Request, Response};
use tower::{Layer, Service};

use crate::ports::api::{ApiRequestObserver, ApiRequestRecord};

/// The client of `config`; with an observer, one told of every request to the config's
/// server.
///
/// # Errors
/// kube's, when the configuration gives no client (a certificate it cannot read).
pub fn observed_client(
    config: kube::Config,
    observer: Option<&Arc<dyn ApiRequestObserver>>,
) -> Result<kube::Client, kube::Error> {
    let host: Arc<str> = Arc::from(
        config
            .cluster_url
            .authority()
            .map(|a| a.as_str())
            .unwrap_or_default(),
    );
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match observer {
        Some(observer) => builder
            .with_layer(&ObservedLayer {
                observer: Arc::clone(observer),
                host,
            })
            .build(),
        None => builder.build(),
    })
}

/// Wraps a client's service in [`Observed`].
#[derive(Clone)]
pub struct ObservedLayer {
    pub observer: Arc<dyn ApiRequestObserver>,
    /// The server's `host:port`, the same for every request of a connection.
    pub host: Arc<str>,
}

impl<S> Layer<S> for ObservedLayer {
    type Service = Observed<S>;

    fn layer(&self, inner: S) -> Observed<S> {
        Observed {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Observed<S> {
    inner: S,
    layer: ObservedLayer,
}

impl<S, B, R> Service<Request<B>> for Observed<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().clone();
        let layer = self.layer.clone();
        let began = Instant::now();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            layer.observer.observe(&ApiRequestRecord {
                method: method.as_str(),
                host: &layer.host,
                code: answer.as_ref().ok().map(|r| r.status().as_u16()),
                took: began.elapsed(),
            });
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<(String, String, Option<u16>)>>);

    impl ApiRequestObserver for Seen {
        fn observe(&self, r: &ApiRequestRecord<'_>) {
            if let Ok(mut seen) = self.0.lock() {
                seen.push((r.method.to_owned(), r.host.to_owned(), r.code));
            }
        }
    }

    #[tokio::test]
    async fn every_answer_and_every_failure_is_observed() {
        let seen = Arc::new(Seen::default());
        let layer = ObservedLayer {
            observer: seen.clone(),
            host: Arc::from("10.0.0.1:6443"),
        };
        let answering = tower::service_fn(|r: Request<()>| async move {
            let code = if r.method() == hyper::Method::GET {
                200
            } else {
                409
            };
            Response::builder()
                .status(code)
                .body(())
                .map_err(|e| e.to_string())
        });
        let mut svc = layer.layer(answering);
        for method in [hyper::Method::GET, hyper::Method::POST] {
            let request = Request::builder()
                .method(method)
                .body(())
                .map_err(|e| e.to_string());
            let answer = svc.call(request.expect("request")).await;
            assert!(answer.is_ok());
        }
        let failing = tower::service_fn(|_: Request<()>| async {
            tokio::time::sleep(Duration::ZERO).await;
            Err::<Response<()>, _>("connection refused".to_owned())
        });
        let mut svc = layer.layer(failing);
        assert!(svc.call(Request::new(())).await.is_err());
        let seen = seen.0.lock().map(|s| s.clone()).unwrap_or_default();
        let host = "10.0.0.1:6443".to_owned();
        assert_eq!(
            seen,
            vec![
                ("GET".to_owned(), host.clone(), Some(200)),
                ("POST".to_owned(), host.clone(), Some(409)),
                ("GET".to_owned(), host, None),
            ]
        );
    }
}
