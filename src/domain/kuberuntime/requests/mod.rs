//! The CRI requests for a pod, built like upstream's kuberuntime
//! (`generatePodSandboxConfig`, `generateContainerConfig`,
//! `generateLinuxContainerResources`) and its DNS configurer. Pure: the
//! caller reads resolv.conf, creates the directories and talks to the runtime.
//!
//! The request values are the project's own: the CRI adapter maps them to its wire
//! types, the fake runtime keeps them as they are.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::domain::cgroup::{self, cfs};
use crate::domain::config::ResolvedConfig;
use crate::domain::kuberuntime::dns::{self, PodDns, ResolvConf};
use crate::domain::kuberuntime::labels::*;
use crate::domain::kuberuntime::runtime::ImageUser;
use crate::domain::pod::{self, Container, Pod};
use crate::domain::securitycontext::{self, SecuritySettings};

/// The pod model has no terminationMessagePolicy field; this is the API default.
const TERMINATION_MESSAGE_POLICY: &str = "File";
/// A hostname is one DNS label (64 bytes with the terminating NUL).
const HOSTNAME_MAX_LEN: usize = 63;

/// What a pod sandbox is created from (the pod-level part of the spec).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxConfig {
    pub name: String,
    pub uid: String,
    pub namespace: String,
    pub attempt: u32,
    pub hostname: String,
    /// Directory the container log paths are relative to (`/var/log/pods/<ns>_<name>_<uid>`).
    pub log_directory: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Empty: the runtime's default.
    pub cgroup_parent: String,
    pub host_network: bool,
    /// The sandbox's security context (`LinuxSandboxSecurityContext`), namespaces included.
    pub security: SandboxSecurity,
    /// Namespaced kernel parameters, names with dots (`net.ipv4.ping_group_range`).
    pub sysctls: BTreeMap<String, String>,
    /// The pod's summed resources (`LinuxPodSandboxConfig.resources`).
    pub resources: LinuxResources,
    /// The pod's `spec.overhead` as resources (`LinuxPodSandboxConfig.overhead`).
    pub overhead: LinuxResources,
    /// Empty: the runtime's default handler.
    pub runtime_handler: String,
    /// `None`: the runtime's default (usually the node's resolv.conf).
    pub dns: Option<DnsConfig>,
    pub port_mappings: Vec<PortMapping>,
}

/// The resolver configuration written into the sandbox's `/etc/resolv.conf`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DnsConfig {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    /// `ndots:5`-style resolver options.
    pub options: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
    Sctp,
}

/// A container port the sandbox exposes; `host_port` 0 means none on the host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortMapping {
    pub protocol: Protocol,
    pub container_port: i32,
    pub host_port: i32,
    /// Empty: every host address.
    pub host_ip: String,
}

/// A host path bind-mounted into a container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mount {
    pub container_path: String,
    pub host_path: String,
    pub readonly: bool,
    /// A volume's subpath: `host_path` is its bind target, which the kubelet binds
    /// before the container is created (`ports::pod_files::PodFiles::bind_sub_path`).
    pub sub_path: Option<crate::domain::volumes::subpath::SubPath>,
    pub propagation: MountPropagation,
}

/// How mounts made later under a mount's source or target reach the other side (the
/// CRI's `MountPropagation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MountPropagation {
    /// Neither way (`mountPropagation: None` or unset): the runtime's `rprivate`.
    #[default]
    Private,
    /// The host's later mounts reach the container (`rslave`).
    HostToContainer,
    /// Both ways (`rshared`): privileged containers only.
    Bidirectional,
}

impl MountPropagation {
    /// Upstream's `translateMountPropagation` of a validated mode.
    pub fn of(mode: Option<&str>) -> MountPropagation {
        match mode {
            Some("HostToContainer") => MountPropagation::HostToContainer,
            Some("Bidirectional") => MountPropagation::Bidirectional,
            _ => MountPropagation::Private,
        }
    }
}

/// The Linux resource settings of one container (cgroup values as the
/// kernel takes them: CFS period and quota in microseconds, 0 meaning unset).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinuxResources {
    pub cpu_period: i64,
    pub cpu_quota: i64,
    pub cpu_shares: i64,
    pub memory_limit_in_bytes: i64,
    pub oom_score_adj: i64,
    /// The CPUs the container may run on (the CPU manager's; empty: the runtime's default,
    /// every CPU of its cgroup parent).
    pub cpuset_cpus: String,
    /// One limit per huge page size the node has (0 unless the container asks).
    pub hugepage_limits: Vec<HugepageLimit>,
}

/// A limit on huge pages of one size (`2MB`, `1GB`, as runc names them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HugepageLimit {
    pub page_size: String,
    pub limit: u64,
}

/// Which namespace a container or sandbox gets (CRI `NamespaceMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NamespaceMode {
    /// Shared by the pod's containers.
    #[default]
    Pod,
    /// The container's own.
    Container,
    /// The node's.
    Node,
    /// Another container's (`target_id`).
    Target,
}

/// The namespaces of a sandbox or container (CRI `NamespaceOption`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamespaceOptions {
    pub network: NamespaceMode,
    pub pid: NamespaceMode,
    pub ipc: NamespaceMode,
    /// The container whose namespace `Target` joins.
    pub target_id: String,
    /// `None`: the runtime's default, the node's (`spec.hostUsers` unset or true).
    pub user: Option<UserNamespace>,
}

/// A pod's own user namespace (CRI `UserNamespace`): `Pod` with its ID mappings
/// (`domain::kuberuntime::userns`), empty until they are allocated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserNamespace {
    pub mode: NamespaceMode,
    pub uids: Vec<IdMapping>,
    pub gids: Vec<IdMapping>,
}

/// IDs `container_id..container_id + length` in the pod are `host_id..` on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdMapping {
    pub host_id: u32,
    pub container_id: u32,
    pub length: u32,
}

/// A seccomp or AppArmor profile (CRI `SecurityProfile`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SecurityProfile {
    RuntimeDefault,
    #[default]
    Unconfined,
    /// Seccomp: the profile file's absolute path; AppArmor: the loaded profile's name.
    Localhost(String),
}

/// SELinux labels (CRI `SELinuxOption`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SeLinuxOption {
    pub user: String,
    pub role: String,
    pub kind: String,
    pub level: String,
}

/// Capabilities added to and dropped from the runtime's default set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capability {
    pub add: Vec<String>,
    pub drop: Vec<String>,
}

/// A container's security settings (CRI `LinuxContainerSecurityContext`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerSecurity {
    /// `None`: the runtime's default set.
    pub capabilities: Option<Capability>,
    pub privileged: bool,
    pub namespace_options: NamespaceOptions,
    pub selinux_options: Option<SeLinuxOption>,
    /// `None`: the image's user.
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    /// The image's user when it is a name (then `run_as_user` is `None`).
    pub run_as_username: String,
    pub readonly_rootfs: bool,
    pub supplemental_groups: Vec<i64>,
    pub no_new_privs: bool,
    pub masked_paths: Vec<String>,
    pub readonly_paths: Vec<String>,
    pub seccomp: SecurityProfile,
    /// `None`: none asked for (the runtime's default where AppArmor is enabled).
    pub apparmor: Option<SecurityProfile>,
}

/// A sandbox's security settings (CRI `LinuxSandboxSecurityContext`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxSecurity {
    pub namespace_options: NamespaceOptions,
    pub selinux_options: Option<SeLinuxOption>,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub supplemental_groups: Vec<i64>,
    /// Set when a container of the pod is privileged.
    pub privileged: bool,
    pub seccomp: SecurityProfile,
    /// The deprecated spelling of `seccomp` that upstream v1.26 still sends.
    pub seccomp_profile_path: String,
}

/// What one container instance is created from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerConfig {
    pub name: String,
    pub attempt: u32,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub envs: Vec<(String, String)>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Relative to the sandbox's `log_directory`.
    pub log_path: String,
    pub mounts: Vec<Mount>,
    /// Device nodes a device plugin gave the container (the CRI's `devices`).
    pub devices: Vec<crate::domain::devices::DeviceSpec>,
    pub linux: LinuxResources,
    pub security: ContainerSecurity,
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
}

/// Why a container's request cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("container {container:?}: volumeMount {mount_path:?} names volume {volume:?}, which the pod does not define")]
    UnknownVolume {
        container: String,
        mount_path: String,
        volume: String,
    },
    #[error("container {container:?}: volumeMount {mount_path:?} names volume {volume:?}, whose type is not supported (only hostPath, emptyDir, configMap, secret, downwardAPI and projected are)")]
    UnsupportedVolume {
        container: String,
        mount_path: String,
        volume: String,
    },
    /// A `volumeDevices` entry whose volume gives no device; upstream's message.
    #[error("cannot find volume {volume:?} to pass into container {container:?}")]
    NoBlockVolume { volume: String, container: String },
    /// An environment reference cannot be resolved; upstream's message.
    #[error(transparent)]
    Env(#[from] crate::domain::volumes::env::EnvError),
    /// `runAsNonRoot` cannot hold; upstream's message.
    #[error("{0}")]
    RunAsNonRoot(String),
    /// A `subPath` or `subPathExpr` refused before any I/O; upstream's message.
    #[error(transparent)]
    SubPath(#[from] crate::domain::volumes::subpath::SubPathError),
    /// The expanded command line and environment would not fit `execve`.
    #[error("container {container:?}: its command, args and environment expand to more than {limit} bytes, the most the kernel passes to a process")]
    ArgumentsTooLong { container: String, limit: usize },
    /// The security context cannot be honoured; upstream's message.
    #[error(transparent)]
    SecurityContext(#[from] securitycontext::SecurityContextError),
    /// An ephemeral container's `targetContainerName` has no instance to share
    /// namespaces with; upstream's `getTargetID` message.
    #[error("unable to find target container {0}")]
    TargetNotFound(String),
    /// An ephemeral container added to a running pod with a field the node cannot
    /// honour: held rather than started without it.
    #[error("the node cannot honour {0}")]
    RefusedFields(String),
}

/// The node settings the requests depend on.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestContext {
    /// podLogsDir, e.g. /var/log/pods
    pub pod_logs_dir: PathBuf,
    /// --root-dir, e.g. /var/lib/kubelet
    pub root_dir: PathBuf,
    /// Parsed from resolvConf (empty when unreadable).
    pub host_dns: ResolvConf,
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    pub cpu_cfs_quota: bool,
    /// From cpuCFSQuotaPeriod, default 100000.
    pub cpu_cfs_quota_period_us: i64,
    /// The node's memory, for Burstable containers' OOM score. 0 (unknown)
    /// scores every Burstable container as protected as it can be (3), so
    /// set it from the machine info.
    pub memory_capacity_bytes: u64,
    /// The node's huge page sizes as runc names them (`2MB`, `1GB`), in the kernel's order.
    pub hugepage_sizes: Vec<String>,
    /// seccomp default and profile root, allowed sysctls, AppArmor.
    pub security: SecuritySettings,
}

impl RequestContext {
    /// The defaults under `root` (pod logs in `root/logs`, no cluster DNS, CFS quota on,
    /// memory capacity unknown): what the volume manager's tests and bench build on.
    pub fn under_root(root: &std::path::Path) -> Self {
        RequestContext {
            pod_logs_dir: root.join("logs"),
            root_dir: root.to_path_buf(),
            host_dns: Default::default(),
            cluster_dns: Vec::new(),
            cluster_domain: "cluster.local".into(),
            cpu_cfs_quota: true,
            cpu_cfs_quota_period_us: 100_000,
            memory_capacity_bytes: 0,
            hugepage_sizes: Vec::new(),
            security: Default::default(),
        }
    }

    /// The context from the resolved configuration, with the node's memory.
    pub fn from_config(resolved: &ResolvedConfig, host_dns: ResolvConf) -> Self {
        let node = &resolved.node;
        RequestContext {
            pod_logs_dir: node.pod_logs_dir.clone(),
            root_dir: resolved.options.root_dir.clone(),
            host_dns,
            cluster_dns: node.cluster_dns.clone(),
            cluster_domain: node.cluster_domain.clone(),
            cpu_cfs_quota: node.pod_cgroups.cpu_cfs_quota,
            cpu_cfs_quota_period_us: i64::try_from(node.pod_cgroups.cpu_cfs_quota_period_us)
                .unwrap_or(i64::MAX),
            memory_capacity_bytes: node.machine.memory_capacity_bytes,
            hugepage_sizes: node.machine.hugepage_sizes(),
            security: SecuritySettings {
                seccomp_default: node.seccomp_default,
                seccomp_profile_root: resolved.options.root_dir.join("seccomp"),
                allowed_unsafe_sysctls: node.allowed_unsafe_sysctls.clone(),
                apparmor_enabled: node.machine.apparmor_enabled,
            },
        }
    }
}

/// `<pod_logs_dir>/<namespace>_<name>_<uid>`
pub fn pod_log_dir(ctx: &RequestContext, pod: &Pod) -> PathBuf {
    pod_log_dir_in(&ctx.pod_logs_dir, pod)
}

/// `<logs_dir>/<namespace>_<name>_<uid>`: where a pod's container logs are (the kubelet
/// API reads them).
pub fn pod_log_dir_in(logs_dir: &std::path::Path, pod: &Pod) -> PathBuf {
    let m = &pod.metadata;
    pod_log_dir_of(logs_dir, &m.namespace, &m.name, &m.uid)
}

/// [`pod_log_dir_in`] for a pod known by its namespace, name and uid (what the runtime's
/// labels carry).
pub fn pod_log_dir_of(
    logs_dir: &std::path::Path,
    namespace: &str,
    name: &str,
    uid: &str,
) -> PathBuf {
    logs_dir.join(format!("{namespace}_{name}_{uid}"))
}

/// `<root_dir>/pods/<uid>`: everything the kubelet keeps for the pod,
/// removed at teardown.
pub fn pod_dir(ctx: &RequestContext, pod_uid: &str) -> PathBuf {
    ctx.root_dir.join("pods").join(pod_uid)
}

/// `<root_dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume name>`
pub fn empty_dir_path(ctx: &RequestContext, pod_uid: &str, volume: &str) -> PathBuf {
    crate::domain::volumes::volume_dir(
        &ctx.root_dir,
        pod_uid,
        crate::domain::volumes::EMPTY_DIR_PLUGIN,
        volume,
    )
}

/// One emptyDir folder's setup: mode 0777, owned by the pod's `fsGroup` when it has one.
pub fn empty_dir_setup(
    ctx: &RequestContext,
    pod: &Pod,
    volume: &pod::Volume,
) -> securitycontext::VolumeSetup {
    let sc = pod.spec.security_context.as_ref();
    securitycontext::VolumeSetup {
        path: empty_dir_path(ctx, &pod.metadata.uid, &volume.name),
        mode: securitycontext::EMPTY_DIR_MODE,
        fs_group: sc.and_then(|sc| sc.fs_group),
        on_root_mismatch: sc.and_then(|sc| sc.fs_group_change_policy)
            == Some(pod::security::FsGroupChangePolicy::OnRootMismatch),
        readonly: false,
    }
}

/// The emptyDir folders to set up before the pod's containers, whether mounted or not
/// (as upstream sets up every volume of the pod): mode 0777, owned by the pod's
/// `fsGroup` when it has one.
pub fn empty_dir_setups(ctx: &RequestContext, pod: &Pod) -> Vec<securitycontext::VolumeSetup> {
    pod.spec
        .volumes
        .iter()
        .filter(|v| v.empty_dir.is_some())
        .map(|v| empty_dir_setup(ctx, pod, v))
        .collect()
}

/// The pod's DNS with the warnings to report (missing cluster DNS, limits).
/// [`sandbox_config`] uses the same configuration.
pub fn sandbox_dns(ctx: &RequestContext, pod: &Pod) -> PodDns {
    dns::pod_dns(
        &pod.spec.dns_policy,
        pod.spec.dns_config.as_ref(),
        pod.spec.host_network,
        &ctx.host_dns,
        &ctx.cluster_dns,
        &ctx.cluster_domain,
        &pod.metadata.namespace,
    )
}

/// The sandbox for `pod`; `attempt` counts the sandboxes made for it before;
/// `cgroup_parent` is the pod's cgroup in the driver's spelling (empty: the runtime's
/// default).
pub fn sandbox_config(
    ctx: &RequestContext,
    pod: &Pod,
    attempt: u32,
    cgroup_parent: &str,
) -> SandboxConfig {
    let m = &pod.metadata;
    let mut labels = m.labels.clone();
    labels.insert(POD_NAME_LABEL.into(), m.name.clone());
    labels.insert(POD_NAMESPACE_LABEL.into(), m.namespace.clone());
    labels.insert(POD_UID_LABEL.into(), m.uid.clone());
    let dns = sandbox_dns(ctx, pod).config;
    SandboxConfig {
        name: m.name.clone(),
        uid: m.uid.clone(),
        namespace: m.namespace.clone(),
        attempt,
        // Under host networking the sandbox keeps the node's hostname.
        hostname: if pod.spec.host_network {
            String::new()
        } else {
            sandbox_hostname(ctx, pod).unwrap_or_else(|_| pod_hostname(pod))
        },
        log_directory: pod_log_dir(ctx, pod).display().to_string(),
        labels,
        annotations: m.annotations.clone(),
        cgroup_parent: cgroup_parent.to_owned(),
        host_network: pod.spec.host_network,
        security: securitycontext::sandbox_security(pod),
        sysctls: securitycontext::sandbox_sysctls(pod),
        resources: sandbox_resources(ctx, pod),
        overhead: overhead_resources(ctx, pod),
        runtime_handler: String::new(),
        dns: Some(DnsConfig {
            servers: dns.nameservers,
            searches: dns.searches,
            options: dns.options,
        }),
        port_mappings: port_mappings(pod),
    }
}

/// spec.hostname, else the pod name, cut to one DNS label without a
/// trailing `-` or `.`.
/// The longest FQDN the kernel's nodename holds (upstream's `GetNodenameForKernel`).
const FQDN_MAX_LEN: usize = 64;

/// A `setHostnameAsFQDN` pod whose FQDN the kernel cannot hold: its sandbox is not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long ({FQDN_MAX_LEN} characters is the max, {} characters requested)", fqdn.len())]
pub struct FqdnTooLong {
    pub fqdn: String,
}

/// The sandbox's hostname (upstream's `GetNodenameForKernel`): the pod's hostname, or
/// with `setHostnameAsFQDN` and a subdomain its FQDN, which must fit the kernel's 64
/// bytes.
pub fn sandbox_hostname(ctx: &RequestContext, pod: &Pod) -> Result<String, FqdnTooLong> {
    let hostname = pod_hostname(pod);
    let domain = super::hosts::pod_host_domain(ctx, pod);
    if domain.is_empty() || pod.spec.set_hostname_as_fqdn != Some(true) {
        return Ok(hostname);
    }
    let fqdn = format!("{hostname}.{domain}");
    if fqdn.len() > FQDN_MAX_LEN {
        return Err(FqdnTooLong { fqdn });
    }
    Ok(fqdn)
}

fn pod_hostname(pod: &Pod) -> String {
    let name = if pod.spec.hostname.is_empty() {
        &pod.metadata.name
    } else {
        &pod.spec.hostname
    };
    if name.len() <= HOSTNAME_MAX_LEN {
        return name.clone();
    }
    // Names are validated ASCII; the char walk only keeps a bad one from panicking.
    let mut end = HOSTNAME_MAX_LEN;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].trim_end_matches(['-', '.']).to_string()
}

/// One mapping per container port, skipping a repeated port name (or, for
/// unnamed ports, a repeated family/protocol/address/ports) within a
/// container, as upstream's `MakePortMappings` does.
fn port_mappings(pod: &Pod) -> Vec<PortMapping> {
    let mut out = Vec::new();
    for container in &pod.spec.containers {
        let mut names = std::collections::BTreeSet::new();
        for p in &container.ports {
            let family = if p.host_ip.is_empty() {
                "any"
            } else if p.host_ip.contains(':') {
                "v6"
            } else {
                "v4"
            };
            let name = if p.name.is_empty() {
                format!(
                    "{family}-{}-{}:{}:{}",
                    p.protocol, p.host_ip, p.container_port, p.host_port
                )
            } else {
                p.name.clone()
            };
            if !names.insert(name) {
                continue;
            }
            out.push(PortMapping {
                protocol: match p.protocol.as_str() {
                    "UDP" => Protocol::Udp,
                    "SCTP" => Protocol::Sctp,
                    // TCP, and upstream's fallback for anything else.
                    _ => Protocol::Tcp,
                },
                container_port: p.container_port,
                host_port: p.host_port,
                host_ip: p.host_ip.clone(),
            });
        }
    }
    out
}

/// The request creating `container`'s instance number `restart_count`, which records
/// its crash-loop `backoff_step` (see `backoff`).
pub fn container_config(
    ctx: &RequestContext,
    pod: &Pod,
    container: &Container,
    restart_count: u32,
    backoff_step: u32,
) -> Result<ContainerConfig, RequestError> {
    let inputs = crate::domain::volumes::PodInputs::default();
    container_config_and_skipped_env(ctx, pod, container, restart_count, backoff_step, &inputs)
        .map(|(config, _)| config)
}

/// [`container_config`] with the API objects, pod facts and service links the
/// container's environment is resolved from, and the `envFrom` keys it skipped as
/// invalid variable names (upstream's `InvalidEnvironmentVariableNames` event).
pub fn container_config_and_skipped_env(
    ctx: &RequestContext,
    pod: &Pod,
    container: &Container,
    restart_count: u32,
    backoff_step: u32,
    inputs: &crate::domain::volumes::PodInputs,
) -> Result<
    (
        ContainerConfig,
        Vec<crate::domain::volumes::env::SkippedKeys>,
    ),
    RequestError,
> {
    let m = &pod.metadata;
    let environment = crate::domain::volumes::env::resolve_environment(
        pod,
        container,
        &inputs.objects,
        &inputs.facts,
        &inputs.service_env,
    )?;
    let envs = environment.vars;
    let env_map: BTreeMap<&str, &str> =
        envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // What execve is handed: the environment, then the command line within what is left.
    let mut budget = crate::domain::volumes::env::EXEC_ARGS_MAX_BYTES
        .saturating_sub(crate::domain::volumes::env::exec_size(&envs));
    let too_long = || RequestError::ArgumentsTooLong {
        container: container.name.clone(),
        limit: crate::domain::volumes::env::EXEC_ARGS_MAX_BYTES,
    };
    let mut expand_all = |items: &[String]| -> Result<Vec<String>, RequestError> {
        items
            .iter()
            .map(|s| {
                let expanded = expand_within(s, |name| env_map.get(name).copied(), budget)
                    .ok_or_else(too_long)?;
                budget = budget.saturating_sub(expanded.len() + 1);
                Ok(expanded)
            })
            .collect()
    };
    let command = expand_all(&container.command)?;
    let args = expand_all(&container.args)?;
    let labels = BTreeMap::from([
        (CONTAINER_NAME_LABEL.to_string(), container.name.clone()),
        (POD_NAME_LABEL.to_string(), m.name.clone()),
        (POD_NAMESPACE_LABEL.to_string(), m.namespace.clone()),
        (POD_UID_LABEL.to_string(), m.uid.clone()),
    ]);
    let mut annotations = BTreeMap::from([
        (
            CONTAINER_HASH_ANNOTATION.to_string(),
            format!("{:x}", pod::container_hash(container)),
        ),
        (
            CONTAINER_RESTART_COUNT_ANNOTATION.to_string(),
            restart_count.to_string(),
        ),
        (
            CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION.to_string(),
            container.termination_message_path.clone(),
        ),
        (
            CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION.to_string(),
            if container.termination_message_policy.is_empty() {
                TERMINATION_MESSAGE_POLICY.to_string()
            } else {
                container.termination_message_policy.clone()
            },
        ),
        (
            POD_TERMINATION_GRACE_PERIOD_ANNOTATION.to_string(),
            pod.spec.termination_grace_period().to_string(),
        ),
        (
            CONTAINER_BACKOFF_STEP_ANNOTATION.to_string(),
            backoff_step.to_string(),
        ),
    ]);
    if let Some(ports) = ports_annotation(container) {
        annotations.insert(CONTAINER_PORTS_ANNOTATION.to_string(), ports);
    }
    if let Some(pre_stop) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
    {
        if let Ok(json) = serde_json::to_string(pre_stop) {
            annotations.insert(CONTAINER_PRE_STOP_HANDLER_ANNOTATION.to_string(), json);
        }
    }
    let config = ContainerConfig {
        name: container.name.clone(),
        attempt: restart_count,
        image: container.image.clone(),
        command,
        args,
        working_dir: container.working_dir.clone(),
        labels,
        annotations,
        log_path: format!(
            "{}/{}",
            container.name,
            super::log_rotation::live_log_name(restart_count)
        ),
        mounts: {
            let mut all = mounts(ctx, pod, container, &env_map, &inputs.objects)?;
            let ip = super::hosts::hosts_ip(pod, &inputs.facts.pod_ip, &inputs.facts.host_ip);
            all.extend(super::hosts::hosts_mount(ctx, pod, container, ip));
            all.extend(super::termination::message_mount(
                ctx,
                pod,
                container,
                restart_count,
            ));
            all
        },
        linux: linux_resources(ctx, pod, container),
        security: securitycontext::container_security(&ctx.security, pod, container)?,
        stdin: container.stdin,
        stdin_once: container.stdin_once,
        tty: container.tty,
        envs,
        devices: block_devices(ctx, pod, container, &inputs.objects)?,
    };
    Ok((config, environment.skipped))
}

/// A container's devices from its device plugins (upstream's `GenerateRunContainerOptions`
/// puts them before the pod's own): the plugins' envs first (a variable of the same name
/// in the spec comes later, so it wins in the runtime), their mounts first, their device
/// nodes, and their annotations where the kubelet set none of that name.
pub fn apply_device_options(
    config: &mut ContainerConfig,
    options: &crate::domain::devices::DeviceRunOptions,
) {
    let mut envs = options.envs.clone();
    envs.append(&mut config.envs);
    config.envs = envs;
    let mut mounts: Vec<Mount> = options
        .mounts
        .iter()
        .map(|m| Mount {
            container_path: m.container_path.clone(),
            host_path: m.host_path.clone(),
            readonly: m.read_only,
            ..Mount::default()
        })
        .collect();
    mounts.append(&mut config.mounts);
    config.mounts = mounts;
    config.devices.extend(options.devices.iter().cloned());
    for (k, v) in &options.annotations {
        config
            .annotations
            .entry(k.clone())
            .or_insert_with(|| v.clone());
    }
}

/// Kubernetes' `$(VAR)` expansion: a defined reference is replaced, an
/// undefined or unclosed one left as written, `$$` is a literal `$`, and a
/// `$` before anything else stays.
pub fn expand(input: &str, vars: &BTreeMap<&str, &str>) -> String {
    expand_with(input, |name| vars.get(name).copied())
}

/// [`expand`] with the defined names answered by `lookup`.
pub fn expand_with<'a>(input: &str, lookup: impl Fn(&str) -> Option<&'a str>) -> String {
    // Without a limit every expansion fits.
    expand_within(input, lookup, usize::MAX).unwrap_or_default()
}

/// [`expand_with`], given up (`None`) as soon as the result passes `limit` bytes: a
/// chain of variables that each repeat the one before doubles at every step, and
/// its last value would take gigabytes.
pub fn expand_within<'a>(
    input: &str,
    lookup: impl Fn(&str) -> Option<&'a str>,
    limit: usize,
) -> Option<String> {
    let mut out = String::with_capacity(input.len().min(limit));
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        if out.len() > limit {
            return None;
        }
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(close) => {
                    let name = &body[..close];
                    match lookup(name) {
                        Some(value) if out.len().saturating_add(value.len()) > limit => {
                            return None
                        }
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    (out.len() <= limit).then_some(out)
}

fn mounts(
    ctx: &RequestContext,
    pod: &Pod,
    container: &Container,
    env: &BTreeMap<&str, &str>,
    objects: &crate::domain::volumes::PodObjects,
) -> Result<Vec<Mount>, RequestError> {
    use crate::domain::volumes::subpath::{bind_target, checked_sub_path, SubPath};
    use crate::domain::volumes::VolumeKind;
    container
        .volume_mounts
        .iter()
        .enumerate()
        .map(|(index, vm)| {
            let volume = pod
                .spec
                .volumes
                .iter()
                .find(|v| v.name == vm.name)
                .ok_or_else(|| RequestError::UnknownVolume {
                    container: container.name.clone(),
                    mount_path: vm.mount_path.clone(),
                    volume: vm.name.clone(),
                })?;
            let Some((source, claim_read_only)) =
                crate::domain::volumes::volume_source_path(&ctx.root_dir, pod, volume, objects)
            else {
                return Err(RequestError::UnsupportedVolume {
                    container: container.name.clone(),
                    mount_path: vm.mount_path.clone(),
                    volume: vm.name.clone(),
                });
            };
            let sub_path = checked_sub_path(&vm.name, &vm.sub_path, &vm.sub_path_expr, |name| {
                env.get(name).copied()
            })?
            .map(|path| SubPath {
                volume: vm.name.clone(),
                target: bind_target(
                    &pod_dir(ctx, &pod.metadata.uid),
                    &vm.name,
                    &container.name,
                    index,
                ),
                volume_path: source.clone(),
                path,
            });
            // Volumes of API data are the writer's alone (upstream mounts them read-only
            // whatever the pod says): a container that could swap their `..data` link
            // would steer the writer's next update (CVE-2017-1002102).
            let must_mount_read_only = matches!(
                VolumeKind::of(volume),
                VolumeKind::ConfigMap
                    | VolumeKind::Secret
                    | VolumeKind::DownwardApi
                    | VolumeKind::Projected
            );
            Ok(Mount {
                container_path: vm.mount_path.clone(),
                host_path: sub_path
                    .as_ref()
                    .map_or(source, |s| s.target.clone())
                    .display()
                    .to_string(),
                readonly: vm.read_only || must_mount_read_only || claim_read_only,
                sub_path,
                propagation: MountPropagation::of(vm.mount_propagation.as_deref()),
            })
        })
        .collect()
}

/// The container's `volumeDevices` as CRI devices (upstream's `makeBlockVolumes`): each
/// from the link in the pod's folder to its Block volume's device, read-only (`r`) when
/// the claim is, else `mrw`.
fn block_devices(
    ctx: &RequestContext,
    pod: &Pod,
    container: &Container,
    objects: &crate::domain::volumes::PodObjects,
) -> Result<Vec<crate::domain::devices::DeviceSpec>, RequestError> {
    container
        .volume_devices
        .iter()
        .map(|device| {
            let source = pod
                .spec
                .volumes
                .iter()
                .find(|v| v.name == device.name)
                .and_then(|volume| {
                    crate::domain::volumes::volume_device_source(
                        &ctx.root_dir,
                        pod,
                        volume,
                        objects,
                    )
                });
            let (link, read_only) = source.ok_or_else(|| RequestError::NoBlockVolume {
                volume: device.name.clone(),
                container: container.name.clone(),
            })?;
            Ok(crate::domain::devices::DeviceSpec {
                container_path: device.device_path.clone(),
                host_path: link.display().to_string(),
                permissions: if read_only { "r" } else { "mrw" }.to_owned(),
            })
        })
        .collect()
}

/// Upstream's `calculateLinuxResources`: CPU shares from the request, CFS quota from
/// the limit (with the period, when `cpuCFSQuota`), the memory limit (0: none).
fn calculate_linux_resources(
    ctx: &RequestContext,
    cpu_request_milli: i64,
    cpu_limit_milli: i64,
    memory_limit_bytes: i64,
) -> LinuxResources {
    let (cpu_period, cpu_quota) = if ctx.cpu_cfs_quota {
        (
            ctx.cpu_cfs_quota_period_us,
            cfs::milli_cpu_to_quota(cpu_limit_milli, ctx.cpu_cfs_quota_period_us),
        )
    } else {
        (0, 0)
    };
    LinuxResources {
        cpu_period,
        cpu_quota,
        cpu_shares: cfs::milli_cpu_to_shares(cpu_request_milli),
        // Zero means no limit; a negative limit is rejected by validation.
        memory_limit_in_bytes: memory_limit_bytes.max(0),
        ..LinuxResources::default()
    }
}

/// CPU shares from the request (the limit when there is none, as API
/// defaulting would), CFS quota from the limit, the memory limit, the
/// OOM score of the pod's QoS class, and a huge page limit per page size.
fn linux_resources(ctx: &RequestContext, pod: &Pod, container: &Container) -> LinuxResources {
    let res = &container.resources;
    let cpu_limit = res.limits.get("cpu").map_or(0, |q| q.milli_value());
    let cpu_request = res
        .requests
        .get("cpu")
        .map_or(cpu_limit, |q| q.milli_value());
    let memory_limit = res.limits.get("memory").map_or(0, |q| q.value());
    LinuxResources {
        oom_score_adj: pod::pod_container_oom_score_adj(pod, container, ctx.memory_capacity_bytes),
        hugepage_limits: hugepage_limits(ctx, container),
        ..calculate_linux_resources(ctx, cpu_request, cpu_limit, memory_limit)
    }
}

/// The pod's resources without its overhead, for the sandbox (upstream's
/// `calculateSandboxResources`): summed like the pod's cgroup.
fn sandbox_resources(ctx: &RequestContext, pod: &Pod) -> LinuxResources {
    let (cpu_request, cpu_limit, memory_limit) = cgroup::config::pod_cpu_and_memory(pod);
    calculate_linux_resources(ctx, cpu_request, cpu_limit, memory_limit)
}

/// `spec.overhead` as resources, requests equal to limits; none without it.
fn overhead_resources(ctx: &RequestContext, pod: &Pod) -> LinuxResources {
    if pod.spec.overhead.is_empty() {
        return LinuxResources::default();
    }
    let cpu = pod.spec.overhead.get("cpu").map_or(0, |q| q.milli_value());
    let memory = pod.spec.overhead.get("memory").map_or(0, |q| q.value());
    calculate_linux_resources(ctx, cpu, cpu, memory)
}

/// runc's name for a huge page size in bytes (`2MB` for 2Mi; upstream's
/// `HugePageUnitSizeFromByteSize`).
pub fn hugepage_size_name(bytes: i64) -> Option<String> {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let mut size = bytes;
    let mut unit = 0;
    while size >= 1024 && unit + 1 < UNITS.len() {
        size /= 1024;
        unit += 1;
    }
    (size > 0).then(|| format!("{size}{}", UNITS[unit]))
}

/// Upstream's `GetHugepageLimitsFromResources`: a zero limit for each of the node's
/// page sizes, with the container's `hugepages-<size>` limits where it sets them.
fn hugepage_limits(ctx: &RequestContext, container: &Container) -> Vec<HugepageLimit> {
    let asked: BTreeMap<String, u64> = container
        .resources
        .limits
        .iter()
        .filter_map(|(name, amount)| {
            let size =
                crate::domain::units::quantity::Quantity::parse(name.strip_prefix("hugepages-")?)
                    .ok()?;
            let page = hugepage_size_name(size.value())?;
            Some((page, u64::try_from(amount.value()).unwrap_or(0)))
        })
        .collect();
    ctx.hugepage_sizes
        .iter()
        .map(|page_size| HugepageLimit {
            page_size: page_size.clone(),
            limit: asked.get(page_size).copied().unwrap_or(0),
        })
        .collect()
}

/// `io.kubernetes.container.ports`: the container's ports as upstream's Go JSON writes
/// them (field order and `omitempty` of `v1.ContainerPort`); `None` without ports.
fn ports_annotation(container: &Container) -> Option<String> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct GoPort<'a> {
        #[serde(skip_serializing_if = "str::is_empty")]
        name: &'a str,
        #[serde(skip_serializing_if = "is_zero")]
        host_port: i32,
        container_port: i32,
        #[serde(skip_serializing_if = "str::is_empty")]
        protocol: &'a str,
        #[serde(rename = "hostIP", skip_serializing_if = "str::is_empty")]
        host_ip: &'a str,
    }
    fn is_zero(n: &i32) -> bool {
        *n == 0
    }
    if container.ports.is_empty() {
        return None;
    }
    let ports: Vec<GoPort<'_>> = container
        .ports
        .iter()
        .map(|p| GoPort {
            name: &p.name,
            host_port: p.host_port,
            container_port: p.container_port,
            protocol: &p.protocol,
            host_ip: &p.host_ip,
        })
        .collect();
    serde_json::to_string(&ports).ok()
}

/// Completes a container's request with what the image service said: the container is
/// created from the image's id (as upstream does, so the runtime pins that image), runs
/// as the image's user unless the pod sets one, and `runAsNonRoot` is checked against it.
pub fn apply_image(
    config: &mut ContainerConfig,
    pod: &Pod,
    container: &Container,
    image_id: &str,
    user: &ImageUser,
) -> Result<(), RequestError> {
    securitycontext::verify_run_as_non_root(pod, container, user)
        .map_err(RequestError::RunAsNonRoot)?;
    if !image_id.is_empty() {
        config.image = image_id.to_owned();
    }
    securitycontext::apply_image_user(&mut config.security, user);
    Ok(())
}

#[cfg(test)]
mod tests;
