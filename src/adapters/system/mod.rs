//! The real host: Linux system calls, procfs files and sd_notify.

mod cert_store;
mod clock;
mod facts;
mod host;

pub use cert_store::FileCertStore;
pub use clock::SystemClock;
pub use facts::SystemHostFacts;
pub use host::SystemHost;
