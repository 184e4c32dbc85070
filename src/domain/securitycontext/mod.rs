//! What a pod's and its containers' security settings mean for the runtime, as
//! upstream v1.26 decides it (`pkg/securitycontext`, `kuberuntime/security_context.go`,
//! `kuberuntime/util`, `generatePodSandboxLinuxConfig`, the sysctl and AppArmor admit
//! handlers): the container's effective security context (its own settings over the
//! pod's), the CRI security context of each container and of the sandbox, the check of
//! `runAsNonRoot` against the image's user, and whether the node may run the pod at all
//! (sysctls, AppArmor).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::domain::kuberuntime::requests::{
    Capability, ContainerSecurity, NamespaceMode, NamespaceOptions, SandboxSecurity, SeLinuxOption,
    SecurityProfile,
};
use crate::domain::kuberuntime::runtime::ImageUser;
use crate::domain::pod::security::{
    ProcMountType, ProfileType, SeLinuxOptions, SeccompProfile, APPARMOR_ANNOTATION_PREFIX,
    APPARMOR_LOCALHOST_PREFIX, APPARMOR_RUNTIME_DEFAULT, APPARMOR_UNCONFINED,
};
use crate::domain::pod::{format_pod, Container, Pod, SecurityContext};

#[cfg(test)]
mod tests;

/// Why a container's security context cannot be given to the runtime (the container
/// waits with `CreateContainerConfigError` and this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityContextError {
    /// A `Localhost` seccomp profile without a name: upstream's message since the fix of
    /// CVE-2023-2431 (before it, such a container ran `Unconfined`).
    #[error("localhostProfile must be set if seccompProfile type is Localhost.")]
    EmptyLocalhostSeccomp,
}

/// What a non-privileged container cannot see of the host's `/proc` and `/sys`
/// (upstream's list, kept in step with Docker's).
pub const DEFAULT_MASKED_PATHS: [&str; 9] = [
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
];

/// What a non-privileged container sees read-only.
pub const DEFAULT_READONLY_PATHS: [&str; 6] = [
    "/proc/asound",
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// Upstream v1.26's safe sysctls: namespaced, and without effect on other pods.
pub const SAFE_SYSCTLS: [&str; 5] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];

/// The seccomp profile path upstream v1.26 writes for every sandbox (the deprecated
/// field beside the `RuntimeDefault` profile).
pub const SECCOMP_RUNTIME_DEFAULT_PATH: &str = "runtime/default";

/// The node's security settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecuritySettings {
    /// `seccompDefault`: containers without a profile get `RuntimeDefault` rather than
    /// `Unconfined`.
    pub seccomp_default: bool,
    /// `<root-dir>/seccomp`: where `Localhost` seccomp profiles are.
    pub seccomp_profile_root: PathBuf,
    /// `allowedUnsafeSysctls`: names and `prefix*` patterns allowed beside the safe set.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// Whether the host enforces AppArmor profiles.
    pub apparmor_enabled: bool,
}

/// Why the node refuses to run a pod (upstream's admit handlers), in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Rejection {
    /// `SysctlForbidden` or `AppArmor`.
    pub reason: String,
    pub message: String,
}

/// The container's security context in force: the pod's `runAsUser`, `runAsGroup`,
/// `runAsNonRoot`, `seLinuxOptions`, `windowsOptions`, `seccompProfile` and
/// `appArmorProfile`, each replaced by the container's own when it sets it, and the
/// container-only fields (upstream's `DetermineEffectiveSecurityContext`).
pub fn effective_security_context(pod: &Pod, container: &Container) -> SecurityContext {
    let mut effective = match &pod.spec.security_context {
        Some(p) => SecurityContext {
            se_linux_options: p.se_linux_options.clone(),
            windows_options: p.windows_options.clone(),
            run_as_user: p.run_as_user,
            run_as_group: p.run_as_group,
            run_as_non_root: p.run_as_non_root,
            seccomp_profile: p.seccomp_profile.clone(),
            app_armor_profile: p.app_armor_profile.clone(),
            ..SecurityContext::default()
        },
        None => SecurityContext::default(),
    };
    let Some(c) = &container.security_context else {
        return effective;
    };
    macro_rules! over {
        ($($field:ident),*) => {$(
            if c.$field.is_some() {
                effective.$field = c.$field.clone();
            }
        )*};
    }
    over!(
        capabilities,
        privileged,
        se_linux_options,
        run_as_user,
        run_as_group,
        run_as_non_root,
        read_only_root_filesystem,
        allow_privilege_escalation,
        proc_mount,
        seccomp_profile,
        app_armor_profile
    );
    // Windows options merge field by field; they do nothing on Linux.
    if let Some(cw) = &c.windows_options {
        let w = effective
            .windows_options
            .get_or_insert_with(Default::default);
        if cw.gmsa_credential_spec_name.is_some() || cw.gmsa_credential_spec.is_some() {
            w.gmsa_credential_spec_name = cw.gmsa_credential_spec_name.clone();
            w.gmsa_credential_spec = cw.gmsa_credential_spec.clone();
        }
        if cw.run_as_user_name.is_some() {
            w.run_as_user_name = cw.run_as_user_name.clone();
        }
        if cw.host_process.is_some() {
            w.host_process = cw.host_process;
        }
    }
    effective
}

/// The pod's namespaces: the node's network and IPC with `hostNetwork` and `hostIPC`;
/// the node's PID namespace with `hostPID`, the pod's with `shareProcessNamespace`,
/// else each container its own; with `hostUsers: false`, the pod's own user namespace.
pub fn namespaces_for_pod(pod: &Pod) -> NamespaceOptions {
    let spec = &pod.spec;
    let shared = |host: bool| {
        if host {
            NamespaceMode::Node
        } else {
            NamespaceMode::Pod
        }
    };
    let pid = if spec.host_pid {
        NamespaceMode::Node
    } else if spec.share_process_namespace == Some(true) {
        NamespaceMode::Pod
    } else {
        NamespaceMode::Container
    };
    NamespaceOptions {
        network: shared(spec.host_network),
        pid,
        ipc: shared(spec.host_ipc),
        target_id: String::new(),
        // The mappings come from the node's allocator when the sandbox is made.
        user: crate::domain::kuberuntime::userns::requested_mode(pod).map(|mode| {
            crate::domain::kuberuntime::requests::UserNamespace {
                mode,
                ..Default::default()
            }
        }),
    }
}

fn selinux(options: &SeLinuxOptions) -> SeLinuxOption {
    SeLinuxOption {
        user: options.user.clone(),
        role: options.role.clone(),
        kind: options.kind.clone(),
        level: options.level.clone(),
    }
}

/// `fsGroup` first, then `supplementalGroups`, as upstream orders them.
fn pod_supplemental_groups(pod: &Pod) -> Vec<i64> {
    let Some(sc) = &pod.spec.security_context else {
        return Vec::new();
    };
    sc.fs_group
        .into_iter()
        .chain(sc.supplemental_groups.iter().copied())
        .collect()
}

/// Upstream's `fieldSeccompProfile`: `RuntimeDefault`, a `Localhost` file below the
/// profile root, else `Unconfined`; a `Localhost` without a name is refused
/// (CVE-2023-2431), never `Unconfined`.
fn seccomp_of(
    profile: &SeccompProfile,
    root: &std::path::Path,
) -> Result<SecurityProfile, SecurityContextError> {
    match (profile.kind, profile.localhost_profile.as_deref()) {
        (Some(ProfileType::RuntimeDefault), _) => Ok(SecurityProfile::RuntimeDefault),
        (Some(ProfileType::Localhost), Some(name)) if !name.is_empty() => Ok(
            SecurityProfile::Localhost(root.join(name).display().to_string()),
        ),
        (Some(ProfileType::Localhost), _) => Err(SecurityContextError::EmptyLocalhostSeccomp),
        _ => Ok(SecurityProfile::Unconfined),
    }
}

/// The container's seccomp profile: its own, else the pod's, else `RuntimeDefault`
/// with `seccompDefault` and `Unconfined` without (upstream v1.26's default).
///
/// # Errors
/// [`SecurityContextError::EmptyLocalhostSeccomp`] when the profile that applies is a
/// `Localhost` one without a name.
pub fn seccomp_profile(
    settings: &SecuritySettings,
    pod: &Pod,
    container: &Container,
) -> Result<SecurityProfile, SecurityContextError> {
    let own = container
        .security_context
        .as_ref()
        .and_then(|sc| sc.seccomp_profile.as_ref());
    let pods = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.seccomp_profile.as_ref());
    match own.or(pods) {
        Some(profile) => seccomp_of(profile, &settings.seccomp_profile_root),
        None if settings.seccomp_default => Ok(SecurityProfile::RuntimeDefault),
        None => Ok(SecurityProfile::Unconfined),
    }
}

/// The container's AppArmor profile: the `appArmorProfile` field (the container's, then
/// the pod's), else the container's annotation; `None` when nothing asks for one.
pub fn apparmor_profile(pod: &Pod, container: &Container) -> Option<SecurityProfile> {
    let field = effective_security_context(pod, container).app_armor_profile;
    if let Some(profile) = field {
        return Some(match (profile.kind, profile.localhost_profile) {
            (Some(ProfileType::RuntimeDefault), _) => SecurityProfile::RuntimeDefault,
            (Some(ProfileType::Localhost), Some(name)) => SecurityProfile::Localhost(name),
            _ => SecurityProfile::Unconfined,
        });
    }
    let annotation = pod
        .metadata
        .annotations
        .get(&format!("{APPARMOR_ANNOTATION_PREFIX}{}", container.name))?;
    match annotation.as_str() {
        "" => None,
        APPARMOR_RUNTIME_DEFAULT => Some(SecurityProfile::RuntimeDefault),
        APPARMOR_UNCONFINED => Some(SecurityProfile::Unconfined),
        other => Some(SecurityProfile::Localhost(
            other
                .strip_prefix(APPARMOR_LOCALHOST_PREFIX)
                .unwrap_or(other)
                .to_owned(),
        )),
    }
}

/// The container's CRI security context before the image is known (upstream's
/// `determineEffectiveSecurityContext`); [`apply_image_user`] completes it.
///
/// # Errors
/// What upstream refuses to give the runtime (see [`SecurityContextError`]).
pub fn container_security(
    settings: &SecuritySettings,
    pod: &Pod,
    container: &Container,
) -> Result<ContainerSecurity, SecurityContextError> {
    let effective = effective_security_context(pod, container);
    let unmasked = effective.proc_mount == Some(ProcMountType::Unmasked);
    let paths = |defaults: &[&str]| -> Vec<String> {
        if unmasked {
            Vec::new()
        } else {
            defaults.iter().map(|p| (*p).to_owned()).collect()
        }
    };
    Ok(ContainerSecurity {
        capabilities: effective.capabilities.as_ref().map(|c| Capability {
            add: c.add.clone(),
            drop: c.drop.clone(),
        }),
        privileged: effective.privileged == Some(true),
        namespace_options: namespaces_for_pod(pod),
        selinux_options: effective.se_linux_options.as_ref().map(selinux),
        run_as_user: effective.run_as_user,
        run_as_group: effective.run_as_group,
        run_as_username: String::new(),
        readonly_rootfs: effective.read_only_root_filesystem == Some(true),
        supplemental_groups: pod_supplemental_groups(pod),
        // Only an explicit `allowPrivilegeEscalation: false` sets no_new_privs.
        no_new_privs: effective.allow_privilege_escalation == Some(false),
        masked_paths: paths(&DEFAULT_MASKED_PATHS),
        readonly_paths: paths(&DEFAULT_READONLY_PATHS),
        seccomp: seccomp_profile(settings, pod, container)?,
        apparmor: apparmor_profile(pod, container),
    })
}

/// Without a `runAsUser`, the container runs as the image's user: its uid, or its
/// user name for the runtime to resolve (an image naming no user runs as uid 0).
pub fn apply_image_user(security: &mut ContainerSecurity, user: &ImageUser) {
    if security.run_as_user.is_none() {
        security.run_as_user = user.uid;
        security.run_as_username = user.username.clone();
    }
}

/// Upstream's `verifyRunAsNonRoot`: with `runAsNonRoot: true`, the container must not
/// run as uid 0, whether `runAsUser` or the image says so, and an image user given by
/// name cannot be checked. The error is upstream's message.
pub fn verify_run_as_non_root(
    pod: &Pod,
    container: &Container,
    user: &ImageUser,
) -> Result<(), String> {
    let effective = effective_security_context(pod, container);
    if effective.run_as_non_root != Some(true) {
        return Ok(());
    }
    let pod_name = format_pod(pod);
    let name = &container.name;
    if let Some(uid) = effective.run_as_user {
        if uid == 0 {
            return Err(format!(
                "container's runAsUser breaks non-root policy (pod: {pod_name:?}, container: {name})"
            ));
        }
        return Ok(());
    }
    match (user.uid, user.username.as_str()) {
        (Some(0), _) => Err(format!(
            "container has runAsNonRoot and image will run as root (pod: {pod_name:?}, container: {name})"
        )),
        (None, username) if !username.is_empty() => Err(format!(
            "container has runAsNonRoot and image has non-numeric user ({username}), cannot verify user is non-root (pod: {pod_name:?}, container: {name})"
        )),
        _ => Ok(()),
    }
}

/// True when a container of the pod (of any kind) asks to be privileged.
pub fn has_privileged_container(pod: &Pod) -> bool {
    pod.spec.all_containers().any(|c| {
        c.security_context
            .as_ref()
            .and_then(|sc| sc.privileged)
            .unwrap_or(false)
    })
}

/// The sandbox's security context as upstream v1.26 builds it: `RuntimeDefault`
/// seccomp (and its deprecated path), privileged when a container is, and the pod's
/// user, group, namespaces, groups (`fsGroup` first) and SELinux labels.
pub fn sandbox_security(pod: &Pod) -> SandboxSecurity {
    let sc = pod.spec.security_context.clone().unwrap_or_default();
    SandboxSecurity {
        namespace_options: namespaces_for_pod(pod),
        selinux_options: sc.se_linux_options.as_ref().map(selinux),
        run_as_user: sc.run_as_user,
        run_as_group: sc.run_as_group,
        supplemental_groups: pod_supplemental_groups(pod),
        privileged: has_privileged_container(pod),
        seccomp: SecurityProfile::RuntimeDefault,
        seccomp_profile_path: SECCOMP_RUNTIME_DEFAULT_PATH.to_owned(),
    }
}

/// The pod's sysctls for the sandbox, names with dots (runc wants dots; the API also
/// takes `/` as separator).
pub fn sandbox_sysctls(pod: &Pod) -> BTreeMap<String, String> {
    pod.spec
        .security_context
        .iter()
        .flat_map(|sc| &sc.sysctls)
        .map(|s| (sysctl_with_dots(&s.name), s.value.clone()))
        .collect()
}

/// `net/ipv4/ip_forward` → `net.ipv4.ip_forward`: when the first separator is a slash,
/// slashes and dots swap (a dot then was part of a name), as sysctl.d does.
pub fn sysctl_with_dots(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                other => other,
            })
            .collect(),
        _ => name.to_owned(),
    }
}

/// The kernel namespace a sysctl belongs to, if it is namespaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysctlNamespace {
    Ipc,
    Net,
}

impl SysctlNamespace {
    fn as_str(self) -> &'static str {
        match self {
            SysctlNamespace::Ipc => "ipc",
            SysctlNamespace::Net => "net",
        }
    }
}

/// Upstream's `NamespacedBy`: `kernel.sem`, `kernel.shm*`, `kernel.msg*`, `fs.mqueue.*`
/// are IPC; `net.*` network; anything else is not known to be namespaced.
pub fn sysctl_namespace(name: &str) -> Option<SysctlNamespace> {
    if name == "kernel.sem" {
        return Some(SysctlNamespace::Ipc);
    }
    for (prefix, ns) in [
        ("kernel.shm", SysctlNamespace::Ipc),
        ("kernel.msg", SysctlNamespace::Ipc),
        ("fs.mqueue.", SysctlNamespace::Ipc),
        ("net.", SysctlNamespace::Net),
    ] {
        if name.starts_with(prefix) {
            return Some(ns);
        }
    }
    None
}

/// Upstream's `IsValidSysctlPattern`: a sysctl name whose last segment may end in `*`.
fn is_valid_sysctl_pattern(pattern: &str) -> bool {
    let (rest, last) = match pattern.rsplit_once(['.', '/']) {
        Some((rest, last)) => (Some(rest), last),
        None => (None, pattern),
    };
    let head_ok = rest.is_none_or(crate::domain::pod::security::is_valid_sysctl_name);
    let body = |s: &str| {
        s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
    };
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let last_ok = match last.as_bytes() {
        [] => false,
        [.., end] if !(alnum(*end) || *end == b'*') => false,
        [only] => alnum(*only) || *only == b'*',
        [first, .., _] => alnum(*first) && body(&last[..last.len() - 1]),
    };
    pattern.len() <= 253 && head_ok && last_ok
}

/// Why a pattern of `allowedUnsafeSysctls` is unusable (upstream's `NewAllowlist`
/// errors, which stop its start-up); `None` when it is usable.
pub fn allowlist_pattern_error(pattern: &str) -> Option<String> {
    if !is_valid_sysctl_pattern(pattern) {
        return Some(format!(
            "sysctl {pattern:?} must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]"
        ));
    }
    let dotted = sysctl_with_dots(pattern);
    match dotted.strip_suffix('*') {
        Some(prefix) if sysctl_namespace(prefix).is_none() => Some(format!(
            "the sysctls {dotted:?} are not known to be namespaced"
        )),
        None if sysctl_namespace(&dotted).is_none() => Some(format!(
            "the sysctl {dotted:?} are not known to be namespaced"
        )),
        _ => None,
    }
}

/// Upstream's sysctl admission: each sysctl must be safe or allowed by
/// `allowedUnsafeSysctls`, and not be in a namespace the pod shares with the host.
fn check_sysctl(
    name: &str,
    allowed: &[String],
    host_network: bool,
    host_ipc: bool,
) -> Result<(), String> {
    let name = sysctl_with_dots(name);
    let host_conflict = |ns: Option<SysctlNamespace>| match ns {
        Some(SysctlNamespace::Ipc) if host_ipc => Some(SysctlNamespace::Ipc),
        Some(SysctlNamespace::Net) if host_network => Some(SysctlNamespace::Net),
        _ => None,
    };
    let allowlist = SAFE_SYSCTLS
        .iter()
        .map(|s| (*s).to_owned())
        .chain(allowed.iter().map(|p| sysctl_with_dots(p)));
    let mut matched = false;
    for pattern in allowlist {
        let hit = match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pattern,
        };
        if hit {
            matched = true;
            let ns = sysctl_namespace(pattern.trim_end_matches('*'));
            if let Some(ns) = host_conflict(ns) {
                return Err(format!(
                    "{name:?} not allowed with host {} enabled",
                    ns.as_str()
                ));
            }
            break;
        }
    }
    if matched {
        Ok(())
    } else {
        Err(format!("{name:?} not allowlisted"))
    }
}

/// Whether this node may run the pod (upstream's sysctl and AppArmor admit handlers).
pub fn admit(pod: &Pod, settings: &SecuritySettings) -> Result<(), Rejection> {
    if let Some(sc) = &pod.spec.security_context {
        for s in &sc.sysctls {
            check_sysctl(
                &s.name,
                &settings.allowed_unsafe_sysctls,
                pod.spec.host_network,
                pod.spec.host_ipc,
            )
            .map_err(|e| Rejection {
                reason: "SysctlForbidden".into(),
                message: format!("forbidden sysctl: {e}"),
            })?;
        }
    }
    let wants_apparmor = pod
        .spec
        .all_containers()
        .any(|c| apparmor_profile(pod, c).is_some_and(|p| p != SecurityProfile::Unconfined));
    if wants_apparmor && !settings.apparmor_enabled {
        return Err(Rejection {
            reason: "AppArmor".into(),
            message: "Cannot enforce AppArmor: AppArmor is not enabled on the host".into(),
        });
    }
    Ok(())
}

/// The mode of a new emptyDir folder: everyone may write, as upstream's emptyDir makes it,
/// so a container running as any user can use it.
pub const EMPTY_DIR_MODE: u32 = 0o777;

/// How a volume folder is set up before the pod's containers: its mode, and the group
/// that owns it and everything in it (`fsGroup`), with `fsGroupChangePolicy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSetup {
    pub path: PathBuf,
    pub mode: u32,
    /// `None`: ownership is left alone.
    pub fs_group: Option<i64>,
    /// `OnRootMismatch`: skip the walk when the folder's root already matches.
    pub on_root_mismatch: bool,
    pub readonly: bool,
}

impl VolumeSetup {
    /// The pod's `fsGroup` walk over an existing folder (a local or CSI volume's, whose
    /// mode is left alone); `None` when the pod has no `fsGroup`.
    pub fn fs_group_walk(pod: &Pod, path: PathBuf) -> Option<VolumeSetup> {
        let sc = pod.spec.security_context.as_ref()?;
        Some(VolumeSetup {
            path,
            mode: 0,
            fs_group: Some(sc.fs_group?),
            on_root_mismatch: sc.fs_group_change_policy
                == Some(crate::domain::pod::security::FsGroupChangePolicy::OnRootMismatch),
            readonly: false,
        })
    }
}

const RW_MASK: u32 = 0o660;
const RO_MASK: u32 = 0o440;
const EXEC_MASK: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// The mode a file of a volume gets under `fsGroup` (upstream's `changeFilePermission`):
/// group (and owner) read-write, or read-only for a read-only volume; folders also
/// searchable and setgid, so new files inherit the group. Symbolic links keep theirs
/// (`None`).
pub fn fs_group_mode(mode: u32, is_dir: bool, is_symlink: bool, readonly: bool) -> Option<u32> {
    if is_symlink {
        return None;
    }
    let mut mask = if readonly { RO_MASK } else { RW_MASK };
    if is_dir {
        mask |= SETGID | EXEC_MASK;
    }
    Some(mode | mask)
}

/// Whether a volume's root already has what `fsGroup` asks (upstream's
/// `requiresPermissionChange`, negated): owned by the group, a folder, with the group's
/// permissions and setgid. With `OnRootMismatch` the walk is skipped then.
pub fn volume_root_matches(setup: &VolumeSetup, gid: u32, mode: u32, is_dir: bool) -> bool {
    let Some(fs_group) = setup.fs_group else {
        return true;
    };
    let wanted = if setup.readonly { RO_MASK } else { RW_MASK } | EXEC_MASK;
    i64::from(gid) == fs_group && is_dir && mode & wanted == wanted && mode & SETGID != 0
}
