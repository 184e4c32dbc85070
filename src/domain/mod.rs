//! Pure decisions and their types: no I/O, no async runtime, no backend crate.
//!
//! Where each decision lives:
//! - `config`: flags, files and drop-ins merged, defaulted and validated into one value;
//!   feature gates; the flag table and each field's state.
//! - `units`: quantities, CPU sets, Go durations, API timestamps.
//! - `node`: the node name, machine facts, reservations and allocatable.
//! - `cgroup`: cgroup names in both drivers' spellings, the pod/QoS/kubepods configs and
//!   the values each driver writes.
//! - `pod`: the pod model, API defaults, validation, QoS class, OOM score, container hash;
//!   static pod manifests and their identity.
//! - `kuberuntime`: what the runtime reports, the pod sync decision (`compute_pod_actions`),
//!   crash-loop and image back-off, the CRI request values, DNS, dead-container GC.
//! - `securitycontext`: what security settings mean for the runtime (masked paths,
//!   namespaces, seccomp, users, capabilities), and the sysctl and AppArmor admission.
//! - `probe`: probe workers' state (thresholds, startup gating, resets), readiness, the
//!   kills probes and hooks call for, the handlers' targets.
//! - `status`: the pod status as the API shows it.
//! - `eviction`: thresholds and signals.
//! - `resource_managers`: the static CPU manager policy, its state checkpoint, and the
//!   topology manager's NUMA hints and admission.
//! - `devices`: device plugins: registration, health, capacity, which devices a container
//!   takes, what it is created with, the `kubelet_internal_checkpoint` file.
//! - `code_pages`: which of its own executable's pages the process gives back, and when.
//! - `upstream`: upstream v1.26's static pod UID and container hash, reproduced (Go's JSON,
//!   YAML 1.1, defaults, go-spew), so pods swap between the upstream kubelet and rkubelet.
pub mod admission;
pub mod cgroup;
pub mod code_pages;
pub mod config;
pub mod csi;
pub mod devices;
pub mod events;
pub mod eviction;
pub mod kubelet_api;
pub mod kuberuntime;
pub mod log_format;
pub mod node;
pub mod node_status;
pub mod pod;
pub mod probe;
pub mod resource_managers;
pub mod securitycontext;
pub mod stats;
pub mod status;
#[cfg(test)]
pub(crate) mod test_support;
pub mod token_bucket;
pub mod units;
pub mod upstream;
pub mod version;
pub mod volumes;
