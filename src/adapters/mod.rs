//! One folder per backend.
pub mod apiserver;
pub mod cgroupfs;
pub mod cri;
pub mod csi;
pub mod device_plugins;
pub mod fake;
pub mod pki;
pub mod probe;
pub mod procfs;
pub mod static_pods;
pub mod system;
pub mod systemd;
