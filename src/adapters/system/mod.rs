//! The real host: Linux system calls, procfs files and sd_notify.

mod clock;
mod host;

pub use clock::SystemClock;
pub use host::SystemHost;
