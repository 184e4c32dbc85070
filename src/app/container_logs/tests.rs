use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::adapters::fake::runtime::FakeRuntime;
use crate::adapters::fake::{FakeClock, FakeContainerLogs};
use crate::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};

/// 2026-11-24T17:00:00Z
const NOW: i64 = 1_795_539_600 * 1_000_000_000;

struct Node {
    runtime: Arc<FakeRuntime>,
    clock: Arc<FakeClock>,
    logs: Arc<FakeContainerLogs>,
}

/// `podLogsDir` of the tests.
const LOGS_DIR: &str = "/var/log/pods";

fn node() -> Node {
    Node {
        runtime: Arc::new(FakeRuntime::new()),
        clock: Arc::new(FakeClock::new(NOW)),
        logs: Arc::new(FakeContainerLogs::new()),
    }
}

impl Node {
    fn manager(&self, max_size_bytes: u64, max_files: usize) -> ContainerLogManager {
        let settings = LogRotationSettings {
            policy: Some(LogRotatePolicy {
                max_size_bytes,
                max_files,
            }),
            monitor_interval: Duration::from_secs(10),
            max_workers: 2,
        };
        ContainerLogManager::new(
            self.runtime.clone(),
            self.clock.clone(),
            self.logs.clone(),
            PathBuf::from(LOGS_DIR),
            settings,
        )
        .unwrap_or_else(|| panic!("rotation is on"))
    }

    /// A running container `app` of pod `default/web` (uid `u1`) at `attempt`; returns its
    /// id and its log folder.
    async fn running_container(&self, attempt: u32) -> (String, PathBuf) {
        let labels = BTreeMap::from([
            (POD_NAMESPACE_LABEL.to_owned(), "default".to_owned()),
            (POD_NAME_LABEL.to_owned(), "web".to_owned()),
            (POD_UID_LABEL.to_owned(), "u1".to_owned()),
        ]);
        let sandbox = SandboxConfig {
            name: "web".into(),
            labels: labels.clone(),
            ..SandboxConfig::default()
        };
        let sandbox_id = self
            .runtime
            .run_pod_sandbox(&sandbox)
            .await
            .unwrap_or_else(|e| panic!("sandbox: {e}"));
        let config = ContainerConfig {
            name: "app".into(),
            attempt,
            labels,
            ..ContainerConfig::default()
        };
        let id = self
            .runtime
            .create_container(&sandbox_id, &config, &sandbox)
            .await
            .unwrap_or_else(|e| panic!("create: {e}"));
        self.runtime
            .start_container(&id)
            .await
            .unwrap_or_else(|e| panic!("start: {e}"));
        let dir = Path::new(LOGS_DIR).join("default_web_u1").join("app");
        self.logs.make_dir(&dir);
        (id, dir)
    }

    fn write(&self, path: &Path, bytes: usize) {
        self.logs.write(path, &vec![b'x'; bytes]);
    }

    fn names(&self, dir: &Path) -> Vec<String> {
        self.logs.names(dir)
    }
}

#[tokio::test]
async fn a_full_log_is_rotated_compressed_later_and_the_oldest_removed() {
    let node = node();
    let manager = node.manager(100, 3);
    let (id, dir) = node.running_container(2).await;
    node.write(&dir.join("2.log"), 99);
    // A log of another instance is never touched.
    node.write(&dir.join("1.log"), 500);
    assert_eq!(
        manager.rotate_logs().await.ok(),
        Some(RoundOutcome {
            checked: 1,
            rotated: 0,
            failed: 0
        })
    );

    node.write(&dir.join("2.log"), 100);
    let outcome = manager.rotate_logs().await.ok();
    assert_eq!(outcome.map(|o| o.rotated), Some(1));
    assert_eq!(node.names(&dir), ["1.log", "2.log.20261124-170000"]);
    assert!(node
        .runtime
        .journal()
        .contains(&format!("ReopenContainerLog {id}")));

    // The runtime made a new live file (the fake does not write logs); it fills up.
    for (minute, expected) in [
        (
            1,
            vec!["1.log", "2.log.20261124-170000.gz", "2.log.20261124-170100"],
        ),
        // Three files: the live one, the newest rotated, one compressed.
        (
            2,
            vec!["1.log", "2.log.20261124-170100.gz", "2.log.20261124-170200"],
        ),
    ] {
        node.clock.set_unix_nanos(NOW + minute * 60_000_000_000);
        node.write(&dir.join("2.log"), 150);
        let outcome = manager.rotate_logs().await.ok();
        assert_eq!(outcome.map(|o| o.rotated), Some(1));
        assert_eq!(node.names(&dir), expected);
    }
    let mut text = Vec::new();
    let archive = node
        .logs
        .read(&dir.join("2.log.20261124-170100.gz"))
        .unwrap_or_else(|| panic!("no archive"));
    flate2::read::GzDecoder::new(archive.as_slice())
        .read_to_end(&mut text)
        .unwrap_or_else(|e| panic!("gunzip: {e}"));
    assert_eq!(text, vec![b'x'; 150]);
}

#[tokio::test]
async fn a_failed_reopen_renames_the_log_back_and_a_lost_live_file_is_reopened() {
    let node = node();
    let manager = node.manager(100, 5);
    let (id, dir) = node.running_container(0).await;
    node.write(&dir.join("0.log"), 200);
    node.runtime.fail_log_reopens(Some("no such fifo"));
    let outcome = manager.rotate_logs().await.ok();
    assert_eq!(outcome.map(|o| (o.rotated, o.failed)), Some((0, 1)));
    assert_eq!(node.names(&dir), ["0.log"], "the live log is back in place");

    // A kubelet stopped between the rename and the reopen left no live file: the next
    // round asks the runtime to reopen it (here it still fails, and says so).
    node.logs
        .rename(&dir.join("0.log"), &dir.join("0.log.20261124-165900"))
        .await
        .unwrap_or_else(|e| panic!("rename: {e}"));
    let outcome = manager.rotate_logs().await.ok();
    assert_eq!(outcome.map(|o| o.failed), Some(1));
    node.runtime.fail_log_reopens(None);
    let _ = manager.rotate_logs().await;
    assert!(node
        .runtime
        .journal()
        .contains(&format!("ReopenContainerLog {id}")));
}

#[tokio::test]
async fn stopped_containers_and_foreign_ones_are_left_alone() {
    let node = node();
    let manager = node.manager(100, 5);
    let (id, dir) = node.running_container(0).await;
    node.write(&dir.join("0.log"), 200);
    node.runtime.exit_container(&id, 0);
    // A container no kubelet made carries no pod labels.
    let sandbox_id = node
        .runtime
        .run_pod_sandbox(&SandboxConfig::default())
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"));
    let foreign = node
        .runtime
        .create_container(
            &sandbox_id,
            &ContainerConfig::default(),
            &SandboxConfig::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
    let _ = node.runtime.start_container(&foreign).await;
    let outcome = manager.rotate_logs().await.ok();
    assert_eq!(outcome, Some(RoundOutcome::default()));
    assert_eq!(node.names(&dir), ["0.log"]);
}

#[test]
fn a_negative_size_turns_rotation_off() {
    let node = node();
    let settings = LogRotationSettings {
        policy: None,
        ..LogRotationSettings::default()
    };
    assert!(ContainerLogManager::new(
        node.runtime.clone(),
        node.clock.clone(),
        node.logs.clone(),
        PathBuf::from(LOGS_DIR),
        settings
    )
    .is_none());
}
