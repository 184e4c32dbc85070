//! v1.26's conversion of a v1 Pod to the internal `core.Pod`
//! (pkg/apis/core/v1/zz_generated.conversion.go and conversion.go): fields
//! are copied by Go name between same-named types, with upstream's
//! hand-written exceptions: the host namespace flags move into the pod's
//! security context, `serviceAccount` stands in for an empty
//! `serviceAccountName`, `status.podIP` feeds `status.podIPs`, a token
//! projection's expiry loses its pointer, and the old init container
//! annotations are dropped.

use std::collections::BTreeMap;

use super::gotype::{StructTy, Ty};
use super::goval::{GoVal, Node, View};
use super::schema::{S_CORE_PODIP, S_CORE_PODSECURITYCONTEXT, T_CORE_POD, T_V1_POD};

/// The annotations the conversion drops (`initContainerAnnotations`).
const INIT_CONTAINER_ANNOTATIONS: [&str; 4] = [
    "pod.beta.kubernetes.io/init-containers",
    "pod.alpha.kubernetes.io/init-containers",
    "pod.beta.kubernetes.io/init-container-statuses",
    "pod.alpha.kubernetes.io/init-container-statuses",
];

/// Converts a v1 Pod value to the internal Pod value.
pub fn pod_to_internal(v1_pod: &GoVal) -> GoVal {
    let mut pod = convert(&T_CORE_POD, &T_V1_POD, v1_pod);
    // Converting to the internal version clears the kind and apiVersion.
    if let Some(type_meta) = Node::new(&T_CORE_POD, &mut pod).field("TypeMeta") {
        *type_meta.val = GoVal::zero(type_meta.ty);
    }
    let Some(v1_spec) = View::new(&T_V1_POD, v1_pod).field("Spec") else {
        return pod;
    };
    let read = |name: &str| -> GoVal {
        v1_spec
            .field(name)
            .map(|n| n.val.clone())
            .unwrap_or(GoVal::Bool(false))
    };

    if let Some(spec) = Node::new(&T_CORE_POD, &mut pod).field("Spec") {
        let (ty, val) = (spec.ty, spec.val);
        if let Some(GoVal::Str(name)) = Node::new(ty, val)
            .field("ServiceAccountName")
            .map(|n| n.val)
        {
            if name.is_empty() {
                if let GoVal::Str(deprecated) = read("DeprecatedServiceAccount") {
                    *name = deprecated;
                }
            }
        }
        if let Some(context) = Node::new(ty, val).field("SecurityContext") {
            if let GoVal::Ptr(inner) = context.val {
                let context = inner.get_or_insert_with(|| {
                    Box::new(GoVal::zero_struct(&S_CORE_PODSECURITYCONTEXT))
                });
                for name in [
                    "HostNetwork",
                    "HostPID",
                    "HostIPC",
                    "ShareProcessNamespace",
                    "HostUsers",
                ] {
                    if let Some(field) = struct_field(&S_CORE_PODSECURITYCONTEXT, context, name) {
                        *field = read(name);
                    }
                }
            }
        }
    }
    pod_ip_conversion(&mut pod, v1_pod);
    drop_init_container_annotations(&mut pod);
    pod
}

fn struct_field<'a>(sty: &StructTy, val: &'a mut GoVal, name: &str) -> Option<&'a mut GoVal> {
    let index = sty.index_of(name)?;
    match val {
        GoVal::Struct(values) => values.get_mut(index),
        _ => None,
    }
}

/// `Convert_v1_PodStatus_To_core_PodStatus`: `podIP` wins over a
/// disagreeing `podIPs`, and fills an empty one.
fn pod_ip_conversion(pod: &mut GoVal, v1_pod: &GoVal) {
    let Some(status) = View::new(&T_V1_POD, v1_pod).field("Status") else {
        return;
    };
    let pod_ip = match status.field("PodIP").map(|n| n.val) {
        Some(GoVal::Str(ip)) => ip.clone(),
        _ => String::new(),
    };
    if pod_ip.is_empty() {
        return;
    }
    let first_ip = match status.field("PodIPs").map(|n| n.val) {
        Some(GoVal::Slice(Some(ips))) => ips.first().map(|ip| match ip {
            GoVal::Struct(fields) => match fields.first() {
                Some(GoVal::Str(s)) => s.clone(),
                _ => String::new(),
            },
            _ => String::new(),
        }),
        _ => None,
    };
    if first_ip.as_deref() == Some(pod_ip.as_str()) {
        return;
    }
    if let Some(ips) = Node::new(&T_CORE_POD, pod)
        .field("Status")
        .and_then(|s| s.field("PodIPs"))
    {
        let mut entry = GoVal::zero_struct(&S_CORE_PODIP);
        if let Some(ip) = struct_field(&S_CORE_PODIP, &mut entry, "IP") {
            *ip = GoVal::Str(pod_ip);
        }
        *ips.val = GoVal::Slice(Some(vec![entry]));
    }
}

/// `dropInitContainerAnnotations`: a new map without them, only when one
/// is present.
fn drop_init_container_annotations(pod: &mut GoVal) {
    let Some(annotations) = Node::new(&T_CORE_POD, pod)
        .field("ObjectMeta")
        .and_then(|m| m.field("Annotations"))
    else {
        return;
    };
    if let GoVal::Map(Some(map)) = annotations.val {
        if INIT_CONTAINER_ANNOTATIONS
            .iter()
            .any(|k| map.contains_key(*k))
        {
            let kept: BTreeMap<String, GoVal> = map
                .iter()
                .filter(|(k, _)| !INIT_CONTAINER_ANNOTATIONS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            *map = kept;
        }
    }
}

/// Converts a value of v1 type `from` to internal type `to`, field by Go
/// name; a field with no counterpart stays zero (the exceptions above
/// fill them).
fn convert(to: &'static Ty, from: &'static Ty, val: &GoVal) -> GoVal {
    match (to, from, val) {
        (Ty::Struct(to_s), Ty::Struct(from_s), GoVal::Struct(values)) => {
            let fields = to_s
                .fields
                .iter()
                .map(|field| match from_s.index_of(field.name) {
                    Some(i) => match (from_s.fields.get(i), values.get(i)) {
                        (Some(from_field), Some(v)) => convert(field.ty, from_field.ty, v),
                        _ => GoVal::zero(field.ty),
                    },
                    None => GoVal::zero(field.ty),
                })
                .collect();
            GoVal::Struct(fields)
        }
        (Ty::Ptr(to_e), Ty::Ptr(from_e), GoVal::Ptr(inner)) => {
            GoVal::Ptr(inner.as_ref().map(|v| Box::new(convert(to_e, from_e, v))))
        }
        // `*int64` to `int64` (a token projection's expiry): nil is zero.
        (to_ty, Ty::Ptr(from_e), GoVal::Ptr(inner)) => match inner {
            Some(v) => convert(to_ty, from_e, v),
            None => GoVal::zero(to_ty),
        },
        (Ty::Slice(_, to_e), Ty::Slice(_, from_e), GoVal::Slice(items)) => GoVal::Slice(
            items
                .as_ref()
                .map(|items| items.iter().map(|v| convert(to_e, from_e, v)).collect()),
        ),
        (Ty::Map(_, _, to_v), Ty::Map(_, _, from_v), GoVal::Map(map)) => {
            GoVal::Map(map.as_ref().map(|map| {
                map.iter()
                    .map(|(k, v)| (k.clone(), convert(to_v, from_v, v)))
                    .collect()
            }))
        }
        // Scalars and the hand-modelled types are the same value.
        (_, _, v) => v.clone(),
    }
}
