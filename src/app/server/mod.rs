//! The kubelet's HTTP servers: today the healthz port (`/healthz`, `/configz`, `/pods`).
pub mod healthz;

pub(crate) use healthz::shutdown_requested;
pub use healthz::{serve_health, Endpoints, HealthChecks, ServerError};
