//! `--cert-dir` on disk, as upstream's certificate `FileStore`: each pair in
//! `kubelet-client-<time>.pem` (certificate then key, mode 0600), the `-current.pem`
//! symlink switched atomically.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::domain::node_status::certificate::{
    prefixed_current_pair_name, CLIENT_PAIR_PREFIX, PENDING_KEY_FILE,
};
use crate::ports::cert_store::{CertStore, CertStoreError, FileStamp};

#[derive(Debug, Clone)]
pub struct FileCertStore {
    dir: PathBuf,
    /// `kubelet-client` or `kubelet-server`.
    prefix: &'static str,
}

impl FileCertStore {
    /// The client certificate's store.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self::with_prefix(dir, CLIENT_PAIR_PREFIX)
    }

    /// The store of the pairs named `<prefix>-...pem` (the serving certificate's).
    pub fn with_prefix(dir: impl Into<PathBuf>, prefix: &'static str) -> Self {
        FileCertStore {
            dir: dir.into(),
            prefix,
        }
    }
}

fn error(action: &'static str, path: &Path, source: std::io::Error) -> CertStoreError {
    CertStoreError {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Write `data` to `path` through a temporary file and a rename, mode 0600.
fn write_private(path: &Path, data: &[u8]) -> Result<(), CertStoreError> {
    write_with_mode(path, data, 0o600)
}

/// Write `data` to `path` through a temporary file and a rename, with `mode`.
fn write_with_mode(path: &Path, data: &[u8], mode: u32) -> Result<(), CertStoreError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| error("create", parent, e))?;
    }
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| error("create", &tmp, e))?;
    let written = file
        .write_all(data)
        .and_then(|()| file.sync_all())
        .map_err(|e| error("write", &tmp, e))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| error("rename", path, e)));
    if written.is_err() {
        // A half-written file on a full disk would hold on to the space it took (found by
        // the full-disk fault test); the file it was to replace is untouched.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, CertStoreError> {
    match std::fs::read(path) {
        Ok(data) => Ok(Some(data)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(error("read", path, e)),
    }
}

impl CertStore for FileCertStore {
    fn current(&self) -> Result<Option<Vec<u8>>, CertStoreError> {
        read_optional(&self.current_path())
    }

    fn store(&self, file_name: &str, pair_pem: &[u8]) -> Result<PathBuf, CertStoreError> {
        let pair = self.dir.join(file_name);
        write_private(&pair, pair_pem)?;
        let link = self.current_path();
        let tmp = self
            .dir
            .join(format!(".{}.tmp", prefixed_current_pair_name(self.prefix)));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(file_name, &tmp).map_err(|e| error("link", &tmp, e))?;
        std::fs::rename(&tmp, &link).map_err(|e| error("rename", &link, e))?;
        Ok(link)
    }

    fn current_path(&self) -> PathBuf {
        self.dir.join(prefixed_current_pair_name(self.prefix))
    }

    fn pending_key(&self) -> Result<Option<String>, CertStoreError> {
        Ok(read_optional(&self.dir.join(PENDING_KEY_FILE))?
            .map(|k| String::from_utf8_lossy(&k).into_owned()))
    }

    fn save_pending_key(&self, pem: &str) -> Result<(), CertStoreError> {
        write_private(&self.dir.join(PENDING_KEY_FILE), pem.as_bytes())
    }

    fn remove_pending_key(&self) -> Result<(), CertStoreError> {
        let path = self.dir.join(PENDING_KEY_FILE);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(error("remove", &path, e)),
        }
    }

    fn write_kubeconfig(&self, path: &Path, text: &str) -> Result<(), CertStoreError> {
        write_private(path, text.as_bytes())
    }

    fn read_file(&self, path: &Path) -> Result<Vec<u8>, CertStoreError> {
        std::fs::read(path).map_err(|e| error("read", path, e))
    }

    fn file_stamp(&self, path: &Path) -> Option<FileStamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            modified: meta.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH),
            len: meta.len(),
        })
    }

    fn write_serving_pair(
        &self,
        cert: &Path,
        cert_pem: &str,
        key: &Path,
        key_pem: &str,
    ) -> Result<(), CertStoreError> {
        write_with_mode(key, key_pem.as_bytes(), 0o600)?;
        write_with_mode(cert, cert_pem.as_bytes(), 0o644)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn pairs_are_private_and_the_link_follows_the_newest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FileCertStore::new(dir.path().join("pki"));
        assert_eq!(store.current().expect("read"), None);
        let link = store.store("kubelet-client-1.pem", b"one").expect("stored");
        assert_eq!(store.current().expect("read").as_deref(), Some(&b"one"[..]));
        store.store("kubelet-client-2.pem", b"two").expect("stored");
        assert_eq!(store.current().expect("read").as_deref(), Some(&b"two"[..]));
        assert_eq!(
            std::fs::read_link(&link).expect("link"),
            PathBuf::from("kubelet-client-2.pem")
        );
        let mode = std::fs::metadata(dir.path().join("pki/kubelet-client-2.pem"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        store.save_pending_key("KEY").expect("saved");
        assert_eq!(store.pending_key().expect("read").as_deref(), Some("KEY"));
        store.remove_pending_key().expect("removed");
        store.remove_pending_key().expect("idempotent");
        assert_eq!(store.pending_key().expect("read"), None);
    }

    #[test]
    fn a_serving_pair_is_written_with_its_modes_and_stamped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FileCertStore::new(dir.path());
        let (cert, key) = (
            dir.path().join("pki/kubelet.crt"),
            dir.path().join("pki/kubelet.key"),
        );
        assert_eq!(store.file_stamp(&cert), None);
        store
            .write_serving_pair(&cert, "CERT", &key, "KEY")
            .expect("written");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!((mode(&cert), mode(&key)), (0o644, 0o600));
        assert_eq!(store.read_file(&key).expect("read"), b"KEY");
        assert_eq!(store.file_stamp(&cert).map(|s| s.len), Some(4));
        let missing = dir.path().join("nope");
        assert!(matches!(store.read_file(&missing), Err(e) if e.path == missing));
    }
}
