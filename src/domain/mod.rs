//! Pure decisions and their types: no I/O, no async runtime, no backend crate.
pub mod allocatable;
pub mod backoff;
pub mod cfs;
pub mod config;
pub mod cpuset;
pub mod dns;
pub mod duration;
pub mod eviction;
pub mod feature_gates;
pub mod machine;
pub mod node;
pub mod pod;
pub mod pod_sync;
pub mod quantity;
pub mod reserved;
pub mod runtime;
pub mod static_pod;
