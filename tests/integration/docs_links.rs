//! The README and `docs/` point at what exists: every relative link (and its heading
//! anchor), every repository path they name in backticks (`tests/...`, `src/...`, and
//! the source-relative `domain/...`, `app/...` of the architecture map).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn documents() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// GitHub's anchor of a heading: lowercased, punctuation but `-` and `_` dropped,
/// spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a document's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !fenced && (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            out.insert(slug(&line[hashes..]));
        }
    }
    out
}

/// The targets of `](target)` links.
fn link_targets(text: &str) -> Vec<&str> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|t| !t.contains(char::is_whitespace))
        .collect()
}

/// The repository paths named in backticks, with the folder they are relative to.
fn named_paths(text: &str) -> Vec<(String, &'static str)> {
    const TOP: [&str; 9] = [
        "src/",
        "tests/",
        "benches/",
        "scripts/",
        "docs/",
        "fixtures/",
        "packaging/",
        ".ci/",
        ".config/",
    ];
    const SOURCE: [&str; 4] = ["domain/", "app/", "ports/", "adapters/"];
    let plain = |c: char| c.is_alphanumeric() || "./-_~".contains(c);
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|token| token.trim_end_matches(['/', '.', ',', ';', ':']))
        .filter(|token| token.chars().all(plain))
        .filter_map(|token| {
            if TOP.iter().any(|t| token.starts_with(t)) {
                Some((token.to_owned(), ""))
            } else if SOURCE.iter().any(|t| token.starts_with(t)) {
                Some((token.to_owned(), "src"))
            } else {
                None
            }
        })
        .collect()
}

#[test]
fn every_link_and_path_the_documentation_names_exists() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).expect("document");
        let dir = file.parent().unwrap_or(Path::new("."));
        let name = file
            .strip_prefix(repo())
            .unwrap_or(&file)
            .display()
            .to_string();
        for target in link_targets(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                dir.join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{name}: link {target}: no such file"));
                continue;
            }
            if !anchor.is_empty() && resolved.extension().is_some_and(|x| x == "md") {
                let linked = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !anchors(&linked).contains(anchor) {
                    broken.push(format!("{name}: link {target}: no such heading"));
                }
            }
        }
        for (path, base) in named_paths(&text) {
            checked += 1;
            if !repo().join(base).join(&path).exists() {
                broken.push(format!("{name}: path `{path}` does not exist"));
            }
        }
    }
    assert!(checked > 100, "only {checked} links and paths found");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_landing_page() {
    let text = std::fs::read_to_string(repo().join("README.md")).expect("README");
    let lines = text.lines().count();
    assert!(
        lines <= 220,
        "the README has {lines} lines; the detail goes to docs/"
    );
    let commands: Vec<&str> = text.lines().skip(3).take(2).collect();
    assert!(
        commands[0].starts_with("./scripts/run.sh") && commands[1].starts_with("./scripts/test.sh"),
        "the two set-up commands open it: {commands:?}"
    );
}
