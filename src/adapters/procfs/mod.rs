//! Machine facts from procfs, sysfs, statvfs and the machine-id files; node statistics
//! (cgroup memory and tasks, filesystems, directory usage, pids) and kernel memory
//! threshold notifications, for eviction.

mod machine;
mod memcg;
mod node_stats;

pub use machine::{MachinePaths, ProcfsMachineInfo};
pub use memcg::MemcgThresholdNotifier;
pub use node_stats::{cgroup_dir, directory_usage, filesystem_info, CgroupLayout, ProcfsNodeStats};
