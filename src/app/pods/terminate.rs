//! Stopping a pod: a kill for good (eviction, a finished pod) and the termination of a
//! pod no longer desired, both carrying out the domain's termination plan.

use std::path::PathBuf;

use tracing::{info, warn};

use super::probes;
use super::sync::{lock, SyncContext};
use super::volumes::off_runtime;
use crate::app::pods::runtime_state::pod_runtime_view;
use crate::domain::kuberuntime::backoff::image_pull_key;
use crate::domain::kuberuntime::requests::{pod_dir, pod_log_dir};
use crate::domain::kuberuntime::runtime::{ContainerState, PodRuntimeStatus};
use crate::domain::kuberuntime::teardown::{self, Stopping, TerminationPlan};
use crate::domain::pod::Pod;
use crate::ports::error::Chain;

/// Carries out the domain's termination plan: each group of live containers stopped at
/// once (each with its `preStop` hook within the grace period), then the ready
/// sandboxes. `pod` is the spec when known.
pub(super) async fn stop_pod(
    ctx: &SyncContext,
    pod: Option<&Pod>,
    ip: &str,
    plan: &TerminationPlan,
) {
    for group in &plan.stop_groups {
        let kills: Vec<_> = group
            .iter()
            .map(|c| probes::stop_kill(&c.name, &c.id, plan.grace_secs))
            .collect();
        futures_util::future::join_all(
            kills
                .iter()
                .map(|kill| probes::kill_container(ctx, pod, kill, ip)),
        )
        .await;
    }
    for id in &plan.stop_sandboxes {
        if let Err(error) = ctx.runtime.stop_pod_sandbox(id).await {
            warn!(sandbox = %id, error = %Chain(&error), "failed to stop pod sandbox");
        }
    }
}

/// Kills the pod for good (an eviction): stops its containers with `grace_secs` (at
/// least upstream's 2 s) and then its sandbox, keeping them for their logs and status.
/// Returns what the runtime holds afterwards.
pub async fn kill_pod(ctx: &SyncContext, pod: &Pod, grace_secs: i64) -> PodRuntimeStatus {
    let uid = &pod.metadata.uid;
    let before = match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
        Ok(view) => view.status,
        Err(error) => {
            warn!(error = %Chain(&error), "cannot read the pod's runtime status to kill it");
            return PodRuntimeStatus::default();
        }
    };
    let plan = teardown::termination_plan(Some(pod), &before, Stopping::KilledWith(grace_secs));
    info!(grace_period_secs = plan.grace_secs, "killing pod");
    let ip = probes::kill_pod_ip(ctx, Some(pod), &before);
    stop_pod(ctx, Some(pod), &ip, &plan).await;
    match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
        Ok(view) => view.status,
        Err(_) => before,
    }
}

/// Terminates a pod that is no longer desired: stops it with its grace period, then
/// removes its containers, sandboxes, volumes folder and logs. `pod` is its last spec
/// when known. Returns whether everything was removed.
pub async fn terminate_pod(ctx: &SyncContext, uid: &str, pod: Option<&Pod>) -> bool {
    let view = match pod_runtime_view(ctx.runtime.as_ref(), uid).await {
        Ok(view) => view,
        Err(error) => {
            warn!(error = %Chain(&error), "cannot read the pod's runtime status to terminate it");
            return false;
        }
    };
    // A pod whose spec is gone (deleted while rkubelet was down) stops with what its
    // containers recorded: its grace period and their preStop hooks, as upstream's.
    let restored = pod
        .is_none()
        .then(|| view.status.restored_pod())
        .filter(|p| !p.metadata.name.is_empty());
    let stopping = pod.or(restored.as_ref());
    let plan = teardown::termination_plan(stopping, &view.status, Stopping::Spec);
    info!(
        grace_period_secs = plan.grace_secs,
        restored = restored.is_some(),
        "terminating pod"
    );
    let ip = probes::kill_pod_ip(ctx, stopping, &view.status);
    stop_pod(ctx, stopping, &ip, &plan).await;
    let mut clean = true;
    let removal = teardown::removal(&view.status);
    for id in &removal.containers {
        let mut removed = ctx.runtime.remove_container(id).await;
        let exited = view
            .status
            .containers
            .iter()
            .any(|c| c.id == *id && c.state == ContainerState::Exited);
        if removed.is_err() && exited {
            // A container listed as exited may still have a running task (rkubelet killed
            // while it started; found by fault test 1): stop it, then remove it.
            let _ = ctx.runtime.stop_container(id, 0).await;
            removed = ctx.runtime.remove_container(id).await;
        }
        if let Err(error) = removed {
            warn!(container_id = %id, error = %Chain(&error), "failed to remove container");
            clean = false;
        }
    }
    for id in &removal.sandboxes {
        if let Err(error) = ctx.runtime.remove_pod_sandbox(id).await {
            warn!(sandbox = %id, error = %Chain(&error), "failed to remove pod sandbox");
            clean = false;
        }
    }
    // Only now that its containers are gone may the pod's cgroup go.
    if clean {
        if let Err(error) = ctx.containers.remove_pod(uid).await {
            warn!(error = %Chain(&error), "failed to remove the pod's cgroup");
            clean = false;
        }
    }
    // tmpfs volumes (memory emptyDirs, secrets) and subpath binds are unmounted before
    // the folder goes; with one left, the folder stays.
    if !remove_pod_dir(ctx, pod_dir(&ctx.requests, uid)).await {
        clean = false;
    }
    ctx.volumes.forget(uid);
    if let Some(pod) = pod {
        let dir = pod_log_dir(&ctx.requests, pod);
        if let Err(error) = off_runtime(&ctx.volumes.files(), move |f| f.remove_dir_all(&dir)).await
        {
            warn!(error = %Chain(&error), "failed to remove pod folder");
        }
        let mut backoff = lock(&ctx.image_backoff);
        for c in pod.spec.all_containers() {
            backoff.reset(&image_pull_key(uid, &c.image));
        }
    }
    info!(removed = clean, "pod terminated");
    clean
}

/// Unmounts what is mounted under a pod's folder and removes it (kept with a mount left
/// in it); whether it went. Every failure is logged.
pub(super) async fn remove_pod_dir(ctx: &SyncContext, dir: PathBuf) -> bool {
    // CSI volumes are their drivers' to unmount; one left keeps the folder.
    if !ctx.volumes.tear_down_csi(&dir).await {
        return false;
    }
    let files = ctx.volumes.files();
    let uid = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let removed = tokio::task::spawn_blocking(move || files.remove_pod_dir(&dir)).await;
    match removed {
        Ok(Ok(())) => {
            // The block was kept in the folder: with it gone, the IDs are free.
            ctx.userns.release(&uid);
            true
        }
        Ok(Err(errors)) => {
            for error in errors {
                warn!(error = %Chain(&error), "failed to remove the pod's folder");
            }
            false
        }
        Err(error) => {
            warn!(error = %Chain(&error), "failed to remove the pod's folder");
            false
        }
    }
}
