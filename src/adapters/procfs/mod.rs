//! Machine facts from procfs, sysfs, statvfs and the machine-id files; node statistics
//! (cgroup memory and tasks, filesystems, directory usage, pids) and kernel memory
//! threshold notifications, for eviction.

mod machine;
mod memcg;
mod stats;

pub use machine::{MachinePaths, ProcfsMachineInfo};
pub use memcg::MemcgThresholdNotifier;
pub use stats::{cgroup_dir, directory_usage, filesystem_info, CgroupLayout, ProcfsNodeStats};
