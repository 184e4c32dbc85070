//! The request builders against upstream's expectations: paths, sandbox, container,
//! mounts, resources, and the context from the configuration.

use super::*;
use crate::domain::pod::{
    ContainerPort, EmptyDirVolume, EnvVar, HostPathVolume, ObjectMeta, PodSpec,
    ResourceRequirements, Volume, VolumeMount,
};
use crate::domain::units::quantity::Quantity;
use crate::domain::volumes::subpath::{SubPath, SubPathError};
use std::path::Path;

const GIB: u64 = 1 << 30;

fn ctx() -> RequestContext {
    RequestContext {
        pod_logs_dir: "/var/log/pods".into(),
        root_dir: "/var/lib/kubelet".into(),
        host_dns: ResolvConf {
            nameservers: vec!["192.168.0.1".into()],
            searches: vec!["lan".into()],
            options: vec!["timeout:1".into()],
        },
        cluster_dns: vec!["10.96.0.10".into()],
        cluster_domain: "cluster.local".into(),
        cpu_cfs_quota: true,
        cpu_cfs_quota_period_us: 100_000,
        memory_capacity_bytes: 10 * GIB,
        hugepage_sizes: Vec::new(),
        security: Default::default(),
    }
}

fn pod_with(containers: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: "web".into(),
            namespace: "prod".into(),
            uid: "uid-1".into(),
            labels: [("app".to_string(), "web".to_string())].into(),
            annotations: [("note".to_string(), "x".to_string())].into(),
            ..ObjectMeta::default()
        },
        spec: PodSpec {
            containers,
            ..Default::default()
        },
    }
}

fn container(name: &str) -> Container {
    Container {
        name: name.into(),
        image: "nginx:1.27".into(),
        ..Default::default()
    }
}

fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn resources(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ResourceRequirements {
    ResourceRequirements {
        requests: requests
            .iter()
            .map(|(k, v)| (k.to_string(), q(v)))
            .collect(),
        limits: limits.iter().map(|(k, v)| (k.to_string(), q(v))).collect(),
    }
}

#[test]
fn paths() {
    let c = ctx();
    let p = pod_with(vec![]);
    assert_eq!(
        pod_log_dir(&c, &p),
        Path::new("/var/log/pods/prod_web_uid-1")
    );
    assert_eq!(pod_dir(&c, "u"), Path::new("/var/lib/kubelet/pods/u"));
    assert_eq!(
        empty_dir_path(&c, "u", "cache"),
        Path::new("/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/cache")
    );
    let mut p = pod_with(vec![]);
    p.spec.volumes = vec![
        Volume {
            name: "cache".into(),
            empty_dir: Some(EmptyDirVolume::default()),
            ..Default::default()
        },
        Volume {
            name: "etc".into(),
            host_path: Some(HostPathVolume {
                path: "/etc".into(),
                kind: String::new(),
            }),
            ..Default::default()
        },
    ];
    let setups = empty_dir_setups(&c, &p);
    assert_eq!(
        setups.iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
        vec![PathBuf::from(
            "/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~empty-dir/cache"
        )]
    );
    assert_eq!(
        setups[0].mode, 0o777,
        "writable by any user, as upstream makes it"
    );
    assert_eq!(setups[0].fs_group, None);
}

#[test]
fn sandbox_metadata_labels_and_annotations() {
    let s = sandbox_config(&ctx(), &pod_with(vec![]), 2, "");
    assert_eq!(
        (s.name.as_str(), s.namespace.as_str(), s.uid.as_str()),
        ("web", "prod", "uid-1")
    );
    assert_eq!(s.attempt, 2);
    assert_eq!(s.hostname, "web");
    assert_eq!(s.log_directory, "/var/log/pods/prod_web_uid-1");
    assert_eq!(s.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        s.labels.get(POD_NAME_LABEL).map(String::as_str),
        Some("web")
    );
    assert_eq!(
        s.labels.get(POD_NAMESPACE_LABEL).map(String::as_str),
        Some("prod")
    );
    assert_eq!(
        s.labels.get(POD_UID_LABEL).map(String::as_str),
        Some("uid-1")
    );
    assert_eq!(s.annotations, pod_with(vec![]).metadata.annotations);
    assert_eq!(s.cgroup_parent, "");
    assert!(!s.host_network);
    let under = sandbox_config(
        &ctx(),
        &pod_with(vec![]),
        2,
        "/kubepods/besteffort/poduid-1",
    );
    assert_eq!(under.cgroup_parent, "/kubepods/besteffort/poduid-1");
}

/// Upstream's `TestGetNodenameForKernel`, through the pod: the FQDN with
/// `setHostnameAsFQDN` and a subdomain, refused past 64 characters.
#[test]
fn a_sandbox_hostname_is_the_fqdn_when_asked() {
    let mut p = pod_with(vec![]);
    p.spec.subdomain = "db".into();
    assert_eq!(super::sandbox_hostname(&ctx(), &p), Ok("web".into()));
    p.spec.set_hostname_as_fqdn = Some(true);
    assert_eq!(
        super::sandbox_hostname(&ctx(), &p),
        Ok("web.db.prod.svc.cluster.local".into())
    );
    assert_eq!(
        sandbox_config(&ctx(), &p, 0, "").hostname,
        "web.db.prod.svc.cluster.local"
    );
    p.spec.subdomain.clear();
    assert_eq!(super::sandbox_hostname(&ctx(), &p), Ok("web".into()));
    p.spec.subdomain = "db".into();
    p.spec.hostname = "h".repeat(40);
    let long = format!("{}.db.prod.svc.cluster.local", "h".repeat(40));
    assert_eq!(
        super::sandbox_hostname(&ctx(), &p).map_err(|e| e.to_string()),
        Err(format!(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN {long} is too long (64 characters is the max, 66 characters requested)"
        ))
    );
}

#[test]
fn sandbox_hostname() {
    let mut p = pod_with(vec![]);
    p.spec.hostname = "custom".into();
    assert_eq!(sandbox_config(&ctx(), &p, 0, "").hostname, "custom");
    p.spec.hostname = format!("{}-.x", "a".repeat(61));
    assert_eq!(sandbox_config(&ctx(), &p, 0, "").hostname, "a".repeat(61));
    p.spec.host_network = true;
    let s = sandbox_config(&ctx(), &p, 0, "");
    assert_eq!(s.hostname, "");
    assert!(s.host_network);
}

#[test]
fn sandbox_dns_follows_policy() {
    let mut p = pod_with(vec![]);
    let dns = |p: &Pod| sandbox_config(&ctx(), p, 0, "").dns.unwrap_or_default();
    let d = dns(&p);
    assert_eq!(d.servers, vec!["10.96.0.10"]);
    assert_eq!(
        d.searches,
        vec![
            "prod.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local",
            "lan"
        ]
    );
    assert_eq!(d.options, vec!["ndots:5"]);
    p.spec.dns_policy = "Default".into();
    assert_eq!(dns(&p).servers, vec!["192.168.0.1"]);
    p.spec.dns_policy = "None".into();
    assert_eq!(dns(&p), DnsConfig::default());
    p.spec.dns_policy = "ClusterFirst".into();
    p.spec.host_network = true;
    assert_eq!(dns(&p).servers, vec!["192.168.0.1"]);
    p.spec.dns_policy = "ClusterFirstWithHostNet".into();
    assert_eq!(dns(&p).servers, vec!["10.96.0.10"]);
    let mut c = ctx();
    c.cluster_dns.clear();
    p.spec.dns_policy = "ClusterFirst".into();
    p.spec.host_network = false;
    let got = sandbox_dns(&c, &p);
    assert_eq!(got.config.nameservers, vec!["192.168.0.1"]);
    assert_eq!(got.warnings, vec![dns::DnsWarning::MissingClusterDns]);
}

#[test]
fn sandbox_port_mappings() {
    let mut a = container("a");
    a.ports = vec![
        ContainerPort {
            name: "http".into(),
            container_port: 80,
            host_port: 8080,
            host_ip: "127.0.0.1".into(),
            ..Default::default()
        },
        ContainerPort {
            name: "http".into(),
            container_port: 81,
            ..Default::default()
        },
        ContainerPort {
            container_port: 53,
            protocol: "UDP".into(),
            ..Default::default()
        },
    ];
    let mut b = container("b");
    b.ports = vec![ContainerPort {
        container_port: 9000,
        protocol: "SCTP".into(),
        ..Default::default()
    }];
    let s = sandbox_config(&ctx(), &pod_with(vec![a, b]), 0, "");
    assert_eq!(
        s.port_mappings,
        vec![
            PortMapping {
                protocol: Protocol::Tcp,
                container_port: 80,
                host_port: 8080,
                host_ip: "127.0.0.1".into(),
            },
            PortMapping {
                protocol: Protocol::Udp,
                container_port: 53,
                ..Default::default()
            },
            PortMapping {
                protocol: Protocol::Sctp,
                container_port: 9000,
                ..Default::default()
            },
        ]
    );
}

fn build(p: &Pod, i: usize, restarts: u32) -> ContainerConfig {
    container_config(&ctx(), p, &p.spec.containers[i], restarts, restarts)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn container_labels_annotations_and_log_path() {
    let mut c = container("app");
    c.stdin = true;
    c.tty = true;
    c.working_dir = "/srv".into();
    let mut p = pod_with(vec![c.clone()]);
    p.spec.termination_grace_period_seconds = Some(45);
    let cfg = build(&p, 0, 3);
    assert_eq!((cfg.name.as_str(), cfg.attempt), ("app", 3));
    assert_eq!(cfg.image, "nginx:1.27");
    assert_eq!(cfg.working_dir, "/srv");
    assert!(cfg.stdin && cfg.tty);
    assert_eq!(cfg.log_path, "app/3.log");
    let label = |k: &str| cfg.labels.get(k).map(String::as_str);
    assert_eq!(label(CONTAINER_NAME_LABEL), Some("app"));
    assert_eq!(label(POD_NAME_LABEL), Some("web"));
    assert_eq!(label(POD_NAMESPACE_LABEL), Some("prod"));
    assert_eq!(label(POD_UID_LABEL), Some("uid-1"));
    assert_eq!(cfg.labels.len(), 4, "pod labels are not copied");
    let ann = |k: &str| cfg.annotations.get(k).map(String::as_str);
    let hash = format!("{:x}", pod::container_hash(&c));
    assert_eq!(ann(CONTAINER_HASH_ANNOTATION), Some(hash.as_str()));
    assert_eq!(
        ann(CONTAINER_HASH_ANNOTATION).and_then(|h| u64::from_str_radix(h, 16).ok()),
        Some(pod::container_hash(&c)),
        "read back as the CRI adapter does"
    );
    assert_eq!(ann(CONTAINER_RESTART_COUNT_ANNOTATION), Some("3"));
    assert_eq!(
        ann(CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION),
        Some("/dev/termination-log")
    );
    assert_eq!(
        ann(CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION),
        Some("File")
    );
    assert_eq!(ann(POD_TERMINATION_GRACE_PERIOD_ANNOTATION), Some("45"));
    assert_eq!(ann(CONTAINER_BACKOFF_STEP_ANNOTATION), Some("3"));
    let step =
        container_config(&ctx(), &p, &p.spec.containers[0], 3, 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        step.annotations
            .get(CONTAINER_BACKOFF_STEP_ANNOTATION)
            .map(String::as_str),
        Some("1"),
        "the step is recorded apart from the restart count"
    );
}

#[test]
fn env_and_expansion() {
    let vars: BTreeMap<&str, &str> = [("A", "1"), ("B", "two")].into();
    for (input, want) in [
        ("$(A)", "1"),
        ("x$(A)y$(B)", "x1ytwo"),
        ("$(C)", "$(C)"),
        ("$$(A)", "$(A)"),
        ("$$$(A)", "$1"),
        ("$A", "$A"),
        ("$(A", "$(A"),
        ("cost $", "cost $"),
        ("$()", "$()"),
        ("é$(B)é", "étwoé"),
    ] {
        assert_eq!(expand(input, &vars), want, "{input}");
    }
    let mut c = container("app");
    c.env = vec![
        EnvVar {
            name: "HOST".into(),
            value: "db".into(),
            ..EnvVar::default()
        },
        EnvVar {
            name: "URL".into(),
            value: "http://$(HOST):$(PORT)".into(),
            ..EnvVar::default()
        },
        EnvVar {
            name: "PORT".into(),
            value: "5432".into(),
            ..EnvVar::default()
        },
        EnvVar {
            name: "HOST".into(),
            value: "db2".into(),
            ..EnvVar::default()
        },
    ];
    c.command = vec!["run".into(), "$(URL)".into()];
    c.args = vec!["--port=$(PORT)".into(), "$$(PORT)".into(), "$(NOPE)".into()];
    let cfg = build(&pod_with(vec![c]), 0, 0);
    assert_eq!(
        cfg.envs,
        vec![
            ("HOST".to_string(), "db2".to_string()),
            ("URL".to_string(), "http://db:$(PORT)".to_string()),
            ("PORT".to_string(), "5432".to_string()),
        ]
    );
    assert_eq!(cfg.command, vec!["run", "http://db:$(PORT)"]);
    assert_eq!(cfg.args, vec!["--port=5432", "$(PORT)", "$(NOPE)"]);
}

fn volume_pod(mounts: Vec<VolumeMount>) -> Pod {
    let mut c = container("app");
    c.volume_mounts = mounts;
    let mut p = pod_with(vec![c]);
    p.spec.volumes = vec![
        Volume {
            name: "data".into(),
            host_path: Some(HostPathVolume {
                path: "/srv/data".into(),
                kind: String::new(),
            }),
            ..Default::default()
        },
        Volume {
            name: "scratch".into(),
            empty_dir: Some(EmptyDirVolume::default()),
            ..Default::default()
        },
        Volume {
            name: "secret".into(),
            ..Default::default()
        },
    ];
    p
}

fn vm(name: &str, path: &str, read_only: bool, sub: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only,
        sub_path: sub.into(),
        sub_path_expr: String::new(),
        mount_propagation: None,
    }
}

#[test]
fn mounts_resolve_volumes() {
    let p = volume_pod(vec![
        vm("data", "/data", true, ""),
        vm("scratch", "/tmp/s", false, ""),
        vm("data", "/conf", false, "app/conf"),
    ]);
    assert_eq!(
        build(&p, 0, 0).mounts,
        vec![
            Mount {
                container_path: "/data".into(),
                host_path: "/srv/data".into(),
                readonly: true,
                ..Mount::default()
            },
            Mount {
                container_path: "/tmp/s".into(),
                host_path: "/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~empty-dir/scratch"
                    .into(),
                readonly: false,
                ..Mount::default()
            },
            // A subpath: the runtime mounts the kubelet's bind of it (upstream's folder),
            // never `<volume>/<subPath>` as text.
            Mount {
                container_path: "/conf".into(),
                host_path: "/var/lib/kubelet/pods/uid-1/volume-subpaths/data/app/2".into(),
                readonly: false,
                sub_path: Some(SubPath {
                    volume: "data".into(),
                    volume_path: "/srv/data".into(),
                    path: "app/conf".into(),
                    target: "/var/lib/kubelet/pods/uid-1/volume-subpaths/data/app/2".into(),
                }),
                ..Mount::default()
            },
            // The instance's termination message file (upstream's).
            Mount {
                container_path: "/dev/termination-log".into(),
                host_path: "/var/lib/kubelet/pods/uid-1/containers/app/0".into(),
                readonly: false,
                ..Mount::default()
            },
        ]
    );
}

#[test]
fn mount_errors_name_container_mount_and_volume() {
    let cases = [
        (
            vm("nope", "/x", false, ""),
            RequestError::UnknownVolume {
                container: "app".into(),
                mount_path: "/x".into(),
                volume: "nope".into(),
            },
        ),
        (
            vm("secret", "/s", false, ""),
            RequestError::UnsupportedVolume {
                container: "app".into(),
                mount_path: "/s".into(),
                volume: "secret".into(),
            },
        ),
        (
            vm("data", "/d", false, "../etc"),
            RequestError::SubPath(SubPathError::Backsteps("../etc".into())),
        ),
        (
            vm("data", "/d", false, "/etc"),
            RequestError::SubPath(SubPathError::Absolute("/etc".into())),
        ),
    ];
    for (mount, want) in cases {
        let p = volume_pod(vec![mount]);
        let got = container_config(&ctx(), &p, &p.spec.containers[0], 0, 0);
        assert_eq!(got, Err(want.clone()));
        // Upstream's subpath messages name the path only.
        let text = want.to_string();
        let subpath = matches!(want, RequestError::SubPath(_));
        assert!(subpath || text.contains("\"app\""), "{text}");
    }
    let p = volume_pod(vec![vm("nope", "/x", false, "")]);
    let e = container_config(&ctx(), &p, &p.spec.containers[0], 0, 0)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("container \"app\": volumeMount \"/x\" names volume \"nope\", which the pod does not define")
    );
}

#[test]
fn resources_guaranteed() {
    let mut c = container("app");
    c.resources = resources(
        &[("cpu", "500m"), ("memory", "1Gi")],
        &[("cpu", "500m"), ("memory", "1Gi")],
    );
    let r = build(&pod_with(vec![c]), 0, 0).linux;
    assert_eq!(
        r,
        LinuxResources {
            cpu_period: 100_000,
            cpu_quota: 50_000,
            cpu_shares: 512,
            memory_limit_in_bytes: 1 << 30,
            oom_score_adj: -997,
            cpuset_cpus: String::new(),
            hugepage_limits: Vec::new(),
        }
    );
}

#[test]
fn resources_guaranteed_from_limits_only() {
    // Requests default to limits, as API defaulting would have made them.
    let mut c = container("app");
    c.resources = resources(&[], &[("cpu", "2"), ("memory", "512Mi")]);
    let r = build(&pod_with(vec![c]), 0, 0).linux;
    assert_eq!((r.cpu_shares, r.cpu_quota), (2048, 200_000));
    assert_eq!(r.memory_limit_in_bytes, 512 << 20);
    assert_eq!(r.oom_score_adj, -997);
}

#[test]
fn resources_burstable() {
    let mut c = container("app");
    c.resources = resources(&[("cpu", "250m"), ("memory", "1Gi")], &[("memory", "2Gi")]);
    let r = build(&pod_with(vec![c]), 0, 0).linux;
    assert_eq!(r.cpu_shares, 256);
    assert_eq!(
        (r.cpu_period, r.cpu_quota),
        (100_000, 0),
        "no CPU limit, no quota"
    );
    assert_eq!(r.memory_limit_in_bytes, 2 << 30);
    // 1000 - 1000 * 1Gi / 10Gi
    assert_eq!(r.oom_score_adj, 900);
}

#[test]
fn resources_best_effort() {
    let r = build(&pod_with(vec![container("app")]), 0, 0).linux;
    assert_eq!(
        r,
        LinuxResources {
            cpu_period: 100_000,
            cpu_quota: 0,
            cpu_shares: 2,
            memory_limit_in_bytes: 0,
            oom_score_adj: 1000,
            cpuset_cpus: String::new(),
            hugepage_limits: Vec::new(),
        }
    );
}

#[test]
fn resources_without_cfs_quota_or_with_custom_period() {
    let mut c = container("app");
    c.resources = resources(&[("cpu", "100m")], &[("cpu", "1")]);
    let p = pod_with(vec![c]);
    let mut cx = ctx();
    cx.cpu_cfs_quota = false;
    let r = container_config(&cx, &p, &p.spec.containers[0], 0, 0)
        .unwrap_or_else(|e| panic!("{e}"))
        .linux;
    assert_eq!((r.cpu_shares, r.cpu_period, r.cpu_quota), (102, 0, 0));
    cx.cpu_cfs_quota = true;
    cx.cpu_cfs_quota_period_us = 50_000;
    let r = container_config(&cx, &p, &p.spec.containers[0], 0, 0)
        .unwrap_or_else(|e| panic!("{e}"))
        .linux;
    assert_eq!((r.cpu_period, r.cpu_quota), (50_000, 50_000));
}

#[test]
fn context_from_config() {
    use crate::domain::config::{self, flags::flag, ConfigInputs};
    let flags = ["cluster-dns=10.0.0.10", "cluster-domain=k8s.local"]
        .iter()
        .filter_map(|f| f.split_once('='))
        .map(|(name, value)| (flag(name).expect("a known flag"), value.to_owned()))
        .collect();
    let facts = crate::domain::test_support::node_a();
    let resolved =
        config::resolve(&ConfigInputs::from_flags(flags), &facts).expect("valid configuration");
    let c = RequestContext::from_config(&resolved, ResolvConf::default());
    assert_eq!(c.pod_logs_dir, Path::new("/var/log/pods"));
    assert_eq!(c.root_dir, Path::new("/var/lib/kubelet"));
    assert_eq!(c.cluster_dns, vec!["10.0.0.10"]);
    assert_eq!(c.cluster_domain, "k8s.local");
    assert!(c.cpu_cfs_quota);
    assert_eq!(c.cpu_cfs_quota_period_us, 100_000);
    assert_eq!(c.memory_capacity_bytes, facts.machine.memory_capacity_bytes);
}

#[test]
fn volumes_of_api_data_are_mounted_read_only_whatever_the_pod_says() {
    // CVE-2017-1002102: a container that could write a ConfigMap, Secret, downwardAPI
    // or projected volume could swap the writer's `..data` link.
    let mut p = volume_pod(vec![
        vm("cfg", "/etc/cfg", false, ""),
        vm("scratch", "/tmp/s", false, ""),
    ]);
    p.spec.volumes.push(
        serde_json::from_value(serde_json::json!({"name": "cfg", "configMap": {"name": "cfg"}}))
            .unwrap_or_else(|e| panic!("volume: {e}")),
    );
    let mounts = build(&p, 0, 0).mounts;
    let read_only: Vec<(&str, bool)> = mounts
        .iter()
        .map(|m| (m.container_path.as_str(), m.readonly))
        .collect();
    assert_eq!(
        read_only,
        [
            ("/etc/cfg", true),
            ("/tmp/s", false),
            ("/dev/termination-log", false)
        ]
    );
}

#[test]
fn a_sub_path_expr_is_expanded_from_the_environment_and_checked() {
    let mut mount = vm("scratch", "/logs", false, "");
    mount.sub_path_expr = "logs/$(POD_NAME)".into();
    let mut p = volume_pod(vec![mount]);
    p.spec.containers[0].env = vec![EnvVar {
        name: "POD_NAME".into(),
        value: "web-1".into(),
        ..EnvVar::default()
    }];
    let sub = build(&p, 0, 0).mounts[0].sub_path.clone();
    assert_eq!(sub.map(|s| s.path), Some("logs/web-1".into()));
    // An expression that expands out of the volume is refused, not given the volume.
    for (value, want) in [
        (
            "../../etc",
            SubPathError::Backsteps("logs/../../etc".into()),
        ),
        ("", SubPathError::MissingValue(vec!["POD_NAME".into()])),
    ] {
        p.spec.containers[0].env[0].value = value.into();
        let got = container_config(&ctx(), &p, &p.spec.containers[0], 0, 0);
        assert_eq!(got, Err(RequestError::SubPath(want)));
    }
}

#[test]
fn a_self_doubling_environment_is_refused_before_it_grows() {
    // 26 variables each `$(PREV)$(PREV)`: the last would be 64 MiB, all of them 128 MiB.
    let mut c = container("app");
    c.env = vec![EnvVar {
        name: "V0".into(),
        value: "xx".into(),
        ..EnvVar::default()
    }];
    for i in 1..=26 {
        c.env.push(EnvVar {
            name: format!("V{i}"),
            value: format!("$(V{})$(V{})", i - 1, i - 1),
            ..EnvVar::default()
        });
    }
    let p = pod_with(vec![c]);
    let got = container_config(&ctx(), &p, &p.spec.containers[0], 0, 0);
    assert_eq!(
        got.map(|_| ()).map_err(|e| e.to_string()),
        Err(format!(
            "environment variable \"V19\": the container's environment would take more than {} bytes, the most the kernel passes to a process",
            crate::domain::volumes::env::EXEC_ARGS_MAX_BYTES
        ))
    );
    // The command line counts with the environment.
    let mut c = container("app");
    c.env = vec![EnvVar {
        name: "BIG".into(),
        value: "y".repeat(1 << 20),
        ..EnvVar::default()
    }];
    c.args = vec!["$(BIG)".into(), "$(BIG)".into()];
    let p = pod_with(vec![c]);
    let got = container_config(&ctx(), &p, &p.spec.containers[0], 0, 0);
    assert_eq!(
        got.map(|_| ()),
        Err(RequestError::ArgumentsTooLong {
            container: "app".into(),
            limit: crate::domain::volumes::env::EXEC_ARGS_MAX_BYTES
        })
    );
}
