//! The pod's files through `ports::pod_files`: its calls block (file and mount system
//! calls), so the app makes them on tokio's blocking pool; and a hostPath checked
//! against its `type` by the domain (`check_host_path`), then created as it says.

use std::path::Path;
use std::sync::Arc;

use crate::domain::volumes::plan::{check_host_path, HostPathStep, HostPathType, VolumeErrorKind};
use crate::ports::pod_files::{PodFiles, PodFilesError};

/// A pod file operation that failed, or whose blocking task did not finish.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error(transparent)]
    Files(#[from] PodFilesError),
    #[error("the pod files task did not finish")]
    Task(#[source] tokio::task::JoinError),
}

/// Runs `op` on `files` off the async runtime.
pub async fn off_runtime<T, F>(files: &Arc<dyn PodFiles>, op: F) -> Result<T, FilesError>
where
    T: Send + 'static,
    F: FnOnce(&dyn PodFiles) -> Result<T, PodFilesError> + Send + 'static,
{
    let files = Arc::clone(files);
    tokio::task::spawn_blocking(move || op(files.as_ref()))
        .await
        .map_err(FilesError::Task)?
        .map_err(FilesError::Files)
}

/// Why a hostPath cannot be used: upstream's type-check message, or an I/O failure.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    #[error(transparent)]
    Check(#[from] VolumeErrorKind),
    #[error(transparent)]
    Files(#[from] PodFilesError),
}

/// Checks a hostPath against its `type`, creating it for the `...OrCreate` types
/// (folders `0755`, files `0644`, as upstream makes them).
pub fn prepare_host_path(
    files: &dyn PodFiles,
    path: &Path,
    kind: HostPathType,
) -> Result<(), HostPathError> {
    match check_host_path(path, kind, files.file_kind(path))? {
        HostPathStep::Ready => Ok(()),
        HostPathStep::CreateDirectory => Ok(files.create_dir_all(path, Some(0o755))?),
        HostPathStep::CreateFile => Ok(files.create_file(path, 0o644)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::{FakeEntry, FakePodFiles};

    #[test]
    fn host_paths_are_created_or_refused_as_their_type_says() {
        let files = FakePodFiles::default();
        files.put_dir("/host");
        let d = Path::new("/host/d");
        prepare_host_path(&files, d, HostPathType::DirectoryOrCreate)
            .unwrap_or_else(|e| panic!("dir: {e}"));
        assert_eq!(files.entry(d), Some(FakeEntry::Directory));
        assert_eq!(files.mode(d), Some(0o755));
        let f = Path::new("/host/f");
        prepare_host_path(&files, f, HostPathType::FileOrCreate)
            .unwrap_or_else(|e| panic!("file: {e}"));
        assert_eq!(files.file(f).as_deref(), Some(&b""[..]));
        assert_eq!(files.mode(f), Some(0o644));
        let err = prepare_host_path(&files, Path::new("/host/nope"), HostPathType::File)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("hostPath type check failed: /host/nope is not a file")
        );
        // What is there already is only checked.
        files.put_special(
            "/run/app.sock",
            crate::domain::volumes::plan::FileKind::Socket,
        );
        assert!(
            prepare_host_path(&files, Path::new("/run/app.sock"), HostPathType::Socket).is_ok()
        );
        assert!(
            prepare_host_path(&files, Path::new("/run/app.sock"), HostPathType::Directory).is_err()
        );
    }
}
