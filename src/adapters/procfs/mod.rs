//! Machine facts from procfs, sysfs, statvfs and the machine-id files.

mod machine;

pub use machine::{MachinePaths, ProcfsMachineInfo};
