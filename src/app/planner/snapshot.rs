//! A recorded node state the planner can answer for without the node: the runtime's
//! sandboxes and containers per pod, which images the desired pods name are present,
//! when it was recorded, the machine, the hostname, the cgroup version and node
//! statistics. Written as JSON by `rkubelet-snapshot`; read as JSON or TOML
//! (`--dry-run-snapshot=FILE`, by extension, else whichever parses).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::app::eviction::observe::Observation;
use crate::app::pods::runtime_state::{pod_runtime_view, relist};
use crate::domain::cgroup::CgroupVersion;
use crate::domain::kuberuntime::runtime::{ImageUser, PodRuntimeStatus};
use crate::domain::node::machine::MachineInfo;
use crate::ports::host::Host;
use crate::ports::runtime::{RuntimeError, RuntimeService};

/// The snapshot's format version; a file with another is refused.
pub const SNAPSHOT_VERSION: u32 = 1;

/// See the module documentation. Field names are the JSON/TOML keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub version: u32,
    /// The node's OS hostname (`--hostname-override` still wins over it).
    pub hostname: String,
    pub machine: MachineInfo,
    #[serde(default)]
    pub cgroup_version: CgroupVersion,
    /// Eviction signal to observed value (e.g. `memory.available = "1Gi"`), shown
    /// beside the thresholds.
    #[serde(default)]
    pub node_stats: BTreeMap<String, String>,
    /// Every pod the runtime holds, in the domain's shapes.
    #[serde(default)]
    pub pods: Vec<PodRuntimeStatus>,
    /// Whether each image the desired pods named was on the node, so a replay plans
    /// the same pulls. An image not listed is planned as present, with a warning.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub images: BTreeMap<String, bool>,
    /// What the runtime said about each present image: its id and user (a snapshot
    /// without them plans containers from the image name, running as root).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub image_facts: BTreeMap<String, SnapshotImage>,
    /// When it was recorded (wall clock, Unix nanoseconds): the replay's "now", so
    /// crash-loop back-offs read as they were then. Absent: the time of the replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at_unix_nanos: Option<i64>,
    /// What the eviction manager observed (memory, filesystems, pids, the pods' usage),
    /// so a replay shows the same eviction decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction: Option<Observation>,
}

/// A present image as `ImageStatus` described it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotImage {
    pub id: String,
    pub user: ImageUser,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("--dry-run-snapshot {path:?}: cannot read: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("--dry-run-snapshot {path:?}: not a valid {format} snapshot: {reason}")]
    Decode {
        path: PathBuf,
        format: &'static str,
        reason: String,
    },
    #[error("--dry-run-snapshot {path:?}: version {found} is not the supported version {SNAPSHOT_VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error("cannot record the runtime's state")]
    Runtime(#[from] RuntimeError),
}

/// Decodes a snapshot's text; `path` picks the format by extension (`.toml`, `.json`),
/// any other is tried as JSON then TOML.
pub fn parse_snapshot(path: &Path, text: &str) -> Result<Snapshot, SnapshotError> {
    let decode = |format: &'static str, reason: String| SnapshotError::Decode {
        path: path.to_path_buf(),
        format,
        reason,
    };
    let json =
        |t: &str| serde_json::from_str::<Snapshot>(t).map_err(|e| decode("JSON", e.to_string()));
    let toml = |t: &str| toml::from_str::<Snapshot>(t).map_err(|e| decode("TOML", e.to_string()));
    let snapshot = match path.extension().and_then(|e| e.to_str()) {
        Some("json") => json(text)?,
        Some("toml") => toml(text)?,
        _ => json(text).or_else(|_| toml(text))?,
    };
    if snapshot.version != SNAPSHOT_VERSION {
        return Err(SnapshotError::Version {
            path: path.to_path_buf(),
            found: snapshot.version,
        });
    }
    Ok(snapshot)
}

/// Reads and decodes `path`.
pub fn load_snapshot(host: &dyn Host, path: &Path) -> Result<Snapshot, SnapshotError> {
    let text = host.read_to_string(path).map_err(|e| SnapshotError::Read {
        path: path.to_path_buf(),
        // The OS's words: the message names the path already.
        reason: std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string),
    })?;
    parse_snapshot(path, &text)
}

/// What the runtime holds for every pod it knows (by uid label) and for each of
/// `also` (the desired pods, so a pod the runtime has nothing of is still asked about),
/// through read calls only. Sorted by uid so equal states give equal snapshots.
pub async fn observe_pods(
    runtime: &dyn RuntimeService,
    also: &[String],
) -> Result<Vec<PodRuntimeStatus>, RuntimeError> {
    let mut uids: Vec<String> = relist(runtime).await?.into_keys().collect();
    uids.extend(also.iter().cloned());
    uids.sort();
    uids.dedup();
    let mut pods = Vec::with_capacity(uids.len());
    for uid in uids {
        let view = pod_runtime_view(runtime, &uid).await?;
        if !view.status.sandboxes.is_empty() || !view.status.containers.is_empty() {
            pods.push(view.status);
        }
    }
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The machine and node stats are the integration tests' two-CPU node.
    const TOML: &str = concat!(
        r#"
version = 1
hostname = "node-a"
cgroup_version = "v1"
"#,
        include_str!("../../../tests/fixtures/two_cpu_machine.toml"),
        r#"
[[pods]]
uid = "u1"
name = "web-node-a"
namespace = "default"
containers = []

[[pods.sandboxes]]
id = "sb1"
attempt = 0
state = "Ready"
created_at_nanos = 1
host_network = false
ip = "10.0.0.2"
"#
    );

    #[test]
    fn toml_and_json_read_the_same_snapshot() {
        let from_toml = parse_snapshot(Path::new("s.toml"), TOML).expect("toml parses");
        assert_eq!(from_toml.machine.num_cores, 2);
        assert_eq!(from_toml.cgroup_version, CgroupVersion::V1);
        assert_eq!(from_toml.pods[0].sandboxes[0].id, "sb1");
        let json = serde_json::to_string(&from_toml).expect("serializes");
        let from_json = parse_snapshot(Path::new("s.json"), &json).expect("json parses");
        assert_eq!(from_json, from_toml);
        let sniffed = parse_snapshot(Path::new("s.state"), TOML).expect("sniffed");
        assert_eq!(sniffed, from_toml);
    }

    #[test]
    fn problems_name_the_file_and_the_field() {
        let bad = TOML.replace("num_cores = 2", "num_cores = \"two\"");
        let e = parse_snapshot(Path::new("/x/s.toml"), &bad).expect_err("refused");
        let text = e.to_string();
        assert!(
            text.contains("/x/s.toml") && text.contains("num_cores"),
            "{text}"
        );
        let future = TOML.replace("version = 1", "version = 9");
        let e = parse_snapshot(Path::new("s.toml"), &future).expect_err("refused");
        assert!(e.to_string().contains('9'), "{e}");
    }
}
