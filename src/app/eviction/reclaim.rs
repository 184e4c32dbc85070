//! Node-level reclaim before evicting for disk (upstream's `DeleteAllUnusedContainers`
//! and `DeleteUnusedImages`): every dead container and sandbox that may go, then every
//! unused image.

use std::collections::BTreeSet;

use tracing::{debug, info, warn};

use super::image_gc::ImageGc;
use crate::app::pods::runtime_state::{pod_runtime_view, relist};
use crate::domain::eviction::manager::NodeReclaim;
use crate::domain::kuberuntime::gc::{
    dead_containers, dead_sandboxes, DEAD_CONTAINERS_PER_CONTAINER,
};
use crate::domain::kuberuntime::runtime::SandboxState;
use crate::ports::error::Chain;
use crate::ports::runtime::RuntimeService;

/// Removes dead containers beyond the newest of each container, and for pods that ended
/// (`terminal`: evicted, refused, finished) every dead container and sandbox; then
/// sandboxes that hold nothing any more. Returns how many containers went.
pub async fn delete_all_unused_containers(
    runtime: &dyn RuntimeService,
    terminal: &BTreeSet<String>,
) -> usize {
    let pods = match relist(runtime).await {
        Ok(pods) => pods,
        Err(error) => {
            warn!(error = %Chain(&error), "eviction manager: cannot list containers to remove the dead ones");
            return 0;
        }
    };
    let mut removed_total = 0;
    for uid in pods.keys() {
        let Ok(view) = pod_runtime_view(runtime, uid).await else {
            continue;
        };
        let ended = terminal.contains(uid);
        let keep = if ended {
            0
        } else {
            DEAD_CONTAINERS_PER_CONTAINER
        };
        let mut removed = BTreeSet::new();
        for c in dead_containers(&view.status, keep) {
            match runtime.remove_container(&c.id).await {
                Ok(()) => {
                    removed.insert(c.id.clone());
                }
                Err(error) => {
                    warn!(container = %c.name, container_id = %c.id, error = %Chain(&error), "failed to remove dead container")
                }
            }
        }
        removed_total += removed.len();
        let in_use: BTreeSet<&str> = view
            .sandbox_of
            .iter()
            .filter(|(container, _)| !removed.contains(*container))
            .map(|(_, sandbox)| sandbox.as_str())
            .collect();
        let mut sandboxes: Vec<&str> = dead_sandboxes(&view.status, &in_use)
            .iter()
            .map(|s| s.id.as_str())
            .collect();
        if ended {
            // An ended pod keeps no sandbox either.
            if let Some(newest) = view.status.sandboxes.first() {
                if newest.state == SandboxState::NotReady && !in_use.contains(newest.id.as_str()) {
                    sandboxes.push(newest.id.as_str());
                }
            }
        }
        for id in sandboxes {
            if let Err(error) = runtime.remove_pod_sandbox(id).await {
                warn!(sandbox = %id, error = %Chain(&error), "failed to remove dead sandbox");
            }
        }
    }
    debug!(removed = removed_total, "removed dead containers");
    removed_total
}

/// Carries out the node reclaim steps in order.
pub async fn reclaim(
    steps: &[NodeReclaim],
    runtime: &dyn RuntimeService,
    images: &ImageGc,
    terminal: &BTreeSet<String>,
) {
    for step in steps {
        match step {
            NodeReclaim::DeadContainers => {
                let removed = delete_all_unused_containers(runtime, terminal).await;
                info!(removed, "eviction manager: removed dead containers");
            }
            NodeReclaim::UnusedImages => match images.delete_unused_images().await {
                Ok(freed) => info!(
                    freed_bytes = freed,
                    "eviction manager: removed unused images"
                ),
                Err(error) => {
                    warn!(error = %Chain(&error), "eviction manager: unexpected error when attempting to reduce resource pressure")
                }
            },
        }
    }
}
