//! v1.26's defaulting of a decoded v1 Pod (`SetObjectDefaults_Pod` in
//! pkg/apis/core/v1/zz_generated.defaults.go and the `SetDefaults_*`
//! functions of pkg/apis/core/v1/defaults.go), in upstream's order, on the
//! Go value of the pod. Static pods go through it because upstream decodes
//! them with the API machinery's defaulting decoder.

use super::gotype::Ty;
use super::goval::{GoVal, Node};
use super::reference::default_pull_policy;
use super::schema::{S_V1_EMPTYDIRVOLUMESOURCE, S_V1_PODSECURITYCONTEXT};

/// The mode upstream gives secret, config map, downward API and projected
/// volumes (0644).
const DEFAULT_VOLUME_MODE: i64 = 0o644;

/// Applies every default `SetObjectDefaults_Pod` applies to a v1 Pod.
pub fn set_object_defaults_pod(pod: Node<'_>) {
    let Some(pod) = pod.deref() else {
        return;
    };
    let (ty, val) = (pod.ty, pod.val);
    set_defaults_pod(Node::new(ty, val));
    if let Some(spec) = Node::new(ty, val).field("Spec") {
        set_defaults_pod_spec(spec);
    }
    if let Some(spec) = Node::new(ty, val).field("Spec") {
        let (spec_ty, spec_val) = (spec.ty, spec.val);
        if let Some(volumes) = Node::new(spec_ty, spec_val).field("Volumes") {
            volumes.elems().into_iter().for_each(volume_defaults);
        }
        for list in ["InitContainers", "Containers"] {
            if let Some(containers) = Node::new(spec_ty, spec_val).field(list) {
                containers.elems().into_iter().for_each(container_defaults);
            }
        }
        if let Some(ephemeral) = Node::new(spec_ty, spec_val).field("EphemeralContainers") {
            for container in ephemeral.elems() {
                if let Some(common) = container.field("EphemeralContainerCommon") {
                    container_defaults(common);
                }
            }
        }
        if let Some(overhead) = Node::new(spec_ty, spec_val).field("Overhead") {
            round_up_resource_list(overhead);
        }
    }
}

/// `SetDefaults_Pod`: requests copied from limits, service links on.
fn set_defaults_pod(pod: Node<'_>) {
    let Some(spec) = pod.field("Spec") else {
        return;
    };
    let (ty, val) = (spec.ty, spec.val);
    for list in ["Containers", "InitContainers"] {
        let Some(containers) = Node::new(ty, val).field(list) else {
            continue;
        };
        for container in containers.elems() {
            let Some(resources) = container.field("Resources") else {
                continue;
            };
            let (rty, rval) = (resources.ty, resources.val);
            let limits = match Node::new(rty, rval).field("Limits").map(|n| n.val.clone()) {
                Some(GoVal::Map(Some(limits))) => limits,
                _ => continue,
            };
            if let Some(requests) = Node::new(rty, rval).field("Requests") {
                if let GoVal::Map(map) = requests.val {
                    let map = map.get_or_insert_with(Default::default);
                    for (key, value) in limits {
                        map.entry(key).or_insert(value);
                    }
                }
            }
        }
    }
    if let Some(links) = Node::new(ty, val).field("EnableServiceLinks") {
        links.default_ptr(GoVal::Bool(true));
    }
}

/// `SetDefaults_PodSpec`.
fn set_defaults_pod_spec(spec: Node<'_>) {
    let (ty, val) = (spec.ty, spec.val);
    let field = |val: &mut GoVal, name: &str, f: &dyn Fn(Node<'_>)| {
        if let Some(node) = Node::new(ty, val).field(name) {
            f(node);
        }
    };
    field(val, "DNSPolicy", &|n| n.default_str("ClusterFirst"));
    field(val, "RestartPolicy", &|n| n.default_str("Always"));
    let host_network = matches!(
        Node::new(ty, val).field("HostNetwork").map(|n| &*n.val),
        Some(GoVal::Bool(true))
    );
    if host_network {
        for list in ["Containers", "InitContainers"] {
            field(val, list, &|containers| {
                for container in containers.elems() {
                    let Some(ports) = container.field("Ports") else {
                        continue;
                    };
                    for port in ports.elems() {
                        let (pty, pval) = (port.ty, port.val);
                        let container_port = match Node::new(pty, pval).field("ContainerPort") {
                            Some(Node {
                                val: GoVal::Int(p), ..
                            }) => *p,
                            _ => 0,
                        };
                        if let Some(host_port) = Node::new(pty, pval).field("HostPort") {
                            host_port.default_int(container_port);
                        }
                    }
                }
            });
        }
    }
    field(val, "SecurityContext", &|n| {
        n.default_ptr(GoVal::zero_struct(&S_V1_PODSECURITYCONTEXT))
    });
    field(val, "TerminationGracePeriodSeconds", &|n| {
        n.default_ptr(GoVal::Int(30))
    });
    field(val, "SchedulerName", &|n| {
        n.default_str("default-scheduler")
    });
}

fn volume_defaults(volume: Node<'_>) {
    let Some(source) = volume.field("VolumeSource") else {
        return;
    };
    let (ty, val) = (source.ty, source.val);
    // SetDefaults_Volume: a volume of no kind is an emptyDir.
    if let GoVal::Struct(fields) = &*val {
        if fields.iter().all(|f| matches!(f, GoVal::Ptr(None))) {
            if let Some(empty_dir) = Node::new(ty, val).field("EmptyDir") {
                empty_dir.default_ptr(GoVal::zero_struct(&S_V1_EMPTYDIRVOLUMESOURCE));
            }
        }
    }
    let source = |val: &mut GoVal, name: &str, f: &dyn Fn(Node<'_>)| {
        if let Some(node) = Node::new(ty, val).field(name).and_then(Node::deref) {
            f(node);
        }
    };
    source(val, "HostPath", &|s| {
        if let Some(t) = s.field("Type") {
            t.default_ptr(GoVal::Str(String::new()));
        }
    });
    source(val, "Secret", &default_mode);
    source(val, "ISCSI", &|s| {
        if let Some(n) = s.field("ISCSIInterface") {
            n.default_str("default");
        }
    });
    source(val, "RBD", &|s| {
        let (ty, val) = (s.ty, s.val);
        for (name, default) in [
            ("RBDPool", "rbd"),
            ("RadosUser", "admin"),
            ("Keyring", "/etc/ceph/keyring"),
        ] {
            if let Some(n) = Node::new(ty, val).field(name) {
                n.default_str(default);
            }
        }
    });
    source(val, "DownwardAPI", &|s| {
        let (ty, val) = (s.ty, s.val);
        default_mode(Node::new(ty, val));
        if let Some(items) = Node::new(ty, val).field("Items") {
            items.elems().into_iter().for_each(field_ref_defaults);
        }
    });
    source(val, "ConfigMap", &default_mode);
    source(val, "AzureDisk", &|s| {
        let (ty, val) = (s.ty, s.val);
        for (name, default) in [
            ("CachingMode", GoVal::Str("ReadWrite".into())),
            ("Kind", GoVal::Str("Shared".into())),
            ("FSType", GoVal::Str("ext4".into())),
            ("ReadOnly", GoVal::Bool(false)),
        ] {
            if let Some(n) = Node::new(ty, val).field(name) {
                n.default_ptr(default);
            }
        }
    });
    source(val, "Projected", &|s| {
        let (ty, val) = (s.ty, s.val);
        default_mode(Node::new(ty, val));
        let Some(sources) = Node::new(ty, val).field("Sources") else {
            return;
        };
        for projection in sources.elems() {
            let (pty, pval) = (projection.ty, projection.val);
            if let Some(items) = Node::new(pty, pval)
                .field("DownwardAPI")
                .and_then(Node::deref)
                .and_then(|d| d.field("Items"))
            {
                items.elems().into_iter().for_each(field_ref_defaults);
            }
            if let Some(expiry) = Node::new(pty, pval)
                .field("ServiceAccountToken")
                .and_then(Node::deref)
                .and_then(|t| t.field("ExpirationSeconds"))
            {
                expiry.default_ptr(GoVal::Int(3600));
            }
        }
    });
    source(val, "ScaleIO", &|s| {
        let (ty, val) = (s.ty, s.val);
        for (name, default) in [("StorageMode", "ThinProvisioned"), ("FSType", "xfs")] {
            if let Some(n) = Node::new(ty, val).field(name) {
                n.default_str(default);
            }
        }
    });
    source(val, "Ephemeral", &|s| {
        let Some(spec) = s
            .field("VolumeClaimTemplate")
            .and_then(Node::deref)
            .and_then(|t| t.field("Spec"))
        else {
            return;
        };
        let (ty, val) = (spec.ty, spec.val);
        if let Some(mode) = Node::new(ty, val).field("VolumeMode") {
            mode.default_ptr(GoVal::Str("Filesystem".into()));
        }
        if let Some(resources) = Node::new(ty, val).field("Resources") {
            round_up_requirements(resources);
        }
    });
}

fn default_mode(source: Node<'_>) {
    if let Some(mode) = source.field("DefaultMode") {
        mode.default_ptr(GoVal::Int(DEFAULT_VOLUME_MODE));
    }
}

/// `SetDefaults_ObjectFieldSelector` on an item's `fieldRef`.
fn field_ref_defaults(item: Node<'_>) {
    if let Some(api_version) = item
        .field("FieldRef")
        .and_then(Node::deref)
        .and_then(|f| f.field("APIVersion"))
    {
        api_version.default_str("v1");
    }
}

/// `SetDefaults_Container` and the per-field defaults the generated code
/// applies to a container (ports, env, resources, probes, lifecycle).
pub fn container_defaults(container: Node<'_>) {
    let (ty, val) = (container.ty, container.val);
    let image = match Node::new(ty, val).field("Image").map(|n| &*n.val) {
        Some(GoVal::Str(image)) => image.clone(),
        _ => String::new(),
    };
    let with = |val: &mut GoVal, name: &str, f: &dyn Fn(Node<'_>)| {
        if let Some(node) = Node::new(ty, val).field(name) {
            f(node);
        }
    };
    with(val, "ImagePullPolicy", &|n| {
        n.default_str(default_pull_policy(&image))
    });
    with(val, "TerminationMessagePath", &|n| {
        n.default_str("/dev/termination-log")
    });
    with(val, "TerminationMessagePolicy", &|n| n.default_str("File"));
    with(val, "Ports", &|ports| {
        for port in ports.elems() {
            if let Some(protocol) = port.field("Protocol") {
                protocol.default_str("TCP");
            }
        }
    });
    with(val, "Env", &|env| {
        for var in env.elems() {
            if let Some(value_from) = var.field("ValueFrom").and_then(Node::deref) {
                field_ref_defaults(value_from);
            }
        }
    });
    with(val, "Resources", &round_up_requirements);
    for probe in ["LivenessProbe", "ReadinessProbe", "StartupProbe"] {
        with(val, probe, &probe_defaults);
    }
    with(val, "Lifecycle", &|lifecycle| {
        let Some(lifecycle) = lifecycle.deref() else {
            return;
        };
        let (lty, lval) = (lifecycle.ty, lifecycle.val);
        for hook in ["PostStart", "PreStop"] {
            if let Some(http_get) = Node::new(lty, lval)
                .field(hook)
                .and_then(Node::deref)
                .and_then(|h| h.field("HTTPGet"))
            {
                http_get_defaults(http_get);
            }
        }
    });
}

/// `SetDefaults_Probe` and its handler's defaults.
fn probe_defaults(probe: Node<'_>) {
    let Some(probe) = probe.deref() else {
        return;
    };
    let (ty, val) = (probe.ty, probe.val);
    for (name, default) in [
        ("TimeoutSeconds", 1),
        ("PeriodSeconds", 10),
        ("SuccessThreshold", 1),
        ("FailureThreshold", 3),
    ] {
        if let Some(n) = Node::new(ty, val).field(name) {
            n.default_int(default);
        }
    }
    let Some(handler) = Node::new(ty, val).field("ProbeHandler") else {
        return;
    };
    let (hty, hval) = (handler.ty, handler.val);
    if let Some(http_get) = Node::new(hty, hval).field("HTTPGet") {
        http_get_defaults(http_get);
    }
    if let Some(service) = Node::new(hty, hval)
        .field("GRPC")
        .and_then(Node::deref)
        .and_then(|g| g.field("Service"))
    {
        service.default_ptr(GoVal::Str(String::new()));
    }
}

/// `SetDefaults_HTTPGetAction` on a (possibly nil) `*HTTPGetAction`.
fn http_get_defaults(http_get: Node<'_>) {
    let Some(action) = http_get.deref() else {
        return;
    };
    let (ty, val) = (action.ty, action.val);
    if let Some(path) = Node::new(ty, val).field("Path") {
        path.default_str("/");
    }
    if let Some(scheme) = Node::new(ty, val).field("Scheme") {
        scheme.default_str("HTTP");
    }
}

/// `SetDefaults_ResourceList` on a requirements' limits and requests.
fn round_up_requirements(resources: Node<'_>) {
    let (ty, val) = (resources.ty, resources.val);
    for list in ["Limits", "Requests"] {
        if let Some(node) = Node::new(ty, val).field(list) {
            round_up_resource_list(node);
        }
    }
}

/// `SetDefaults_ResourceList`: every quantity rounded up to milli units.
fn round_up_resource_list(list: Node<'_>) {
    if let (Ty::Map(..), GoVal::Map(Some(map))) = (list.ty, list.val) {
        for value in map.values_mut() {
            if let GoVal::Quantity(q) = value {
                q.round_up_to_milli();
            }
        }
    }
}
