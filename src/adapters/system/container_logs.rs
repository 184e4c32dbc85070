//! The containers' log files on this host's filesystem.

use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::domain::kuberuntime::log_rotation::{RotationPlan, COMPRESSED_SUFFIX, TEMPORARY_SUFFIX};
use crate::ports::container_logs::{ContainerLogs, ContainerLogsError, FileIdentity, OpenLog};

/// The log files under `podLogsDir`, through the filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemContainerLogs;

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ContainerLogsError {
    let path = path.to_owned();
    move |source| ContainerLogsError {
        action,
        path,
        source,
    }
}

/// A blocking task that did not finish (the runtime is shutting down).
fn interrupted(action: &'static str, path: &Path) -> ContainerLogsError {
    io_error(action, path)(io::Error::other("interrupted"))
}

#[async_trait]
impl ContainerLogs for SystemContainerLogs {
    async fn sizes(&self, paths: Vec<PathBuf>) -> Vec<Result<u64, ContainerLogsError>> {
        let count = paths.len();
        let first = paths.first().cloned().unwrap_or_default();
        tokio::task::spawn_blocking(move || {
            paths
                .iter()
                .map(|path| {
                    std::fs::metadata(path)
                        .map(|meta| meta.len())
                        .map_err(io_error("stat", path))
                })
                .collect()
        })
        .await
        .unwrap_or_else(|_| {
            (0..count)
                .map(|_| Err(interrupted("stat", &first)))
                .collect()
        })
    }

    async fn list(&self, dir: &Path) -> Result<Vec<String>, ContainerLogsError> {
        let mut entries = tokio::fs::read_dir(dir)
            .await
            .map_err(io_error("list", dir))?;
        let mut names = Vec::new();
        while let Some(entry) = entries.next_entry().await.map_err(io_error("list", dir))? {
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<(), ContainerLogsError> {
        tokio::fs::rename(from, to)
            .await
            .map_err(io_error("rename", from))
    }

    async fn tidy(&self, dir: &Path, plan: &RotationPlan) -> Result<(), ContainerLogsError> {
        let folder = dir.to_owned();
        let plan = plan.clone();
        tokio::task::spawn_blocking(move || tidy_rotated(&folder, &plan))
            .await
            .map_err(|_| interrupted("tidy", dir))?
    }

    async fn open(&self, path: &Path) -> Result<OpenLog, ContainerLogsError> {
        let file = tokio::fs::File::open(path)
            .await
            .map_err(io_error("open", path))?;
        let meta = file.metadata().await.map_err(io_error("stat", path))?;
        Ok(OpenLog {
            reader: Box::pin(file),
            len: meta.len(),
            identity: FileIdentity(meta.dev(), meta.ino()),
        })
    }

    async fn identity(&self, path: &Path) -> Option<FileIdentity> {
        let meta = tokio::fs::metadata(path).await.ok()?;
        Some(FileIdentity(meta.dev(), meta.ino()))
    }
}

/// The plan's removals, then its compressions (blocking file work).
fn tidy_rotated(dir: &Path, plan: &RotationPlan) -> Result<(), ContainerLogsError> {
    for name in &plan.remove {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("remove", &path)(e)),
        }
    }
    for name in &plan.compress {
        compress(&dir.join(name))?;
    }
    Ok(())
}

/// `log` to `log.gz` through `log.gz.tmp`, so that a crash leaves either the plain file
/// or a whole archive (the next plan removes the temporary file).
fn compress(log: &Path) -> Result<(), ContainerLogsError> {
    let suffixed = |suffix: &str| {
        let mut name = log.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    let temporary = suffixed(TEMPORARY_SUFFIX);
    let compressed = suffixed(COMPRESSED_SUFFIX);

    let mut input = std::fs::File::open(log).map_err(io_error("open", log))?;
    let output = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o640)
        .open(&temporary)
        .map_err(io_error("create", &temporary))?;
    let written = (|| {
        let mut encoder = flate2::write::GzEncoder::new(output, flate2::Compression::default());
        io::copy(&mut input, &mut encoder)?;
        encoder.finish()?.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(io_error("compress", log)(e));
    }
    std::fs::rename(&temporary, &compressed).map_err(io_error("rename", &temporary))?;
    std::fs::remove_file(log).map_err(io_error("remove", log))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use tokio::io::AsyncReadExt;

    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut list: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read_dir: {e}"))
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        list.sort();
        list
    }

    #[tokio::test]
    async fn a_plan_removes_then_compresses_through_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).unwrap_or_else(|e| panic!("write: {e}"))
        };
        write("0.log.20261124-165800", "old");
        write("0.log.20261124-165900", "newer");
        write("0.log.20261124-165900.gz.tmp", "half");
        let plan = RotationPlan {
            remove: vec![
                "0.log.20261124-165800".into(),
                "0.log.20261124-165900.gz.tmp".into(),
                "0.log.gone".into(),
            ],
            compress: vec!["0.log.20261124-165900".into()],
            rotate_to: "0.log.20261124-170000".into(),
        };
        let logs = SystemContainerLogs;
        logs.tidy(dir.path(), &plan)
            .await
            .unwrap_or_else(|e| panic!("tidy: {e}"));
        assert_eq!(names(dir.path()), ["0.log.20261124-165900.gz"]);
        let mut text = String::new();
        flate2::read::GzDecoder::new(
            std::fs::File::open(dir.path().join("0.log.20261124-165900.gz"))
                .unwrap_or_else(|e| panic!("open: {e}")),
        )
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("gunzip: {e}"));
        assert_eq!(text, "newer");
        let missing = dir.path().join("nope");
        let sizes = logs
            .sizes(vec![dir.path().join("0.log.20261124-165900.gz"), missing])
            .await;
        assert!(matches!(sizes[0], Ok(n) if n > 0));
        assert!(matches!(&sizes[1], Err(e) if e.is_not_found()));
    }

    #[tokio::test]
    async fn an_open_log_keeps_its_identity_and_a_rotation_changes_the_paths() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("0.log");
        std::fs::write(&path, "one\n").unwrap_or_else(|e| panic!("write: {e}"));
        let logs = SystemContainerLogs;
        let mut open = logs
            .open(&path)
            .await
            .unwrap_or_else(|e| panic!("open: {e}"));
        assert_eq!(open.len, 4);
        assert_eq!(logs.identity(&path).await, Some(open.identity));
        logs.rename(&path, &dir.path().join("0.log.1"))
            .await
            .unwrap_or_else(|e| panic!("rename: {e}"));
        assert_eq!(logs.identity(&path).await, None);
        std::fs::write(&path, "two\n").unwrap_or_else(|e| panic!("write: {e}"));
        assert_ne!(logs.identity(&path).await, Some(open.identity));
        let mut text = String::new();
        let _ = open.reader.read_to_string(&mut text).await;
        assert_eq!(text, "one\n");
        let mut listed = logs
            .list(dir.path())
            .await
            .unwrap_or_else(|e| panic!("list: {e}"));
        listed.sort();
        assert_eq!(listed, ["0.log", "0.log.1"]);
    }
}
