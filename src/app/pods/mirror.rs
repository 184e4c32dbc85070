//! The mirror pods of the static pods (connected mode): list the node's mirrors, ask the
//! domain which to delete and create (`plan_mirrors`), do it, and wait for a change (a
//! mirror added, deleted or marked for deletion in the API, the static pods, the Node's
//! registration). Failures back off; the static pods run on whatever the API server does.

use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::app::node::failures::FailureLog;
use crate::domain::pod::mirror::{plan_mirrors, DeleteReason, NodeOwner};
use crate::domain::pod::Pod;
use crate::ports::api::{ApiClients, MirrorPodsError};
use crate::ports::error::Chain;

/// How long one wait for a change lasts before the mirrors are listed again anyway.
const RELIST_EVERY: Duration = Duration::from_secs(60);
/// The back-off after a failed list or action: from a second to a minute.
const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What the mirror loop follows.
pub struct MirrorInputs {
    pub clients: watch::Receiver<ApiClients>,
    pub node_name: String,
    /// The Node's uid once registered: mirrors are created only then.
    pub node_uid: watch::Receiver<Option<String>>,
    /// The static pods the pod loop runs.
    pub static_pods: watch::Receiver<Vec<Pod>>,
}

/// Keeps the mirrors in line with the static pods until the task is aborted.
pub async fn run_mirror_loop(mut inputs: MirrorInputs) {
    let node = inputs.node_name.clone();
    let mut failures = FailureLog::new("syncing mirror pods");
    let mut backoff = BACKOFF_START;
    loop {
        let api = inputs.clients.borrow().mirror_pods.clone();
        let list = match api.list_mirror_pods(&node).await {
            Ok(list) => list,
            Err(error) => {
                failures.failed(&error);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let owner = inputs
            .node_uid
            .borrow_and_update()
            .clone()
            .map(|uid| NodeOwner {
                name: node.clone(),
                uid,
            });
        let pods = inputs.static_pods.borrow_and_update().clone();
        let plan = plan_mirrors(&pods, &list.mirrors, owner.as_ref());
        let mut failed = false;
        for delete in &plan.delete {
            let why = match delete.reason {
                DeleteReason::Outdated => "Deleted mirror pod because it is outdated",
                DeleteReason::BeingDeleted => "Deleting mirror pod marked for deletion",
                DeleteReason::Orphaned => "Deleting orphaned mirror pod",
            };
            match api
                .delete_mirror_pod(&delete.namespace, &delete.name, &delete.uid)
                .await
            {
                Ok(()) => {
                    info!(pod = %format!("{}/{}", delete.namespace, delete.name), uid = %delete.uid, "{why}")
                }
                Err(error) => {
                    warn!(error = %Chain(&error), "Failed deleting a mirror pod");
                    failed = true;
                }
            }
        }
        for body in &plan.create {
            let name = format!(
                "{}/{}",
                body["metadata"]["namespace"].as_str().unwrap_or_default(),
                body["metadata"]["name"].as_str().unwrap_or_default()
            );
            match api.create_mirror_pod(body).await {
                Ok(()) => info!(pod = %name, "Created a mirror pod for static pod"),
                // The one deleted is not gone yet: try again shortly.
                Err(MirrorPodsError::AlreadyExists { .. }) => {
                    debug!(pod = %name, "mirror pod still present; retrying");
                    failed = true;
                }
                Err(error) => {
                    warn!(pod = %name, error = %Chain(&error), "Failed creating a mirror pod for");
                    failed = true;
                }
            }
        }
        if failed {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
            continue;
        }
        failures.succeeded();
        backoff = BACKOFF_START;
        if !plan.is_empty() {
            // Acted: list again to see the result.
            continue;
        }
        // No static pod and no mirror: nothing in the API can concern this loop until a
        // static pod comes (an idle node sends no request for mirrors).
        let idle = pods.is_empty() && list.mirrors.is_empty();
        let watch_api = async {
            if idle {
                std::future::pending::<()>().await;
            }
            api.wait_mirror_change(&node, &list.resource_version, RELIST_EVERY)
                .await
        };
        tokio::select! {
            waited = watch_api => {
                if let Err(error) = waited {
                    debug!(error = %Chain(&error), "mirror pod watch broke; listing again");
                    tokio::time::sleep(BACKOFF_START).await;
                }
            }
            changed = inputs.static_pods.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = inputs.node_uid.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::fake::api::FakeApiServer;
    use crate::domain::pod::{CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION};

    fn static_pod(hash: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = "web-n1".into();
        pod.metadata.namespace = "default".into();
        pod.metadata
            .annotations
            .insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
        pod.metadata
            .annotations
            .insert(CONFIG_HASH_ANNOTATION.into(), hash.into());
        pod.spec.node_name = "n1".into();
        pod
    }

    async fn until(what: &str, mut check: impl FnMut() -> bool) {
        for _ in 0..500 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test]
    async fn mirrors_follow_the_static_pods_and_the_registration() {
        let api = FakeApiServer::new();
        let (_clients_tx, clients) = watch::channel(api.clients());
        let (uid_tx, node_uid) = watch::channel(None);
        let (pods_tx, static_pods) = watch::channel(vec![static_pod("h1")]);
        let task = tokio::spawn(run_mirror_loop(MirrorInputs {
            clients,
            node_name: "n1".into(),
            node_uid,
            static_pods,
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            api.pod("default", "web-n1").is_none(),
            "created before registration"
        );
        uid_tx.send_replace(Some("node-uid".into()));
        until("the mirror", || api.pod("default", "web-n1").is_some()).await;
        let first = api.pod("default", "web-n1").unwrap_or_default();
        assert_eq!(first["metadata"]["ownerReferences"][0]["uid"], "node-uid");

        // Deleted in the API: it comes back with another uid.
        api.mark_pod_deleted("default", "web-n1");
        until("a new mirror", || {
            api.pod("default", "web-n1")
                .is_some_and(|p| p["metadata"]["uid"] != first["metadata"]["uid"])
        })
        .await;

        // The static pod changed: the stale mirror is replaced.
        pods_tx.send_replace(vec![static_pod("h2")]);
        until("the mirror of the new hash", || {
            api.pod("default", "web-n1").is_some_and(|p| {
                p["metadata"]["annotations"]["kubernetes.io/config.mirror"] == "h2"
            })
        })
        .await;

        // The static pod is gone: so is its mirror.
        pods_tx.send_replace(Vec::new());
        until("no mirror", || api.pod("default", "web-n1").is_none()).await;
        task.abort();
    }

    #[tokio::test]
    async fn without_static_pods_the_api_is_listed_once() {
        let api = FakeApiServer::new();
        let (_clients_tx, clients) = watch::channel(api.clients());
        let (_uid_tx, node_uid) = watch::channel(Some("node-uid".to_string()));
        let (pods_tx, static_pods) = watch::channel(Vec::new());
        let task = tokio::spawn(run_mirror_loop(MirrorInputs {
            clients,
            node_name: "n1".into(),
            node_uid,
            static_pods,
        }));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(api.count("list pods"), 1);
        pods_tx.send_replace(vec![static_pod("h1")]);
        until("the mirror", || api.pod("default", "web-n1").is_some()).await;
        task.abort();
    }

    #[tokio::test]
    async fn an_api_server_down_is_retried() {
        let api = FakeApiServer::new();
        api.set_down(true);
        let (_clients_tx, clients) = watch::channel(api.clients());
        let (_uid_tx, node_uid) = watch::channel(Some("node-uid".to_string()));
        let (_pods_tx, static_pods) = watch::channel(vec![static_pod("h1")]);
        let task = tokio::spawn(run_mirror_loop(MirrorInputs {
            clients,
            node_name: "n1".into(),
            node_uid,
            static_pods,
        }));
        tokio::time::sleep(Duration::from_millis(300)).await;
        api.set_down(false);
        until("the mirror after the outage", || {
            api.pod("default", "web-n1").is_some()
        })
        .await;
        task.abort();
    }
}
