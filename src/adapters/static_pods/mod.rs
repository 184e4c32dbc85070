//! The static pod sources: the manifest folder (`file`) and the manifest URL (`http`),
//! and what they share: keeping the first-seen stamp stable across looks at the same
//! pods, and turning a changed look into the update sent.

pub mod file;
pub mod http;

pub use file::FileSource;
pub use http::{HttpSource, HttpSourceError};

use crate::ports::error::Chain;
use std::collections::HashMap;

use tracing::warn;

use crate::domain::pod::static_pod::{ManifestError, PodSourceKind};
use crate::domain::pod::{Pod, CONFIG_SEEN_ANNOTATION};
use crate::ports::pod_source::PodSetUpdate;

/// The pods and errors of one look at a static pod source.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Snapshot {
    pub(crate) pods: Vec<Pod>,
    pub(crate) errors: Vec<ManifestError>,
}

/// A fresh look at a source against the `last` set sent. Keeps the first-seen
/// stamps; when the set changed, warns (`problem`) about each error not reported
/// before, calls `changed` to log the change, remembers the set and returns the
/// update to send. `None` when nothing changed.
pub(crate) fn changed_update(
    last: &mut Option<Snapshot>,
    mut snapshot: Snapshot,
    kind: PodSourceKind,
    problem: &str,
    changed: impl FnOnce(&Snapshot),
) -> Option<PodSetUpdate> {
    keep_first_seen(
        last.as_ref().map(|last| last.pods.as_slice()),
        &mut snapshot.pods,
    );
    if last.as_ref() == Some(&snapshot) {
        return None;
    }
    for error in &snapshot.errors {
        let known = last
            .as_ref()
            .is_some_and(|last| last.errors.contains(error));
        if !known {
            warn!(error = %Chain(&error), "{problem}");
        }
    }
    changed(&snapshot);
    *last = Some(snapshot.clone());
    Some(PodSetUpdate {
        source: kind.as_str().to_string(),
        pods: snapshot.pods,
        errors: snapshot.errors,
    })
}

/// Keeps the first-seen stamp of pods that were already in the `last` set
/// sent, so an unchanged pod compares equal and its annotation means first seen.
pub(crate) fn keep_first_seen(last: Option<&[Pod]>, pods: &mut [Pod]) {
    let Some(last) = last else { return };
    let seen: HashMap<&str, &String> = last
        .iter()
        .filter_map(|pod| {
            let stamp = pod.metadata.annotations.get(CONFIG_SEEN_ANNOTATION)?;
            Some((pod.metadata.uid.as_str(), stamp))
        })
        .collect();
    for pod in pods {
        if let Some(stamp) = seen.get(pod.metadata.uid.as_str()) {
            pod.metadata
                .annotations
                .insert(CONFIG_SEEN_ANNOTATION.to_string(), (*stamp).clone());
        }
    }
}

/// What the tests of both sources look at in an update.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::domain::pod::{Pod, CONFIG_SEEN_ANNOTATION};
    use crate::ports::pod_source::PodSetUpdate;

    /// The pod names of `update`, in order.
    pub(crate) fn names(update: &PodSetUpdate) -> Vec<String> {
        update
            .pods
            .iter()
            .map(|pod| pod.metadata.name.clone())
            .collect()
    }

    /// The first-seen stamp of `pod`.
    pub(crate) fn seen(pod: &Pod) -> Option<&str> {
        pod.metadata
            .annotations
            .get(CONFIG_SEEN_ANNOTATION)
            .map(String::as_str)
    }
}
