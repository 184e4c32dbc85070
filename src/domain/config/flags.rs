//! The command line, as one table: every flag, the configuration field (or flag-only
//! option) it sets, and how its text becomes a value. The CLI is built from this table
//! and the README's flag list is generated from it, so the three cannot drift.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::error::ConfigError;
use crate::domain::duration::GoDuration;
use crate::domain::{eviction, reserved};

/// How a flag's text becomes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    Str,
    /// Go's `strconv.ParseBool` spellings; `--flag` alone means true.
    Bool,
    Int,
    Duration,
    /// `signal<value,...` (eviction thresholds).
    LessThanMap,
    /// `key=value,...` with string values (grace periods, minimum reclaim, reserved).
    EqualsMap,
    /// `key=value,...` with `key` and the values kept as given, comma-separated list.
    List,
    /// `Name=true,Other=false`.
    FeatureGates,
    /// `key=value:Effect,key:Effect`.
    Taints,
}

/// Where a flag's value goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A `KubeletConfiguration` field, by its path of upstream names.
    Config(&'static [&'static str]),
    /// An option that exists only on the command line.
    FlagOnly,
}

#[derive(Debug, Clone, Copy)]
pub struct FlagSpec {
    pub name: &'static str,
    pub short: Option<char>,
    pub kind: FlagKind,
    pub target: Target,
    /// The default shown in `--help` for flag-only options (config-backed flags show the
    /// configuration's default).
    pub flag_default: &'static str,
    pub help: &'static str,
}

const fn cfg(
    name: &'static str,
    kind: FlagKind,
    path: &'static [&'static str],
    help: &'static str,
) -> FlagSpec {
    FlagSpec {
        name,
        short: None,
        kind,
        target: Target::Config(path),
        flag_default: "",
        help,
    }
}

const fn opt(
    name: &'static str,
    kind: FlagKind,
    flag_default: &'static str,
    help: &'static str,
) -> FlagSpec {
    FlagSpec {
        name,
        short: None,
        kind,
        target: Target::FlagOnly,
        flag_default,
        help,
    }
}

use FlagKind::*;

/// Every flag rkubelet knows, in the order `--help` lists them.
pub const FLAGS: &[FlagSpec] = &[
    opt("config", Str, "", "Path to a KubeletConfiguration file (YAML, JSON or TOML). Flags given on the command line override its values."),
    opt("config-dir", Str, "", "Folder of drop-in configuration files (*.conf), merged in name order over --config."),
    opt("kubeconfig", Str, "", "Path to a kubeconfig for the API server. Without it rkubelet runs standalone."),
    opt("bootstrap-kubeconfig", Str, "", "Path to a kubeconfig used to obtain a client certificate."),
    opt("hostname-override", Str, "", "Use this name as the node name instead of the hostname (trimmed, lower-cased)."),
    opt("node-ip", Str, "", "IP addresses of the node, comma-separated."),
    opt("root-dir", Str, "/var/lib/kubelet", "Directory for the kubelet's files."),
    opt("lock-file", Str, "", "Path to a lock file the kubelet holds while it runs."),
    opt("exit-on-lock-contention", Bool, "false", "Exit when another process opens the lock file."),
    opt("runonce", Bool, "false", "Start the static pods once, then exit; the API server and HTTP server are not used."),
    opt("node-labels", Str, "", "Labels to add when registering the node, key=value pairs separated by commas."),
    opt("dry-run", Bool, "false", "Print what rkubelet would do with this configuration, change nothing, and exit."),
    opt("dry-run-output", Str, "text", "Format of the --dry-run plan: text or json."),
    opt("dry-run-snapshot", Str, "", "Plan against this recorded node state (TOML or JSON) instead of the live runtime."),
    cfg("pod-manifest-path", Str, &["staticPodPath"], "Path to a static pod manifest file or a folder of them."),
    cfg("manifest-url", Str, &["staticPodURL"], "URL to fetch static pod manifests from."),
    cfg("file-check-frequency", Duration, &["fileCheckFrequency"], "How often the manifest path is re-read."),
    cfg("http-check-frequency", Duration, &["httpCheckFrequency"], "How often the manifest URL is re-read."),
    cfg("sync-frequency", Duration, &["syncFrequency"], "Longest time between syncs of a running pod."),
    cfg("container-runtime-endpoint", Str, &["containerRuntimeEndpoint"], "CRI endpoint: unix:///path/to/socket, or fake:// for the embedded simulated runtime."),
    cfg("image-service-endpoint", Str, &["imageServiceEndpoint"], "CRI image service endpoint; the runtime endpoint when empty."),
    cfg("runtime-request-timeout", Duration, &["runtimeRequestTimeout"], "Timeout of every runtime request except long-running ones."),
    cfg("pod-logs-dir", Str, &["podLogsDir"], "Folder of pod logs."),
    cfg("cgroup-driver", Str, &["cgroupDriver"], "Driver used to manage cgroups: cgroupfs or systemd."),
    cfg("cgroup-root", Str, &["cgroupRoot"], "Root cgroup for pods."),
    cfg("cgroups-per-qos", Bool, &["cgroupsPerQOS"], "Create the QoS cgroup hierarchy (kubepods, burstable, besteffort)."),
    cfg("kube-reserved-cgroup", Str, &["kubeReservedCgroup"], "Cgroup of the Kubernetes node components, for kube-reserved enforcement."),
    cfg("system-reserved-cgroup", Str, &["systemReservedCgroup"], "Cgroup of the system daemons, for system-reserved enforcement."),
    cfg("kube-reserved", EqualsMap, &["kubeReserved"], "Resources reserved for Kubernetes components: cpu, memory, ephemeral-storage, pid (e.g. cpu=200m,memory=500Mi)."),
    cfg("system-reserved", EqualsMap, &["systemReserved"], "Resources reserved for system daemons: cpu, memory, ephemeral-storage, pid."),
    cfg("reserved-cpus", Str, &["reservedSystemCPUs"], "CPUs reserved for system and Kubernetes daemons (e.g. 0-1,6); overrides the cpu of --system-reserved and --kube-reserved."),
    cfg("qos-reserved", EqualsMap, &["qosReserved"], "Percentage of memory requests reserved per QoS tier (e.g. memory=50%)."),
    cfg("enforce-node-allocatable", List, &["enforceNodeAllocatable"], "Levels of node allocatable to enforce: pods, system-reserved, kube-reserved, their -compressible forms, or none."),
    cfg("eviction-hard", LessThanMap, &["evictionHard"], "Hard eviction thresholds (e.g. memory.available<1Gi). Replaces the defaults unless mergeDefaultEvictionSettings is true."),
    cfg("eviction-soft", LessThanMap, &["evictionSoft"], "Soft eviction thresholds (e.g. memory.available<1.5Gi); each needs a grace period."),
    cfg("eviction-soft-grace-period", EqualsMap, &["evictionSoftGracePeriod"], "Grace periods of the soft thresholds (e.g. memory.available=1m30s)."),
    cfg("eviction-minimum-reclaim", EqualsMap, &["evictionMinimumReclaim"], "Least amount to reclaim once eviction starts (e.g. imagefs.available=2Gi)."),
    cfg("eviction-pressure-transition-period", Duration, &["evictionPressureTransitionPeriod"], "How long to wait before leaving an eviction pressure condition."),
    cfg("eviction-max-pod-grace-period", Int, &["evictionMaxPodGracePeriod"], "Longest grace period given to pods evicted on a soft threshold."),
    cfg("healthz-bind-address", Str, &["healthzBindAddress"], "Address of the healthz server."),
    cfg("healthz-port", Int, &["healthzPort"], "Port of the healthz server; 0 disables it."),
    cfg("address", Str, &["address"], "Address the kubelet's API serves on."),
    cfg("port", Int, &["port"], "Port the kubelet's API serves on."),
    cfg("read-only-port", Int, &["readOnlyPort"], "Port of the unauthenticated read-only API; 0 (the default here) disables it."),
    cfg("enable-server", Bool, &["enableServer"], "Serve the kubelet's API."),
    cfg("anonymous-auth", Bool, &["authentication", "anonymous", "enabled"], "Allow anonymous requests to the kubelet's API (off by default here)."),
    cfg("authorization-mode", Str, &["authorization", "mode"], "Authorization mode of the kubelet's API: AlwaysAllow or Webhook."),
    cfg("client-ca-file", Str, &["authentication", "x509", "clientCAFile"], "CA bundle for client certificates."),
    cfg("tls-cert-file", Str, &["tlsCertFile"], "Serving certificate."),
    cfg("tls-private-key-file", Str, &["tlsPrivateKeyFile"], "Serving certificate's key."),
    cfg("oom-score-adj", Int, &["oomScoreAdj"], "OOM score adjustment of the kubelet process, in [-1000, 1000]."),
    cfg("feature-gates", FeatureGates, &["featureGates"], "Feature gates, Name=true|false pairs separated by commas; merged key by key over the file's."),
    cfg("fail-swap-on", Bool, &["failSwapOn"], "Refuse to start when swap is on."),
    cfg("max-pods", Int, &["maxPods"], "Most pods this node runs."),
    cfg("pod-max-pids", Int, &["podPidsLimit"], "Most processes per pod; -1 means unlimited."),
    cfg("pod-pids-limit", Int, &["podPidsLimit"], "Same as --pod-max-pids, named after the podPidsLimit field."),
    cfg("cpu-cfs-quota", Bool, &["cpuCFSQuota"], "Enforce CPU limits with CFS quota."),
    cfg("cpu-cfs-quota-period", Duration, &["cpuCFSQuotaPeriod"], "CFS quota period (needs the CustomCPUCFSQuotaPeriod feature gate to change)."),
    cfg("cluster-domain", Str, &["clusterDomain"], "Cluster DNS domain added to pods' search paths."),
    cfg("cluster-dns", List, &["clusterDNS"], "DNS server addresses given to pods."),
    cfg("resolv-conf", Str, &["resolvConf"], "Resolver configuration file pods with the Default DNS policy inherit; empty disables it."),
    cfg("register-node", Bool, &["registerNode"], "Register the node with the API server."),
    cfg("register-with-taints", Taints, &["registerWithTaints"], "Taints to register the node with (key=value:Effect, comma-separated)."),
    cfg("node-status-update-frequency", Duration, &["nodeStatusUpdateFrequency"], "How often node status is computed and posted."),
    cfg("serialize-image-pulls", Bool, &["serializeImagePulls"], "Pull one image at a time."),
    cfg("max-parallel-image-pulls", Int, &["maxParallelImagePulls"], "Most image pulls at once."),
    cfg("logging-format", Str, &["logging", "format"], "Log format: text or json."),
    FlagSpec {
        name: "v",
        short: Some('v'),
        kind: Int,
        target: Target::Config(&["logging", "verbosity"]),
        flag_default: "",
        help: "Log verbosity: 0-1 info, 2-4 debug, 5 and more trace.",
    },
];

/// The flag with this long name.
pub fn flag(name: &str) -> Option<&'static FlagSpec> {
    FLAGS.iter().find(|f| f.name == name)
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn invalid(spec: &FlagSpec, value: &str, reason: impl std::fmt::Display) -> ConfigError {
    ConfigError::InvalidFlag {
        flag: spec.name.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// The value a flag's text stands for, as it would appear in a configuration file.
pub fn flag_value(spec: &FlagSpec, text: &str) -> Result<Value, ConfigError> {
    match spec.kind {
        Str => Ok(Value::String(text.to_string())),
        Bool => parse_go_bool(text).map(Value::Bool).ok_or_else(|| {
            invalid(
                spec,
                text,
                format!("strconv.ParseBool: parsing {text:?}: invalid syntax"),
            )
        }),
        Int => text.trim().parse::<i64>().map(Value::from).map_err(|_| {
            invalid(
                spec,
                text,
                format!("strconv.ParseInt: parsing {text:?}: invalid syntax"),
            )
        }),
        Duration => GoDuration::parse(text)
            .map(|_| Value::String(text.to_string()))
            .map_err(|e| invalid(spec, text, e)),
        LessThanMap => eviction::parse_lt_map(text)
            .map(string_map)
            .map_err(|e| invalid(spec, text, e)),
        EqualsMap => reserved::parse_kv_map(&format!("--{}", spec.name), text)
            .map(string_map)
            .map_err(|e| invalid(spec, text, e)),
        List => Ok(Value::Array(
            split_list(text)
                .map(|s| Value::String(s.to_string()))
                .collect(),
        )),
        FeatureGates => parse_feature_gates(text)
            .map(|gates| {
                Value::Object(
                    gates
                        .into_iter()
                        .map(|(k, v)| (k, Value::Bool(v)))
                        .collect(),
                )
            })
            .map_err(|reason| invalid(spec, text, reason)),
        Taints => parse_taints(text)
            .map(Value::Array)
            .map_err(|reason| invalid(spec, text, reason)),
    }
}

fn split_list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn string_map(map: BTreeMap<String, String>) -> Value {
    Value::Object(
        map.into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect(),
    )
}

/// `A=true,B=false`, with upstream's wording for a missing `=` or a bad boolean.
pub fn parse_feature_gates(text: &str) -> Result<BTreeMap<String, bool>, String> {
    let mut gates = BTreeMap::new();
    for pair in split_list(text) {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!("missing bool value for {pair}"));
        };
        let name = name.trim();
        let value = value.trim();
        let enabled = parse_go_bool(value).ok_or_else(|| {
            format!("invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax")
        })?;
        gates.insert(name.to_string(), enabled);
    }
    Ok(gates)
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// `key=value:Effect` or `key:Effect`, comma-separated.
pub fn parse_taints(text: &str) -> Result<Vec<Value>, String> {
    split_list(text)
        .map(|spec| {
            let (key_value, effect) = spec
                .rsplit_once(':')
                .ok_or_else(|| format!("invalid taint spec: {spec}"))?;
            if !TAINT_EFFECTS.contains(&effect) {
                return Err(format!(
                    "invalid taint effect: {effect}, unsupported taint effect"
                ));
            }
            let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
            if key.is_empty() {
                return Err(format!("invalid taint spec: {spec}"));
            }
            let mut taint = Map::new();
            taint.insert("key".into(), Value::String(key.into()));
            if !value.is_empty() {
                taint.insert("value".into(), Value::String(value.into()));
            }
            taint.insert("effect".into(), Value::String(effect.into()));
            Ok(Value::Object(taint))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_names_are_unique() {
        let mut names: Vec<_> = FLAGS.iter().map(|f| f.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn converts_each_kind_of_flag() {
        let cases: &[(&str, &str, Value)] = &[
            ("cgroup-driver", "systemd", Value::from("systemd")),
            ("cgroups-per-qos", "false", Value::from(false)),
            ("cgroups-per-qos", "T", Value::from(true)),
            ("max-pods", "42", Value::from(42)),
            ("sync-frequency", "1m30s", Value::from("1m30s")),
            (
                "eviction-hard",
                "memory.available<1Gi,nodefs.available<5%",
                serde_json::json!({"memory.available": "1Gi", "nodefs.available": "5%"}),
            ),
            (
                "kube-reserved",
                "cpu=500m,memory=1Gi",
                serde_json::json!({"cpu": "500m", "memory": "1Gi"}),
            ),
            (
                "enforce-node-allocatable",
                "pods,kube-reserved",
                serde_json::json!(["pods", "kube-reserved"]),
            ),
            (
                "feature-gates",
                "A=true,B=false",
                serde_json::json!({"A": true, "B": false}),
            ),
            (
                "register-with-taints",
                "dedicated=infra:NoSchedule,gpu:NoExecute",
                serde_json::json!([
                    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
                    {"key": "gpu", "effect": "NoExecute"}
                ]),
            ),
        ];
        for (name, text, want) in cases {
            let spec = flag(name).expect("known flag");
            assert_eq!(
                &flag_value(spec, text).expect(name),
                want,
                "--{name}={text}"
            );
        }
    }

    #[test]
    fn bad_values_name_the_flag_and_value() {
        let cases = [
            ("max-pods", "abc", "strconv.ParseInt"),
            ("cgroups-per-qos", "maybe", "strconv.ParseBool"),
            ("sync-frequency", "10", "missing unit"),
            ("feature-gates", "A=yes", "invalid value of A=yes"),
            (
                "register-with-taints",
                "k=v:Sometimes",
                "invalid taint effect",
            ),
        ];
        for (name, text, reason) in cases {
            let spec = flag(name).expect("known flag");
            let message = flag_value(spec, text).expect_err(name).to_string();
            assert!(message.contains(&format!("--{name}")), "{message}");
            assert!(message.contains(text), "{message}");
            assert!(message.contains(reason), "{message}");
        }
    }

    #[test]
    fn every_config_flag_targets_a_known_field() {
        let top =
            super::super::fields::struct_fields::<super::super::model::KubeletConfiguration>();
        for spec in FLAGS {
            if let Target::Config(path) = spec.target {
                assert!(top.contains(&path[0]), "--{} targets {:?}", spec.name, path);
            }
        }
    }
}
