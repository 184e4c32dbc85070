//! Golden data from the real upstream kubelet v1.26.1: the UIDs it gave
//! the static pods of `fixtures/upstream-identity` and the container hashes
//! it wrote, recomputed here through rkubelet's own manifest decoding.
//! `fixtures/upstream-identity/README.md` says how they were recorded;
//! `tests/upstream_identity.rs` checks the same against a live kubelet.

use serde::Deserialize;
use std::collections::BTreeMap;

use crate::domain::pod::container_hash;
use crate::domain::pod::static_pod::{decode_static_pods, upstream_identities, PodSourceKind};
use crate::domain::upstream::IdentityError;

const SEEN: &str = "2024-01-01T00:00:00Z";
const GOLDEN: &str = include_str!("../../../fixtures/upstream-identity/golden.json");
const PODLIST: &str = include_str!("../../../fixtures/upstream-identity/podlist.json");
const MANIFESTS: &[(&str, &str)] = &[
    (
        "01-minimal.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/01-minimal.yaml"),
    ),
    (
        "02-kubeadm-style.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/02-kubeadm-style.yaml"),
    ),
    (
        "03-quantities.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/03-quantities.yaml"),
    ),
    (
        "04-quantities.json",
        include_str!("../../../fixtures/upstream-identity/manifests/04-quantities.json"),
    ),
    (
        "05-env-ports-probes.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/05-env-ports-probes.yaml"),
    ),
    (
        "06-volumes-security.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/06-volumes-security.yaml"),
    ),
    (
        "07-pod-fields.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/07-pod-fields.yaml"),
    ),
    (
        "08-init-and-commands.json",
        include_str!("../../../fixtures/upstream-identity/manifests/08-init-and-commands.json"),
    ),
    (
        "09-latest-image.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/09-latest-image.yaml"),
    ),
    (
        "10-yaml-oddities.yml",
        include_str!("../../../fixtures/upstream-identity/manifests/10-yaml-oddities.yml"),
    ),
    (
        "11-explicit-uid.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/11-explicit-uid.yaml"),
    ),
    (
        "12-host-network-ports.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/12-host-network-ports.yaml"),
    ),
    (
        "13-invalid-quantity.json",
        include_str!("../../../fixtures/upstream-identity/manifests/13-invalid-quantity.json"),
    ),
    (
        "14-big-quantities.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/14-big-quantities.yaml"),
    ),
    (
        "15-duplicate-keys.json",
        include_str!("../../../fixtures/upstream-identity/manifests/15-duplicate-keys.json"),
    ),
    (
        "16-grpc-and-sidecarless.yaml",
        include_str!("../../../fixtures/upstream-identity/manifests/16-grpc-and-sidecarless.yaml"),
    ),
];

#[derive(Deserialize)]
struct Golden {
    node: String,
    manifest_dir: String,
    manifest_url: String,
    refused: Vec<String>,
    /// Manifests upstream runs and rkubelet's decoder refuses (a gap of
    /// the decoder, not of the identity), with why.
    rkubelet_refuses: BTreeMap<String, String>,
    pods: Vec<GoldenPod>,
}

#[derive(Deserialize)]
struct GoldenPod {
    manifest: String,
    source: String,
    pod: String,
    uid: String,
    containers: BTreeMap<String, String>,
}

fn golden() -> Golden {
    serde_json::from_str(GOLDEN).expect("golden.json parses")
}

fn manifest(name: &str) -> &'static str {
    MANIFESTS
        .iter()
        .find(|(file, _)| *file == name)
        .map(|(_, text)| *text)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

#[test]
fn uids_and_container_hashes_match_upstream_v1_26() {
    let golden = golden();
    let mut containers = 0;
    for want in &golden.pods {
        let (origin, text, kind) = match want.source.as_str() {
            "http" => (golden.manifest_url.clone(), PODLIST, PodSourceKind::Http),
            _ => (
                format!("{}/{}", golden.manifest_dir, want.manifest),
                manifest(&want.manifest),
                PodSourceKind::File,
            ),
        };
        if golden.rkubelet_refuses.contains_key(&want.manifest) {
            let refused = decode_static_pods(&origin, text.as_bytes(), &golden.node, kind, SEEN);
            assert!(
                refused.is_err(),
                "{} now decodes: make it a plain golden case",
                want.manifest
            );
            let identities = upstream_identities(text, 1, &golden.node, &origin, kind);
            let [Ok(identity)] = identities.as_slice() else {
                panic!("{}: {identities:?}", want.manifest);
            };
            assert_eq!(identity.uid, want.uid, "UID of {}", want.pod);
            let got: BTreeMap<String, String> = identity
                .container_hashes
                .iter()
                .map(|(name, hash)| (name.clone(), format!("{hash:x}")))
                .collect();
            assert_eq!(got, want.containers, "container hashes of {}", want.pod);
            containers += got.len();
            continue;
        }
        let pods = decode_static_pods(&origin, text.as_bytes(), &golden.node, kind, SEEN)
            .unwrap_or_else(|e| panic!("{}: rkubelet refuses it: {e}", want.manifest));
        let pod = pods
            .iter()
            .find(|p| p.metadata.name == want.pod)
            .unwrap_or_else(|| panic!("{}: no pod {}", want.manifest, want.pod));
        assert_eq!(pod.metadata.uid, want.uid, "UID of {}", want.pod);
        let mut got = BTreeMap::new();
        for c in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
            got.insert(c.name.clone(), format!("{:x}", container_hash(c)));
        }
        assert_eq!(got, want.containers, "container hashes of {}", want.pod);
        containers += got.len();
    }
    // Every manifest of the fixture folder is a golden case or a refusal.
    let file_pods = golden.pods.iter().filter(|p| p.source == "file").count();
    assert_eq!(file_pods + golden.refused.len(), MANIFESTS.len());
    assert_eq!((golden.pods.len(), containers), (17, 25));
}

#[test]
fn manifests_upstream_refuses_have_no_upstream_identity() {
    let golden = golden();
    for name in &golden.refused {
        let origin = format!("{}/{name}", golden.manifest_dir);
        let identities = upstream_identities(
            manifest(name),
            1,
            &golden.node,
            &origin,
            PodSourceKind::File,
        );
        assert!(
            matches!(identities.as_slice(), [Err(IdentityError::Refused(_))]),
            "{name}: {identities:?}"
        );
    }
}
