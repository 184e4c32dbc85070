//! The kubelet's runtime manager decisions (upstream's `kuberuntime`): what the runtime
//! reports, what a pod sync must do (the actions, and the whole sync plan around them),
//! crash-loop back-off, the request values and their builders, labels, DNS, garbage, and
//! container log rotation.
pub mod actions;
pub mod backoff;
pub mod credentials;
pub mod dns;
pub mod gc;
pub mod hosts;
pub mod image_reference;
pub mod labels;
pub mod log_rotation;
pub mod plan;
pub mod pleg;
pub mod pod_sync;
pub mod requests;
pub mod runtime;
pub mod runtime_class;
pub mod teardown;
pub mod termination;
pub mod userns;
