use std::collections::BTreeMap;
use std::path::Path;

use super::downward::{field_value, format_map, resource_value};
use super::env::{is_env_var_name, resolve_environment, EnvError};
use super::payload::{
    payload_change, validate_path, FileProjection, FilesOwnership, Payload, VolumeOwners,
};
use super::plan::{
    check_host_path, plan_volumes, FileKind, HostPathStep, HostPathType, VolumeAction,
};
use super::token::{requires_refresh, IssuedToken};
use super::*;
use crate::domain::kuberuntime::requests::RequestContext;
use crate::domain::pod::*;
use crate::domain::units::quantity::Quantity;

fn ctx() -> RequestContext {
    RequestContext {
        pod_logs_dir: "/var/log/pods".into(),
        root_dir: "/var/lib/kubelet".into(),
        host_dns: Default::default(),
        cluster_dns: Vec::new(),
        cluster_domain: "cluster.local".into(),
        cpu_cfs_quota: true,
        cpu_cfs_quota_period_us: 100_000,
        memory_capacity_bytes: 0,
        hugepage_sizes: Vec::new(),
        security: Default::default(),
    }
}

/// A pod decoded from the API's JSON, as the API pod source gives it.
fn pod(json: serde_json::Value) -> Pod {
    serde_json::from_value(json).expect("pod")
}

fn base() -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1",
                     "labels": {"app": "web", "tier": "a\"b"}},
        "spec": {"nodeName": "node1", "serviceAccountName": "sa",
                 "containers": [{"name": "c", "image": "busybox",
                   "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}]}
    })
}

fn cm(data: &[(&str, &str)]) -> Fetched<ConfigMapData> {
    Fetched::Found(ConfigMapData {
        data: data
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        binary_data: BTreeMap::new(),
    })
}

fn facts() -> PodFacts {
    PodFacts {
        pod_ip: "10.0.0.5".into(),
        host_ip: "192.168.1.2".into(),
        allocatable_cpu_milli: 2000,
        allocatable_memory_bytes: 1 << 30,
        ..PodFacts::default()
    }
}

#[test]
fn volume_folders_follow_upstreams_layout() {
    let p = pod(
        serde_json::json!({"metadata": {"uid": "u1"}, "spec": {"volumes": [
        {"name": "cfg", "configMap": {"name": "x"}},
        {"name": "sec", "secret": {"secretName": "s"}},
        {"name": "kube-api-access-abc", "projected": {"sources": []}},
        {"name": "dw", "downwardAPI": {"items": []}},
        {"name": "nfs", "nfs": {"server": "a", "path": "/"}}]}}),
    );
    let paths: Vec<_> = p
        .spec
        .volumes
        .iter()
        .map(|v| {
            volume_source_path(Path::new("/var/lib/kubelet"), &p, v, &PodObjects::default())
                .map(|(path, _)| path)
        })
        .collect();
    assert_eq!(
        paths[0].as_deref(),
        Some(Path::new(
            "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~configmap/cfg"
        ))
    );
    assert_eq!(
        paths[1].as_deref(),
        Some(Path::new(
            "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/sec"
        ))
    );
    assert_eq!(
        paths[2].as_deref(),
        Some(Path::new(
            "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~projected/kube-api-access-abc"
        ))
    );
    assert_eq!(
        paths[3].as_deref(),
        Some(Path::new(
            "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~downward-api/dw"
        ))
    );
    assert_eq!(paths[4], None);
    assert_eq!(
        VolumeKind::of(&p.spec.volumes[4]),
        VolumeKind::Unsupported("nfs".into())
    );
}

#[test]
fn the_kube_api_access_volume_gives_token_ca_and_namespace() {
    let p = pod(serde_json::json!({
    "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
    "spec": {"volumes": [{"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
    ]}}]}}));
    let refs = references(&p);
    let key = TokenKey {
        audience: String::new(),
        expiration_seconds: 3607,
    };
    assert!(refs.config_maps.contains("kube-root-ca.crt"));
    assert!(refs.tokens.contains(&key));
    let mut objects = PodObjects::default();
    objects
        .config_maps
        .insert("kube-root-ca.crt".into(), cm(&[("ca.crt", "PEM")]));
    objects.tokens.insert(key, Fetched::Found("tok".into()));
    let plans = plan_volumes(&ctx(), &p, &objects, &facts());
    let Ok(VolumeAction::Files {
        payload,
        tmpfs,
        dir,
        ownership,
    }) = &plans[0].action
    else {
        panic!("{plans:?}");
    };
    assert!(tmpfs, "a projected volume carries a token: tmpfs");
    assert_eq!(ownership, &FilesOwnership::default(), "no fsGroup, no user");
    assert!(dir.ends_with("kubernetes.io~projected/kube-api-access-x"));
    let file = |d: &str| FileProjection {
        data: d.as_bytes().to_vec(),
        mode: 0o644,
    };
    assert_eq!(
        payload,
        &Payload::from([
            ("token".into(), file("tok")),
            ("ca.crt".into(), file("PEM")),
            ("namespace".into(), file("ns")),
        ])
    );
}

#[test]
fn a_config_map_volume_has_items_modes_and_optional() {
    let mut p = pod(
        serde_json::json!({"metadata": {"namespace": "ns", "uid": "u"}, "spec": {"volumes": [
        {"name": "all", "configMap": {"name": "cfg", "defaultMode": 0o600}},
        {"name": "some", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "dir/a.txt", "mode": 0o400}]}},
        {"name": "missing", "configMap": {"name": "nope"}},
        {"name": "optional", "configMap": {"name": "nope", "optional": true}},
        {"name": "badkey", "configMap": {"name": "cfg", "items": [{"key": "zz", "path": "z"}]}}]}}),
    );
    let mut objects = PodObjects::default();
    objects
        .config_maps
        .insert("cfg".into(), cm(&[("a", "1"), ("b", "2")]));
    objects.config_maps.insert("nope".into(), Fetched::NotFound);
    let plans = plan_volumes(&ctx(), &p, &objects, &facts());
    let payload = |i: usize| match &plans[i].action {
        Ok(VolumeAction::Files { payload, .. }) => payload.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(payload(0).len(), 2);
    assert_eq!(payload(0)["a"].mode, 0o600);
    assert_eq!(payload(1)["dir/a.txt"].mode, 0o400);
    assert_eq!(
        plans[2].action.as_ref().err().map(|e| e.to_string()),
        Some(
            "MountVolume.SetUp failed for volume \"missing\" : configmap \"nope\" not found".into()
        )
    );
    assert!(payload(3).is_empty());
    assert_eq!(
        plans[4].action.as_ref().err().map(|e| e.kind.to_string()),
        Some("configmap references non-existent config key: zz".into())
    );
    // Without an API client: upstream's words.
    p.spec.volumes.truncate(1);
    let plans = plan_volumes(&ctx(), &p, &PodObjects::default(), &facts());
    assert_eq!(
        plans[0].action.as_ref().err().map(|e| e.kind.to_string()),
        Some("couldn't get configMap ns/cfg, no kubeClient defined".into())
    );
}

#[test]
fn memory_empty_dirs_are_tmpfs_sized_and_hugepages_refused() {
    let p = pod(serde_json::json!({"metadata": {"uid": "u"}, "spec": {
        "containers": [{"name": "c", "resources": {"limits": {"memory": "128Mi"}}}],
        "volumes": [
        {"name": "m", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        {"name": "podlimit", "emptyDir": {"medium": "Memory"}},
        {"name": "disk", "emptyDir": {}},
        {"name": "huge", "emptyDir": {"medium": "HugePages-2Mi"}}]}}));
    let plans = plan_volumes(&ctx(), &p, &PodObjects::default(), &facts());
    let size = |i: usize| match &plans[i].action {
        Ok(VolumeAction::EmptyDir {
            tmpfs_size_bytes, ..
        }) => *tmpfs_size_bytes,
        other => panic!("{other:?}"),
    };
    assert_eq!(size(0), Some(64 << 20));
    assert_eq!(size(1), Some(128 << 20));
    assert_eq!(size(2), None);
    assert!(plans[3]
        .action
        .as_ref()
        .err()
        .is_some_and(|e| e.to_string().contains("HugePages-2Mi")));
}

#[test]
fn host_path_types_are_checked_with_upstreams_messages() {
    let path = Path::new("/etc/x");
    assert_eq!(
        check_host_path(path, HostPathType::DirectoryOrCreate, None),
        Ok(HostPathStep::CreateDirectory)
    );
    assert_eq!(
        check_host_path(path, HostPathType::FileOrCreate, None),
        Ok(HostPathStep::CreateFile)
    );
    assert_eq!(
        check_host_path(path, HostPathType::File, None).map_err(|e| e.to_string()),
        Err("hostPath type check failed: /etc/x is not a file".into())
    );
    assert_eq!(
        check_host_path(path, HostPathType::Socket, Some(FileKind::File))
            .map_err(|e| e.to_string()),
        Err("hostPath type check failed: /etc/x is not a socket file".into())
    );
    assert_eq!(
        check_host_path(path, HostPathType::Directory, Some(FileKind::Directory)),
        Ok(HostPathStep::Ready)
    );
    assert_eq!(
        check_host_path(path, HostPathType::Unset, None),
        Ok(HostPathStep::Ready)
    );
}

#[test]
fn downward_values_are_upstreams() {
    let p = pod(base());
    let f = facts();
    assert_eq!(field_value(&p, "metadata.name", &f).as_deref(), Ok("web"));
    assert_eq!(field_value(&p, "metadata.uid", &f).as_deref(), Ok("u1"));
    assert_eq!(field_value(&p, "spec.nodeName", &f).as_deref(), Ok("node1"));
    assert_eq!(
        field_value(&p, "spec.serviceAccountName", &f).as_deref(),
        Ok("sa")
    );
    assert_eq!(
        field_value(&p, "status.podIP", &f).as_deref(),
        Ok("10.0.0.5")
    );
    assert_eq!(
        field_value(&p, "status.hostIP", &f).as_deref(),
        Ok("192.168.1.2")
    );
    assert_eq!(
        field_value(&p, "metadata.labels", &f).as_deref(),
        Ok("app=\"web\"\ntier=\"a\\\"b\"")
    );
    assert_eq!(
        field_value(&p, "metadata.labels['app']", &f).as_deref(),
        Ok("web")
    );
    assert!(field_value(&p, "spec.bogus", &f).is_err());
    assert_eq!(format_map(&BTreeMap::new()), "");

    let c = &p.spec.containers[0];
    let sel = |r: &str, divisor: Option<&str>| ResourceFieldSelector {
        resource: r.into(),
        divisor: divisor.map(|d| Quantity::parse(d).expect("q")),
        ..ResourceFieldSelector::default()
    };
    let value = |s: ResourceFieldSelector| resource_value(&s, &p, Some(c), &f);
    assert_eq!(value(sel("limits.cpu", None)).as_deref(), Ok("1"));
    assert_eq!(value(sel("limits.cpu", Some("1m"))).as_deref(), Ok("500"));
    assert_eq!(
        value(sel("limits.memory", Some("1Mi"))).as_deref(),
        Ok("64")
    );
    // No request set: 0; no limit set would be node allocatable.
    assert_eq!(value(sel("requests.memory", None)).as_deref(), Ok("0"));
    assert!(value(sel("limits.gpu", None)).is_err());
}

#[test]
fn env_resolves_refs_with_upstreams_messages() {
    let mut json = base();
    json["spec"]["containers"][0]["env"] = serde_json::json!([
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
        {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}},
        {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}},
        {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "zz", "optional": true}}},
        {"name": "URL", "value": "http://$(POD):$(P_b)"}
    ]);
    json["spec"]["containers"][0]["envFrom"] = serde_json::json!([
        {"prefix": "P_", "configMapRef": {"name": "cfg"}}
    ]);
    let p = pod(json);
    let mut objects = PodObjects::default();
    objects.config_maps.insert(
        "cfg".into(),
        cm(&[("a", "1"), ("b", "2"), ("bad key", "x")]),
    );
    objects.secrets.insert(
        "s".into(),
        Fetched::Found(SecretData {
            data: BTreeMap::from([("pw".into(), b"hunter2".to_vec())]),
            kind: String::new(),
        }),
    );
    let service_env = BTreeMap::from([("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into())]);
    let env = resolve_environment(&p, &p.spec.containers[0], &objects, &facts(), &service_env)
        .expect("env");
    let get = |k: &str| {
        env.vars
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("POD"), Some("web"));
    assert_eq!(get("IP"), Some("10.0.0.5"));
    assert_eq!(get("CPU"), Some("500"));
    assert_eq!(get("FROM_CM"), Some("1"));
    assert_eq!(get("FROM_SECRET"), Some("hunter2"));
    assert_eq!(get("OPT"), None);
    assert_eq!(get("P_a"), Some("1"));
    assert_eq!(get("URL"), Some("http://web:2"));
    assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
    assert_eq!(
        env.skipped[0].message(),
        "Keys [P_bad key] from the EnvFrom configMap ns/cfg were skipped since they are considered invalid environment variable names."
    );

    objects.config_maps.insert("cfg".into(), Fetched::NotFound);
    let err = resolve_environment(
        &p,
        &p.spec.containers[0],
        &objects,
        &facts(),
        &BTreeMap::new(),
    );
    assert_eq!(
        err.map_err(|e| e.to_string()),
        Err("configmap \"cfg\" not found".into())
    );
    objects.config_maps.insert("cfg".into(), cm(&[("b", "2")]));
    let err = resolve_environment(
        &p,
        &p.spec.containers[0],
        &objects,
        &facts(),
        &BTreeMap::new(),
    );
    assert_eq!(
        err,
        Err(EnvError::MissingConfigMapKey {
            key: "a".into(),
            namespace: "ns".into(),
            name: "cfg".into()
        })
    );
    assert_eq!(
        err.map_err(|e| e.to_string()),
        Err("couldn't find key a in ConfigMap ns/cfg".into())
    );
}

#[test]
fn a_missing_config_map_holds_the_container_with_create_container_config_error() {
    let mut json = base();
    json["spec"]["containers"][0]["env"] = serde_json::json!([{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}]);
    let p = pod(json);
    let mut inputs = PodInputs::default();
    inputs
        .objects
        .config_maps
        .insert("cfg".into(), Fetched::NotFound);
    let err = crate::domain::kuberuntime::requests::container_config_and_skipped_env(
        &ctx(),
        &p,
        &p.spec.containers[0],
        0,
        0,
        &inputs,
    )
    .err()
    .map(|e| e.to_string());
    assert_eq!(err.as_deref(), Some("configmap \"cfg\" not found"));
}

#[test]
fn env_var_names_as_upstream_validates_them() {
    for ok in ["A", "a_b", "-x", ".x", "A.B-1"] {
        assert!(is_env_var_name(ok), "{ok}");
    }
    for bad in ["", "1A", "a b", ".", "..", "..x", "a=b"] {
        assert!(!is_env_var_name(bad), "{bad}");
    }
}

#[test]
fn payload_paths_and_changes() {
    assert!(validate_path("a/b").is_ok());
    assert!(validate_path("/abs").is_err());
    assert!(validate_path("a/../b").is_err());
    assert!(validate_path("..a").is_err());
    let f = |d: &str, mode| FileProjection {
        data: d.as_bytes().to_vec(),
        mode,
    };
    let old = Payload::from([("a".into(), f("1", 0o644)), ("b".into(), f("2", 0o644))]);
    let same = payload_change(&old, &old.clone());
    assert!(!same.changed && same.removed.is_empty());
    let new = Payload::from([("a".into(), f("1", 0o600))]);
    let change = payload_change(&old, &new);
    assert!(change.changed);
    assert_eq!(change.removed, vec!["b".to_string()]);
}

#[test]
fn tokens_refresh_at_80_percent_of_their_life_or_after_a_day() {
    let t = IssuedToken {
        token: "t".into(),
        issued_unix: 1000,
        expires_unix: 1000 + 600,
    };
    assert!(!requires_refresh(&t, 1000 + 479));
    assert!(requires_refresh(&t, 1000 + 480));
    let long = IssuedToken {
        expires_unix: 1000 + 10 * 86_400,
        ..t
    };
    assert!(!requires_refresh(&long, 1000 + 86_400));
    assert!(requires_refresh(&long, 1000 + 86_401));
}

#[test]
fn a_host_network_pods_ip_is_the_nodes() {
    let node = PodFacts {
        pod_ip: String::new(),
        ..facts()
    };
    let host = pod(serde_json::json!({"metadata": {"uid": "u1"}, "spec": {"hostNetwork": true}}));
    assert_eq!(node.for_pod(&host).pod_ip, "192.168.1.2");
    let own = pod(serde_json::json!({"metadata": {"uid": "u2"}, "spec": {}}));
    assert_eq!(node.for_pod(&own).pod_ip, "");
    // A known IP is kept.
    assert_eq!(facts().for_pod(&host).pod_ip, "10.0.0.5");
}

#[test]
fn downward_api_secret_and_projected_volumes_are_tmpfs_config_maps_are_not() {
    let p = pod(serde_json::json!({
    "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
    "spec": {"volumes": [
        {"name": "dw", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"name": "cfg", "configMap": {"name": "x"}},
        {"name": "sec", "secret": {"secretName": "s"}}
    ]}}));
    let mut objects = PodObjects::default();
    objects.config_maps.insert("x".into(), cm(&[("k", "v")]));
    objects.secrets.insert(
        "s".into(),
        Fetched::Found(SecretData {
            data: BTreeMap::from([("k".into(), b"v".to_vec())]),
            ..SecretData::default()
        }),
    );
    let plans = plan_volumes(&ctx(), &p, &objects, &facts());
    let tmpfs: Vec<bool> = plans
        .iter()
        .map(|plan| match &plan.action {
            Ok(VolumeAction::Files { tmpfs, .. }) => *tmpfs,
            other => panic!("{other:?}"),
        })
        .collect();
    // Upstream's downwardAPI and secret plugins wrap a memory emptyDir; configMap's not.
    assert_eq!(tmpfs, [true, false, true]);
}

/// A pod with a secret volume and a projected one (token and configMap), its security
/// context and its containers' users as given.
fn owned_volumes_pod(pod_sc: serde_json::Value, users: &[Option<i64>]) -> Pod {
    let containers: Vec<serde_json::Value> = users
        .iter()
        .enumerate()
        .map(|(i, user)| match user {
            Some(uid) => serde_json::json!({"name": format!("c{i}"), "image": "busybox",
                "securityContext": {"runAsUser": uid}}),
            None => serde_json::json!({"name": format!("c{i}"), "image": "busybox"}),
        })
        .collect();
    pod(serde_json::json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
        "spec": {"securityContext": pod_sc, "containers": containers, "volumes": [
            {"name": "s", "secret": {"secretName": "s", "defaultMode": 0o440}},
            {"name": "p", "projected": {"defaultMode": 0o400, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "cfg"}}]}}]}
    }))
}

fn owned_volume_plans(p: &Pod) -> Vec<(Payload, FilesOwnership)> {
    let mut objects = PodObjects::default();
    objects.config_maps.insert("cfg".into(), cm(&[("a", "1")]));
    objects.secrets.insert(
        "s".into(),
        Fetched::Found(SecretData {
            data: BTreeMap::from([("data-1".to_owned(), b"value-1".to_vec())]),
            kind: "Opaque".into(),
        }),
    );
    let key = TokenKey {
        audience: String::new(),
        expiration_seconds: 3607,
    };
    objects.tokens.insert(key, Fetched::Found("tok".into()));
    plan_volumes(&ctx(), p, &objects, &facts())
        .into_iter()
        .map(|plan| match plan.action {
            Ok(VolumeAction::Files {
                payload, ownership, ..
            }) => (payload, ownership),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn the_fs_user_is_the_one_user_every_container_runs_as() {
    let owners = |sc, users: &[Option<i64>]| VolumeOwners::of(&owned_volumes_pod(sc, users));
    let none = serde_json::json!({});
    assert_eq!(
        owners(none.clone(), &[Some(1000), Some(1000)]).fs_user,
        Some(1000)
    );
    assert_eq!(
        owners(none.clone(), &[Some(1000), Some(1001)]).fs_user,
        None
    );
    assert_eq!(owners(none.clone(), &[Some(1000), None]).fs_user, None);
    let pod_user = serde_json::json!({"runAsUser": 2000, "fsGroup": 3000});
    assert_eq!(
        owners(pod_user.clone(), &[None, Some(2000)]),
        VolumeOwners {
            fs_user: Some(2000),
            fs_group: Some(3000)
        }
    );
    assert_eq!(owners(pod_user, &[None, Some(1000)]).fs_user, None);
}

/// Upstream's e2e: secrets_volume.go and projected_secret.go "as non-root with
/// defaultMode and fsGroup set" (0440, the group's read bits kept), and
/// service_accounts.go "should set ownership and permission when RunAsUser or FsGroup is
/// present" (the token 0600 for its user, 0640 with an fsGroup).
#[test]
fn volume_files_get_the_fs_group_and_a_token_its_user() {
    let token_and_secret = |sc, users: &[Option<i64>]| {
        let plans = owned_volume_plans(&owned_volumes_pod(sc, users));
        let (secret, secret_owner) = plans[0].clone();
        let (projected, projected_owner) = plans[1].clone();
        (
            secret["data-1"].mode,
            projected["token"].mode,
            projected["a"].mode,
            secret_owner,
            projected_owner,
        )
    };

    // Neither: the volume's modes, root's files.
    let (secret, token, cfg, secret_owner, projected_owner) =
        token_and_secret(serde_json::json!({}), &[None]);
    assert_eq!((secret, token, cfg), (0o440, 0o400, 0o400));
    assert_eq!(secret_owner, FilesOwnership::default());
    assert_eq!(projected_owner, FilesOwnership::default());

    // The user alone: the token is 0600 and the user's; the rest unchanged.
    let (secret, token, cfg, _, projected_owner) =
        token_and_secret(serde_json::json!({"runAsUser": 1000}), &[None]);
    assert_eq!((secret, token, cfg), (0o440, 0o600, 0o400));
    assert_eq!(
        projected_owner.users,
        BTreeMap::from([("token".to_owned(), 1000)])
    );
    assert_eq!(projected_owner.group, None);

    // The group alone: every file readable by it, folders searchable and setgid.
    let (secret, token, cfg, secret_owner, projected_owner) =
        token_and_secret(serde_json::json!({"fsGroup": 1001}), &[None]);
    assert_eq!((secret, token, cfg), (0o440, 0o640, 0o440));
    for owner in [&secret_owner, &projected_owner] {
        assert_eq!(owner.group, Some(1001));
        assert_eq!(owner.dir_mode, 0o2755);
    }
    assert!(projected_owner.users.is_empty());

    // Both.
    let (_, token, _, _, projected_owner) = token_and_secret(
        serde_json::json!({"runAsUser": 1000, "fsGroup": 1001}),
        &[None],
    );
    assert_eq!(token, 0o640);
    assert_eq!(
        projected_owner.users,
        BTreeMap::from([("token".to_owned(), 1000)])
    );
    assert_eq!(projected_owner.group, Some(1001));
}

mod claims {
    use super::*;
    use crate::domain::volumes::claim::{ClaimData, PersistentVolumeData, PersistentVolumeSource};
    use crate::domain::volumes::plan::VolumeErrorKind;

    fn claim_pod(read_only: bool, fs_group: Option<i64>) -> Pod {
        let mut json = base();
        json["spec"]["volumes"] = serde_json::json!([
            {"name": "data", "persistentVolumeClaim": {"claimName": "db", "readOnly": read_only}}
        ]);
        json["spec"]["containers"][0]["volumeMounts"] =
            serde_json::json!([{"name": "data", "mountPath": "/data"}]);
        if let Some(g) = fs_group {
            json["spec"]["securityContext"] = serde_json::json!({"fsGroup": g});
        }
        pod(json)
    }

    fn bound(phase: &str) -> ClaimData {
        ClaimData {
            uid: "claim-uid".into(),
            volume_name: "pv1".into(),
            phase: phase.into(),
            being_deleted: false,
            controller_uid: None,
            capacity: None,
        }
    }

    fn volume(source: PersistentVolumeSource) -> PersistentVolumeData {
        PersistentVolumeData {
            access_modes: Vec::new(),
            claim_uid: Some("claim-uid".into()),
            source,
            volume_mode: String::new(),
            node_affinity: None,
            mount_options: Vec::new(),
            capacity: None,
        }
    }

    fn objects(claim: Fetched<ClaimData>, pv: Option<Fetched<PersistentVolumeData>>) -> PodObjects {
        let mut o = PodObjects::default();
        o.claims.insert("db".into(), claim);
        if let Some(pv) = pv {
            o.persistent_volumes.insert("pv1".into(), pv);
        }
        o
    }

    fn plan_of(p: &Pod, o: &PodObjects, facts: &PodFacts) -> Result<VolumeAction, String> {
        let plans = plan_volumes(&ctx(), p, o, facts);
        plans[0].action.clone().map_err(|e| e.to_string())
    }

    fn host_path_pv() -> Fetched<PersistentVolumeData> {
        Fetched::Found(volume(PersistentVolumeSource::HostPath {
            path: "/srv/db".into(),
            kind: "DirectoryOrCreate".into(),
        }))
    }

    #[test]
    fn a_bound_claim_gives_its_persistent_volumes_path() {
        let p = claim_pod(false, None);
        let o = objects(Fetched::Found(bound("Bound")), Some(host_path_pv()));
        assert_eq!(
            plan_of(&p, &o, &facts()),
            Ok(VolumeAction::HostPath {
                path: "/srv/db".into(),
                kind: HostPathType::DirectoryOrCreate
            })
        );
        assert_eq!(
            volume_source_path(Path::new("/var/lib/kubelet"), &p, &p.spec.volumes[0], &o),
            Some(("/srv/db".into(), false))
        );
        let ro = claim_pod(true, None);
        assert_eq!(
            volume_source_path(Path::new("/var/lib/kubelet"), &ro, &ro.spec.volumes[0], &o),
            Some(("/srv/db".into(), true)),
            "a read-only claim makes every mount read-only"
        );
        assert!(references(&p).claims.contains("db"));
    }

    /// Upstream's desired_state_of_world_populator messages, each ending the volume
    /// manager's wait at once (`Unable to attach or mount volumes`).
    #[test]
    fn a_claim_that_gives_no_volume_is_named_with_upstreams_reason() {
        let p = claim_pod(false, None);
        let prefix = "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: error processing PVC ns/db: ";
        let cases = [
            (
                objects(Fetched::NotFound, None),
                "failed to fetch PVC from API server: persistentvolumeclaims \"db\" not found",
            ),
            (objects(Fetched::Found(bound("Pending")), None), "PVC is not bound"),
            (
                objects(
                    Fetched::Found(ClaimData {
                        being_deleted: true,
                        controller_uid: None,
                        capacity: None,
                        ..bound("Bound")
                    }),
                    None,
                ),
                "PVC is being deleted",
            ),
            (
                objects(
                    Fetched::Found(ClaimData {
                        volume_name: String::new(),
                        ..bound("Bound")
                    }),
                    None,
                ),
                "PVC has empty pvc.Spec.VolumeName",
            ),
            (
                objects(Fetched::Found(bound("Bound")), Some(Fetched::NotFound)),
                "failed to fetch PV pv1 from API server: persistentvolumes \"pv1\" not found",
            ),
            (
                objects(
                    Fetched::Found(bound("Bound")),
                    Some(Fetched::Found(PersistentVolumeData {
                        access_modes: Vec::new(),
                        claim_uid: Some("other".into()),
                        ..volume(PersistentVolumeSource::Local { path: "/x".into() })
                    })),
                ),
                "found PV object pv1 but its pv.Spec.ClaimRef.UID other does not point to claim.UID claim-uid",
            ),
            (
                objects(
                    Fetched::Found(bound("Bound")),
                    Some(Fetched::Found(PersistentVolumeData {
                        access_modes: Vec::new(),
                        claim_uid: None,
                        ..volume(PersistentVolumeSource::Local { path: "/x".into() })
                    })),
                ),
                "found PV object pv1 but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim",
            ),
            (
                objects(
                    Fetched::Found(bound("Bound")),
                    Some(Fetched::Found(PersistentVolumeData {
                        access_modes: Vec::new(),
                        volume_mode: "Block".into(),
                        ..volume(PersistentVolumeSource::Local { path: "/x".into() })
                    })),
                ),
                "volume data has volumeMode Block, but is specified in volumeMounts",
            ),
        ];
        for (o, reason) in cases {
            assert_eq!(plan_of(&p, &o, &facts()), Err(format!("{prefix}{reason}")));
        }
    }

    /// The pod of [`claim_pod`] with the claim's volume as a device of its container.
    fn device_pod(read_only: bool) -> Pod {
        let mut json = serde_json::to_value(claim_pod(read_only, Some(2000))).expect("json");
        json["spec"]["containers"][0]["volumeMounts"] = serde_json::json!([]);
        json["spec"]["containers"][0]["volumeDevices"] =
            serde_json::json!([{"name": "data", "devicePath": "/dev/xvda"}]);
        pod(json)
    }

    /// Upstream's `checkVolumeModeMismatches` and `makeBlockVolumes`: a device needs a
    /// Block volume (rkubelet's from a CSI driver), given to the container from the
    /// link in the pod's folder, `r` when the claim is read-only.
    #[test]
    fn a_block_claim_is_a_device_of_its_container_and_a_filesystem_one_is_refused() {
        let prefix = "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: error processing PVC ns/db: ";
        let p = device_pod(false);
        let csi = |mode: &str| {
            Fetched::Found(PersistentVolumeData {
                volume_mode: mode.into(),
                ..volume(PersistentVolumeSource::Csi(Box::new(
                    crate::domain::volumes::claim::CsiPersistentSource {
                        driver: "hostpath.csi.k8s.io".into(),
                        volume_handle: "h1".into(),
                        ..Default::default()
                    },
                )))
            })
        };
        let filesystem = objects(Fetched::Found(bound("Bound")), Some(csi("")));
        assert_eq!(
            plan_of(&p, &filesystem, &facts()),
            Err(format!(
                "{prefix}volume data has volumeMode Filesystem, but is specified in volumeDevices"
            ))
        );
        let local_block = objects(
            Fetched::Found(bound("Bound")),
            Some(Fetched::Found(PersistentVolumeData {
                volume_mode: "Block".into(),
                ..volume(PersistentVolumeSource::Local {
                    path: "/dev/sdb".into(),
                })
            })),
        );
        assert_eq!(
            plan_of(&p, &local_block, &facts()),
            Err("MountVolume.SetUp failed for volume \"pv1\" : volumeMode Block is given to containers only from a CSI driver's volume by rkubelet (this PersistentVolume is local)".to_owned())
        );
        let mut block = objects(Fetched::Found(bound("Bound")), Some(csi("Block")));
        block.csi_drivers.insert(
            "hostpath.csi.k8s.io".into(),
            Fetched::Found(crate::domain::csi::volume::CsiDriverData::default()),
        );
        let Ok(VolumeAction::Csi(publish)) = plan_of(&p, &block, &facts()) else {
            panic!(
                "published by its driver: {:?}",
                plan_of(&p, &block, &facts())
            );
        };
        let link = "/var/lib/kubelet/pods/u1/volumeDevices/kubernetes.io~csi/pv1";
        assert_eq!(
            publish.block.as_ref().map(|b| b.pod_link.as_path()),
            Some(Path::new(link))
        );
        let devices = |p: &Pod| {
            let inputs = crate::domain::volumes::PodInputs {
                objects: block.clone(),
                ..Default::default()
            };
            crate::domain::kuberuntime::requests::container_config_and_skipped_env(
                &ctx(),
                p,
                &p.spec.containers[0],
                0,
                0,
                &inputs,
            )
            .map(|(config, _)| config.devices)
        };
        let device = |permissions: &str| crate::domain::devices::DeviceSpec {
            container_path: "/dev/xvda".into(),
            host_path: link.into(),
            permissions: permissions.into(),
        };
        assert_eq!(devices(&p), Ok(vec![device("mrw")]));
        assert_eq!(devices(&device_pod(true)), Ok(vec![device("r")]));
        // A device of a volume that gives none: upstream's container error.
        let mut json = serde_json::to_value(&p).expect("json");
        json["spec"]["volumes"] = serde_json::json!([{"name": "data", "emptyDir": {}}]);
        assert_eq!(
            devices(&pod(json)).map_err(|e| e.to_string()),
            Err("cannot find volume \"data\" to pass into container \"c\"".to_owned())
        );
    }

    #[test]
    fn a_local_volume_checks_node_affinity_and_takes_the_fs_group() {
        let affinity: crate::domain::pod::NodeSelector = serde_json::from_value(serde_json::json!(
            {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node1"]}]}]}
        ))
        .expect("selector");
        let local = Fetched::Found(PersistentVolumeData {
            access_modes: Vec::new(),
            node_affinity: Some(affinity),
            ..volume(PersistentVolumeSource::Local {
                path: "/mnt/disks/a".into(),
            })
        });
        let o = objects(Fetched::Found(bound("Bound")), Some(local));
        let mut here = facts();
        here.node_name = "node1".into();
        here.node_labels = BTreeMap::from([("kubernetes.io/hostname".into(), "node1".into())]);
        let p = claim_pod(false, Some(2000));
        let Ok(VolumeAction::Local { path, owner }) = plan_of(&p, &o, &here) else {
            panic!("a local action: {:?}", plan_of(&p, &o, &here));
        };
        assert_eq!(path, Path::new("/mnt/disks/a"));
        assert_eq!(owner.and_then(|s| s.fs_group), Some(2000));
        let ro = claim_pod(true, Some(2000));
        assert!(
            matches!(
                plan_of(&ro, &o, &here),
                Ok(VolumeAction::Local { owner: None, .. })
            ),
            "a read-only claim's files keep their owner"
        );
        let mut elsewhere = here.clone();
        elsewhere
            .node_labels
            .insert("kubernetes.io/hostname".into(), "node2".into());
        assert_eq!(
            plan_of(&p, &o, &elsewhere),
            Err("MountVolume.NodeAffinity check failed for volume \"pv1\" : no matching NodeSelectorTerms".into())
        );
    }

    /// Upstream's `volumeRequiresFSResize`: only a claim of a CSI volume whose
    /// PersistentVolume's capacity passed the claim's status capacity; a read-only one
    /// is not grown, and its claim is named for the warning.
    #[test]
    fn a_claims_csi_volume_is_grown_once_its_volumes_capacity_passes_the_claims() {
        use crate::domain::node_status::model::ObjectReference;
        use crate::domain::volumes::claim::{
            node_expansion, CsiPersistentSource, NodeExpansion, NodeResize,
        };
        let csi = PersistentVolumeSource::Csi(Box::new(CsiPersistentSource {
            driver: "d".into(),
            volume_handle: "h".into(),
            ..CsiPersistentSource::default()
        }));
        let grown = |source: PersistentVolumeSource, pv: Option<&str>, claim: Option<&str>| {
            let mut c = bound("Bound");
            c.capacity = claim.map(str::to_owned);
            let v = PersistentVolumeData {
                capacity: pv.map(str::to_owned),
                ..volume(source)
            };
            objects(Fetched::Found(c), Some(Fetched::Found(v)))
        };
        let p = claim_pod(false, None);
        let o = grown(csi.clone(), Some("2Gi"), Some("1Gi"));
        assert_eq!(
            node_expansion(&p, &p.spec.volumes[0], &o),
            Some(NodeResize::Grow(NodeExpansion {
                claim: ObjectReference {
                    kind: "PersistentVolumeClaim".into(),
                    namespace: p.metadata.namespace.clone(),
                    name: "db".into(),
                    uid: "claim-uid".into(),
                    api_version: "v1".into(),
                    field_path: String::new(),
                },
                new_capacity: "2Gi".into(),
                new_size_bytes: 2 << 30,
            }))
        );
        let ro = claim_pod(true, None);
        let Some(NodeResize::ReadOnly { claim }) = node_expansion(&ro, &ro.spec.volumes[0], &o)
        else {
            panic!("a read-only claim is not grown");
        };
        assert_eq!(
            (claim.kind.as_str(), claim.name.as_str(), claim.uid.as_str()),
            ("PersistentVolumeClaim", "db", "claim-uid"),
            "the claim, for its event"
        );
        let same_size = grown(csi.clone(), Some("1Gi"), Some("1Gi"));
        assert_eq!(
            node_expansion(&ro, &ro.spec.volumes[0], &same_size),
            None,
            "a read-only claim not grown: no warning"
        );
        for (source, pv, claim) in [
            (csi.clone(), Some("1Gi"), Some("1024Mi")),
            (csi.clone(), Some("2Gi"), None),
            (csi.clone(), None, Some("1Gi")),
            (
                PersistentVolumeSource::Local { path: "/x".into() },
                Some("2Gi"),
                Some("1Gi"),
            ),
        ] {
            let o = grown(source, pv, claim);
            assert_eq!(
                node_expansion(&p, &p.spec.volumes[0], &o),
                None,
                "{pv:?} {claim:?}"
            );
        }
    }

    /// Upstream's checkMountOptionSupport refuses a hostPath volume's `mountOptions`;
    /// rkubelet refuses a local volume's too (it does not bind-mount the folder first).
    #[test]
    fn mount_options_of_host_path_and_local_volumes_are_refused() {
        let p = claim_pod(false, None);
        for (source, reason) in [
            (
                PersistentVolumeSource::HostPath {
                    path: "/srv/db".into(),
                    kind: String::new(),
                },
                "mount options are not supported for this volume type",
            ),
            (
                PersistentVolumeSource::Local {
                    path: "/mnt/disks/a".into(),
                },
                "mount options are not supported for this volume type by rkubelet (a local volume's folder is given to the container as it is, not mounted with its options)",
            ),
        ] {
            let with_options = PersistentVolumeData {
                mount_options: vec!["noatime".into()],
                capacity: None,
                ..volume(source)
            };
            let o = objects(Fetched::Found(bound("Bound")), Some(Fetched::Found(with_options)));
            assert_eq!(
                plan_of(&p, &o, &facts()),
                Err(format!(
                    "MountVolume.MountOptionSupport check failed for volume \"pv1\" : {reason}"
                ))
            );
        }
    }

    #[test]
    fn a_persistent_volume_of_another_plugin_is_refused_naming_it() {
        let p = claim_pod(false, None);
        let o = objects(
            Fetched::Found(bound("Bound")),
            Some(Fetched::Found(volume(PersistentVolumeSource::Other(
                "csi".into(),
            )))),
        );
        let plans = plan_volumes(&ctx(), &p, &o, &facts());
        assert_eq!(plans[0].spec_name, "pv1");
        let Err(e) = &plans[0].action else {
            panic!("refused");
        };
        assert!(matches!(&e.kind, VolumeErrorKind::Unsupported { plugin } if plugin == "csi"));
        assert!(
            e.to_string().starts_with(
                "MountVolume.SetUp failed for volume \"pv1\" : the \"csi\" volume plugin"
            ),
            "{e}"
        );
    }
}

#[test]
fn a_generic_ephemeral_volume_reads_its_pods_own_claim() {
    use super::claim::{ClaimData, PersistentVolumeData, PersistentVolumeSource};
    let mut json = base();
    json["spec"]["volumes"] = serde_json::json!([
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}
    ]);
    json["spec"]["containers"][0]["volumeMounts"] =
        serde_json::json!([{"name": "scratch", "mountPath": "/scratch"}]);
    let p = pod(json);
    assert_eq!(
        references(&p).claims.into_iter().collect::<Vec<_>>(),
        vec!["web-scratch"]
    );
    let claim = |owner: Option<&str>| ClaimData {
        uid: "c".into(),
        volume_name: "pv1".into(),
        phase: "Bound".into(),
        being_deleted: false,
        controller_uid: owner.map(str::to_owned),
        capacity: None,
    };
    let mut o = PodObjects::default();
    o.persistent_volumes.insert(
        "pv1".into(),
        Fetched::Found(PersistentVolumeData {
            access_modes: Vec::new(),
            claim_uid: Some("c".into()),
            source: PersistentVolumeSource::HostPath {
                path: "/srv/x".into(),
                kind: String::new(),
            },
            volume_mode: String::new(),
            node_affinity: None,
            mount_options: Vec::new(),
            capacity: None,
        }),
    );
    o.claims.insert(
        "web-scratch".into(),
        Fetched::Found(claim(Some("someone-else"))),
    );
    let plans = plan_volumes(&ctx(), &p, &o, &facts());
    assert_eq!(
        plans[0].action.clone().map_err(|e| e.to_string()),
        Err("Unable to attach or mount volumes: unmounted volumes=[scratch], unattached volumes=[scratch]: PVC ns/web-scratch was not created for pod ns/web (pod is not owner)".into())
    );
    o.claims
        .insert("web-scratch".into(), Fetched::Found(claim(Some("u1"))));
    let plans = plan_volumes(&ctx(), &p, &o, &facts());
    assert!(
        matches!(&plans[0].action, Ok(VolumeAction::HostPath { path, .. }) if path == Path::new("/srv/x")),
        "{:?}",
        plans[0].action
    );
}
