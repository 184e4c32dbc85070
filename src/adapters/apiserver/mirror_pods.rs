//! Mirror pods through kube-rs: the node's pods by field selector, the mirror annotation
//! read from them; create; delete with grace 0 and a uid precondition.

use std::time::Duration;

use async_trait::async_trait;
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod as KubePod;
use kube::api::{
    Api, DeleteParams, ListParams, PostParams, Preconditions, WatchEvent, WatchParams,
};
use serde_json::Value;

use super::errors::{conversion, Answer};
use super::{Budget, KubeClients};
use crate::domain::pod::mirror::MirrorPod;
use crate::domain::pod::CONFIG_MIRROR_ANNOTATION;
use crate::ports::api::{CallError, MirrorList, MirrorPodApi, MirrorPodsError};

fn node_selector(node: &str) -> String {
    format!("spec.nodeName={node}")
}

/// The pod as a mirror, when it is one.
fn mirror_of(pod: &KubePod) -> Option<MirrorPod> {
    let meta = &pod.metadata;
    let hash = meta.annotations.as_ref()?.get(CONFIG_MIRROR_ANNOTATION)?;
    Some(MirrorPod {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        mirror_hash: hash.clone(),
        deleting: meta.deletion_timestamp.is_some(),
    })
}

fn call_error(
    verb: &'static str,
    namespace: &str,
    name: &str,
    source: CallError,
) -> MirrorPodsError {
    MirrorPodsError::Call {
        verb,
        namespace: namespace.into(),
        name: name.into(),
        source,
    }
}

impl KubeClients {
    fn pods(&self) -> Api<KubePod> {
        Api::all(self.connection.client.clone())
    }
}

#[async_trait]
impl MirrorPodApi for KubeClients {
    async fn list_mirror_pods(&self, node: &str) -> Result<MirrorList, MirrorPodsError> {
        let params = ListParams::default().fields(&node_selector(node));
        let list = self
            .connection
            .call(Budget::Api, self.pods().list(&params))
            .await
            .map_err(|e| call_error("list", "", node, e))?
            .map_err(|e| call_error("list", "", node, self.connection.classify(e).1))?;
        Ok(MirrorList {
            mirrors: list.items.iter().filter_map(mirror_of).collect(),
            resource_version: list.metadata.resource_version.unwrap_or_default(),
        })
    }

    async fn wait_mirror_change(
        &self,
        node: &str,
        resource_version: &str,
        within: Duration,
    ) -> Result<(), MirrorPodsError> {
        let secs = u32::try_from(within.as_secs().clamp(1, 290)).unwrap_or(290);
        let params = WatchParams::default()
            .fields(&node_selector(node))
            .timeout(secs);
        self.connection.limits.wait(Budget::Api).await;
        let api = self.pods();
        let watched = async {
            let mut stream = api.watch(&params, resource_version).await?.boxed();
            while let Some(event) = stream.try_next().await? {
                // Status writes to mirrors come through here too: only what changes the
                // plan ends the wait.
                match event {
                    WatchEvent::Added(p) | WatchEvent::Deleted(p) if mirror_of(&p).is_some() => {
                        return Ok(())
                    }
                    WatchEvent::Modified(p) if mirror_of(&p).is_some_and(|m| m.deleting) => {
                        return Ok(())
                    }
                    WatchEvent::Error(_) => return Ok(()),
                    _ => {}
                }
            }
            Ok::<_, kube::Error>(())
        };
        match tokio::time::timeout(within + Duration::from_secs(5), watched).await {
            Err(_) | Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(call_error("watch", "", node, self.connection.classify(e).1)),
        }
    }

    async fn create_mirror_pod(&self, body: &Value) -> Result<(), MirrorPodsError> {
        let meta = &body["metadata"];
        let namespace = meta["namespace"].as_str().unwrap_or("default").to_owned();
        let name = meta["name"].as_str().unwrap_or_default().to_owned();
        let pod: KubePod = serde_json::from_value(body.clone())
            .map_err(|e| call_error("create", &namespace, &name, conversion(e)))?;
        let api: Api<KubePod> = Api::namespaced(self.connection.client.clone(), &namespace);
        match self
            .connection
            .call(Budget::Api, api.create(&PostParams::default(), &pod))
            .await
            .map_err(|e| call_error("create", &namespace, &name, e))?
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                Err(match answer {
                    Answer::AlreadyExists => MirrorPodsError::AlreadyExists { namespace, name },
                    _ => call_error("create", &namespace, &name, source),
                })
            }
        }
    }

    async fn delete_mirror_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<(), MirrorPodsError> {
        let api: Api<KubePod> = Api::namespaced(self.connection.client.clone(), namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .connection
            .call(Budget::Api, api.delete(name, &params))
            .await
            .map_err(|e| call_error("delete", namespace, name, e))?
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                match answer {
                    // Gone already, or another pod by now (the precondition failed).
                    Answer::NotFound | Answer::Conflict => Ok(()),
                    _ => Err(call_error("delete", namespace, name, source)),
                }
            }
        }
    }
}
