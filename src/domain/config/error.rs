use std::path::PathBuf;

/// One problem with the given configuration. Validation returns all of them at once.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("failed to read kubelet config file {path:?}, error: {reason}")]
    FileRead { path: PathBuf, reason: String },
    #[error("failed to decode kubelet config file {path:?} as {format}: {reason}")]
    Syntax {
        path: PathBuf,
        format: &'static str,
        reason: String,
    },
    #[error("kubelet config file {path:?}: {reason}")]
    Document { path: PathBuf, reason: String },
    #[error("{origin}: unknown field {field:?}{}", hint.as_ref().map(|h| format!(" (did you mean {h:?}?)")).unwrap_or_default())]
    UnknownField {
        origin: String,
        field: String,
        hint: Option<String>,
    },
    #[error("{origin}: invalid value for field {field:?}: {reason}")]
    InvalidField {
        origin: String,
        field: String,
        reason: String,
    },
    #[error("invalid argument {value:?} for \"--{flag}\" flag: {reason}")]
    InvalidFlag {
        flag: String,
        value: String,
        reason: String,
    },
    /// A value rkubelet accepts only when it asks for nothing unsafe (see `states`).
    #[error("refused: {field} = {value}: rkubelet cannot honour it safely: {why}")]
    Refused {
        field: String,
        value: String,
        why: String,
    },
    /// A semantic rule, in upstream's words ("invalid configuration: ...").
    #[error("{0}")]
    Invalid(String),
}
