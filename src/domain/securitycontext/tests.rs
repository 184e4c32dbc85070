//! Cases ported from upstream v1.26: `pkg/securitycontext/util_test.go`,
//! `kuberuntime/security_context_others_test.go`, `helpers_linux_test.go`
//! (`TestGetSeccompProfile*`), `kuberuntime_container_linux_test.go`,
//! `kuberuntime_sandbox_linux_test.go`, `kuberuntime/util/util_test.go`
//! (`TestNamespacesForPod`) and `pkg/kubelet/sysctl/*_test.go`.

use super::*;
use crate::domain::kuberuntime::requests::{
    container_config, sandbox_config, RequestContext, SandboxSecurity,
};
use crate::domain::pod::security::{
    AppArmorProfile, Capabilities, FsGroupChangePolicy, Sysctl, WindowsSecurityContextOptions,
};
use crate::domain::pod::{ObjectMeta, PodSecurityContext, PodSpec};

fn pod(containers: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: "bar".into(),
            namespace: "new".into(),
            uid: "12345678".into(),
            ..Default::default()
        },
        spec: PodSpec {
            containers,
            ..Default::default()
        },
    }
}

fn container(sc: Option<SecurityContext>) -> Container {
    Container {
        name: "foo".into(),
        image: "busybox".into(),
        security_context: sc,
        ..Default::default()
    }
}

fn with_pod_sc(sc: PodSecurityContext, c: Container) -> Pod {
    let mut p = pod(vec![c]);
    p.spec.security_context = Some(sc);
    p
}

fn settings() -> SecuritySettings {
    SecuritySettings {
        seccomp_profile_root: "/var/lib/kubelet/seccomp".into(),
        ..Default::default()
    }
}

#[test]
fn no_new_privs_only_with_allow_privilege_escalation_false() {
    // TestAddNoNewPrivileges
    for (allow, want) in [(None, false), (Some(true), false), (Some(false), true)] {
        let c = container(Some(SecurityContext {
            allow_privilege_escalation: allow,
            ..Default::default()
        }));
        let s = container_security(&settings(), &pod(vec![c.clone()]), &c).expect("valid");
        assert_eq!(s.no_new_privs, want, "allowPrivilegeEscalation {allow:?}");
    }
    let c = container(None);
    assert!(
        !container_security(&settings(), &pod(vec![c.clone()]), &c)
            .expect("valid")
            .no_new_privs
    );
}

#[test]
fn masked_and_readonly_paths_follow_proc_mount() {
    // TestConvertToRuntimeMaskedPaths, TestConvertToRuntimeReadonlyPaths
    let defaults = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    for (proc_mount, masked, readonly) in [
        (
            None,
            defaults(&DEFAULT_MASKED_PATHS),
            defaults(&DEFAULT_READONLY_PATHS),
        ),
        (
            Some(ProcMountType::Default),
            defaults(&DEFAULT_MASKED_PATHS),
            defaults(&DEFAULT_READONLY_PATHS),
        ),
        (Some(ProcMountType::Unmasked), Vec::new(), Vec::new()),
    ] {
        let c = container(Some(SecurityContext {
            proc_mount,
            ..Default::default()
        }));
        let s = container_security(&settings(), &pod(vec![c.clone()]), &c).expect("valid");
        assert_eq!(s.masked_paths, masked, "{proc_mount:?}");
        assert_eq!(s.readonly_paths, readonly, "{proc_mount:?}");
    }
    // A container without a security context gets the defaults.
    let c = container(None);
    let s = container_security(&settings(), &pod(vec![c.clone()]), &c).expect("valid");
    assert_eq!(s.masked_paths.len(), 9);
    assert!(s.masked_paths.contains(&"/proc/kcore".to_owned()));
    assert!(s.readonly_paths.contains(&"/proc/sysrq-trigger".to_owned()));
}

#[test]
fn the_containers_settings_override_the_pods() {
    // TestDetermineEffectiveRunAsUser and the effective-context accessor cases.
    let cases: [(Option<i64>, Option<i64>, Option<i64>); 4] = [
        (None, None, None),
        (Some(1), None, Some(1)),
        (None, Some(2), Some(2)),
        (Some(1), Some(2), Some(2)),
    ];
    for (pod_uid, container_uid, want) in cases {
        let c = container(Some(SecurityContext {
            run_as_user: container_uid,
            ..Default::default()
        }));
        let p = with_pod_sc(
            PodSecurityContext {
                run_as_user: pod_uid,
                ..Default::default()
            },
            c.clone(),
        );
        assert_eq!(
            effective_security_context(&p, &c).run_as_user,
            want,
            "pod {pod_uid:?} container {container_uid:?}"
        );
    }
    let c = container(Some(SecurityContext {
        run_as_group: Some(30),
        se_linux_options: Some(SeLinuxOptions {
            level: "s0:c2".into(),
            ..Default::default()
        }),
        windows_options: Some(WindowsSecurityContextOptions {
            run_as_user_name: Some("c".into()),
            ..Default::default()
        }),
        ..Default::default()
    }));
    let p = with_pod_sc(
        PodSecurityContext {
            run_as_user: Some(10),
            run_as_group: Some(20),
            run_as_non_root: Some(true),
            se_linux_options: Some(SeLinuxOptions {
                user: "u".into(),
                level: "s0:c1".into(),
                ..Default::default()
            }),
            windows_options: Some(WindowsSecurityContextOptions {
                gmsa_credential_spec_name: Some("spec".into()),
                run_as_user_name: Some("p".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        c.clone(),
    );
    let e = effective_security_context(&p, &c);
    assert_eq!((e.run_as_user, e.run_as_group), (Some(10), Some(30)));
    assert_eq!(e.run_as_non_root, Some(true));
    // SELinux options are replaced whole, Windows options field by field.
    assert_eq!(
        e.se_linux_options.map(|o| (o.user, o.level)),
        Some((String::new(), "s0:c2".into()))
    );
    let w = e.windows_options.unwrap_or_default();
    assert_eq!(w.gmsa_credential_spec_name.as_deref(), Some("spec"));
    assert_eq!(w.run_as_user_name.as_deref(), Some("c"));
}

#[test]
fn run_as_non_root_is_verified_against_the_image_user() {
    // TestVerifyRunAsNonRoot
    let root = ImageUser::root();
    let uid = |u: i64| ImageUser::of(Some(u), "");
    let named = ImageUser {
        uid: None,
        username: "test".into(),
    };
    let unset = ImageUser {
        uid: None,
        username: String::new(),
    };
    let sc = |non_root: Option<bool>, user: Option<i64>| {
        Some(SecurityContext {
            run_as_non_root: non_root,
            run_as_user: user,
            ..Default::default()
        })
    };
    let cases = [
        ("no security context", None, root.clone(), true),
        ("runAsNonRoot unset", sc(None, Some(0)), root.clone(), true),
        (
            "runAsNonRoot false, image root",
            sc(Some(false), None),
            root.clone(),
            true,
        ),
        (
            "runAsNonRoot false, runAsUser root",
            sc(Some(false), Some(0)),
            root.clone(),
            true,
        ),
        (
            "runAsUser root",
            sc(Some(true), Some(0)),
            root.clone(),
            false,
        ),
        ("image root", sc(Some(true), None), root.clone(), false),
        ("image user a name", sc(Some(true), None), named, false),
        ("image user not root", sc(Some(true), None), uid(1000), true),
        ("neither set", sc(Some(true), None), unset, true),
    ];
    for (desc, sc, user, ok) in cases {
        let c = container(sc);
        let p = pod(vec![c.clone()]);
        assert_eq!(verify_run_as_non_root(&p, &c, &user).is_ok(), ok, "{desc}");
    }
    let c = container(sc(Some(true), None));
    let p = pod(vec![c.clone()]);
    assert_eq!(
        verify_run_as_non_root(&p, &c, &ImageUser::root()),
        Err("container has runAsNonRoot and image will run as root (pod: \"bar_new(12345678)\", container: foo)".into())
    );
    assert_eq!(
        verify_run_as_non_root(
            &p,
            &c,
            &ImageUser {
                uid: None,
                username: "www".into()
            }
        ),
        Err("container has runAsNonRoot and image has non-numeric user (www), cannot verify user is non-root (pod: \"bar_new(12345678)\", container: foo)".into())
    );
    let c = container(sc(Some(true), Some(0)));
    assert_eq!(
        verify_run_as_non_root(&pod(vec![c.clone()]), &c, &uid(5)),
        Err("container's runAsUser breaks non-root policy (pod: \"bar_new(12345678)\", container: foo)".into())
    );
}

fn seccomp(kind: ProfileType, localhost: Option<&str>) -> Option<SeccompProfile> {
    Some(SeccompProfile {
        kind: Some(kind),
        localhost_profile: localhost.map(str::to_owned),
    })
}

#[test]
fn seccomp_profiles_as_upstream_chooses_them() {
    // TestGetSeccompProfile and TestGetSeccompProfileDefaultSeccomp
    use ProfileType::*;
    let local = |name: &str| SecurityProfile::Localhost(format!("/var/lib/kubelet/seccomp/{name}"));
    type Case = (
        &'static str,
        Option<SeccompProfile>,
        Option<SeccompProfile>,
        SecurityProfile,
        SecurityProfile,
    );
    let cases: Vec<Case> = vec![
        (
            "none",
            None,
            None,
            SecurityProfile::Unconfined,
            SecurityProfile::RuntimeDefault,
        ),
        (
            "pod unconfined",
            seccomp(Unconfined, None),
            None,
            SecurityProfile::Unconfined,
            SecurityProfile::Unconfined,
        ),
        (
            "container unconfined",
            None,
            seccomp(Unconfined, None),
            SecurityProfile::Unconfined,
            SecurityProfile::Unconfined,
        ),
        (
            "pod runtime default",
            seccomp(RuntimeDefault, None),
            None,
            SecurityProfile::RuntimeDefault,
            SecurityProfile::RuntimeDefault,
        ),
        (
            "container runtime default",
            None,
            seccomp(RuntimeDefault, None),
            SecurityProfile::RuntimeDefault,
            SecurityProfile::RuntimeDefault,
        ),
        (
            "pod localhost",
            seccomp(Localhost, Some("filename")),
            None,
            local("filename"),
            local("filename"),
        ),
        (
            "container localhost",
            None,
            seccomp(Localhost, Some("filename2")),
            local("filename2"),
            local("filename2"),
        ),
        (
            "container over pod",
            seccomp(Unconfined, None),
            seccomp(RuntimeDefault, None),
            SecurityProfile::RuntimeDefault,
            SecurityProfile::RuntimeDefault,
        ),
        (
            "container localhost over pod localhost",
            seccomp(Localhost, Some("field-pod-profile.json")),
            seccomp(Localhost, Some("field-cont-profile.json")),
            local("field-cont-profile.json"),
            local("field-cont-profile.json"),
        ),
    ];
    for (desc, pod_profile, container_profile, want, want_with_default) in cases {
        let c = container(Some(SecurityContext {
            seccomp_profile: container_profile,
            ..Default::default()
        }));
        let p = with_pod_sc(
            PodSecurityContext {
                seccomp_profile: pod_profile,
                ..Default::default()
            },
            c.clone(),
        );
        assert_eq!(seccomp_profile(&settings(), &p, &c), Ok(want), "{desc}");
        let with_default = SecuritySettings {
            seccomp_default: true,
            ..settings()
        };
        assert_eq!(
            seccomp_profile(&with_default, &p, &c),
            Ok(want_with_default),
            "{desc} with seccompDefault"
        );
    }
}

/// CVE-2023-2431: a `Localhost` profile without a name (absent or empty), on the pod or
/// the container, is refused with upstream's message; it never runs `Unconfined`. A
/// container's own valid profile still wins over the pod's empty one.
#[test]
fn a_localhost_seccomp_profile_without_a_name_is_refused() {
    use ProfileType::*;
    let empty = || {
        Some(SeccompProfile {
            kind: Some(Localhost),
            localhost_profile: Some(String::new()),
        })
    };
    let cases: Vec<(&str, Option<SeccompProfile>, Option<SeccompProfile>)> = vec![
        ("pod localhost without name", seccomp(Localhost, None), None),
        ("pod localhost with an empty name", empty(), None),
        (
            "container localhost without name",
            None,
            seccomp(Localhost, None),
        ),
        ("container localhost with an empty name", None, empty()),
        (
            "container empty over pod runtime default",
            seccomp(RuntimeDefault, None),
            empty(),
        ),
    ];
    for (desc, pod_profile, container_profile) in cases {
        let c = container(Some(SecurityContext {
            seccomp_profile: container_profile,
            ..Default::default()
        }));
        let p = with_pod_sc(
            PodSecurityContext {
                seccomp_profile: pod_profile,
                ..Default::default()
            },
            c.clone(),
        );
        for seccomp_default in [false, true] {
            let settings = SecuritySettings {
                seccomp_default,
                ..settings()
            };
            let refused = seccomp_profile(&settings, &p, &c);
            assert_eq!(
                refused,
                Err(SecurityContextError::EmptyLocalhostSeccomp),
                "{desc}"
            );
            let whole = container_security(&settings, &p, &c);
            assert_eq!(
                whole.map_err(|e| e.to_string()),
                Err("localhostProfile must be set if seccompProfile type is Localhost.".into()),
                "{desc}"
            );
        }
    }
    let named = container(Some(SecurityContext {
        seccomp_profile: seccomp(Localhost, Some("own.json")),
        ..Default::default()
    }));
    let p = with_pod_sc(
        PodSecurityContext {
            seccomp_profile: empty(),
            ..Default::default()
        },
        named.clone(),
    );
    assert_eq!(
        seccomp_profile(&settings(), &p, &named),
        Ok(SecurityProfile::Localhost(
            "/var/lib/kubelet/seccomp/own.json".into()
        ))
    );
}

#[test]
fn namespaces_for_pod_as_upstream() {
    // TestNamespacesForPod
    let ns = |network, pid, ipc| NamespaceOptions {
        network,
        pid,
        ipc,
        target_id: String::new(),
        user: None,
    };
    use NamespaceMode::*;
    let mut p = pod(vec![]);
    assert_eq!(namespaces_for_pod(&p), ns(Pod, Container, Pod));
    p.spec.host_ipc = true;
    p.spec.host_network = true;
    p.spec.host_pid = true;
    assert_eq!(namespaces_for_pod(&p), ns(Node, Node, Node));
    let mut p = pod(vec![]);
    p.spec.share_process_namespace = Some(true);
    assert_eq!(namespaces_for_pod(&p), ns(Pod, Pod, Pod));
    p.spec.share_process_namespace = Some(false);
    assert_eq!(namespaces_for_pod(&p), ns(Pod, Container, Pod));
    // hostUsers: false asks for the pod's own user namespace, mapped later.
    p.spec.host_users = Some(false);
    let user = namespaces_for_pod(&p).user.expect("own user namespace");
    assert_eq!(user.mode, Pod);
    assert!(user.uids.is_empty() && user.gids.is_empty());
    p.spec.host_users = Some(true);
    assert_eq!(namespaces_for_pod(&p).user, None);
}

#[test]
fn a_default_container_gets_upstreams_hardening() {
    let c = container(None);
    let s = container_security(&settings(), &pod(vec![c.clone()]), &c).expect("valid");
    assert_eq!(
        s,
        ContainerSecurity {
            capabilities: None,
            privileged: false,
            namespace_options: NamespaceOptions {
                network: NamespaceMode::Pod,
                pid: NamespaceMode::Container,
                ipc: NamespaceMode::Pod,
                target_id: String::new(),
                user: None,
            },
            selinux_options: None,
            run_as_user: None,
            run_as_group: None,
            run_as_username: String::new(),
            readonly_rootfs: false,
            supplemental_groups: Vec::new(),
            no_new_privs: false,
            masked_paths: DEFAULT_MASKED_PATHS.map(str::to_owned).to_vec(),
            readonly_paths: DEFAULT_READONLY_PATHS.map(str::to_owned).to_vec(),
            seccomp: SecurityProfile::Unconfined,
            apparmor: None,
        }
    );
}

#[test]
fn every_field_reaches_the_container_request() {
    // TestGenerateContainerConfig's user and group, and the rest of the fields.
    let c = container(Some(SecurityContext {
        run_as_user: Some(1000),
        run_as_group: Some(2000),
        capabilities: Some(Capabilities {
            add: vec!["NET_ADMIN".into()],
            drop: vec!["NET_RAW".into(), "ALL".into()],
        }),
        privileged: Some(true),
        read_only_root_filesystem: Some(true),
        se_linux_options: Some(SeLinuxOptions {
            user: "system_u".into(),
            role: "system_r".into(),
            kind: "container_t".into(),
            level: "s0:c1,c2".into(),
        }),
        ..Default::default()
    }));
    let mut p = with_pod_sc(
        PodSecurityContext {
            fs_group: Some(3000),
            supplemental_groups: vec![4000, 5000],
            run_as_user: Some(1),
            ..Default::default()
        },
        c.clone(),
    );
    p.spec.host_ipc = true;
    let s = container_security(&settings(), &p, &c).expect("valid");
    assert_eq!((s.run_as_user, s.run_as_group), (Some(1000), Some(2000)));
    assert_eq!(s.supplemental_groups, [3000, 4000, 5000], "fsGroup first");
    assert_eq!(
        s.capabilities,
        Some(Capability {
            add: vec!["NET_ADMIN".into()],
            drop: vec!["NET_RAW".into(), "ALL".into()],
        })
    );
    assert!(s.privileged && s.readonly_rootfs);
    assert_eq!(s.namespace_options.ipc, NamespaceMode::Node);
    assert_eq!(
        s.selinux_options.map(|o| o.kind),
        Some("container_t".to_owned())
    );
    // Upstream sends the default paths for a privileged container too; the runtime
    // drops them.
    assert_eq!(s.masked_paths.len(), 9);
}

#[test]
fn the_image_user_applies_only_without_run_as_user() {
    let mut s = ContainerSecurity::default();
    apply_image_user(&mut s, &ImageUser::root());
    assert_eq!((s.run_as_user, s.run_as_username.as_str()), (Some(0), ""));
    let mut s = ContainerSecurity::default();
    apply_image_user(&mut s, &ImageUser::of(None, "nobody"));
    assert_eq!(
        (s.run_as_user, s.run_as_username.as_str()),
        (None, "nobody")
    );
    let mut s = ContainerSecurity {
        run_as_user: Some(7),
        ..Default::default()
    };
    apply_image_user(&mut s, &ImageUser::of(None, "nobody"));
    assert_eq!((s.run_as_user, s.run_as_username.as_str()), (Some(7), ""));
    assert_eq!(
        ImageUser::of(Some(65535), "x"),
        ImageUser::of(Some(65535), "")
    );
    assert_eq!(ImageUser::of(None, ""), ImageUser::root());
}

#[test]
fn the_sandbox_security_context_as_upstream_builds_it() {
    let mut privileged = container(Some(SecurityContext {
        privileged: Some(true),
        ..Default::default()
    }));
    privileged.name = "priv".into();
    let mut p = with_pod_sc(
        PodSecurityContext {
            run_as_user: Some(1000),
            run_as_group: Some(3000),
            fs_group: Some(2000),
            supplemental_groups: vec![5],
            se_linux_options: Some(SeLinuxOptions {
                level: "s0".into(),
                ..Default::default()
            }),
            sysctls: vec![
                Sysctl {
                    name: "net/ipv4/ping_group_range".into(),
                    value: "0 1".into(),
                },
                Sysctl {
                    name: "kernel.shm_rmid_forced".into(),
                    value: "1".into(),
                },
            ],
            ..Default::default()
        },
        container(None),
    );
    p.spec.init_containers.push(privileged);
    p.spec.share_process_namespace = Some(true);
    assert_eq!(
        sandbox_security(&p),
        SandboxSecurity {
            namespace_options: NamespaceOptions {
                network: NamespaceMode::Pod,
                pid: NamespaceMode::Pod,
                ipc: NamespaceMode::Pod,
                target_id: String::new(),
                user: None,
            },
            selinux_options: Some(SeLinuxOption {
                level: "s0".into(),
                ..Default::default()
            }),
            run_as_user: Some(1000),
            run_as_group: Some(3000),
            supplemental_groups: vec![2000, 5],
            privileged: true,
            seccomp: SecurityProfile::RuntimeDefault,
            seccomp_profile_path: "runtime/default".into(),
        }
    );
    assert_eq!(
        sandbox_sysctls(&p),
        BTreeMap::from([
            ("kernel.shm_rmid_forced".to_owned(), "1".to_owned()),
            ("net.ipv4.ping_group_range".to_owned(), "0 1".to_owned()),
        ])
    );
    // Without any security context: RuntimeDefault, the default namespaces.
    let plain = sandbox_security(&pod(vec![container(None)]));
    assert_eq!(plain.seccomp, SecurityProfile::RuntimeDefault);
    assert_eq!(plain.namespace_options.pid, NamespaceMode::Container);
    assert!(!plain.privileged);
}

#[test]
fn sysctl_names_with_slashes_become_dotted() {
    // TestConvertSysctlVariableToDotsSeparator
    for (given, want) in [
        ("", ""),
        ("kernel.shm_rmid_forced", "kernel.shm_rmid_forced"),
        ("kernel/shm_rmid_forced", "kernel.shm_rmid_forced"),
        (
            "net.ipv4.conf.eno2/100.rp_filter",
            "net.ipv4.conf.eno2/100.rp_filter",
        ),
        (
            "net/ipv4/conf/eno2.100/rp_filter",
            "net.ipv4.conf.eno2/100.rp_filter",
        ),
    ] {
        assert_eq!(sysctl_with_dots(given), want, "{given}");
    }
}

#[test]
fn sysctl_namespaces() {
    // TestNamespacedBy
    for (name, want) in [
        ("kernel.shm_rmid_forced", Some(SysctlNamespace::Ipc)),
        ("kernel.sem", Some(SysctlNamespace::Ipc)),
        ("kernel.msgmax", Some(SysctlNamespace::Ipc)),
        ("fs.mqueue.msg_max", Some(SysctlNamespace::Ipc)),
        ("net.ipv4.ip_local_port_range", Some(SysctlNamespace::Net)),
        ("kernel.shmall", Some(SysctlNamespace::Ipc)),
        ("kernel.panic", None),
        ("vm.swappiness", None),
        ("fs.file-max", None),
    ] {
        assert_eq!(sysctl_namespace(name), want, "{name}");
    }
}

#[test]
fn allowed_unsafe_sysctls_must_be_namespaced_patterns() {
    // TestNewAllowlist
    for (pattern, ok) in [
        ("kernel.msg*", true),
        ("kernel.sem", true),
        ("kernel/msg*", true),
        ("kernel/sem", true),
        ("net.*", true),
        (" kernel.msg*", false),
        ("kernel.msg* ", false),
        ("net.-", false),
        ("net.*.foo", false),
        ("net.*/foo", false),
        ("foo", false),
    ] {
        assert_eq!(
            allowlist_pattern_error(pattern).is_none(),
            ok,
            "{pattern:?}: {:?}",
            allowlist_pattern_error(pattern)
        );
    }
    assert_eq!(
        allowlist_pattern_error("foo"),
        Some("the sysctl \"foo\" are not known to be namespaced".into())
    );
}

fn sysctl_pod(name: &str, host_network: bool, host_ipc: bool) -> Pod {
    let mut p = with_pod_sc(
        PodSecurityContext {
            sysctls: vec![Sysctl {
                name: name.into(),
                value: "1".into(),
            }],
            ..Default::default()
        },
        container(None),
    );
    p.spec.host_network = host_network;
    p.spec.host_ipc = host_ipc;
    p
}

#[test]
fn sysctl_admission_as_upstream() {
    // TestAllowlist, with kernel.msg* and kernel.sem allowed as unsafe.
    let allowed = SecuritySettings {
        allowed_unsafe_sysctls: vec!["kernel.msg*".into(), "kernel.sem".into()],
        ..settings()
    };
    for (name, net, ipc) in [
        ("kernel.shm_rmid_forced", false, false),
        ("kernel/shm_rmid_forced", false, false),
        ("net.ipv4.ip_local_port_range", false, false),
        ("kernel.msgmax", false, false),
        ("kernel.sem", false, false),
        ("kernel/sem", false, false),
    ] {
        assert_eq!(
            admit(&sysctl_pod(name, net, ipc), &allowed),
            Ok(()),
            "{name}"
        );
    }
    for (name, net, ipc) in [
        ("kernel.shm_rmid_forced", false, true),
        ("net.ipv4.ip_local_port_range", true, false),
        ("foo", false, false),
        ("net.a.b.c", false, false),
        ("net.ipv4.ip_local_port_range.a.b.c", false, false),
        ("kernel.msgmax", false, true),
        ("kernel.sem", false, true),
    ] {
        let rejected = admit(&sysctl_pod(name, net, ipc), &allowed);
        assert!(
            rejected
                .as_ref()
                .is_err_and(|r| r.reason == "SysctlForbidden"),
            "{name}: {rejected:?}"
        );
    }
    assert_eq!(
        admit(&sysctl_pod("kernel.msgmax", false, false), &settings()),
        Err(Rejection {
            reason: "SysctlForbidden".into(),
            message: "forbidden sysctl: \"kernel.msgmax\" not allowlisted".into(),
        })
    );
    assert_eq!(
        admit(
            &sysctl_pod("net.ipv4.ip_local_port_range", true, false),
            &settings()
        ),
        Err(Rejection {
            reason: "SysctlForbidden".into(),
            message:
                "forbidden sysctl: \"net.ipv4.ip_local_port_range\" not allowed with host net enabled"
                    .into(),
        })
    );
}

#[test]
fn apparmor_is_refused_on_a_host_without_it_unless_unconfined() {
    let refused = Err(Rejection {
        reason: "AppArmor".into(),
        message: "Cannot enforce AppArmor: AppArmor is not enabled on the host".into(),
    });
    let annotated = |value: &str| {
        let mut p = pod(vec![container(None)]);
        p.metadata
            .annotations
            .insert(format!("{APPARMOR_ANNOTATION_PREFIX}foo"), value.to_owned());
        p
    };
    assert_eq!(admit(&annotated("runtime/default"), &settings()), refused);
    assert_eq!(
        admit(&annotated("localhost/k8s-nginx"), &settings()),
        refused
    );
    assert_eq!(admit(&annotated("unconfined"), &settings()), Ok(()));
    assert_eq!(admit(&pod(vec![container(None)]), &settings()), Ok(()));
    let field = |kind| {
        container(Some(SecurityContext {
            app_armor_profile: Some(AppArmorProfile {
                kind: Some(kind),
                localhost_profile: None,
            }),
            ..Default::default()
        }))
    };
    assert_eq!(
        admit(&pod(vec![field(ProfileType::RuntimeDefault)]), &settings()),
        refused
    );
    assert_eq!(
        admit(&pod(vec![field(ProfileType::Unconfined)]), &settings()),
        Ok(())
    );
    let enabled = SecuritySettings {
        apparmor_enabled: true,
        ..settings()
    };
    assert_eq!(admit(&annotated("runtime/default"), &enabled), Ok(()));
    let p = annotated("localhost/k8s-nginx");
    assert_eq!(
        apparmor_profile(&p, &p.spec.containers[0]),
        Some(SecurityProfile::Localhost("k8s-nginx".into()))
    );
}

fn ctx() -> RequestContext {
    RequestContext {
        pod_logs_dir: "/var/log/pods".into(),
        root_dir: "/var/lib/kubelet".into(),
        host_dns: Default::default(),
        cluster_dns: Vec::new(),
        cluster_domain: String::new(),
        cpu_cfs_quota: true,
        cpu_cfs_quota_period_us: 100_000,
        memory_capacity_bytes: 1 << 30,
        hugepage_sizes: vec!["1GB".into(), "2MB".into()],
        security: settings(),
    }
}

fn q(s: &str) -> crate::domain::units::quantity::Quantity {
    crate::domain::units::quantity::Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn sandbox_resources_and_overhead() {
    // TestApplySandboxResources
    let mut c = container(None);
    c.resources.requests = [("memory".into(), q("128Mi")), ("cpu".into(), q("2"))].into();
    c.resources.limits = [("memory".into(), q("256Mi")), ("cpu".into(), q("4"))].into();
    let mut p = pod(vec![c]);
    p.spec.overhead = [("memory".into(), q("128Mi")), ("cpu".into(), q("1"))].into();
    let s = sandbox_config(&ctx(), &p, 0, "");
    let r = &s.resources;
    assert_eq!(
        (
            r.memory_limit_in_bytes,
            r.cpu_period,
            r.cpu_quota,
            r.cpu_shares
        ),
        (268_435_456, 100_000, 400_000, 2048)
    );
    let o = &s.overhead;
    assert_eq!(
        (
            o.memory_limit_in_bytes,
            o.cpu_period,
            o.cpu_quota,
            o.cpu_shares
        ),
        (134_217_728, 100_000, 100_000, 1024)
    );

    let mut c = container(None);
    c.resources.requests = [("memory".into(), q("128Mi"))].into();
    c.resources.limits = [("memory".into(), q("256Mi"))].into();
    let s = sandbox_config(&ctx(), &pod(vec![c]), 0, "");
    let r = &s.resources;
    assert_eq!(
        (
            r.memory_limit_in_bytes,
            r.cpu_period,
            r.cpu_quota,
            r.cpu_shares
        ),
        (268_435_456, 100_000, 0, 2)
    );
    assert_eq!(s.overhead, Default::default());
}

#[test]
fn hugepage_limits_per_page_size() {
    // TestGetHugepageLimitsFromResources
    let limits = |pairs: &[(&str, &str)]| {
        let mut c = container(None);
        c.resources.limits = pairs.iter().map(|(k, v)| ((*k).to_owned(), q(v))).collect();
        let p = pod(vec![c]);
        container_config(&ctx(), &p, &p.spec.containers[0], 0, 0)
            .map(|cfg| {
                cfg.linux
                    .hugepage_limits
                    .into_iter()
                    .map(|h| (h.page_size, h.limit))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let l = |gb: u64, mb: u64| vec![("1GB".to_owned(), gb), ("2MB".to_owned(), mb)];
    assert_eq!(limits(&[("hugepages-2Mi", "2Mi")]), l(0, 2_097_152));
    assert_eq!(limits(&[("hugepages-1Gi", "2Gi")]), l(2_147_483_648, 0));
    assert_eq!(limits(&[("hugepages-2MB", "2Mi")]), l(0, 0), "skipped");
    assert_eq!(limits(&[("hugepages-1GB", "2Gi")]), l(0, 0), "skipped");
    assert_eq!(
        limits(&[
            ("cpu", "0"),
            ("hugepages-2Mi", "2Mi"),
            ("hugepages-1Gi", "2Gi")
        ]),
        l(2_147_483_648, 2_097_152)
    );
    assert_eq!(
        limits(&[]),
        l(0, 0),
        "a zero limit for each size the node has"
    );
}

#[test]
fn the_ports_annotation_is_upstreams_json() {
    let mut c = container(None);
    c.ports = vec![
        crate::domain::pod::ContainerPort {
            name: "http".into(),
            container_port: 80,
            protocol: "TCP".into(),
            ..Default::default()
        },
        crate::domain::pod::ContainerPort {
            container_port: 53,
            host_port: 5353,
            protocol: "UDP".into(),
            host_ip: "127.0.0.1".into(),
            ..Default::default()
        },
    ];
    let p = pod(vec![c]);
    let cfg = container_config(&ctx(), &p, &p.spec.containers[0], 0, 0).expect("config");
    assert_eq!(
        cfg.annotations
            .get("io.kubernetes.container.ports")
            .map(String::as_str),
        Some(
            r#"[{"name":"http","containerPort":80,"protocol":"TCP"},{"hostPort":5353,"containerPort":53,"protocol":"UDP","hostIP":"127.0.0.1"}]"#
        )
    );
    let p = pod(vec![container(None)]);
    let cfg = container_config(&ctx(), &p, &p.spec.containers[0], 0, 0).expect("config");
    assert!(!cfg
        .annotations
        .contains_key("io.kubernetes.container.ports"));
}

#[test]
fn fs_group_modes_as_upstreams_walk() {
    assert_eq!(fs_group_mode(0o644, false, false, false), Some(0o664));
    assert_eq!(fs_group_mode(0o600, false, false, true), Some(0o640));
    assert_eq!(fs_group_mode(0o777, true, false, false), Some(0o2777));
    assert_eq!(fs_group_mode(0o700, true, false, false), Some(0o2770));
    assert_eq!(
        fs_group_mode(0o777, false, true, false),
        None,
        "symlinks keep theirs"
    );
    let setup = VolumeSetup {
        path: "/v".into(),
        mode: 0o777,
        fs_group: Some(2000),
        on_root_mismatch: true,
        readonly: false,
    };
    assert!(volume_root_matches(&setup, 2000, 0o2770, true));
    assert!(!volume_root_matches(&setup, 2000, 0o770, true), "no setgid");
    assert!(
        !volume_root_matches(&setup, 2000, 0o2750, true),
        "group cannot write"
    );
    assert!(
        !volume_root_matches(&setup, 0, 0o2777, true),
        "another group"
    );
    assert!(
        !volume_root_matches(&setup, 2000, 0o2777, false),
        "not a folder"
    );
}

#[test]
fn empty_dirs_take_the_pods_fs_group_and_policy() {
    let mut p = with_pod_sc(
        PodSecurityContext {
            fs_group: Some(2000),
            fs_group_change_policy: Some(FsGroupChangePolicy::OnRootMismatch),
            ..Default::default()
        },
        container(None),
    );
    p.spec.volumes.push(crate::domain::pod::Volume {
        name: "cache".into(),
        empty_dir: Some(Default::default()),
        ..Default::default()
    });
    let setups = crate::domain::kuberuntime::requests::empty_dir_setups(&ctx(), &p);
    assert_eq!(
        setups,
        [VolumeSetup {
            path: "/var/lib/kubelet/pods/12345678/volumes/kubernetes.io~empty-dir/cache".into(),
            mode: 0o777,
            fs_group: Some(2000),
            on_root_mismatch: true,
            readonly: false,
        }]
    );
}
