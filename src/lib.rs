//! rkubelet: a Kubernetes node agent.
//!
//! Layout (see `docs/architecture.md` and `docs/layout.md`): `domain` holds pure
//! decisions, `ports` the traits the app needs from the world, `adapters` one folder per
//! backend, `app` the CLI, start-up flow and servers.
pub mod adapters;
pub mod app;
pub mod domain;
pub mod ports;
