//! Container log rotation (issue 15), in process on this machine's disk with the
//! simulated runtime answering `ListContainers` and `ReopenContainerLog`: one round over
//! `RKUBELET_BENCH_ROTATION_CONTAINERS` (100) running containers whose logs are not full
//! (what every `containerLogMonitorInterval` costs; goal <= 5 ms), and one where
//! `RKUBELET_BENCH_ROTATION_FULL` (10) of them have a full 10 MiB log and a rotated one
//! to compress (goal: at least 50 MB/s of logs rotated, so a 10-second round keeps up
//! with a node writing that much).
//! The upstream kubelet's rotation is not run side by side: it rotates on its own
//! 10-second timer with no way to trigger a round.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use common::{at_most, fail, verdict};
use rkubelet::adapters::fake::runtime::FakeRuntime;
use rkubelet::adapters::fake::FakeClock;
use rkubelet::adapters::system::SystemContainerLogs;
use rkubelet::app::container_logs::ContainerLogManager;
use rkubelet::domain::kuberuntime::labels::{POD_NAMESPACE_LABEL, POD_NAME_LABEL, POD_UID_LABEL};
use rkubelet::domain::kuberuntime::log_rotation::{LogRotatePolicy, LogRotationSettings};
use rkubelet::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};
use rkubelet::ports::runtime::RuntimeService;

const BENCH: &str = "log_rotation";
const LOG_BYTES: usize = 10 * 1024 * 1024;

fn containers() -> usize {
    std::env::var("RKUBELET_BENCH_ROTATION_CONTAINERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// How many containers get a full log: `RKUBELET_BENCH_ROTATION_FULL` (10).
fn full_logs() -> usize {
    std::env::var("RKUBELET_BENCH_ROTATION_FULL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

/// Running containers `app` of pods `p<i>`, each with its log folder; the folders.
async fn node(runtime: &FakeRuntime, logs: &Path, count: usize) -> Vec<std::path::PathBuf> {
    let mut folders = Vec::new();
    for i in 0..count {
        let uid = format!("u{i}");
        let labels = BTreeMap::from([
            (POD_NAMESPACE_LABEL.to_owned(), "default".to_owned()),
            (POD_NAME_LABEL.to_owned(), format!("p{i}")),
            (POD_UID_LABEL.to_owned(), uid.clone()),
        ]);
        let sandbox = SandboxConfig {
            name: format!("p{i}"),
            labels: labels.clone(),
            ..SandboxConfig::default()
        };
        let made = async {
            let sandbox_id = runtime.run_pod_sandbox(&sandbox).await?;
            let config = ContainerConfig {
                name: "app".into(),
                labels,
                ..ContainerConfig::default()
            };
            let id = runtime
                .create_container(&sandbox_id, &config, &sandbox)
                .await?;
            runtime.start_container(&id).await
        };
        if let Err(e) = made.await {
            fail(BENCH, &format!("the simulated container: {e}"));
        }
        let folder = logs.join(format!("default_p{i}_{uid}")).join("app");
        if let Err(e) = std::fs::create_dir_all(&folder) {
            fail(BENCH, &format!("{}: {e}", folder.display()));
        }
        folders.push(folder);
    }
    folders
}

/// Writes a log of CRI lines, `bytes` long, at `path`: access-log-like lines whose
/// counter, latency and request id vary, so that gzip meets text like a real log's.
fn write_log(path: &Path, bytes: usize) {
    let mut text = String::with_capacity(bytes + 256);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut n = 0u64;
    while text.len() < bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        n += 1;
        text.push_str(&format!(
            "2026-11-24T17:{:02}:{:02}.{:09}Z stdout F GET /items/{} 200 {} 0.{:03} req={state:016x}\n",
            n / 60_000 % 60,
            n / 1000 % 60,
            state % 1_000_000_000,
            state % 10_000,
            state % 5000,
            state % 1000
        ));
    }
    if let Err(e) = std::fs::write(path, &text.as_bytes()[..bytes]) {
        fail(BENCH, &format!("{}: {e}", path.display()));
    }
}

#[tokio::main(flavor = "current_thread")]
pub async fn main() {
    let count = containers();
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(BENCH, &format!("temp dir: {e}")));
    let runtime = Arc::new(FakeRuntime::new().without_journal());
    let folders = node(&runtime, dir.path(), count).await;
    let clock = Arc::new(FakeClock::new(1_795_539_600_000_000_000));
    let settings = LogRotationSettings {
        policy: Some(LogRotatePolicy {
            max_size_bytes: LOG_BYTES as u64,
            max_files: 5,
        }),
        ..LogRotationSettings::default()
    };
    let Some(manager) = ContainerLogManager::new(
        runtime.clone(),
        clock.clone(),
        Arc::new(SystemContainerLogs),
        dir.path().to_owned(),
        settings,
    ) else {
        fail(BENCH, "rotation is off");
    };

    // Logs below the size: the round every interval pays.
    for folder in &folders {
        write_log(&folder.join("0.log"), 4096);
    }
    let mut quiet = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        match manager.rotate_logs().await {
            Ok(o) if o.checked == count && o.rotated == 0 => {}
            other => fail(BENCH, &format!("a quiet round: {other:?}")),
        }
        quiet.push(started.elapsed());
    }
    quiet.sort();
    let median = quiet[quiet.len() / 2].as_secs_f64() * 1e3;
    println!(
        "log rotation: a round over {count} running containers, no log full: median {median:.2} ms ({})",
        at_most(median, 5.0, " ms")
    );

    // Full logs, each with a rotated one from the round before to compress, in the first
    // `full` containers (the others stay below the size).
    let full = full_logs().min(count);
    for folder in &folders[..full] {
        write_log(&folder.join("0.log.20261124-165000"), LOG_BYTES);
        write_log(&folder.join("0.log"), LOG_BYTES);
    }
    let started = Instant::now();
    match manager.rotate_logs().await {
        Ok(o) if o.rotated == full => {}
        other => fail(BENCH, &format!("a full round: {other:?}")),
    }
    let took = started.elapsed();
    let mut compressed = 0u64;
    for folder in &folders[..full] {
        match std::fs::metadata(folder.join("0.log.20261124-165000.gz")) {
            Ok(meta) => compressed += meta.len(),
            Err(e) => fail(
                BENCH,
                &format!("no compressed log in {}: {e}", folder.display()),
            ),
        }
    }
    let rotated_mb = (full * LOG_BYTES) as f64 / 1e6;
    let rate = rotated_mb / took.as_secs_f64().max(1e-9);
    println!(
        "log rotation: {full} full 10 MiB logs rotated and {full} older ones gzip-compressed (of {count} containers) in {:.2} s: {rate:.0} MB/s, compressed to {:.1} % (goal >= 50 MB/s: {})",
        took.as_secs_f64(),
        compressed as f64 / (full * LOG_BYTES) as f64 * 100.0,
        verdict(rate >= 50.0)
    );
}
