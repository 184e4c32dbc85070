//! Traits the domain and the app need from the world.
pub mod cgroup;
pub mod clock;
pub mod error;
pub mod host;
pub mod machine;
pub mod pod_source;
pub mod runtime;
