//! Where the kubelet keeps its certificates (`--cert-dir`: the client pair, the issued
//! serving pair, the self-signed one) and writes its kubeconfig; the certificate files
//! it is given (`tlsCertFile`, `tlsPrivateKeyFile`, the client CA bundle) are read here.

use std::path::{Path, PathBuf};

use thiserror::Error;

#[derive(Debug, Error)]
#[error("{action} {}", path.display())]
pub struct CertStoreError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// When a file last changed and its size: a different stamp means the file was replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub modified: std::time::SystemTime,
    pub len: u64,
}

pub trait CertStore: Send + Sync {
    /// The current pair (`kubelet-client-current.pem`: certificate and key, PEM), if any.
    fn current(&self) -> Result<Option<Vec<u8>>, CertStoreError>;

    /// Write a new pair as `file_name` (mode 0600) and point the current link at it;
    /// returns the link's path.
    fn store(&self, file_name: &str, pair_pem: &[u8]) -> Result<PathBuf, CertStoreError>;

    /// The path of the current pair's link (whether or not it exists).
    fn current_path(&self) -> PathBuf;

    /// The key kept while a bootstrap request is pending.
    fn pending_key(&self) -> Result<Option<String>, CertStoreError>;
    fn save_pending_key(&self, pem: &str) -> Result<(), CertStoreError>;
    fn remove_pending_key(&self) -> Result<(), CertStoreError>;

    /// Write `text` to `path` atomically (mode 0600): the kubeconfig after bootstrap.
    fn write_kubeconfig(&self, path: &Path, text: &str) -> Result<(), CertStoreError>;

    /// The file at `path` (PEM certificates or a key), links followed.
    ///
    /// # Errors
    /// [`CertStoreError`] (`read`), not found included.
    fn read_file(&self, path: &Path) -> Result<Vec<u8>, CertStoreError>;

    /// The stamp of the file at `path`; `None` when there is none.
    fn file_stamp(&self, path: &Path) -> Option<FileStamp>;

    /// Writes a self-signed serving pair: the key (mode 0600), then the certificate
    /// (0644), each through a temporary file and a rename, their folder made first.
    ///
    /// # Errors
    /// [`CertStoreError`] (`create`, `write`, `rename`).
    fn write_serving_pair(
        &self,
        cert: &Path,
        cert_pem: &str,
        key: &Path,
        key_pem: &str,
    ) -> Result<(), CertStoreError>;
}
