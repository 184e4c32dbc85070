//! The kubelet API (port 10250): who a request's user is allowed to be, what a request
//! asks in authorization terms (upstream's `pkg/kubelet/server/auth.go`), the server's
//! settings from the configuration, the metrics' exposition format, and the container log files (CRI format) read with
//! `kubectl logs`' options.
pub mod auth;
pub mod healthz;
pub mod logs;
pub mod metrics_format;
pub mod review_cache;
pub mod routes;
pub mod settings;
pub mod streaming;
