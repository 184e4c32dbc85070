//! The status manager's writer (connected mode): each pod whose status changed gets a
//! strategic-merge patch of `pods/status` with its uid as precondition (the body is
//! `domain::status::status_patch`), sent only when the status differs from the last one
//! sent (or, before the first, from the one the API holds: a restarted kubelet writes
//! nothing that did not change). One write per pod at a time and the latest status read
//! at send time, so an older status never lands after a newer one; at most
//! [`MAX_IN_FLIGHT`] writes at once; failed writes back off per pod.
//!
//! A static pod's status goes to its mirror pod. A pod terminated for its deletion is
//! deleted in the API (grace 0, uid precondition) once its final status is written.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::app::node::failures::FailureLog;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, info};

use super::status::{PodStatusStore, StatusTarget};
use crate::app::node::ConnectedNode;
use crate::app::server::shutdown_requested;
use crate::domain::kuberuntime::backoff::BackoffPolicy;
use crate::domain::pod::api::is_api_pod;
use crate::domain::status::{same_status, status_patch, ApiPodStatus};
use crate::ports::api::{PodApi, PodsError};
use crate::ports::error::Chain;

/// Status writes in flight at once.
pub const MAX_IN_FLIGHT: usize = 8;
/// Every pod is checked again this often (a mirror that appeared, a lost write).
const SWEEP_PERIOD: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What one write did.
enum Outcome {
    Written {
        target: StatusTarget,
        status: Box<ApiPodStatus>,
        deleted: bool,
    },
    /// The pod is gone or was replaced under its name: nothing more to write.
    Gone,
    Failed(PodsError),
}

struct Writer {
    store: PodStatusStore,
    last_sent: HashMap<String, (StatusTarget, ApiPodStatus)>,
    retry: HashMap<String, (Instant, u32)>,
    in_flight: BTreeSet<String>,
    pending: BTreeSet<String>,
    deleted: BTreeSet<String>,
    tasks: JoinSet<(String, Outcome)>,
    /// An outage logs its first failure, one line a minute and its end, not a line per
    /// pod and retry.
    failures: FailureLog,
}

async fn write(
    api: Arc<dyn PodApi>,
    target: StatusTarget,
    status: Option<ApiPodStatus>,
    delete: bool,
) -> Outcome {
    let (namespace, name, uid) = (&target.namespace, &target.name, &target.uid);
    let gone = |e: &PodsError| matches!(e, PodsError::NotFound { .. } | PodsError::Conflict { .. });
    if let Some(status) = &status {
        match api
            .patch_pod_status(namespace, name, &status_patch(uid, status))
            .await
        {
            Ok(_) => {
                debug!(pod = %format!("{namespace}/{name}"), %uid, phase = %status.phase, "status written")
            }
            Err(e) if gone(&e) => {
                debug!(pod = %format!("{namespace}/{name}"), error = %e, "status not written: the pod is gone");
                return Outcome::Gone;
            }
            Err(e) => {
                debug!(pod = %format!("{namespace}/{name}"), error = %Chain(&e), "failed to write the pod's status");
                return Outcome::Failed(e);
            }
        }
    }
    if delete {
        match api.delete_pod(namespace, name, uid, 0).await {
            Ok(()) => {
                info!(pod = %format!("{namespace}/{name}"), %uid, "pod deleted in the API after its termination")
            }
            Err(e) if gone(&e) => {}
            Err(e) => {
                debug!(pod = %format!("{namespace}/{name}"), error = %Chain(&e), "failed to delete the terminated pod");
                return Outcome::Failed(e);
            }
        }
    }
    Outcome::Written {
        target,
        status: Box::new(status.unwrap_or_default()),
        deleted: delete,
    }
}

impl Writer {
    fn new(store: PodStatusStore) -> Self {
        Writer {
            store,
            last_sent: HashMap::new(),
            retry: HashMap::new(),
            in_flight: BTreeSet::new(),
            pending: BTreeSet::new(),
            deleted: BTreeSet::new(),
            tasks: JoinSet::new(),
            failures: FailureLog::new("writing pod statuses to the API server"),
        }
    }

    /// What the writer keeps of pods, by kind: statuses sent, deletions done, back-offs.
    #[cfg(test)]
    fn kept(&self) -> (usize, usize, usize) {
        (self.last_sent.len(), self.deleted.len(), self.retry.len())
    }

    fn finished(&mut self, uid: String, outcome: Outcome) {
        self.in_flight.remove(&uid);
        match outcome {
            Outcome::Written {
                target,
                status,
                deleted,
            } => {
                self.failures.succeeded();
                self.retry.remove(&uid);
                // A pod removed while its write was in flight: nothing to remember.
                if !self.store.has(&uid) {
                    self.last_sent.remove(&uid);
                    self.deleted.remove(&uid);
                    return;
                }
                if deleted {
                    self.deleted.insert(uid.clone());
                }
                if !status.phase.is_empty() {
                    self.last_sent.insert(uid, (target, *status));
                }
            }
            Outcome::Gone => {
                self.retry.remove(&uid);
                self.last_sent.remove(&uid);
            }
            Outcome::Failed(error) => {
                self.failures.failed(&error);
                let failures = self.retry.get(&uid).map_or(0, |r| r.1) + 1;
                let delay = BackoffPolicy::SYNC_ERROR
                    .delay_for_step(failures)
                    .min(MAX_BACKOFF);
                self.retry
                    .insert(uid.clone(), (Instant::now() + delay, failures));
                self.pending.insert(uid);
            }
        }
    }

    /// Starts the writes that are due, within the bound.
    fn dispatch(&mut self, api: &Arc<dyn PodApi>) {
        let now = Instant::now();
        for uid in self.pending.clone() {
            if self.in_flight.len() >= MAX_IN_FLIGHT {
                break;
            }
            if self.in_flight.contains(&uid) || self.retry.get(&uid).is_some_and(|r| r.0 > now) {
                continue;
            }
            self.pending.remove(&uid);
            let Some(record) = self.store.record_of(&uid) else {
                self.last_sent.remove(&uid);
                self.deleted.remove(&uid);
                self.retry.remove(&uid);
                continue;
            };
            let Some(target) = self.store.target_of(&record.pod) else {
                continue;
            };
            let baseline = match self.last_sent.get(&uid) {
                Some((t, s)) if *t == target => Some(s.clone()),
                _ => self.store.api_status(&target.uid),
            };
            let changed = baseline
                .as_ref()
                .is_none_or(|b| !same_status(b, &record.status));
            let delete = record.delete_when_written
                && is_api_pod(&record.pod)
                && !self.deleted.contains(&uid);
            if !changed && !delete {
                continue;
            }
            let status = changed.then(|| record.status.clone());
            self.in_flight.insert(uid.clone());
            let api = api.clone();
            self.tasks
                .spawn(async move { (uid, write(api, target, status, delete).await) });
        }
    }
}

fn pods_api(connected: &watch::Receiver<Option<ConnectedNode>>) -> Option<Arc<dyn PodApi>> {
    connected
        .borrow()
        .as_ref()
        .map(|c| c.clients.borrow().pods.clone())
}

/// Runs until `stop`; see the module documentation.
pub async fn run_status_writer(
    store: PodStatusStore,
    mut connected: watch::Receiver<Option<ConnectedNode>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut writer = Writer::new(store.clone());
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sweep = Instant::now();
    let mut connected_open = true;
    if let Some(ip) = connected.borrow().as_ref().map(|c| c.host_ip.clone()) {
        store.set_host_ip(&ip);
    }
    loop {
        tokio::select! {
            () = shutdown_requested(&mut stop) => break,
            changed = store.changed() => writer.pending.extend(changed),
            Some(done) = writer.tasks.join_next(), if !writer.tasks.is_empty() => {
                if let Ok((uid, outcome)) = done {
                    writer.finished(uid, outcome);
                }
            }
            _ = ticker.tick() => {
                if last_sweep.elapsed() >= SWEEP_PERIOD {
                    last_sweep = Instant::now();
                    writer.pending.extend(store.pod_uids());
                }
            }
            // The node is told once; a gone sender leaves the clients as they are.
            changed = connected.changed(), if connected_open => connected_open = changed.is_ok(),
        }
        if let Some(ip) = connected.borrow().as_ref().map(|c| c.host_ip.clone()) {
            store.set_host_ip(&ip);
        }
        if let Some(api) = pods_api(&connected) {
            writer.dispatch(&api);
        }
    }
    writer.tasks.abort_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::FakeApiServer;
    use crate::domain::pod::api::decode_api_pod;
    use crate::domain::status::rejected_pod_status;
    use serde_json::json;

    fn connected(api: &FakeApiServer) -> watch::Receiver<Option<ConnectedNode>> {
        let (_, clients) = watch::channel(api.clients());
        watch::channel(Some(ConnectedNode {
            node_name: "n1".into(),
            clients,
            host_ip: "10.0.0.1".into(),
            node: Default::default(),
            allocatable: Default::default(),
        }))
        .1
    }

    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn writes_changes_once_then_deletes_a_pod_whose_final_status_is_written() {
        let api = FakeApiServer::new();
        let stored = api.put_pod(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}]}
        }));
        let pod = decode_api_pod(&stored).expect("decodes").pod;
        let store = PodStatusStore::new();
        store.track_changes();
        let (_stop_tx, stop) = watch::channel(false);
        let writer = tokio::spawn(run_status_writer(store.clone(), connected(&api), stop));
        settle().await;

        store.set(&pod, rejected_pod_status("OutOfcpu", "too big"));
        settle().await;
        assert_eq!(api.count("patch podstatus default/web"), 1);
        let written = api.pod("default", "web").expect("pod");
        assert_eq!(written["status"]["reason"], "OutOfcpu");
        assert_eq!(written["status"]["hostIP"], "10.0.0.1");
        assert!(written["status"]["startTime"].is_string());

        // The same status again: nothing sent.
        store.set(&pod, rejected_pod_status("OutOfcpu", "too big"));
        settle().await;
        assert_eq!(api.count("patch podstatus"), 1);

        // Its final status after a deletion: written, then the pod deleted with grace 0.
        store.set_final(&pod, rejected_pod_status("OutOfcpu", "too big"));
        settle().await;
        assert_eq!(api.count("delete pod default/web grace=0"), 1);
        assert!(api.pod("default", "web").is_none());
        writer.abort();
    }

    /// The pods marked changed, without waiting when none is (a test that would
    /// otherwise hang fails).
    fn changes(store: &PodStatusStore) -> BTreeSet<String> {
        use futures_util::FutureExt;
        store.changed().now_or_never().unwrap_or_default()
    }

    /// One round of the writer's loop by hand: the changes taken, the writes started and
    /// each one's outcome recorded.
    async fn round(writer: &mut Writer, api: &Arc<dyn PodApi>) {
        writer.pending.extend(changes(&writer.store));
        writer.dispatch(api);
        while let Some(Ok((uid, outcome))) = writer.tasks.join_next().await {
            writer.finished(uid, outcome);
        }
    }

    #[tokio::test]
    async fn what_the_writer_kept_of_a_pod_goes_with_the_pod() {
        let api = FakeApiServer::new();
        let pods: Arc<dyn PodApi> = api.clients().pods.clone();
        let pod_of = |name: &str| {
            let stored = api.put_pod(json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}]}
            }));
            decode_api_pod(&stored).expect("decodes").pod
        };
        let (web, db) = (pod_of("web"), pod_of("db"));
        let store = PodStatusStore::new();
        store.track_changes();
        let mut writer = Writer::new(store.clone());

        store.set(&web, rejected_pod_status("OutOfcpu", "too big"));
        round(&mut writer, &pods).await;
        assert_eq!(writer.kept(), (1, 0, 0), "its status sent");
        // Removed after its termination: forgotten, where it used to stay for good.
        store.remove(&web.metadata.uid);
        round(&mut writer, &pods).await;
        assert_eq!(writer.kept(), (0, 0, 0));

        // Removed while its write is in flight: the write's outcome keeps nothing.
        store.set(&db, rejected_pod_status("OutOfcpu", "too big"));
        writer.pending.extend(changes(&store));
        writer.dispatch(&pods);
        store.remove(&db.metadata.uid);
        while let Some(Ok((uid, outcome))) = writer.tasks.join_next().await {
            writer.finished(uid, outcome);
        }
        assert_eq!(writer.kept(), (0, 0, 0));
        assert_eq!(api.count("patch podstatus"), 2);
    }

    #[tokio::test]
    async fn a_pod_recreated_under_its_name_is_not_written_over() {
        let api = FakeApiServer::new();
        let old = api.put_pod(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "old"},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}]}
        }));
        let pod = decode_api_pod(&old).expect("decodes").pod;
        api.remove_pod("default", "web");
        let mut new = old.clone();
        new["metadata"]["uid"] = json!("new");
        api.put_pod(new);
        let store = PodStatusStore::new();
        store.track_changes();
        let (_stop_tx, stop) = watch::channel(false);
        let writer = tokio::spawn(run_status_writer(store.clone(), connected(&api), stop));
        store.set(&pod, rejected_pod_status("OutOfcpu", "too big"));
        settle().await;
        assert_eq!(api.count("patch podstatus"), 1);
        let pod_now = api.pod("default", "web").expect("the new pod");
        assert!(pod_now["status"].is_null(), "{pod_now}");
        writer.abort();
    }
}
