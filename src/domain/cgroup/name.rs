//! Driver-neutral cgroup names and their two spellings: cgroupfs paths
//! (`/kubepods/burstable/pod<uid>`) and systemd slices
//! (`kubepods-burstable-pod<uid>.slice`, expanded to its full path).
//!
//! Same rules as upstream's `CgroupName`: a name is a list of components, none may
//! hold `/` or `_` (`_` is how systemd names escape `-`), and the root is the empty
//! list.

use std::fmt;

/// Which cgroup driver spells and manages the kubelet's cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CgroupDriver {
    Cgroupfs,
    Systemd,
}

impl CgroupDriver {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cgroupfs => "cgroupfs",
            Self::Systemd => "systemd",
        }
    }

    /// The `cgroupDriver` value, as upstream accepts it.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "cgroupfs" => Some(Self::Cgroupfs),
            "systemd" => Some(Self::Systemd),
            _ => None,
        }
    }
}

/// How the configured cgroup driver stands against the runtime's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverAgreement {
    /// The runtime uses the same driver.
    Same,
    /// The runtime does not say (containerd 1.6 lacks `RuntimeConfig`).
    NotReported,
    /// The runtime could not be asked.
    Unknown,
    /// None was configured and the runtime uses this one: the kubelet takes it (upstream's
    /// `KubeletCgroupDriverFromCRI`, from v1.28).
    FromRuntime(CgroupDriver),
}

/// The runtime uses another driver: every pod would fail, so start-up refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("misconfiguration: kubelet cgroup driver: {configured:?} is different from the container runtime's cgroup driver: {reported:?}; set --cgroup-driver (cgroupDriver) to {reported:?} or change the runtime's")]
pub struct DriverMismatch {
    pub configured: &'static str,
    pub reported: &'static str,
}

impl CgroupDriver {
    /// `reported`: the runtime's answer, `Some(None)` when it does not report a driver,
    /// `None` when it could not be asked; `configured`: whether a flag or a file set
    /// `self` (else it is the default, which the runtime's overrides).
    pub fn agreement(
        self,
        configured: bool,
        reported: Option<Option<CgroupDriver>>,
    ) -> Result<DriverAgreement, DriverMismatch> {
        match reported {
            None => Ok(DriverAgreement::Unknown),
            Some(None) => Ok(DriverAgreement::NotReported),
            Some(Some(r)) if r == self => Ok(DriverAgreement::Same),
            Some(Some(r)) if !configured => Ok(DriverAgreement::FromRuntime(r)),
            Some(Some(r)) => Err(DriverMismatch {
                configured: self.as_str(),
                reported: r.as_str(),
            }),
        }
    }
}

impl fmt::Display for CgroupDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CgroupNameError {
    #[error(
        "invalid cgroup name component {component:?}: it must not be empty or contain '/' or '_'"
    )]
    InvalidComponent { component: String },
    #[error("invalid slice name: {0}")]
    InvalidSlice(String),
}

/// A cgroup, as the list of its components below the hierarchy's root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CgroupName(Vec<String>);

impl CgroupName {
    /// The root of the hierarchy.
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// `base` with `components` appended; each is checked.
    pub fn new<S: AsRef<str>>(
        base: &CgroupName,
        components: &[S],
    ) -> Result<Self, CgroupNameError> {
        let mut parts = base.0.clone();
        for c in components {
            let c = c.as_ref();
            if c.is_empty() || c.contains('/') || c.contains('_') {
                return Err(CgroupNameError::InvalidComponent {
                    component: c.to_owned(),
                });
            }
            parts.push(c.to_owned());
        }
        Ok(Self(parts))
    }

    /// Appends one checked component in place; on error the name is unchanged.
    /// (Pod names are built for every pod on every pass; `new` would copy.)
    pub fn push(&mut self, component: String) -> Result<(), CgroupNameError> {
        if component.is_empty() || component.contains(['/', '_']) {
            return Err(CgroupNameError::InvalidComponent { component });
        }
        self.0.push(component);
        Ok(())
    }

    pub fn components(&self) -> &[String] {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The parent cgroup; the root's parent is the root.
    pub fn parent(&self) -> CgroupName {
        let mut parts = self.0.clone();
        parts.pop();
        Self(parts)
    }

    /// The cgroupfs path: `/kubepods/burstable`; the root is `/`.
    pub fn to_cgroupfs(&self) -> String {
        format!("/{}", self.0.join("/"))
    }

    /// Parses a cgroupfs path (`/a/b`) back; `/` and the empty string are the root.
    pub fn from_cgroupfs(path: &str) -> CgroupName {
        Self(
            path.split('/')
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }

    /// The systemd leaf unit name (`kubepods-burstable.slice`), with each
    /// component's `-` escaped as `_`; the root is `-.slice`.
    pub fn to_systemd_unit(&self) -> String {
        if self.0.is_empty() {
            return "-.slice".to_owned();
        }
        let escaped: Vec<String> = self.0.iter().map(|c| c.replace('-', "_")).collect();
        format!("{}.slice", escaped.join("-"))
    }

    /// The systemd form as a cgroup path: the leaf unit expanded
    /// (`/kubepods.slice/kubepods-burstable.slice`); the root is `/`.
    pub fn to_systemd(&self) -> String {
        if self.0.is_empty() {
            return "/".to_owned();
        }
        // Components never hold '/' or '_' and are never empty, so the unit always expands.
        expand_slice(&self.to_systemd_unit()).unwrap_or_else(|_| "/".to_owned())
    }

    /// Parses a systemd unit or its expanded path back to a name (upstream
    /// `ParseSystemdToCgroupName`: the last path element, `_` back to `-`).
    pub fn from_systemd(name: &str) -> CgroupName {
        let leaf = name.rsplit('/').next().unwrap_or_default();
        let leaf = leaf.strip_suffix(".slice").unwrap_or(leaf);
        if leaf.is_empty() || leaf == "-" {
            return Self::root();
        }
        Self(leaf.split('-').map(|c| c.replace('_', "-")).collect())
    }

    /// The driver's spelling of this name.
    pub fn to_driver(&self, driver: CgroupDriver) -> String {
        match driver {
            CgroupDriver::Cgroupfs => self.to_cgroupfs(),
            CgroupDriver::Systemd => self.to_systemd(),
        }
    }
}

impl fmt::Display for CgroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_cgroupfs())
    }
}

/// Expands a slice unit name into its cgroup path, as systemd nests slices:
/// `a-b-c.slice` → `/a.slice/a-b.slice/a-b-c.slice`; `-.slice` → `/` (runc's
/// `ExpandSlice`, with its errors).
pub fn expand_slice(slice: &str) -> Result<String, CgroupNameError> {
    let invalid = || CgroupNameError::InvalidSlice(slice.to_owned());
    let name = slice.strip_suffix(".slice").ok_or_else(invalid)?;
    if slice.contains('/') {
        return Err(invalid());
    }
    if name == "-" {
        return Ok("/".to_owned());
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for component in name.split('-') {
        if component.is_empty() {
            return Err(invalid());
        }
        path.push('/');
        path.push_str(&prefix);
        path.push_str(component);
        path.push_str(".slice");
        prefix.push_str(component);
        prefix.push('-');
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's check of the runtime's driver (`RuntimeConfig`), and from v1.28 its
    /// use when none is configured.
    #[test]
    fn the_runtimes_cgroup_driver_is_taken_unless_another_is_configured() {
        use CgroupDriver::{Cgroupfs, Systemd};
        assert_eq!(
            Cgroupfs.agreement(true, Some(Some(Cgroupfs))),
            Ok(DriverAgreement::Same)
        );
        assert_eq!(
            Cgroupfs.agreement(false, Some(Some(Systemd))),
            Ok(DriverAgreement::FromRuntime(Systemd))
        );
        assert_eq!(
            Systemd.agreement(true, Some(Some(Cgroupfs))),
            Err(DriverMismatch {
                configured: "systemd",
                reported: "cgroupfs"
            })
        );
        assert_eq!(
            Systemd.agreement(true, Some(None)),
            Ok(DriverAgreement::NotReported)
        );
        assert_eq!(Systemd.agreement(false, None), Ok(DriverAgreement::Unknown));
    }

    fn name(parts: &[&str]) -> CgroupName {
        CgroupName::new(&CgroupName::root(), parts).unwrap_or_default()
    }

    #[test]
    fn components_with_slash_or_underscore_or_empty_are_refused() {
        for bad in ["a/b", "a_b", ""] {
            assert_eq!(
                CgroupName::new(&CgroupName::root(), &[bad]),
                Err(CgroupNameError::InvalidComponent {
                    component: bad.to_owned()
                })
            );
        }
    }

    #[test]
    fn push_checks_and_appends_in_place() {
        let mut n = name(&["kubepods"]);
        assert!(n.push("a_b".to_owned()).is_err());
        assert_eq!(n, name(&["kubepods"]));
        assert_eq!(n.push("pod1".to_owned()), Ok(()));
        assert_eq!(n, name(&["kubepods", "pod1"]));
    }

    #[test]
    fn cgroupfs_form_and_back() {
        let pod = name(&["kubepods", "burstable", "pod1234-5678"]);
        assert_eq!(pod.to_cgroupfs(), "/kubepods/burstable/pod1234-5678");
        assert_eq!(
            CgroupName::from_cgroupfs("/kubepods/burstable/pod1234-5678"),
            pod
        );
        assert_eq!(CgroupName::root().to_cgroupfs(), "/");
        assert_eq!(CgroupName::from_cgroupfs("/"), CgroupName::root());
    }

    #[test]
    fn systemd_form_escapes_dashes_and_expands() {
        let pod = name(&["kubepods", "burstable", "pod1234-5678"]);
        assert_eq!(
            pod.to_systemd_unit(),
            "kubepods-burstable-pod1234_5678.slice"
        );
        assert_eq!(
            pod.to_systemd(),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice"
        );
        assert_eq!(CgroupName::from_systemd(&pod.to_systemd()), pod);
        assert_eq!(
            CgroupName::from_systemd("kubepods-burstable-pod1234_5678.slice"),
            pod
        );
        assert_eq!(CgroupName::root().to_systemd(), "/");
        assert_eq!(CgroupName::from_systemd("/"), CgroupName::root());
    }

    #[test]
    fn slice_expansion_follows_runc() {
        assert_eq!(expand_slice("-.slice"), Ok("/".to_owned()));
        assert_eq!(expand_slice("a.slice"), Ok("/a.slice".to_owned()));
        assert_eq!(
            expand_slice("a-b-c.slice"),
            Ok("/a.slice/a-b.slice/a-b-c.slice".to_owned())
        );
        for bad in ["a", "a--b.slice", "-a.slice", "a/b.slice", "a-.slice"] {
            assert_eq!(
                expand_slice(bad),
                Err(CgroupNameError::InvalidSlice(bad.to_owned())),
                "{bad}"
            );
        }
    }

    #[test]
    fn parent_and_driver_forms() {
        let qos = name(&["kubepods", "besteffort"]);
        assert_eq!(qos.parent(), name(&["kubepods"]));
        assert_eq!(CgroupName::root().parent(), CgroupName::root());
        assert_eq!(
            qos.to_driver(CgroupDriver::Cgroupfs),
            "/kubepods/besteffort"
        );
        assert_eq!(
            qos.to_driver(CgroupDriver::Systemd),
            "/kubepods.slice/kubepods-besteffort.slice"
        );
        assert_eq!(CgroupDriver::parse("systemd"), Some(CgroupDriver::Systemd));
        assert_eq!(CgroupDriver::parse("cgroup"), None);
    }
}
