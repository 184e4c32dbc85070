//! In-memory stand-ins for the host ports, for tests of the start-up flow and for the planner.
//! Never proof that a real adapter works.

mod cgroup;
mod clock;
mod host;
mod machine;
pub mod runtime;

pub use cgroup::FakeCgroupManager;
pub use clock::FakeClock;
pub use host::FakeHost;
pub use machine::FakeMachine;
