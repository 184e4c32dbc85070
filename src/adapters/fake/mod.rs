//! In-memory stand-ins for the host ports, for tests of the start-up flow and for the planner.
//! Never proof that a real adapter works.

pub mod api;
mod cert_store;
mod cgroup;
mod clock;
mod container_logs;
pub mod csi;
pub mod device_plugins;
mod host;
mod host_facts;
mod machine;
mod node_stats;
mod objects;
mod pki;
mod pod_files;
mod pods;
pub mod runtime;
mod runtime_status;

pub use api::{FakeApiServer, FakeConnector};
pub use cert_store::FakeCertStore;
pub use cgroup::FakeCgroupManager;
pub use clock::FakeClock;
pub use container_logs::FakeContainerLogs;
pub use csi::FakeCsiPlugins;
pub use device_plugins::{FakeDevicePlugins, FakePlugin};
pub use host::FakeHost;
pub use host_facts::FakeHostFacts;
pub use machine::FakeMachine;
pub use node_stats::{FakeMemoryNotifier, FakeNodeStats};
pub use objects::FakeObjects;
pub use pki::FakePki;
pub use pod_files::{FakeEntry, FakePodFiles};
pub use runtime_status::FakeRuntimeStatus;
