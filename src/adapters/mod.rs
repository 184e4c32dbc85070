//! One folder per backend.
pub mod cri;
pub mod fake;
pub mod procfs;
pub mod system;
