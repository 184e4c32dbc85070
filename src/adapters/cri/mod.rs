//! The CRI (runtime.v1) client over a unix socket. The generated wire types stay
//! private to this module; callers see only the ports' domain types.

#[allow(clippy::all, clippy::pedantic, clippy::unwrap_used, missing_docs)]
mod proto {
    tonic::include_proto!("runtime.v1");
}
