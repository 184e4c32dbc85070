//! One folder per backend.
pub mod fake;
pub mod procfs;
pub mod system;
