//! The real host: Linux system calls, procfs files and sd_notify.

mod cert_store;
mod clock;
mod container_logs;
mod facts;
mod host;
mod pod_files;

pub use cert_store::FileCertStore;
pub use clock::SystemClock;
pub use container_logs::SystemContainerLogs;
pub use facts::SystemHostFacts;
pub use host::SystemHost;
pub use pod_files::SystemPodFiles;
