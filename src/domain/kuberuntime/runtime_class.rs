//! A pod's `runtimeClassName` resolved to the CRI runtime handler its sandbox is run
//! with (upstream's `runtimeclass.Manager.LookupRuntimeHandler`).

use crate::domain::pod::Pod;
use crate::domain::volumes::{Fetched, PodObjects};

/// Why a pod's RuntimeClass gives no handler, in upstream's words; the sandbox is not
/// created (`FailedCreatePodSandBox`) and the sync is retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeClassError {
    #[error("runtimeclass.node.k8s.io {name:?} not found")]
    NotFound { name: String },
    #[error("failed to lookup RuntimeClass {name}: {message}")]
    Failed { name: String, message: String },
    /// Without an API server upstream runs the pod with the default handler, which is
    /// not what it asked for: rkubelet refuses instead.
    #[error("RuntimeClass {name} cannot be looked up without an API server (--kubeconfig)")]
    NoClient { name: String },
}

/// The handler of the pod's RuntimeClass, from the class `objects` holds; empty (the
/// runtime's default) without a class.
pub fn runtime_handler(pod: &Pod, objects: &PodObjects) -> Result<String, RuntimeClassError> {
    let name = match pod.spec.runtime_class_name.as_deref() {
        None | Some("") => return Ok(String::new()),
        Some(name) => name,
    };
    match objects.runtime_classes.get(name) {
        Some(Fetched::Found(class)) => Ok(class.handler.clone()),
        Some(Fetched::NotFound) => Err(RuntimeClassError::NotFound { name: name.into() }),
        Some(Fetched::Failed(message)) => Err(RuntimeClassError::Failed {
            name: name.into(),
            message: message.clone(),
        }),
        None => Err(RuntimeClassError::NoClient { name: name.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::volumes::RuntimeClassData;

    fn pod(class: Option<&str>) -> Pod {
        let mut pod = Pod::default();
        pod.spec.runtime_class_name = class.map(Into::into);
        pod
    }

    #[test]
    fn a_class_gives_its_handler_and_none_the_default() {
        let mut objects = PodObjects::default();
        objects.runtime_classes.insert(
            "gvisor".into(),
            Fetched::Found(RuntimeClassData {
                handler: "runsc".into(),
            }),
        );
        assert_eq!(
            runtime_handler(&pod(Some("gvisor")), &objects),
            Ok("runsc".into())
        );
        assert_eq!(runtime_handler(&pod(None), &objects), Ok(String::new()));
        assert_eq!(runtime_handler(&pod(Some("")), &objects), Ok(String::new()));
    }

    #[test]
    fn a_class_that_cannot_be_read_is_named_as_upstream_names_it() {
        let mut objects = PodObjects::default();
        objects
            .runtime_classes
            .insert("gone".into(), Fetched::NotFound);
        objects
            .runtime_classes
            .insert("flaky".into(), Fetched::Failed("connection refused".into()));
        let text = |class| {
            runtime_handler(&pod(Some(class)), &objects)
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(
            text("gone").as_deref(),
            Some("runtimeclass.node.k8s.io \"gone\" not found")
        );
        assert_eq!(
            text("flaky").as_deref(),
            Some("failed to lookup RuntimeClass flaky: connection refused")
        );
        assert_eq!(
            text("unread").as_deref(),
            Some("RuntimeClass unread cannot be looked up without an API server (--kubeconfig)")
        );
    }
}
