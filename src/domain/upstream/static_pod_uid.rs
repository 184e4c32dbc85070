//! The UID upstream v1.26 gives a static pod whose manifest names none
//! (pkg/kubelet/config/common.go `applyDefaults`): MD5 over go-spew's
//! `%#v` of the `*core.Pod` the manifest decodes to (the internal type,
//! after the v1 defaults and the conversion, before the kubelet renames
//! it or adds annotations), then `host:<node>` and `file:<path>` for a
//! manifest file, or only `url:<url>` for a manifest URL; hex-encoded.

use md5::{Digest, Md5};

use super::container_hash::v1_26_hash;
use super::convert::pod_to_internal;
use super::decode::{decode, DecodeError};
use super::defaults::set_object_defaults_pod;
use super::gojson::GoJson;
use super::goval::{GoVal, Node};
use super::schema::{T_CORE_POD, T_V1_POD};
use super::spew::spew_pointer_to;
use super::IdentityError;

/// Where a static pod came from, as the UID mixes it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UidSource<'a> {
    /// A manifest file: the node's name and the file's path as upstream
    /// names it (the folder joined with the file name, cleaned).
    File { node: &'a str, path: &'a str },
    /// A manifest URL. Upstream does not mix in the node.
    Url { url: &'a str },
}

/// What upstream v1.26 derives from one pod of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamPod {
    /// The UID upstream gives the pod when its manifest names none.
    pub uid: String,
    /// v1.26's hash of each init and regular container, by name.
    pub container_hashes: Vec<(String, u32)>,
}

/// The pod documents of a manifest's JSON: the items of a v1 `PodList`,
/// else the document itself.
pub fn pod_items(document: &GoJson) -> Vec<&GoJson> {
    let is_list = matches!(document.get("kind"), Some(GoJson::String(k)) if k == "PodList");
    if !is_list {
        return vec![document];
    }
    match document.get("items") {
        Some(GoJson::Array(items)) => items.iter().collect(),
        _ => Vec::new(),
    }
}

/// Upstream's UID and container hashes for one pod document.
pub fn upstream_pod(item: &GoJson, source: UidSource<'_>) -> Result<UpstreamPod, IdentityError> {
    let mut pod = decode(&T_V1_POD, item).map_err(|e| match e {
        DecodeError::Unreproducible { .. } => IdentityError::Unreproducible(e.to_string()),
        other => IdentityError::Refused(other.to_string()),
    })?;
    set_object_defaults_pod(Node::new(&T_V1_POD, &mut pod));
    let container_hashes = container_hashes(&mut pod);
    let internal = pod_to_internal(&pod);
    let printed = spew_pointer_to(&T_CORE_POD, &internal);

    let mut hasher = Md5::new();
    hasher.update(printed.as_bytes());
    match source {
        UidSource::File { node, path } => {
            hasher.update(format!("host:{node}").as_bytes());
            hasher.update(format!("file:{path}").as_bytes());
        }
        UidSource::Url { url } => hasher.update(format!("url:{url}").as_bytes()),
    }
    let uid = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(UpstreamPod {
        uid,
        container_hashes,
    })
}

fn container_hashes(pod: &mut GoVal) -> Vec<(String, u32)> {
    let mut hashes = Vec::new();
    for list in ["InitContainers", "Containers"] {
        let Some(containers) = Node::new(&T_V1_POD, pod)
            .field("Spec")
            .and_then(|s| s.field(list))
        else {
            continue;
        };
        for container in containers.elems() {
            let hash = v1_26_hash(container.val);
            if let Some(GoVal::Str(name)) = container.field("Name").map(|n| &*n.val) {
                hashes.push((name.clone(), hash));
            }
        }
    }
    hashes
}

/// Go's `path/filepath.Join(dir, name)` on Unix: the parts joined with `/`
/// and cleaned (`Clean`), as upstream names the files of a manifest folder.
pub fn join_clean(dir: &str, name: &str) -> String {
    let joined = match (dir.is_empty(), name.is_empty()) {
        (true, true) => return String::new(),
        (true, false) => name.to_string(),
        (false, true) => dir.to_string(),
        (false, false) => format!("{dir}/{name}"),
    };
    clean(&joined)
}

/// Go's `path.Clean`.
pub fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let body = parts.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".to_string(),
        (false, false) => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_like_go() {
        let cases = [
            ("", "."),
            ("/", "/"),
            ("/etc//kubernetes/./manifests/", "/etc/kubernetes/manifests"),
            ("a/../..", ".."),
            ("/../a", "/a"),
            ("./m.yaml", "m.yaml"),
        ];
        for (path, want) in cases {
            assert_eq!(clean(path), want, "{path:?}");
        }
        assert_eq!(
            join_clean("/etc/kubernetes/manifests/", "a.yaml"),
            "/etc/kubernetes/manifests/a.yaml"
        );
    }

    #[test]
    fn spew_of_a_minimal_pod() {
        let doc = GoJson::parse(
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i:1"}]}}"#,
        )
        .expect("json");
        let mut pod = decode(&T_V1_POD, &doc).expect("decodes");
        set_object_defaults_pod(Node::new(&T_V1_POD, &mut pod));
        let printed = spew_pointer_to(&T_CORE_POD, &pod_to_internal(&pod));
        assert!(
            printed.starts_with("(*core.Pod){TypeMeta:(v1.TypeMeta){Kind:(string) APIVersion:(string)} ObjectMeta:(v1.ObjectMeta){Name:(string)p GenerateName:(string) Namespace:(string) "),
            "{printed}"
        );
        for part in [
            "CreationTimestamp:(v1.Time){Time:(time.Time){wall:(uint64)0 ext:(int64)0 loc:(*time.Location)<nil>}}",
            "Labels:(map[string]string)<nil>",
            "RestartPolicy:(core.RestartPolicy)Always TerminationGracePeriodSeconds:(*int64)30",
            "SecurityContext:(*core.PodSecurityContext){HostNetwork:(bool)false",
            "ImagePullPolicy:(core.PullPolicy)IfNotPresent",
            "EnableServiceLinks:(*bool)true",
            "Containers:([]core.Container)[{Name:(string)c Image:(string)i:1 Command:([]string)<nil>",
        ] {
            assert!(printed.contains(part), "missing {part} in {printed}");
        }
    }
}
