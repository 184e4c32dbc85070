//! gRPC probes: `grpc.health.v1.Health/Check` over plaintext HTTP/2 (tonic), with
//! upstream's messages.

use std::time::Duration;

use tonic::transport::Endpoint;

use crate::domain::probe::target::join_host_port;
use crate::domain::probe::HandlerOutcome;

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    pub service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckResponse {
    #[prost(enumeration = "ServingStatus", tag = "1")]
    pub status: i32,
}

/// `grpc.health.v1.HealthCheckResponse.ServingStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ServingStatus {
    Unknown = 0,
    Serving = 1,
    NotServing = 2,
    ServiceUnknown = 3,
}

impl ServingStatus {
    /// The proto name, as Go's `String()` prints it.
    fn proto_name(status: i32) -> String {
        match ServingStatus::try_from(status) {
            Ok(ServingStatus::Unknown) => "UNKNOWN".into(),
            Ok(ServingStatus::Serving) => "SERVING".into(),
            Ok(ServingStatus::NotServing) => "NOT_SERVING".into(),
            Ok(ServingStatus::ServiceUnknown) => "SERVICE_UNKNOWN".into(),
            Err(_) => status.to_string(),
        }
    }
}

const CHECK: &str = "/grpc.health.v1.Health/Check";

pub(super) async fn probe(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
) -> HandlerOutcome {
    let addr = join_host_port(host, port);
    let endpoint = match Endpoint::from_shared(format!("http://{addr}")) {
        Ok(e) => e.connect_timeout(timeout).timeout(timeout),
        Err(e) => {
            return HandlerOutcome::Failure(format!(
                "error: failed to connect service at {addr:?}: {e}"
            ))
        }
    };
    let channel = match tokio::time::timeout(timeout, endpoint.connect()).await {
        Ok(Ok(channel)) => channel,
        Ok(Err(e)) => {
            return HandlerOutcome::Failure(format!(
                "error: failed to connect service at {addr:?}: {}",
                crate::ports::error::Chain(&e)
            ))
        }
        Err(_) => {
            return HandlerOutcome::Failure(format!(
                "timeout: failed to connect service {addr:?} within {}s: context deadline exceeded",
                timeout.as_secs()
            ))
        }
    };
    let mut client = tonic::client::Grpc::new(channel);
    let call = async {
        client
            .ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
        client
            .unary(
                tonic::Request::new(HealthCheckRequest {
                    service: service.to_owned(),
                }),
                tonic::codegen::http::uri::PathAndQuery::from_static(CHECK),
                codec,
            )
            .await
    };
    let response = match tokio::time::timeout(timeout, call).await {
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) => {
            return HandlerOutcome::Failure(match status.code() {
                tonic::Code::Unimplemented => format!(
                    "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                    status.message()
                ),
                tonic::Code::DeadlineExceeded => format!(
                    "timeout: health rpc did not complete within {}s",
                    timeout.as_secs()
                ),
                _ => format!("error: health rpc probe failed: {status}"),
            })
        }
        Err(_) => {
            return HandlerOutcome::Failure(format!(
                "timeout: health rpc did not complete within {}s",
                timeout.as_secs()
            ))
        }
    };
    if response.status == ServingStatus::Serving as i32 {
        HandlerOutcome::Success("service healthy".into())
    } else {
        HandlerOutcome::Failure(format!(
            "service unhealthy (responded with {:?})",
            ServingStatus::proto_name(response.status)
        ))
    }
}
