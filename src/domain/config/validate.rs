//! Semantic validation of a merged configuration, in upstream's words. Every problem is
//! collected; nothing stops at the first.

use super::error::ConfigError;
use super::model::KubeletConfiguration;
use crate::domain::config::feature_gates::FeatureGates;
use crate::domain::eviction;
use crate::domain::node::reserved;
use crate::domain::units::duration::GoDuration;

pub const CGROUP_DRIVERS: [&str; 2] = ["cgroupfs", "systemd"];
pub const RUNTIME_SCHEMES: [&str; 2] = ["unix://", "fake://"];

fn invalid(message: String) -> ConfigError {
    ConfigError::Invalid(message)
}

fn is_port(value: i32) -> bool {
    (1..=65535).contains(&value)
}

/// Every problem with `c`; empty when it is valid.
pub fn validate(c: &KubeletConfiguration) -> Vec<ConfigError> {
    let mut problems = Vec::new();

    let gates = match FeatureGates::from_map(&c.feature_gates) {
        Ok(gates) => gates,
        Err(errors) => {
            problems.extend(errors.into_iter().map(|e| invalid(e.to_string())));
            FeatureGates::default()
        }
    };

    if c.node_lease_duration_seconds <= 0 {
        problems.push(invalid(
            "invalid configuration: nodeLeaseDurationSeconds must be greater than 0".into(),
        ));
    }
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
    if !gates.enabled("CustomCPUCFSQuotaPeriod") && c.cpu_cfs_quota_period != default_period {
        problems.push(invalid(format!("invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {} requires feature gate CustomCPUCFSQuotaPeriod", c.cpu_cfs_quota_period)));
    }
    let period = c.cpu_cfs_quota_period.as_nanos();
    if gates.enabled("CustomCPUCFSQuotaPeriod") && !(1_000_000..=1_000_000_000).contains(&period) {
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
    if !CGROUP_DRIVERS.contains(&c.cgroup_driver.as_str()) {
        problems.push(invalid(format!(
            "invalid configuration: cgroupDriver (--cgroup-driver) {:?} must be one of {:?} or {:?}",
            c.cgroup_driver, CGROUP_DRIVERS[0], CGROUP_DRIVERS[1]
        )));
    }
    for (name, d) in [
        (
            "runtimeRequestTimeout (--runtime-request-timeout)",
            c.runtime_request_timeout,
        ),
        ("syncFrequency (--sync-frequency)", c.sync_frequency),
        (
            "fileCheckFrequency (--file-check-frequency)",
            c.file_check_frequency,
        ),
        (
            "httpCheckFrequency (--http-check-frequency)",
            c.http_check_frequency,
        ),
        (
            "nodeStatusUpdateFrequency (--node-status-update-frequency)",
            c.node_status_update_frequency,
        ),
    ] {
        if d.as_nanos() <= 0 {
            problems.push(invalid(format!(
                "invalid configuration: {name} {d} must be greater than zero"
            )));
        }
    }
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
    if !c.reserved_system_cpus.is_empty() {
        if let Some(e) = reserved::validate_reserved_cpus_cgroups(
            &c.reserved_system_cpus,
            &c.system_reserved_cgroup,
            &c.kube_reserved_cgroup,
        ) {
            problems.push(invalid(e.to_string()));
        }
        if let Err(e) = reserved::parse_reserved_cpus(&c.reserved_system_cpus) {
            problems.push(invalid(e.to_string()));
        }
    }
    for (field, map) in [
        ("kubeReserved (--kube-reserved)", &c.kube_reserved),
        ("systemReserved (--system-reserved)", &c.system_reserved),
    ] {
        if let Err(errors) = reserved::parse_reserved(field, map) {
            problems.extend(errors.into_iter().map(|e| invalid(e.to_string())));
        }
    }
    if let Err(e) = reserved::parse_qos_reserved(&c.qos_reserved) {
        problems.push(invalid(e.to_string()));
    }
    problems.extend(
        eviction::validate_threshold_config(
            &c.enforce_node_allocatable,
            &c.eviction_hard,
            &c.eviction_soft,
            &c.eviction_soft_grace_period,
            &c.eviction_minimum_reclaim,
        )
        .into_iter()
        .map(|e| invalid(format!("invalid configuration: {e}"))),
    );

    if c.container_runtime_endpoint.is_empty() {
        problems.push(invalid(
            "invalid configuration: the containerRuntimeEndpoint was not specified or empty".into(),
        ));
    } else if !RUNTIME_SCHEMES
        .iter()
        .any(|s| c.container_runtime_endpoint.starts_with(s))
    {
        problems.push(invalid(format!(
            "invalid configuration: containerRuntimeEndpoint (--container-runtime-endpoint) {:?} must start with one of {:?}",
            c.container_runtime_endpoint, RUNTIME_SCHEMES
        )));
    }
    if !c.image_service_endpoint.is_empty()
        && !RUNTIME_SCHEMES
            .iter()
            .any(|s| c.image_service_endpoint.starts_with(s))
    {
        problems.push(invalid(format!(
            "invalid configuration: imageServiceEndpoint (--image-service-endpoint) {:?} must start with one of {:?}",
            c.image_service_endpoint, RUNTIME_SCHEMES
        )));
    }
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
    if !["text", "json"].contains(&c.logging.format.as_str()) {
        problems.push(invalid(format!(
            "invalid configuration: logging.format (--logging-format) {:?} must be one of \"text\" or \"json\"",
            c.logging.format
        )));
    }
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
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn messages(c: &KubeletConfiguration) -> Vec<String> {
        validate(c).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(
            messages(&KubeletConfiguration::default()),
            Vec::<String>::new()
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
    fn all_problems_are_reported_together() {
        let c = KubeletConfiguration {
            oom_score_adj: 5000,
            cgroup_driver: "nonsense".into(),
            max_pods: -3,
            ..KubeletConfiguration::default()
        };
        assert_eq!(messages(&c).len(), 3);
    }
}
