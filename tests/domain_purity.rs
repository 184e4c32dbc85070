//! `src/domain` must stay pure: no I/O, no async runtime, no backend crate. This test
//! reads every domain source file and fails on a forbidden path, so the rule holds
//! without anyone remembering it.

use std::path::{Path, PathBuf};

const FORBIDDEN: &[&str] = &[
    "tokio",
    "async_trait",
    "kube",
    "k8s_openapi",
    "tonic",
    "prost",
    "zbus",
    "systemd_zbus",
    "hyper",
    "hyper_util",
    "cgroups_rs",
    "nix",
    "std::fs",
    "std::net",
    "std::process",
    "std::thread",
    "std::env",
    "SystemTime::now",
    "Instant::now",
    "crate::ports",
    "crate::adapters",
    "crate::app",
    "tracing",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `line` uses `name` as a path: `name::...` (a crate or module path), or a
/// full path such as `std::fs` anywhere; never as part of a longer identifier.
fn mentions(line: &str, name: &str) -> bool {
    let is_ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    line.match_indices(name).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let rest = &line[at + name.len()..];
        let standalone = !is_ident(before) && !is_ident(rest.chars().next());
        // `crate::tokio` or `x::std::fs` would be someone else's module of that name.
        let starts_path = before != Some(':');
        let used_as_path =
            name.contains("::") || rest.starts_with("::") || line.trim_start().starts_with("use ");
        standalone && starts_path && used_as_path
    })
}

#[test]
fn domain_imports_no_io_async_or_backend_crate() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/domain"),
        &mut files,
    );
    assert!(!files.is_empty(), "no domain sources found");
    let mut offences = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for name in FORBIDDEN {
                if mentions(code, name) {
                    offences.push(format!(
                        "{}:{}: {name}: {}",
                        file.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "src/domain must stay pure:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_checker_catches_what_it_must() {
    assert!(mentions("use tokio::sync::watch;", "tokio"));
    assert!(mentions("    let f = std::fs::read(p);", "std::fs"));
    assert!(mentions(
        "pub use crate::ports::host::Host;",
        "crate::ports"
    ));
    assert!(!mentions("let tokio_like = 1;", "tokio"));
    assert!(!mentions("// hyper is fine in comments", "tracing"));
}
