//! Traits the domain and the app need from the world.
pub mod api;
pub mod auth;
pub mod cert_store;
pub mod cgroup;
pub mod clock;
pub mod container_logs;
pub mod error;
pub mod host;
pub mod host_facts;
pub mod machine;
pub mod node_stats;
pub mod pki;
pub mod pod_files;
pub mod pod_source;
pub mod prober;
pub mod runtime;
pub mod runtime_status;
