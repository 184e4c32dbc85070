//! The kubelet's HTTP servers: today the healthz port (`/healthz`, `/configz`, `/pods`).
pub mod api;
pub mod auth;
pub mod healthz;
pub mod stream;
pub mod tls;

pub(crate) use healthz::shutdown_requested;
pub use healthz::{serve_health, Endpoints, HealthChecks, ServerError};
pub mod stats;
