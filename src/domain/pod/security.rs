//! The security settings of the pod model: `spec.securityContext` (a
//! [`PodSecurityContext`]) and each container's `securityContext` (a
//! [`SecurityContext`]), as the v1 API spells them. What they mean for the runtime is
//! decided in `domain::securitycontext`.

use serde::{Deserialize, Serialize};

use super::validate::{invalid, quoted, required};
use super::{Pod, PodError};

/// `spec.securityContext`: settings for every container of the pod (a container's own
/// [`SecurityContext`] overrides the ones both have) and the pod-only ones (groups,
/// sysctls, fsGroup).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSecurityContext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub se_linux_options: Option<SeLinuxOptions>,
    /// Windows only; decoded and validated, ignored on Linux as upstream does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows_options: Option<WindowsSecurityContextOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub supplemental_groups: Vec<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_group: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sysctls: Vec<Sysctl>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_group_change_policy: Option<FsGroupChangePolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp_profile: Option<SeccompProfile>,
    /// Kubernetes 1.30's field; upstream v1.26 knows only the annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_armor_profile: Option<AppArmorProfile>,
}

/// A container's `securityContext`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecurityContext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub se_linux_options: Option<SeLinuxOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows_options: Option<WindowsSecurityContextOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_non_root: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_root_filesystem: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_privilege_escalation: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proc_mount: Option<ProcMountType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp_profile: Option<SeccompProfile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_armor_profile: Option<AppArmorProfile>,
}

/// Capabilities added to and dropped from the runtime's default set, by name
/// (`NET_RAW`, or `CAP_NET_RAW` as some manifests write them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Capabilities {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SeLinuxOptions {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub role: String,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub level: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WindowsSecurityContextOptions {
    #[serde(
        rename = "gmsaCredentialSpecName",
        skip_serializing_if = "Option::is_none"
    )]
    pub gmsa_credential_spec_name: Option<String>,
    #[serde(rename = "gmsaCredentialSpec", skip_serializing_if = "Option::is_none")]
    pub gmsa_credential_spec: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_user_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_process: Option<bool>,
}

/// One namespaced kernel parameter for the pod (`net.ipv4.ip_local_port_range`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sysctl {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsGroupChangePolicy {
    /// Change ownership and permissions only when the volume's root does not match.
    OnRootMismatch,
    /// Always walk the whole volume (the default).
    Always,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProcMountType {
    /// The runtime's default masked and read-only paths.
    Default,
    /// No masked and no read-only paths.
    Unmasked,
}

/// The kind of a seccomp or AppArmor profile (the API's `SeccompProfileType` and
/// `AppArmorProfileType` have the same three values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProfileType {
    RuntimeDefault,
    Unconfined,
    Localhost,
}

impl ProfileType {
    pub const ALL: [&'static str; 3] = ["Localhost", "RuntimeDefault", "Unconfined"];
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SeccompProfile {
    /// `None` only for a manifest that left it out, which validation refuses.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ProfileType>,
    /// A path below `<root-dir>/seccomp`; only with `Localhost`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub localhost_profile: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AppArmorProfile {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ProfileType>,
    /// The name of a profile loaded on the node; only with `Localhost`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub localhost_profile: Option<String>,
}

/// The annotation naming a container's AppArmor profile (`runtime/default`,
/// `localhost/<name>` or `unconfined`), the only AppArmor setting upstream v1.26 knows.
pub const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
/// The profile values of the AppArmor annotation.
pub const APPARMOR_RUNTIME_DEFAULT: &str = "runtime/default";
pub const APPARMOR_UNCONFINED: &str = "unconfined";
pub const APPARMOR_LOCALHOST_PREFIX: &str = "localhost/";

/// Upstream's `IsValidUserID`/`IsValidGroupID` message.
const ID_RANGE: &str = "must be between 0 and 2147483647, inclusive";
const SYSCTL_MAX_LEN: usize = 253;
const SYSCTL_NAME_ERR: &str = "must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";

fn id_errors(field: String, id: Option<i64>, errors: &mut Vec<PodError>) {
    if let Some(id) = id.filter(|id| !(0..=i64::from(i32::MAX)).contains(id)) {
        errors.push(invalid(field, id.to_string(), ID_RANGE));
    }
}

/// Upstream's `IsValidSysctlName`: dot- or slash-separated segments of
/// `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`, at most 253 characters.
pub fn is_valid_sysctl_name(name: &str) -> bool {
    let segment_ok = |s: &str| {
        let b = s.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                edge(first) && edge(last) && b.iter().all(|c| edge(c) || *c == b'-' || *c == b'_')
            }
            _ => false,
        }
    };
    name.len() <= SYSCTL_MAX_LEN && name.split(['.', '/']).all(segment_ok)
}

fn validate_profile(
    path: &str,
    kind: Option<ProfileType>,
    localhost_profile: Option<&str>,
    what: &str,
    errors: &mut Vec<PodError>,
) {
    let Some(kind) = kind else {
        errors.push(required(
            format!("{path}.type"),
            &format!("type is required when {what}Profile is set"),
        ));
        return;
    };
    match (kind, localhost_profile) {
        (ProfileType::Localhost, None) => errors.push(required(
            format!("{path}.localhostProfile"),
            &format!("must be set when {what} type is Localhost"),
        )),
        (ProfileType::Localhost, Some(profile)) if what == "seccomp" => {
            // validateLocalDescendingPath: relative, without `..`.
            if profile.starts_with('/') {
                errors.push(invalid(
                    format!("{path}.localhostProfile"),
                    quoted(profile),
                    "must be a relative path",
                ));
            } else if profile.split('/').any(|part| part == "..") {
                errors.push(invalid(
                    format!("{path}.localhostProfile"),
                    quoted(profile),
                    "must not contain '..'",
                ));
            }
        }
        (ProfileType::Localhost, Some(_)) => {}
        (_, Some(profile)) => errors.push(invalid(
            format!("{path}.localhostProfile"),
            quoted(profile),
            format!("can only be set when {what} type is Localhost"),
        )),
        (_, None) => {}
    }
}

fn validate_profiles(
    path: &str,
    seccomp: Option<&SeccompProfile>,
    apparmor: Option<&AppArmorProfile>,
    errors: &mut Vec<PodError>,
) {
    if let Some(p) = seccomp {
        let at = format!("{path}.seccompProfile");
        validate_profile(
            &at,
            p.kind,
            p.localhost_profile.as_deref(),
            "seccomp",
            errors,
        );
    }
    if let Some(p) = apparmor {
        let at = format!("{path}.appArmorProfile");
        validate_profile(
            &at,
            p.kind,
            p.localhost_profile.as_deref(),
            "AppArmor",
            errors,
        );
    }
}

/// Upstream's checks of `spec.securityContext`, each container's `securityContext`
/// and the AppArmor annotations (`ValidatePodSecurityContext`,
/// `ValidateSecurityContext`, `ValidateAppArmorPodAnnotations`), in its words.
pub(super) fn validate_security(pod: &Pod, errors: &mut Vec<PodError>) {
    let spec = &pod.spec;
    if let Some(sc) = &spec.security_context {
        let path = "spec.securityContext";
        id_errors(format!("{path}.fsGroup"), sc.fs_group, errors);
        id_errors(format!("{path}.runAsUser"), sc.run_as_user, errors);
        id_errors(format!("{path}.runAsGroup"), sc.run_as_group, errors);
        for (i, gid) in sc.supplemental_groups.iter().enumerate() {
            id_errors(
                format!("{path}.supplementalGroups[{i}]"),
                Some(*gid),
                errors,
            );
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, s) in sc.sysctls.iter().enumerate() {
            let field = format!("{path}.sysctls[{i}].name");
            if s.name.is_empty() {
                errors.push(required(field, ""));
            } else if !is_valid_sysctl_name(&s.name) {
                errors.push(invalid(field, quoted(&s.name), SYSCTL_NAME_ERR));
            } else if !names.insert(s.name.as_str()) {
                errors.push(PodError::Duplicate {
                    field,
                    value: quoted(&s.name),
                });
            }
        }
        validate_profiles(
            path,
            sc.seccomp_profile.as_ref(),
            sc.app_armor_profile.as_ref(),
            errors,
        );
    }
    if spec.share_process_namespace == Some(true) && spec.host_pid {
        errors.push(invalid(
            "spec.securityContext.shareProcessNamespace".into(),
            "true".into(),
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    let lists = [
        ("initContainers", &spec.init_containers),
        ("containers", &spec.containers),
    ];
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            let Some(sc) = &c.security_context else {
                continue;
            };
            let path = format!("spec.{list}[{i}].securityContext");
            id_errors(format!("{path}.runAsUser"), sc.run_as_user, errors);
            id_errors(format!("{path}.runAsGroup"), sc.run_as_group, errors);
            validate_profiles(
                &path,
                sc.seccomp_profile.as_ref(),
                sc.app_armor_profile.as_ref(),
                errors,
            );
            if sc.allow_privilege_escalation == Some(false) {
                let rendered = serde_json::to_string(sc).unwrap_or_default();
                if sc.privileged == Some(true) {
                    errors.push(invalid(
                        path.clone(),
                        rendered.clone(),
                        "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
                    ));
                }
                let adds = sc.capabilities.iter().flat_map(|c| &c.add);
                for _ in adds.filter(|c| *c == "CAP_SYS_ADMIN") {
                    errors.push(invalid(
                        path.clone(),
                        rendered.clone(),
                        "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
                    ));
                }
            }
        }
    }
    for (key, profile) in &pod.metadata.annotations {
        let Some(container) = key.strip_prefix(APPARMOR_ANNOTATION_PREFIX) else {
            continue;
        };
        let field = format!("metadata.annotations[{key}]");
        if !spec.all_containers().any(|c| c.name == container) {
            errors.push(invalid(
                field.clone(),
                quoted(container),
                "container not found",
            ));
        }
        if let Err(message) = apparmor_annotation_format(profile) {
            errors.push(invalid(field, quoted(profile), message));
        }
    }
}

/// Upstream's `ValidateAppArmorProfileFormat`.
pub fn apparmor_annotation_format(profile: &str) -> Result<(), String> {
    if profile.is_empty()
        || profile == APPARMOR_RUNTIME_DEFAULT
        || profile == APPARMOR_UNCONFINED
        || profile.starts_with(APPARMOR_LOCALHOST_PREFIX)
    {
        Ok(())
    } else {
        Err(format!("invalid AppArmor profile name: {profile:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::{pod_from_value, validate_pod};

    fn decode(yaml: &str) -> Result<Pod, Vec<PodError>> {
        let value: serde_json::Value = serde_saphyr::from_str(yaml).expect("yaml");
        pod_from_value(&value)
    }

    fn messages(yaml: &str) -> Vec<String> {
        match decode(yaml) {
            Ok(pod) => validate_pod(&pod).iter().map(ToString::to_string).collect(),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn every_security_field_decodes() {
        let pod = decode(
            r#"
metadata: {name: p}
spec:
  hostPID: true
  hostIPC: true
  shareProcessNamespace: false
  overhead: {cpu: 250m}
  securityContext:
    runAsUser: 1000
    runAsGroup: 3000
    runAsNonRoot: true
    supplementalGroups: [4000]
    fsGroup: 2000
    fsGroupChangePolicy: OnRootMismatch
    sysctls: [{name: net.ipv4.ping_group_range, value: "0 2000"}]
    seccompProfile: {type: RuntimeDefault}
    appArmorProfile: {type: Unconfined}
    seLinuxOptions: {user: u, role: r, type: t, level: l}
    windowsOptions: {runAsUserName: ContainerUser, hostProcess: false}
  containers:
  - name: c
    image: busybox
    securityContext:
      capabilities: {add: [NET_ADMIN], drop: [NET_RAW]}
      privileged: false
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      procMount: Unmasked
      seccompProfile: {type: Localhost, localhostProfile: profiles/audit.json}
      appArmorProfile: {type: Localhost, localhostProfile: k8s-nginx}
"#,
        )
        .expect("decodes");
        let spec = &pod.spec;
        assert!(spec.host_pid && spec.host_ipc);
        assert_eq!(spec.share_process_namespace, Some(false));
        let sc = spec.security_context.clone().unwrap_or_default();
        assert_eq!((sc.run_as_user, sc.run_as_group), (Some(1000), Some(3000)));
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(
            (sc.fs_group, sc.supplemental_groups),
            (Some(2000), vec![4000])
        );
        assert_eq!(
            sc.fs_group_change_policy,
            Some(FsGroupChangePolicy::OnRootMismatch)
        );
        assert_eq!(sc.sysctls[0].value, "0 2000");
        assert_eq!(
            sc.seccomp_profile.and_then(|p| p.kind),
            Some(ProfileType::RuntimeDefault)
        );
        assert_eq!(sc.se_linux_options.map(|o| o.kind), Some("t".into()));
        assert_eq!(
            sc.windows_options.and_then(|w| w.run_as_user_name),
            Some("ContainerUser".into())
        );
        let c = spec.containers[0]
            .security_context
            .clone()
            .unwrap_or_default();
        assert_eq!(c.capabilities.map(|c| c.drop), Some(vec!["NET_RAW".into()]));
        assert_eq!(c.read_only_root_filesystem, Some(true));
        assert_eq!(c.allow_privilege_escalation, Some(false));
        assert_eq!(c.proc_mount, Some(ProcMountType::Unmasked));
        assert_eq!(
            c.seccomp_profile.and_then(|p| p.localhost_profile),
            Some("profiles/audit.json".into())
        );
        assert!(validate_pod(&pod).is_empty(), "{:?}", validate_pod(&pod));
    }

    #[test]
    fn bad_security_fields_are_refused_in_upstreams_words() {
        let got = messages(
            r#"
metadata: {name: p}
spec:
  hostPID: true
  shareProcessNamespace: true
  securityContext:
    runAsUser: -1
    fsGroup: 2147483648
    fsGroupChangePolicy: Sometimes
    sysctls: [{name: "Net.IPv4", value: "1"}]
  containers:
  - name: c
    image: busybox
    securityContext:
      procMount: Hidden
      seccompProfile: {type: Default}
"#,
        );
        assert_eq!(
            got,
            vec![
                "spec.securityContext.fsGroupChangePolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnRootMismatch\"",
                "spec.containers[0].securityContext.procMount: Unsupported value: \"Hidden\": supported values: \"Default\", \"Unmasked\"",
                "spec.containers[0].securityContext.seccompProfile.type: Unsupported value: \"Default\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\"",
            ]
        );
        let got = messages(
            r#"
metadata:
  name: p
  annotations:
    container.apparmor.security.beta.kubernetes.io/ghost: runtime/default
    container.apparmor.security.beta.kubernetes.io/c: enforce
spec:
  hostPID: true
  shareProcessNamespace: true
  securityContext:
    runAsUser: -1
    fsGroup: 2147483648
    supplementalGroups: [1, -2]
    sysctls: [{name: "Net.IPv4", value: "1"}, {name: kernel.sem, value: "1"}, {name: kernel.sem, value: "2"}]
    seccompProfile: {type: Localhost}
  containers:
  - name: c
    image: busybox
    securityContext:
      runAsGroup: -5
      privileged: true
      allowPrivilegeEscalation: false
      seccompProfile: {type: RuntimeDefault, localhostProfile: x}
      appArmorProfile: {type: Localhost}
  - name: d
    image: busybox
    securityContext:
      seccompProfile: {type: Localhost, localhostProfile: ../etc/x}
"#,
        );
        let want = [
            "spec.securityContext.fsGroup: Invalid value: 2147483648: must be between 0 and 2147483647, inclusive",
            "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
            "spec.securityContext.supplementalGroups[1]: Invalid value: -2: must be between 0 and 2147483647, inclusive",
            "spec.securityContext.sysctls[0].name: Invalid value: \"Net.IPv4\": must have at most 253 characters and match regex",
            "spec.securityContext.sysctls[2].name: Duplicate value: \"kernel.sem\"",
            "spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost",
            "spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
            "spec.containers[0].securityContext.runAsGroup: Invalid value: -5: must be between 0 and 2147483647, inclusive",
            "spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: \"x\": can only be set when seccomp type is Localhost",
            "spec.containers[0].securityContext.appArmorProfile.localhostProfile: Required value: must be set when AppArmor type is Localhost",
            "spec.containers[0].securityContext: Invalid value: ",
            "spec.containers[1].securityContext.seccompProfile.localhostProfile: Invalid value: \"../etc/x\": must not contain '..'",
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: Invalid value: \"enforce\": invalid AppArmor profile name: \"enforce\"",
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/ghost]: Invalid value: \"ghost\": container not found",
        ];
        for w in want {
            assert!(
                got.iter().any(|g| g.starts_with(w)),
                "missing {w:?} in {got:#?}"
            );
        }
        assert!(got.iter().any(|g| g
            .ends_with("cannot set `allowPrivilegeEscalation` to false and `privileged` to true")));
        assert_eq!(got.len(), want.len(), "{got:#?}");
    }

    #[test]
    fn sysctl_names() {
        for (name, ok) in [
            ("kernel.shm_rmid_forced", true),
            ("net.ipv4.conf.eno2/100.rp_filter", true),
            ("net/ipv4/ip_forward", true),
            ("a", true),
            ("Net.ipv4", false),
            ("net..ipv4", false),
            ("net.ipv4.", false),
            ("_net", false),
            ("", false),
        ] {
            assert_eq!(is_valid_sysctl_name(name), ok, "{name:?}");
        }
        assert!(!is_valid_sysctl_name(&"a".repeat(254)));
    }
}
