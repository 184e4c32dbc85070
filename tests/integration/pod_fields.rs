//! "No field is silently ignored" (issue 32): the pod-field table classifies every field
//! of the schema an API server from v1.26 to v1.37 sends, names no field the schema lacks,
//! matches the committed `docs/pod-fields.md`, and refuses none of what the project's own
//! manifests use.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rkubelet::domain::pod::fields;
use rkubelet::domain::pod::static_pod::{decode_static_pods, PodSourceKind};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `docs/pod-fields.schema.json`: path → the first version known to have it.
fn schema() -> BTreeMap<String, String> {
    let path = repo("docs/pod-fields.schema.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let document: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let fields = document["fields"].as_array().cloned().unwrap_or_default();
    assert!(
        fields.len() > 500,
        "the schema holds {} fields",
        fields.len()
    );
    fields
        .iter()
        .map(|f| {
            let text = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (text("path"), text("since"))
        })
        .collect()
}

#[test]
fn every_schema_field_is_classified() {
    let unclassified: Vec<String> = schema()
        .into_keys()
        .filter(|path| fields::treatment_of(path).is_none())
        .collect();
    assert!(
        unclassified.is_empty(),
        "fields of the schema no row of src/domain/pod/fields.rs classifies:\n  {}",
        unclassified.join("\n  ")
    );
}

#[test]
fn every_row_is_a_schema_field() {
    let schema = schema();
    let stale: Vec<String> = fields::rows()
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| !schema.contains_key(path))
        .collect();
    assert!(
        stale.is_empty(),
        "rows naming no field of docs/pod-fields.schema.json:\n  {}",
        stale.join("\n  ")
    );
}

#[test]
fn the_committed_table_is_the_generated_one() {
    crate::common::assert_generated(
        "docs/pod-fields.md",
        &fields::markdown_table(&schema()),
        "UPDATE_POD_FIELDS",
        "UPDATE_POD_FIELDS=1 cargo test --test integration pod_fields",
    );
}

/// The manifests the project runs (the upstream comparison, the demo) use no refused
/// field; the upstream identity fixtures, which only upstream's kubelet runs, use the
/// refused fields listed (each file name and field path; one a field no API has).
#[test]
fn the_projects_own_manifests_use_no_refused_field() {
    let mut manifests = Vec::new();
    for dir in [
        "fixtures/upstream-compare/manifests",
        "fixtures/manifests",
        "fixtures/upstream-identity/manifests",
    ] {
        manifests_in(&repo(dir), &mut manifests);
    }
    manifests.sort();
    let mut refused = Vec::new();
    let mut decoded = 0;
    for path in &manifests {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // Some identity fixtures are invalid on purpose.
        let Ok(pods) = decode_static_pods(
            &path.display().to_string(),
            text.as_bytes(),
            "n1",
            PodSourceKind::File,
            "2024-01-01T00:00:00Z",
        ) else {
            continue;
        };
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        for pod in pods {
            decoded += 1;
            for field in &pod.spec.refused_fields {
                refused.push(format!("{file}: {}", field.path));
            }
        }
    }
    assert!(decoded >= 15, "{decoded} pods decoded from {manifests:?}");
    assert_eq!(
        refused,
        ["08-init-and-commands.json: spec.containers[0].unknownField",]
    );
}

fn manifests_in(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            manifests_in(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(path);
        }
    }
}
