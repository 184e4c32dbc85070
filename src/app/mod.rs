//! The CLI, the start-up flow, the loops and the HTTP endpoints.
pub mod bootstrap;
pub mod cli;
pub mod code_pages;
pub mod compose;
pub mod container_logs;
pub mod container_manager;
pub mod cpu_manager;
pub mod devices;
pub mod eviction;
pub mod logging;
pub mod metrics;
pub mod node;
pub mod planner;
pub mod plugins;
pub mod pods;
pub mod server;
pub mod stats_provider;
#[cfg(test)]
pub(crate) mod test_support;
