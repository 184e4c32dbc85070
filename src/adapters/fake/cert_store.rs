//! An in-memory `--cert-dir` and kubeconfig file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::ports::cert_store::{CertStore, CertStoreError, FileStamp};

#[derive(Debug, Default)]
struct State {
    pairs: BTreeMap<String, Vec<u8>>,
    current: Option<String>,
    pending_key: Option<String>,
    files: BTreeMap<PathBuf, String>,
}

#[derive(Debug, Clone, Default)]
pub struct FakeCertStore {
    state: Arc<Mutex<State>>,
}

impl FakeCertStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn pair_names(&self) -> Vec<String> {
        self.lock().pairs.keys().cloned().collect()
    }

    pub fn file(&self, path: &Path) -> Option<String> {
        self.lock().files.get(path).cloned()
    }
}

impl CertStore for FakeCertStore {
    fn current(&self) -> Result<Option<Vec<u8>>, CertStoreError> {
        let s = self.lock();
        Ok(s.current.as_ref().and_then(|c| s.pairs.get(c)).cloned())
    }

    fn store(&self, file_name: &str, pair_pem: &[u8]) -> Result<PathBuf, CertStoreError> {
        let mut s = self.lock();
        s.pairs.insert(file_name.into(), pair_pem.to_vec());
        s.current = Some(file_name.into());
        Ok(self.current_path())
    }

    fn current_path(&self) -> PathBuf {
        PathBuf::from("/fake/pki/kubelet-client-current.pem")
    }

    fn pending_key(&self) -> Result<Option<String>, CertStoreError> {
        Ok(self.lock().pending_key.clone())
    }

    fn save_pending_key(&self, pem: &str) -> Result<(), CertStoreError> {
        self.lock().pending_key = Some(pem.into());
        Ok(())
    }

    fn remove_pending_key(&self) -> Result<(), CertStoreError> {
        self.lock().pending_key = None;
        Ok(())
    }

    fn write_kubeconfig(&self, path: &Path, text: &str) -> Result<(), CertStoreError> {
        self.lock().files.insert(path.to_path_buf(), text.into());
        Ok(())
    }

    fn read_file(&self, path: &Path) -> Result<Vec<u8>, CertStoreError> {
        self.file(path)
            .map(String::into_bytes)
            .ok_or_else(|| CertStoreError {
                action: "read",
                path: path.to_path_buf(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })
    }

    fn file_stamp(&self, path: &Path) -> Option<FileStamp> {
        let len = self.file(path)?.len() as u64;
        Some(FileStamp {
            modified: std::time::SystemTime::UNIX_EPOCH,
            len,
        })
    }

    fn write_serving_pair(
        &self,
        cert: &Path,
        cert_pem: &str,
        key: &Path,
        key_pem: &str,
    ) -> Result<(), CertStoreError> {
        let mut s = self.lock();
        s.files.insert(key.to_path_buf(), key_pem.into());
        s.files.insert(cert.to_path_buf(), cert_pem.into());
        Ok(())
    }
}
