//! The `KubeletConfiguration` (kubelet.config.k8s.io/v1beta1) fields rkubelet supports,
//! with upstream's defaults. Field names are upstream's, in every file format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::duration::GoDuration;

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
}

impl Default for Logging {
    fn default() -> Self {
        Self {
            format: "text".into(),
            flush_frequency: GoDuration::from_secs(5),
            verbosity: 0,
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
];
