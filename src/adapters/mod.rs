//! One folder per backend.
pub mod fake;
pub mod file_source;
pub mod procfs;
pub mod system;
