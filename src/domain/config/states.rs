//! What rkubelet does with each upstream flag and `KubeletConfiguration` field: one of
//! three honest states. Flags carry their state in the flag table; fields carry theirs
//! here. Both tables are checked against each other and against the model by tests,
//! and `docs/flags.md` is generated from them.

use serde_json::Value;

use std::collections::BTreeMap;

use super::error::ConfigError;
use super::flags::{FlagSpec, State, Target, FLAGS};
use super::layers::Source;
use super::model::KubeletConfiguration;
use super::ResolvedConfig;

/// A top-level `KubeletConfiguration` field (or a dotted sub-field) and its state.
#[derive(Debug, Clone, Copy)]
pub struct FieldSpec {
    pub name: &'static str,
    pub state: State,
    /// Why it is not implemented, or what part is.
    pub note: &'static str,
}

const fn done(name: &'static str) -> FieldSpec {
    FieldSpec {
        name,
        state: State::Implemented,
        note: "",
    }
}

const fn ni(name: &'static str, note: &'static str) -> FieldSpec {
    FieldSpec {
        name,
        state: State::NotImplemented,
        note,
    }
}

const fn refused(name: &'static str) -> FieldSpec {
    FieldSpec {
        name,
        state: State::Refused,
        note: "",
    }
}

const NO_API_CLIENT: &str = "no API server client yet";
const NO_SERVER: &str = "not served by the kubelet API yet";
/// Enforcing `system-reserved` or `kube-reserved` caps the daemons' own cgroups; pods are
/// kept off the reserved share by `pods` enforcement, which is implemented, so leaving
/// the daemons uncapped loses no isolation from workloads: a warning, not a refusal.
const NOT_RESERVED_CGROUPS: &str = "the reserved cgroup is not limited: enforceNodeAllocatable's `kube-reserved` and `system-reserved` are not enforced";

/// Every `KubeletConfiguration` v1beta1 field (Kubernetes 1.26 to 1.36), in upstream's order.
pub const FIELDS: &[FieldSpec] = &[
    done("enableServer"),
    done("staticPodPath"),
    done("podLogsDir"),
    done("syncFrequency"),
    done("fileCheckFrequency"),
    done("httpCheckFrequency"),
    done("staticPodURL"),
    done("staticPodURLHeader"),
    done("address"),
    done("port"),
    done("readOnlyPort"),
    done("tlsCertFile"),
    done("tlsPrivateKeyFile"),
    done("tlsCipherSuites"),
    ni("tlsCurvePreferences", NO_SERVER),
    done("tlsMinVersion"),
    done("rotateCertificates"),
    done("serverTLSBootstrap"),
    done("authentication"),
    done("authorization"),
    ni("registryPullQPS", "image pulls are not rate-limited"),
    ni("registryBurst", "image pulls are not rate-limited"),
    refused("imagePullCredentialsVerificationPolicy"),
    ni(
        "preloadedImagesVerificationAllowlist",
        "pulled-image credential checks are not implemented",
    ),
    done("eventRecordQPS"),
    done("eventBurst"),
    done("enableDebuggingHandlers"),
    ni("enableContentionProfiling", NO_SERVER),
    done("healthzPort"),
    done("healthzBindAddress"),
    done("oomScoreAdj"),
    done("clusterDomain"),
    done("clusterDNS"),
    ni("streamingConnectionIdleTimeout", NO_SERVER),
    done("nodeStatusUpdateFrequency"),
    done("nodeStatusReportFrequency"),
    done("nodeLeaseDurationSeconds"),
    done("imageMinimumGCAge"),
    ni("imageMaximumGCAge", "images are not removed by age alone"),
    done("imageGCHighThresholdPercent"),
    done("imageGCLowThresholdPercent"),
    ni("volumeStatsAggPeriod", "no volume stats yet"),
    ni(
        "kubeletCgroups",
        "the kubelet stays in the cgroup it was started in",
    ),
    ni("systemCgroups", "system processes are not moved"),
    done("cgroupRoot"),
    done("cgroupsPerQOS"),
    done("cgroupDriver"),
    done("cpuManagerPolicy"),
    ni(
        "singleProcessOOMKill",
        "the runtime's default OOM behaviour applies",
    ),
    done("cpuManagerPolicyOptions"),
    done("cpuManagerReconcilePeriod"),
    refused("memoryManagerPolicy"),
    done("topologyManagerPolicy"),
    done("topologyManagerScope"),
    done("topologyManagerPolicyOptions"),
    ni("qosReserved", "QoS memory reservation is not applied"),
    done("runtimeRequestTimeout"),
    ni("hairpinMode", "pod networking is the runtime's CNI setup"),
    done("maxPods"),
    ni("podCIDR", "pod networking is the runtime's CNI setup"),
    done("podPidsLimit"),
    done("resolvConf"),
    ni("runOnce", "use the --runonce flag"),
    done("cpuCFSQuota"),
    done("cpuCFSQuotaPeriod"),
    done("nodeStatusMaxImages"),
    ni("maxOpenFiles", "the process limit is left as started"),
    ni("contentType", NO_API_CLIENT),
    done("kubeAPIQPS"),
    done("kubeAPIBurst"),
    ni("serializeImagePulls", "images are pulled as pods need them"),
    ni(
        "maxParallelImagePulls",
        "images are pulled as pods need them",
    ),
    FieldSpec {
        name: "evictionHard",
        state: State::Implemented,
        note: "evicts pods and is subtracted from node allocatable",
    },
    done("evictionSoft"),
    done("evictionSoftGracePeriod"),
    done("evictionPressureTransitionPeriod"),
    done("evictionMaxPodGracePeriod"),
    done("evictionMinimumReclaim"),
    done("mergeDefaultEvictionSettings"),
    ni("podsPerCore", "only maxPods limits pods"),
    ni("enableControllerAttachDetach", "no volume attach/detach"),
    refused("protectKernelDefaults"),
    ni(
        "makeIPTablesUtilChains",
        "rkubelet creates no iptables chains",
    ),
    ni("iptablesMasqueradeBit", "no effect upstream either"),
    ni("iptablesDropBit", "no effect upstream either"),
    done("featureGates"),
    ni("failSwapOn", "swap is not checked"),
    ni("memorySwap", "swap is not configured for containers"),
    done("containerLogMaxSize"),
    done("containerLogMaxFiles"),
    done("containerLogMaxWorkers"),
    done("containerLogMonitorInterval"),
    done("configMapAndSecretChangeDetectionStrategy"),
    done("systemReserved"),
    done("kubeReserved"),
    done("reservedSystemCPUs"),
    ni("showHiddenMetricsForVersion", "rkubelet hides no metric, so there is nothing to show"),
    ni("systemReservedCgroup", NOT_RESERVED_CGROUPS),
    ni("kubeReservedCgroup", NOT_RESERVED_CGROUPS),
    FieldSpec {
        name: "enforceNodeAllocatable",
        state: State::Implemented,
        note: "only `pods` is enforced (kubepods is limited to capacity minus kubeReserved and systemReserved); `kube-reserved`, `system-reserved` and their `-compressible` forms are checked as upstream but not enforced, and start-up warns naming them",
    },
    done("allowedUnsafeSysctls"),
    ni("volumePluginDir", "no flexvolume plugins"),
    done("providerID"),
    FieldSpec {
        name: "kernelMemcgNotification",
        state: State::Implemented,
        note: "on unless set to false (upstream: off), where the kernel offers it (cgroup v1)",
    },
    done("logging"),
    ni("logging.options", "logs go to stderr unbuffered"),
    ni("enableSystemLogHandler", NO_SERVER),
    ni("enableSystemLogQuery", NO_SERVER),
    ni("shutdownGracePeriod", "no graceful node shutdown yet"),
    ni(
        "shutdownGracePeriodCriticalPods",
        "no graceful node shutdown yet",
    ),
    ni(
        "shutdownGracePeriodByPodPriority",
        "no graceful node shutdown yet",
    ),
    ni("crashLoopBackOff", "the built-in back-off applies"),
    refused("reservedMemory"),
    ni("enableProfilingHandler", NO_SERVER),
    ni("enableDebugFlagsHandler", NO_SERVER),
    done("seccompDefault"),
    ni("memoryThrottlingFactor", "memory.high is not set"),
    refused("memoryReservationPolicy"),
    done("registerWithTaints"),
    done("registerNode"),
    ni("tracing", "no tracing export"),
    done("localStorageCapacityIsolation"),
    done("containerRuntimeEndpoint"),
    done("imageServiceEndpoint"),
    ni("failCgroupV1", "cgroup v1 hosts are not refused"),
    ni(
        "userNamespaces",
        "`idsPerPod` is not read: each hostUsers: false pod gets upstream's default of 65536 IDs",
    ),
];

/// When a refused field's value asks for the unsafe thing, and why that is refused.
pub struct Refusal {
    pub field: &'static str,
    /// The values refused, in words.
    pub when: &'static str,
    pub why: &'static str,
    pub refuses: fn(&Value) -> bool,
}

pub const REFUSALS: &[Refusal] = &[
    Refusal {
        field: "protectKernelDefaults",
        when: "true",
        why: "the operator asks the kubelet to fail on a kernel whose tunables differ from the kubelet's defaults; rkubelet does not check them, so running would hide exactly the condition that was meant to stop the node",
        refuses: |v| v.as_bool() == Some(true),
    },
    Refusal {
        field: "imagePullCredentialsVerificationPolicy",
        when: "anything but NeverVerify",
        why: "these policies make pods prove they may use an image another pod pulled with credentials; rkubelet does not check, so a pod could run a private image it has no credentials for",
        refuses: |v| v.as_str().is_some_and(|s| s != "NeverVerify"),
    },
    Refusal {
        field: "memoryManagerPolicy",
        when: "Static",
        why: "rkubelet has no memory manager, so a Guaranteed pod would not get the NUMA-pinned memory (and hugepages) it expects",
        refuses: |v| v.as_str() == Some("Static"),
    },
    Refusal {
        field: "reservedMemory",
        when: "any reservation",
        why: "the memory reserved per NUMA node is the memory manager's; rkubelet has no memory manager, so a Guaranteed pod would not get the NUMA-pinned memory it expects and the reservation would hold nothing back",
        refuses: |v| v.as_array().is_some_and(|a| !a.is_empty()),
    },
    Refusal {
        field: "memoryReservationPolicy",
        when: "TieredReservation",
        why: "it asks the kubelet to protect pods' memory requests from reclaim (memory.min for Guaranteed pods, memory.low for Burstable ones); rkubelet writes neither, so the protection asked for would silently not exist",
        refuses: |v| v.as_str() == Some("TieredReservation"),
    },
];

/// Values of not-implemented fields that ask for what rkubelet does anyway; giving them
/// is not worth a warning.
/// A field, the value in words, and the test for it.
type Anyway = (&'static str, &'static str, fn(&Value) -> bool);

const ANYWAY: &[Anyway] = &[
    ("readOnlyPort", "0", |v| v.as_i64() == Some(0)),
    ("makeIPTablesUtilChains", "false", |v| {
        v.as_bool() == Some(false)
    }),
    ("enableServer", "false", |v| v.as_bool() == Some(false)),
    ("failSwapOn", "false", |v| v.as_bool() == Some(false)),
    // Graceful node shutdown off: rkubelet does not implement it. kubeadm writes these.
    ("shutdownGracePeriod", "0s", is_zero_duration),
    ("shutdownGracePeriodCriticalPods", "0s", is_zero_duration),
    // No swap behaviour asked for.
    ("memorySwap", "{}", |v| {
        v.as_object().is_some_and(|o| o.is_empty())
    }),
    // No buffering of info lines in the JSON format: rkubelet writes each line at once.
    (
        "logging.options",
        "{\"json\":{\"infoBufferSize\":\"0\"}}",
        |v| {
            v.as_object().is_some_and(|o| {
                o.iter().all(|(k, json)| {
                    k == "json"
                        && json.as_object().is_some_and(|j| {
                            j.iter().all(|(k, size)| {
                                k == "infoBufferSize" && (size == "0" || size.as_i64() == Some(0))
                            })
                        })
                })
            })
        },
    ),
];

/// A duration of nothing, as a file gives it (`0s`, `0`).
fn is_zero_duration(value: &Value) -> bool {
    value.as_i64() == Some(0)
        || value.as_str().is_some_and(|text| {
            crate::domain::units::duration::GoDuration::parse(text)
                .is_ok_and(|d| d == crate::domain::units::duration::GoDuration::default())
        })
}

/// Implemented fields some of whose values are not: the values given that rkubelet does
/// not act on, in words, if any. Such a field is warned about with just those values.
type Partly = (&'static str, fn(&Value) -> Option<String>);

const PARTLY: &[Partly] = &[("enforceNodeAllocatable", unenforced_levels)];

/// The `enforceNodeAllocatable` levels other than `pods` and `none`.
fn unenforced_levels(value: &Value) -> Option<String> {
    let levels: Vec<&str> = value
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .filter(|l| !matches!(*l, "pods" | "none"))
        .collect();
    (!levels.is_empty()).then(|| levels.join(","))
}

fn partly(field: &str, value: &Value) -> Option<String> {
    PARTLY
        .iter()
        .find(|(name, _)| *name == field)
        .and_then(|(_, unimplemented)| unimplemented(value))
}

fn matches_behaviour(field: &str, value: &Value) -> bool {
    ANYWAY
        .iter()
        .any(|(name, _, same)| *name == field && same(value))
}

/// Allowed values of the not-implemented string fields that upstream checks, in
/// upstream's words where it has them.
const ALLOWED: &[(&str, &[&str])] = &[
    (
        "hairpinMode",
        &["promiscuous-bridge", "hairpin-veth", "none"],
    ),
    ("cpuManagerPolicy", &["none", "static"]),
    ("memoryManagerPolicy", &["None", "Static"]),
    (
        "topologyManagerPolicy",
        &["none", "best-effort", "restricted", "single-numa-node"],
    ),
    ("topologyManagerScope", &["container", "pod"]),
    (
        "configMapAndSecretChangeDetectionStrategy",
        &["Get", "Cache", "Watch"],
    ),
    (
        "imagePullCredentialsVerificationPolicy",
        &[
            "NeverVerify",
            "NeverVerifyPreloadedImages",
            "NeverVerifyAllowlistedImages",
            "AlwaysVerify",
        ],
    ),
    (
        "tlsMinVersion",
        &[
            "",
            "VersionTLS10",
            "VersionTLS11",
            "VersionTLS12",
            "VersionTLS13",
        ],
    ),
    ("memoryReservationPolicy", &["None", "TieredReservation"]),
];

pub fn field(name: &str) -> Option<&'static FieldSpec> {
    FIELDS.iter().find(|f| f.name == name)
}

/// The value at a dotted path of the configuration's JSON form, `None` when absent or null.
fn value_at<'a>(tree: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted
        .split('.')
        .try_fold(tree, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

/// The name a given value is reported under: the flag when a flag set it.
fn given_as(origins: &BTreeMap<String, Source>, field: &str) -> Option<String> {
    let top = field.split('.').next().unwrap_or(field);
    match origins.get(top) {
        None | Some(Source::Default) => None,
        Some(Source::Flag(flag)) if !field.contains('.') => Some(format!("--{flag}")),
        Some(_) => Some(field.to_string()),
    }
}

fn show(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Each not-implemented flag or field that was given, with its value as given, in
/// table order: what start-up warns about and the planner lists.
pub fn not_implemented_given(resolved: &ResolvedConfig) -> Vec<(String, String)> {
    let tree = serde_json::to_value(&resolved.config).unwrap_or(Value::Null);
    let mut found = Vec::new();
    for spec in FLAGS.iter().filter(|f| f.state == State::NotImplemented) {
        if spec.target != Target::FlagOnly {
            continue;
        }
        if let Some((_, text)) = resolved.options.given.iter().find(|(n, _)| n == spec.name) {
            // The warning goes to the journal: never copy a secret there.
            let shown = if spec.name.contains("password") {
                "(redacted)".to_string()
            } else {
                text.clone()
            };
            found.push((format!("--{}", spec.name), shown));
        }
    }
    for spec in FIELDS.iter().filter(|f| f.state != State::Refused) {
        let Some(value) = value_at(&tree, spec.name) else {
            continue;
        };
        let Some(name) = given_as(&resolved.origins, spec.name) else {
            continue;
        };
        if spec.state == State::Implemented {
            if let Some(values) = partly(spec.name, value) {
                found.push((name, values));
            }
            continue;
        }
        if matches_behaviour(spec.name, value) {
            continue;
        }
        // A flag gives its text; a file gives its value.
        let text = name
            .strip_prefix("--")
            .and_then(|flag| resolved.options.given.iter().find(|(n, _)| n == flag))
            .map_or_else(|| show(value), |(_, text)| text.clone());
        found.push((name, text));
    }
    found
}

/// The one start-up warning about not-implemented flags and fields, if any were given.
pub fn not_implemented_warning(given: &[(String, String)]) -> Option<String> {
    if given.is_empty() {
        return None;
    }
    let items: Vec<String> = given.iter().map(|(n, v)| format!("{n}={v}")).collect();
    Some(format!(
        "accepted but not implemented, running without them: {}",
        items.join(", ")
    ))
}

/// Upstream's notice for each deprecated flag given (pflag's wording).
pub fn deprecation_notices(given: &[(String, String)]) -> Vec<String> {
    given
        .iter()
        .filter_map(|(name, _)| {
            let spec = FLAGS.iter().find(|f| f.name == name)?;
            spec.deprecated
                .map(|notice| format!("Flag --{name} has been deprecated, {notice}"))
        })
        .collect()
}

/// Upstream's start-up info lines for flags given (logged, unlike the flag parser's
/// deprecation notices).
pub fn start_up_notes(given: &[(String, String)]) -> Vec<&'static str> {
    given
        .iter()
        .filter(|(name, _)| name == "pod-infra-container-image")
        .map(|_| "--pod-infra-container-image will not be pruned by the image garbage collector in kubelet and should also be set in the remote runtime")
        .collect()
}

/// Refused values and values outside a field's allowed set, as problems.
pub fn check(
    config: &KubeletConfiguration,
    origins: &BTreeMap<String, Source>,
) -> Vec<ConfigError> {
    let tree = serde_json::to_value(config).unwrap_or(Value::Null);
    let mut problems = Vec::new();
    for (name, allowed) in ALLOWED {
        if let Some(Value::String(s)) = value_at(&tree, name) {
            // Empty means unset: upstream's default applies.
            if !s.is_empty() && !allowed.contains(&s.as_str()) {
                problems.push(ConfigError::Invalid(format!(
                    "invalid configuration: {name}{} {s:?} is not supported: must be one of {}",
                    flag_hint(name),
                    allowed
                        .iter()
                        .map(|a| format!("{a:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
    }
    for refusal in REFUSALS {
        let Some(value) = value_at(&tree, refusal.field) else {
            continue;
        };
        if given_as(origins, refusal.field).is_some() && (refusal.refuses)(value) {
            problems.push(ConfigError::Refused {
                field: format!("{}{}", refusal.field, flag_hint(refusal.field)),
                value: show(value),
                why: refusal.why.to_string(),
            });
        }
    }
    problems
}

/// ` (--flag)` for the flags that set this field.
fn flag_hint(field: &str) -> String {
    let flags: Vec<String> = flags_for(field).map(|f| format!("--{}", f.name)).collect();
    if flags.is_empty() {
        String::new()
    } else {
        format!(" ({})", flags.join(", "))
    }
}

fn flags_for(field: &str) -> impl Iterator<Item = &'static FlagSpec> + '_ {
    FLAGS
        .iter()
        .filter(move |f| matches!(f.target, Target::Config(p) if p.first() == Some(&field)))
}

/// A field's note and the values not warned about, for the table.
fn field_notes(name: &str) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(spec) = field(name).filter(|s| !s.note.is_empty()) {
        notes.push(spec.note.to_string());
    }
    for (_, value, _) in ANYWAY.iter().filter(|(n, _, _)| *n == name) {
        notes.push(format!(
            "no warning for {value}, which is what rkubelet does"
        ));
    }
    notes
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

/// `docs/flags.md`: every flag and field with its state, generated from the tables.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "# Flags and configuration fields\n\n\
         Generated from `src/domain/config/flags.rs` and `src/domain/config/states.rs`; do not \
         edit by hand. Regenerate with `UPDATE_FLAG_TABLE=1 cargo test flag_table`.\n\n\
         Each upstream kubelet flag (Kubernetes 1.26 to 1.36) and `KubeletConfiguration` \
         v1beta1 field is in one state:\n\n\
         - **implemented**: it works as upstream documents.\n\
         - **accepted, not implemented**: parsed and type-checked (a bad value is an error); \
         when given, start-up logs one warning listing each such flag or field with its value, \
         and rkubelet runs without it.\n\
         - **refused when unsafe**: accepted with safe values; a value asking for what rkubelet \
         cannot do safely stops start-up, naming it and why.\n\n\
         Any other flag or field is an error naming it, with the closest known name as a hint.\n\n",
    );
    let count = |state: State| FLAGS.iter().filter(|f| f.state == state).count();
    let field_count = |state: State| FIELDS.iter().filter(|f| f.state == state).count();
    out.push_str(&format!(
        "Flags: {} implemented, {} accepted but not implemented, {} refused when unsafe. \
         Fields: {} implemented, {} accepted but not implemented, {} refused when unsafe.\n\n",
        count(State::Implemented),
        count(State::NotImplemented),
        count(State::Refused),
        field_count(State::Implemented),
        field_count(State::NotImplemented),
        field_count(State::Refused),
    ));
    out.push_str("## Refused values\n\n| Field | Refused when | Why |\n| --- | --- | --- |\n");
    for r in REFUSALS {
        out.push_str(&format!(
            "| `{}`{} | {} | {} |\n",
            r.field,
            escape(&flag_hint(r.field)),
            r.when,
            escape(r.why)
        ));
    }
    out.push_str("\n## Flags\n\n| Flag | Sets | State | Notes |\n| --- | --- | --- | --- |\n");
    let mut flags: Vec<&FlagSpec> = FLAGS.iter().collect();
    flags.sort_by_key(|f| f.name);
    for f in flags {
        let sets = match f.target {
            Target::FlagOnly => "(flag only)".to_string(),
            Target::Config(path) => format!("`{}`", path.join(".")),
        };
        let mut notes = Vec::new();
        if let Target::Config(path) = f.target {
            notes.extend(field_notes(path[0]));
        }
        if let Some(d) = f.deprecated {
            notes.push(format!("Deprecated upstream: {d}"));
        }
        out.push_str(&format!(
            "| `--{}` | {} | {} | {} |\n",
            f.name,
            sets,
            f.state.label(),
            escape(&notes.join(". "))
        ));
    }
    out.push_str("\n## KubeletConfiguration fields\n\n| Field | Flags | State | Notes |\n| --- | --- | --- | --- |\n");
    let mut fields: Vec<&FieldSpec> = FIELDS.iter().collect();
    fields.sort_by_key(|f| f.name);
    for f in fields {
        let flags: Vec<String> = flags_for(f.name)
            .map(|s| format!("`--{}`", s.name))
            .collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            f.name,
            flags.join(", "),
            f.state.label(),
            escape(&field_notes(f.name).join(". "))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::fields::struct_fields;
    use crate::domain::config::model::KubeletConfiguration;

    #[test]
    fn every_model_field_has_exactly_one_state_and_the_reverse() {
        let model: Vec<&str> = struct_fields::<KubeletConfiguration>()
            .iter()
            .copied()
            .filter(|f| !["apiVersion", "kind"].contains(f))
            .collect();
        for name in &model {
            assert_eq!(
                FIELDS.iter().filter(|f| f.name == *name).count(),
                1,
                "{name} needs exactly one state"
            );
        }
        for f in FIELDS {
            let top = f.name.split('.').next().unwrap_or(f.name);
            assert!(model.contains(&top), "{} is not in the model", f.name);
        }
    }

    #[test]
    fn a_config_flag_is_in_its_fields_state() {
        for spec in FLAGS {
            if let Target::Config(path) = spec.target {
                let field = field(path[0]).expect("field has a state");
                assert_eq!(
                    spec.state, field.state,
                    "--{} and {}",
                    spec.name, field.name
                );
            }
        }
    }

    fn try_resolve(
        args: &[(&str, &str)],
        file: Option<&str>,
    ) -> Result<ResolvedConfig, Vec<ConfigError>> {
        use crate::domain::config::{resolve, ConfigInputs, FileInput};
        let flags = args
            .iter()
            .map(|(n, v)| {
                (
                    crate::domain::config::flags::flag(n).expect("known"),
                    v.to_string(),
                )
            })
            .collect();
        let main_file = file.map(|body| FileInput {
            path: "/etc/kubelet.yaml".into(),
            text: Ok(format!(
                "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{body}"
            )),
        });
        let inputs = ConfigInputs {
            main_file,
            ..ConfigInputs::from_flags(flags)
        };
        resolve(&inputs, &crate::domain::test_support::node_a())
    }

    fn resolve(args: &[(&str, &str)], file: Option<&str>) -> ResolvedConfig {
        try_resolve(args, file).unwrap_or_else(|p| panic!("{p:?}"))
    }

    #[test]
    fn lists_what_was_given_by_flag_or_file_with_its_value() {
        let resolved = resolve(
            &[
                ("storage-driver-password", "hunter2"),
                ("port", "10250"),
                ("read-only-port", "0"),
                ("max-pods", "10"),
            ],
            Some("hairpinMode: none\nlogging:\n  options: {json: {infoBufferSize: 1Mi}}\nmaxPods: 20\n"),
        );
        let listed = not_implemented_given(&resolved);
        let pairs: Vec<(&str, &str)> = listed
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("--storage-driver-password", "(redacted)"),
                ("hairpinMode", "none"),
                ("logging.options", "{\"json\":{\"infoBufferSize\":\"1Mi\"}}"),
            ]
        );
        let warning = not_implemented_warning(&listed).expect("a warning");
        assert!(
            warning.contains("(redacted), hairpinMode=none"),
            "{warning}"
        );
        assert!(not_implemented_warning(&[]).is_none());
    }

    #[test]
    fn only_the_unenforced_node_allocatable_levels_are_listed() {
        let listed = |args: &[(&str, &str)]| not_implemented_given(&resolve(args, None));
        assert!(listed(&[("enforce-node-allocatable", "pods")]).is_empty());
        assert!(listed(&[("enforce-node-allocatable", "none")]).is_empty());
        assert_eq!(
            listed(&[
                (
                    "enforce-node-allocatable",
                    "pods,system-reserved,kube-reserved-compressible"
                ),
                ("system-reserved-cgroup", "/system.slice"),
                ("kube-reserved-cgroup", "/kube.slice"),
            ]),
            [
                ("--system-reserved-cgroup".into(), "/system.slice".into()),
                ("--kube-reserved-cgroup".into(), "/kube.slice".into()),
                (
                    "--enforce-node-allocatable".into(),
                    "system-reserved,kube-reserved-compressible".into()
                ),
            ] as [(String, String); 3]
        );
        for (name, _) in PARTLY {
            assert_eq!(field(name).map(|f| f.state), Some(State::Implemented));
        }
    }

    #[test]
    fn the_pod_infra_container_image_given_gets_upstreams_note() {
        let given = |name: &str| vec![(name.to_string(), "x".to_string())];
        assert_eq!(
            start_up_notes(&given("pod-infra-container-image")),
            ["--pod-infra-container-image will not be pruned by the image garbage collector in kubelet and should also be set in the remote runtime"]
        );
        assert!(start_up_notes(&given("max-pods")).is_empty());
    }

    #[test]
    fn deprecated_flags_get_upstreams_notice() {
        let given = vec![
            ("pod-infra-container-image".to_string(), "x".to_string()),
            ("hostname-override".to_string(), "n".to_string()),
            ("max-pods".to_string(), "3".to_string()),
        ];
        assert_eq!(
            deprecation_notices(&given),
            [
                "Flag --pod-infra-container-image has been deprecated, will be removed in 1.27. Image garbage collector will get sandbox image information from CRI.".to_string(),
                format!("Flag --max-pods has been deprecated, {}", crate::domain::config::flags::CONFIG_FLAG_DEPRECATED),
            ]
        );
    }

    fn problems(args: &[(&str, &str)], file: Option<&str>) -> Vec<ConfigError> {
        try_resolve(args, file).err().unwrap_or_default()
    }

    fn refused_fields(problems: &[ConfigError]) -> Vec<String> {
        problems
            .iter()
            .filter_map(|p| match p {
                ConfigError::Refused { field, .. } => Some(field.clone()),
                _ => None,
            })
            .collect()
    }

    // The memory manager and tiered memory reservation are refused, all named at once;
    // their values that ask for what rkubelet does are accepted without a word.
    #[test]
    fn memory_manager_and_reservation_are_refused_together() {
        let found = problems(
            &[],
            Some(
                "memoryManagerPolicy: Static\nmemoryReservationPolicy: TieredReservation\n\
                 reservedMemory:\n- numaNode: 0\n  limits:\n    memory: 1Gi\n",
            ),
        );
        assert_eq!(
            refused_fields(&found),
            [
                "memoryManagerPolicy (--memory-manager-policy)",
                "reservedMemory (--reserved-memory)",
                "memoryReservationPolicy",
            ]
        );
        let text = found[0].to_string();
        assert!(
            text.contains("refused: memoryManagerPolicy (--memory-manager-policy) = Static"),
            "{text}"
        );
        assert!(text.contains("NUMA-pinned memory"), "{text}");
        let by_flag = problems(
            &[
                ("memory-manager-policy", "Static"),
                (
                    "reserved-memory",
                    "0:memory=1Gi,hugepages-2Mi=2Gi;1:memory=2Gi",
                ),
            ],
            None,
        );
        assert_eq!(
            refused_fields(&by_flag),
            [
                "memoryManagerPolicy (--memory-manager-policy)",
                "reservedMemory (--reserved-memory)",
            ]
        );
        let quiet = resolve(
            &[("memory-manager-policy", "None")],
            Some("memoryReservationPolicy: None\nreservedMemory: []\n"),
        );
        assert!(not_implemented_given(&quiet).is_empty());
    }

    /// kubeadm's `config.yaml` (v1.26.1's, as `kubeadm init` wrote it here): its zero and
    /// empty values ask for nothing rkubelet lacks, except the two whose zero means
    /// upstream's default, which rkubelet does not implement.
    #[test]
    fn kubeadms_zero_values_warn_only_where_the_default_is_not_implemented() {
        let kubeadm = "logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: \"0\"
  verbosity: 0
memorySwap: {}
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
streamingConnectionIdleTimeout: 0s
volumeStatsAggPeriod: 0s
";
        let listed: Vec<String> = not_implemented_given(&resolve(&[], Some(kubeadm)))
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            listed,
            ["streamingConnectionIdleTimeout", "volumeStatsAggPeriod"]
        );
        let asked = "shutdownGracePeriod: 30s
memorySwap: {swapBehavior: LimitedSwap}
logging: {options: {json: {infoBufferSize: 64Ki}}}
";
        let listed: Vec<String> = not_implemented_given(&resolve(&[], Some(asked)))
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            listed,
            ["memorySwap", "logging.options", "shutdownGracePeriod"]
        );
    }

    // Upstream's `ReservedMemoryVar` format and words.
    #[test]
    fn reserved_memory_flag_parses_as_upstream() {
        use super::super::flags::parse_reserved_memory;
        assert_eq!(
            parse_reserved_memory("0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=512Mi"),
            Ok(serde_json::json!([
                {"numaNode": 0, "limits": {"memory": "1Gi", "hugepages-1Gi": "2Gi"}},
                {"numaNode": 1, "limits": {"memory": "512Mi"}},
            ]))
        );
        assert_eq!(
            parse_reserved_memory("memory=1Gi"),
            Err("the reserved memory has incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got memory=1Gi".into())
        );
        assert_eq!(
            parse_reserved_memory("x:memory=1Gi"),
            Err("failed to convert the NUMA node ID, exptected integer, got x".into())
        );
        assert_eq!(
            parse_reserved_memory("0:cpu=1"),
            Err("memory type conversion error, unknown type: \"cpu\"".into())
        );
        assert_eq!(
            parse_reserved_memory("0:memory"),
            Err(
                "the reserved limit has incorrect value, expected type=quantatity, got memory"
                    .into()
            )
        );
        assert!(parse_reserved_memory("0:memory=lots").is_err());
    }

    #[test]
    fn every_refused_field_has_a_refusal_and_the_reverse() {
        for f in FIELDS.iter().filter(|f| f.state == State::Refused) {
            assert!(REFUSALS.iter().any(|r| r.field == f.name), "{}", f.name);
        }
        for r in REFUSALS {
            assert_eq!(field(r.field).map(|f| f.state), Some(State::Refused));
        }
    }
}
