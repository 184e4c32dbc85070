use std::fs;

use super::*;
use crate::adapters::fake::FakeClock;
use crate::adapters::static_pods::test_support::names;
use crate::domain::pod::CONFIG_SEEN_ANNOTATION;

const NODE: &str = "node1";
const WAIT: Duration = Duration::from_secs(10);

fn manifest(name: &str, image: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}},
  "spec": {{"containers": [{{"name": "c", "image": "{image}"}}]}}}}"#
    )
}

fn source(path: &Path) -> FileSource {
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(1_700_000_000_123_000_000));
    // Far longer than any test: every prompt update comes from inotify.
    FileSource::new(path, NODE, Duration::from_secs(3600), clock)
}

/// Updates until one satisfies `done` (a write may show up half-done first).
async fn next_until(source: &mut FileSource, done: impl Fn(&PodSetUpdate) -> bool) -> PodSetUpdate {
    let wait = async {
        loop {
            match source.next().await {
                Some(update) if done(&update) => return update,
                Some(_) => {}
                None => panic!("source stopped"),
            }
        }
    };
    match tokio::time::timeout(WAIT, wait).await {
        Ok(update) => update,
        Err(_) => panic!("no matching update within {WAIT:?}"),
    }
}

#[tokio::test]
async fn initial_set_skips_the_broken_manifest_and_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("a.yaml"), manifest("a", "img/a")).expect("write");
    fs::write(dir.path().join("b.json"), manifest("b", "img/b")).expect("write");
    fs::write(dir.path().join("broken.yaml"), "kind: [unclosed").expect("write");
    let mut src = source(dir.path());

    let update = next_until(&mut src, |_| true).await;
    assert_eq!(update.source, "file");
    assert_eq!(names(&update), ["a-node1", "b-node1"]);
    assert_eq!(update.errors.len(), 1);
    assert!(
        update.errors[0].to_string().contains("broken.yaml"),
        "{}",
        update.errors[0]
    );
    let pod = &update.pods[0];
    assert_eq!(pod.spec.node_name, NODE);
    assert_eq!(
        pod.metadata
            .annotations
            .get(CONFIG_SEEN_ANNOTATION)
            .map(String::as_str),
        Some("2023-11-14T22:13:20.123Z")
    );
}

#[tokio::test]
async fn adding_editing_and_deleting_files_update_promptly() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("a.yaml"), manifest("a", "img/a")).expect("write");
    let mut src = source(dir.path());
    let first = next_until(&mut src, |_| true).await;
    assert_eq!(names(&first), ["a-node1"]);
    let first_uid = first.pods[0].metadata.uid.clone();

    fs::write(dir.path().join("b.yml"), manifest("b", "img/b")).expect("write");
    let added = next_until(&mut src, |u| u.pods.len() == 2).await;
    assert_eq!(names(&added), ["a-node1", "b-node1"]);
    assert!(added.errors.is_empty());
    assert_eq!(added.pods[0].metadata.uid, first_uid);

    fs::write(dir.path().join("a.yaml"), manifest("a", "img/a2")).expect("write");
    let edited = next_until(&mut src, |u| {
        u.pods.len() == 2 && u.pods[0].spec.containers[0].image == "img/a2"
    })
    .await;
    assert_ne!(edited.pods[0].metadata.uid, first_uid);

    fs::remove_file(dir.path().join("b.yml")).expect("remove");
    let removed = next_until(&mut src, |u| u.pods.len() == 1).await;
    assert_eq!(names(&removed), ["a-node1"]);
}

#[tokio::test]
async fn hidden_and_backup_files_are_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("a.yaml"), manifest("a", "img/a")).expect("write");
    fs::write(dir.path().join(".a.yaml.swp"), manifest("x", "img/x")).expect("write");
    fs::write(dir.path().join(".hidden.yaml"), manifest("y", "img/y")).expect("write");
    fs::write(dir.path().join("a.yaml.bak"), manifest("z", "img/z")).expect("write");
    let mut src = source(dir.path());
    let update = next_until(&mut src, |_| true).await;
    assert_eq!(names(&update), ["a-node1"]);
    assert!(update.errors.is_empty());
}

#[tokio::test]
async fn a_single_file_path_works_and_follows_edits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("pod.yaml");
    fs::write(&file, manifest("solo", "img/1")).expect("write");
    let mut src = source(&file);
    let update = next_until(&mut src, |_| true).await;
    assert_eq!(names(&update), ["solo-node1"]);

    // Editors replace the file by renaming a new one over it.
    let tmp = dir.path().join(".pod.yaml.tmp");
    fs::write(&tmp, manifest("solo", "img/2")).expect("write");
    fs::rename(&tmp, &file).expect("rename");
    let edited = next_until(&mut src, |u| {
        u.pods.len() == 1 && u.pods[0].spec.containers[0].image == "img/2"
    })
    .await;
    assert_ne!(edited.pods[0].metadata.uid, update.pods[0].metadata.uid);
}

#[tokio::test]
async fn a_missing_folder_is_empty_until_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = dir.path().join("manifests");
    let mut src = source(&manifests);
    let update = next_until(&mut src, |_| true).await;
    assert!(update.pods.is_empty() && update.errors.is_empty());

    fs::create_dir(&manifests).expect("mkdir");
    let tmp = dir.path().join("a.yaml");
    fs::write(&tmp, manifest("a", "img/a")).expect("write");
    fs::rename(&tmp, manifests.join("a.yaml")).expect("rename");
    let created = next_until(&mut src, |u| u.pods.len() == 1).await;
    assert_eq!(names(&created), ["a-node1"]);
}

#[test]
fn event_masks_walk_every_event() {
    let mut buf = Vec::new();
    for (mask, name_len) in [
        (AddWatchFlags::IN_CREATE, 16u32),
        (AddWatchFlags::IN_IGNORED, 0),
    ] {
        buf.extend_from_slice(&1i32.to_ne_bytes());
        buf.extend_from_slice(&mask.bits().to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&name_len.to_ne_bytes());
        buf.extend(std::iter::repeat_n(0u8, name_len as usize));
    }
    let masks: Vec<_> = event_masks(&buf).collect();
    assert_eq!(masks, [AddWatchFlags::IN_CREATE, AddWatchFlags::IN_IGNORED]);
}

/// A check that finds a manifest's bytes unchanged reuses what they decoded to (its
/// first-seen stamp shows it); changed bytes are decoded anew, and a file gone is
/// forgotten.
#[tokio::test]
async fn unchanged_manifests_are_not_decoded_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("a.yaml"), manifest("a", "img/a")).expect("write");
    fs::write(dir.path().join("b.yaml"), manifest("b", "img/b")).expect("write");
    fs::write(dir.path().join("broken.yaml"), "kind: [unclosed").expect("write");
    let mut decoded = Decoded::default();
    let seen = |pods: &[Pod]| -> Vec<String> {
        pods.iter()
            .map(|p| {
                p.metadata
                    .annotations
                    .get(CONFIG_SEEN_ANNOTATION)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    };

    let (pods, errors) = read_manifests(dir.path(), NODE, "T1", &mut decoded).await;
    assert_eq!(seen(&pods), ["T1", "T1"]);
    assert_eq!(errors.len(), 1);

    // The same bytes written again, and b changed.
    fs::write(dir.path().join("a.yaml"), manifest("a", "img/a")).expect("write");
    fs::write(dir.path().join("b.yaml"), manifest("b", "img/b2")).expect("write");
    let (pods, errors) = read_manifests(dir.path(), NODE, "T2", &mut decoded).await;
    assert_eq!(seen(&pods), ["T1", "T2"]);
    assert_eq!(pods[1].spec.containers[0].image, "img/b2");
    assert_eq!(errors.len(), 1, "the broken manifest is still reported");

    fs::remove_file(dir.path().join("b.yaml")).expect("remove");
    let (pods, _) = read_manifests(dir.path(), NODE, "T3", &mut decoded).await;
    assert_eq!(seen(&pods), ["T1"]);
    let mut files: Vec<_> = decoded.by_file.keys().cloned().collect();
    files.sort();
    assert_eq!(
        files,
        [dir.path().join("a.yaml"), dir.path().join("broken.yaml")]
    );
}
