//! In-memory container log files: each file has an identity of its own, a rename moves
//! it (an open reader keeps reading it), and a reader sees what is appended later, as
//! a log a runtime goes on writing.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncSeek, ReadBuf};

use crate::domain::kuberuntime::log_rotation::{RotationPlan, COMPRESSED_SUFFIX};
use crate::ports::container_logs::{ContainerLogs, ContainerLogsError, FileIdentity, OpenLog};

type Content = Arc<Mutex<Vec<u8>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Clone)]
struct File {
    id: u64,
    content: Content,
}

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, File>,
    folders: BTreeSet<PathBuf>,
    next_id: u64,
}

/// Log files in memory.
#[derive(Debug, Default)]
pub struct FakeContainerLogs {
    state: Mutex<State>,
}

fn not_found(action: &'static str, path: &Path) -> ContainerLogsError {
    ContainerLogsError::io(action, path)(io::Error::from(io::ErrorKind::NotFound))
}

impl FakeContainerLogs {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Makes the folder `dir` (and its parents).
    pub fn make_dir(&self, dir: &Path) {
        let mut state = self.state();
        for folder in dir.ancestors() {
            state.folders.insert(folder.to_owned());
        }
    }

    /// Replaces what `path` holds (a new file when there is none; its folder is made).
    pub fn write(&self, path: &Path, data: &[u8]) {
        if let Some(parent) = path.parent() {
            self.make_dir(parent);
        }
        let mut state = self.state();
        if let Some(file) = state.files.get(path) {
            *lock(&file.content) = data.to_vec();
            return;
        }
        state.next_id += 1;
        let id = state.next_id;
        state.files.insert(
            path.to_owned(),
            File {
                id,
                content: Arc::new(Mutex::new(data.to_vec())),
            },
        );
    }

    /// Adds `data` at the end of `path` (made when missing).
    pub fn append(&self, path: &Path, data: &[u8]) {
        let existing = self.state().files.get(path).cloned();
        match existing {
            Some(file) => lock(&file.content).extend_from_slice(data),
            None => self.write(path, data),
        }
    }

    /// What `path` holds; `None` when there is no file.
    pub fn read(&self, path: &Path) -> Option<Vec<u8>> {
        let file = self.state().files.get(path).cloned()?;
        let content = lock(&file.content).clone();
        Some(content)
    }

    /// The names of the files in `dir`, sorted.
    pub fn names(&self, dir: &Path) -> Vec<String> {
        self.state()
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect()
    }

    fn size(&self, path: &Path) -> Result<u64, ContainerLogsError> {
        let file = self
            .state()
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| not_found("stat", path))?;
        let len = lock(&file.content).len();
        Ok(len as u64)
    }
}

#[async_trait]
impl ContainerLogs for FakeContainerLogs {
    async fn sizes(&self, paths: Vec<PathBuf>) -> Vec<Result<u64, ContainerLogsError>> {
        paths.iter().map(|p| self.size(p)).collect()
    }

    async fn list(&self, dir: &Path) -> Result<Vec<String>, ContainerLogsError> {
        if !self.state().folders.contains(dir) {
            return Err(not_found("list", dir));
        }
        Ok(self.names(dir))
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<(), ContainerLogsError> {
        let mut state = self.state();
        let file = state
            .files
            .remove(from)
            .ok_or_else(|| not_found("rename", from))?;
        state.files.insert(to.to_owned(), file);
        Ok(())
    }

    async fn tidy(&self, dir: &Path, plan: &RotationPlan) -> Result<(), ContainerLogsError> {
        for name in &plan.remove {
            self.state().files.remove(&dir.join(name));
        }
        for name in &plan.compress {
            let log = dir.join(name);
            let data = self.read(&log).ok_or_else(|| not_found("open", &log))?;
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            let compressed = encoder
                .write_all(&data)
                .and_then(|()| encoder.finish())
                .map_err(ContainerLogsError::io("compress", &log))?;
            self.write(&dir.join(format!("{name}{COMPRESSED_SUFFIX}")), &compressed);
            self.state().files.remove(&log);
        }
        Ok(())
    }

    async fn open(&self, path: &Path) -> Result<OpenLog, ContainerLogsError> {
        let file = self
            .state()
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| not_found("open", path))?;
        let len = lock(&file.content).len() as u64;
        Ok(OpenLog {
            reader: Box::pin(SharedReader {
                content: file.content,
                position: 0,
            }),
            len,
            identity: FileIdentity(0, file.id),
        })
    }

    async fn identity(&self, path: &Path) -> Option<FileIdentity> {
        self.state().files.get(path).map(|f| FileIdentity(0, f.id))
    }
}

/// Reads a file's content as it is at each read.
struct SharedReader {
    content: Content,
    position: u64,
}

impl AsyncRead for SharedReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let read = {
            let content = lock(&self.content);
            let start = usize::try_from(self.position)
                .unwrap_or(usize::MAX)
                .min(content.len());
            let n = buf.remaining().min(content.len() - start);
            buf.put_slice(&content[start..start + n]);
            n
        };
        self.position += read as u64;
        Poll::Ready(Ok(()))
    }
}

impl AsyncSeek for SharedReader {
    fn start_seek(mut self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        let len = lock(&self.content).len() as i128;
        let to = match position {
            SeekFrom::Start(at) => i128::from(at),
            SeekFrom::End(delta) => len + i128::from(delta),
            SeekFrom::Current(delta) => i128::from(self.position) + i128::from(delta),
        };
        self.position =
            u64::try_from(to).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Poll::Ready(Ok(self.position))
    }
}
