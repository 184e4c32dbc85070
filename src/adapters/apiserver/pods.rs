//! The node's pods through kube-rs: list and watch with a field selector, status patches,
//! deletion with a uid precondition. Pods are read as `DynamicObject`s and handed on as
//! JSON, so a pod whose spec the domain cannot decode affects only itself.

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod as KubePod;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
    WatchEvent, WatchParams,
};
use serde_json::Value;

use super::errors::{conversion, Answer};
use super::{Budget, Connection, KubeClients};
use crate::ports::api::{
    CallError, CallErrorKind, PodApi, PodList, PodWatch, PodWatchEvent, PodsError,
};

/// How long one watch request lasts before the server ends it (client-go picks 5-10 min).
const WATCH_TIMEOUT_SECS: u32 = 290;

fn pods_resource() -> ApiResource {
    ApiResource::erase::<KubePod>(&())
}

fn call_error(verb: &'static str, namespace: &str, name: &str, source: CallError) -> PodsError {
    PodsError::Call {
        verb,
        namespace: namespace.into(),
        name: name.into(),
        source,
    }
}

fn answer_error(
    verb: &'static str,
    namespace: &str,
    name: &str,
    answer: Answer,
    source: CallError,
) -> PodsError {
    let (namespace, name) = (namespace.to_owned(), name.to_owned());
    match answer {
        Answer::NotFound => PodsError::NotFound { namespace, name },
        Answer::Conflict => PodsError::Conflict { namespace, name },
        _ => PodsError::Call {
            verb,
            namespace,
            name,
            source,
        },
    }
}

impl KubeClients {
    fn all_pods(&self) -> Api<DynamicObject> {
        Api::all_with(self.connection.client.clone(), &pods_resource())
    }

    fn pods_in(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.connection.client.clone(), namespace, &pods_resource())
    }
}

fn to_json(object: &DynamicObject) -> Result<Value, CallError> {
    let mut value = serde_json::to_value(object).map_err(conversion)?;
    value["apiVersion"] = "v1".into();
    value["kind"] = "Pod".into();
    Ok(value)
}

struct KubePodWatch {
    /// In a mutex only so the watch is `Sync`; one reader at a time anyway.
    stream: tokio::sync::Mutex<BoxStream<'static, Result<WatchEvent<DynamicObject>, kube::Error>>>,
    connection: std::sync::Arc<Connection>,
    resource_version: String,
}

#[async_trait]
impl PodWatch for KubePodWatch {
    async fn next(&mut self) -> Option<Result<PodWatchEvent, PodsError>> {
        let event = match self.stream.get_mut().next().await? {
            Ok(event) => event,
            Err(e) => {
                let (_, source) = self.connection.classify(e);
                return Some(Err(call_error("watch", "", "", source)));
            }
        };
        let converted =
            |o: &DynamicObject| to_json(o).map_err(|source| call_error("watch", "", "", source));
        Some(match event {
            WatchEvent::Added(o) => converted(&o).map(PodWatchEvent::Added),
            WatchEvent::Modified(o) => converted(&o).map(PodWatchEvent::Modified),
            WatchEvent::Deleted(o) => converted(&o).map(PodWatchEvent::Deleted),
            WatchEvent::Bookmark(b) => Ok(PodWatchEvent::Bookmark(b.metadata.resource_version)),
            WatchEvent::Error(status) if status.code == 410 => Err(PodsError::Gone {
                resource_version: self.resource_version.clone(),
            }),
            WatchEvent::Error(status) => Err(call_error(
                "watch",
                "",
                "",
                CallError::new(CallErrorKind::Other, status.message.clone()),
            )),
        })
    }
}

#[async_trait]
impl PodApi for KubeClients {
    async fn list_pods(&self, field_selector: &str) -> Result<PodList, PodsError> {
        let api = self.all_pods();
        let params = ListParams::default().fields(field_selector);
        let list = self
            .connection
            .call(Budget::Api, api.list(&params))
            .await
            .map_err(|e| call_error("list", "", "", e))?
            .map_err(|e| call_error("list", "", "", self.connection.classify(e).1))?;
        let items = list
            .items
            .iter()
            .map(to_json)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| call_error("list", "", "", e))?;
        Ok(PodList {
            items,
            resource_version: list.metadata.resource_version.unwrap_or_default(),
        })
    }

    async fn watch_pods(
        &self,
        field_selector: &str,
        resource_version: &str,
    ) -> Result<Box<dyn PodWatch>, PodsError> {
        let api = self.all_pods();
        let params = WatchParams::default()
            .fields(field_selector)
            .timeout(WATCH_TIMEOUT_SECS);
        self.connection.limits.wait(Budget::Api).await;
        // Only the opening is bounded by the call timeout: the stream lasts minutes.
        let opened = tokio::time::timeout(
            self.connection.timeout,
            api.watch(&params, resource_version),
        )
        .await
        .map_err(|_| {
            call_error(
                "watch",
                "",
                "",
                super::errors::timed_out(self.connection.timeout),
            )
        })?;
        let stream = match opened {
            Ok(stream) => stream.boxed(),
            Err(e) => {
                let (_, source) = self.connection.classify(e);
                if source.message.contains("too old") {
                    return Err(PodsError::Gone {
                        resource_version: resource_version.into(),
                    });
                }
                return Err(call_error("watch", "", "", source));
            }
        };
        Ok(Box::new(KubePodWatch {
            stream: tokio::sync::Mutex::new(stream),
            connection: self.connection.clone(),
            resource_version: resource_version.into(),
        }))
    }

    async fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, PodsError> {
        let api = self.pods_in(namespace);
        let params = PatchParams::default();
        let stored = self
            .connection
            .call(
                Budget::Api,
                api.patch_status(name, &params, &Patch::Strategic(patch)),
            )
            .await
            .map_err(|e| call_error("patch status of", namespace, name, e))?;
        match stored {
            Ok(pod) => to_json(&pod).map_err(|e| call_error("patch status of", namespace, name, e)),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                Err(answer_error(
                    "patch status of",
                    namespace,
                    name,
                    answer,
                    source,
                ))
            }
        }
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period_seconds: i64,
    ) -> Result<(), PodsError> {
        let api = self.pods_in(namespace);
        let params = DeleteParams {
            grace_period_seconds: u32::try_from(grace_period_seconds.max(0)).ok(),
            preconditions: Some(Preconditions {
                uid: Some(uid.into()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let deleted = self
            .connection
            .call(Budget::Api, api.delete(name, &params))
            .await
            .map_err(|e| call_error("delete", namespace, name, e))?;
        match deleted {
            Ok(_) => Ok(()),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                Err(answer_error("delete", namespace, name, answer, source))
            }
        }
    }
}
