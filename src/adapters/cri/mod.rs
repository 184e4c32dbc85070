//! The CRI (runtime.v1) client over a unix socket. The generated wire types stay
//! private to this module; callers see only the ports' domain types.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Code, Status};
use tower::service_fn;

use crate::domain::cgroup::CgroupDriver;
use crate::domain::kuberuntime::labels::{
    CONTAINER_BACKOFF_STEP_ANNOTATION, CONTAINER_HASH_ANNOTATION,
};
use crate::domain::kuberuntime::requests::{
    ContainerConfig, ContainerSecurity, IdMapping, LinuxResources, MountPropagation, NamespaceMode,
    NamespaceOptions, Protocol, SandboxConfig, SandboxSecurity, SeLinuxOption, SecurityProfile,
};
use crate::domain::kuberuntime::runtime::{
    ContainerEntry, ContainerEvent, ContainerEventKind, ContainerFilter, ContainerState,
    ContainerStatus, ExecResult, ImageInfo, KillSpec, RuntimeVersion, SandboxEntry, SandboxFilter,
    SandboxState, SandboxStatus,
};
use crate::ports::runtime::{
    cause, ContainerEventStream, ImageService, RuntimeError, RuntimeService,
};

#[allow(clippy::all, clippy::pedantic, clippy::unwrap_used, missing_docs)]
mod proto {
    tonic::include_proto!("runtime.v1");
}

mod runtime_stats;
mod status;

use proto::image_service_client::ImageServiceClient;
use proto::runtime_service_client::RuntimeServiceClient;

/// containerd accepts 16 MiB messages; tonic's default decode limit is 4 MiB.
const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// The CRI API version the kubelet announces in `Version`.
const KUBE_API_VERSION: &str = "0.1.0";

/// A CRI runtime and image client on one unix socket (one HTTP/2 connection,
/// established lazily on the first call).
#[derive(Debug, Clone)]
pub struct CriRuntime {
    endpoint: String,
    timeout: Duration,
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
}

impl CriRuntime {
    /// A client for `unix:///path/to.sock`; every call is bounded by `timeout`
    /// (`--runtime-request-timeout`). Connects lazily, so this succeeds even when
    /// the socket is not there yet; calls then fail with `Unavailable`.
    /// Must run inside a tokio runtime.
    pub fn connect(endpoint: &str, timeout: Duration) -> Result<CriRuntime, RuntimeError> {
        let unavailable = |reason: &str| RuntimeError::Unavailable {
            endpoint: endpoint.to_string(),
            source: cause(reason),
        };
        let path = endpoint
            .strip_prefix("unix://")
            .filter(|p| !p.is_empty())
            .ok_or_else(|| unavailable("only unix:// endpoints are supported"))?
            .to_string();
        let channel = Endpoint::from_static("http://localhost")
            .connect_timeout(timeout)
            .connect_with_connector_lazy(service_fn(move |_: Uri| {
                let path = path.clone();
                async move { UnixStream::connect(path).await.map(TokioIo::new) }
            }));
        Ok(CriRuntime {
            endpoint: endpoint.to_string(),
            timeout,
            runtime: RuntimeServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            images: ImageServiceClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(self.timeout);
        request
    }

    /// Runs one call under the request timeout and maps its status.
    async fn call<T, F>(&self, name: &str, fut: F) -> Result<T, RuntimeError>
    where
        F: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(map_status(&self.endpoint, name, self.timeout, status)),
            Err(_) => Err(deadline(name, self.timeout)),
        }
    }

    /// Every image the runtime holds (`ListImages` without a filter), for the node
    /// status and for image GC alike.
    async fn all_images(&self) -> Result<Vec<proto::Image>, RuntimeError> {
        let mut c = self.images.clone();
        let r = self
            .call(
                "ListImages",
                c.list_images(self.request(proto::ListImagesRequest { filter: None })),
            )
            .await?;
        Ok(r.images)
    }
}

struct CriEventStream {
    stream: tonic::Streaming<proto::ContainerEventResponse>,
    endpoint: String,
    timeout: Duration,
}

#[async_trait]
impl ContainerEventStream for CriEventStream {
    async fn next(&mut self) -> Option<Result<ContainerEvent, RuntimeError>> {
        match self.stream.message().await {
            Ok(Some(event)) => Some(Ok(container_event_from_wire(event))),
            Ok(None) => None,
            Err(status) => Some(Err(map_status(
                &self.endpoint,
                "GetContainerEvents",
                self.timeout,
                status,
            ))),
        }
    }
}

fn container_event_from_wire(event: proto::ContainerEventResponse) -> ContainerEvent {
    let kind = match proto::ContainerEventType::try_from(event.container_event_type) {
        Ok(proto::ContainerEventType::ContainerCreatedEvent) => ContainerEventKind::Created,
        Ok(proto::ContainerEventType::ContainerStartedEvent) => ContainerEventKind::Started,
        Ok(proto::ContainerEventType::ContainerDeletedEvent) => ContainerEventKind::Deleted,
        _ => ContainerEventKind::Stopped,
    };
    let pod_uid = event
        .pod_sandbox_status
        .and_then(|s| s.metadata)
        .map(|m| m.uid)
        .unwrap_or_default();
    ContainerEvent {
        container_id: event.container_id,
        kind,
        pod_uid,
    }
}

fn deadline(call: &str, timeout: Duration) -> RuntimeError {
    RuntimeError::DeadlineExceeded {
        call: call.to_string(),
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    }
}

/// A gRPC status as a cause: its code and message, with the transport's own causes
/// below it.
#[derive(Debug)]
struct CallStatus(Status);

impl std::fmt::Display for CallStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.0.code(), self.0.message())
    }
}

impl std::error::Error for CallStatus {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

/// Whether `status` is tonic's client-side timeout.
fn is_timeout(status: &Status) -> bool {
    std::error::Error::source(status).is_some_and(|e| e.is::<tonic::TimeoutExpired>())
        || status.message() == tonic::TimeoutExpired(()).to_string()
}

/// Maps a gRPC status of call `call` to the port's error.
fn map_status(endpoint: &str, call: &str, timeout: Duration, status: Status) -> RuntimeError {
    match status.code() {
        Code::NotFound => RuntimeError::NotFound(status.message().to_string()),
        Code::Unimplemented => RuntimeError::Unimplemented(call.to_string()),
        Code::Unavailable => RuntimeError::Unavailable {
            endpoint: endpoint.to_string(),
            source: Arc::new(CallStatus(status)),
        },
        Code::DeadlineExceeded => deadline(call, timeout),
        // tonic's own request timeout fires as CANCELLED "Timeout expired" (found by the
        // fault tests: a held call read "failed: Cancelled" rather than "timed out").
        Code::Cancelled if is_timeout(&status) => deadline(call, timeout),
        _ => RuntimeError::Failed {
            call: call.to_string(),
            source: Arc::new(CallStatus(status)),
        },
    }
}

fn to_hash_map(m: &BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn to_btree(m: HashMap<String, String>) -> BTreeMap<String, String> {
    m.into_iter().collect()
}

fn ns_mode_to_wire(mode: NamespaceMode) -> i32 {
    (match mode {
        NamespaceMode::Pod => proto::NamespaceMode::Pod,
        NamespaceMode::Container => proto::NamespaceMode::Container,
        NamespaceMode::Node => proto::NamespaceMode::Node,
        NamespaceMode::Target => proto::NamespaceMode::Target,
    }) as i32
}

fn namespaces_to_wire(n: &NamespaceOptions) -> proto::NamespaceOption {
    let mappings = |m: &[IdMapping]| {
        m.iter()
            .map(|m| proto::IdMapping {
                host_id: m.host_id,
                container_id: m.container_id,
                length: m.length,
            })
            .collect()
    };
    proto::NamespaceOption {
        network: ns_mode_to_wire(n.network),
        pid: ns_mode_to_wire(n.pid),
        ipc: ns_mode_to_wire(n.ipc),
        target_id: n.target_id.clone(),
        userns_options: n.user.as_ref().map(|u| proto::UserNamespace {
            mode: ns_mode_to_wire(u.mode),
            uids: mappings(&u.uids),
            gids: mappings(&u.gids),
        }),
    }
}

fn profile_to_wire(p: &SecurityProfile) -> proto::SecurityProfile {
    use proto::security_profile::ProfileType;
    let (kind, localhost_ref) = match p {
        SecurityProfile::RuntimeDefault => (ProfileType::RuntimeDefault, String::new()),
        SecurityProfile::Unconfined => (ProfileType::Unconfined, String::new()),
        SecurityProfile::Localhost(r) => (ProfileType::Localhost, r.clone()),
    };
    proto::SecurityProfile {
        profile_type: kind as i32,
        localhost_ref,
    }
}

fn selinux_to_wire(o: &SeLinuxOption) -> proto::SeLinuxOption {
    proto::SeLinuxOption {
        user: o.user.clone(),
        role: o.role.clone(),
        r#type: o.kind.clone(),
        level: o.level.clone(),
    }
}

fn int64(v: Option<i64>) -> Option<proto::Int64Value> {
    v.map(|value| proto::Int64Value { value })
}

fn resources_to_wire(r: &LinuxResources) -> proto::LinuxContainerResources {
    proto::LinuxContainerResources {
        cpu_period: r.cpu_period,
        cpu_quota: r.cpu_quota,
        cpu_shares: r.cpu_shares,
        memory_limit_in_bytes: r.memory_limit_in_bytes,
        oom_score_adj: r.oom_score_adj,
        cpuset_cpus: r.cpuset_cpus.clone(),
        hugepage_limits: r
            .hugepage_limits
            .iter()
            .map(|h| proto::HugepageLimit {
                page_size: h.page_size.clone(),
                limit: h.limit,
            })
            .collect(),
        ..Default::default()
    }
}

fn sandbox_security_to_wire(s: &SandboxSecurity) -> proto::LinuxSandboxSecurityContext {
    #[allow(deprecated)] // upstream v1.26 still sends the path beside the profile
    proto::LinuxSandboxSecurityContext {
        namespace_options: Some(namespaces_to_wire(&s.namespace_options)),
        selinux_options: s.selinux_options.as_ref().map(selinux_to_wire),
        run_as_user: int64(s.run_as_user),
        run_as_group: int64(s.run_as_group),
        supplemental_groups: s.supplemental_groups.clone(),
        privileged: s.privileged,
        seccomp: Some(profile_to_wire(&s.seccomp)),
        seccomp_profile_path: s.seccomp_profile_path.clone(),
        ..Default::default()
    }
}

fn container_security_to_wire(s: &ContainerSecurity) -> proto::LinuxContainerSecurityContext {
    proto::LinuxContainerSecurityContext {
        capabilities: s.capabilities.as_ref().map(|c| proto::Capability {
            add_capabilities: c.add.clone(),
            drop_capabilities: c.drop.clone(),
            ..Default::default()
        }),
        privileged: s.privileged,
        namespace_options: Some(namespaces_to_wire(&s.namespace_options)),
        selinux_options: s.selinux_options.as_ref().map(selinux_to_wire),
        run_as_user: int64(s.run_as_user),
        run_as_group: int64(s.run_as_group),
        run_as_username: s.run_as_username.clone(),
        readonly_rootfs: s.readonly_rootfs,
        supplemental_groups: s.supplemental_groups.clone(),
        no_new_privs: s.no_new_privs,
        masked_paths: s.masked_paths.clone(),
        readonly_paths: s.readonly_paths.clone(),
        seccomp: Some(profile_to_wire(&s.seccomp)),
        apparmor: s.apparmor.as_ref().map(profile_to_wire),
        ..Default::default()
    }
}

fn sandbox_to_wire(c: &SandboxConfig) -> proto::PodSandboxConfig {
    proto::PodSandboxConfig {
        metadata: Some(proto::PodSandboxMetadata {
            name: c.name.clone(),
            uid: c.uid.clone(),
            namespace: c.namespace.clone(),
            attempt: c.attempt,
        }),
        hostname: if c.host_network {
            String::new()
        } else {
            c.hostname.clone()
        },
        log_directory: c.log_directory.clone(),
        dns_config: c.dns.as_ref().map(|d| proto::DnsConfig {
            servers: d.servers.clone(),
            searches: d.searches.clone(),
            options: d.options.clone(),
        }),
        port_mappings: c
            .port_mappings
            .iter()
            .map(|p| proto::PortMapping {
                protocol: protocol_to_wire(p.protocol),
                container_port: p.container_port,
                host_port: p.host_port,
                host_ip: p.host_ip.clone(),
            })
            .collect(),
        labels: to_hash_map(&c.labels),
        annotations: to_hash_map(&c.annotations),
        linux: Some(proto::LinuxPodSandboxConfig {
            cgroup_parent: c.cgroup_parent.clone(),
            security_context: Some(sandbox_security_to_wire(&c.security)),
            sysctls: to_hash_map(&c.sysctls),
            overhead: Some(resources_to_wire(&c.overhead)),
            resources: Some(resources_to_wire(&c.resources)),
        }),
        ..Default::default()
    }
}

fn protocol_to_wire(p: Protocol) -> i32 {
    (match p {
        Protocol::Tcp => proto::Protocol::Tcp,
        Protocol::Udp => proto::Protocol::Udp,
        Protocol::Sctp => proto::Protocol::Sctp,
    }) as i32
}

fn container_to_wire(c: &ContainerConfig) -> proto::ContainerConfig {
    proto::ContainerConfig {
        metadata: Some(proto::ContainerMetadata {
            name: c.name.clone(),
            attempt: c.attempt,
        }),
        image: Some(proto::ImageSpec {
            image: c.image.clone(),
            ..Default::default()
        }),
        command: c.command.clone(),
        args: c.args.clone(),
        working_dir: c.working_dir.clone(),
        envs: c
            .envs
            .iter()
            .map(|(key, value)| proto::KeyValue {
                key: key.clone(),
                value: value.clone().into_bytes(),
            })
            .collect(),
        labels: to_hash_map(&c.labels),
        annotations: to_hash_map(&c.annotations),
        log_path: c.log_path.clone(),
        mounts: c
            .mounts
            .iter()
            .map(|m| proto::Mount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.clone(),
                readonly: m.readonly,
                propagation: match m.propagation {
                    MountPropagation::Private => proto::MountPropagation::PropagationPrivate,
                    MountPropagation::HostToContainer => {
                        proto::MountPropagation::PropagationHostToContainer
                    }
                    MountPropagation::Bidirectional => {
                        proto::MountPropagation::PropagationBidirectional
                    }
                }
                .into(),
                ..Default::default()
            })
            .collect(),
        devices: c
            .devices
            .iter()
            .map(|d| proto::Device {
                container_path: d.container_path.clone(),
                host_path: d.host_path.clone(),
                permissions: d.permissions.clone(),
            })
            .collect(),
        stdin: c.stdin,
        stdin_once: c.stdin_once,
        tty: c.tty,
        linux: Some(proto::LinuxContainerConfig {
            resources: Some(resources_to_wire(&c.linux)),
            security_context: Some(container_security_to_wire(&c.security)),
        }),
        ..Default::default()
    }
}

fn sandbox_state(state: i32) -> SandboxState {
    match proto::PodSandboxState::try_from(state) {
        Ok(proto::PodSandboxState::SandboxReady) => SandboxState::Ready,
        _ => SandboxState::NotReady,
    }
}

fn sandbox_state_to_wire(state: SandboxState) -> i32 {
    match state {
        SandboxState::Ready => proto::PodSandboxState::SandboxReady as i32,
        SandboxState::NotReady => proto::PodSandboxState::SandboxNotready as i32,
    }
}

fn container_state(state: i32) -> ContainerState {
    match proto::ContainerState::try_from(state) {
        Ok(proto::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(proto::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(proto::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

fn container_state_to_wire(state: ContainerState) -> i32 {
    (match state {
        ContainerState::Created => proto::ContainerState::ContainerCreated,
        ContainerState::Running => proto::ContainerState::ContainerRunning,
        ContainerState::Exited => proto::ContainerState::ContainerExited,
        ContainerState::Unknown => proto::ContainerState::ContainerUnknown,
    }) as i32
}

fn spec_hash(annotations: &HashMap<String, String>) -> u64 {
    annotations
        .get(CONTAINER_HASH_ANNOTATION)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

/// The crash-loop back-off step rkubelet recorded; `None` when absent or not a number.
fn backoff_step(annotations: &HashMap<String, String>) -> Option<u32> {
    annotations
        .get(CONTAINER_BACKOFF_STEP_ANNOTATION)
        .and_then(|s| s.parse().ok())
}

fn sandbox_status_from_wire(s: proto::PodSandboxStatus) -> SandboxStatus {
    let host_network = s
        .linux
        .as_ref()
        .and_then(|l| l.namespaces.as_ref())
        .and_then(|n| n.options.as_ref())
        .is_some_and(|o| o.network == proto::NamespaceMode::Node as i32);
    SandboxStatus {
        id: s.id,
        attempt: s.metadata.map(|m| m.attempt).unwrap_or(0),
        state: sandbox_state(s.state),
        created_at_nanos: s.created_at,
        host_network,
        ip: s.network.map(|n| n.ip).unwrap_or_default(),
    }
}

fn container_status_from_wire(s: proto::ContainerStatus) -> ContainerStatus {
    let (name, attempt) = s.metadata.map(|m| (m.name, m.attempt)).unwrap_or_default();
    ContainerStatus {
        hash: spec_hash(&s.annotations),
        backoff_step: backoff_step(&s.annotations),
        kill_spec: KillSpec::from_annotations(|k| s.annotations.get(k).map(String::as_str)),
        id: s.id,
        name,
        attempt,
        state: container_state(s.state),
        image: s.image.map(|i| i.image).unwrap_or_default(),
        image_ref: s.image_ref,
        exit_code: s.exit_code,
        reason: s.reason,
        message: s.message,
        created_at_nanos: s.created_at,
        started_at_nanos: s.started_at,
        finished_at_nanos: s.finished_at,
    }
}

#[async_trait]
impl RuntimeService for CriRuntime {
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "Version",
                c.version(self.request(proto::VersionRequest {
                    version: KUBE_API_VERSION.into(),
                })),
            )
            .await?;
        Ok(RuntimeVersion {
            runtime_name: r.runtime_name,
            runtime_version: r.runtime_version,
            runtime_api_version: r.runtime_api_version,
        })
    }

    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "RunPodSandbox",
                c.run_pod_sandbox(self.request(proto::RunPodSandboxRequest {
                    config: Some(sandbox_to_wire(config)),
                    runtime_handler: config.runtime_handler.clone(),
                })),
            )
            .await?;
        Ok(r.pod_sandbox_id)
    }

    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        let mut c = self.runtime.clone();
        self.call(
            "StopPodSandbox",
            c.stop_pod_sandbox(self.request(proto::StopPodSandboxRequest {
                pod_sandbox_id: sandbox_id.into(),
            })),
        )
        .await?;
        Ok(())
    }

    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        let mut c = self.runtime.clone();
        self.call(
            "RemovePodSandbox",
            c.remove_pod_sandbox(self.request(proto::RemovePodSandboxRequest {
                pod_sandbox_id: sandbox_id.into(),
            })),
        )
        .await?;
        Ok(())
    }

    async fn pod_sandbox_status(&self, sandbox_id: &str) -> Result<SandboxStatus, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "PodSandboxStatus",
                c.pod_sandbox_status(self.request(proto::PodSandboxStatusRequest {
                    pod_sandbox_id: sandbox_id.into(),
                    verbose: false,
                })),
            )
            .await?;
        r.status
            .map(sandbox_status_from_wire)
            .ok_or_else(|| RuntimeError::NotFound(format!("sandbox {sandbox_id}")))
    }

    async fn list_pod_sandboxes(
        &self,
        filter: &SandboxFilter,
    ) -> Result<Vec<SandboxEntry>, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "ListPodSandbox",
                c.list_pod_sandbox(self.request(proto::ListPodSandboxRequest {
                    filter: Some(proto::PodSandboxFilter {
                        id: filter.id.clone(),
                        state: filter.state.map(|s| proto::PodSandboxStateValue {
                            state: sandbox_state_to_wire(s),
                        }),
                        label_selector: to_hash_map(&filter.labels),
                    }),
                })),
            )
            .await?;
        Ok(r.items
            .into_iter()
            .map(|s| {
                let meta = s.metadata.unwrap_or_default();
                SandboxEntry {
                    status: SandboxStatus {
                        id: s.id,
                        attempt: meta.attempt,
                        state: sandbox_state(s.state),
                        created_at_nanos: s.created_at,
                        // The listing does not carry namespaces or IPs; ask pod_sandbox_status.
                        host_network: false,
                        ip: String::new(),
                    },
                    name: meta.name,
                    uid: meta.uid,
                    namespace: meta.namespace,
                    labels: to_btree(s.labels),
                    runtime_handler: s.runtime_handler,
                }
            })
            .collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> Result<String, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "CreateContainer",
                c.create_container(self.request(proto::CreateContainerRequest {
                    pod_sandbox_id: sandbox_id.into(),
                    config: Some(container_to_wire(config)),
                    sandbox_config: Some(sandbox_to_wire(sandbox)),
                })),
            )
            .await?;
        Ok(r.container_id)
    }

    async fn reopen_container_log(&self, container_id: &str) -> Result<(), RuntimeError> {
        let mut c = self.runtime.clone();
        self.call(
            "ReopenContainerLog",
            c.reopen_container_log(self.request(proto::ReopenContainerLogRequest {
                container_id: container_id.into(),
            })),
        )
        .await?;
        Ok(())
    }

    async fn update_container_cpuset(
        &self,
        container_id: &str,
        cpuset_cpus: &str,
    ) -> Result<(), RuntimeError> {
        let mut c = self.runtime.clone();
        self.call(
            "UpdateContainerResources",
            c.update_container_resources(self.request(proto::UpdateContainerResourcesRequest {
                container_id: container_id.into(),
                linux: Some(proto::LinuxContainerResources {
                    cpuset_cpus: cpuset_cpus.into(),
                    ..Default::default()
                }),
                ..Default::default()
            })),
        )
        .await?;
        Ok(())
    }

    async fn start_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        let mut c = self.runtime.clone();
        self.call(
            "StartContainer",
            c.start_container(self.request(proto::StartContainerRequest {
                container_id: container_id.into(),
            })),
        )
        .await?;
        Ok(())
    }

    async fn stop_container(
        &self,
        container_id: &str,
        timeout_secs: i64,
    ) -> Result<(), RuntimeError> {
        let mut c = self.runtime.clone();
        // The grace period extends the call: give it the request timeout on top.
        let grace = Duration::from_secs(u64::try_from(timeout_secs).unwrap_or(0));
        let budget = self.timeout.saturating_add(grace);
        let mut request = tonic::Request::new(proto::StopContainerRequest {
            container_id: container_id.into(),
            timeout: timeout_secs,
        });
        request.set_timeout(budget);
        match tokio::time::timeout(budget, c.stop_container(request)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(status)) => Err(map_status(&self.endpoint, "StopContainer", budget, status)),
            Err(_) => Err(deadline("StopContainer", budget)),
        }
    }

    async fn remove_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        let mut c = self.runtime.clone();
        self.call(
            "RemoveContainer",
            c.remove_container(self.request(proto::RemoveContainerRequest {
                container_id: container_id.into(),
            })),
        )
        .await?;
        Ok(())
    }

    async fn container_status(&self, container_id: &str) -> Result<ContainerStatus, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "ContainerStatus",
                c.container_status(self.request(proto::ContainerStatusRequest {
                    container_id: container_id.into(),
                    verbose: false,
                })),
            )
            .await?;
        r.status
            .map(container_status_from_wire)
            .ok_or_else(|| RuntimeError::NotFound(format!("container {container_id}")))
    }

    async fn list_containers(
        &self,
        filter: &ContainerFilter,
    ) -> Result<Vec<ContainerEntry>, RuntimeError> {
        let mut c = self.runtime.clone();
        let r = self
            .call(
                "ListContainers",
                c.list_containers(self.request(proto::ListContainersRequest {
                    filter: Some(proto::ContainerFilter {
                        id: filter.id.clone(),
                        state: filter.state.map(|s| proto::ContainerStateValue {
                            state: container_state_to_wire(s),
                        }),
                        pod_sandbox_id: filter.sandbox_id.clone(),
                        label_selector: to_hash_map(&filter.labels),
                    }),
                })),
            )
            .await?;
        Ok(r.containers
            .into_iter()
            .map(|k| {
                let meta = k.metadata.unwrap_or_default();
                let mut status = ContainerStatus::new(&k.id, &meta.name, container_state(k.state));
                status.attempt = meta.attempt;
                status.image = k.image.map(|i| i.image).unwrap_or_default();
                status.image_ref = k.image_ref;
                status.hash = spec_hash(&k.annotations);
                status.backoff_step = backoff_step(&k.annotations);
                status.kill_spec =
                    KillSpec::from_annotations(|a| k.annotations.get(a).map(String::as_str));
                status.created_at_nanos = k.created_at;
                ContainerEntry {
                    status,
                    sandbox_id: k.pod_sandbox_id,
                    labels: to_btree(k.labels),
                }
            })
            .collect())
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, RuntimeError> {
        let mut c = self.runtime.clone();
        // The command's own time comes on top of the request timeout, as for a stop.
        let budget = self.timeout.saturating_add(timeout);
        let mut request = tonic::Request::new(proto::ExecSyncRequest {
            container_id: container_id.into(),
            cmd: cmd.to_vec(),
            // Whole seconds, rounded up: 0 would mean no limit.
            timeout: i64::try_from(
                timeout
                    .as_secs()
                    .saturating_add(u64::from(timeout.subsec_nanos() > 0)),
            )
            .unwrap_or(i64::MAX),
        });
        request.set_timeout(budget);
        let r = match tokio::time::timeout(budget, c.exec_sync(request)).await {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(status)) => return Err(map_status(&self.endpoint, "ExecSync", budget, status)),
            Err(_) => return Err(deadline("ExecSync", budget)),
        };
        Ok(ExecResult {
            stdout: r.stdout,
            stderr: r.stderr,
            exit_code: r.exit_code,
        })
    }

    async fn streaming_url(
        &self,
        request: &crate::ports::runtime::StreamRequest,
    ) -> Result<String, RuntimeError> {
        use crate::ports::runtime::StreamRequest;
        let mut c = self.runtime.clone();
        let budget = self.timeout;
        let (call, answer) = match request.clone() {
            StreamRequest::Exec {
                container_id,
                cmd,
                tty,
                stdin,
                stdout,
                stderr,
            } => {
                let mut r = tonic::Request::new(proto::ExecRequest {
                    container_id,
                    cmd,
                    tty,
                    stdin,
                    stdout,
                    stderr,
                });
                r.set_timeout(budget);
                (
                    "Exec",
                    tokio::time::timeout(budget, c.exec(r))
                        .await
                        .map(|a| a.map(|r| r.into_inner().url)),
                )
            }
            StreamRequest::Attach {
                container_id,
                tty,
                stdin,
                stdout,
                stderr,
            } => {
                let mut r = tonic::Request::new(proto::AttachRequest {
                    container_id,
                    stdin,
                    tty,
                    stdout,
                    stderr,
                });
                r.set_timeout(budget);
                (
                    "Attach",
                    tokio::time::timeout(budget, c.attach(r))
                        .await
                        .map(|a| a.map(|r| r.into_inner().url)),
                )
            }
            StreamRequest::PortForward { sandbox_id, ports } => {
                let mut r = tonic::Request::new(proto::PortForwardRequest {
                    pod_sandbox_id: sandbox_id,
                    port: ports,
                });
                r.set_timeout(budget);
                (
                    "PortForward",
                    tokio::time::timeout(budget, c.port_forward(r))
                        .await
                        .map(|a| a.map(|r| r.into_inner().url)),
                )
            }
        };
        match answer {
            Ok(Ok(url)) => Ok(url),
            Ok(Err(status)) => Err(map_status(&self.endpoint, call, budget, status)),
            Err(_) => Err(deadline(call, budget)),
        }
    }

    async fn container_events(&self) -> Result<Box<dyn ContainerEventStream>, RuntimeError> {
        let mut c = self.runtime.clone();
        // A stream lives on: no request timeout, only the connect is bounded.
        let call = c.get_container_events(tonic::Request::new(proto::GetEventsRequest {}));
        let stream = match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => {
                return Err(map_status(
                    &self.endpoint,
                    "GetContainerEvents",
                    self.timeout,
                    status,
                ))
            }
            Err(_) => return Err(deadline("GetContainerEvents", self.timeout)),
        };
        Ok(Box::new(CriEventStream {
            stream,
            endpoint: self.endpoint.clone(),
            timeout: self.timeout,
        }))
    }

    async fn cgroup_driver(&self) -> Result<Option<CgroupDriver>, RuntimeError> {
        let mut c = self.runtime.clone();
        match self
            .call(
                "RuntimeConfig",
                c.runtime_config(self.request(proto::RuntimeConfigRequest {})),
            )
            .await
        {
            Ok(r) => Ok(r
                .linux
                .map(|l| match proto::CgroupDriver::try_from(l.cgroup_driver) {
                    Ok(proto::CgroupDriver::Cgroupfs) => CgroupDriver::Cgroupfs,
                    _ => CgroupDriver::Systemd,
                })),
            Err(RuntimeError::Unimplemented(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn runtime_handlers(
        &self,
    ) -> Result<Vec<crate::domain::kuberuntime::userns::RuntimeHandler>, RuntimeError> {
        Ok(self
            .status_response()
            .await?
            .runtime_handlers
            .into_iter()
            .map(|h| crate::domain::kuberuntime::userns::RuntimeHandler {
                name: h.name,
                user_namespaces: h.features.is_some_and(|f| f.user_namespaces),
            })
            .collect())
    }
}

#[async_trait]
impl ImageService for CriRuntime {
    async fn image_status(&self, image: &str) -> Result<Option<ImageInfo>, RuntimeError> {
        let mut c = self.images.clone();
        let r = self
            .call(
                "ImageStatus",
                c.image_status(self.request(proto::ImageStatusRequest {
                    image: Some(proto::ImageSpec {
                        image: image.into(),
                        ..Default::default()
                    }),
                    verbose: false,
                })),
            )
            .await?;
        Ok(r.image.map(|i| ImageInfo {
            id: i.id,
            repo_tags: i.repo_tags,
            repo_digests: i.repo_digests,
            size_bytes: i.size,
            uid: i.uid.map(|u| u.value),
            username: i.username,
        }))
    }

    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&crate::domain::kuberuntime::credentials::AuthConfig>,
    ) -> Result<String, RuntimeError> {
        let mut c = self.images.clone();
        let r = self
            .call(
                "PullImage",
                c.pull_image(self.request(proto::PullImageRequest {
                    image: Some(proto::ImageSpec {
                        image: image.into(),
                        ..Default::default()
                    }),
                    auth: auth.map(auth_config),
                    ..Default::default()
                })),
            )
            .await?;
        Ok(r.image_ref)
    }
}

/// The CRI's `AuthConfig` from the domain's.
fn auth_config(a: &crate::domain::kuberuntime::credentials::AuthConfig) -> proto::AuthConfig {
    proto::AuthConfig {
        username: a.username.clone(),
        password: a.password.clone(),
        auth: a.auth.clone(),
        server_address: a.server_address.clone(),
        identity_token: a.identity_token.clone(),
        registry_token: a.registry_token.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_configs_reach_the_cri_field_for_field() {
        let a = crate::domain::kuberuntime::credentials::AuthConfig {
            username: "u".into(),
            password: "p".into(),
            auth: "a".into(),
            server_address: "s".into(),
            identity_token: "i".into(),
            registry_token: "r".into(),
        };
        let c = auth_config(&a);
        assert_eq!(
            (c.username.as_str(), c.password.as_str(), c.auth.as_str()),
            ("u", "p", "a")
        );
        assert_eq!(
            (
                c.server_address.as_str(),
                c.identity_token.as_str(),
                c.registry_token.as_str()
            ),
            ("s", "i", "r")
        );
    }

    #[test]
    fn status_codes_map_to_port_errors() {
        let t = Duration::from_millis(1500);
        let e = |code| map_status("unix:///x", "Call", t, Status::new(code, "msg"));
        assert!(matches!(e(Code::NotFound), RuntimeError::NotFound(m) if m == "msg"));
        assert!(matches!(e(Code::Unimplemented), RuntimeError::Unimplemented(c) if c == "Call"));
        assert!(matches!(
            e(Code::Unavailable),
            RuntimeError::Unavailable { .. }
        ));
        assert!(matches!(
            e(Code::DeadlineExceeded),
            RuntimeError::DeadlineExceeded { call, timeout_ms: 1500 } if call == "Call"
        ));
        assert!(matches!(
            map_status(
                "unix:///x",
                "Call",
                t,
                Status::from_error(Box::new(tonic::TimeoutExpired(())))
            ),
            RuntimeError::DeadlineExceeded {
                timeout_ms: 1500,
                ..
            }
        ));
        assert!(matches!(e(Code::Cancelled), RuntimeError::Failed { .. }));
        let failed = e(Code::Unknown);
        assert!(matches!(&failed, RuntimeError::Failed { call, .. } if call == "Call"));
        // The status is kept as the cause, with its code and message.
        assert_eq!(
            crate::ports::error::Chain(&failed).to_string(),
            "runtime call Call failed: Unknown: msg"
        );
    }

    #[test]
    fn only_unix_endpoints_are_accepted() {
        let e = CriRuntime::connect("tcp://localhost:1", Duration::from_secs(1));
        assert!(matches!(e, Err(RuntimeError::Unavailable { .. })));
    }

    #[tokio::test]
    async fn absent_socket_is_unavailable() {
        let rt = CriRuntime::connect("unix:///nonexistent/cri.sock", Duration::from_secs(2));
        let Ok(rt) = rt else {
            panic!("lazy connect must succeed");
        };
        let e = rt.version().await;
        assert!(matches!(e, Err(RuntimeError::Unavailable { .. })), "{e:?}");
    }

    #[test]
    fn sandbox_wire_carries_dns_and_ports() {
        use crate::domain::kuberuntime::requests::{DnsConfig, PortMapping};
        let c = SandboxConfig {
            dns: Some(DnsConfig {
                servers: vec!["10.0.0.10".into()],
                searches: vec!["ns.svc.cluster.local".into()],
                options: vec!["ndots:5".into()],
            }),
            port_mappings: vec![PortMapping {
                protocol: Protocol::Udp,
                container_port: 53,
                host_port: 5353,
                host_ip: "127.0.0.1".into(),
            }],
            ..Default::default()
        };
        let w = sandbox_to_wire(&c);
        assert_eq!(
            w.dns_config,
            Some(proto::DnsConfig {
                servers: vec!["10.0.0.10".into()],
                searches: vec!["ns.svc.cluster.local".into()],
                options: vec!["ndots:5".into()],
            })
        );
        assert_eq!(
            w.port_mappings,
            vec![proto::PortMapping {
                protocol: proto::Protocol::Udp as i32,
                container_port: 53,
                host_port: 5353,
                host_ip: "127.0.0.1".into(),
            }]
        );
        assert_eq!(sandbox_to_wire(&SandboxConfig::default()).dns_config, None);
    }

    #[test]
    fn container_wire_carries_mounts_and_resources() {
        use crate::domain::kuberuntime::requests::{HugepageLimit, Mount};
        let c = ContainerConfig {
            mounts: vec![Mount {
                container_path: "/data".into(),
                host_path: "/srv/data".into(),
                readonly: true,
                propagation: MountPropagation::HostToContainer,
                ..Mount::default()
            }],
            linux: LinuxResources {
                cpu_period: 100_000,
                cpu_quota: 50_000,
                cpu_shares: 512,
                memory_limit_in_bytes: 1 << 30,
                oom_score_adj: -997,
                cpuset_cpus: "1".into(),
                hugepage_limits: vec![HugepageLimit {
                    page_size: "2MB".into(),
                    limit: 0,
                }],
            },
            stdin: true,
            stdin_once: true,
            tty: true,
            ..Default::default()
        };
        let w = container_to_wire(&c);
        assert_eq!(w.mounts.len(), 1);
        assert_eq!(w.mounts[0].container_path, "/data");
        assert_eq!(w.mounts[0].host_path, "/srv/data");
        assert_eq!(
            w.mounts[0].propagation,
            i32::from(proto::MountPropagation::PropagationHostToContainer)
        );
        assert!(w.mounts[0].readonly);
        assert!(w.stdin && w.stdin_once && w.tty);
        let r = w.linux.and_then(|l| l.resources).unwrap_or_default();
        assert_eq!(
            (r.cpu_period, r.cpu_quota, r.cpu_shares),
            (100_000, 50_000, 512)
        );
        assert_eq!(r.memory_limit_in_bytes, 1 << 30);
        assert_eq!(r.oom_score_adj, -997);
        assert_eq!(r.cpuset_cpus, "1");
    }

    #[test]
    fn a_pods_user_namespace_reaches_the_wire_and_none_leaves_it_to_the_runtime() {
        use crate::domain::kuberuntime::requests::UserNamespace;
        let mapping = IdMapping {
            host_id: 65536,
            container_id: 0,
            length: 65536,
        };
        let mut options = NamespaceOptions {
            user: Some(UserNamespace {
                mode: NamespaceMode::Pod,
                uids: vec![mapping],
                gids: vec![mapping],
            }),
            ..Default::default()
        };
        let wire = namespaces_to_wire(&options)
            .userns_options
            .unwrap_or_default();
        assert_eq!(wire.mode, proto::NamespaceMode::Pod as i32);
        let expected = proto::IdMapping {
            host_id: 65536,
            container_id: 0,
            length: 65536,
        };
        assert_eq!((wire.uids, wire.gids), (vec![expected], vec![expected]));
        options.user = None;
        assert_eq!(namespaces_to_wire(&options).userns_options, None);
    }

    #[test]
    fn security_contexts_reach_the_wire() {
        use crate::domain::kuberuntime::requests::Capability;
        let c = ContainerConfig {
            security: ContainerSecurity {
                capabilities: Some(Capability {
                    add: vec!["NET_ADMIN".into()],
                    drop: vec!["NET_RAW".into()],
                }),
                namespace_options: NamespaceOptions {
                    pid: NamespaceMode::Container,
                    ..Default::default()
                },
                run_as_user: Some(1000),
                run_as_group: Some(3000),
                readonly_rootfs: true,
                no_new_privs: true,
                supplemental_groups: vec![2000],
                masked_paths: vec!["/proc/kcore".into()],
                readonly_paths: vec!["/proc/sys".into()],
                seccomp: SecurityProfile::Localhost("/var/lib/kubelet/seccomp/a.json".into()),
                apparmor: Some(SecurityProfile::RuntimeDefault),
                ..Default::default()
            },
            ..Default::default()
        };
        let sc = container_to_wire(&c)
            .linux
            .and_then(|l| l.security_context)
            .unwrap_or_default();
        assert_eq!(sc.run_as_user, Some(proto::Int64Value { value: 1000 }));
        assert_eq!(sc.run_as_group, Some(proto::Int64Value { value: 3000 }));
        assert!(sc.readonly_rootfs && sc.no_new_privs && !sc.privileged);
        assert_eq!(sc.supplemental_groups, [2000]);
        assert_eq!(sc.masked_paths, ["/proc/kcore"]);
        assert_eq!(sc.readonly_paths, ["/proc/sys"]);
        let caps = sc.capabilities.unwrap_or_default();
        assert_eq!(
            (caps.add_capabilities, caps.drop_capabilities),
            (vec!["NET_ADMIN".to_owned()], vec!["NET_RAW".to_owned()])
        );
        let ns = sc.namespace_options.unwrap_or_default();
        assert_eq!(ns.pid, proto::NamespaceMode::Container as i32);
        assert_eq!(ns.network, proto::NamespaceMode::Pod as i32);
        let seccomp = sc.seccomp.unwrap_or_default();
        assert_eq!(
            seccomp.profile_type,
            proto::security_profile::ProfileType::Localhost as i32
        );
        assert_eq!(seccomp.localhost_ref, "/var/lib/kubelet/seccomp/a.json");
        assert!(sc.apparmor.is_some());

        let s = SandboxConfig {
            security: SandboxSecurity {
                privileged: true,
                seccomp: SecurityProfile::RuntimeDefault,
                seccomp_profile_path: "runtime/default".into(),
                run_as_user: Some(1000),
                ..Default::default()
            },
            sysctls: [("net.ipv4.ping_group_range".to_owned(), "0 1".to_owned())].into(),
            resources: LinuxResources {
                cpu_shares: 2,
                cpu_period: 100_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let linux = sandbox_to_wire(&s).linux.unwrap_or_default();
        assert_eq!(
            linux
                .sysctls
                .get("net.ipv4.ping_group_range")
                .map(String::as_str),
            Some("0 1")
        );
        assert_eq!(linux.resources.map(|r| r.cpu_shares), Some(2));
        assert_eq!(
            linux.overhead,
            Some(proto::LinuxContainerResources::default())
        );
        let sc = linux.security_context.unwrap_or_default();
        assert!(sc.privileged);
        #[allow(deprecated)]
        let path = sc.seccomp_profile_path.clone();
        assert_eq!(path, "runtime/default");
        assert_eq!(
            sc.seccomp.map(|p| p.profile_type),
            Some(proto::security_profile::ProfileType::RuntimeDefault as i32)
        );
        assert_eq!(sc.run_as_user, Some(proto::Int64Value { value: 1000 }));
    }

    #[test]
    fn spec_hash_reads_hex_annotation() {
        let mut a = HashMap::new();
        assert_eq!(spec_hash(&a), 0);
        a.insert(CONTAINER_HASH_ANNOTATION.to_string(), "ff".to_string());
        assert_eq!(spec_hash(&a), 255);
    }

    #[test]
    fn backoff_step_reads_a_decimal_annotation() {
        let mut a = HashMap::new();
        assert_eq!(backoff_step(&a), None);
        a.insert(
            CONTAINER_BACKOFF_STEP_ANNOTATION.to_string(),
            "3".to_string(),
        );
        assert_eq!(backoff_step(&a), Some(3));
        a.insert(
            CONTAINER_BACKOFF_STEP_ANNOTATION.to_string(),
            "x".to_string(),
        );
        assert_eq!(backoff_step(&a), None);
    }
}
