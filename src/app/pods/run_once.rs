//! `--runonce`: take the first pod set of every source, start each pod, wait until its
//! containers run (retrying with back-off, as upstream: 10 tries from 1 s, doubling),
//! report, and return. No loop, no PLEG; pods stay running after the kubelet exits.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tracing::{info, info_span, warn, Instrument};

use super::sync::{sync_pod, SyncContext};
use crate::domain::pod::{full_name, log_ref, Pod};
use crate::domain::status::{api_pod_status, ApiContainerState};
use crate::ports::pod_source::PodSource;

pub const MAX_TRIES: u32 = 10;
pub const FIRST_RETRY_DELAY: Duration = Duration::from_secs(1);
/// How long to wait for a source's first set (upstream waits a fixed delay too).
pub const FIRST_SET_TIMEOUT: Duration = Duration::from_secs(5);

/// One pod's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOnceResult {
    pub pod: String,
    /// `None` when every container runs; otherwise why not.
    pub failure: Option<String>,
}

/// The first set of each source; a source that says nothing in time contributes none.
async fn first_sets(sources: Vec<Box<dyn PodSource>>) -> Vec<Pod> {
    let mut pods = Vec::new();
    for mut source in sources {
        match tokio::time::timeout(FIRST_SET_TIMEOUT, source.next()).await {
            Ok(Some(update)) => pods.extend(update.pods),
            Ok(None) => {}
            Err(_) => {
                warn!(after = ?FIRST_SET_TIMEOUT, "a pod source sent nothing; running without it")
            }
        }
    }
    pods
}

async fn run_pod(ctx: Arc<SyncContext>, pod: Pod) -> RunOnceResult {
    let mut delay = FIRST_RETRY_DELAY;
    let mut why = String::new();
    for attempt in 1..=MAX_TRIES {
        let outcome = sync_pod(&ctx, &pod).await;
        let status = api_pod_status(&pod, &outcome.runtime, &outcome.waiting, &ctx.runtime_name);
        let not_running: Vec<String> = status
            .container_statuses
            .iter()
            .filter(|c| !matches!(c.state, ApiContainerState::Running(_)))
            .map(|c| match &c.state {
                ApiContainerState::Waiting(w) => format!("{}: {}", c.name, w.reason),
                ApiContainerState::Terminated(t) => format!("{}: exited {}", c.name, t.exit_code),
                ApiContainerState::Running(_) => c.name.clone(),
            })
            .collect();
        if not_running.is_empty() && !status.container_statuses.is_empty() {
            info!(attempt, "pod is running");
            return RunOnceResult {
                pod: full_name(&pod),
                failure: None,
            };
        }
        why = not_running.join(", ");
        if attempt < MAX_TRIES {
            info!(attempt, waiting = %why, retry_in = ?delay, "pod is not running yet");
            tokio::time::sleep(delay).await;
            delay = delay.saturating_mul(2);
        }
    }
    RunOnceResult {
        pod: full_name(&pod),
        failure: Some(format!("not running after {MAX_TRIES} tries ({why})")),
    }
}

/// Runs every pod of the sources' first sets once; the results in pod name order.
pub async fn run_once(
    ctx: Arc<SyncContext>,
    sources: Vec<Box<dyn PodSource>>,
) -> Vec<RunOnceResult> {
    let pods = first_sets(sources).await;
    info!(pods = pods.len(), "runonce: starting the static pods");
    let mut runs = JoinSet::new();
    for pod in pods {
        let span = info_span!("run_once", pod = %log_ref(&pod), uid = %pod.metadata.uid);
        runs.spawn(run_pod(Arc::clone(&ctx), pod).instrument(span));
    }
    let mut results = Vec::new();
    while let Some(done) = runs.join_next().await {
        match done {
            Ok(result) => results.push(result),
            Err(e) => results.push(RunOnceResult {
                pod: "<unknown>".into(),
                failure: Some(format!("pod task failed: {e}")),
            }),
        }
    }
    results.sort_by(|a, b| a.pod.cmp(&b.pod));
    results
}
