//! Options that exist only on the command line (not in `KubeletConfiguration`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use std::time::Duration;

use super::error::ConfigError;
use super::flags;
use crate::domain::cgroup::WeightCurve;
use crate::domain::units::duration::GoDuration;

/// Upstream's default `--cert-dir`.
pub const DEFAULT_CERT_DIR: &str = "/var/lib/kubelet/pki";
/// `--housekeeping-interval` unless given: upstream's eviction monitoring period.
pub const DEFAULT_HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(10);

/// `--pod-infra-container-image` unless given: upstream v1.26's.
pub const DEFAULT_POD_SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.9";

/// Options that exist only on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagOptions {
    pub config: Option<PathBuf>,
    pub config_dir: Option<PathBuf>,
    pub kubeconfig: Option<PathBuf>,
    pub bootstrap_kubeconfig: Option<PathBuf>,
    pub hostname_override: Option<String>,
    /// `--node-ip`, parsed (comma-separated addresses; empty: none).
    pub node_ips: Vec<core::net::IpAddr>,
    /// `--cert-dir`.
    pub cert_dir: PathBuf,
    /// `--register-schedulable` (deprecated).
    pub register_schedulable: bool,
    pub root_dir: PathBuf,
    pub lock_file: Option<PathBuf>,
    pub exit_on_lock_contention: bool,
    pub runonce: bool,
    pub node_labels: BTreeMap<String, String>,
    pub dry_run: bool,
    pub dry_run_output: String,
    /// `--cpu-weight-curve`.
    pub cpu_weight_curve: WeightCurve,
    pub dry_run_snapshot: Option<PathBuf>,
    /// `--housekeeping-interval`: how often the eviction manager observes the node.
    pub housekeeping_interval: Duration,
    /// `--pod-infra-container-image`: image GC keeps it (the runtime chooses the sandbox
    /// image from its own configuration).
    pub pod_sandbox_image: String,
    /// `--vmodule` when given: it replaces `logging.vmodule`.
    pub vmodule: Option<Vec<crate::domain::log_format::VModuleRule>>,
    /// Every flag given on the command line (long name, text), to report deprecated and
    /// not-implemented ones.
    pub given: Vec<(String, String)>,
}

impl Default for FlagOptions {
    fn default() -> Self {
        Self {
            config: None,
            config_dir: None,
            kubeconfig: None,
            bootstrap_kubeconfig: None,
            hostname_override: None,
            node_ips: Vec::new(),
            cert_dir: PathBuf::from(DEFAULT_CERT_DIR),
            register_schedulable: true,
            root_dir: PathBuf::from("/var/lib/kubelet"),
            lock_file: None,
            exit_on_lock_contention: false,
            runonce: false,
            node_labels: BTreeMap::new(),
            dry_run: false,
            dry_run_output: "text".into(),
            cpu_weight_curve: WeightCurve::default(),
            dry_run_snapshot: None,
            housekeeping_interval: DEFAULT_HOUSEKEEPING_INTERVAL,
            pod_sandbox_image: DEFAULT_POD_SANDBOX_IMAGE.into(),
            vmodule: None,
            given: Vec::new(),
        }
    }
}

fn non_empty_path(value: Option<&String>) -> Option<PathBuf> {
    value.filter(|v| !v.is_empty()).map(PathBuf::from)
}

impl FlagOptions {
    /// The flag-only options from their given text; every problem is reported.
    pub fn from_given(given: &BTreeMap<String, String>) -> Result<FlagOptions, Vec<ConfigError>> {
        let mut problems = Vec::new();
        let mut boolean = |name: &str| -> bool {
            let Some(text) = given.get(name) else {
                return false;
            };
            flags::parse_go_bool(text).unwrap_or_else(|| {
                problems.push(ConfigError::InvalidFlag {
                    flag: name.into(),
                    value: text.clone(),
                    reason: format!("strconv.ParseBool: parsing {text:?}: invalid syntax"),
                });
                false
            })
        };
        let exit_on_lock_contention = boolean("exit-on-lock-contention");
        let runonce = boolean("runonce");
        let register_schedulable =
            !given.contains_key("register-schedulable") || boolean("register-schedulable");
        let dry_run = boolean("dry-run");
        let mut node_labels = BTreeMap::new();
        for pair in given
            .get("node-labels")
            .into_iter()
            .flat_map(|t| t.split(','))
        {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            match pair.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    node_labels.insert(k.to_string(), v.to_string());
                }
                _ => problems.push(ConfigError::InvalidFlag {
                    flag: "node-labels".into(),
                    value: pair.into(),
                    reason: "labels must be key=value pairs".into(),
                }),
            }
        }
        let dry_run_output = given
            .get("dry-run-output")
            .cloned()
            .unwrap_or_else(|| "text".into());
        if !["text", "json"].contains(&dry_run_output.as_str()) {
            problems.push(ConfigError::InvalidFlag {
                flag: "dry-run-output".into(),
                value: dry_run_output.clone(),
                reason: "must be one of \"text\" or \"json\"".into(),
            });
        }
        let cpu_weight_curve = match given.get("cpu-weight-curve").map(String::as_str) {
            None | Some("quadratic") => WeightCurve::Quadratic,
            Some("linear") => WeightCurve::Linear,
            Some(other) => {
                problems.push(ConfigError::InvalidFlag {
                    flag: "cpu-weight-curve".into(),
                    value: other.into(),
                    reason: "must be one of \"quadratic\" or \"linear\"".into(),
                });
                WeightCurve::default()
            }
        };
        let housekeeping_interval = match given.get("housekeeping-interval") {
            None => DEFAULT_HOUSEKEEPING_INTERVAL,
            Some(text) => match GoDuration::parse(text).ok().and_then(|d| d.to_std()) {
                Some(d) if !d.is_zero() => d,
                _ => {
                    problems.push(ConfigError::InvalidFlag {
                        flag: "housekeeping-interval".into(),
                        value: text.clone(),
                        reason: "must be a positive duration (such as 10s)".into(),
                    });
                    DEFAULT_HOUSEKEEPING_INTERVAL
                }
            },
        };
        let vmodule = given.get("vmodule").and_then(|text| {
            crate::domain::log_format::parse_vmodule(text)
                .map_err(|reason| {
                    problems.push(ConfigError::InvalidFlag {
                        flag: "vmodule".into(),
                        value: text.clone(),
                        reason,
                    })
                })
                .ok()
        });
        let exit_needs_lock =
            exit_on_lock_contention && non_empty_path(given.get("lock-file")).is_none();
        if exit_needs_lock {
            problems.push(ConfigError::Invalid(
                "cannot exit on lock file contention: no lock file specified".into(),
            ));
        }
        let mut node_ips = Vec::new();
        for text in given
            .get("node-ip")
            .into_iter()
            .flat_map(|t| t.split(','))
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            match text.parse() {
                Ok(ip) => node_ips.push(ip),
                Err(_) => problems.push(ConfigError::InvalidFlag {
                    flag: "node-ip".into(),
                    value: text.into(),
                    reason: "not an IP address".into(),
                }),
            }
        }
        if non_empty_path(given.get("bootstrap-kubeconfig")).is_some()
            && non_empty_path(given.get("kubeconfig")).is_none()
        {
            problems.push(ConfigError::Invalid(
                "--bootstrap-kubeconfig needs --kubeconfig: the path where the bootstrapped kubeconfig is written".into(),
            ));
        }
        let options = FlagOptions {
            config: non_empty_path(given.get("config")),
            config_dir: non_empty_path(given.get("config-dir")),
            kubeconfig: non_empty_path(given.get("kubeconfig")),
            bootstrap_kubeconfig: non_empty_path(given.get("bootstrap-kubeconfig")),
            hostname_override: given.get("hostname-override").cloned(),
            node_ips,
            cert_dir: non_empty_path(given.get("cert-dir"))
                .unwrap_or_else(|| PathBuf::from(DEFAULT_CERT_DIR)),
            register_schedulable,
            root_dir: non_empty_path(given.get("root-dir"))
                .unwrap_or_else(|| PathBuf::from("/var/lib/kubelet")),
            lock_file: non_empty_path(given.get("lock-file")),
            exit_on_lock_contention,
            runonce,
            node_labels,
            dry_run,
            dry_run_output,
            cpu_weight_curve,
            dry_run_snapshot: non_empty_path(given.get("dry-run-snapshot")),
            housekeeping_interval,
            pod_sandbox_image: given
                .get("pod-infra-container-image")
                .filter(|image| !image.is_empty())
                .cloned()
                .unwrap_or_else(|| DEFAULT_POD_SANDBOX_IMAGE.into()),
            vmodule,
            given: Vec::new(),
        };
        if problems.is_empty() {
            Ok(options)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> Result<FlagOptions, Vec<ConfigError>> {
        let given: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        FlagOptions::from_given(&given)
    }

    #[test]
    fn the_housekeeping_interval_is_a_positive_duration() {
        let get =
            |v: &str| options(&[("housekeeping-interval", v)]).map(|o| o.housekeeping_interval);
        assert_eq!(
            options(&[]).map(|o| o.housekeeping_interval).ok(),
            Some(Duration::from_secs(10))
        );
        assert_eq!(get("500ms").ok(), Some(Duration::from_millis(500)));
        for bad in ["0s", "-1s", "soon"] {
            let problems = get(bad).err().unwrap_or_default();
            assert_eq!(problems.len(), 1, "{bad}");
            assert!(
                problems[0].to_string().contains("housekeeping-interval"),
                "{}",
                problems[0]
            );
        }
    }

    #[test]
    fn the_cpu_weight_curve_is_quadratic_unless_told_and_checked() {
        let default = options(&[]).map(|o| o.cpu_weight_curve);
        assert_eq!(default.ok(), Some(WeightCurve::Quadratic));
        let linear = options(&[("cpu-weight-curve", "linear")]).map(|o| o.cpu_weight_curve);
        assert_eq!(linear.ok(), Some(WeightCurve::Linear));
        let bad = options(&[("cpu-weight-curve", "cubic")])
            .err()
            .unwrap_or_default();
        assert_eq!(
            bad.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [ConfigError::InvalidFlag {
                flag: "cpu-weight-curve".into(),
                value: "cubic".into(),
                reason: "must be one of \"quadratic\" or \"linear\"".into(),
            }
            .to_string()]
        );
    }
}
