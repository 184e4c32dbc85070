//! The `KubeletConfiguration` (kubelet.config.k8s.io/v1beta1) fields rkubelet supports,
//! with upstream's defaults. Field names are upstream's, in every file format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::units::duration::GoDuration;

pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
pub const KIND: &str = "KubeletConfiguration";

/// A node taint as given to `registerWithTaints` / `--register-with-taints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: String,
    /// Part of upstream's `v1.Taint`; accepted, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct X509Authentication {
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WebhookAuthentication {
    pub enabled: bool,
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: GoDuration,
}

impl Default for WebhookAuthentication {
    fn default() -> Self {
        Self {
            enabled: true,
            cache_ttl: GoDuration::from_secs(120),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AnonymousAuthentication {
    /// Secure default: no anonymous access, even without a file (upstream's flag default is true).
    pub enabled: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Authentication {
    pub x509: X509Authentication,
    pub webhook: WebhookAuthentication,
    pub anonymous: AnonymousAuthentication,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WebhookAuthorization {
    #[serde(rename = "cacheAuthorizedTTL")]
    pub cache_authorized_ttl: GoDuration,
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub cache_unauthorized_ttl: GoDuration,
}

impl Default for WebhookAuthorization {
    fn default() -> Self {
        Self {
            cache_authorized_ttl: GoDuration::from_secs(300),
            cache_unauthorized_ttl: GoDuration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Authorization {
    /// Secure default: `Webhook` (upstream's flag default is `AlwaysAllow`).
    pub mode: String,
    pub webhook: WebhookAuthorization,
}

impl Default for Authorization {
    fn default() -> Self {
        Self {
            mode: "Webhook".into(),
            webhook: WebhookAuthorization::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Logging {
    pub format: String,
    pub flush_frequency: GoDuration,
    pub verbosity: u32,
    /// Per-file verbosity (`[{filePattern, verbosity}]`; `--vmodule` replaces it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmodule: Option<Vec<Map<String, Value>>>,
    /// Accepted, not implemented: format-specific options (`json`, `text`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Map<String, Value>>,
}

impl Default for Logging {
    fn default() -> Self {
        Self {
            format: "text".into(),
            flush_frequency: GoDuration::from_secs(5),
            verbosity: 0,
            vmodule: None,
            options: None,
        }
    }
}

/// The configuration the kubelet runs with, after defaults, files, drop-ins and flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct KubeletConfiguration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub enable_server: bool,
    pub static_pod_path: String,
    pub pod_logs_dir: String,
    pub sync_frequency: GoDuration,
    pub file_check_frequency: GoDuration,
    pub http_check_frequency: GoDuration,
    #[serde(rename = "staticPodURL")]
    pub static_pod_url: String,
    #[serde(rename = "staticPodURLHeader")]
    pub static_pod_url_header: BTreeMap<String, Vec<String>>,
    pub address: String,
    pub port: i32,
    pub read_only_port: i32,
    pub tls_cert_file: String,
    pub tls_private_key_file: String,
    pub authentication: Authentication,
    pub authorization: Authorization,
    pub healthz_port: i32,
    pub healthz_bind_address: String,
    pub oom_score_adj: i32,
    pub cluster_domain: String,
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Vec<String>,
    /// The resolver configuration pods with the `Default` DNS policy inherit;
    /// empty disables it.
    pub resolv_conf: String,
    pub node_status_update_frequency: GoDuration,
    pub node_status_report_frequency: GoDuration,
    pub node_lease_duration_seconds: i32,
    #[serde(rename = "cgroupsPerQOS")]
    pub cgroups_per_qos: bool,
    pub cgroup_root: String,
    pub cgroup_driver: String,
    #[serde(rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: bool,
    #[serde(rename = "cpuCFSQuotaPeriod")]
    pub cpu_cfs_quota_period: GoDuration,
    pub runtime_request_timeout: GoDuration,
    pub max_pods: i32,
    pub pod_pids_limit: i64,
    pub fail_swap_on: bool,
    pub feature_gates: BTreeMap<String, bool>,
    pub kube_reserved_cgroup: String,
    pub system_reserved_cgroup: String,
    pub system_reserved: BTreeMap<String, String>,
    pub kube_reserved: BTreeMap<String, String>,
    #[serde(rename = "reservedSystemCPUs")]
    pub reserved_system_cpus: String,
    pub enforce_node_allocatable: Vec<String>,
    pub qos_reserved: BTreeMap<String, String>,
    pub eviction_hard: BTreeMap<String, String>,
    pub eviction_soft: BTreeMap<String, String>,
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    pub eviction_pressure_transition_period: GoDuration,
    pub eviction_max_pod_grace_period: i32,
    pub eviction_minimum_reclaim: BTreeMap<String, String>,
    pub merge_default_eviction_settings: bool,
    pub container_runtime_endpoint: String,
    pub image_service_endpoint: String,
    pub register_node: bool,
    pub register_with_taints: Vec<Taint>,
    pub serialize_image_pulls: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_parallel_image_pulls: Option<i32>,
    pub logging: Logging,
    // Upstream fields rkubelet accepts without acting on them (or refuses some values
    // of, see `states`): typed so a bad value is still an error, `None` when not given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cipher_suites: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_curve_preferences: Option<Vec<i32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_min_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotate_certificates: Option<bool>,
    #[serde(rename = "serverTLSBootstrap", skip_serializing_if = "Option::is_none")]
    pub server_tls_bootstrap: Option<bool>,
    #[serde(rename = "registryPullQPS", skip_serializing_if = "Option::is_none")]
    pub registry_pull_qps: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_burst: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_pull_credentials_verification_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preloaded_images_verification_allowlist: Option<Vec<String>>,
    #[serde(rename = "eventRecordQPS", skip_serializing_if = "Option::is_none")]
    pub event_record_qps: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_burst: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_debugging_handlers: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_contention_profiling: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming_connection_idle_timeout: Option<GoDuration>,
    #[serde(rename = "imageMinimumGCAge", skip_serializing_if = "Option::is_none")]
    pub image_minimum_gc_age: Option<GoDuration>,
    #[serde(rename = "imageMaximumGCAge", skip_serializing_if = "Option::is_none")]
    pub image_maximum_gc_age: Option<GoDuration>,
    #[serde(
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_stats_agg_period: Option<GoDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubelet_cgroups: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_cgroups: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_manager_policy: Option<String>,
    #[serde(
        rename = "singleProcessOOMKill",
        skip_serializing_if = "Option::is_none"
    )]
    pub single_process_oom_kill: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_manager_policy_options: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_manager_reconcile_period: Option<GoDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_manager_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_manager_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_manager_scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_manager_policy_options: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hairpin_mode: Option<String>,
    #[serde(rename = "podCIDR", skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_once: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_status_max_images: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_open_files: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(rename = "kubeAPIQPS", skip_serializing_if = "Option::is_none")]
    pub kube_api_qps: Option<i32>,
    #[serde(rename = "kubeAPIBurst", skip_serializing_if = "Option::is_none")]
    pub kube_api_burst: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_controller_attach_detach: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protect_kernel_defaults: Option<bool>,
    #[serde(
        rename = "makeIPTablesUtilChains",
        skip_serializing_if = "Option::is_none"
    )]
    pub make_iptables_util_chains: Option<bool>,
    #[serde(
        rename = "iptablesMasqueradeBit",
        skip_serializing_if = "Option::is_none"
    )]
    pub iptables_masquerade_bit: Option<i32>,
    #[serde(rename = "iptablesDropBit", skip_serializing_if = "Option::is_none")]
    pub iptables_drop_bit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_swap: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_log_max_size: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_log_max_files: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_log_max_workers: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_log_monitor_interval: Option<GoDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_and_secret_change_detection_strategy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub show_hidden_metrics_for_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_unsafe_sysctls: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_plugin_dir: Option<String>,
    #[serde(rename = "providerID", skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_memcg_notification: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_system_log_handler: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_system_log_query: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period: Option<GoDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period_critical_pods: Option<GoDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period_by_pod_priority: Option<Vec<Map<String, Value>>>,
    #[serde(rename = "crashLoopBackOff", skip_serializing_if = "Option::is_none")]
    pub crash_loop_back_off: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_memory: Option<Vec<Map<String, Value>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_profiling_handler: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_debug_flags_handler: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp_default: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_throttling_factor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_reservation_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracing: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_storage_capacity_isolation: Option<bool>,
    #[serde(rename = "failCgroupV1", skip_serializing_if = "Option::is_none")]
    pub fail_cgroup_v1: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_namespaces: Option<Map<String, Value>>,
}

impl Default for KubeletConfiguration {
    fn default() -> Self {
        Self {
            api_version: None,
            kind: None,
            enable_server: true,
            static_pod_path: String::new(),
            pod_logs_dir: "/var/log/pods".into(),
            sync_frequency: GoDuration::from_secs(60),
            file_check_frequency: GoDuration::from_secs(20),
            http_check_frequency: GoDuration::from_secs(20),
            static_pod_url: String::new(),
            static_pod_url_header: BTreeMap::new(),
            address: "0.0.0.0".into(),
            port: 10250,
            // Secure default: the unauthenticated read-only port stays off.
            read_only_port: 0,
            tls_cert_file: String::new(),
            tls_private_key_file: String::new(),
            authentication: Authentication::default(),
            authorization: Authorization::default(),
            healthz_port: 10248,
            healthz_bind_address: "127.0.0.1".into(),
            oom_score_adj: -999,
            cluster_domain: String::new(),
            cluster_dns: Vec::new(),
            resolv_conf: "/etc/resolv.conf".into(),
            node_status_update_frequency: GoDuration::from_secs(10),
            node_status_report_frequency: GoDuration::from_secs(300),
            node_lease_duration_seconds: 40,
            cgroups_per_qos: true,
            cgroup_root: String::new(),
            cgroup_driver: "cgroupfs".into(),
            cpu_cfs_quota: true,
            cpu_cfs_quota_period: GoDuration::from_millis(100),
            runtime_request_timeout: GoDuration::from_secs(120),
            max_pods: 110,
            pod_pids_limit: -1,
            fail_swap_on: true,
            feature_gates: BTreeMap::new(),
            kube_reserved_cgroup: String::new(),
            system_reserved_cgroup: String::new(),
            system_reserved: BTreeMap::new(),
            kube_reserved: BTreeMap::new(),
            reserved_system_cpus: String::new(),
            enforce_node_allocatable: vec!["pods".into()],
            qos_reserved: BTreeMap::new(),
            eviction_hard: crate::domain::eviction::default_eviction_hard(),
            eviction_soft: BTreeMap::new(),
            eviction_soft_grace_period: BTreeMap::new(),
            eviction_pressure_transition_period: GoDuration::from_secs(300),
            eviction_max_pod_grace_period: 0,
            eviction_minimum_reclaim: BTreeMap::new(),
            merge_default_eviction_settings: false,
            container_runtime_endpoint: "unix:///run/containerd/containerd.sock".into(),
            image_service_endpoint: String::new(),
            register_node: true,
            register_with_taints: Vec::new(),
            serialize_image_pulls: true,
            max_parallel_image_pulls: None,
            logging: Logging::default(),
            tls_cipher_suites: None,
            tls_curve_preferences: None,
            tls_min_version: None,
            rotate_certificates: None,
            server_tls_bootstrap: None,
            registry_pull_qps: None,
            registry_burst: None,
            image_pull_credentials_verification_policy: None,
            preloaded_images_verification_allowlist: None,
            event_record_qps: None,
            event_burst: None,
            enable_debugging_handlers: None,
            enable_contention_profiling: None,
            streaming_connection_idle_timeout: None,
            image_minimum_gc_age: None,
            image_maximum_gc_age: None,
            image_gc_high_threshold_percent: None,
            image_gc_low_threshold_percent: None,
            volume_stats_agg_period: None,
            kubelet_cgroups: None,
            system_cgroups: None,
            cpu_manager_policy: None,
            single_process_oom_kill: None,
            cpu_manager_policy_options: None,
            cpu_manager_reconcile_period: None,
            memory_manager_policy: None,
            topology_manager_policy: None,
            topology_manager_scope: None,
            topology_manager_policy_options: None,
            hairpin_mode: None,
            pod_cidr: None,
            run_once: None,
            node_status_max_images: None,
            max_open_files: None,
            content_type: None,
            kube_api_qps: None,
            kube_api_burst: None,
            pods_per_core: None,
            enable_controller_attach_detach: None,
            protect_kernel_defaults: None,
            make_iptables_util_chains: None,
            iptables_masquerade_bit: None,
            iptables_drop_bit: None,
            memory_swap: None,
            container_log_max_size: None,
            container_log_max_files: None,
            container_log_max_workers: None,
            container_log_monitor_interval: None,
            config_map_and_secret_change_detection_strategy: None,
            show_hidden_metrics_for_version: None,
            allowed_unsafe_sysctls: None,
            volume_plugin_dir: None,
            provider_id: None,
            kernel_memcg_notification: None,
            enable_system_log_handler: None,
            enable_system_log_query: None,
            shutdown_grace_period: None,
            shutdown_grace_period_critical_pods: None,
            shutdown_grace_period_by_pod_priority: None,
            crash_loop_back_off: None,
            reserved_memory: None,
            enable_profiling_handler: None,
            enable_debug_flags_handler: None,
            seccomp_default: None,
            memory_throttling_factor: None,
            memory_reservation_policy: None,
            tracing: None,
            local_storage_capacity_isolation: None,
            fail_cgroup_v1: None,
            user_namespaces: None,
        }
    }
}

/// Fields holding paths that a file may give relative to its own folder.
pub const PATH_FIELDS: &[&[&str]] = &[
    &["staticPodPath"],
    &["tlsCertFile"],
    &["tlsPrivateKeyFile"],
    &["authentication", "x509", "clientCAFile"],
    &["podLogsDir"],
    &["resolvConf"],
    &["volumePluginDir"],
];
