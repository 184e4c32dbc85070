//! The configuration: flags, files and drop-ins merged (`layers`), defaulted, and
//! validated against the node into one typed value (`validate` → [`ResolvedConfig`]).
//!
//! Module order, no cycles: `error`, `fields`, `model`, `feature_gates` → `flags` (the
//! flag table and each flag's state) → `layers` → `options` → `resolved` → `states`
//! (what rkubelet does with each given flag and field) → `validate` → this module's
//! [`resolve`].

pub mod configz;
pub mod error;
pub mod feature_gates;
pub mod fields;
pub mod flags;
pub mod layers;
pub mod model;
pub mod options;
pub mod resolved;
pub mod states;
pub mod validate;

use std::path::{Path, PathBuf};

use error::ConfigError;
use layers::{file_layer, flag_layer, merge, FileRole, GivenFlags, Layer};

use crate::domain::eviction;

pub use options::FlagOptions;
pub use resolved::{
    ClusterConfig, EvictionSettings, HealthzAddress, LogFormat, LoggingSettings, NodeConfig,
    NodeFacts, ResolvedConfig, RuntimeEndpoint,
};

/// A file as read by the app: its path and its text, or why it could not be read.
#[derive(Debug, Clone)]
pub struct FileInput {
    pub path: PathBuf,
    pub text: Result<String, String>,
}

/// Whether a file of `--config-dir` is a drop-in: upstream reads the `*.conf` files only.
pub fn is_drop_in(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "conf")
}

/// Everything the configuration is made from; gathered by the app, resolved here.
#[derive(Debug, Clone)]
pub struct ConfigInputs {
    pub main_file: Option<FileInput>,
    /// Already in name order.
    pub drop_ins: Vec<FileInput>,
    /// Problems met finding the files (an unreadable `--config-dir`).
    pub read_problems: Vec<ConfigError>,
    pub flags: GivenFlags,
    /// The flag-only options, parsed once by [`flag_options`] (the app needs them first,
    /// to find the files and the root directory).
    pub options: Result<FlagOptions, Vec<ConfigError>>,
}

impl ConfigInputs {
    /// The inputs of a command line that names no file.
    pub fn from_flags(flags: GivenFlags) -> Self {
        let options = flag_options(&flags);
        Self {
            main_file: None,
            drop_ins: Vec::new(),
            read_problems: Vec::new(),
            flags,
            options,
        }
    }
}

/// The flag-only options alone, to know which files to read before resolving.
pub fn flag_options(flags: &GivenFlags) -> Result<FlagOptions, Vec<ConfigError>> {
    let options: std::collections::BTreeMap<String, String> = flags
        .iter()
        .filter(|(spec, _)| spec.target == flags::Target::FlagOnly)
        .map(|(spec, text)| (spec.name.to_string(), text.clone()))
        .collect();
    FlagOptions::from_given(&options)
}

/// Merge and validate against the node; every problem of every layer, of the values and
/// of the values on this machine is returned at once.
pub fn resolve(
    inputs: &ConfigInputs,
    facts: &NodeFacts,
) -> Result<ResolvedConfig, Vec<ConfigError>> {
    let mut problems = inputs.read_problems.clone();
    let mut layers: Vec<Layer> = Vec::new();
    let files = inputs
        .main_file
        .iter()
        .map(|f| (f, FileRole::Main))
        .chain(inputs.drop_ins.iter().map(|f| (f, FileRole::DropIn)));
    for (file, role) in files {
        match &file.text {
            Err(reason) => problems.push(ConfigError::FileRead {
                path: file.path.clone(),
                reason: reason.clone(),
            }),
            Ok(text) => match file_layer(&file.path, text, role) {
                Ok(layer) => layers.push(layer),
                Err(errors) => problems.extend(errors),
            },
        }
    }
    match flag_layer(&inputs.flags) {
        Ok((layer, _)) => layers.push(layer),
        Err(errors) => problems.extend(errors),
    }
    let options = match &inputs.options {
        Ok(options) => Some(options.clone()),
        Err(errors) => {
            problems.extend(errors.iter().cloned());
            None
        }
    };
    let merged = match merge(&layers, &inputs.flags) {
        Ok(merged) => Some(merged),
        Err(e) => {
            problems.push(e);
            None
        }
    };
    let Some(mut merged) = merged else {
        return Err(problems);
    };
    if merged.config.merge_default_eviction_settings {
        merged.config.eviction_hard =
            eviction::effective_eviction_hard(Some(&merged.config.eviction_hard), true);
    }
    problems.extend(states::check(&merged.config, &merged.origins));
    // Validated with default options when the flag-only ones are bad, so the values'
    // problems are reported with theirs.
    let checked_with = options.clone().unwrap_or_default();
    let node = validate::validate(&merged.config, &checked_with, facts)
        .map_err(|errors| problems.extend(errors))
        .ok();
    match (node, options) {
        (Some(node), Some(mut options)) if problems.is_empty() => {
            options.given = inputs
                .flags
                .iter()
                .map(|(spec, text)| (spec.name.to_string(), text.clone()))
                .collect();
            Ok(ResolvedConfig {
                config: merged.config,
                origins: merged.origins,
                options,
                node,
            })
        }
        _ => Err(problems),
    }
}
