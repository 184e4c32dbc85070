//! The kubelet's HTTP servers: the healthz port (`/healthz` only) and the kubelet API
//! (10250, authenticated; the read-only port when enabled).
pub mod api;
pub mod auth;
pub mod healthz;
pub mod stream;
pub mod tls;

pub(crate) use healthz::shutdown_requested;
pub use healthz::{serve_health, Endpoints, HealthChecks, ServerError};
pub mod stats_endpoints;
