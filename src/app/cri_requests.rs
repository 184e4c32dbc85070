//! PLACEHOLDER until the `req` branch lands: the same signatures, minimal bodies.
use std::path::PathBuf;

use crate::domain::config::ResolvedConfig;
use crate::domain::pod::{container_hash, Container, Pod};
use crate::ports::runtime::{ContainerConfig, SandboxConfig};

#[derive(Debug, Clone, Default)]
pub struct ResolvConf;

pub struct RequestContext {
    pub pod_logs_dir: PathBuf,
    pub root_dir: PathBuf,
}

impl RequestContext {
    pub fn from_config(resolved: &ResolvedConfig, _host_dns: ResolvConf) -> Self {
        Self {
            pod_logs_dir: resolved.config.pod_logs_dir.clone().into(),
            root_dir: resolved.options.root_dir.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(String);

pub fn pod_log_dir(ctx: &RequestContext, pod: &Pod) -> PathBuf {
    let m = &pod.metadata;
    ctx.pod_logs_dir
        .join(format!("{}_{}_{}", m.namespace, m.name, m.uid))
}
pub fn pod_dir(ctx: &RequestContext, pod_uid: &str) -> PathBuf {
    ctx.root_dir.join("pods").join(pod_uid)
}
pub fn empty_dir_paths(_ctx: &RequestContext, _pod: &Pod) -> Vec<PathBuf> {
    Vec::new()
}
fn pod_labels(pod: &Pod) -> std::collections::BTreeMap<String, String> {
    let mut labels = pod.metadata.labels.clone();
    labels.insert("io.kubernetes.pod.name".into(), pod.metadata.name.clone());
    labels.insert(
        "io.kubernetes.pod.namespace".into(),
        pod.metadata.namespace.clone(),
    );
    labels.insert("io.kubernetes.pod.uid".into(), pod.metadata.uid.clone());
    labels
}
pub fn sandbox_config(ctx: &RequestContext, pod: &Pod, attempt: u32) -> SandboxConfig {
    SandboxConfig {
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        namespace: pod.metadata.namespace.clone(),
        attempt,
        hostname: pod.metadata.name.clone(),
        log_directory: pod_log_dir(ctx, pod).display().to_string(),
        labels: pod_labels(pod),
        annotations: pod.metadata.annotations.clone(),
        host_network: pod.spec.host_network,
        ..Default::default()
    }
}
pub fn container_config(
    _ctx: &RequestContext,
    pod: &Pod,
    container: &Container,
    restart_count: u32,
) -> Result<ContainerConfig, RequestError> {
    let mut labels = pod_labels(pod);
    labels.retain(|k, _| k.starts_with("io.kubernetes."));
    labels.insert(
        "io.kubernetes.container.name".into(),
        container.name.clone(),
    );
    let annotations = [
        (
            "io.kubernetes.container.hash".to_string(),
            format!("{:x}", container_hash(container)),
        ),
        (
            "io.kubernetes.container.restartCount".to_string(),
            restart_count.to_string(),
        ),
    ]
    .into_iter()
    .collect();
    Ok(ContainerConfig {
        name: container.name.clone(),
        attempt: restart_count,
        image: container.image.clone(),
        command: container.command.clone(),
        args: container.args.clone(),
        working_dir: container.working_dir.clone(),
        envs: container
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect(),
        labels,
        annotations,
        log_path: format!("{}/{}.log", container.name, restart_count),
    })
}
