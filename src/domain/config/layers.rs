//! Layers of configuration and their merge: defaults, then `--config`, then the
//! `--config-dir` drop-ins in name order, then flags given on the command line.
//!
//! Every layer is a JSON tree with upstream's field names. Layers merge as JSON merge
//! patches (RFC 7386): objects merge key by key (so `featureGates` and the eviction maps
//! of a drop-in add to the file's), anything else is replaced. A flag replaces its
//! field whole, except `--feature-gates`, which merges key by key as upstream does.
//! Each field's last writer is remembered so the planner can say where a value came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::ConfigError;
use super::fields::{closest, struct_fields};
use super::flags::{flag_value, FlagSpec, Target};
use super::model::{KubeletConfiguration, API_VERSION, KIND, PATH_FIELDS};
use crate::domain::upstream::yaml::parser_options;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "from", rename_all = "kebab-case")]
pub enum Source {
    Default,
    File(PathBuf),
    DropIn(PathBuf),
    Flag(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "file {}", p.display()),
            Source::DropIn(p) => write!(f, "drop-in {}", p.display()),
            Source::Flag(name) => write!(f, "flag --{name}"),
        }
    }
}

/// The part of the configuration one source gives, with upstream's field names.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub source: Source,
    pub values: Map<String, Value>,
    /// Top-level fields whose objects merge into what lower layers gave, rather than
    /// replace it.
    pub merge_fields: Vec<String>,
}

/// The file formats a configuration file may use; all share upstream's field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Yaml,
    Json,
    Toml,
}

impl FileFormat {
    /// By extension; anything else (a `.conf` drop-in, no extension) is read as YAML,
    /// which also covers JSON, unless it only parses as TOML.
    pub fn for_path(path: &Path) -> Option<FileFormat> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => Some(FileFormat::Toml),
            Some("json") => Some(FileFormat::Json),
            Some("yaml" | "yml") => Some(FileFormat::Yaml),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FileFormat::Yaml => "YAML",
            FileFormat::Json => "JSON",
            FileFormat::Toml => "TOML",
        }
    }

    fn parse(self, text: &str) -> Result<Value, String> {
        // Deeper files are refused before the merge and the checks walk them: a
        // 255-level YAML file overflowed a 2 MiB stack in a debug build (found by the
        // fuzz target). The YAML parser stops early; JSON and TOML stop at their own
        // limits (128 levels or less) and are measured here.
        let value = match self {
            FileFormat::Yaml => {
                serde_saphyr::from_str_with_options::<Value>(text, parser_options(MAX_CONFIG_DEPTH))
                    .map_err(|e| e.to_string())?
            }
            FileFormat::Json => serde_json::from_str::<Value>(text).map_err(|e| e.to_string())?,
            FileFormat::Toml => toml::from_str::<Value>(text).map_err(|e| e.to_string())?,
        };
        if nesting(&value) > MAX_CONFIG_DEPTH {
            return Err(format!("nested deeper than {MAX_CONFIG_DEPTH} levels"));
        }
        Ok(value)
    }
}

/// How many levels of arrays and objects a value has, without recursing.
fn nesting(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 0usize)];
    while let Some((value, depth)) = pending.pop() {
        deepest = deepest.max(depth);
        match value {
            Value::Array(items) => pending.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(fields) => pending.extend(fields.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Nesting a configuration file may have: `KubeletConfiguration`'s deepest field
/// (`logging.options.json.infoBufferSize`) is 4 levels down; upstream sets no limit.
pub const MAX_CONFIG_DEPTH: usize = 32;

/// Whether a file is the main `--config` file or a drop-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    Main,
    DropIn,
}

/// Parse one configuration file into a layer. Every problem is reported; fields with
/// problems are left out of the layer.
pub fn file_layer(path: &Path, text: &str, role: FileRole) -> Result<Layer, Vec<ConfigError>> {
    let tree = match FileFormat::for_path(path) {
        Some(format) => format.parse(text).map_err(|reason| ConfigError::Syntax {
            path: path.to_path_buf(),
            format: format.name(),
            reason,
        }),
        // A TOML document is often also valid YAML (a plain string), so TOML is tried
        // whenever YAML does not give a mapping.
        None => match FileFormat::Yaml.parse(text) {
            Ok(tree @ Value::Object(_)) => Ok(tree),
            yaml => FileFormat::Toml
                .parse(text)
                .or_else(|toml_reason| match yaml {
                    Ok(tree) => Ok(tree),
                    Err(yaml_reason) => {
                        Err(format!("as YAML: {yaml_reason}; as TOML: {toml_reason}"))
                    }
                }),
        }
        .map_err(|reason| ConfigError::Syntax {
            path: path.to_path_buf(),
            format: "YAML, JSON or TOML",
            reason,
        }),
    }
    .map_err(|e| vec![e])?;

    let document = |reason: String| ConfigError::Document {
        path: path.to_path_buf(),
        reason,
    };
    let mut values = match tree {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        _ => {
            return Err(vec![document(
                "expected a KubeletConfiguration object".to_string(),
            )])
        }
    };

    let mut problems = Vec::new();
    match values.remove("kind") {
        Some(Value::String(kind)) if kind == KIND => {}
        Some(other) => problems.push(document(format!("kind {other} is not {KIND:?}"))),
        None => problems.push(document(format!(
            "Object 'Kind' is missing; expected kind: {KIND}"
        ))),
    }
    match values.remove("apiVersion") {
        Some(Value::String(v)) if v == API_VERSION => {}
        Some(other) => problems.push(document(format!(
            "apiVersion {other} is not supported; expected {API_VERSION:?}"
        ))),
        None => problems.push(document(format!(
            "Object 'apiVersion' is missing; expected apiVersion: {API_VERSION}"
        ))),
    }

    let base = path.parent().unwrap_or_else(|| Path::new("."));
    resolve_relative_paths(&mut values, base);
    drop_zero_defaults(&mut values);

    let source = match role {
        FileRole::Main => Source::File(path.to_path_buf()),
        FileRole::DropIn => Source::DropIn(path.to_path_buf()),
    };
    check_fields(&mut values, &source.to_string(), &mut problems);
    if problems.is_empty() {
        Ok(Layer {
            source,
            values,
            merge_fields: Vec::new(),
        })
    } else {
        Err(problems)
    }
}

/// Fields upstream's defaulting fills when a file gives them as zero (`0s`, `0`), as
/// `kubeadm` writes them: zero there means "the default", not "zero".
const DEFAULTED_WHEN_ZERO: &[&[&str]] = &[
    &["syncFrequency"],
    &["fileCheckFrequency"],
    &["httpCheckFrequency"],
    &["runtimeRequestTimeout"],
    &["nodeStatusUpdateFrequency"],
    &["nodeStatusReportFrequency"],
    &["nodeLeaseDurationSeconds"],
    &["evictionPressureTransitionPeriod"],
    &["imageMinimumGCAge"],
    &["authentication", "webhook", "cacheTTL"],
    &["authorization", "webhook", "cacheAuthorizedTTL"],
    &["authorization", "webhook", "cacheUnauthorizedTTL"],
    &["logging", "flushFrequency"],
];

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => {
            crate::domain::units::duration::GoDuration::parse(s).is_ok_and(|d| d.as_nanos() == 0)
        }
        _ => false,
    }
}

fn drop_zero_defaults(values: &mut Map<String, Value>) {
    for field_path in DEFAULTED_WHEN_ZERO {
        let Some((last, parents)) = field_path.split_last() else {
            continue;
        };
        let mut object = Some(&mut *values);
        for key in parents {
            object = object
                .and_then(|o| o.get_mut(*key))
                .and_then(Value::as_object_mut);
        }
        if let Some(object) = object {
            if object.get(*last).is_some_and(is_zero) {
                object.remove(*last);
            }
        }
    }
}

/// Paths in a file are relative to the file's own folder, as upstream resolves them.
fn resolve_relative_paths(values: &mut Map<String, Value>, base: &Path) {
    for field_path in PATH_FIELDS {
        let Some((last, parents)) = field_path.split_last() else {
            continue;
        };
        let mut object = Some(&mut *values);
        for key in parents {
            object = object
                .and_then(|o| o.get_mut(*key))
                .and_then(Value::as_object_mut);
        }
        if let Some(Value::String(p)) = object.and_then(|o| o.get_mut(*last)) {
            if !p.is_empty() && Path::new(p.as_str()).is_relative() {
                *p = base.join(p.as_str()).to_string_lossy().into_owned();
            }
        }
    }
}

/// Check each top-level field on its own, so one bad field does not hide the others:
/// unknown names (with a hint) and values that do not fit the field's type.
fn check_fields(values: &mut Map<String, Value>, source: &str, problems: &mut Vec<ConfigError>) {
    let known = struct_fields::<KubeletConfiguration>();
    let mut bad = Vec::new();
    for (field, value) in values.iter() {
        if !known.contains(&field.as_str()) {
            problems.push(ConfigError::UnknownField {
                origin: source.to_string(),
                field: field.clone(),
                hint: closest(field, known).map(str::to_string),
            });
            bad.push(field.clone());
            continue;
        }
        if let Err(reason) = check_value(field, value) {
            problems.push(ConfigError::InvalidField {
                origin: source.to_string(),
                field: field.clone(),
                reason,
            });
            bad.push(field.clone());
        }
    }
    for field in bad {
        values.remove(&field);
    }
}

fn check_value(field: &str, value: &Value) -> Result<(), String> {
    let mut single = Map::new();
    single.insert(field.to_string(), value.clone());
    let deserializer = Value::Object(single);
    serde_path_to_error::deserialize::<_, KubeletConfiguration>(deserializer)
        .map(|_| ())
        .map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            if path == field || path == "." {
                inner
            } else {
                format!("{path}: {inner}")
            }
        })
}

/// The flags given on the command line, in order, as their text.
pub type GivenFlags = Vec<(&'static FlagSpec, String)>;

/// The layer of the flags given on the command line, and the flag-only options.
pub fn flag_layer(
    given: &GivenFlags,
) -> Result<(Layer, BTreeMap<String, String>), Vec<ConfigError>> {
    let mut values = Map::new();
    let mut merge_fields = Vec::new();
    let mut options = BTreeMap::new();
    let mut problems = Vec::new();
    for (spec, text) in given {
        let path = match spec.target {
            Target::FlagOnly => {
                // The implemented ones are checked where they are used; the others only
                // here, so a bad value is still an error.
                if spec.state != super::flags::State::Implemented {
                    if let Err(e) = flag_value(spec, text) {
                        problems.push(e);
                        continue;
                    }
                }
                options.insert(spec.name.to_string(), text.clone());
                continue;
            }
            Target::Config(path) => path,
        };
        let value = match flag_value(spec, text) {
            Ok(v) => v,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let (field, parents_and_last) = match path.split_first() {
            Some(split) => split,
            None => continue,
        };
        let nested = parents_and_last.iter().rev().fold(value, |inner, key| {
            let mut m = Map::new();
            m.insert((*key).to_string(), inner);
            Value::Object(m)
        });
        if let Err(reason) = check_value(field, &nested) {
            problems.push(ConfigError::InvalidFlag {
                flag: spec.name.to_string(),
                value: text.clone(),
                reason,
            });
            continue;
        }
        // Feature gates and nested fields (logging, authentication) merge with the file's;
        // other flags replace the whole field, as upstream's map flags do.
        if spec.name == "feature-gates" || !parents_and_last.is_empty() {
            merge_fields.push((*field).to_string());
            merge_patch_into(values.entry(*field).or_insert(Value::Null), nested);
        } else {
            values.insert((*field).to_string(), nested);
        }
    }
    if problems.is_empty() {
        Ok((
            Layer {
                source: Source::Flag(String::new()),
                values,
                merge_fields,
            },
            options,
        ))
    } else {
        Err(problems)
    }
}

/// RFC 7386: objects merge key by key, `null` removes, anything else replaces.
fn merge_patch_into(target: &mut Value, patch: Value) {
    match patch {
        Value::Object(patch) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(target) = target {
                for (key, value) in patch {
                    if value.is_null() {
                        target.remove(&key);
                    } else {
                        merge_patch_into(target.entry(key).or_insert(Value::Null), value);
                    }
                }
            }
        }
        other => *target = other,
    }
}

/// The configuration after merging the layers over the defaults, and where each
/// top-level field's value came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub config: KubeletConfiguration,
    pub origins: BTreeMap<String, Source>,
}

/// Merge layers in the order given (lowest first) over upstream's defaults.
pub fn merge(layers: &[Layer], flag_sources: &GivenFlags) -> Result<Merged, ConfigError> {
    let mut tree = Map::new();
    let mut origins = BTreeMap::new();
    for layer in layers {
        for (field, value) in &layer.values {
            let entry = tree.entry(field.clone()).or_insert(Value::Null);
            let replaces =
                matches!(layer.source, Source::Flag(_)) && !layer.merge_fields.contains(field);
            if replaces {
                *entry = value.clone();
            } else {
                merge_patch_into(entry, value.clone());
            }
            let source = match &layer.source {
                Source::Flag(_) => Source::Flag(flag_name_for(field, flag_sources)),
                other => other.clone(),
            };
            origins.insert(field.clone(), source);
        }
    }
    let config: KubeletConfiguration = serde_json::from_value(Value::Object(tree))
        .map_err(|e| ConfigError::Invalid(e.to_string()))?;
    for field in struct_fields::<KubeletConfiguration>() {
        origins
            .entry((*field).to_string())
            .or_insert(Source::Default);
    }
    Ok(Merged { config, origins })
}

fn flag_name_for(field: &str, flag_sources: &GivenFlags) -> String {
    flag_sources
        .iter()
        .rev()
        .find(|(spec, _)| matches!(spec.target, Target::Config(p) if p.first() == Some(&field)))
        .map(|(spec, _)| spec.name.to_string())
        .unwrap_or_else(|| field.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::flags::flag;

    fn given(pairs: &[(&str, &str)]) -> GivenFlags {
        pairs
            .iter()
            .map(|(n, v)| (flag(n).expect("known flag"), (*v).to_string()))
            .collect()
    }

    const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

    fn yaml(body: &str) -> String {
        format!("{HEADER}{body}")
    }

    #[test]
    fn flag_beats_drop_in_beats_file_and_defaults_fill_the_rest() {
        let file = file_layer(
            Path::new("/etc/kubelet/config.yaml"),
            &yaml("maxPods: 50\ncgroupDriver: systemd\nhealthzPort: 1111\n"),
            FileRole::Main,
        )
        .expect("file parses");
        let drop_in = file_layer(
            Path::new("/etc/kubelet/conf.d/10-a.conf"),
            &yaml("maxPods: 60\nhealthzPort: 2222\n"),
            FileRole::DropIn,
        )
        .expect("drop-in parses");
        let flags = given(&[("healthz-port", "3333")]);
        let (flag_layer, _) = flag_layer(&flags).expect("flags parse");
        let merged = merge(&[file, drop_in, flag_layer], &flags).expect("merges");
        assert_eq!(merged.config.cgroup_driver, "systemd");
        assert_eq!(merged.config.max_pods, 60);
        assert_eq!(merged.config.healthz_port, 3333);
        assert_eq!(merged.config.oom_score_adj, -999);
        assert_eq!(
            merged.origins["cgroupDriver"],
            Source::File("/etc/kubelet/config.yaml".into())
        );
        assert_eq!(
            merged.origins["maxPods"],
            Source::DropIn("/etc/kubelet/conf.d/10-a.conf".into())
        );
        assert_eq!(
            merged.origins["healthzPort"],
            Source::Flag("healthz-port".into())
        );
        assert_eq!(merged.origins["oomScoreAdj"], Source::Default);
    }

    #[test]
    fn feature_gates_merge_per_key_and_map_flags_replace() {
        let file = file_layer(
            Path::new("/c.yaml"),
            &yaml("featureGates:\n  A: true\n  B: true\nevictionHard:\n  memory.available: 1Gi\n  nodefs.available: 5%\n"),
            FileRole::Main,
        )
        .expect("file parses");
        let flags = given(&[
            ("feature-gates", "B=false,C=true"),
            ("eviction-hard", "memory.available<2Gi"),
        ]);
        let (flag_layer, _) = flag_layer(&flags).expect("flags parse");
        let merged = merge(&[file, flag_layer], &flags).expect("merges");
        let gates: Vec<_> = merged
            .config
            .feature_gates
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(gates, [("A", true), ("B", false), ("C", true)]);
        assert_eq!(
            merged.config.eviction_hard,
            BTreeMap::from([("memory.available".to_string(), "2Gi".to_string())])
        );
    }

    #[test]
    fn the_same_fields_load_from_yaml_json_and_toml() {
        let yaml_layer = file_layer(
            Path::new("/k.yaml"),
            &yaml("maxPods: 7\nevictionHard:\n  memory.available: 1Gi\n"),
            FileRole::Main,
        )
        .expect("yaml");
        let json_layer = file_layer(
            Path::new("/k.json"),
            r#"{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":7,"evictionHard":{"memory.available":"1Gi"}}"#,
            FileRole::Main,
        )
        .expect("json");
        let toml_layer = file_layer(
            Path::new("/k.toml"),
            "apiVersion = \"kubelet.config.k8s.io/v1beta1\"\nkind = \"KubeletConfiguration\"\nmaxPods = 7\n[evictionHard]\n\"memory.available\" = \"1Gi\"\n",
            FileRole::Main,
        )
        .expect("toml");
        assert_eq!(yaml_layer.values, json_layer.values);
        assert_eq!(yaml_layer.values, toml_layer.values);
    }

    #[test]
    fn every_problem_in_a_file_is_reported() {
        let problems = file_layer(
            Path::new("/bad.yaml"),
            &yaml("reservedCpus: \"0-1\"\nmaxPods: many\nauthentication:\n  anonymous:\n    enabeld: true\n"),
            FileRole::Main,
        )
        .expect_err("invalid");
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 3, "{text:#?}");
        assert!(text
            .iter()
            .any(|t| t.contains("unknown field \"reservedCpus\"")
                && t.contains("reservedSystemCPUs")));
        assert!(text
            .iter()
            .any(|t| t.contains("\"maxPods\"") && t.contains("many")));
        assert!(text.iter().any(|t| t.contains("enabeld")));
    }

    #[test]
    fn a_file_that_is_not_yaml_is_refused_with_its_name() {
        let problems = file_layer(Path::new("/etc/k.yaml"), "{ not: yaml: [", FileRole::Main)
            .expect_err("invalid");
        assert!(
            matches!(&problems[0], ConfigError::Syntax { path, .. } if path == Path::new("/etc/k.yaml"))
        );
    }

    #[test]
    fn a_file_nested_deeper_than_any_field_is_refused_in_every_format() {
        let deep = MAX_CONFIG_DEPTH + 1;
        for (path, text) in [
            (
                "/k.json",
                format!("{}1{}", "[".repeat(deep), "]".repeat(deep)),
            ),
            (
                "/k.yaml",
                format!("a: {}1{}", "[".repeat(deep), "]".repeat(deep)),
            ),
            (
                "/k.toml",
                format!("a = {}1{}", "[".repeat(deep), "]".repeat(deep)),
            ),
        ] {
            let problems = file_layer(Path::new(path), &text, FileRole::Main).expect_err(path);
            assert!(
                matches!(&problems[0], ConfigError::Syntax { path: p, .. } if p == Path::new(path)),
                "{problems:?}"
            );
        }
    }

    #[test]
    fn a_file_needs_its_kind_and_api_version() {
        let problems =
            file_layer(Path::new("/k.yaml"), "maxPods: 3\n", FileRole::Main).expect_err("invalid");
        assert_eq!(problems.len(), 2);
    }

    #[test]
    fn relative_paths_resolve_against_the_files_folder() {
        let layer = file_layer(
            Path::new("/etc/kubernetes/kubelet.yaml"),
            &yaml("staticPodPath: manifests\nauthentication:\n  x509:\n    clientCAFile: pki/ca.crt\n"),
            FileRole::Main,
        )
        .expect("parses");
        assert_eq!(layer.values["staticPodPath"], "/etc/kubernetes/manifests");
        assert_eq!(
            layer.values["authentication"]["x509"]["clientCAFile"],
            "/etc/kubernetes/pki/ca.crt"
        );
    }

    #[test]
    fn zero_durations_in_a_file_mean_the_default_as_upstream() {
        let layer = file_layer(
            Path::new("/k.yaml"),
            &yaml("syncFrequency: 0s\nruntimeRequestTimeout: 0s\nlogging:\n  flushFrequency: 0\nfileCheckFrequency: 5s\n"),
            FileRole::Main,
        )
        .expect("parses");
        let merged = merge(&[layer], &GivenFlags::new()).expect("merges");
        let defaults = KubeletConfiguration::default();
        assert_eq!(merged.config.sync_frequency, defaults.sync_frequency);
        assert_eq!(
            merged.config.runtime_request_timeout,
            defaults.runtime_request_timeout
        );
        assert_eq!(
            merged.config.logging.flush_frequency,
            defaults.logging.flush_frequency
        );
        assert_eq!(
            merged.config.file_check_frequency,
            crate::domain::units::duration::GoDuration::from_secs(5)
        );
    }

    #[test]
    fn flag_problems_are_all_reported() {
        let flags = given(&[
            ("max-pods", "x"),
            ("sync-frequency", "soon"),
            ("cgroups-per-qos", "nah"),
        ]);
        let problems = flag_layer(&flags).expect_err("invalid");
        assert_eq!(problems.len(), 3);
    }
}
