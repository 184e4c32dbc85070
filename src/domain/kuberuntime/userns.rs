//! Pods' user namespaces (`spec.hostUsers: false`), upstream's `userns` manager: each such
//! pod gets its own block of 65536 host IDs from the kubelet's range, root in the pod
//! mapped to the block's first ID, the same block for UIDs and GIDs. The block is kept in
//! the pod's folder (`<root-dir>/pods/<uid>/userns`, upstream's file and format) so that a
//! restarted kubelet gives the pod the same IDs and hands that block to nobody else.
//!
//! Whether the runtime can run such a pod is its own to say: CRI `Status` lists its
//! handlers and, for each, whether it supports user namespaces (containerd 2.x with an
//! OCI runtime that does idmapped mounts). A handler that does not fails the sandbox with
//! upstream's reason rather than running the pod as the host's root.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::domain::kuberuntime::requests::{IdMapping, NamespaceMode, UserNamespace};
use crate::domain::pod::Pod;

/// Host IDs each pod gets (upstream's `userNsLength`).
pub const IDS_PER_POD: u32 = 1 << 16;

/// The file in the pod's folder that keeps its block.
pub const MAPPINGS_FILE: &str = "userns";

/// The feature gate that lets pods ask for a user namespace.
pub const FEATURE_GATE: &str = "UserNamespacesSupport";

/// Why a pod gets no user namespace, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsernsError {
    #[error("the feature gate {FEATURE_GATE:?} is disabled: can't set spec.HostUsers")]
    GateDisabled,
    /// The runtime's `Status` lists no handler at all: containerd before 2.0 says
    /// nothing of user namespaces. Upstream's words, with what they mean.
    #[error("runtime handlers are not set: the container runtime does not report which of its handlers support user namespaces (containerd 1.x does not; 2.0 and later do)")]
    HandlersNotSet,
    #[error("the handler {0:?} is not known")]
    UnknownHandler(String),
    #[error("RuntimeClass handler {0:?} does not support user namespaces")]
    Unsupported(String),
    #[error("kubelet user assigned ID {0} is not a multiple of {IDS_PER_POD}")]
    FirstIdNotAligned(u32),
    #[error("kubelet user assigned ID {0} must be greater or equal to {IDS_PER_POD}")]
    FirstIdTooLow(u32),
    #[error("kubelet user assigned IDs length {0} is not a multiple of {IDS_PER_POD}")]
    LengthNotAligned(u32),
    #[error("kubelet user assigned IDs are not enough to support {0} pods")]
    TooFewIds(u32),
    #[error("could not find an empty slot to allocate a user namespace")]
    Exhausted,
    #[error("invalid user namespace mappings file: {0}")]
    Unreadable(String),
    #[error("invalid user namespace configuration: {0}")]
    Invalid(&'static str),
    #[error("wrong user namespace length {0}")]
    WrongLength(u32),
    #[error("wrong user namespace offset specified {0}")]
    WrongOffset(u32),
    #[error("different user namespace range already used by pod {0:?}")]
    OtherRange(String),
    #[error("id {0} is out of range")]
    OutOfRange(u32),
    #[error("range picked for pod {0:?} already taken")]
    Taken(String),
}

/// What a pod's sandbox asks for: `None` leaves the user namespace to the runtime (the
/// node's, as upstream v1.26 sends it), `Some(Pod)` its own, mapped once allocated.
pub fn requested_mode(pod: &Pod) -> Option<NamespaceMode> {
    (pod.spec.host_users == Some(false)).then_some(NamespaceMode::Pod)
}

/// A runtime handler as CRI `Status` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeHandler {
    /// Empty: the runtime's default handler.
    pub name: String,
    pub user_namespaces: bool,
}

/// Whether a pod asking for its own user namespace may have one: the gate on and the
/// pod's handler supporting it (upstream's `HandlerSupportsUserNamespaces`).
pub fn check_handler(
    gate_enabled: bool,
    handlers: &[RuntimeHandler],
    handler: &str,
) -> Result<(), UsernsError> {
    if !gate_enabled {
        return Err(UsernsError::GateDisabled);
    }
    if handlers.is_empty() {
        return Err(UsernsError::HandlersNotSet);
    }
    match handlers.iter().find(|h| h.name == handler) {
        None => Err(UsernsError::UnknownHandler(handler.into())),
        Some(h) if !h.user_namespaces => Err(UsernsError::Unsupported(handler.into())),
        Some(_) => Ok(()),
    }
}

/// The host IDs the kubelet hands out: upstream's default, 65536 up to 2^32, unless the
/// `kubelet` user has subordinate IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeletIdRange {
    pub first: u32,
    pub length: u32,
}

impl KubeletIdRange {
    pub const DEFAULT: KubeletIdRange = KubeletIdRange {
        first: IDS_PER_POD,
        length: u32::MAX - IDS_PER_POD + 1,
    };

    /// The range, checked as upstream checks it: aligned to a pod's block, never
    /// mapping the host's first block (root), large enough for `max_pods`.
    pub fn checked(first: u32, length: u32, max_pods: u32) -> Result<Self, UsernsError> {
        if !first.is_multiple_of(IDS_PER_POD) {
            return Err(UsernsError::FirstIdNotAligned(first));
        }
        if first < IDS_PER_POD {
            return Err(UsernsError::FirstIdTooLow(first));
        }
        if !length.is_multiple_of(IDS_PER_POD) {
            return Err(UsernsError::LengthNotAligned(length));
        }
        if length / IDS_PER_POD < max_pods {
            return Err(UsernsError::TooFewIds(max_pods));
        }
        Ok(KubeletIdRange { first, length })
    }

    /// The `kubelet` user's subordinate IDs from `/etc/subuid` and `/etc/subgid` (what
    /// upstream reads through `getsubids`): its first entry in each, which must agree.
    /// `None` when the user has none (the default range applies).
    pub fn from_subid_files(subuid: &str, subgid: &str) -> Result<Option<(u32, u32)>, String> {
        let entry = |text: &str| -> Result<Option<(u32, u32)>, String> {
            for line in text.lines() {
                let mut parts = line.trim().split(':');
                if parts.next() != Some("kubelet") {
                    continue;
                }
                let (Some(first), Some(length)) = (parts.next(), parts.next()) else {
                    return Err(format!("error parsing line {line:?}: wrong format"));
                };
                let parse = |v: &str| {
                    v.parse::<u32>()
                        .map_err(|e| format!("error parsing line {line:?}: {e}"))
                };
                return Ok(Some((parse(first)?, parse(length)?)));
            }
            Ok(None)
        };
        let (uids, gids) = (entry(subuid)?, entry(subgid)?);
        if uids != gids {
            return Err(
                "error configuring kubelet user namespaces: uids and gids must be equal".into(),
            );
        }
        Ok(uids)
    }
}

/// One block per pod out of the kubelet's range.
#[derive(Debug, Clone)]
pub struct UsernsAllocator {
    first_block: u32,
    blocks: u32,
    used: BTreeSet<u32>,
    used_by: HashMap<String, u32>,
}

/// The persisted form, upstream's JSON (`{"uidMappings":[{"hostId":..}],...}`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MappingsFile {
    uid_mappings: Vec<FileMapping>,
    gid_mappings: Vec<FileMapping>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileMapping {
    host_id: u32,
    container_id: u32,
    length: u32,
}

impl UsernsAllocator {
    pub fn new(range: KubeletIdRange) -> Self {
        UsernsAllocator {
            first_block: range.first / IDS_PER_POD,
            blocks: range.length / IDS_PER_POD,
            used: BTreeSet::new(),
            used_by: HashMap::new(),
        }
    }

    /// The pod's user namespace if it has a block.
    pub fn mappings(&self, pod_uid: &str) -> Option<UserNamespace> {
        self.used_by.get(pod_uid).map(|&first| pod_namespace(first))
    }

    /// Records the block a pod's file names (after a restart, or before using it).
    pub fn record_file(
        &mut self,
        pod_uid: &str,
        content: &[u8],
    ) -> Result<UserNamespace, UsernsError> {
        let file: MappingsFile =
            serde_json::from_slice(content).map_err(|e| UsernsError::Unreadable(e.to_string()))?;
        if file.uid_mappings.len() != 1 {
            return Err(UsernsError::Invalid("no more than one mapping allowed."));
        }
        if file.uid_mappings.len() != file.gid_mappings.len() {
            return Err(UsernsError::Invalid(
                "GID and UID mappings should be identical.",
            ));
        }
        let (uid, gid) = (file.uid_mappings[0], file.gid_mappings[0]);
        if uid != gid {
            return Err(UsernsError::Invalid(
                "GID and UID mapping should be identical",
            ));
        }
        if uid.container_id != 0 {
            return Err(UsernsError::Invalid("UID 0 must be mapped"));
        }
        self.record(pod_uid, uid.host_id, uid.length)?;
        Ok(pod_namespace(uid.host_id))
    }

    fn record(&mut self, pod_uid: &str, from: u32, length: u32) -> Result<(), UsernsError> {
        if length != IDS_PER_POD {
            return Err(UsernsError::WrongLength(length));
        }
        if !from.is_multiple_of(IDS_PER_POD) {
            return Err(UsernsError::WrongOffset(from));
        }
        match self.used_by.get(pod_uid) {
            Some(&previous) if previous == from => return Ok(()),
            Some(_) => return Err(UsernsError::OtherRange(pod_uid.into())),
            None => {}
        }
        let block = (from / IDS_PER_POD)
            .checked_sub(self.first_block)
            .filter(|b| *b < self.blocks)
            .ok_or(UsernsError::OutOfRange(from))?;
        if !self.used.insert(block) {
            return Err(UsernsError::Taken(pod_uid.into()));
        }
        self.used_by.insert(pod_uid.into(), from);
        Ok(())
    }

    /// A new block for the pod (the lowest free one: upstream picks at random, which
    /// buys nothing here and makes the IDs harder to predict in a test), with the file
    /// content that keeps it.
    pub fn allocate(&mut self, pod_uid: &str) -> Result<(UserNamespace, Vec<u8>), UsernsError> {
        if let Some(namespace) = self.mappings(pod_uid) {
            let first = self.used_by.get(pod_uid).copied().unwrap_or_default();
            return Ok((namespace, file_content(first)));
        }
        let free = (0..self.blocks)
            .find(|b| !self.used.contains(b))
            .ok_or(UsernsError::Exhausted)?;
        self.used.insert(free);
        let first = (self.first_block + free) * IDS_PER_POD;
        self.used_by.insert(pod_uid.into(), first);
        Ok((pod_namespace(first), file_content(first)))
    }

    /// Frees the pod's block; whether it had one.
    pub fn release(&mut self, pod_uid: &str) -> bool {
        let Some(first) = self.used_by.remove(pod_uid) else {
            return false;
        };
        self.used.remove(&(first / IDS_PER_POD - self.first_block));
        true
    }

    /// Pods holding a block.
    pub fn holders(&self) -> impl Iterator<Item = &str> {
        self.used_by.keys().map(String::as_str)
    }
}

fn pod_namespace(first: u32) -> UserNamespace {
    let mapping = IdMapping {
        host_id: first,
        container_id: 0,
        length: IDS_PER_POD,
    };
    UserNamespace {
        mode: NamespaceMode::Pod,
        uids: vec![mapping],
        gids: vec![mapping],
    }
}

fn file_content(first: u32) -> Vec<u8> {
    let mapping = FileMapping {
        host_id: first,
        container_id: 0,
        length: IDS_PER_POD,
    };
    let file = MappingsFile {
        uid_mappings: vec![mapping],
        gid_mappings: vec![mapping],
    };
    // Serialising plain integers cannot fail.
    serde_json::to_vec(&file).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allocator() -> UsernsAllocator {
        UsernsAllocator::new(KubeletIdRange::DEFAULT)
    }

    #[test]
    fn pods_get_distinct_blocks_above_the_hosts_and_a_freed_block_is_reused() {
        let mut a = allocator();
        let (first, file) = a.allocate("a").expect("ok");
        assert_eq!(first.uids[0].host_id, 65536);
        assert_eq!(first.uids, first.gids);
        assert_eq!(
            String::from_utf8(file).expect("ok"),
            r#"{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}"#
        );
        let (second, _) = a.allocate("b").expect("ok");
        assert_eq!(second.uids[0].host_id, 131072);
        // Asking again gives the same block.
        assert_eq!(a.allocate("a").expect("ok").0, first);
        assert!(a.release("a"));
        assert!(!a.release("a"));
        assert_eq!(a.allocate("c").expect("ok").0.uids[0].host_id, 65536);
    }

    #[test]
    fn a_restart_records_each_pods_file_and_refuses_what_upstream_refuses() {
        let mut a = allocator();
        let (_, file) = allocator().allocate("a").expect("ok");
        let recorded = a.record_file("a", &file).expect("ok");
        assert_eq!(recorded.uids[0].host_id, 65536);
        // Recorded twice is the same record; another pod may not take the block.
        assert!(a.record_file("a", &file).is_ok());
        assert_eq!(
            a.record_file("b", &file).expect_err("refused").to_string(),
            r#"range picked for pod "b" already taken"#
        );
        // A new pod gets the next block.
        assert_eq!(a.allocate("c").expect("ok").0.uids[0].host_id, 131072);
        let bad = |text: &str| {
            a.clone()
                .record_file("x", text.as_bytes())
                .expect_err("refused")
                .to_string()
        };
        // A file as upstream writes it, with the uid and gid mappings given.
        let file = |uid: (u32, u32), gid: (u32, u32)| {
            format!(
                r#"{{"uidMappings":[{{"hostId":{},"containerId":{},"length":65536}}],"gidMappings":[{{"hostId":{},"containerId":{},"length":65536}}]}}"#,
                uid.0, uid.1, gid.0, gid.1
            )
        };
        for (text, message) in [
            (
                r#"{"uidMappings":[],"gidMappings":[]}"#.to_owned(),
                "invalid user namespace configuration: no more than one mapping allowed.",
            ),
            (
                file((196608, 0), (262144, 0)),
                "invalid user namespace configuration: GID and UID mapping should be identical",
            ),
            (
                file((196608, 1), (196608, 1)),
                "invalid user namespace configuration: UID 0 must be mapped",
            ),
            (
                file((196609, 0), (196609, 0)),
                "wrong user namespace offset specified 196609",
            ),
            (file((0, 0), (0, 0)), "id 0 is out of range"),
        ] {
            assert_eq!(bad(&text), message, "{text}");
        }
        assert!(bad("{").starts_with("invalid user namespace mappings file: "));
    }

    #[test]
    fn the_kubelets_range_is_checked_as_upstream_checks_it() {
        let text = |r: Result<KubeletIdRange, UsernsError>| r.expect_err("refused").to_string();
        assert_eq!(
            text(KubeletIdRange::checked(65537, 65536 * 110, 110)),
            "kubelet user assigned ID 65537 is not a multiple of 65536"
        );
        assert_eq!(
            text(KubeletIdRange::checked(0, 65536 * 110, 110)),
            "kubelet user assigned ID 0 must be greater or equal to 65536"
        );
        assert_eq!(
            text(KubeletIdRange::checked(65536, 65536 * 110 + 1, 110)),
            "kubelet user assigned IDs length 7208961 is not a multiple of 65536"
        );
        assert_eq!(
            text(KubeletIdRange::checked(65536, 65536 * 109, 110)),
            "kubelet user assigned IDs are not enough to support 110 pods"
        );
        let range = KubeletIdRange::checked(65536 * 4, 65536 * 2, 2).expect("ok");
        let mut a = UsernsAllocator::new(range);
        assert_eq!(a.allocate("a").expect("ok").0.uids[0].host_id, 65536 * 4);
        assert_eq!(a.allocate("b").expect("ok").0.uids[0].host_id, 65536 * 5);
        assert_eq!(
            a.allocate("c").expect_err("refused"),
            UsernsError::Exhausted
        );
        let mut holders: Vec<&str> = a.holders().collect();
        holders.sort_unstable();
        assert_eq!(holders, ["a", "b"]);
        assert!(KubeletIdRange::checked(
            KubeletIdRange::DEFAULT.first,
            KubeletIdRange::DEFAULT.length,
            110
        )
        .is_ok());
    }

    #[test]
    fn the_kubelet_users_subordinate_ids_are_read_and_must_agree() {
        let subuid = "root:100000:65536\nkubelet:655360:7208960\n";
        assert_eq!(
            KubeletIdRange::from_subid_files(subuid, subuid),
            Ok(Some((655360, 7208960)))
        );
        assert_eq!(KubeletIdRange::from_subid_files("root:1:2\n", ""), Ok(None));
        assert!(KubeletIdRange::from_subid_files(subuid, "kubelet:1:2")
            .expect_err("refused")
            .contains("uids and gids must be equal"));
        assert!(KubeletIdRange::from_subid_files("kubelet:x:1", "kubelet:x:1").is_err());
    }

    #[test]
    fn a_handler_without_user_namespaces_refuses_the_pod_in_upstreams_words() {
        let handlers = [
            RuntimeHandler {
                name: String::new(),
                user_namespaces: false,
            },
            RuntimeHandler {
                name: "crun".into(),
                user_namespaces: true,
            },
        ];
        let text = |gate, handlers: &[RuntimeHandler], h: &str| {
            check_handler(gate, handlers, h)
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(
            text(true, &handlers, "").as_deref(),
            Some(r#"RuntimeClass handler "" does not support user namespaces"#)
        );
        assert_eq!(text(true, &handlers, "crun"), None);
        assert_eq!(
            text(true, &handlers, "kata").as_deref(),
            Some(r#"the handler "kata" is not known"#)
        );
        assert!(text(true, &[], "")
            .expect("ok")
            .starts_with("runtime handlers are not set: "));
        assert_eq!(
            text(false, &handlers, "crun").as_deref(),
            Some(
                r#"the feature gate "UserNamespacesSupport" is disabled: can't set spec.HostUsers"#
            )
        );
    }

    #[test]
    fn only_host_users_false_asks_for_a_namespace() {
        let mut pod = Pod::default();
        assert_eq!(requested_mode(&pod), None);
        pod.spec.host_users = Some(true);
        assert_eq!(requested_mode(&pod), None);
        pod.spec.host_users = Some(false);
        assert_eq!(requested_mode(&pod), Some(NamespaceMode::Pod));
    }
}
