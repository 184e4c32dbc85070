//! The node's user namespace blocks (`domain::kuberuntime::userns`): handed to the
//! sandboxes of `hostUsers: false` pods, kept in their folders, freed with the folders.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing::info;

use crate::domain::kuberuntime::requests::UserNamespace;
use crate::domain::kuberuntime::userns::{
    self, KubeletIdRange, UsernsAllocator, UsernsError, MAPPINGS_FILE,
};
use crate::ports::pod_files::PodFiles;
use crate::ports::runtime::RuntimeService;

use super::sync::lock;
use super::volumes::off_runtime;

/// Why a pod gets no user namespace: the domain's reason, or its file unreadable.
#[derive(Debug, thiserror::Error)]
pub enum UserNamespaceError {
    #[error(transparent)]
    Refused(#[from] UsernsError),
    #[error("pod {pod}: {source}")]
    Recorded { pod: String, source: UsernsError },
    #[error("cannot ask the runtime for its handlers: {0}")]
    Runtime(#[source] crate::ports::runtime::RuntimeError),
    #[error("user namespace mappings in {}: {source}", path.display())]
    Files {
        path: PathBuf,
        #[source]
        source: super::volumes::FilesError,
    },
}

pub struct UserNamespaces {
    gate_enabled: bool,
    range: KubeletIdRange,
    /// `None` until the pods' folders have been read: a block kept by a pod from before
    /// a restart is recorded before any is handed out.
    allocator: Mutex<Option<UsernsAllocator>>,
}

impl UserNamespaces {
    pub fn new(gate_enabled: bool, range: KubeletIdRange) -> Self {
        UserNamespaces {
            gate_enabled,
            range,
            allocator: Mutex::new(None),
        }
    }

    /// The sandbox's user namespace: the pod's handler must support one; the pod's
    /// block, or a new one written to its folder first (upstream's
    /// `GetOrCreateUserNamespaceMappings`).
    pub async fn for_sandbox(
        &self,
        runtime: &dyn RuntimeService,
        files: &Arc<dyn PodFiles>,
        pods_dir: &Path,
        pod_uid: &str,
        handler: &str,
    ) -> Result<UserNamespace, UserNamespaceError> {
        let handlers = if self.gate_enabled {
            runtime
                .runtime_handlers()
                .await
                .map_err(UserNamespaceError::Runtime)?
        } else {
            Vec::new()
        };
        userns::check_handler(self.gate_enabled, &handlers, handler)?;
        self.load(files, pods_dir).await?;
        let (namespace, content) = {
            let mut guard = lock(&self.allocator);
            let allocator = guard.get_or_insert_with(|| UsernsAllocator::new(self.range));
            allocator.allocate(pod_uid)?
        };
        let path = pods_dir.join(pod_uid).join(MAPPINGS_FILE);
        let written = {
            let path = path.clone();
            off_runtime(files, move |f| f.write_file(&path, &content)).await
        };
        if let Err(source) = written {
            self.release(pod_uid);
            return Err(UserNamespaceError::Files { path, source });
        }
        Ok(namespace)
    }

    /// The user namespace of a pod whose sandbox has one, for its containers.
    pub async fn for_container(
        &self,
        files: &Arc<dyn PodFiles>,
        pods_dir: &Path,
        pod_uid: &str,
    ) -> Result<Option<UserNamespace>, UserNamespaceError> {
        self.load(files, pods_dir).await?;
        Ok(lock(&self.allocator)
            .as_ref()
            .and_then(|a| a.mappings(pod_uid)))
    }

    /// Frees the block of a pod whose folder is gone.
    pub fn release(&self, pod_uid: &str) {
        if let Some(allocator) = lock(&self.allocator).as_mut() {
            if allocator.release(pod_uid) {
                info!(pod_uid, "released the pod's user namespace");
            }
        }
    }

    /// Records the blocks kept in the pods' folders, once. A file that cannot be read
    /// refuses every new block: its pod may still hold the IDs.
    async fn load(
        &self,
        files: &Arc<dyn PodFiles>,
        pods_dir: &Path,
    ) -> Result<(), UserNamespaceError> {
        if lock(&self.allocator).is_some() {
            return Ok(());
        }
        let dir = pods_dir.to_path_buf();
        let kept = off_runtime(files, move |f| {
            let mut kept = Vec::new();
            for uid in f.list_dir(&dir)? {
                if let Some(content) = f.read(&dir.join(&uid).join(MAPPINGS_FILE))? {
                    kept.push((uid, content));
                }
            }
            Ok(kept)
        })
        .await
        .map_err(|source| UserNamespaceError::Files {
            path: pods_dir.to_path_buf(),
            source,
        })?;
        let mut guard = lock(&self.allocator);
        if guard.is_some() {
            return Ok(());
        }
        let mut allocator = UsernsAllocator::new(self.range);
        for (pod, content) in kept {
            allocator
                .record_file(&pod, &content)
                .map_err(|source| UserNamespaceError::Recorded { pod, source })?;
        }
        *guard = Some(allocator);
        Ok(())
    }
}
