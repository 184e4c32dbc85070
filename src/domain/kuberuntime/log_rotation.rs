//! Container log rotation as upstream's container log manager decides it: a running
//! container's `<n>.log` that reached `containerLogMaxSize` is renamed to
//! `<n>.log.<YYYYMMDD-hhmmss>` and the runtime reopens the file; older rotated files are
//! compressed (`.gz`), and beyond `containerLogMaxFiles` the oldest are removed.

use std::time::Duration;

use crate::domain::units::time::compact_utc_timestamp;

/// `containerLogMaxSize` unless given.
pub const DEFAULT_MAX_SIZE: &str = "10Mi";
/// `containerLogMaxFiles` unless given.
pub const DEFAULT_MAX_FILES: i32 = 5;
/// `containerLogMaxWorkers` unless given.
pub const DEFAULT_MAX_WORKERS: i32 = 1;
/// `containerLogMonitorInterval` unless given.
pub const DEFAULT_MONITOR_INTERVAL: Duration = Duration::from_secs(10);
/// The shortest `containerLogMonitorInterval` upstream accepts.
pub const MIN_MONITOR_INTERVAL: Duration = Duration::from_secs(3);

/// A compressed rotated log.
pub const COMPRESSED_SUFFIX: &str = ".gz";
/// A compression in progress; left behind only by a crash.
pub const TEMPORARY_SUFFIX: &str = ".tmp";

/// When a container log is rotated and how many files are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotatePolicy {
    pub max_size_bytes: u64,
    /// The files kept per container, the one being written included (at least 2).
    pub max_files: usize,
}

/// The log manager's settings; `policy` is `None` when a negative `containerLogMaxSize`
/// turns rotation off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotationSettings {
    pub policy: Option<LogRotatePolicy>,
    pub monitor_interval: Duration,
    /// How many containers' logs are rotated at once.
    pub max_workers: usize,
}

impl Default for LogRotationSettings {
    fn default() -> Self {
        Self {
            policy: Some(LogRotatePolicy {
                max_size_bytes: 10 * 1024 * 1024,
                max_files: DEFAULT_MAX_FILES as usize,
            }),
            monitor_interval: DEFAULT_MONITOR_INTERVAL,
            max_workers: DEFAULT_MAX_WORKERS as usize,
        }
    }
}

impl LogRotationSettings {
    /// The settings in words, for the dry run.
    pub fn describe(&self) -> String {
        match self.policy {
            None => "container logs: not rotated (containerLogMaxSize is negative)".to_owned(),
            Some(p) => format!(
                "container logs: rotated at {} bytes, {} files kept per container (rotated ones before the newest gzip-compressed), checked every {}s by {} worker(s)",
                p.max_size_bytes,
                p.max_files,
                self.monitor_interval.as_secs(),
                self.max_workers
            ),
        }
    }
}

/// What one rotation does to a container's log folder, in this order. Names are file
/// names in the log's folder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RotationPlan {
    /// Leftovers of an interrupted rotation, then the oldest rotated files beyond the
    /// policy's count.
    pub remove: Vec<String>,
    /// Rotated files still plain, each to become `<name>.gz`.
    pub compress: Vec<String>,
    /// The name the live log is renamed to before the runtime reopens it.
    pub rotate_to: String,
}

/// Whether `name` is a rotated file of the live log `log` (`<log>.<anything>`).
fn is_rotated_of(name: &str, log: &str) -> bool {
    name.strip_prefix(log)
        .is_some_and(|rest| rest.len() > 1 && rest.starts_with('.'))
}

/// Upstream's `isInUse`: temporary files are not, compressed ones are, and a plain one is
/// unless its compressed copy exists (the crash came after the copy, before the removal).
fn in_use(name: &str, rotated: &[&str]) -> bool {
    if name.ends_with(TEMPORARY_SUFFIX) {
        return false;
    }
    if name.ends_with(COMPRESSED_SUFFIX) {
        return true;
    }
    !rotated
        .iter()
        .any(|other| other.strip_suffix(COMPRESSED_SUFFIX) == Some(name))
}

/// The rotation of the live log `log` (a file name) of `size` bytes among the folder's
/// `entries`, at `now_unix_nanos`; `None` when it is below the policy's size, or when the
/// name it would take exists already (two rotations in one second), which waits a round
/// rather than overwrite a rotated file.
pub fn plan_rotation(
    log: &str,
    size: u64,
    entries: &[String],
    policy: &LogRotatePolicy,
    now_unix_nanos: i64,
) -> Option<RotationPlan> {
    if size < policy.max_size_bytes {
        return None;
    }
    let rotate_to = format!("{log}.{}", compact_utc_timestamp(now_unix_nanos));
    if entries.iter().any(|e| e == &rotate_to) {
        return None;
    }
    let rotated: Vec<&str> = entries
        .iter()
        .map(String::as_str)
        .filter(|name| is_rotated_of(name, log))
        .collect();
    let (mut kept, mut remove): (Vec<&str>, Vec<&str>) =
        rotated.iter().partition(|name| in_use(name, &rotated));
    // The timestamp sorts oldest first; the live file and the one about to be rotated
    // take two of the policy's files.
    kept.sort_unstable();
    let excess = kept
        .len()
        .saturating_sub(policy.max_files.saturating_sub(2));
    remove.extend(kept.drain(..excess));
    Some(RotationPlan {
        remove: remove.into_iter().map(str::to_owned).collect(),
        compress: kept
            .into_iter()
            .filter(|name| !name.ends_with(COMPRESSED_SUFFIX))
            .map(str::to_owned)
            .collect(),
        rotate_to,
    })
}

/// The live log's file name of a container instance: `<attempt>.log`, as the create
/// request names it.
pub fn live_log_name(attempt: u32) -> String {
    format!("{attempt}.log")
}

/// Whether `name` is the live log of `attempt` or one of its rotated files: what goes
/// when the instance is removed (upstream's `Clean`).
pub fn belongs_to_instance(name: &str, attempt: u32) -> bool {
    let live = live_log_name(attempt);
    name == live || is_rotated_of(name, &live)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-24T17:00:00Z
    const NOW: i64 = 1_795_539_600 * 1_000_000_000;

    fn policy(max_files: usize) -> LogRotatePolicy {
        LogRotatePolicy {
            max_size_bytes: 100,
            max_files,
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_log_below_the_size_stays() {
        assert_eq!(plan_rotation("0.log", 99, &[], &policy(5), NOW), None);
    }

    #[test]
    fn a_full_log_is_renamed_with_the_time_and_older_ones_compressed() {
        let entries = names(&["0.log", "0.log.20261124-165000", "0.log.20261124-164000.gz"]);
        let plan = plan_rotation("0.log", 100, &entries, &policy(5), NOW).expect("rotates");
        assert_eq!(plan.rotate_to, "0.log.20261124-170000");
        assert_eq!(plan.compress, names(&["0.log.20261124-165000"]));
        assert!(plan.remove.is_empty());
    }

    #[test]
    fn beyond_max_files_the_oldest_go_first() {
        let entries = names(&[
            "0.log",
            "0.log.20261124-163000.gz",
            "0.log.20261124-164000.gz",
            "0.log.20261124-165000",
        ]);
        // 3 files: the live one, the one rotated now and one more.
        let plan = plan_rotation("0.log", 100, &entries, &policy(3), NOW).expect("rotates");
        assert_eq!(
            plan.remove,
            names(&["0.log.20261124-163000.gz", "0.log.20261124-164000.gz"])
        );
        assert_eq!(plan.compress, names(&["0.log.20261124-165000"]));
        // 2 files: nothing rotated before is kept.
        let plan = plan_rotation("0.log", 100, &entries, &policy(2), NOW).expect("rotates");
        assert_eq!(plan.remove.len(), 3);
        assert!(plan.compress.is_empty());
    }

    #[test]
    fn an_interrupted_compression_is_cleaned_up() {
        let entries = names(&[
            "0.log",
            "0.log.20261124-165000",
            "0.log.20261124-165000.gz",
            "0.log.20261124-164000.tmp",
        ]);
        let plan = plan_rotation("0.log", 100, &entries, &policy(5), NOW).expect("rotates");
        assert_eq!(
            plan.remove,
            names(&["0.log.20261124-165000", "0.log.20261124-164000.tmp"])
        );
        assert!(plan.compress.is_empty());
    }

    #[test]
    fn other_instances_logs_are_not_touched() {
        let entries = names(&[
            "0.log",
            "1.log",
            "10.log.20261124-165000",
            "1.log.20261124-160000",
        ]);
        let plan = plan_rotation("1.log", 100, &entries, &policy(2), NOW).expect("rotates");
        assert_eq!(plan.remove, names(&["1.log.20261124-160000"]));
        assert!(!belongs_to_instance("10.log.20261124-165000", 1));
        assert!(belongs_to_instance("1.log.20261124-160000", 1));
        assert!(belongs_to_instance("1.log", 1));
        assert!(!belongs_to_instance("1.log.", 1));
    }

    #[test]
    fn the_settings_in_words() {
        assert_eq!(
            LogRotationSettings::default().describe(),
            "container logs: rotated at 10485760 bytes, 5 files kept per container (rotated ones before the newest gzip-compressed), checked every 10s by 1 worker(s)"
        );
    }

    #[test]
    fn two_rotations_in_one_second_wait_a_round() {
        let entries = names(&["0.log", "0.log.20261124-170000"]);
        assert_eq!(plan_rotation("0.log", 100, &entries, &policy(5), NOW), None);
    }
}
