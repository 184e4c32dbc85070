//! Where the kubelet keeps its client certificate (`--cert-dir`) and writes its kubeconfig.

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
}
