//! Pod files in memory: the subpaths bound and the payloads written, for tests and the
//! planner. Never proof that the Linux adapter is safe.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::domain::volumes::payload::Payload;
use crate::domain::volumes::subpath::SubPath;
use crate::ports::pod_files::{PodFiles, PodFilesError};

#[derive(Default)]
struct State {
    bound: Vec<SubPath>,
    written: BTreeMap<PathBuf, Payload>,
    refuse_sub_paths: bool,
}

/// Shared between clones, so a test keeps one to look at what a sync did.
#[derive(Clone, Default)]
pub struct FakePodFiles {
    state: Arc<Mutex<State>>,
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

    /// Every bind fails as a link out of the volume would.
    pub fn refuse_sub_paths(&self) {
        self.state().refuse_sub_paths = true;
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
        _stamp: &str,
    ) -> Result<bool, PodFilesError> {
        let mut state = self.state();
        let changed = state.written.get(dir) != Some(payload);
        state.written.insert(dir.to_owned(), payload.clone());
        Ok(changed)
    }
}
