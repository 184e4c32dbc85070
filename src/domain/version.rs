//! Which version rkubelet says it is: the Kubernetes release whose kubelet it implements
//! (what `--version` prints, as upstream's, and the Node's `kubeletVersion`, which
//! kubeadm's preflight compares), and its own version and commit (`rkubelet version` and
//! the extra fields of `--version=raw`). One source for all of them.

/// The Kubernetes release whose kubelet behaviour rkubelet implements.
pub const KUBERNETES: KubernetesRelease = KubernetesRelease {
    major: "1",
    minor: "26",
    git_version: "v1.26.1",
    git_commit: "8f94681cd294aa8cfd3407b8191f6c70214973a4",
};

/// A Kubernetes release, as upstream's `version.Info` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubernetesRelease {
    pub major: &'static str,
    pub minor: &'static str,
    pub git_version: &'static str,
    /// The release's commit in the Kubernetes repository.
    pub git_commit: &'static str,
}

/// How this binary was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// rkubelet's own version (its crate's).
    pub version: &'static str,
    /// The commit of rkubelet it was built from, or `unknown`.
    pub commit: &'static str,
    /// The commit's date (RFC 3339, UTC), or `unknown`.
    pub date: &'static str,
    /// `linux/amd64`, as Go spells `GOOS/GOARCH`.
    pub platform: String,
}

/// Go's name for an architecture (`GOARCH`).
pub fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64",
        other => other,
    }
}

/// What `--version` prints: upstream's `Kubernetes v1.26.1`.
pub fn version_line() -> String {
    format!("Kubernetes {}", KUBERNETES.git_version)
}

/// What `--version=raw` prints: upstream's `version.Info` as Go's `%#v` writes it, the
/// release's fields first, then rkubelet's own (`Rkubelet...`). Go-only fields say what
/// built rkubelet instead (`Compiler:"rustc"`, no Go version).
pub fn raw(build: &Build) -> String {
    format!(
        "version.Info{{Major:{:?}, Minor:{:?}, GitVersion:{:?}, GitCommit:{:?}, GitTreeState:\"clean\", BuildDate:{:?}, GoVersion:\"\", Compiler:\"rustc\", Platform:{:?}, RkubeletVersion:{:?}, RkubeletCommit:{:?}}}",
        KUBERNETES.major,
        KUBERNETES.minor,
        KUBERNETES.git_version,
        KUBERNETES.git_commit,
        build.date,
        build.platform,
        build.version,
        build.commit,
    )
}

/// What `rkubelet version` prints: rkubelet's own version, its commit, and the release.
pub fn own_line(build: &Build) -> String {
    let short = build.commit.get(..12).unwrap_or(build.commit);
    format!(
        "rkubelet {} (commit {short}, built {}), the kubelet of Kubernetes {}",
        build.version, build.date, KUBERNETES.git_version
    )
}

/// What `--version` asks (upstream's `verflag`: a boolean, or `raw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionRequest {
    No,
    Line,
    Raw,
}

/// Reads `--version`'s value as upstream's `verflag` does.
///
/// # Errors
/// Upstream's message for a value that is neither a boolean nor `raw`.
pub fn parse_version_flag(value: &str) -> Result<VersionRequest, String> {
    match value {
        "raw" => Ok(VersionRequest::Raw),
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(VersionRequest::Line),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(VersionRequest::No),
        other => Err(format!(
            "invalid argument {other:?} for \"--version\" flag: strconv.ParseBool: parsing {other:?}: invalid syntax"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build() -> Build {
        Build {
            version: "0.1.0",
            commit: "0123456789abcdef0123456789abcdef01234567",
            date: "2026-11-28T14:45:46Z",
            platform: "linux/amd64".into(),
        }
    }

    /// The upstream kubelet v1.26.1's own output, for the same flags.
    #[test]
    fn the_version_is_upstreams_with_rkubelets_own_beside_it() {
        assert_eq!(version_line(), "Kubernetes v1.26.1");
        let raw = raw(&build());
        let upstream = "version.Info{Major:\"1\", Minor:\"26\", GitVersion:\"v1.26.1\", GitCommit:\"8f94681cd294aa8cfd3407b8191f6c70214973a4\", GitTreeState:\"clean\", BuildDate:";
        assert!(raw.starts_with(upstream), "{raw}");
        assert!(
            raw.ends_with(", Compiler:\"rustc\", Platform:\"linux/amd64\", RkubeletVersion:\"0.1.0\", RkubeletCommit:\"0123456789abcdef0123456789abcdef01234567\"}"),
            "{raw}"
        );
        assert_eq!(
            own_line(&build()),
            "rkubelet 0.1.0 (commit 0123456789ab, built 2026-11-28T14:45:46Z), the kubelet of Kubernetes v1.26.1"
        );
    }

    #[test]
    fn the_flag_takes_a_boolean_or_raw_as_upstreams() {
        assert_eq!(parse_version_flag("raw"), Ok(VersionRequest::Raw));
        assert_eq!(parse_version_flag("true"), Ok(VersionRequest::Line));
        assert_eq!(parse_version_flag("F"), Ok(VersionRequest::No));
        assert_eq!(
            parse_version_flag("bogus"),
            Err("invalid argument \"bogus\" for \"--version\" flag: strconv.ParseBool: parsing \"bogus\": invalid syntax".into())
        );
    }
}
