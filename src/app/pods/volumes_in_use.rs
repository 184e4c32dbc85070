//! The attached volumes the pods use, for the Node's `volumesInUse` (upstream's
//! `GetVolumesInUse` and `MarkVolumesAsReportedInUse`): a pod's attached CSI volumes
//! are added before they are staged, and removed once its volumes are torn down; the
//! node status loop reports them and marks them reported, and a volume is staged only
//! once reported, so the attach-detach controller never detaches a volume under a
//! mount.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{watch, Notify};

#[derive(Debug)]
pub struct VolumesInUse {
    by_pod: Mutex<BTreeMap<String, BTreeSet<String>>>,
    reported: watch::Sender<BTreeSet<String>>,
    /// Woken when the wanted set changes: the status loop reports it at once.
    pub changed: Notify,
}

impl Default for VolumesInUse {
    fn default() -> Self {
        VolumesInUse {
            by_pod: Mutex::new(BTreeMap::new()),
            reported: watch::channel(BTreeSet::new()).0,
            changed: Notify::new(),
        }
    }
}

impl VolumesInUse {
    fn pods(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeSet<String>>> {
        self.by_pod.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Pod `uid` uses the attached volumes `names` (added to what it used: a volume
    /// stays in use until the pod's volumes are torn down).
    pub fn add(&self, uid: &str, names: &BTreeSet<String>) {
        let grew = {
            let mut pods = self.pods();
            let used = pods.entry(uid.to_owned()).or_default();
            let before = used.len();
            used.extend(names.iter().cloned());
            used.len() != before
        };
        if grew {
            self.changed.notify_one();
        }
    }

    /// Pod `uid`'s volumes are torn down.
    pub fn forget(&self, uid: &str) {
        let removed = self.pods().remove(uid).is_some_and(|n| !n.is_empty());
        if removed {
            self.changed.notify_one();
        }
    }

    /// Every pod's, sorted (what the Node's `volumesInUse` should say).
    pub fn wanted(&self) -> Vec<String> {
        let all: BTreeSet<String> = self.pods().values().flatten().cloned().collect();
        all.into_iter().collect()
    }

    /// The Node's `volumesInUse` now holds `names`.
    pub fn mark_reported(&self, names: &[String]) {
        let now: BTreeSet<String> = names.iter().cloned().collect();
        self.reported.send_if_modified(|reported| {
            let changed = *reported != now;
            *reported = now;
            changed
        });
    }

    pub fn reported(&self) -> BTreeSet<String> {
        self.reported.borrow().clone()
    }

    /// Waits up to `timeout` for every one of `names` to be reported; what is reported
    /// then.
    pub async fn wait_reported(
        &self,
        names: &BTreeSet<String>,
        timeout: Duration,
    ) -> BTreeSet<String> {
        let mut watch = self.reported.subscribe();
        let waited = tokio::time::timeout(
            timeout,
            watch.wait_for(|reported| names.is_subset(reported)),
        )
        .await;
        drop(waited);
        self.reported()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_volume_stays_wanted_while_any_pod_uses_it() {
        let in_use = VolumesInUse::default();
        in_use.add("a", &set(&["v1", "v2"]));
        in_use.add("b", &set(&["v2"]));
        assert_eq!(in_use.wanted(), ["v1", "v2"]);
        in_use.forget("a");
        assert_eq!(in_use.wanted(), ["v2"]);
        in_use.forget("b");
        assert!(in_use.wanted().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn staging_waits_for_the_report_and_gives_up_after_its_timeout() {
        let in_use = std::sync::Arc::new(VolumesInUse::default());
        let wanted = set(&["v1"]);
        let waiter = {
            let in_use = in_use.clone();
            let wanted = wanted.clone();
            tokio::spawn(async move { in_use.wait_reported(&wanted, Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        in_use.mark_reported(&["v1".to_owned()]);
        assert_eq!(waiter.await.ok(), Some(wanted));
        // Never reported: the paused clock runs to the timeout.
        let other = set(&["v9"]);
        assert!(!in_use
            .wait_reported(&other, Duration::from_secs(5))
            .await
            .contains("v9"));
    }
}
