//! One folder per backend.
pub mod cri;
pub mod fake;
pub mod file_source;
pub mod procfs;
pub mod system;
