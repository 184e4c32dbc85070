use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::mman::{madvise, MmapAdvise};
use tokio::net::unix::pipe;
use tracing::{debug, info};

use crate::domain::code_pages;
use crate::ports::host::{ContentionWait, Host, HostError, LockHandle};

/// The real host.
#[derive(Debug, Clone)]
pub struct SystemHost {
    proc_root: PathBuf,
    notify_socket: Option<OsString>,
}

impl SystemHost {
    /// Reads `$NOTIFY_SOCKET` now, so later changes to the environment do not matter
    /// and tests need not touch the process environment.
    pub fn from_env() -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            notify_socket: std::env::var_os("NOTIFY_SOCKET"),
        }
    }

    /// Uses another procfs mount (a fixture tree in tests).
    pub fn with_proc_root(mut self, proc_root: impl Into<PathBuf>) -> Self {
        self.proc_root = proc_root.into();
        self
    }

    /// Overrides the notify socket (`None`: not run by a service manager).
    pub fn with_notify_socket(mut self, socket: Option<OsString>) -> Self {
        self.notify_socket = socket;
        self
    }

    fn oom_score_adj_path(&self, pid: Option<u32>) -> PathBuf {
        let process = pid.map_or_else(|| "self".to_owned(), |p| p.to_string());
        self.proc_root.join(process).join("oom_score_adj")
    }
}

/// The mask of the first `struct inotify_event` in `buf` (wd, then mask), for the log.
fn first_event_mask(buf: &[u8]) -> Option<AddWatchFlags> {
    let bytes: [u8; 4] = buf.get(4..8)?.try_into().ok()?;
    Some(AddWatchFlags::from_bits_truncate(u32::from_ne_bytes(bytes)))
}

/// Drops the resident pages of `mapping`, one of this process's own.
#[allow(unsafe_code)]
fn release(mapping: &code_pages::Mapping) -> Result<(), HostError> {
    let failed = |source: io::Error| HostError::ReleasePages {
        path: mapping.path.clone(),
        start: mapping.start,
        end: mapping.end,
        source,
    };
    let invalid = || failed(io::Error::from(io::ErrorKind::InvalidInput));
    let start = usize::try_from(mapping.start).map_err(|_| invalid())?;
    let length = usize::try_from(mapping.end - mapping.start).map_err(|_| invalid())?;
    let address = std::ptr::NonNull::new(start as *mut std::ffi::c_void).ok_or_else(invalid)?;
    // SAFETY: the range is one whole mapping of this process, listed by the kernel a
    // moment ago: a private, read-only mapping of the executable file without a page
    // written to it (`releasable`). No Rust value lives there, and MADV_DONTNEED on such
    // a mapping only unmaps pages equal to the file's, which the next access maps back.
    unsafe { madvise(address, length, MmapAdvise::MADV_DONTNEED) }
        .map_err(|errno| failed(errno.into()))
}

fn notify_address(socket: &OsString) -> Result<SocketAddr, HostError> {
    let bytes = socket.as_bytes();
    let invalid = |detail: String| HostError::NotifySocketInvalid {
        socket: socket.to_string_lossy().into_owned(),
        detail,
    };
    // systemd's convention: a leading '@' names a Linux abstract socket.
    if let Some(name) = bytes.strip_prefix(b"@") {
        SocketAddr::from_abstract_name(name).map_err(|e| invalid(e.to_string()))
    } else if bytes.starts_with(b"/") {
        SocketAddr::from_pathname(Path::new(socket)).map_err(|e| invalid(e.to_string()))
    } else {
        Err(invalid(
            "expected an absolute path or an @abstract name".to_owned(),
        ))
    }
}

#[async_trait]
impl Host for SystemHost {
    fn hostname(&self) -> Result<String, HostError> {
        let name = nix::unistd::gethostname().map_err(|e| HostError::Hostname {
            source: io::Error::from(e),
        })?;
        name.into_string()
            .map_err(|raw| HostError::HostnameNotUtf8 {
                hostname: raw.to_string_lossy().into_owned(),
            })
    }

    fn effective_uid(&self) -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    fn set_oom_score_adj(&self, pid: Option<u32>, value: i32) -> Result<(), HostError> {
        if !(-1000..=1000).contains(&value) {
            return Err(HostError::OomScoreOutOfRange { value });
        }
        let path = self.oom_score_adj_path(pid);
        let fail = |source| HostError::OomScoreAdj {
            path: path.clone(),
            value,
            source,
        };
        // No create: procfs files exist or the process is gone (ENOENT).
        let mut file = OpenOptions::new().write(true).open(&path).map_err(fail)?;
        file.write_all(value.to_string().as_bytes()).map_err(fail)?;
        debug!(path = %path.display(), value, "set oom_score_adj");
        Ok(())
    }

    fn acquire_lock(&self, path: &Path) -> Result<LockHandle, HostError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|source| HostError::Lock {
                path: path.to_owned(),
                source,
            })?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => {
                info!(path = %path.display(), "acquired lock file");
                Ok(LockHandle::new(path, locked))
            }
            Err((_, Errno::EWOULDBLOCK)) => Err(HostError::LockContended {
                path: path.to_owned(),
            }),
            Err((_, errno)) => Err(HostError::Lock {
                path: path.to_owned(),
                source: io::Error::from(errno),
            }),
        }
    }

    fn watch_lock_contention(&self, path: &Path) -> Result<ContentionWait, HostError> {
        let owned = path.to_owned();
        let fail = move |source: io::Error| HostError::LockWatch {
            path: owned.clone(),
            source,
        };
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| fail(e.into()))?;
        // The same events the upstream kubelet watches: someone opening the file (a new
        // kubelet about to flock it) or the file going away.
        inotify
            .add_watch(path, AddWatchFlags::IN_OPEN | AddWatchFlags::IN_DELETE_SELF)
            .map_err(|e| fail(e.into()))?;
        // tokio's pipe receiver is its one safe wrapper that polls an arbitrary readable fd
        // (AsyncFd registration is unsafe); the inotify fd is already non-blocking.
        let events =
            pipe::Receiver::from_owned_fd_unchecked(OwnedFd::from(inotify)).map_err(&fail)?;
        let path = path.to_owned();
        Ok(Box::pin(async move {
            // Room for at least one event with a maximal name, as inotify(7) requires.
            let mut buf = [0u8; 4096];
            loop {
                events.readable().await.map_err(&fail)?;
                match events.try_read(&mut buf) {
                    Ok(n) => {
                        info!(
                            path = %path.display(),
                            mask = ?first_event_mask(&buf[..n]),
                            "lock file contention"
                        );
                        return Ok(());
                    }
                    // Spurious readiness: wait again.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(fail(e)),
                }
            }
        }))
    }

    fn notify_ready(&self) -> Result<bool, HostError> {
        let Some(socket) = self.notify_socket.as_ref().filter(|s| !s.is_empty()) else {
            return Ok(false);
        };
        let addr = notify_address(socket)?;
        let fail = |source| HostError::Notify {
            socket: socket.to_string_lossy().into_owned(),
            source,
        };
        let sock = UnixDatagram::unbound().map_err(fail)?;
        sock.send_to_addr(b"READY=1", &addr).map_err(fail)?;
        debug!(socket = ?socket, "notified service manager: READY=1");
        Ok(true)
    }

    fn release_code_pages(&self) -> Result<u64, HostError> {
        // Always this process's own procfs entry, never `proc_root`'s (a test fixture's):
        // the ranges released are addresses in this process.
        let me = Path::new("/proc/self");
        let read_error = |path: PathBuf| move |source| HostError::ReadMappings { path, source };
        let exe_link = me.join("exe");
        let executable = std::fs::read_link(&exe_link).map_err(read_error(exe_link))?;
        let smaps_path = me.join("smaps");
        let smaps = std::fs::read_to_string(&smaps_path).map_err(read_error(smaps_path))?;
        let mappings = code_pages::parse_smaps(&smaps);
        let executable = executable.to_string_lossy();
        let mut released = 0;
        for mapping in code_pages::releasable(&mappings, &executable) {
            release(mapping)?;
            released += mapping.rss_kib;
        }
        Ok(released)
    }

    fn create_dir_all(&self, path: &Path) -> Result<(), HostError> {
        std::fs::create_dir_all(path).map_err(|source| HostError::CreateDir {
            path: path.to_owned(),
            source,
        })
    }

    fn make_rshared(&self, path: &Path) -> Result<(), HostError> {
        use nix::mount::{mount, MsFlags};
        let failed = |step: &'static str| {
            move |errno: nix::errno::Errno| HostError::MakeShared {
                path: path.to_owned(),
                step,
                source: errno.into(),
            }
        };
        // Recursive, unlike upstream's plain bind: mounts already below the root (a
        // kubelet swapped in beside running pods) stay visible through the bind.
        mount(
            Some(path),
            path,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(failed("bind-mount onto itself"))?;
        mount(
            None::<&str>,
            path,
            None::<&str>,
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(failed("make-rshared"))
    }

    fn read_to_string(&self, path: &Path) -> Result<String, HostError> {
        std::fs::read_to_string(path).map_err(|source| HostError::ReadFile {
            path: path.to_owned(),
            source,
        })
    }

    fn files_in(&self, dir: &Path) -> Result<Vec<PathBuf>, HostError> {
        let entries = std::fs::read_dir(dir).map_err(|source| HostError::ListDir {
            path: dir.to_owned(),
            source,
        })?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    /// Fails a broken test instead of hanging it; never reached when the code works.
    const TEST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

    fn host_without_socket() -> SystemHost {
        SystemHost::from_env().with_notify_socket(None)
    }

    /// Polls `fut` once, asserting it is still pending; the watch is set up by then.
    async fn poll_once_pending<F: std::future::Future + Unpin>(fut: &mut F) {
        tokio::select! {
            biased;
            _ = fut => panic!("resolved before any contention"),
            () = std::future::ready(()) => {}
        }
    }

    #[test]
    fn hostname_is_the_kernel_hostname() {
        let expected = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let got = host_without_socket().hostname();
        assert_eq!(got.ok().as_deref(), Some(expected.trim()));
    }

    #[test]
    fn effective_uid_matches_procfs() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        // "Uid:\treal\teffective\tsaved\tfs"
        let euid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|u| u.parse::<u32>().ok());
        assert_eq!(Some(host_without_socket().effective_uid()), euid);
    }

    #[test]
    fn oom_score_adj_writes_the_procfs_file() -> Result<(), Box<dyn std::error::Error>> {
        let proc = tempfile::tempdir()?;
        std::fs::create_dir_all(proc.path().join("self"))?;
        std::fs::create_dir_all(proc.path().join("42"))?;
        std::fs::write(proc.path().join("self/oom_score_adj"), "0")?;
        std::fs::write(proc.path().join("42/oom_score_adj"), "0")?;
        let host = host_without_socket().with_proc_root(proc.path());

        host.set_oom_score_adj(None, -999)?;
        host.set_oom_score_adj(Some(42), 1000)?;
        assert_eq!(
            std::fs::read_to_string(proc.path().join("self/oom_score_adj"))?,
            "-999"
        );
        assert_eq!(
            std::fs::read_to_string(proc.path().join("42/oom_score_adj"))?,
            "1000"
        );
        Ok(())
    }

    #[test]
    fn oom_score_adj_errors_name_the_file() -> Result<(), Box<dyn std::error::Error>> {
        let proc = tempfile::tempdir()?;
        let host = host_without_socket().with_proc_root(proc.path());
        assert!(matches!(
            host.set_oom_score_adj(None, -1001),
            Err(HostError::OomScoreOutOfRange { value: -1001 })
        ));
        match host.set_oom_score_adj(Some(7), 0) {
            Err(HostError::OomScoreAdj { path, source, .. }) => {
                assert_eq!(path, proc.path().join("7/oom_score_adj"));
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("expected OomScoreAdj, got {other:?}"),
        }
        Ok(())
    }

    #[test]
    fn oom_score_adj_on_the_real_kernel() -> Result<(), Box<dyn std::error::Error>> {
        let host = host_without_socket();
        let current: i32 = std::fs::read_to_string("/proc/self/oom_score_adj")?
            .trim()
            .parse()?;
        // Rewriting the current value never needs privilege.
        host.set_oom_score_adj(None, current)?;
        // Lowering needs CAP_SYS_RESOURCE: either it works or it is a permission error.
        match host.set_oom_score_adj(None, -999) {
            Ok(()) => host.set_oom_score_adj(None, current)?,
            Err(e) => assert!(e.is_permission_denied(), "unexpected error: {e}"),
        }
        Ok(())
    }

    #[test]
    fn lock_creates_parents_and_is_exclusive() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("run/nested/kubelet.lock");
        let host = host_without_socket();

        let held = host.acquire_lock(&path)?;
        assert_eq!(held.path(), path);
        assert!(path.is_file());
        // A second open file description conflicts, as another process would.
        match host.acquire_lock(&path) {
            Err(HostError::LockContended { path: p }) => assert_eq!(p, path),
            other => panic!("expected LockContended, got {other:?}"),
        }
        drop(held);
        let _again = host.acquire_lock(&path)?;
        Ok(())
    }

    #[test]
    fn lock_in_an_unwritable_place_names_the_directory() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "")?;
        let path = blocker.join("sub/kubelet.lock");
        match host_without_socket().acquire_lock(&path) {
            Err(HostError::CreateDir { path: p, .. }) => assert_eq!(p, blocker.join("sub")),
            other => panic!("expected CreateDir, got {other:?}"),
        }
        Ok(())
    }

    #[tokio::test(flavor = "current_thread")]
    async fn another_open_of_the_lock_file_is_contention() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("kubelet.lock");
        let host = host_without_socket();
        let _held = host.acquire_lock(&path)?;

        let wait = host.watch_lock_contention(&path)?;
        tokio::pin!(wait);
        poll_once_pending(&mut wait).await;
        // What a second kubelet does first.
        let _other = File::open(&path)?;
        tokio::time::timeout(TEST_DEADLINE, wait).await??;
        Ok(())
    }

    #[tokio::test(flavor = "current_thread")]
    async fn deleting_an_unopened_lock_file_ends_the_wait() -> Result<(), Box<dyn std::error::Error>>
    {
        // IN_DELETE_SELF fires once the inode is gone, i.e. after the last fd closes: so not
        // while we hold the lock (as upstream), but when nobody has the file open.
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("kubelet.lock");
        std::fs::write(&path, "")?;
        let host = host_without_socket();

        let wait = host.watch_lock_contention(&path)?;
        tokio::pin!(wait);
        poll_once_pending(&mut wait).await;
        std::fs::remove_file(&path)?;
        tokio::time::timeout(TEST_DEADLINE, wait).await??;
        Ok(())
    }

    #[tokio::test(flavor = "current_thread")]
    async fn watching_a_missing_lock_file_fails_with_its_path() {
        let path = PathBuf::from("/nonexistent/rkubelet/kubelet.lock");
        match host_without_socket().watch_lock_contention(&path).map(drop) {
            Err(HostError::LockWatch { path: p, source }) => {
                assert_eq!(p, path);
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("expected LockWatch, got {other:?}"),
        }
    }

    #[test]
    fn released_code_pages_leave_the_process_running() -> Result<(), Box<dyn std::error::Error>> {
        let host = host_without_socket();
        assert!(
            host.release_code_pages()? > 0,
            "the test binary's pages were resident"
        );
        // Code not run since is mapped back as it runs (other tests' threads run
        // beside this one, so the resident counts are not compared here; the startup,
        // pods and cluster benches print the node's).
        assert_eq!(
            host.hostname()?,
            nix::unistd::gethostname()?.to_string_lossy()
        );
        host.release_code_pages()?;
        Ok(())
    }

    #[test]
    fn notify_ready_without_socket_is_false() {
        assert!(matches!(host_without_socket().notify_ready(), Ok(false)));
        let empty = host_without_socket().with_notify_socket(Some(OsString::new()));
        assert!(matches!(empty.notify_ready(), Ok(false)));
    }

    #[test]
    fn notify_ready_sends_to_a_path_socket() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let sock_path = dir.path().join("notify.sock");
        let receiver = UnixDatagram::bind(&sock_path)?;
        let host = host_without_socket().with_notify_socket(Some(sock_path.into_os_string()));

        assert!(host.notify_ready()?);
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf)?;
        assert_eq!(&buf[..n], b"READY=1");
        Ok(())
    }

    #[test]
    fn notify_ready_sends_to_an_abstract_socket() -> Result<(), Box<dyn std::error::Error>> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
        let name = format!("rkubelet-test-{}-{nanos}", std::process::id());
        let receiver = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name)?)?;
        let host = host_without_socket().with_notify_socket(Some(format!("@{name}").into()));

        assert!(host.notify_ready()?);
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf)?;
        assert_eq!(&buf[..n], b"READY=1");
        Ok(())
    }

    #[test]
    fn notify_ready_errors_name_the_socket() -> Result<(), Box<dyn std::error::Error>> {
        let relative = host_without_socket().with_notify_socket(Some("notify.sock".into()));
        assert!(matches!(
            relative.notify_ready(),
            Err(HostError::NotifySocketInvalid { socket, .. }) if socket == "notify.sock"
        ));
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("absent.sock");
        let host = host_without_socket().with_notify_socket(Some(missing.clone().into_os_string()));
        match host.notify_ready() {
            Err(HostError::Notify { socket, source }) => {
                assert_eq!(socket, missing.to_string_lossy());
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("expected Notify, got {other:?}"),
        }
        Ok(())
    }

    #[test]
    fn files_and_folders_are_read_with_their_path_in_errors(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let host = host_without_socket();
        std::fs::write(dir.path().join("b.conf"), "b")?;
        std::fs::write(dir.path().join("a.conf"), "a")?;
        std::fs::create_dir(dir.path().join("c.conf"))?;
        assert_eq!(
            host.files_in(dir.path())?,
            [dir.path().join("a.conf"), dir.path().join("b.conf")]
        );
        assert_eq!(host.read_to_string(&dir.path().join("a.conf"))?, "a");
        let missing = dir.path().join("missing");
        assert!(matches!(
            host.read_to_string(&missing),
            Err(HostError::ReadFile { path, .. }) if path == missing
        ));
        assert!(matches!(
            host.files_in(&missing),
            Err(HostError::ListDir { path, .. }) if path == missing
        ));
        Ok(())
    }

    /// Mounting needs mount(2): root, as scripts/test.sh runs the tests.
    #[test]
    fn a_folder_made_rshared_propagates_and_keeps_what_was_mounted_below_it(
    ) -> Result<(), Box<dyn std::error::Error>> {
        use nix::mount::{mount, umount2, MntFlags, MsFlags};
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("root");
        let below = root.join("pods/volume");
        std::fs::create_dir_all(&below)?;
        mount(
            Some("tmpfs"),
            &below,
            Some("tmpfs"),
            MsFlags::empty(),
            Some("size=1m"),
        )?;
        std::fs::write(below.join("file"), "kept")?;
        let host = host_without_socket();
        let made = host.make_rshared(&root);
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        let seen = std::fs::read_to_string(below.join("file"));
        // The tmpfs's copy in the bind, the bind, then the tmpfs beneath it.
        let _ = umount2(&below, MntFlags::MNT_DETACH);
        let _ = umount2(&root, MntFlags::MNT_DETACH);
        let _ = umount2(&below, MntFlags::MNT_DETACH);
        made?;
        assert!(
            crate::domain::volumes::propagation::is_shared(&mountinfo, &root),
            "{mountinfo}"
        );
        assert_eq!(seen?, "kept");
        Ok(())
    }

    #[test]
    fn create_dir_all_errors_name_the_path() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let host = host_without_socket();
        host.create_dir_all(&dir.path().join("a/b/c"))?;
        assert!(dir.path().join("a/b/c").is_dir());
        let file = dir.path().join("f");
        std::fs::write(&file, "")?;
        assert!(matches!(
            host.create_dir_all(&file.join("x")),
            Err(HostError::CreateDir { path, .. }) if path == file.join("x")
        ));
        Ok(())
    }
}
