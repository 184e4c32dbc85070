//! Upstream's identities against the real thing: the upstream kubelet v1.26.1 runs the
//! static pods of `fixtures/upstream-identity` (a manifest folder and a manifest URL
//! serving a PodList) on a private containerd, and every pod UID and container hash it
//! wrote must be the one rkubelet derives for the same manifest, node and source. That is
//! what lets a node swap one kubelet for the other without restarting a container.
//!
//! Needs root, containerd (`scripts/test-env/install-deps.sh`) and the upstream binaries
//! (`scripts/test-env/kube-bins.sh`: `KUBE_BIN_DIR`, else the archives beside the
//! repository); fails when any is missing. Upstream v1.26 always uses
//! /var/lib/kubelet/device-plugins and /var/log/pods, so runs of this test take a lock.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::runtime::{ContainerFilter, SandboxFilter};
use rkubelet::domain::pod::container_hash;
use rkubelet::domain::pod::static_pod::{decode_static_pods, upstream_identities, PodSourceKind};
use rkubelet::domain::upstream::gojson::GoJson;
use rkubelet::domain::upstream::IdentityError;
use rkubelet::ports::runtime::RuntimeService;

use crate::common::containerd::Containerd;
use crate::common::upstream::{self, UpstreamArgs, UpstreamKubelet};

const SEEN: &str = "2024-01-01T00:00:00Z";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/upstream-identity")
}

/// What rkubelet derives for one pod: its UID and each container's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    uid: String,
    containers: BTreeMap<String, u64>,
}

/// rkubelet's identities for every pod of the fixtures, by pod name, and the pod names
/// of the manifests upstream refuses.
fn expected(
    manifest_dir: &Path,
    url: &str,
    node: &str,
) -> (BTreeMap<String, Identity>, Vec<String>) {
    let mut manifests: Vec<(String, String, PodSourceKind)> = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest_dir)
        .expect("manifest folder")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("manifest");
        manifests.push((file.display().to_string(), text, PodSourceKind::File));
    }
    let podlist = std::fs::read_to_string(fixtures().join("podlist.json")).expect("podlist");
    manifests.push((url.to_string(), podlist, PodSourceKind::Http));

    let mut pods = BTreeMap::new();
    let mut refused = Vec::new();
    for (origin, text, kind) in manifests {
        match decode_static_pods(&origin, text.as_bytes(), node, kind, SEEN) {
            Ok(decoded) => {
                for pod in decoded {
                    let containers = pod
                        .spec
                        .init_containers
                        .iter()
                        .chain(&pod.spec.containers)
                        .map(|c| (c.name.clone(), container_hash(c)))
                        .collect();
                    let uid = pod.metadata.uid.clone();
                    pods.insert(pod.metadata.name, Identity { uid, containers });
                }
            }
            // A manifest rkubelet's decoder refuses: its upstream identity still counts.
            Err(error) => {
                let name = pod_name(&text)
                    .map(|name| format!("{name}-{node}"))
                    .unwrap_or_else(|| panic!("{origin}: refused ({error}) and unnamed"));
                match upstream_identities(&text, 1, node, &origin, kind).remove(0) {
                    Ok(identity) => {
                        let containers = identity
                            .container_hashes
                            .into_iter()
                            .map(|(name, hash)| (name, u64::from(hash)))
                            .collect();
                        let uid = identity.uid;
                        pods.insert(name, Identity { uid, containers });
                    }
                    Err(IdentityError::Refused(_)) => refused.push(name),
                    Err(e) => panic!("{origin}: {e}"),
                }
            }
        }
    }
    (pods, refused)
}

/// `metadata.name` as Go reads it: from the last `metadata` that sets it, since Go
/// merges repeated keys.
fn pod_name(text: &str) -> Option<String> {
    let GoJson::Object(entries) = GoJson::parse(text).ok()? else {
        return None;
    };
    entries
        .iter()
        .rev()
        .filter(|(key, _)| key == "metadata")
        .filter_map(|(_, meta)| match meta.get("name") {
            Some(GoJson::String(name)) => Some(name.clone()),
            _ => None,
        })
        .next()
}

/// Serves `body` at every path of 127.0.0.1:`port`, for the manifest URL.
fn serve(listener: TcpListener, body: String) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
}

/// A folder removed when the test ends, passed or not.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
#[ignore = "needs containerd and the upstream kubelet: run by scripts/test.sh"]
async fn rkubelet_derives_the_uids_and_container_hashes_upstream_v1_26_writes() {
    let (bins, _lock) = upstream::require_peers();

    let mut ctrd = Containerd::start("upid");
    let dir = PathBuf::from(format!("/tmp/rkid-{}", std::process::id()));
    let _dir_guard = RemoveOnDrop(dir.clone());
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifest folder");
    for entry in std::fs::read_dir(fixtures().join("manifests")).expect("fixtures") {
        let path = entry.expect("fixture").path();
        let name = path.file_name().expect("file name");
        std::fs::copy(&path, manifests.join(name)).expect("manifest copied");
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("URL port");
    let url = format!(
        "http://127.0.0.1:{}/podlist.json",
        listener.local_addr().expect("address").port()
    );
    serve(
        listener,
        std::fs::read_to_string(fixtures().join("podlist.json")).expect("podlist"),
    );
    let node = format!("rkid-{}", std::process::id());
    let (want, refused) = expected(&manifests, &url, &node);
    assert_eq!((want.len(), refused.len()), (17, 1), "{want:?} {refused:?}");

    let endpoint = ctrd.var("CRI_ENDPOINT");
    let kubelet = UpstreamKubelet::start(
        &bins,
        &ctrd,
        &UpstreamArgs {
            dir: &dir.join("kubelet"),
            node: &node,
            manifests: Some(&manifests),
            url: Some(&url),
            extra: &[],
        },
    );

    // What upstream wrote, once every expected pod has a sandbox and every container.
    let rt = CriRuntime::connect(&endpoint, Duration::from_secs(30)).expect("CRI client");
    let deadline = Instant::now() + crate::common::patience(180);
    let got = loop {
        let sandboxes = rt
            .list_pod_sandboxes(&SandboxFilter::default())
            .await
            .expect("ListPodSandbox");
        let containers = rt
            .list_containers(&ContainerFilter::default())
            .await
            .expect("ListContainers");
        let mut got: BTreeMap<String, Identity> = BTreeMap::new();
        for sandbox in &sandboxes {
            let hashes = containers
                .iter()
                .filter(|c| c.sandbox_id == sandbox.status.id)
                .map(|c| (c.status.name.clone(), c.status.hash))
                .collect();
            got.insert(
                sandbox.name.clone(),
                Identity {
                    uid: sandbox.uid.clone(),
                    containers: hashes,
                },
            );
        }
        let complete = want.iter().all(|(name, identity)| {
            got.get(name)
                .is_some_and(|g| g.containers.len() == identity.containers.len())
        });
        if complete {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream kubelet did not start every pod within 180 s; it has {:?}\nits log:\n{}",
            got.keys().collect::<Vec<_>>(),
            kubelet.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    let mut containers = 0;
    for (name, identity) in &want {
        let written = &got[name];
        assert_eq!(written.uid, identity.uid, "UID of {name}");
        let hex = |m: &BTreeMap<String, u64>| -> BTreeMap<String, String> {
            m.iter()
                .map(|(k, v)| (k.clone(), format!("{v:x}")))
                .collect()
        };
        assert_eq!(
            hex(&written.containers),
            hex(&identity.containers),
            "container hashes of {name}"
        );
        containers += identity.containers.len();
    }
    for name in &refused {
        assert!(
            !got.contains_key(name),
            "upstream ran {name}, which it should refuse"
        );
    }
    eprintln!(
        "upstream identity: {} pod UIDs and {containers} container hashes match the upstream kubelet v1.26.1; {} manifest refused by both",
        want.len(),
        refused.len()
    );

    drop(kubelet);
    drop(_dir_guard);
    let left = ctrd.down();
    assert!(left.is_empty(), "containerd teardown left: {left:?}");
    assert!(!dir.exists(), "{} left", dir.display());
}
