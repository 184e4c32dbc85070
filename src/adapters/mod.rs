//! One folder per backend.
pub mod apiserver;
pub mod cgroupfs;
pub mod cri;
pub mod fake;
pub mod file_source;
pub mod http_source;
pub mod pki;
pub mod procfs;
pub(crate) mod static_pods;
pub mod system;
pub mod systemd;
pub use http_source::{HttpSource, HttpSourceError};
