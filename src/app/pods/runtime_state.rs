//! What the runtime holds, read through the runtime port: one pod's full status for a
//! sync, which images are present, and a cheap listing of every pod for the PLEG's
//! relist.

use std::collections::BTreeMap;

use crate::domain::kuberuntime::labels::POD_UID_LABEL;
use crate::domain::kuberuntime::plan::{ImageFacts, ImagePresence};
use crate::domain::kuberuntime::pod_sync::RuntimeView;
use crate::domain::kuberuntime::runtime::{
    ContainerFilter, PodRuntimeStatus, SandboxFilter, SandboxState,
};
use crate::ports::runtime::{ImageService, RuntimeError, RuntimeService};

fn uid_filter(uid: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(POD_UID_LABEL.to_owned(), uid.to_owned())])
}

/// Everything the runtime knows about the pod `uid`: its sandboxes (newest first, with
/// network facts from their status) and every container instance with its exit details.
pub async fn pod_runtime_view(
    runtime: &dyn RuntimeService,
    uid: &str,
) -> Result<RuntimeView, RuntimeError> {
    let sandboxes = runtime
        .list_pod_sandboxes(&SandboxFilter {
            labels: uid_filter(uid),
            ..Default::default()
        })
        .await?;
    let containers = runtime
        .list_containers(&ContainerFilter {
            labels: uid_filter(uid),
            ..Default::default()
        })
        .await?;
    let mut view = RuntimeView::default();
    view.status.uid = uid.to_owned();
    for entry in sandboxes {
        if view.status.name.is_empty() {
            view.status.name = entry.name.clone();
            view.status.namespace = entry.namespace.clone();
        }
        // The listing carries neither the network mode nor the IP; a ready sandbox's
        // status does. A sandbox removed meanwhile is simply gone.
        let status = if entry.status.state == SandboxState::Ready {
            match runtime.pod_sandbox_status(&entry.status.id).await {
                Ok(status) => status,
                Err(RuntimeError::NotFound(_)) => continue,
                Err(e) => return Err(e),
            }
        } else {
            entry.status
        };
        view.status.sandboxes.push(status);
    }
    view.status
        .sandboxes
        .sort_by_key(|s| std::cmp::Reverse((s.created_at_nanos, s.attempt)));
    for entry in containers {
        // The listing has no exit code, reason or times; the status call does.
        let status = match runtime.container_status(&entry.status.id).await {
            Ok(mut status) => {
                if status.hash == 0 {
                    status.hash = entry.status.hash;
                }
                if status.backoff_step.is_none() {
                    status.backoff_step = entry.status.backoff_step;
                }
                status
            }
            Err(RuntimeError::NotFound(_)) => continue,
            Err(e) => return Err(e),
        };
        view.sandbox_of
            .insert(status.id.clone(), entry.sandbox_id.clone());
        view.status.containers.push(status);
    }
    Ok(view)
}

/// Whether each of `images` is on the node (one status call each); a failed call is
/// `Unknown` with its reason, for the plan to report.
pub async fn image_presence(
    service: &dyn ImageService,
    images: &[String],
) -> BTreeMap<String, ImagePresence> {
    let mut presence = BTreeMap::new();
    for image in images {
        let state = match service.image_status(image).await {
            Ok(Some(info)) => ImagePresence::Present(ImageFacts::of(&info)),
            Ok(None) => ImagePresence::Absent,
            Err(e) => ImagePresence::Unknown(crate::ports::error::Chain(&e).to_string()),
        };
        presence.insert(image.clone(), state);
    }
    presence
}

pub use crate::domain::kuberuntime::pleg::PodFingerprint;
use crate::domain::kuberuntime::pleg::{container_word, sandbox_word};

/// A pod's runtime status as a relist fingerprints it.
pub fn fingerprint_of(status: &PodRuntimeStatus) -> PodFingerprint {
    let sandboxes = status
        .sandboxes
        .iter()
        .map(|s| (s.id.clone(), sandbox_word(s.state).to_owned()));
    let containers = status
        .containers
        .iter()
        .map(|c| (c.id.clone(), container_word(c.state).to_owned()));
    sandboxes.chain(containers).collect()
}

/// Every pod the kubelet created, as fingerprints by pod uid (two list calls).
pub async fn relist(
    runtime: &dyn RuntimeService,
) -> Result<BTreeMap<String, PodFingerprint>, RuntimeError> {
    let sandboxes = runtime
        .list_pod_sandboxes(&SandboxFilter::default())
        .await?;
    let containers = runtime.list_containers(&ContainerFilter::default()).await?;
    let mut pods: BTreeMap<String, PodFingerprint> = BTreeMap::new();
    for s in sandboxes {
        let Some(uid) = s.labels.get(POD_UID_LABEL) else {
            continue;
        };
        pods.entry(uid.clone())
            .or_default()
            .insert(s.status.id, sandbox_word(s.status.state).to_owned());
    }
    for c in containers {
        let Some(uid) = c.labels.get(POD_UID_LABEL) else {
            continue;
        };
        pods.entry(uid.clone())
            .or_default()
            .insert(c.status.id, container_word(c.status.state).to_owned());
    }
    Ok(pods)
}

/// Pods whose sandboxes or containers changed between two relists (appeared,
/// disappeared or changed state).
pub fn changed_pods(
    before: &BTreeMap<String, PodFingerprint>,
    after: &BTreeMap<String, PodFingerprint>,
) -> Vec<String> {
    let mut changed: Vec<String> = after
        .iter()
        .filter(|(uid, now)| before.get(*uid) != Some(now))
        .map(|(uid, _)| uid.clone())
        .collect();
    changed.extend(
        before
            .keys()
            .filter(|uid| !after.contains_key(*uid))
            .cloned(),
    );
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::kuberuntime::pleg::fingerprint as fp;

    #[test]
    fn changes_are_new_gone_and_changed_pods() {
        let before = BTreeMap::from([
            ("same".to_owned(), fp(&[("c1", "running")])),
            ("exits".to_owned(), fp(&[("c2", "running")])),
            ("gone".to_owned(), fp(&[("c3", "exited")])),
        ]);
        let after = BTreeMap::from([
            ("same".to_owned(), fp(&[("c1", "running")])),
            ("exits".to_owned(), fp(&[("c2", "exited")])),
            ("new".to_owned(), fp(&[("s4", "ready")])),
        ]);
        let mut changed = changed_pods(&before, &after);
        changed.sort();
        assert_eq!(changed, ["exits", "gone", "new"]);
    }
}
