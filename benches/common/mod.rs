//! What every benchmark shares: each figure line with a goal ends in `met` or `NOT MET`,
//! and a bench that cannot measure (a peer missing, a step failing) exits non-zero.
#![allow(dead_code)] // each bench uses its own subset

pub mod bare_cri;

/// The rkubelet binary a bench starts: `RKUBELET_BENCH_BIN` when set (scripts/test.sh
/// points it at the `release-unwind` build, linked as the release is), else the one cargo
/// built beside this bench.
pub fn rkubelet_bin() -> std::ffi::OsString {
    std::env::var_os("RKUBELET_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_rkubelet").into())
}

/// The number in the environment variable `name`, else `default` (unset or not a number).
pub fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median of `values` (the upper one of an even count), none of none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// A client of the bench's control plane with the admin's kubeconfig.
pub async fn admin_client(kubeconfig: &std::path::Path) -> Result<kube::Client, String> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// `goal < {limit}{unit}: met`, or `NOT MET` when `value` is not below `limit`.
pub fn below(value: f64, limit: f64, unit: &str) -> String {
    format!("goal < {limit}{unit}: {}", verdict(value < limit))
}

/// `goal <= {limit}{unit}: met`, or `NOT MET` when `value` is above `limit`.
pub fn at_most(value: f64, limit: f64, unit: &str) -> String {
    format!("goal <= {limit}{unit}: {}", verdict(value <= limit))
}

/// The goal of a figure that could not be measured: never met.
pub fn unmeasured(limit: f64, unit: &str) -> String {
    format!("goal < {limit}{unit}: NOT MET, not measured")
}

pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT MET"
    }
}

/// Ends the bench with `bench: message` on stderr and a failing status.
pub fn fail(bench: &str, message: &str) -> ! {
    eprintln!("{bench}: FAILED: {message}");
    std::process::exit(1)
}

/// User plus system CPU seconds of process `pid` so far (USER_HZ is 100 on Linux).
pub fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name: fields[0] is the state (field 3); utime and stime are
    // fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// On-CPU nanoseconds of each live thread of process `pid`, by thread id (the first field
/// of `/proc/<pid>/task/<tid>/schedstat`): nanoseconds where `/proc/<pid>/stat` counts
/// 10 ms ticks, so that a window of a few hundred milliseconds can be measured.
pub fn thread_cpu_nanos(pid: u32) -> Option<std::collections::BTreeMap<u32, u64>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut threads = std::collections::BTreeMap::new();
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        // A thread that ends while the folder is read is simply not counted.
        if let Some(nanos) = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
        {
            threads.insert(tid, nanos);
        }
    }
    Some(threads)
}

/// The CPU seconds a process spent between two readings of [`thread_cpu_nanos`]; none when
/// a thread ended between them (its time went with it: the window cannot be measured).
pub fn cpu_secs_between(
    before: &std::collections::BTreeMap<u32, u64>,
    after: &std::collections::BTreeMap<u32, u64>,
) -> Option<f64> {
    if before.keys().any(|tid| !after.contains_key(tid)) {
        return None;
    }
    let nanos: u64 = after
        .iter()
        .map(|(tid, n)| n.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum();
    Some(nanos as f64 / 1e9)
}

/// A `kB` line of `/proc/<pid>/<file>` (`VmRSS:` of `status`, `Pss:` of `smaps_rollup`).
fn proc_kib(pid: u32, file: &str, key: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Resident set size of process `pid`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    proc_kib(pid, "status", "VmRSS:")
}

/// What the resident set of `pid` is made of: `anonymous X MiB, file-backed Y MiB` (the
/// heap and stacks, against the executable's pages read in), or `unreadable`.
#[allow(dead_code)] // not every benchmark reads memory
pub fn rss_parts(pid: u32) -> String {
    match (
        proc_kib(pid, "status", "RssAnon:"),
        proc_kib(pid, "status", "RssFile:"),
    ) {
        (Some(anon), Some(file)) => format!(
            "anonymous {:.1} MiB, file-backed {:.1} MiB",
            anon as f64 / 1024.0,
            file as f64 / 1024.0
        ),
        _ => "unreadable".into(),
    }
}

/// Proportional set size of process `pid` (shared pages divided among their sharers).
pub fn pss_kib(pid: u32) -> Option<u64> {
    proc_kib(pid, "smaps_rollup", "Pss:")
}

#[path = "../../tests/common/ports.rs"]
pub mod ports;
#[allow(unused_imports)] // not every benchmark starts a server
pub use ports::free_port;
