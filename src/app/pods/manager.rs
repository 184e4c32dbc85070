//! The pod manager: merges the full pod sets each source sends into one desired set,
//! and says what changed (upstream's config merger with SET updates).

use std::collections::{BTreeMap, BTreeSet};

use tracing::{debug, warn};

use crate::domain::pod::{log_ref, Pod};
use crate::ports::pod_source::PodSetUpdate;

/// One difference in the desired set.
#[derive(Debug, Clone, PartialEq)]
pub enum PodChange {
    /// A new pod, or one whose spec changed: sync it.
    Upsert(Box<Pod>),
    /// The pod is no longer desired: terminate it.
    Remove { uid: String, last: Box<Pod> },
}

#[derive(Debug, Default)]
pub struct PodManager {
    /// The uids each source holds.
    by_source: BTreeMap<String, BTreeSet<String>>,
    pods: BTreeMap<String, (String, Pod)>,
}

impl PodManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the pods of `update.source` and returns what changed, logging it as
    /// upstream's sync loop does (`SyncLoop ADD`, `UPDATE`, `DELETE`, `REMOVE` at `-v=2`).
    pub fn apply(&mut self, update: PodSetUpdate) -> Vec<PodChange> {
        let source = update.source.clone();
        let (changes, log) = self.merge(update);
        log.write(&source);
        changes
    }

    fn merge(&mut self, update: PodSetUpdate) -> (Vec<PodChange>, SyncLoopLog) {
        let source = update.source;
        let mut changes = Vec::new();
        let mut log = SyncLoopLog::default();
        let mut now: BTreeSet<String> = BTreeSet::new();
        for pod in update.pods {
            let uid = pod.metadata.uid.clone();
            match self.pods.get(&uid) {
                Some((owner, _)) if *owner != source => {
                    // Same content from two sources is one pod; the first source keeps it.
                    warn!(pod = %log_ref(&pod), %uid, %source, owner = %owner, "pod already provided by another source; ignoring this copy");
                    continue;
                }
                Some((_, old)) if *old == pod => {}
                old => {
                    let seen = match old {
                        None => &mut log.added,
                        // Upstream's DELETE: the API's graceful deletion first seen.
                        Some((_, old)) if pod.is_being_deleted() && !old.is_being_deleted() => {
                            &mut log.deleted
                        }
                        Some(_) => &mut log.updated,
                    };
                    seen.push(log_ref(&pod));
                    changes.push(PodChange::Upsert(Box::new(pod.clone())));
                    self.pods.insert(uid.clone(), (source.clone(), pod));
                }
            }
            now.insert(uid);
        }
        let before = self
            .by_source
            .insert(source.clone(), now.clone())
            .unwrap_or_default();
        for uid in before.difference(&now) {
            if let Some((_, last)) = self.pods.remove(uid) {
                log.removed.push(log_ref(&last));
                changes.push(PodChange::Remove {
                    uid: uid.clone(),
                    last: Box::new(last),
                });
            }
        }
        (changes, log)
    }

    pub fn get(&self, uid: &str) -> Option<&Pod> {
        self.pods.get(uid).map(|(_, pod)| pod)
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// Every desired pod, in uid order.
    pub fn pods(&self) -> Vec<Pod> {
        self.pods.values().map(|(_, pod)| pod.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

/// The pods of one source's update by what happened to them, for upstream's log lines.
#[derive(Debug, Default, PartialEq)]
struct SyncLoopLog {
    added: Vec<String>,
    updated: Vec<String>,
    deleted: Vec<String>,
    removed: Vec<String>,
}

impl SyncLoopLog {
    fn write(&self, source: &str) {
        for (message, pods) in [
            ("SyncLoop ADD", &self.added),
            ("SyncLoop UPDATE", &self.updated),
            ("SyncLoop REMOVE", &self.removed),
            ("SyncLoop DELETE", &self.deleted),
        ] {
            if !pods.is_empty() {
                // klog's `KObjSlice` text: `[namespace/name ...]`.
                let pods = format!("[{}]", pods.join(" "));
                debug!(source, pods, "{message}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, image: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = format!("p-{uid}");
        pod.metadata.uid = uid.to_owned();
        pod.metadata.namespace = "default".into();
        pod.metadata
            .annotations
            .insert("image".into(), image.to_owned());
        pod
    }

    fn update(source: &str, pods: Vec<Pod>) -> PodSetUpdate {
        PodSetUpdate {
            source: source.to_owned(),
            pods,
            errors: Vec::new(),
        }
    }

    #[test]
    fn sets_become_adds_updates_and_removals() {
        let mut manager = PodManager::new();
        let added = manager.apply(update("file", vec![pod("a", "1"), pod("b", "1")]));
        assert_eq!(added.len(), 2);
        assert!(manager.contains("a") && manager.contains("b"));

        assert!(manager
            .apply(update("file", vec![pod("a", "1"), pod("b", "1")]))
            .is_empty());

        let changes = manager.apply(update("file", vec![pod("a", "2")]));
        assert_eq!(
            changes,
            vec![
                PodChange::Upsert(Box::new(pod("a", "2"))),
                PodChange::Remove {
                    uid: "b".into(),
                    last: Box::new(pod("b", "1"))
                }
            ]
        );
        assert_eq!(manager.len(), 1);
    }

    #[test]
    fn each_change_is_logged_as_upstreams_sync_loop_names_it() {
        let mut manager = PodManager::new();
        let (_, log) = manager.merge(update("api", vec![pod("a", "1"), pod("b", "1")]));
        assert_eq!(log.added, ["default/p-a", "default/p-b"]);
        let mut deleting = pod("b", "1");
        deleting.metadata.deletion_timestamp = Some("2026-11-30T19:00:00Z".into());
        let (_, log) = manager.merge(update("api", vec![pod("a", "2"), deleting]));
        assert_eq!(
            log,
            SyncLoopLog {
                updated: vec!["default/p-a".into()],
                deleted: vec!["default/p-b".into()],
                ..SyncLoopLog::default()
            }
        );
        let (_, log) = manager.merge(update("api", vec![pod("a", "2")]));
        assert_eq!(
            log,
            SyncLoopLog {
                removed: vec!["default/p-b".into()],
                ..SyncLoopLog::default()
            }
        );
    }

    #[test]
    fn sources_do_not_remove_each_others_pods() {
        let mut manager = PodManager::new();
        manager.apply(update("file", vec![pod("a", "1")]));
        manager.apply(update("http", vec![pod("h", "1")]));
        let changes = manager.apply(update("http", vec![]));
        assert_eq!(changes.len(), 1);
        assert!(manager.contains("a"));
        assert!(!manager.contains("h"));
    }

    #[test]
    fn the_first_source_keeps_a_shared_pod() {
        let mut manager = PodManager::new();
        manager.apply(update("file", vec![pod("a", "1")]));
        assert!(manager
            .apply(update("http", vec![pod("a", "1")]))
            .is_empty());
        // The second source dropping it does not remove the first source's pod.
        assert!(manager.apply(update("http", vec![])).is_empty());
        assert!(manager.contains("a"));
    }
}
