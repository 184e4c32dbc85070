//! What the static pod sources (file and URL) share: keeping the first-seen
//! stamp stable across looks at the same pods.

use std::collections::HashMap;

use crate::domain::pod::{Pod, CONFIG_SEEN_ANNOTATION};

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
