//! A volume mount's `subPath` or `subPathExpr` (upstream's `makeMounts` and
//! `subpath_linux.go`). The runtime is never handed `<volume>/<subPath>` as text: a
//! container controls its volume's contents, symlinks included, and a link followed on
//! the host reaches the host (CVE-2017-1002101, CVE-2021-25741). The kubelet opens the
//! subpath under the volume's root without following any link and bind-mounts what it
//! opened to a folder of its own, [`SubPath::target`]; that folder is what the runtime
//! mounts. Here: the expansion, the checks upstream makes before any I/O, and the
//! target's name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::domain::kuberuntime::requests::expand_with;

/// Under the pod's folder: `volume-subpaths/<volume>/<container>/<mount index>`.
pub const SUBPATHS_DIR: &str = "volume-subpaths";

/// One subpath to open and bind before its container is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubPath {
    /// The volume's name, as the volume mount gives it.
    pub volume: String,
    /// The volume's folder on the host: nothing above it may be reached.
    pub volume_path: PathBuf,
    /// Relative to `volume_path`, checked by [`checked_sub_path`].
    pub path: String,
    /// Where the opened subpath is bound; the runtime mounts this path.
    pub target: PathBuf,
}

impl SubPath {
    /// Why the container cannot start when the bind fails: upstream's words, which keep
    /// the host's paths from the pod's status (the log has the cause).
    pub fn failure_message(&self, container: &str) -> String {
        format!(
            "failed to prepare subPath for volumeMount {:?} of container {container:?}",
            self.volume
        )
    }
}

/// Why a mount's subpath is refused before any I/O, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubPathError {
    /// `subPathExpr` named variables the container does not define, or defines empty.
    #[error("missing value for {}", .0.join(", "))]
    MissingValue(Vec<String>),
    #[error("error SubPath `{0}` must not be an absolute path")]
    Absolute(String),
    #[error("unable to provision SubPath `{0}`: must not contain '..'")]
    Backsteps(String),
    /// The API server refuses both at once; a static pod can still say both.
    #[error("volumeMount {mount:?}: subPath and subPathExpr are mutually exclusive")]
    Both { mount: String },
}

/// `<pod_dir>/volume-subpaths/<volume>/<container>/<index>` (upstream's
/// `getSubpathBindTarget`), so either kubelet finds the other's binds.
pub fn bind_target(pod_dir: &Path, volume: &str, container: &str, index: usize) -> PathBuf {
    pod_dir
        .join(SUBPATHS_DIR)
        .join(volume)
        .join(container)
        .join(index.to_string())
}

/// `subPathExpr` expanded with the container's environment (upstream's
/// `ExpandContainerVolumeMounts`): a variable undefined or empty is an error naming it.
pub fn expand_sub_path_expr<'a>(
    expr: &str,
    lookup: impl Fn(&str) -> Option<&'a str>,
) -> Result<String, SubPathError> {
    let missing = std::cell::RefCell::new(BTreeSet::new());
    let expanded = expand_with(expr, |name| match lookup(name) {
        Some(value) if !value.is_empty() => Some(value),
        _ => {
            missing.borrow_mut().insert(name.to_owned());
            Some("")
        }
    });
    let missing = missing.into_inner();
    if missing.is_empty() {
        Ok(expanded)
    } else {
        Err(SubPathError::MissingValue(missing.into_iter().collect()))
    }
}

/// The mount's subpath (the expression expanded), checked as upstream checks it before
/// any I/O: relative, no `..` element. `None`: the mount has none.
pub fn checked_sub_path<'a>(
    mount: &str,
    sub_path: &str,
    sub_path_expr: &str,
    lookup: impl Fn(&str) -> Option<&'a str>,
) -> Result<Option<String>, SubPathError> {
    if !sub_path.is_empty() && !sub_path_expr.is_empty() {
        return Err(SubPathError::Both {
            mount: mount.to_owned(),
        });
    }
    let sub = if sub_path_expr.is_empty() {
        sub_path.to_owned()
    } else {
        expand_sub_path_expr(sub_path_expr, lookup)?
    };
    if sub.is_empty() {
        return Ok(None);
    }
    if sub.starts_with('/') {
        return Err(SubPathError::Absolute(sub));
    }
    if sub.split('/').any(|part| part == "..") {
        return Err(SubPathError::Backsteps(sub));
    }
    Ok(Some(sub))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env() -> BTreeMap<&'static str, &'static str> {
        BTreeMap::from([("POD", "web-1"), ("EMPTY", ""), ("UP", "..")])
    }

    fn check(sub: &str, expr: &str) -> Result<Option<String>, SubPathError> {
        let env = env();
        checked_sub_path("data", sub, expr, |n| env.get(n).copied())
    }

    #[test]
    fn a_sub_path_is_relative_without_backsteps() {
        assert_eq!(check("", ""), Ok(None));
        assert_eq!(check("a/b", ""), Ok(Some("a/b".into())));
        // ".." inside a name is a name (upstream splits on "/").
        assert_eq!(check("a..b/c", ""), Ok(Some("a..b/c".into())));
        assert_eq!(
            check("/etc", "").map_err(|e| e.to_string()),
            Err("error SubPath `/etc` must not be an absolute path".into())
        );
        assert_eq!(
            check("a/../../etc", "").map_err(|e| e.to_string()),
            Err("unable to provision SubPath `a/../../etc`: must not contain '..'".into())
        );
    }

    #[test]
    fn a_sub_path_expr_is_expanded_then_checked_like_a_sub_path() {
        assert_eq!(check("", "logs/$(POD)"), Ok(Some("logs/web-1".into())));
        assert_eq!(check("", "$$(POD)"), Ok(Some("$(POD)".into())));
        // Expanding to a backstep or an absolute path is refused as if written.
        assert_eq!(
            check("", "$(UP)/$(UP)/etc"),
            Err(SubPathError::Backsteps("../../etc".into()))
        );
        assert_eq!(
            check("", "/$(POD)"),
            Err(SubPathError::Absolute("/web-1".into()))
        );
        // Undefined and empty variables are named, sorted, as upstream's.
        assert_eq!(
            check("", "$(NOPE)/$(EMPTY)/$(POD)").map_err(|e| e.to_string()),
            Err("missing value for EMPTY, NOPE".into())
        );
        assert_eq!(
            check("x", "y"),
            Err(SubPathError::Both {
                mount: "data".into()
            })
        );
    }

    #[test]
    fn the_bind_target_is_upstreams_folder() {
        assert_eq!(
            bind_target(Path::new("/var/lib/kubelet/pods/u1"), "data", "app", 2),
            PathBuf::from("/var/lib/kubelet/pods/u1/volume-subpaths/data/app/2")
        );
    }
}
