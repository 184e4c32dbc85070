//! One worker per pod: it syncs its pod whenever woken (a runtime change, the resync
//! period, a back-off ending), never two syncs of one pod at once, and terminates the
//! pod when it is no longer wanted.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Notify, Semaphore};
use tokio::task::JoinHandle;
use tracing::{debug, info_span, Instrument};

use super::probes::ProbeManager;
use super::runtime_state::{fingerprint_of, PodFingerprint};
use super::status::PodStatusStore;
use super::sync::{sync_pod, SyncContext};
use super::terminate::{kill_pod, terminate_pod};
use crate::domain::eviction::manager::Eviction;
use crate::domain::kuberuntime::backoff::BackoffPolicy;
use crate::domain::kuberuntime::pleg::relist_already_seen;
use crate::domain::pod::active_deadline::{
    active_deadline, ActiveDeadline, DEADLINE_EXCEEDED_MESSAGE, DEADLINE_EXCEEDED_REASON,
};
use crate::domain::pod::{log_ref, Pod};
use crate::domain::status::{api_pod_status, rejected_pod_status, terminal_status, PodCondition};

/// Retry delay for a termination that left something behind.
const TERMINATE_RETRY: Duration = Duration::from_secs(2);

/// What a pod's worker is asked to do.
#[derive(Debug, Clone)]
pub(super) enum Desired {
    Run(Box<Pod>),
    /// Terminate and remove; the last known spec when there is one.
    Terminate(Option<Box<Pod>>),
    /// Kill for good and keep as Failed (an eviction); never started again.
    Evict(Box<Pod>, Box<Eviction>),
    /// Being deleted in the API: stop with the deletion's grace period, write the final
    /// status, remove everything; the status writer then deletes it in the API.
    Delete(Box<Pod>),
}

pub(super) struct Worker {
    pub(super) desired: watch::Sender<Desired>,
    /// Wakes the worker to sync (a container event, a probe result).
    pub(super) poke: Arc<Notify>,
    /// Wakes the worker for what a relist saw, which it may already know.
    pub(super) relisted: Arc<RelistWake>,
    pub(super) task: JoinHandle<()>,
}

/// A relist's news for one worker: when the relist began and what it saw of the pod.
#[derive(Default)]
pub(super) struct RelistWake {
    notify: Notify,
    latest: Mutex<Option<(Instant, PodFingerprint)>>,
}

impl RelistWake {
    /// The relist begun at `began` saw the pod change to `fingerprint`.
    pub(super) fn changed(&self, began: Instant, fingerprint: PodFingerprint) {
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) = Some((began, fingerprint));
        self.notify.notify_one();
    }

    fn take(&self) -> Option<(Instant, PodFingerprint)> {
        self.latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Shared by every worker.
pub(super) struct WorkerShared {
    pub(super) ctx: Arc<SyncContext>,
    pub(super) store: PodStatusStore,
    pub(super) permits: Arc<Semaphore>,
    pub(super) done: mpsc::UnboundedSender<String>,
    pub(super) resync: Duration,
    pub(super) probes: Arc<ProbeManager>,
}

pub(super) async fn worker_loop(
    uid: String,
    shared: Arc<WorkerShared>,
    mut desired: watch::Receiver<Desired>,
    poke: Arc<Notify>,
    relisted: Arc<RelistWake>,
) {
    // Syncs failed in a row on the runtime: the retry backs off.
    let mut failures: u32 = 0;
    // For kubelet_pod_start_duration_seconds and the worker's operation_type.
    let first_seen = std::time::Instant::now();
    let mut start_recorded = false;
    let mut synced_once = false;
    loop {
        // The runtime as this sync leaves it, and when the sync ended.
        let mut seen: Option<(Instant, PodFingerprint)> = None;
        let now = desired.borrow_and_update().clone();
        let Ok(permit) = shared.permits.acquire().await else {
            return;
        };
        let wait = match now {
            Desired::Run(pod) if past_deadline(&shared, &pod) => {
                shared.probes.forget(&uid);
                let span = info_span!("deadline_exceeded", pod = %log_ref(&pod), %uid);
                end_past_deadline(&shared, &pod).instrument(span).await;
                drop(permit);
                // Failed for good: a new spec (a shorter deadline) is past it too.
                if !wait_for_new_desire(&mut desired, &pod).await {
                    return;
                }
                continue;
            }
            Desired::Run(pod) => {
                let span = info_span!("sync_pod", pod = %log_ref(&pod), %uid);
                let sync_started = std::time::Instant::now();
                let outcome = sync_pod(&shared.ctx, &pod).instrument(span).await;
                let metrics = crate::app::metrics::kubelet_metrics();
                metrics.pod_worker(
                    if synced_once { "sync" } else { "create" },
                    sync_started.elapsed(),
                );
                synced_once = true;
                if outcome.settled {
                    seen = Some((Instant::now(), fingerprint_of(&outcome.runtime)));
                }
                let status = match &outcome.rejected {
                    Some(r) => rejected_pod_status(&r.reason, &r.message),
                    None => {
                        shared.probes.observe(&pod, &outcome.runtime, &poke);
                        let mut status = api_pod_status(
                            &pod,
                            &outcome.runtime,
                            &outcome.waiting,
                            &shared.ctx.runtime_name,
                        );
                        shared.probes.apply_to_status(&pod, &mut status);
                        status
                    }
                };
                // Ran to completion (Succeeded, or Failed with nothing to restart) and
                // its sandbox stopped: a terminal phase is final, as upstream's, so the
                // pod is never started again, even once its dead containers are gone.
                let finished = status.is_terminal() && !outcome.failed;
                if !start_recorded && status.phase == "Running" {
                    start_recorded = true;
                    metrics
                        .pod_start_duration
                        .observe(first_seen.elapsed().as_secs_f64());
                }
                shared.store.set(&pod, status);
                if finished {
                    drop(permit);
                    if !wait_for_new_desire(&mut desired, &pod).await {
                        return;
                    }
                    continue;
                }
                failures = if outcome.failed {
                    failures.saturating_add(1)
                } else {
                    0
                };
                let retry = outcome
                    .retry_after
                    .map(|d| d.max(BackoffPolicy::SYNC_ERROR.delay_for_step(failures)));
                let wait = retry.map_or(shared.resync, |d| d.min(shared.resync));
                // Woken when the active deadline passes, not a resync later.
                match deadline_of(&shared, &pod) {
                    ActiveDeadline::Remaining(left) => wait.min(left),
                    ActiveDeadline::Exceeded => Duration::ZERO,
                    ActiveDeadline::Unbounded => wait,
                }
            }
            Desired::Evict(pod, eviction) => {
                let span = info_span!("evict_pod", pod = %log_ref(&pod), %uid);
                let runtime = kill_pod(&shared.ctx, &pod, eviction.grace_period_override)
                    .instrument(span)
                    .await;
                let status = api_pod_status(
                    &pod,
                    &runtime,
                    &Default::default(),
                    &shared.ctx.runtime_name,
                );
                let condition = eviction.condition.as_ref().map(|c| PodCondition {
                    condition_type: c.type_.to_owned(),
                    status: c.status.to_owned(),
                    reason: c.reason.to_owned(),
                    message: c.message.clone(),
                    ..PodCondition::default()
                });
                shared.store.set(
                    &pod,
                    terminal_status(status, eviction.reason, &eviction.message, condition),
                );
                drop(permit);
                // Killed for good: its status stays as it is now; only a new desire (its
                // removal from the source) wakes the worker again.
                if desired.changed().await.is_err() {
                    return;
                }
                continue;
            }
            Desired::Delete(pod) => {
                shared.probes.forget(&uid);
                let span = info_span!("delete_pod", pod = %log_ref(&pod), %uid);
                let removed = async {
                    let runtime = kill_pod(&shared.ctx, &pod, pod.termination_grace_period()).await;
                    let status = api_pod_status(
                        &pod,
                        &runtime,
                        &Default::default(),
                        &shared.ctx.runtime_name,
                    );
                    let removed = terminate_pod(&shared.ctx, &uid, Some(&pod)).await;
                    if removed {
                        shared.store.set_final(&pod, status);
                    }
                    removed
                }
                .instrument(span)
                .await;
                if removed {
                    let _ = shared.done.send(uid);
                    return;
                }
                TERMINATE_RETRY
            }
            Desired::Terminate(last) => {
                shared.probes.forget(&uid);
                let name = last.as_deref().map_or_else(|| uid.clone(), log_ref);
                let span = info_span!("terminate_pod", pod = %name, %uid);
                let removed = terminate_pod(&shared.ctx, &uid, last.as_deref())
                    .instrument(span)
                    .await;
                if removed {
                    shared.store.remove(&uid);
                    let _ = shared.done.send(uid);
                    return;
                }
                TERMINATE_RETRY
            }
        };
        drop(permit);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                changed = desired.changed() => if changed.is_err() { return } else { break },
                () = poke.notified() => break,
                () = relisted.notify.notified() => {
                    let news = relisted.take();
                    let known = match (&seen, &news) {
                        (Some((ended, seen)), Some((began, relist))) => {
                            relist_already_seen(relist, began < ended, seen)
                        }
                        _ => false,
                    };
                    if !known {
                        break;
                    }
                    debug!(%uid, "PLEG: the change is the pod's own last sync; not syncing again");
                }
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
    }
}

fn deadline_of(shared: &WorkerShared, pod: &Pod) -> ActiveDeadline {
    active_deadline(
        &pod.spec,
        shared.store.start_time(pod),
        shared.ctx.clock.now_unix_nanos(),
    )
}

fn past_deadline(shared: &WorkerShared, pod: &Pod) -> bool {
    deadline_of(shared, pod) == ActiveDeadline::Exceeded
}

/// A pod past its active deadline: killed with its grace period, `Failed` with upstream's
/// reason and message, and its event.
async fn end_past_deadline(shared: &WorkerShared, pod: &Pod) {
    shared
        .ctx
        .events
        .pod(pod, crate::domain::events::deadline_exceeded());
    let runtime = kill_pod(&shared.ctx, pod, pod.termination_grace_period()).await;
    let status = api_pod_status(pod, &runtime, &Default::default(), &shared.ctx.runtime_name);
    shared.store.set(
        pod,
        terminal_status(
            status,
            DEADLINE_EXCEEDED_REASON,
            DEADLINE_EXCEEDED_MESSAGE,
            None,
        ),
    );
}

/// Waits until the pod is wanted otherwise than as `pod` runs now (a new spec, its
/// removal, an eviction); false once the loop is gone.
async fn wait_for_new_desire(desired: &mut watch::Receiver<Desired>, pod: &Pod) -> bool {
    loop {
        if desired.changed().await.is_err() {
            return false;
        }
        if !matches!(&*desired.borrow(), Desired::Run(p) if **p == *pod) {
            return true;
        }
    }
}
