//! The node as a cluster member: the Node object the kubelet registers, its status and
//! conditions, when and how the status is sent, the Lease, the events, and the client
//! certificate. Pure: observations come in as values, decisions go out as values (API-shaped
//! types of the project's own, which the kube adapter maps to k8s-openapi through serde).
//!
//! This lives beside `domain::node` (the node at start-up: name, capacity, allocatable),
//! which is still a single file; the two belong together in `domain/node/` once that file
//! becomes a folder.

pub mod certificate;
pub mod events;
pub mod labels;
pub mod lease;
pub mod model;
pub mod plan;
pub mod readiness;
pub mod report;
pub mod status;
