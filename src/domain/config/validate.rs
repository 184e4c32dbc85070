//! Semantic validation of a merged configuration against the node, in upstream's words,
//! producing the typed [`NodeConfig`]. Every problem is collected; nothing stops at the
//! first, and a value is parsed once, here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::error::ConfigError;
use super::feature_gates::FeatureGates;
use super::model::KubeletConfiguration;
use super::options::FlagOptions;
use super::resolved::{
    ClusterConfig, EvictionSettings, HealthzAddress, LogFormat, LoggingSettings, NodeConfig,
    NodeFacts, RuntimeEndpoint, DEFAULT_EVENT_BURST, DEFAULT_EVENT_RECORD_QPS,
    DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS, DEFAULT_NODE_STATUS_MAX_IMAGES, RUNTIME_SCHEMES,
};
use crate::domain::cgroup::cfs;
use crate::domain::cgroup::tree::CgroupTree;
use crate::domain::cgroup::{kubepods_name, CgroupDriver, CgroupSettings};
use crate::domain::eviction;
use crate::domain::eviction::image_gc::{self, ImageGcPolicy};
use crate::domain::kuberuntime::log_rotation::{self, LogRotatePolicy, LogRotationSettings};
use crate::domain::node::reserved::{self, ResourceList, ENFORCE_PODS};
use crate::domain::node::{node_settings, resolve_node_name, GivenReservations};
use crate::domain::node_status::labels::validate_node_labels;
use crate::domain::units::duration::GoDuration;
use crate::domain::units::quantity::Quantity;

pub const CGROUP_DRIVERS: [&str; 2] = ["cgroupfs", "systemd"];

fn invalid(message: String) -> ConfigError {
    ConfigError::Invalid(message)
}

fn is_port(value: i32) -> bool {
    (1..=65535).contains(&value)
}

/// A positive Go duration as a std one; problems name the field. A non-positive one is
/// reported and gives `None`.
fn positive(name: &str, d: GoDuration, problems: &mut Vec<ConfigError>) -> Option<Duration> {
    match d.to_std().filter(|d| !d.is_zero()) {
        Some(d) => Some(d),
        None => {
            problems.push(invalid(format!(
                "invalid configuration: {name} {d} must be greater than zero"
            )));
            None
        }
    }
}

fn non_empty_path(text: &str) -> Option<PathBuf> {
    (!text.is_empty()).then(|| PathBuf::from(text))
}

/// The CPU and topology managers' fields with upstream's defaults (`none`, 10s, `none`,
/// `container`; a zero reconcile period is `node_status_update_frequency`, as upstream
/// defaults it); the policies themselves are checked when the managers are built.
fn cpu_manager_settings(
    c: &KubeletConfiguration,
    node_status_update_frequency: Option<Duration>,
    problems: &mut Vec<ConfigError>,
) -> crate::domain::resource_managers::cpu_manager::CpuManagerSettings {
    use crate::domain::resource_managers::cpu_manager::CpuManagerSettings;
    let defaults = CpuManagerSettings::default();
    let zero_default = node_status_update_frequency.unwrap_or(defaults.reconcile_period);
    let reconcile_period = match c.cpu_manager_reconcile_period {
        Some(d) if d.to_std().is_some_and(|d| d.is_zero()) => zero_default,
        Some(d) => {
            positive("cpuManagerReconcilePeriod", d, problems).unwrap_or(defaults.reconcile_period)
        }
        None => defaults.reconcile_period,
    };
    // Empty is unset, as `states::check` reads it.
    let given = |v: &Option<String>, default: String| {
        v.clone().filter(|s| !s.is_empty()).unwrap_or(default)
    };
    CpuManagerSettings {
        policy: given(&c.cpu_manager_policy, defaults.policy),
        policy_options: c.cpu_manager_policy_options.clone().unwrap_or_default(),
        reconcile_period,
        topology_policy: given(&c.topology_manager_policy, defaults.topology_policy),
        topology_scope: given(&c.topology_manager_scope, defaults.topology_scope),
        topology_options: c
            .topology_manager_policy_options
            .clone()
            .unwrap_or_default(),
    }
}

/// Every problem with `c` on the node `facts` describes, or the typed configuration.
pub fn validate(
    c: &KubeletConfiguration,
    options: &FlagOptions,
    facts: &NodeFacts,
) -> Result<NodeConfig, Vec<ConfigError>> {
    let mut problems = Vec::new();

    let feature_gates = match FeatureGates::from_map(&c.feature_gates) {
        Ok(gates) => gates,
        Err(errors) => {
            problems.extend(errors.into_iter().map(|e| invalid(e.to_string())));
            FeatureGates::default()
        }
    };
    let node_name = resolve_node_name(options.hostname_override.as_deref(), &facts.hostname)
        .map_err(|e| problems.push(invalid(e.to_string())))
        .ok();

    if c.node_lease_duration_seconds <= 0 {
        problems.push(invalid(
            "invalid configuration: nodeLeaseDurationSeconds must be greater than 0".into(),
        ));
    }
    let healthz_port = u16::try_from(c.healthz_port).ok();
    if c.healthz_port != 0 && !is_port(c.healthz_port) {
        problems.push(invalid(format!("invalid configuration: healthzPort (--healthz-port) {} must be between 1 and 65535, inclusive", c.healthz_port)));
    }
    if !is_port(c.port) {
        problems.push(invalid(format!(
            "invalid configuration: port (--port) {} must be between 1 and 65535, inclusive",
            c.port
        )));
    }
    if c.read_only_port != 0 && !is_port(c.read_only_port) {
        problems.push(invalid(format!("invalid configuration: readOnlyPort (--read-only-port) {} must be between 0 and 65535, inclusive", c.read_only_port)));
    }
    let default_period = GoDuration::from_millis(100);
    if !feature_gates.enabled("CustomCPUCFSQuotaPeriod") && c.cpu_cfs_quota_period != default_period
    {
        problems.push(invalid(format!("invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {} requires feature gate CustomCPUCFSQuotaPeriod", c.cpu_cfs_quota_period)));
    }
    let period = c.cpu_cfs_quota_period.as_nanos();
    if feature_gates.enabled("CustomCPUCFSQuotaPeriod")
        && !(1_000_000..=1_000_000_000).contains(&period)
    {
        problems.push(invalid(format!("invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {} must be between 1ms and 1sec, inclusive", c.cpu_cfs_quota_period)));
    }
    if c.max_pods < 0 {
        problems.push(invalid(format!(
            "invalid configuration: maxPods (--max-pods) {} must not be a negative number",
            c.max_pods
        )));
    }
    if !(-1000..=1000).contains(&c.oom_score_adj) {
        problems.push(invalid(format!("invalid configuration: oomScoreAdj (--oom-score-adj) {} must be between -1000 and 1000, inclusive", c.oom_score_adj)));
    }
    if c.pod_pids_limit < -1 {
        problems.push(invalid(format!("invalid configuration: podPidsLimit (--pod-max-pids) {} must be -1 (unlimited) or a positive number", c.pod_pids_limit)));
    }
    let cgroup_driver = CgroupDriver::parse(&c.cgroup_driver);
    if cgroup_driver.is_none() {
        problems.push(invalid(format!(
            "invalid configuration: cgroupDriver (--cgroup-driver) {:?} must be one of {:?} or {:?}",
            c.cgroup_driver, CGROUP_DRIVERS[0], CGROUP_DRIVERS[1]
        )));
    }
    let runtime_request_timeout = positive(
        "runtimeRequestTimeout (--runtime-request-timeout)",
        c.runtime_request_timeout,
        &mut problems,
    );
    let sync_frequency = positive(
        "syncFrequency (--sync-frequency)",
        c.sync_frequency,
        &mut problems,
    );
    let file_check_frequency = positive(
        "fileCheckFrequency (--file-check-frequency)",
        c.file_check_frequency,
        &mut problems,
    );
    let http_check_frequency = positive(
        "httpCheckFrequency (--http-check-frequency)",
        c.http_check_frequency,
        &mut problems,
    );
    let node_status_update_frequency = positive(
        "nodeStatusUpdateFrequency (--node-status-update-frequency)",
        c.node_status_update_frequency,
        &mut problems,
    );
    let cpu_manager = cpu_manager_settings(c, node_status_update_frequency, &mut problems);
    let node_status_report_frequency = positive(
        "nodeStatusReportFrequency",
        c.node_status_report_frequency,
        &mut problems,
    );
    if c.max_parallel_image_pulls.is_some_and(|n| n < 1) {
        problems.push(invalid(format!(
            "invalid configuration: maxParallelImagePulls {} must be a positive number",
            c.max_parallel_image_pulls.unwrap_or_default()
        )));
    }
    if c.serialize_image_pulls && c.max_parallel_image_pulls.is_some_and(|n| n > 1) {
        problems.push(invalid("invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false".into()));
    }

    for e in reserved::validate_enforce_node_allocatable(
        &c.enforce_node_allocatable,
        &c.system_reserved_cgroup,
        &c.kube_reserved_cgroup,
    ) {
        problems.push(invalid(e.to_string()));
    }
    if !c.cgroups_per_qos {
        for value in c
            .enforce_node_allocatable
            .iter()
            .filter(|v| v.as_str() != "none")
        {
            problems.push(invalid(format!("invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when {value:?} contained in enforceNodeAllocatable (--enforce-node-allocatable)")));
        }
    }
    let mut reserved_cpus = None;
    if !c.reserved_system_cpus.is_empty() {
        if let Some(e) = reserved::validate_reserved_cpus_cgroups(
            &c.reserved_system_cpus,
            &c.system_reserved_cgroup,
            &c.kube_reserved_cgroup,
        ) {
            problems.push(invalid(e.to_string()));
        }
        match reserved::parse_reserved_cpus(&c.reserved_system_cpus) {
            Ok(cpus) => reserved_cpus = Some(cpus),
            Err(e) => problems.push(invalid(e.to_string())),
        }
    }
    let mut reserved_list = |field: &str, map: &BTreeMap<String, String>| {
        reserved::parse_reserved(field, map).unwrap_or_else(|errors| {
            problems.extend(errors.into_iter().map(|e| invalid(e.to_string())));
            ResourceList::new()
        })
    };
    let kube_reserved = reserved_list("kubeReserved (--kube-reserved)", &c.kube_reserved);
    let system_reserved = reserved_list("systemReserved (--system-reserved)", &c.system_reserved);
    if let Err(e) = reserved::parse_qos_reserved(&c.qos_reserved) {
        problems.push(invalid(e.to_string()));
    }
    let thresholds = eviction::thresholds(
        &c.enforce_node_allocatable,
        &c.eviction_hard,
        &c.eviction_soft,
        &c.eviction_soft_grace_period,
        &c.eviction_minimum_reclaim,
    );
    problems.extend(
        thresholds
            .errors
            .iter()
            .map(|e| invalid(format!("invalid configuration: {e}"))),
    );
    let eviction_defaults_replaced = !c.merge_default_eviction_settings
        && eviction::default_eviction_hard()
            .keys()
            .any(|k| !c.eviction_hard.contains_key(k));

    let endpoint = |name: &str, text: &str, problems: &mut Vec<ConfigError>| {
        let parsed = RuntimeEndpoint::parse(text);
        if parsed.is_none() {
            problems.push(invalid(format!(
                "invalid configuration: {name} {text:?} must start with one of {RUNTIME_SCHEMES:?}"
            )));
        }
        parsed
    };
    let runtime_endpoint = if c.container_runtime_endpoint.is_empty() {
        problems.push(invalid(
            "invalid configuration: the containerRuntimeEndpoint was not specified or empty".into(),
        ));
        None
    } else {
        endpoint(
            "containerRuntimeEndpoint (--container-runtime-endpoint)",
            &c.container_runtime_endpoint,
            &mut problems,
        )
    };
    let image_service_endpoint = if c.image_service_endpoint.is_empty() {
        runtime_endpoint.clone()
    } else {
        endpoint(
            "imageServiceEndpoint (--image-service-endpoint)",
            &c.image_service_endpoint,
            &mut problems,
        )
    };
    if c.pod_logs_dir.is_empty() {
        problems.push(invalid(
            "invalid configuration: podLogsDir was not specified".into(),
        ));
    } else if !c.pod_logs_dir.starts_with('/') {
        problems.push(invalid(format!(
            "invalid configuration: pod logs path {:?} must be absolute path",
            c.pod_logs_dir
        )));
    }
    let log_format = match c.logging.format.as_str() {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => {
            problems.push(invalid(format!(
                "invalid configuration: logging.format (--logging-format) {other:?} must be one of \"text\" or \"json\""
            )));
            LogFormat::Text
        }
    };
    let vmodule = logging_vmodule(c, options, log_format, &mut problems);
    if !["AlwaysAllow", "Webhook"].contains(&c.authorization.mode.as_str()) {
        problems.push(invalid(format!(
            "invalid configuration: authorization.mode (--authorization-mode) {:?} must be one of \"AlwaysAllow\" or \"Webhook\"",
            c.authorization.mode
        )));
    }
    for taint in &c.register_with_taints {
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&taint.effect.as_str())
            || taint.key.is_empty()
        {
            problems.push(invalid(format!(
                "invalid taint: {}={}:{}",
                taint.key, taint.value, taint.effect
            )));
        }
    }
    let allowed_unsafe_sysctls = c.allowed_unsafe_sysctls.clone().unwrap_or_default();
    for pattern in &allowed_unsafe_sysctls {
        if let Some(e) = crate::domain::securitycontext::allowlist_pattern_error(pattern) {
            problems.push(invalid(format!(
                "invalid configuration: allowedUnsafeSysctls (--allowed-unsafe-sysctls): {e}"
            )));
        }
    }
    let pod_cgroups = CgroupSettings {
        cpu_cfs_quota: c.cpu_cfs_quota,
        cpu_cfs_quota_period_us: c
            .cpu_cfs_quota_period
            .to_std()
            .map_or(cfs::DEFAULT_QUOTA_PERIOD_US, cfs::period_us),
        pod_pids_limit: c.pod_pids_limit,
    };
    let cgroup_tree = if c.cgroups_per_qos {
        kubepods_name(&c.cgroup_root)
            .map(|kubepods| CgroupTree {
                kubepods,
                enforce_pods: c.enforce_node_allocatable.iter().any(|e| e == ENFORCE_PODS),
                pod_settings: pod_cgroups,
            })
            .map_err(|e| {
                problems.push(invalid(format!(
                    "invalid configuration: cgroupRoot (--cgroup-root) {:?}: {e}",
                    c.cgroup_root
                )))
            })
            .ok()
    } else {
        None
    };

    let cluster = cluster_config(c, options, &mut problems);
    let eviction = eviction_settings(c, options, &mut problems);
    let log_rotation = log_rotation_settings(c, &mut problems);
    let server = match crate::domain::kubelet_api::settings::server_settings(c, &options.cert_dir) {
        Ok(settings) => c.enable_server.then_some(settings),
        Err(errors) => {
            problems.extend(errors.into_iter().map(invalid));
            None
        }
    };

    // The checks against this machine run whatever else is wrong, so every problem is
    // reported at once.
    let node = node_settings(
        &facts.machine,
        c.max_pods,
        GivenReservations {
            system_reserved,
            kube_reserved,
            reserved_cpus,
            hard_thresholds: thresholds.hard,
            soft_thresholds: thresholds.soft,
            eviction_defaults_replaced,
        },
    )
    .map_err(|errors| problems.extend(errors.iter().map(|e| invalid(e.to_string()))))
    .ok();

    let (
        Some((node_name, node_name_source)),
        Some(node),
        Some(cgroup_driver),
        Some(runtime_endpoint),
        Some(image_service_endpoint),
        Some(runtime_request_timeout),
        Some(sync_frequency),
        Some(file_check_frequency),
        Some(http_check_frequency),
        Some(node_status_update_frequency),
        Some(node_status_report_frequency),
        true,
    ) = (
        node_name,
        node,
        cgroup_driver,
        runtime_endpoint,
        image_service_endpoint,
        runtime_request_timeout,
        sync_frequency,
        file_check_frequency,
        http_check_frequency,
        node_status_update_frequency,
        node_status_report_frequency,
        problems.is_empty(),
    )
    else {
        return Err(problems);
    };
    Ok(NodeConfig {
        cpu_manager,
        node_name,
        node_name_source,
        machine: facts.machine.clone(),
        node,
        feature_gates,
        runtime_endpoint,
        image_service_endpoint,
        runtime_request_timeout,
        static_pod_path: non_empty_path(&c.static_pod_path),
        file_check_frequency,
        static_pod_url: (!c.static_pod_url.is_empty()).then(|| c.static_pod_url.clone()),
        static_pod_url_header: c.static_pod_url_header.clone(),
        http_check_frequency,
        sync_frequency,
        pod_logs_dir: PathBuf::from(&c.pod_logs_dir),
        resolv_conf: non_empty_path(&c.resolv_conf),
        cluster_dns: c.cluster_dns.clone(),
        cluster_domain: c.cluster_domain.clone(),
        cgroup_driver,
        cgroup_root: c.cgroup_root.clone(),
        cgroup_tree,
        pod_cgroups,
        healthz: healthz_port.filter(|p| *p != 0).map(|port| HealthzAddress {
            bind_address: c.healthz_bind_address.clone(),
            port,
        }),
        oom_score_adj: c.oom_score_adj,
        register_node: c.register_node,
        register_with_taints: c.register_with_taints.clone(),
        node_status_update_frequency,
        node_status_report_frequency,
        node_lease_duration: Duration::from_secs(
            u64::try_from(c.node_lease_duration_seconds).unwrap_or_default(),
        ),
        seccomp_default: c.seccomp_default.unwrap_or(false),
        // Checked above (1 to 65535): a bad one returned with the other problems.
        kubelet_port: u16::try_from(c.port).unwrap_or_default(),
        logging: LoggingSettings {
            format: log_format,
            verbosity: c.logging.verbosity,
            vmodule,
        },
        allowed_unsafe_sysctls,
        hostname: options
            .hostname_override
            .as_deref()
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .unwrap_or(facts.hostname.trim())
            .to_lowercase(),
        cluster,
        eviction,
        log_rotation,
        server,
    })
}

/// `--vmodule` when given, else `logging.vmodule`, checked as upstream's
/// `ValidateLoggingConfiguration` checks it (text format only, patterns without `=` or
/// `,`, verbosities that fit an int32).
fn logging_vmodule(
    c: &KubeletConfiguration,
    options: &FlagOptions,
    format: LogFormat,
    problems: &mut Vec<ConfigError>,
) -> Vec<crate::domain::log_format::VModuleRule> {
    use crate::domain::log_format::VModuleRule;
    let rules: Vec<VModuleRule> = match &options.vmodule {
        Some(rules) => rules.clone(),
        None => {
            let mut rules = Vec::new();
            for (i, item) in c.logging.vmodule.iter().flatten().enumerate() {
                let path = format!("logging.vmodule[{i}]");
                let pattern = item
                    .get("filePattern")
                    .and_then(|p| p.as_str())
                    .unwrap_or_default();
                let level = item.get("verbosity").and_then(serde_json::Value::as_u64);
                if pattern.is_empty() {
                    problems.push(invalid(format!(
                        "invalid configuration: {path}: Required value: File pattern must not be empty"
                    )));
                } else if pattern.contains(['=', ',']) {
                    problems.push(invalid(format!(
                        "invalid configuration: {path}: Invalid value: {pattern:?}: File pattern must not contain equal sign or comma"
                    )));
                }
                match level
                    .and_then(|l| u32::try_from(l).ok())
                    .filter(|l| *l <= i32::MAX.unsigned_abs())
                {
                    Some(verbosity) => rules.push(VModuleRule {
                        pattern: pattern.to_owned(),
                        verbosity,
                    }),
                    None => problems.push(invalid(format!(
                        "invalid configuration: {path}: Invalid value: {}: Must be <= {}",
                        item.get("verbosity")
                            .map(ToString::to_string)
                            .unwrap_or_default(),
                        i32::MAX
                    ))),
                }
            }
            rules
        }
    };
    if !rules.is_empty() && format != LogFormat::Text {
        problems.push(invalid(
            "invalid configuration: logging.vmodule: Forbidden: Only supported for text log format"
                .into(),
        ));
    }
    rules
}

/// The container log manager's settings, checked as upstream checks them (a negative
/// size turns rotation off).
fn log_rotation_settings(
    c: &KubeletConfiguration,
    problems: &mut Vec<ConfigError>,
) -> LogRotationSettings {
    let size_text = c
        .container_log_max_size
        .as_deref()
        .unwrap_or(log_rotation::DEFAULT_MAX_SIZE);
    let max_size = match Quantity::parse(size_text) {
        Ok(q) => Some(q.value()),
        Err(e) => {
            problems.push(invalid(format!("invalid configuration: containerLogMaxSize (--container-log-max-size) {size_text:?} is not a quantity: {e}")));
            None
        }
    };
    let max_files = c
        .container_log_max_files
        .unwrap_or(log_rotation::DEFAULT_MAX_FILES);
    if max_files <= 1 {
        problems.push(invalid(format!("invalid configuration: containerLogMaxFiles (--container-log-max-files) {max_files} must be greater than 1")));
    }
    let max_workers = c
        .container_log_max_workers
        .unwrap_or(log_rotation::DEFAULT_MAX_WORKERS);
    if max_workers < 1 {
        problems.push(invalid(format!("invalid configuration: containerLogMaxWorkers {max_workers} must be greater than or equal to 1")));
    }
    let monitor_interval = c
        .container_log_monitor_interval
        .map_or(Some(log_rotation::DEFAULT_MONITOR_INTERVAL), |d| d.to_std());
    let monitor_interval = match monitor_interval {
        Some(d) if d >= log_rotation::MIN_MONITOR_INTERVAL => d,
        _ => {
            let given = c
                .container_log_monitor_interval
                .map(|d| d.to_string())
                .unwrap_or_default();
            problems.push(invalid(format!("invalid configuration: containerLogMonitorInterval {given} must be a positive time duration greater than or equal to 3s")));
            log_rotation::DEFAULT_MONITOR_INTERVAL
        }
    };
    LogRotationSettings {
        policy: max_size
            .filter(|size| *size >= 0)
            .map(|size| LogRotatePolicy {
                max_size_bytes: u64::try_from(size).unwrap_or(u64::MAX),
                max_files: usize::try_from(max_files.max(2)).unwrap_or(2),
            }),
        monitor_interval,
        max_workers: usize::try_from(max_workers.max(1)).unwrap_or(1),
    }
}

/// The eviction manager's and image GC's settings, with upstream's checks of the image
/// GC thresholds.
fn eviction_settings(
    c: &KubeletConfiguration,
    options: &FlagOptions,
    problems: &mut Vec<ConfigError>,
) -> EvictionSettings {
    let high = c
        .image_gc_high_threshold_percent
        .unwrap_or(image_gc::DEFAULT_HIGH_THRESHOLD_PERCENT);
    let low = c
        .image_gc_low_threshold_percent
        .unwrap_or(image_gc::DEFAULT_LOW_THRESHOLD_PERCENT);
    if !(0..=100).contains(&high) {
        problems.push(invalid(format!("invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) {high} must be between 0 and 100, inclusive")));
    }
    if !(0..=100).contains(&low) {
        problems.push(invalid(format!("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be between 0 and 100, inclusive")));
    }
    if low >= high {
        problems.push(invalid(format!("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) {high}")));
    }
    let min_age = c.image_minimum_gc_age.map_or(
        image_gc::DEFAULT_MINIMUM_GC_AGE_SECS as i64 * 1_000_000_000,
        |d| d.as_nanos().max(0),
    );
    EvictionSettings {
        pressure_transition_period: c
            .eviction_pressure_transition_period
            .to_std()
            .unwrap_or_default(),
        merge_default_eviction_settings: c.merge_default_eviction_settings,
        max_pod_grace_period_seconds: i64::from(c.eviction_max_pod_grace_period),
        kernel_memcg_notification: c.kernel_memcg_notification.unwrap_or(true),
        local_storage_capacity_isolation: c.local_storage_capacity_isolation.unwrap_or(true),
        monitoring_period: options.housekeeping_interval,
        image_gc: ImageGcPolicy {
            high_threshold_percent: high,
            low_threshold_percent: low,
            min_age_nanos: min_age,
        },
        pod_sandbox_image: options.pod_sandbox_image.clone(),
    }
}

/// client-go's `DefaultQPS` and `DefaultBurst`: what a client given 0 uses (upstream's
/// "If 0 will use DefaultQPS: 5").
const CLIENT_GO_DEFAULT_QPS: f64 = 5.0;
const CLIENT_GO_DEFAULT_BURST: u32 = 10;

/// A `kubeAPIQPS`-like field: `unset` when absent, client-go's default when 0.
fn rate_limit_qps(given: Option<i32>, unset: f64) -> f64 {
    match given {
        None => unset,
        Some(0) => CLIENT_GO_DEFAULT_QPS,
        Some(q) => f64::from(q),
    }
}

/// A `kubeAPIBurst`-like field: `unset` when absent (or negative, refused beside), client-go's
/// default when 0.
fn rate_limit_burst(given: Option<i32>, unset: u32) -> u32 {
    match given {
        Some(0) => CLIENT_GO_DEFAULT_BURST,
        Some(b) => u32::try_from(b).unwrap_or(unset),
        None => unset,
    }
}

/// The API server connection of connected mode (`--kubeconfig` given), its node labels
/// checked as node restriction will check them.
fn cluster_config(
    c: &KubeletConfiguration,
    options: &FlagOptions,
    problems: &mut Vec<ConfigError>,
) -> Option<ClusterConfig> {
    if let Err(e) = validate_node_labels(&options.node_labels) {
        problems.push(invalid(e.to_string()));
    }
    for (field, flag, value) in [
        ("kubeAPIQPS", "kube-api-qps", c.kube_api_qps),
        ("kubeAPIBurst", "kube-api-burst", c.kube_api_burst),
        ("eventBurst", "event-burst", c.event_burst),
        ("eventRecordQPS", "event-qps", c.event_record_qps),
    ] {
        if let Some(negative) = value.filter(|v| *v < 0) {
            problems.push(invalid(format!(
                "invalid configuration: {field} (--{flag}) {negative} must not be a negative number"
            )));
        }
    }
    let kubeconfig = options.kubeconfig.clone()?;
    Some(ClusterConfig {
        kubeconfig,
        bootstrap_kubeconfig: options.bootstrap_kubeconfig.clone(),
        cert_dir: options.cert_dir.clone(),
        rotate_certificates: c.rotate_certificates.unwrap_or(false),
        kube_api_qps: rate_limit_qps(c.kube_api_qps, DEFAULT_KUBE_API_QPS),
        kube_api_burst: rate_limit_burst(c.kube_api_burst, DEFAULT_KUBE_API_BURST),
        event_record_qps: rate_limit_qps(c.event_record_qps, DEFAULT_EVENT_RECORD_QPS),
        event_burst: rate_limit_burst(c.event_burst, DEFAULT_EVENT_BURST),
        node_labels: options.node_labels.clone(),
        node_ips: options.node_ips.clone(),
        register_schedulable: options.register_schedulable,
        provider_id: c.provider_id.clone().filter(|p| !p.is_empty()),
        node_status_max_images: c
            .node_status_max_images
            .unwrap_or(DEFAULT_NODE_STATUS_MAX_IMAGES),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::node::NodeSettings;
    use crate::domain::test_support::node_a;
    use crate::domain::units::quantity::Quantity;

    /// Hard thresholds without the allocatable ones upstream adds for `pods` enforcement.
    fn user_thresholds(node: &NodeSettings) -> usize {
        node.hard_thresholds
            .iter()
            .filter(|t| t.signal != eviction::Signal::AllocatableMemoryAvailable)
            .count()
    }

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).expect("valid quantity")
    }

    fn settings(c: &KubeletConfiguration) -> Result<NodeSettings, Vec<ConfigError>> {
        validate(c, &FlagOptions::default(), &node_a()).map(|node| node.node)
    }

    #[test]
    fn cpu_manager_fields_default_as_upstream() {
        let period = |text: Option<&str>| {
            let c = KubeletConfiguration {
                cpu_manager_reconcile_period: text.map(|t| GoDuration::parse(t).expect("duration")),
                cpu_manager_policy: Some(String::new()),
                ..KubeletConfiguration::default()
            };
            validate(&c, &FlagOptions::default(), &node_a())
                .map(|n| (n.cpu_manager.reconcile_period, n.cpu_manager.policy))
                .map_err(|e| e.iter().map(ToString::to_string).collect::<Vec<_>>())
        };
        let none = "none".to_string();
        assert_eq!(period(None), Ok((Duration::from_secs(10), none.clone())));
        assert_eq!(
            period(Some("1s")),
            Ok((Duration::from_secs(1), none.clone()))
        );
        // kubeadm writes 0s: upstream takes nodeStatusUpdateFrequency.
        assert_eq!(period(Some("0s")), Ok((Duration::from_secs(10), none)));
        assert_eq!(
            period(Some("-1s")),
            Err(vec![
                "invalid configuration: cpuManagerReconcilePeriod -1s must be greater than zero"
                    .to_string()
            ])
        );
    }

    fn messages(c: &KubeletConfiguration) -> Vec<String> {
        validate(c, &FlagOptions::default(), &node_a())
            .err()
            .unwrap_or_default()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(
            messages(&KubeletConfiguration::default()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn what_the_app_reads_after_resolution_is_typed() {
        let mut c = KubeletConfiguration {
            port: 10350,
            merge_default_eviction_settings: true,
            reserved_system_cpus: "0".into(),
            system_reserved: BTreeMap::from([("cpu".into(), "500m".into())]),
            ..KubeletConfiguration::default()
        };
        c.logging.format = "json".into();
        c.logging.verbosity = 4;
        let node = validate(&c, &FlagOptions::default(), &node_a()).expect("valid");
        assert_eq!(node.kubelet_port, 10350);
        assert_eq!(
            node.logging,
            LoggingSettings {
                format: LogFormat::Json,
                verbosity: 4,
                vmodule: Vec::new(),
            }
        );
        assert!(node.eviction.merge_default_eviction_settings);
        // The reservation as given, and as reservedSystemCPUs made it.
        assert_eq!(node.node.given_system_reserved.get("cpu"), Some(&q("500m")));
        assert_eq!(node.node.system_reserved.get("cpu"), Some(&q("1")));
        c.logging.format = "xml".into();
        assert_eq!(
            messages(&c),
            ["invalid configuration: logging.format (--logging-format) \"xml\" must be one of \"text\" or \"json\""]
        );
    }

    #[test]
    fn each_rule_names_its_field_and_value() {
        type Mutate = fn(&mut KubeletConfiguration);
        let cases: &[(Mutate, &str)] = &[
            (
                |c| c.oom_score_adj = 5000,
                "oomScoreAdj (--oom-score-adj) 5000 must be between -1000 and 1000, inclusive",
            ),
            (
                |c| c.cgroup_driver = "nonsense".into(),
                "cgroupDriver (--cgroup-driver) \"nonsense\" must be one of",
            ),
            (
                |c| c.healthz_port = 70000,
                "healthzPort (--healthz-port) 70000 must be between 1 and 65535",
            ),
            (
                |c| c.port = 0,
                "port (--port) 0 must be between 1 and 65535",
            ),
            (
                |c| c.read_only_port = -1,
                "readOnlyPort (--read-only-port) -1",
            ),
            (
                |c| c.max_pods = -1,
                "maxPods (--max-pods) -1 must not be a negative number",
            ),
            (
                |c| c.event_record_qps = Some(-1),
                "eventRecordQPS (--event-qps) -1 must not be a negative number",
            ),
            (
                |c| c.event_burst = Some(-2),
                "eventBurst (--event-burst) -2 must not be a negative number",
            ),
            (
                |c| c.node_lease_duration_seconds = 0,
                "nodeLeaseDurationSeconds must be greater than 0",
            ),
            (
                |c| c.cpu_cfs_quota_period = GoDuration::from_millis(50),
                "requires feature gate CustomCPUCFSQuotaPeriod",
            ),
            (
                |c| c.container_runtime_endpoint = "tcp://x".into(),
                "containerRuntimeEndpoint (--container-runtime-endpoint) \"tcp://x\"",
            ),
            (
                |c| c.container_runtime_endpoint.clear(),
                "the containerRuntimeEndpoint was not specified or empty",
            ),
            (
                |c| c.pod_logs_dir = "logs".into(),
                "pod logs path \"logs\" must be absolute path",
            ),
            (
                |c| {
                    c.feature_gates.insert("Bogus".into(), true);
                },
                "unrecognized feature gate: Bogus",
            ),
            (
                |c| c.reserved_system_cpus = "abc".into(),
                "reservedSystemCPUs",
            ),
            (
                |c| {
                    c.reserved_system_cpus = "0".into();
                    c.kube_reserved_cgroup = "/kube".into();
                },
                "can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup",
            ),
            (
                |c| {
                    c.eviction_hard = BTreeMap::from([("memory.available".into(), "abc".into())]);
                },
                "memory.available",
            ),
            (
                |c| {
                    c.eviction_hard = BTreeMap::from([("foo.bar".into(), "1Gi".into())]);
                },
                "foo.bar",
            ),
            (
                |c| {
                    c.eviction_soft = BTreeMap::from([("memory.available".into(), "1Gi".into())]);
                },
                "grace period",
            ),
            (
                |c| {
                    c.kube_reserved = BTreeMap::from([("gpu".into(), "1".into())]);
                },
                "gpu",
            ),
            (
                |c| c.enforce_node_allocatable = vec!["bogus".into()],
                "option \"bogus\" specified for enforceNodeAllocatable",
            ),
            (
                |c| c.cgroups_per_qos = false,
                "cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\"",
            ),
        ];
        for (mutate, want) in cases {
            let mut c = KubeletConfiguration::default();
            mutate(&mut c);
            let got = messages(&c);
            assert!(
                got.iter().any(|m| m.contains(want)),
                "want {want:?} in {got:#?}"
            );
        }
    }

    #[test]
    fn container_log_rotation_is_checked_as_upstream() {
        let c = KubeletConfiguration {
            container_log_max_size: Some("ten".into()),
            container_log_max_files: Some(1),
            container_log_max_workers: Some(0),
            container_log_monitor_interval: Some(GoDuration::from_millis(2000)),
            ..KubeletConfiguration::default()
        };
        let got = messages(&c);
        assert_eq!(got.len(), 4, "{got:#?}");
        assert!(got[0].starts_with(r#"invalid configuration: containerLogMaxSize (--container-log-max-size) "ten" is not a quantity"#), "{got:#?}");
        assert_eq!(got[1], "invalid configuration: containerLogMaxFiles (--container-log-max-files) 1 must be greater than 1");
        assert_eq!(
            got[2],
            "invalid configuration: containerLogMaxWorkers 0 must be greater than or equal to 1"
        );
        assert_eq!(got[3], "invalid configuration: containerLogMonitorInterval 2s must be a positive time duration greater than or equal to 3s");

        let node = validate(
            &KubeletConfiguration::default(),
            &FlagOptions::default(),
            &node_a(),
        )
        .expect("valid");
        assert_eq!(node.log_rotation, LogRotationSettings::default());
        let off = KubeletConfiguration {
            container_log_max_size: Some("-1".into()),
            ..KubeletConfiguration::default()
        };
        let node = validate(&off, &FlagOptions::default(), &node_a()).expect("valid");
        assert_eq!(node.log_rotation.policy, None);
    }

    #[test]
    fn image_gc_thresholds_are_checked_as_upstream() {
        let c = KubeletConfiguration {
            image_gc_high_threshold_percent: Some(101),
            image_gc_low_threshold_percent: Some(-1),
            ..KubeletConfiguration::default()
        };
        assert_eq!(
            messages(&c),
            [
                "invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive",
                "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) -1 must be between 0 and 100, inclusive",
            ]
        );
        let c = KubeletConfiguration {
            image_gc_high_threshold_percent: Some(50),
            image_gc_low_threshold_percent: Some(50),
            ..KubeletConfiguration::default()
        };
        assert_eq!(messages(&c), ["invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 50 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50"]);
        let node = validate(
            &KubeletConfiguration::default(),
            &FlagOptions::default(),
            &node_a(),
        )
        .expect("valid");
        let e = &node.eviction;
        assert_eq!(
            (
                e.image_gc.high_threshold_percent,
                e.image_gc.low_threshold_percent,
                e.image_gc.min_age_nanos
            ),
            (85, 80, 120_000_000_000)
        );
        assert_eq!(e.pressure_transition_period, Duration::from_secs(300));
        assert!(e.kernel_memcg_notification && e.local_storage_capacity_isolation);
        assert_eq!(e.monitoring_period, Duration::from_secs(10));
        let config = node.eviction_config();
        assert_eq!(
            config.thresholds.len(),
            node.node.hard_thresholds.len() + node.node.soft_thresholds.len()
        );
    }

    #[test]
    fn all_problems_are_reported_together() {
        let c = KubeletConfiguration {
            oom_score_adj: 5000,
            cgroup_driver: "nonsense".into(),
            max_pods: -3,
            ..KubeletConfiguration::default()
        };
        assert_eq!(messages(&c).len(), 3);
    }

    #[test]
    fn reserved_cpus_replace_the_cpu_reservations() {
        let c = KubeletConfiguration {
            reserved_system_cpus: "1".into(),
            system_reserved: BTreeMap::from([
                ("cpu".into(), "500m".into()),
                ("memory".into(), "1Gi".into()),
            ]),
            kube_reserved: BTreeMap::from([("cpu".into(), "200m".into())]),
            ..KubeletConfiguration::default()
        };
        let node = settings(&c).expect("valid");
        assert_eq!(node.system_reserved.get("cpu"), Some(&q("1")));
        assert_eq!(node.system_reserved.get("memory"), Some(&q("1Gi")));
        assert_eq!(node.kube_reserved.get("cpu"), None);
        assert_eq!(node.allocatable.get("cpu"), Some(&q("1")));
        // 8Gi - 1Gi system-reserved - 100Mi hard eviction
        assert_eq!(node.allocatable.get("memory"), Some(&q("7068Mi")));
    }

    #[test]
    fn reserved_cpus_outside_the_machine_are_refused_naming_both_sets() {
        let c = KubeletConfiguration {
            reserved_system_cpus: "0-99".into(),
            ..KubeletConfiguration::default()
        };
        let problems = settings(&c).expect_err("invalid");
        let text = problems[0].to_string();
        assert!(text.contains("0-99") && text.contains("0-1"), "{text}");
    }

    #[test]
    fn a_reservation_over_capacity_is_refused() {
        let c = KubeletConfiguration {
            kube_reserved: BTreeMap::from([("memory".into(), "100Ti".into())]),
            ..KubeletConfiguration::default()
        };
        let problems = settings(&c).expect_err("invalid");
        assert!(
            problems.iter().any(|p| p.to_string().contains("memory")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_given_hard_map_replaces_the_defaults_unless_merged() {
        let mut c = KubeletConfiguration {
            eviction_hard: BTreeMap::from([("memory.available".into(), "500Mi".into())]),
            ..KubeletConfiguration::default()
        };
        let node = settings(&c).expect("valid");
        assert!(node.eviction_defaults_replaced);
        assert_eq!(user_thresholds(&node), 1);
        c.merge_default_eviction_settings = true;
        c.eviction_hard = eviction::effective_eviction_hard(Some(&c.eviction_hard), true);
        let node = settings(&c).expect("valid");
        assert!(!node.eviction_defaults_replaced);
        assert_eq!(user_thresholds(&node), 4);
    }

    #[test]
    fn rate_limits_default_to_upstreams_and_zero_means_client_gos_default() {
        assert_eq!(rate_limit_qps(None, DEFAULT_EVENT_RECORD_QPS), 50.0);
        assert_eq!(rate_limit_qps(Some(0), DEFAULT_EVENT_RECORD_QPS), 5.0);
        assert_eq!(rate_limit_qps(Some(7), DEFAULT_KUBE_API_QPS), 7.0);
        assert_eq!(rate_limit_burst(None, DEFAULT_EVENT_BURST), 100);
        assert_eq!(rate_limit_burst(Some(0), DEFAULT_EVENT_BURST), 10);
        assert_eq!(rate_limit_burst(Some(3), DEFAULT_KUBE_API_BURST), 3);
    }
}
