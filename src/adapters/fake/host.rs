use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use tokio::sync::watch;

use crate::ports::host::{ContentionWait, Host, HostError, LockHandle};

/// One `set_oom_score_adj` call as the fake saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OomScoreAdjCall {
    pub pid: Option<u32>,
    pub value: i32,
    /// False when the call was made to fail.
    pub applied: bool,
}

#[derive(Debug)]
struct State {
    hostname: String,
    uid: u32,
    oom_failure: Option<io::ErrorKind>,
    oom_calls: Vec<OomScoreAdjCall>,
    lock_acquisitions: Vec<PathBuf>,
    held_locks: HashSet<PathBuf>,
    locked_elsewhere: HashSet<PathBuf>,
    watched_locks: Vec<PathBuf>,
    notify_socket: bool,
    ready_notifications: usize,
    created_dirs: Vec<PathBuf>,
    made_shared: Vec<PathBuf>,
    code_page_releases: usize,
    /// The files `read_to_string` and `files_in` see, by path.
    files: BTreeMap<PathBuf, String>,
}

/// An in-memory host: scripted identity, recorded side effects.
#[derive(Debug)]
pub struct FakeHost {
    state: Arc<Mutex<State>>,
    contention: watch::Sender<bool>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicking test thread must not hide the record from the rest of the test.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Releases the fake lock when the `LockHandle` is dropped, like closing a flocked fd.
struct FakeLockGuard {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl Drop for FakeLockGuard {
    fn drop(&mut self) {
        lock(&self.state).held_locks.remove(&self.path);
    }
}

impl Default for FakeHost {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeHost {
    /// Hostname `fake-node`, uid 0, no notify socket, every call succeeds.
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                hostname: "fake-node".to_owned(),
                uid: 0,
                oom_failure: None,
                oom_calls: Vec::new(),
                lock_acquisitions: Vec::new(),
                held_locks: HashSet::new(),
                locked_elsewhere: HashSet::new(),
                watched_locks: Vec::new(),
                notify_socket: false,
                ready_notifications: 0,
                created_dirs: Vec::new(),
                made_shared: Vec::new(),
                code_page_releases: 0,
                files: BTreeMap::new(),
            })),
            contention: watch::channel(false).0,
        }
    }

    pub fn with_hostname(self, hostname: impl Into<String>) -> Self {
        self.state().hostname = hostname.into();
        self
    }

    pub fn with_uid(self, uid: u32) -> Self {
        self.state().uid = uid;
        self
    }

    /// As if `$NOTIFY_SOCKET` were set: `notify_ready` then returns `Ok(true)`.
    pub fn with_notify_socket(self) -> Self {
        self.state().notify_socket = true;
        self
    }

    /// Makes `set_oom_score_adj` fail with `kind` (e.g. `PermissionDenied`, what lowering the
    /// score without CAP_SYS_RESOURCE gives); `None` makes it succeed again.
    pub fn fail_oom_score_adj(&self, kind: Option<io::ErrorKind>) {
        self.state().oom_failure = kind;
    }

    /// Marks `path` as locked by another process: `acquire_lock` on it is contended.
    pub fn lock_elsewhere(&self, path: impl Into<PathBuf>) {
        self.state().locked_elsewhere.insert(path.into());
    }

    /// Resolves every pending and future `watch_lock_contention` wait, as another process opening
    /// the lock file would.
    pub fn simulate_lock_contention(&self) {
        self.contention.send_replace(true);
    }

    /// Every `set_oom_score_adj` call, in order, failed ones included.
    pub fn oom_score_adj_calls(&self) -> Vec<OomScoreAdjCall> {
        self.state().oom_calls.clone()
    }

    /// The score last applied to `pid` (`None`: this process), if any.
    pub fn oom_score_adj(&self, pid: Option<u32>) -> Option<i32> {
        self.state()
            .oom_calls
            .iter()
            .rev()
            .find(|c| c.applied && c.pid == pid)
            .map(|c| c.value)
    }

    /// Paths successfully locked, in order.
    pub fn lock_acquisitions(&self) -> Vec<PathBuf> {
        self.state().lock_acquisitions.clone()
    }

    /// Whether a `LockHandle` for `path` is still alive.
    pub fn is_lock_held(&self, path: &Path) -> bool {
        self.state().held_locks.contains(path)
    }

    /// Paths `watch_lock_contention` was called on.
    pub fn watched_locks(&self) -> Vec<PathBuf> {
        self.state().watched_locks.clone()
    }

    /// How many times READY=1 was sent.
    pub fn ready_notifications(&self) -> usize {
        self.state().ready_notifications
    }

    /// How many times the code pages were released.
    pub fn code_page_releases(&self) -> usize {
        self.state().code_page_releases
    }

    /// Directories `create_dir_all` was called on, in order.
    pub fn created_dirs(&self) -> Vec<PathBuf> {
        self.state().created_dirs.clone()
    }

    /// Folders `make_rshared` was called on, in order.
    pub fn made_shared(&self) -> Vec<PathBuf> {
        self.state().made_shared.clone()
    }

    /// Puts a file with `text` at `path`, for `read_to_string` and `files_in`.
    pub fn with_file(self, path: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        self.state().files.insert(path.into(), text.into());
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

#[async_trait]
impl Host for FakeHost {
    fn hostname(&self) -> Result<String, HostError> {
        Ok(self.state().hostname.clone())
    }

    fn effective_uid(&self) -> u32 {
        self.state().uid
    }

    fn set_oom_score_adj(&self, pid: Option<u32>, value: i32) -> Result<(), HostError> {
        if !(-1000..=1000).contains(&value) {
            return Err(HostError::OomScoreOutOfRange { value });
        }
        let mut state = self.state();
        let failure = state.oom_failure;
        state.oom_calls.push(OomScoreAdjCall {
            pid,
            value,
            applied: failure.is_none(),
        });
        match failure {
            None => Ok(()),
            Some(kind) => {
                let process = pid.map_or_else(|| "self".to_owned(), |p| p.to_string());
                Err(HostError::OomScoreAdj {
                    path: PathBuf::from(format!("/proc/{process}/oom_score_adj")),
                    value,
                    source: io::Error::from(kind),
                })
            }
        }
    }

    fn acquire_lock(&self, path: &Path) -> Result<LockHandle, HostError> {
        let mut state = self.state();
        // flock conflicts between two opens of one file even in one process: mirror that.
        if state.locked_elsewhere.contains(path) || state.held_locks.contains(path) {
            return Err(HostError::LockContended {
                path: path.to_owned(),
            });
        }
        state.held_locks.insert(path.to_owned());
        state.lock_acquisitions.push(path.to_owned());
        let guard = FakeLockGuard {
            state: Arc::clone(&self.state),
            path: path.to_owned(),
        };
        Ok(LockHandle::new(path, guard))
    }

    fn watch_lock_contention(&self, path: &Path) -> Result<ContentionWait, HostError> {
        self.state().watched_locks.push(path.to_owned());
        let mut contention = self.contention.subscribe();
        let path = path.to_owned();
        Ok(Box::pin(async move {
            // The sender lives in the host; if it is dropped, say so rather than hang.
            contention
                .wait_for(|contended| *contended)
                .await
                .map(drop)
                .map_err(|_| HostError::LockWatch {
                    path,
                    source: io::Error::other("fake host dropped"),
                })
        }))
    }

    fn notify_ready(&self) -> Result<bool, HostError> {
        let mut state = self.state();
        if !state.notify_socket {
            return Ok(false);
        }
        state.ready_notifications += 1;
        Ok(true)
    }

    fn create_dir_all(&self, path: &Path) -> Result<(), HostError> {
        self.state().created_dirs.push(path.to_owned());
        Ok(())
    }

    fn make_rshared(&self, path: &Path) -> Result<(), HostError> {
        self.state().made_shared.push(path.to_owned());
        Ok(())
    }

    fn release_code_pages(&self) -> Result<u64, HostError> {
        self.state().code_page_releases += 1;
        Ok(0)
    }

    fn read_to_string(&self, path: &Path) -> Result<String, HostError> {
        self.state()
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| HostError::ReadFile {
                path: path.to_owned(),
                source: io::Error::from(io::ErrorKind::NotFound),
            })
    }

    fn files_in(&self, dir: &Path) -> Result<Vec<PathBuf>, HostError> {
        let state = self.state();
        let files: Vec<PathBuf> = state
            .files
            .keys()
            .filter(|path| path.parent() == Some(dir))
            .cloned()
            .collect();
        if files.is_empty() && !state.files.keys().any(|p| p.starts_with(dir)) {
            return Err(HostError::ListDir {
                path: dir.to_owned(),
                source: io::Error::from(io::ErrorKind::NotFound),
            });
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripted_identity() {
        let host = FakeHost::new().with_hostname("node-a").with_uid(1000);
        assert_eq!(host.hostname().ok().as_deref(), Some("node-a"));
        assert_eq!(host.effective_uid(), 1000);
    }

    #[test]
    fn records_oom_scores_and_fails_when_told() {
        let host = FakeHost::new();
        assert!(host.set_oom_score_adj(None, 100).is_ok());
        host.fail_oom_score_adj(Some(io::ErrorKind::PermissionDenied));
        let err = host.set_oom_score_adj(None, -999).err();
        assert!(err.as_ref().is_some_and(HostError::is_permission_denied));
        assert_eq!(host.oom_score_adj(None), Some(100));
        assert_eq!(host.oom_score_adj_calls().len(), 2);
        assert!(matches!(
            host.set_oom_score_adj(Some(1), 1001),
            Err(HostError::OomScoreOutOfRange { value: 1001 })
        ));
    }

    #[test]
    fn lock_is_exclusive_until_the_handle_drops() {
        let host = FakeHost::new();
        let path = Path::new("/var/run/kubelet.lock");
        let handle = host.acquire_lock(path);
        assert!(handle.is_ok());
        assert!(host.is_lock_held(path));
        assert!(matches!(
            host.acquire_lock(path),
            Err(HostError::LockContended { .. })
        ));
        drop(handle);
        assert!(!host.is_lock_held(path));
        assert!(host.acquire_lock(path).is_ok());
        assert_eq!(host.lock_acquisitions().len(), 2);

        host.lock_elsewhere("/other.lock");
        assert!(matches!(
            host.acquire_lock(Path::new("/other.lock")),
            Err(HostError::LockContended { path }) if path == Path::new("/other.lock")
        ));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn contention_resolves_the_wait() {
        let host = FakeHost::new();
        let path = Path::new("/var/run/kubelet.lock");
        let wait = host.watch_lock_contention(path).expect("watch starts");
        tokio::pin!(wait);
        // Poll once so the wait is registered, then contend.
        tokio::select! {
            biased;
            _ = &mut wait => panic!("resolved before any contention"),
            () = std::future::ready(()) => {}
        }
        host.simulate_lock_contention();
        assert!(wait.await.is_ok());
        assert_eq!(host.watched_locks(), vec![path.to_owned()]);
    }

    #[test]
    fn notify_ready_only_with_a_socket() {
        let host = FakeHost::new();
        assert!(matches!(host.notify_ready(), Ok(false)));
        let host = FakeHost::new().with_notify_socket();
        assert!(matches!(host.notify_ready(), Ok(true)));
        assert_eq!(host.ready_notifications(), 1);
    }
}
