//! The one validated, typed configuration the rest of rkubelet works from. Nothing
//! downstream parses a configuration string again or re-applies a default.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::feature_gates::FeatureGates;
use super::layers::Source;
use super::model::{KubeletConfiguration, Taint};
use super::options::FlagOptions;
use crate::domain::cgroup::tree::CgroupTree;
use crate::domain::cgroup::{CgroupDriver, CgroupSettings};
use crate::domain::eviction::image_gc::ImageGcPolicy;
use crate::domain::eviction::manager::EvictionConfig;
use crate::domain::node::machine::MachineInfo;
use crate::domain::node::{NodeNameSource, NodeSettings};

/// What the configuration is checked against: this machine (or a snapshot of one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// The OS hostname (the node name unless `--hostname-override` is given).
    pub hostname: String,
    pub machine: MachineInfo,
}

/// Where the container runtime is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeEndpoint {
    /// A CRI server on a unix socket: the `unix://` URI.
    Cri(String),
    /// `fake://`: the embedded simulated runtime; nothing runs for real.
    Simulated,
}

/// The scheme of a CRI server's endpoint.
const CRI_SCHEME: &str = "unix://";
/// The scheme of the embedded simulated runtime: the one place it is recognised.
const SIMULATED_SCHEME: &str = "fake://";

/// The endpoint schemes rkubelet has a client for.
pub const RUNTIME_SCHEMES: [&str; 2] = [CRI_SCHEME, SIMULATED_SCHEME];

impl RuntimeEndpoint {
    /// The endpoint for a `containerRuntimeEndpoint`-style value; `None` for a scheme
    /// rkubelet has no client for.
    pub fn parse(text: &str) -> Option<Self> {
        if text.starts_with(SIMULATED_SCHEME) {
            Some(Self::Simulated)
        } else if text.starts_with(CRI_SCHEME) {
            Some(Self::Cri(text.to_owned()))
        } else {
            None
        }
    }

    pub fn is_simulated(&self) -> bool {
        matches!(self, Self::Simulated)
    }
}

impl fmt::Display for RuntimeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cri(uri) => f.write_str(uri),
            Self::Simulated => f.write_str(SIMULATED_SCHEME),
        }
    }
}

/// `logging.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `logging`: how the kubelet logs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoggingSettings {
    pub format: LogFormat,
    /// `logging.verbosity` (`-v`).
    pub verbosity: u32,
    /// `--vmodule`, else `logging.vmodule`: the verbosity per source file (text only).
    pub vmodule: Vec<crate::domain::log_format::VModuleRule>,
}

/// The address `/healthz` is served on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthzAddress {
    pub bind_address: String,
    pub port: u16,
}

impl fmt::Display for HealthzAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.bind_address, self.port)
    }
}

/// The configuration in typed form, checked against the node it runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    pub node_name: String,
    pub node_name_source: NodeNameSource,
    pub machine: MachineInfo,
    /// Capacity, reservations, eviction thresholds and allocatable on this machine.
    pub node: NodeSettings,
    pub feature_gates: FeatureGates,

    pub runtime_endpoint: RuntimeEndpoint,
    /// `imageServiceEndpoint`, or the runtime's when not given.
    pub image_service_endpoint: RuntimeEndpoint,
    pub runtime_request_timeout: Duration,

    /// `staticPodPath`, when given.
    pub static_pod_path: Option<PathBuf>,
    pub file_check_frequency: Duration,
    /// `staticPodURL`, when given.
    pub static_pod_url: Option<String>,
    pub static_pod_url_header: BTreeMap<String, Vec<String>>,
    pub http_check_frequency: Duration,
    pub sync_frequency: Duration,

    pub pod_logs_dir: PathBuf,
    /// `resolvConf`, when given (empty turns the host's resolver off for pods).
    pub resolv_conf: Option<PathBuf>,
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,

    pub cgroup_driver: CgroupDriver,
    pub cgroup_root: String,
    /// The tree under `cgroupRoot`; `None` with `cgroupsPerQOS` off.
    pub cgroup_tree: Option<CgroupTree>,
    /// CFS quota, its period and the pod pid limit, for pods and their containers.
    pub pod_cgroups: CgroupSettings,

    /// `None` when `healthzPort` is 0.
    pub healthz: Option<HealthzAddress>,
    pub oom_score_adj: i32,

    pub register_node: bool,
    pub register_with_taints: Vec<Taint>,
    pub node_status_update_frequency: Duration,
    pub node_status_report_frequency: Duration,
    pub node_lease_duration: Duration,
    /// The OS hostname, or `--hostname-override` lower-cased (the `kubernetes.io/hostname`
    /// label and the `Hostname` address).
    pub hostname: String,
    /// The API server connection; `None` in standalone mode.
    pub cluster: Option<ClusterConfig>,
    /// The eviction manager and image garbage collection (the thresholds are in `node`).
    pub eviction: EvictionSettings,
    /// `containerLogMaxSize`, `containerLogMaxFiles`, `containerLogMaxWorkers`,
    /// `containerLogMonitorInterval`.
    pub log_rotation: crate::domain::kuberuntime::log_rotation::LogRotationSettings,
    /// `seccompDefault`: `RuntimeDefault` for containers that name no seccomp profile.
    pub seccomp_default: bool,
    /// `allowedUnsafeSysctls`: sysctls and `prefix*` patterns pods may set beyond the
    /// safe ones, each known to be namespaced.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// `port`: the kubelet API's port, reported in the Node's `daemonEndpoints` whether
    /// or not `enableServer` serves it.
    pub kubelet_port: u16,
    /// `logging`.
    pub logging: LoggingSettings,
    /// The kubelet API (`port`, 10250); `None` when `enableServer` is false.
    pub server: Option<crate::domain::kubelet_api::settings::ServerSettings>,
    /// `cpuManagerPolicy`, its options and reconcile period, and the topology manager's
    /// policy, scope and options.
    pub cpu_manager: crate::domain::resource_managers::cpu_manager::CpuManagerSettings,
}

/// The eviction manager's and image GC's settings, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionSettings {
    /// `evictionPressureTransitionPeriod`.
    pub pressure_transition_period: Duration,
    /// `mergeDefaultEvictionSettings`: the default hard thresholds apply for every signal
    /// `evictionHard` does not give.
    pub merge_default_eviction_settings: bool,
    /// `evictionMaxPodGracePeriod`.
    pub max_pod_grace_period_seconds: i64,
    /// `kernelMemcgNotification`; unlike upstream, on unless set to false (cgroup v1 only).
    pub kernel_memcg_notification: bool,
    /// `localStorageCapacityIsolation`.
    pub local_storage_capacity_isolation: bool,
    /// `--housekeeping-interval`: how often the node is observed (upstream's 10 s).
    pub monitoring_period: Duration,
    /// `imageGCHighThresholdPercent`, `imageGCLowThresholdPercent`, `imageMinimumGCAge`.
    pub image_gc: ImageGcPolicy,
    /// `--pod-infra-container-image`: never removed by image GC.
    pub pod_sandbox_image: String,
}

impl NodeConfig {
    /// The eviction manager's configuration: every threshold, hard and soft.
    pub fn eviction_config(&self) -> EvictionConfig {
        let e = &self.eviction;
        EvictionConfig {
            thresholds: self
                .node
                .hard_thresholds
                .iter()
                .chain(&self.node.soft_thresholds)
                .cloned()
                .collect(),
            pressure_transition_period_nanos: i64::try_from(
                e.pressure_transition_period.as_nanos(),
            )
            .unwrap_or(i64::MAX),
            max_pod_grace_period_seconds: e.max_pod_grace_period_seconds,
            local_storage_capacity_isolation: e.local_storage_capacity_isolation,
        }
    }
}

/// Connected mode: `--kubeconfig` (or `--bootstrap-kubeconfig`) is given.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    pub kubeconfig: PathBuf,
    pub bootstrap_kubeconfig: Option<PathBuf>,
    pub cert_dir: PathBuf,
    pub rotate_certificates: bool,
    /// `kubeAPIQPS`, `kubeAPIBurst`: the client-side rate limit.
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    /// `eventRecordQPS`, `eventBurst`: the events' own client-side rate limit.
    pub event_record_qps: f64,
    pub event_burst: u32,
    /// `--node-labels`, validated as node restriction requires.
    pub node_labels: BTreeMap<String, String>,
    pub node_ips: Vec<core::net::IpAddr>,
    pub register_schedulable: bool,
    pub provider_id: Option<String>,
    /// `nodeStatusMaxImages`: the most images the node status lists (-1: all).
    pub node_status_max_images: i32,
}

/// `kubeAPIQPS` and `kubeAPIBurst` unless given: upstream's since v1.27 (v1.26 had 5 and
/// 10, which held a busy node's pod statuses back by tens of seconds).
pub const DEFAULT_KUBE_API_QPS: f64 = 50.0;
pub const DEFAULT_KUBE_API_BURST: u32 = 100;
/// `eventRecordQPS` and `eventBurst` unless given: upstream's since v1.27 too (v1.26 had 5
/// and 10).
pub const DEFAULT_EVENT_RECORD_QPS: f64 = 50.0;
pub const DEFAULT_EVENT_BURST: u32 = 100;
/// `nodeStatusMaxImages` unless given.
pub const DEFAULT_NODE_STATUS_MAX_IMAGES: i32 = 50;

/// The validated configuration: the document as merged (for `/configz` and the planner),
/// where each field came from, the flag-only options, and the typed value.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedConfig {
    pub config: KubeletConfiguration,
    pub origins: BTreeMap<String, Source>,
    pub options: FlagOptions,
    pub node: NodeConfig,
}
