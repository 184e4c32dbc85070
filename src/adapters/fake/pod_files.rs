//! Pod files in memory: a tree of paths (folders, files with their content, mode and
//! group, links, other kinds), the mounts made, the subpaths bound and the payloads
//! written, for tests and the planner. Never proof that the Linux adapter is safe.
//!
//! As on a disk, a file or folder is made only in a folder that exists (the tree's
//! parents are made by `create_dir_all` or `put_*`), so a sync that writes before it
//! creates the pod's folder fails here as it would on the node.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::domain::securitycontext::{fs_group_mode, volume_root_matches, VolumeSetup};
use crate::domain::volumes::payload::{FilesOwnership, Payload};
use crate::domain::volumes::plan::FileKind;
use crate::domain::volumes::subpath::SubPath;
use crate::ports::pod_files::{PodFiles, PodFilesError};

/// What a path of the tree is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeEntry {
    Directory,
    File(Vec<u8>),
    Symlink(PathBuf),
    /// A socket, a device or anything else a hostPath may name.
    Special(FileKind),
}

#[derive(Debug, Clone)]
struct Node {
    entry: FakeEntry,
    mode: u32,
    gid: u32,
}

#[derive(Default)]
struct State {
    bound: Vec<SubPath>,
    written: BTreeMap<PathBuf, Payload>,
    owned: BTreeMap<PathBuf, FilesOwnership>,
    refuse_sub_paths: bool,
    tree: BTreeMap<PathBuf, Node>,
    /// Mount points and their tmpfs options.
    mounts: BTreeMap<PathBuf, String>,
    /// Mounts that refuse to be unmounted (busy).
    stuck: BTreeSet<PathBuf>,
}

/// Shared between clones, so a test keeps one to look at what a sync did.
#[derive(Clone, Default)]
pub struct FakePodFiles {
    state: Arc<Mutex<State>>,
}

fn io_error(action: &'static str, path: &Path, kind: io::ErrorKind) -> PodFilesError {
    PodFilesError::Io {
        action,
        path: path.to_owned(),
        source: io::Error::from(kind),
    }
}

impl State {
    /// A path's parent is there as a folder (the root and a relative path's empty
    /// parent always are).
    fn parent_exists(&self, path: &Path) -> bool {
        match path.parent() {
            None => true,
            Some(p) if p.as_os_str().is_empty() || p == Path::new("/") => true,
            Some(p) => matches!(
                self.tree.get(p).map(|n| &n.entry),
                Some(FakeEntry::Directory)
            ),
        }
    }

    fn make_dirs(&mut self, path: &Path, mode: Option<u32>) -> Result<(), PodFilesError> {
        let mut made = Vec::new();
        for ancestor in path.ancestors() {
            if ancestor.as_os_str().is_empty() || ancestor == Path::new("/") {
                break;
            }
            match self.tree.get(ancestor).map(|n| &n.entry) {
                Some(FakeEntry::Directory) => break,
                Some(_) => return Err(io_error("create", path, io::ErrorKind::NotADirectory)),
                None => made.push(ancestor.to_owned()),
            }
        }
        for dir in made.into_iter().rev() {
            let own = mode.filter(|_| dir == path).unwrap_or(0o755);
            self.tree.insert(
                dir,
                Node {
                    entry: FakeEntry::Directory,
                    mode: own,
                    gid: 0,
                },
            );
        }
        Ok(())
    }

    fn put(&mut self, path: &Path, entry: FakeEntry, mode: u32) {
        if let Some(parent) = path.parent() {
            // Only test set-up calls this, with a path a folder can hold.
            let _ = self.make_dirs(parent, None);
        }
        self.tree.insert(
            path.to_owned(),
            Node {
                entry,
                mode,
                gid: 0,
            },
        );
    }

    /// What `path` names with links followed (a few hops, as a kernel bounds them).
    fn resolve(&self, path: &Path) -> Option<&Node> {
        let mut current = path.to_owned();
        for _ in 0..8 {
            let node = self.tree.get(&current)?;
            match &node.entry {
                FakeEntry::Symlink(target) => {
                    current = match current.parent() {
                        Some(parent) if target.is_relative() => parent.join(target),
                        _ => target.clone(),
                    };
                }
                _ => return Some(node),
            }
        }
        None
    }

    fn under<'a>(&'a self, dir: &'a Path) -> impl Iterator<Item = &'a PathBuf> + 'a {
        self.tree.keys().filter(move |p| p.starts_with(dir))
    }
}

impl FakePodFiles {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every subpath bound so far, in order.
    pub fn bound(&self) -> Vec<SubPath> {
        self.state().bound.clone()
    }

    /// The payload last written into `dir`.
    pub fn written(&self, dir: &Path) -> Option<Payload> {
        self.state().written.get(dir).cloned()
    }

    /// The ownership the payload last written into `dir` was given.
    pub fn written_ownership(&self, dir: &Path) -> Option<FilesOwnership> {
        self.state().owned.get(dir).cloned()
    }

    /// Every bind fails as a link out of the volume would.
    pub fn refuse_sub_paths(&self) {
        self.state().refuse_sub_paths = true;
    }

    /// Puts a file with `data` (mode `0644`) at `path`, its folders made.
    pub fn put_file(&self, path: impl AsRef<Path>, data: impl Into<Vec<u8>>) {
        self.state()
            .put(path.as_ref(), FakeEntry::File(data.into()), 0o644);
    }

    /// Puts a folder at `path`, its parents made.
    pub fn put_dir(&self, path: impl AsRef<Path>) {
        self.state().put(path.as_ref(), FakeEntry::Directory, 0o755);
    }

    /// Puts a link to `target` at `path`.
    pub fn put_link(&self, path: impl AsRef<Path>, target: impl Into<PathBuf>) {
        self.state()
            .put(path.as_ref(), FakeEntry::Symlink(target.into()), 0o777);
    }

    /// Puts a socket, a device or another special file at `path`.
    pub fn put_special(&self, path: impl AsRef<Path>, kind: FileKind) {
        self.state()
            .put(path.as_ref(), FakeEntry::Special(kind), 0o644);
    }

    /// What is at `path` (links not followed).
    pub fn entry(&self, path: impl AsRef<Path>) -> Option<FakeEntry> {
        self.state()
            .tree
            .get(path.as_ref())
            .map(|n| n.entry.clone())
    }

    /// The content of the file at `path`.
    pub fn file(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        match self.entry(path) {
            Some(FakeEntry::File(data)) => Some(data),
            _ => None,
        }
    }

    /// The permission bits of `path`.
    pub fn mode(&self, path: impl AsRef<Path>) -> Option<u32> {
        self.state().tree.get(path.as_ref()).map(|n| n.mode)
    }

    /// Sets the permission bits of `path` (as a container's `chmod` would).
    pub fn set_mode(&self, path: impl AsRef<Path>, mode: u32) {
        if let Some(node) = self.state().tree.get_mut(path.as_ref()) {
            node.mode = mode;
        }
    }

    /// The group owning `path`.
    pub fn group(&self, path: impl AsRef<Path>) -> Option<u32> {
        self.state().tree.get(path.as_ref()).map(|n| n.gid)
    }

    /// The names in the folder `dir`, sorted.
    pub fn names(&self, dir: impl AsRef<Path>) -> Vec<String> {
        let dir = dir.as_ref();
        self.state()
            .tree
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
            .collect()
    }

    /// The mount points, with their tmpfs options (`mode=777,size=1024`).
    pub fn mounts(&self) -> BTreeMap<PathBuf, String> {
        self.state().mounts.clone()
    }

    /// Something is mounted on `path` (made a folder) that will not unmount: busy.
    pub fn put_stuck_mount(&self, path: impl AsRef<Path>) {
        let path = path.as_ref();
        let mut state = self.state();
        state.put(path, FakeEntry::Directory, 0o755);
        state.mounts.insert(path.to_owned(), String::new());
        state.stuck.insert(path.to_owned());
    }
}

impl PodFiles for FakePodFiles {
    fn bind_sub_path(&self, sub: &SubPath) -> Result<(), PodFilesError> {
        let mut state = self.state();
        if state.refuse_sub_paths {
            return Err(PodFilesError::OutsideVolume {
                path: sub.volume_path.join(&sub.path),
                volume: sub.volume_path.clone(),
            });
        }
        if !state.bound.contains(sub) {
            state.bound.push(sub.clone());
        }
        Ok(())
    }

    fn write_atomically(
        &self,
        dir: &Path,
        payload: &Payload,
        ownership: &FilesOwnership,
        _stamp: &str,
    ) -> Result<bool, PodFilesError> {
        let mut state = self.state();
        let changed = state.written.get(dir) != Some(payload);
        state.written.insert(dir.to_owned(), payload.clone());
        state.owned.insert(dir.to_owned(), ownership.clone());
        Ok(changed)
    }

    fn set_up_empty_dir(&self, setup: &VolumeSetup) -> Result<(), PodFilesError> {
        self.state().make_dirs(&setup.path, Some(setup.mode))?;
        self.give_to_fs_group(setup)
    }

    fn give_to_fs_group(&self, setup: &VolumeSetup) -> Result<(), PodFilesError> {
        let mut state = self.state();
        let Some(gid) = setup.fs_group.and_then(|g| u32::try_from(g).ok()) else {
            return Ok(());
        };
        if setup.on_root_mismatch {
            if let Some(root) = state.tree.get(&setup.path) {
                let is_dir = root.entry == FakeEntry::Directory;
                if volume_root_matches(setup, root.gid, root.mode, is_dir) {
                    return Ok(());
                }
            }
        }
        let paths: Vec<PathBuf> = state.under(&setup.path).cloned().collect();
        for path in paths {
            if let Some(node) = state.tree.get_mut(&path) {
                // The links themselves, never their targets, as the Linux adapter walks.
                node.gid = gid;
                let is_dir = node.entry == FakeEntry::Directory;
                let is_link = matches!(node.entry, FakeEntry::Symlink(_));
                if let Some(mode) = fs_group_mode(node.mode, is_dir, is_link, setup.readonly) {
                    node.mode = mode;
                }
            }
        }
        Ok(())
    }

    fn mount_tmpfs(
        &self,
        dir: &Path,
        size_bytes: Option<i64>,
        mode: u32,
    ) -> Result<(), PodFilesError> {
        let mut state = self.state();
        state.make_dirs(dir, None)?;
        if state.mounts.contains_key(dir) {
            return Ok(());
        }
        let mut options = format!("mode={mode:o}");
        if let Some(size) = size_bytes.filter(|s| *s > 0) {
            options.push_str(&format!(",size={size}"));
        }
        state.mounts.insert(dir.to_owned(), options);
        Ok(())
    }

    fn remove_pod_dir(&self, dir: &Path) -> Result<(), Vec<PodFilesError>> {
        let mut state = self.state();
        let points: Vec<PathBuf> = state
            .mounts
            .keys()
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect();
        let mut errors = Vec::new();
        for point in points {
            if state.stuck.contains(&point) {
                errors.push(io_error("unmount", &point, io::ErrorKind::ResourceBusy));
            } else {
                state.mounts.remove(&point);
            }
        }
        let left: Vec<PathBuf> = state
            .mounts
            .keys()
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect();
        if !left.is_empty() {
            errors.extend(
                left.into_iter()
                    .map(|path| PodFilesError::StillMounted { path }),
            );
            return Err(errors);
        }
        state.tree.retain(|p, _| !p.starts_with(dir));
        Ok(())
    }

    fn file_kind(&self, path: &Path) -> Option<FileKind> {
        Some(match &self.state().resolve(path)?.entry {
            FakeEntry::Directory => FileKind::Directory,
            FakeEntry::File(_) => FileKind::File,
            FakeEntry::Special(kind) => *kind,
            FakeEntry::Symlink(_) => return None,
        })
    }

    fn create_dir_all(&self, path: &Path, mode: Option<u32>) -> Result<(), PodFilesError> {
        self.state().make_dirs(path, mode)
    }

    fn create_file(&self, path: &Path, mode: u32) -> Result<(), PodFilesError> {
        let mut state = self.state();
        if !state.parent_exists(path) {
            return Err(io_error("create", path, io::ErrorKind::NotFound));
        }
        match state.tree.get_mut(path) {
            Some(Node {
                entry: FakeEntry::File(_),
                mode: m,
                ..
            }) => *m = mode,
            // O_NOFOLLOW: a link is refused, as is a folder.
            Some(_) => return Err(io_error("create", path, io::ErrorKind::InvalidInput)),
            None => {
                state.tree.insert(
                    path.to_owned(),
                    Node {
                        entry: FakeEntry::File(Vec::new()),
                        mode,
                        gid: 0,
                    },
                );
            }
        }
        Ok(())
    }

    fn write_file(&self, path: &Path, data: &[u8]) -> Result<(), PodFilesError> {
        let mut state = self.state();
        if !state.parent_exists(path) {
            return Err(io_error("write", path, io::ErrorKind::NotFound));
        }
        match state.tree.get_mut(path) {
            Some(Node {
                entry: FakeEntry::File(content),
                ..
            }) => *content = data.to_vec(),
            Some(_) => return Err(io_error("write", path, io::ErrorKind::InvalidInput)),
            None => {
                state.tree.insert(
                    path.to_owned(),
                    Node {
                        entry: FakeEntry::File(data.to_vec()),
                        mode: 0o644,
                        gid: 0,
                    },
                );
            }
        }
        Ok(())
    }

    fn read_at_most(&self, path: &Path, limit: u64) -> Result<Option<Vec<u8>>, PodFilesError> {
        let state = self.state();
        match state.resolve(path).map(|n| &n.entry) {
            None => Ok(None),
            Some(FakeEntry::File(data)) => {
                let end = usize::try_from(limit).unwrap_or(usize::MAX).min(data.len());
                Ok(Some(data[..end].to_vec()))
            }
            Some(_) => Err(io_error("read", path, io::ErrorKind::IsADirectory)),
        }
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>, PodFilesError> {
        let is_dir = matches!(
            self.state().resolve(dir).map(|n| &n.entry),
            None | Some(FakeEntry::Directory)
        );
        if !is_dir {
            return Err(io_error("read", dir, io::ErrorKind::NotADirectory));
        }
        Ok(self.names(dir))
    }

    fn remove_file(&self, path: &Path) -> Result<(), PodFilesError> {
        let mut state = self.state();
        if matches!(
            state.tree.get(path).map(|n| &n.entry),
            Some(FakeEntry::Directory)
        ) {
            return Err(io_error("remove", path, io::ErrorKind::IsADirectory));
        }
        state.tree.remove(path);
        Ok(())
    }

    fn symlink(&self, target: &Path, link: &Path) -> Result<(), PodFilesError> {
        let mut state = self.state();
        if !state.parent_exists(link) {
            return Err(io_error("link", link, io::ErrorKind::NotFound));
        }
        if let Some(node) = state.tree.get(link) {
            if !matches!(node.entry, FakeEntry::Symlink(_)) {
                return Err(io_error("link", link, io::ErrorKind::AlreadyExists));
            }
        }
        state.tree.insert(
            link.to_owned(),
            Node {
                entry: FakeEntry::Symlink(target.to_owned()),
                mode: 0o777,
                gid: 0,
            },
        );
        Ok(())
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), PodFilesError> {
        let mut state = self.state();
        if let Some(point) = state.mounts.keys().find(|p| p.starts_with(dir)) {
            // As the kernel refuses to remove a mount point.
            return Err(io_error("remove", point, io::ErrorKind::ResourceBusy));
        }
        state.tree.retain(|p, _| !p.starts_with(dir));
        Ok(())
    }

    fn map_block_device(&self, device: &Path, map: &Path) -> Result<(), PodFilesError> {
        let mut state = self.state();
        if let Some(parent) = map.parent() {
            state.make_dirs(parent, Some(0o750))?;
        }
        if !state.tree.contains_key(map) {
            state.tree.insert(
                map.to_owned(),
                Node {
                    entry: FakeEntry::File(Vec::new()),
                    mode: 0o750,
                    gid: 0,
                },
            );
        }
        state
            .mounts
            .insert(map.to_owned(), format!("bind={},loop", device.display()));
        Ok(())
    }

    fn unmap_block_device(&self, map: &Path) -> Result<(), PodFilesError> {
        let mut state = self.state();
        if state.stuck.contains(map) {
            return Err(io_error("unmount", map, io::ErrorKind::ResourceBusy));
        }
        state.mounts.remove(map);
        state.tree.remove(map);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_need_their_folder_and_folders_get_their_mode() {
        let files = FakePodFiles::default();
        let hosts = Path::new("/root/pods/u1/etc-hosts");
        assert!(files.write_file(hosts, b"x").is_err(), "no pod folder yet");
        files
            .create_dir_all(Path::new("/root/pods/u1"), Some(0o750))
            .unwrap_or_else(|e| panic!("mkdir: {e}"));
        assert_eq!(files.mode("/root/pods/u1"), Some(0o750));
        assert_eq!(files.mode("/root/pods"), Some(0o755));
        files
            .write_file(hosts, b"127.0.0.1 localhost\n")
            .unwrap_or_else(|e| panic!("write: {e}"));
        assert_eq!(
            files.read_at_most(hosts, 9).ok().flatten().as_deref(),
            Some(&b"127.0.0.1"[..])
        );
        assert_eq!(files.names("/root/pods/u1"), ["etc-hosts"]);
    }

    #[test]
    fn the_fs_group_walk_changes_links_not_their_targets() {
        let files = FakePodFiles::default();
        files.put_file("/host/secret", "s");
        files.set_mode("/host/secret", 0o600);
        let volume = PathBuf::from("/pods/u1/volumes/kubernetes.io~empty-dir/v");
        files.put_file(volume.join("own"), "x");
        files.set_mode(volume.join("own"), 0o600);
        files.put_link(volume.join("out"), "/host/secret");
        let setup = VolumeSetup {
            path: volume.clone(),
            mode: 0o777,
            fs_group: Some(2000),
            on_root_mismatch: false,
            readonly: false,
        };
        files
            .set_up_empty_dir(&setup)
            .unwrap_or_else(|e| panic!("walk: {e}"));
        assert_eq!(files.mode(volume.join("own")), Some(0o660));
        assert_eq!(files.group(volume.join("out")), Some(2000));
        assert_eq!(files.mode("/host/secret"), Some(0o600));
        assert_eq!(files.group("/host/secret"), Some(0));
    }

    #[test]
    fn a_stuck_mount_keeps_its_pod_folder() {
        let files = FakePodFiles::default();
        let pod = Path::new("/pods/u1");
        files
            .mount_tmpfs(&pod.join("volumes/mem"), Some(1024), 0o777)
            .unwrap_or_else(|e| panic!("mount: {e}"));
        assert_eq!(
            files
                .mounts()
                .get(&pod.join("volumes/mem"))
                .map(String::as_str),
            Some("mode=777,size=1024")
        );
        files.put_stuck_mount(pod.join("volume-subpaths/v/app/0"));
        let errors = files.remove_pod_dir(pod).err().unwrap_or_default();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(files.entry(pod).is_some());
        assert!(!files.mounts().contains_key(&pod.join("volumes/mem")));
    }
}
