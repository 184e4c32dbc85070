//! Upstream kubelet's identities, reproduced so that rkubelet and the
//! upstream kubelet v1.26 can take over each other's pods on a live node
//! without restarting a container:
//!
//! - the UID of a static pod ([`static_pod_uid`]): v1.26 derives it in
//!   pkg/kubelet/config/common.go `applyDefaults` as the MD5 of go-spew's
//!   `%#v` of the decoded, defaulted internal `core.Pod`, followed by
//!   `host:<node>` and `file:<path>` (or only `url:<url>`);
//! - the container hash in the `io.kubernetes.container.hash` annotation
//!   ([`container_hash`]): v1.26 to v1.30 hash `json.Marshal` of the
//!   container, v1.31 and later only its name and image
//!   (pkg/kubelet/container/helpers.go `HashContainer`).
//!
//! Reproducing them means reproducing Go: the manifest's trip through
//! YAML-to-JSON ([`yaml`]), `encoding/json` ([`gojson`], [`decode`]), the
//! API defaults ([`defaults`]), the v1-to-internal conversion
//! ([`convert`]), `resource.Quantity`'s internals ([`quantity`]) and
//! go-spew's printing ([`spew`]), over the Go types of v1.26
//! ([`schema`], generated from upstream's sources).

pub mod container_hash;
pub mod convert;
pub mod decode;
pub mod defaults;
pub mod gojson;
#[cfg(test)]
mod golden;
pub mod gotype;
pub mod goval;
pub mod quantity;
pub mod reference;
pub mod schema;
pub mod spew;
pub mod static_pod_uid;
pub mod yaml;

/// Why upstream's identity of a manifest was not computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// Upstream v1.26 refuses this manifest, so it has no upstream identity.
    #[error("upstream kubelet v1.26 would not decode it: {0}")]
    Refused(String),
    /// Upstream accepts it, but part of what it hashes is not reproduced
    /// (a set timestamp, managed fields, a YAML tag, ...).
    #[error("its upstream identity is not reproduced: {0}")]
    Unreproducible(String),
}
