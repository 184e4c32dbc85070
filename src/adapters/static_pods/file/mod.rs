//! The static pod file source (`--pod-manifest-path`): a manifest file or a
//! folder of `.yaml`, `.yml` and `.json` manifests, turned into the set of
//! static pods they define.
//!
//! Like upstream's file source it sends the whole set each time
//! ([`PodSetUpdate`]): once at start, then whenever the set changes. Changes
//! are noticed promptly through inotify on the folder (or, for a single
//! file or a missing path, on its parent folder), and every check frequency
//! (20 s by default) as a fallback for file systems inotify misses. A bad
//! manifest is logged with its file name and skipped; the others still come
//! through. A missing path is not fatal: it yields an empty set and is
//! checked again later.

use crate::ports::error::Chain;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::net::unix::pipe;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{changed_update, Snapshot};
use crate::domain::pod::static_pod::{
    decode_static_pods, is_manifest_file_name, ManifestError, PodSourceKind, MAX_MANIFEST_BYTES,
};
use crate::domain::pod::Pod;
use crate::domain::units::time::rfc3339_nanos;
use crate::domain::upstream::static_pod_uid::join_clean;
use crate::ports::clock::Clock;
use crate::ports::pod_source::{PodSetUpdate, PodSource, PodSourceError};

/// Upstream's default `--file-check-frequency`.
pub const DEFAULT_CHECK_FREQUENCY: Duration = Duration::from_secs(20);

/// Why the manifest path could not be read or watched. These are logged,
/// never fatal: the source tries again at the next check.
#[derive(Debug, thiserror::Error)]
pub enum FileSourceError {
    #[error("cannot list manifest folder {path}")]
    List {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read manifest {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot watch {path} for manifest changes")]
    Watch {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The file source; see the module documentation.
pub struct FileSource {
    path: PathBuf,
    node_name: String,
    check_frequency: Duration,
    clock: Arc<dyn Clock>,
    watcher: Option<Watcher>,
    last: Option<Snapshot>,
    decoded: Decoded,
    next_check: Instant,
}

impl FileSource {
    /// A source for `path` (a manifest file or folder) on node `node_name`,
    /// looking again every `check_frequency` besides on inotify events.
    /// `clock` stamps the pods' first-seen annotation.
    pub fn new(
        path: impl Into<PathBuf>,
        node_name: impl Into<String>,
        check_frequency: Duration,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            path: path.into(),
            node_name: node_name.into(),
            check_frequency,
            clock,
            watcher: None,
            last: None,
            decoded: Decoded::default(),
            next_check: Instant::now(),
        }
    }

    /// Waits for an inotify event or the next periodic check.
    async fn wait_for_change(&mut self) {
        let deadline = self.next_check;
        let watched = async {
            match self.watcher.as_mut() {
                Some(watcher) => watcher.wait().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {
                debug!(path = %self.path.display(), "periodic manifest check");
            }
            outcome = watched => match outcome {
                Ok(WatchOutcome::Changed) => {
                    debug!(path = %self.path.display(), "manifest change event");
                }
                Ok(WatchOutcome::Lost) => {
                    debug!(path = %self.path.display(), "watched folder went away; watching again");
                    self.watcher = None;
                }
                Err(source) => {
                    let error = FileSourceError::Watch { path: self.path.clone(), source };
                    warn!(error = %Chain(&error), "manifest watch failed; relying on periodic checks");
                    self.watcher = None;
                }
            },
        }
    }

    /// The folder to watch: the path when it is a folder, else its parent
    /// (a single file is often replaced by a rename; a missing folder may appear).
    fn watch_target(&self) -> Option<PathBuf> {
        if self.path.is_dir() {
            return Some(self.path.clone());
        }
        match self.path.parent() {
            Some(parent) if parent.as_os_str().is_empty() => Some(PathBuf::from(".")),
            Some(parent) => Some(parent.to_path_buf()),
            None => None,
        }
    }

    /// Starts watching the folder whose changes can change the set.
    fn start_watch(&self) -> Option<Watcher> {
        let target = self.watch_target()?;
        if !target.is_dir() {
            return None;
        }
        match Watcher::new(&target) {
            Ok(watcher) => {
                debug!(path = %target.display(), "watching for manifest changes");
                Some(watcher)
            }
            Err(source) => {
                let error = FileSourceError::Watch {
                    path: target,
                    source,
                };
                warn!(error = %Chain(&error), "relying on periodic manifest checks");
                None
            }
        }
    }

    /// Reads every manifest under the path and decodes those that changed.
    async fn scan(&mut self) -> Snapshot {
        let seen = rfc3339_nanos(self.clock.now_unix_nanos());
        let (pods, errors) =
            read_manifests(&self.path, &self.node_name, &seen, &mut self.decoded).await;
        Snapshot { pods, errors }
    }
}

/// One look at the manifest path, without watching: the pods of every manifest file
/// (a file, or the manifests of a folder in name order) and the manifests that did not
/// decode. `seen_rfc3339` stamps the first-seen annotation. An absent or unreadable path
/// gives no pods, as the watching source does. Shared by the source and the dry-run
/// planner, which reads the path once.
pub async fn read_manifests_once(
    path: &Path,
    node_name: &str,
    seen_rfc3339: &str,
) -> (Vec<Pod>, Vec<ManifestError>) {
    read_manifests(path, node_name, seen_rfc3339, &mut Decoded::default()).await
}

/// What each manifest file decoded to, by file, with a digest of the bytes it was
/// decoded from: a check that finds the same bytes reuses the result instead of decoding
/// again (most of what a periodic check of unchanged manifests cost).
#[derive(Default)]
pub struct Decoded {
    /// Random keys: a manifest cannot be written to collide with another's digest.
    keys: std::hash::RandomState,
    by_file: std::collections::HashMap<PathBuf, (u64, Result<Vec<Pod>, ManifestError>)>,
}

/// Like [`read_manifests_once`], decoding only the manifests whose bytes `decoded` has
/// not seen; `decoded` then holds the files read this time.
async fn read_manifests(
    path: &Path,
    node_name: &str,
    seen_rfc3339: &str,
    decoded: &mut Decoded,
) -> (Vec<Pod>, Vec<ManifestError>) {
    use std::hash::BuildHasher;
    let mut pods = Vec::new();
    let mut errors = Vec::new();
    let mut kept = std::collections::HashMap::new();
    for (file, read) in read_manifest_files(path).await {
        let origin = manifest_origin(path, &file);
        let result = match read {
            Ok(Manifest::Bytes(bytes)) => {
                let digest = decoded.keys.hash_one(&bytes);
                match decoded.by_file.remove(&file) {
                    Some((seen_digest, result)) if seen_digest == digest => {
                        kept.insert(file, (digest, result.clone()));
                        result
                    }
                    _ => {
                        // Decoding is CPU work (a 10 MiB manifest or 100,000 env entries
                        // take a second): off the async thread, which keeps serving and
                        // syncing pods.
                        let (origin, node, seen) = (
                            origin.clone(),
                            node_name.to_owned(),
                            seen_rfc3339.to_owned(),
                        );
                        let decoding = decode_off_thread(move || {
                            decode_static_pods(&origin, &bytes, &node, PodSourceKind::File, &seen)
                        });
                        match decoding.await {
                            Ok(result) => {
                                kept.insert(file, (digest, result.clone()));
                                result
                            }
                            Err(error) => {
                                warn!(file = %file.display(), %error, "decoding a manifest stopped; skipping it");
                                continue;
                            }
                        }
                    }
                }
            }
            Ok(Manifest::TooLarge(size)) => Err(ManifestError::TooLarge {
                origin,
                size,
                limit: MAX_MANIFEST_BYTES,
            }),
            Err(error) => {
                warn!(error = %Chain(&error), "skipping manifest");
                continue;
            }
        };
        match result {
            Ok(found) => pods.extend(found),
            Err(error) => errors.push(error),
        }
    }
    decoded.by_file = kept;
    (pods, errors)
}

/// A decoding job for the decoder thread.
type DecodeJob = Box<dyn FnOnce() + Send>;

/// Runs `decode` on the one manifest decoder thread, started on first use (or, when that
/// thread cannot be had, on tokio's blocking pool). One thread because glibc gives each
/// allocating thread an arena of its own: on whichever blocking thread was free, the
/// memory a large manifest's decoding freed stayed resident in several arenas at once
/// (the manifests at the limits, read again and again: 741 to 1,212 MiB peak in a debug
/// build, 488 MiB with one arena).
async fn decode_off_thread<T: Send + 'static>(
    decode: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    static DECODER: std::sync::OnceLock<Option<std::sync::mpsc::Sender<DecodeJob>>> =
        std::sync::OnceLock::new();
    let decoder = DECODER.get_or_init(|| {
        let (jobs, queue) = std::sync::mpsc::channel::<DecodeJob>();
        std::thread::Builder::new()
            .name("manifest-decoder".into())
            .spawn(move || {
                for job in queue {
                    // A panicking decode fails its manifest alone (its result channel is
                    // dropped), not the thread every later manifest needs.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            })
            .map_err(
                |error| warn!(%error, "no manifest decoder thread; decoding on the blocking pool"),
            )
            .ok()
            .map(|_| jobs)
    });
    let (done, result) = tokio::sync::oneshot::channel();
    let job: DecodeJob = Box::new(move || {
        let _ = done.send(decode());
    });
    match decoder {
        Some(jobs) => {
            jobs.send(job)
                .map_err(|e| format!("the decoder thread is gone: {e}"))?;
        }
        None => {
            tokio::task::spawn_blocking(job);
        }
    }
    result
        .await
        .map_err(|_| "the decoding stopped before its result".to_owned())
}

/// The name upstream gives a manifest, which goes into its pods' UIDs: the
/// path as given for a manifest file, `filepath.Join(folder, name)` (that
/// is, cleaned) for a file of a manifest folder.
fn manifest_origin(path: &Path, file: &Path) -> String {
    if file == path {
        return file.display().to_string();
    }
    match file.file_name().and_then(|name| name.to_str()) {
        Some(name) => join_clean(&path.display().to_string(), name),
        None => file.display().to_string(),
    }
}

/// Every manifest file under `path` and what reading it gave, in one pass on the
/// blocking pool: a hundred manifests checked every second are one hop off the async
/// thread, not four per file.
async fn read_manifest_files(path: &Path) -> Vec<(PathBuf, Result<Manifest, FileSourceError>)> {
    let path = path.to_path_buf();
    let reading = tokio::task::spawn_blocking(move || {
        manifest_files(&path)
            .into_iter()
            .map(|file| {
                let read = read_manifest(&file);
                (file, read)
            })
            .collect()
    });
    match reading.await {
        Ok(files) => files,
        Err(error) => {
            warn!(%error, "reading the manifests stopped");
            Vec::new()
        }
    }
}

fn manifest_files(path: &Path) -> Vec<PathBuf> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            debug!(path = %path.display(), "manifest path does not exist; ignoring");
            return Vec::new();
        }
        Err(source) => {
            let error = FileSourceError::Read {
                path: path.to_path_buf(),
                source,
            };
            warn!(error = %Chain(&error), "cannot read manifest path");
            return Vec::new();
        }
    };
    if !metadata.is_dir() {
        return vec![path.to_path_buf()];
    }
    match list_manifests(path) {
        Ok(files) => files,
        Err(source) => {
            let error = FileSourceError::List {
                path: path.to_path_buf(),
                source,
            };
            warn!(error = %Chain(&error), "cannot list manifests");
            Vec::new()
        }
    }
}

#[async_trait]
impl PodSource for FileSource {
    /// One read of the path now (the dry-run planner's); an absent path is no pods.
    async fn read_once(&self) -> Result<PodSetUpdate, PodSourceError> {
        let seen = rfc3339_nanos(self.clock.now_unix_nanos());
        let (pods, errors) = read_manifests_once(&self.path, &self.node_name, &seen).await;
        Ok(PodSetUpdate {
            source: PodSourceKind::File.as_str().to_string(),
            pods,
            errors,
        })
    }

    async fn next(&mut self) -> Option<PodSetUpdate> {
        loop {
            if self.last.is_some() {
                self.wait_for_change().await;
            }
            // Watch before reading, so a change made while reading is not missed.
            // A missing folder that appeared must be watched itself from now on.
            let target = self.watch_target();
            if self.watcher.as_ref().map(|w| &w.target) != target.as_ref() {
                self.watcher = self.start_watch();
            }
            let snapshot = self.scan().await;
            self.next_check = Instant::now() + self.check_frequency;
            let path = &self.path;
            let update = changed_update(
                &mut self.last,
                snapshot,
                PodSourceKind::File,
                "skipping bad static pod manifest",
                |snapshot| {
                    info!(
                        path = %path.display(),
                        pods = snapshot.pods.len(),
                        errors = snapshot.errors.len(),
                        "static pod manifests changed"
                    )
                },
            );
            if update.is_some() {
                return update;
            }
        }
    }
}

/// The visible `.yaml`, `.yml` and `.json` regular files of `dir`, sorted.
fn list_manifests(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            debug!(file = ?name, "ignoring manifest with a non-UTF-8 name");
            continue;
        };
        if !is_manifest_file_name(name) {
            debug!(file = name, "ignoring file that is not a manifest");
            continue;
        }
        let path = entry.path();
        // Follows symlinks, as upstream does; folders are skipped.
        match std::fs::metadata(&path) {
            Ok(metadata) if metadata.is_file() => files.push(path),
            Ok(_) => debug!(file = name, "ignoring entry that is not a file"),
            Err(e) => debug!(file = name, error = %Chain(&e), "ignoring entry gone while listing"),
        }
    }
    files.sort();
    Ok(files)
}

enum Manifest {
    Bytes(Vec<u8>),
    TooLarge(usize),
}

/// Reads one manifest, refusing one over the size limit without reading it all.
fn read_manifest(path: &Path) -> Result<Manifest, FileSourceError> {
    use std::io::Read;
    let fail = |source: io::Error| FileSourceError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(fail)?;
    let size = file.metadata().map_err(fail)?.len();
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    if size > MAX_MANIFEST_BYTES {
        return Ok(Manifest::TooLarge(size));
    }
    // The file may grow after the size check: never read past the limit.
    let limit = u64::try_from(MAX_MANIFEST_BYTES).unwrap_or(u64::MAX);
    let mut bytes = Vec::with_capacity(size);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Ok(Manifest::TooLarge(bytes.len()));
    }
    Ok(Manifest::Bytes(bytes))
}

enum WatchOutcome {
    /// Something in the folder changed.
    Changed,
    /// The watched folder was removed or moved; the watch is gone.
    Lost,
}

/// An inotify watch on one folder.
struct Watcher {
    target: PathBuf,
    events: pipe::Receiver,
    buf: Vec<u8>,
}

impl Watcher {
    fn new(dir: &Path) -> io::Result<Self> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        inotify.add_watch(
            dir,
            AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_MODIFY
                | AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_ATTRIB
                | AddWatchFlags::IN_DELETE
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_DELETE_SELF
                | AddWatchFlags::IN_MOVE_SELF,
        )?;
        // tokio's pipe receiver is its one safe wrapper that polls an arbitrary
        // readable fd (AsyncFd registration is unsafe); the fd is non-blocking.
        let fd = inotify.as_fd().try_clone_to_owned()?;
        drop(inotify);
        let events = pipe::Receiver::from_owned_fd_unchecked(fd)?;
        // Room for many events with maximal names, as inotify(7) requires at least one.
        Ok(Self {
            target: dir.to_path_buf(),
            events,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Waits for events and drains all that are queued, so a burst of events
    /// from one write costs one look at the folder.
    async fn wait(&mut self) -> io::Result<WatchOutcome> {
        let mut outcome = None;
        loop {
            self.events.readable().await?;
            loop {
                match self.events.try_read(&mut self.buf) {
                    Ok(0) => return Ok(WatchOutcome::Lost),
                    Ok(n) => {
                        let lost = event_masks(&self.buf[..n]).any(|mask| {
                            mask.intersects(
                                AddWatchFlags::IN_IGNORED
                                    | AddWatchFlags::IN_DELETE_SELF
                                    | AddWatchFlags::IN_MOVE_SELF,
                            )
                        });
                        outcome = match (outcome, lost) {
                            (Some(WatchOutcome::Lost), _) | (_, true) => Some(WatchOutcome::Lost),
                            _ => Some(WatchOutcome::Changed),
                        };
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
            if let Some(outcome) = outcome.take() {
                return Ok(outcome);
            }
        }
    }
}

/// The masks of the `struct inotify_event`s in `buf` (wd, mask, cookie, len, name).
fn event_masks(buf: &[u8]) -> impl Iterator<Item = AddWatchFlags> + '_ {
    let mut offset = 0usize;
    std::iter::from_fn(move || {
        let header = buf.get(offset..offset.checked_add(16)?)?;
        let mask = u32::from_ne_bytes(header.get(4..8)?.try_into().ok()?);
        let len = u32::from_ne_bytes(header.get(12..16)?.try_into().ok()?);
        offset = offset
            .checked_add(16)?
            .checked_add(usize::try_from(len).ok()?)?;
        Some(AddWatchFlags::from_bits_truncate(mask))
    })
}

#[cfg(test)]
mod tests;
