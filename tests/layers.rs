//! The layer rules of the hexagonal architecture, checked on the source text so they
//! hold without anyone remembering them:
//!
//! - `src/domain` is pure: no I/O, no async runtime, no backend crate ([`FORBIDDEN`]),
//!   and no port, adapter or app code;
//! - `src/ports` uses no adapter and no app code;
//! - an adapter (`src/adapters/<name>`) uses no other adapter and no app code;
//! - app code uses no adapter, except the composition root (`src/app/compose.rs`, or a
//!   `src/app/compose/` folder);
//! - app code does no file or mount I/O of its own ([`APP_IO`]): it goes through a port
//!   (`ports::pod_files` for the pod's files and mounts), except in the composition root;
//! - the binaries (`src/main.rs`, `src/bin/`) use no adapter: they go through the
//!   composition root.
//!
//! Test code (a `#[cfg(test)]` module, inline or in its own file) may also use the
//! in-memory `fake` adapter: that is what it is for; and it may make files (a manifest
//! folder for a real pod source), since the rule on I/O is about what the app does.
//!
//! Paths are read from the tokens, comments and string literals left out: `use` trees
//! with groups (`crate::{adapters::cri, domain::pod}`), `super::` and `self::` resolved
//! against the file's module (inline `mod` blocks included), and paths in expressions
//! (`crate::adapters::fake::FakeClock::new(0)`). A path that is only re-exported under
//! another name and used through a bare relative path is not followed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Known breaches of the layer rules, as (file, module it reaches, or the I/O name of
/// [`APP_IO`] it uses). Each must still occur (a stale entry fails the test), and nothing
/// else may. Issues 10 and 31 emptied it: it stays empty, and a breach is fixed, not
/// listed.
const KNOWN_VIOLATIONS: &[(&str, &str)] = &[];

/// What app code outside the composition root must not name: file and mount I/O (nix
/// holds the mount calls) is an adapter's, behind a port.
const APP_IO: &[&str] = &["std::fs", "tokio::fs", "std::os::unix::fs", "nix"];

/// What `src/domain` must not name: I/O, async, backend crates, the wall clock.
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
    "tracing",
];

// ---- lexing -------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Open(char),
    Close(char),
    Comma,
    Semi,
    Hash,
    Bang,
    Star,
    Other,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

/// The tokens of `source`, and the source with comments and string and char literals
/// blanked (newlines kept, so line numbers still match).
fn lex(source: &str) -> (Vec<Token>, String) {
    let chars: Vec<char> = source.chars().collect();
    let mut code: Vec<char> = chars.clone();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let blank = |code: &mut Vec<char>, from: usize, to: usize| {
        for c in code.iter_mut().take(to).skip(from) {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let count_lines =
        |from: usize, to: usize| chars[from..to].iter().filter(|c| **c == '\n').count();
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let start = i;
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            blank(&mut code, start, i);
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            line += count_lines(start, i);
            blank(&mut code, start, i);
        } else if c == '"' {
            i = skip_string(&chars, i + 1);
            line += count_lines(start, i);
            blank(&mut code, start, i);
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a).
            if next == Some('\\') {
                // Past the backslash and the escaped character, which may be a quote.
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                blank(&mut code, start, i);
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                blank(&mut code, start, i);
            } else {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // Raw strings r"..", r#".."#, br"..": skipped like strings.
            if (word == "r" || word == "br") && matches!(chars.get(i), Some('"') | Some('#')) {
                let mut hashes = 0;
                let mut j = i;
                while chars.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if chars.get(j) == Some(&'"') {
                    j += 1;
                    loop {
                        if j >= chars.len() {
                            break;
                        }
                        if chars[j] == '"'
                            && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#'))
                        {
                            j += 1 + hashes;
                            break;
                        }
                        j += 1;
                    }
                    i = j;
                    line += count_lines(start, i);
                    blank(&mut code, start, i);
                    continue;
                }
            }
            if (word == "b" || word == "c") && chars.get(i) == Some(&'"') {
                let end = skip_string(&chars, i + 1);
                line += count_lines(start, end);
                blank(&mut code, start, end);
                i = end;
                continue;
            }
            tokens.push(Token {
                tok: Tok::Ident(word),
                line,
            });
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else {
            let tok = match c {
                ':' if next == Some(':') => {
                    i += 1;
                    Tok::PathSep
                }
                '{' | '(' | '[' => Tok::Open(c),
                '}' | ')' | ']' => Tok::Close(c),
                ',' => Tok::Comma,
                ';' => Tok::Semi,
                '#' => Tok::Hash,
                '!' => Tok::Bang,
                '*' => Tok::Star,
                _ => Tok::Other,
            };
            i += 1;
            tokens.push(Token { tok, line });
        }
    }
    (tokens, code.into_iter().collect())
}

/// The index just past the closing quote of a string whose body starts at `i`.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

// ---- paths --------------------------------------------------------------------

/// A path as written, from its root (`crate`, `super`, `self`, `rkubelet`), with `use`
/// groups expanded; `self` inside a group dropped.
fn parse_tree(tokens: &[Token], mut i: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let mut segments = prefix;
    loop {
        match tokens.get(i).map(|t| &t.tok) {
            Some(Tok::Ident(s)) => {
                if s != "self" || segments.is_empty() {
                    segments.push(s.clone());
                }
                i += 1;
            }
            Some(Tok::Star) => return (vec![segments], i + 1),
            Some(Tok::Open('{')) => {
                let mut all = Vec::new();
                i += 1;
                loop {
                    match tokens.get(i).map(|t| &t.tok) {
                        None => return (all, i),
                        Some(Tok::Close('}')) => return (all, i + 1),
                        Some(Tok::Comma) => i += 1,
                        _ => {
                            let (sub, next) = parse_tree(tokens, i, segments.clone());
                            all.extend(sub);
                            // Past an alias (`as x`) to the next item of the group.
                            i = next.max(i + 1);
                            while let Some(t) = tokens.get(i) {
                                if matches!(t.tok, Tok::Comma | Tok::Close('}')) {
                                    break;
                                }
                                i += 1;
                            }
                        }
                    }
                }
            }
            _ => return (vec![segments], i),
        }
        if tokens.get(i).map(|t| &t.tok) == Some(&Tok::PathSep) {
            i += 1;
        } else {
            return (vec![segments], i);
        }
    }
}

/// A path resolved from the crate root (`["adapters", "cri", "CriRuntime"]`), or `None`
/// when it does not start in this crate.
fn resolve(written: &[String], module: &[String], binary: bool) -> Option<Vec<String>> {
    let (root, rest) = written.split_first()?;
    let mut base: Vec<String> = match (root.as_str(), binary) {
        ("rkubelet", true) => Vec::new(),
        ("crate", false) => Vec::new(),
        ("self", false) => module.to_vec(),
        ("super", false) => {
            let mut m = module.to_vec();
            m.pop()?;
            m
        }
        _ => return None,
    };
    let mut rest = rest.iter().peekable();
    while rest.peek().is_some_and(|s| *s == "super") {
        rest.next();
        base.pop()?;
    }
    base.extend(rest.cloned());
    Some(base)
}

/// One path of a file, resolved, with the line it is on and whether it is test code.
#[derive(Debug, Clone, PartialEq)]
struct Use {
    line: usize,
    path: Vec<String>,
    test: bool,
}

/// What a file's tokens name: every crate path, and the child modules it declares
/// (`mod x;`) with whether they are test-only.
#[derive(Debug, Default)]
struct Scan {
    uses: Vec<Use>,
    children: Vec<(Vec<String>, bool)>,
    /// Lines with a token of test code.
    test_lines: BTreeSet<usize>,
}

/// Whether the attribute tokens (between `[` and `]`) are a `cfg` that holds only in
/// tests: `cfg(test)`, `cfg(all(test, ...))`.
fn is_test_cfg(attr: &[Token]) -> bool {
    let idents: Vec<&str> = attr
        .iter()
        .filter_map(|t| match &t.tok {
            Tok::Ident(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    idents.first() == Some(&"cfg")
        && idents.contains(&"test")
        && !idents.contains(&"not")
        && !idents.contains(&"any")
}

fn scan(tokens: &[Token], module: &[String], file_is_test: bool, binary: bool) -> Scan {
    struct Scope {
        path: Vec<String>,
        test: bool,
        depth: usize,
    }
    let mut scopes = vec![Scope {
        path: module.to_vec(),
        test: file_is_test,
        depth: 0,
    }];
    let mut out = Scan::default();
    let mut depth = 0;
    let mut pending_test = false;
    let mut i = 0;
    while i < tokens.len() {
        let scope = scopes.last().expect("the file's scope is never popped");
        if scope.test {
            out.test_lines.insert(tokens[i].line);
        }
        match &tokens[i].tok {
            Tok::Hash => {
                // An attribute, outer `#[..]` or inner `#![..]`.
                let inner = tokens.get(i + 1).map(|t| &t.tok) == Some(&Tok::Bang);
                let open = i + 1 + usize::from(inner);
                if tokens.get(open).map(|t| &t.tok) == Some(&Tok::Open('[')) {
                    let mut j = open + 1;
                    let mut nest = 1;
                    while j < tokens.len() && nest > 0 {
                        match tokens[j].tok {
                            Tok::Open('[') => nest += 1,
                            Tok::Close(']') => nest -= 1,
                            _ => {}
                        }
                        j += 1;
                    }
                    if is_test_cfg(&tokens[open + 1..j.saturating_sub(1)]) {
                        if inner {
                            scopes.last_mut().expect("scope").test = true;
                        } else {
                            pending_test = true;
                        }
                    }
                    i = j;
                    continue;
                }
                i += 1;
            }
            Tok::Ident(word) if word == "mod" => {
                let test = scope.test || pending_test;
                pending_test = false;
                if let Some(Tok::Ident(name)) = tokens.get(i + 1).map(|t| &t.tok) {
                    let mut path = scope.path.clone();
                    path.push(name.clone());
                    match tokens.get(i + 2).map(|t| &t.tok) {
                        Some(Tok::Open('{')) => {
                            scopes.push(Scope { path, test, depth });
                            depth += 1;
                            i += 3;
                            continue;
                        }
                        Some(Tok::Semi) => out.children.push((path, test)),
                        _ => {}
                    }
                }
                i += 1;
            }
            Tok::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self" | "rkubelet")
                    && tokens.get(i + 1).map(|t| &t.tok) == Some(&Tok::PathSep)
                    && (i == 0 || tokens[i - 1].tok != Tok::PathSep) =>
            {
                let line = tokens[i].line;
                let (written, next) = parse_tree(tokens, i, Vec::new());
                for w in written {
                    if let Some(path) = resolve(&w, &scope.path, binary) {
                        out.uses.push(Use {
                            line,
                            path,
                            test: scope.test || pending_test,
                        });
                    }
                }
                i = next.max(i + 1);
            }
            Tok::Open('{') => {
                pending_test = false;
                depth += 1;
                i += 1;
            }
            Tok::Close('}') => {
                depth = depth.saturating_sub(1);
                if scopes.len() > 1 && scopes.last().is_some_and(|s| s.depth == depth) {
                    scopes.pop();
                }
                pending_test = false;
                i += 1;
            }
            Tok::Semi => {
                pending_test = false;
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

// ---- layers and rules -----------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Layer {
    Domain,
    Ports,
    /// One adapter by its module name; `""` is `src/adapters/mod.rs`, which declares them.
    Adapter(String),
    App,
    CompositionRoot,
    Binary,
    /// `src/lib.rs`, and paths outside the four layers.
    Other,
}

/// The module path of a source file relative to `src/` (`adapters/cri/mod.rs` →
/// `adapters::cri`), and whether it is a binary's file.
fn module_of(rel: &str) -> (Vec<String>, bool) {
    let binary = rel == "main.rs" || rel.starts_with("bin/");
    let trimmed = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = trimmed.split('/').map(str::to_string).collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    if binary {
        parts.clear();
    }
    (parts, binary)
}

/// The layer a module path (from the crate root) lies in.
fn layer_of(path: &[String]) -> Layer {
    let first = path.first().map(String::as_str);
    let second = path.get(1).map(String::as_str);
    match (first, second) {
        (Some("domain"), _) => Layer::Domain,
        (Some("ports"), _) => Layer::Ports,
        (Some("adapters"), name) => Layer::Adapter(name.unwrap_or("").to_string()),
        (Some("app"), Some("compose")) => Layer::CompositionRoot,
        (Some("app"), _) => Layer::App,
        _ => Layer::Other,
    }
}

fn file_layer(rel: &str) -> Layer {
    let (module, binary) = module_of(rel);
    if binary {
        Layer::Binary
    } else {
        layer_of(&module)
    }
}

/// The rule that `from` naming `to` breaks, if any. `adapters` are the adapter module
/// names, so that `crate::adapters::HttpSource` (a re-export) counts as an adapter too.
fn broken_rule(from: &Layer, to: &Layer, test: bool) -> Option<&'static str> {
    let reaches_adapter = matches!(to, Layer::Adapter(_));
    let reaches_app = matches!(to, Layer::App | Layer::CompositionRoot);
    // Test code may use the in-memory fakes wherever it lives.
    let fake = test && *to == Layer::Adapter("fake".into());
    match from {
        Layer::Domain if reaches_adapter || reaches_app || *to == Layer::Ports => {
            Some("domain uses no port, adapter or app code")
        }
        Layer::Ports if reaches_adapter || reaches_app => Some("ports use no adapter or app code"),
        Layer::Adapter(_) if reaches_app => Some("an adapter uses no app code"),
        Layer::Adapter(own) => match to {
            Layer::Adapter(other) if !own.is_empty() && other != own && !fake => {
                Some("an adapter uses no other adapter")
            }
            _ => None,
        },
        Layer::App if reaches_adapter && !fake => {
            Some("app code outside the composition root (src/app/compose) uses no adapter")
        }
        Layer::Binary if reaches_adapter => {
            Some("the binaries use no adapter (the composition root builds them)")
        }
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Violation {
    /// `src/...`
    file: String,
    line: usize,
    rule: &'static str,
    /// The module reached, down to what names it (`adapters::cri`, `app::bootstrap`).
    reaches: String,
    path: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file, self.line, self.rule, self.path
        )
    }
}

/// The layer violations in the source of `src/<rel>`; `test` when the whole file is
/// test code (declared under `#[cfg(test)]` by its parent).
fn violations(rel: &str, source: &str, test: bool) -> Vec<Violation> {
    let (module, binary) = module_of(rel);
    let from = file_layer(rel);
    let (tokens, _) = lex(source);
    let found = scan(&tokens, &module, test, binary);
    found
        .uses
        .iter()
        .filter_map(|u| {
            let to = layer_of(&u.path);
            let rule = broken_rule(&from, &to, u.test)?;
            Some(Violation {
                file: format!("src/{rel}"),
                line: u.line,
                rule,
                reaches: u
                    .path
                    .iter()
                    .take(2)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("::"),
                path: u.path.join("::"),
            })
        })
        .collect()
}

/// The file and mount I/O ([`APP_IO`]) of the app file `src/<rel>` outside its test code;
/// `test` when the whole file is test code. Each names what it uses as `reaches`.
fn app_io(rel: &str, source: &str, test: bool) -> Vec<Violation> {
    if test || file_layer(rel) != Layer::App {
        return Vec::new();
    }
    let (module, binary) = module_of(rel);
    let (tokens, code) = lex(source);
    let test_lines = scan(&tokens, &module, false, binary).test_lines;
    let mut found = Vec::new();
    for (number, (line, original)) in code.lines().zip(source.lines()).enumerate() {
        if test_lines.contains(&(number + 1)) {
            continue;
        }
        for name in APP_IO.iter().filter(|name| mentions(line, name)) {
            found.push(Violation {
                file: format!("src/{rel}"),
                line: number + 1,
                rule: "app code does its file and mount I/O through a port",
                reaches: (*name).to_string(),
                path: original.trim().to_string(),
            });
        }
    }
    found
}

/// The uses of a `FORBIDDEN` name in `src/domain/<rel>`: `file:line: name: line`.
fn impurities(rel: &str, source: &str) -> Vec<String> {
    let (_, code) = lex(source);
    let mut found = Vec::new();
    for (number, (line, original)) in code.lines().zip(source.lines()).enumerate() {
        for name in FORBIDDEN {
            if mentions(line, name) {
                found.push(format!(
                    "src/{rel}:{}: {name}: {}",
                    number + 1,
                    original.trim()
                ));
            }
        }
    }
    found
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

/// Violations not in `known`, and entries of `known` that no violation matches.
fn reconcile<'a>(
    found: &'a [Violation],
    known: &[(&'a str, &'a str)],
) -> (Vec<&'a Violation>, Vec<(&'a str, &'a str)>) {
    let new = found
        .iter()
        .filter(|v| !known.iter().any(|(f, r)| v.file == *f && v.reaches == *r))
        .collect();
    let stale = known
        .iter()
        .filter(|(f, r)| !found.iter().any(|v| v.file == *f && v.reaches == *r))
        .copied()
        .collect();
    (new, stale)
}

// ---- the tree -----------------------------------------------------------------

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

/// Every source file of `src/`, relative to it (with `/`), and its text.
fn sources() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|f| {
            let rel = f
                .strip_prefix(&src)
                .unwrap_or(f)
                .to_string_lossy()
                .replace('\\', "/");
            let text =
                std::fs::read_to_string(f).unwrap_or_else(|e| panic!("read {}: {e}", f.display()));
            (rel, text)
        })
        .collect()
}

/// The modules declared test-only (`#[cfg(test)] mod x;`) anywhere in the tree.
fn test_modules(sources: &BTreeMap<String, String>) -> BTreeSet<Vec<String>> {
    let mut test = BTreeSet::new();
    for (rel, text) in sources {
        let (module, binary) = module_of(rel);
        let (tokens, _) = lex(text);
        for (child, is_test) in scan(&tokens, &module, false, binary).children {
            if is_test {
                test.insert(child);
            }
        }
    }
    test
}

fn tree_violations() -> Vec<Violation> {
    let sources = sources();
    assert!(
        sources.keys().any(|k| k.starts_with("domain/"))
            && sources.keys().any(|k| k.starts_with("adapters/"))
            && sources.keys().any(|k| k.starts_with("app/")),
        "src/ not found where expected: {:?}",
        sources.keys().collect::<Vec<_>>()
    );
    let test_only = test_modules(&sources);
    let mut all = Vec::new();
    for (rel, text) in &sources {
        let (module, _) = module_of(rel);
        let test = (1..=module.len()).any(|n| test_only.contains(&module[..n]));
        all.extend(violations(rel, text, test));
        all.extend(app_io(rel, text, test));
    }
    all
}

#[test]
fn domain_imports_no_io_async_or_backend_crate() {
    let sources = sources();
    let mut offences = Vec::new();
    let mut domain_files = 0;
    for (rel, text) in sources.iter().filter(|(k, _)| k.starts_with("domain/")) {
        domain_files += 1;
        offences.extend(impurities(rel, text));
    }
    assert!(domain_files > 0, "no domain sources found");
    assert!(
        offences.is_empty(),
        "src/domain must stay pure:\n{}",
        offences.join("\n")
    );
}

#[test]
fn every_layer_uses_only_what_it_may() {
    let found = tree_violations();
    let (new, stale) = reconcile(&found, KNOWN_VIOLATIONS);
    let mut problems = Vec::new();
    for v in &new {
        problems.push(format!("{v}"));
    }
    for (file, reaches) in &stale {
        problems.push(format!(
            "KNOWN_VIOLATIONS lists ({file:?}, {reaches:?}), which no longer occurs: remove the entry"
        ));
    }
    assert!(
        problems.is_empty(),
        "layer rules broken (see tests/layers.rs):\n{}",
        problems.join("\n")
    );
}

// ---- the checker catches what it must ----------------------------------------

fn reached(rel: &str, source: &str) -> Vec<String> {
    violations(rel, source, false)
        .into_iter()
        .map(|v| v.reaches)
        .collect()
}

#[test]
fn domain_may_not_use_ports_adapters_or_app() {
    let source = "use crate::ports::runtime::RuntimeService;\n\
                  use crate::adapters::cri::CriRuntime;\n\
                  fn f() { crate::app::cli::parse(x); }\n\
                  use crate::domain::pod::Pod;\n\
                  use super::quantity::Quantity;\n";
    assert_eq!(
        reached("domain/node.rs", source),
        ["ports::runtime", "adapters::cri", "app::cli"]
    );
    // `super::super` out of the domain lands in the crate root: the same rule.
    assert_eq!(
        reached(
            "domain/cgroup/name.rs",
            "use super::super::super::ports::cgroup::X;"
        ),
        ["ports::cgroup"]
    );
}

#[test]
fn ports_may_not_use_adapters_or_app() {
    let source = "use crate::domain::pod::Pod;\n\
                  use crate::adapters::cri::CriRuntime;\n\
                  use crate::app::bootstrap::Deps;\n\
                  use super::clock::Clock;\n";
    assert_eq!(
        reached("ports/runtime.rs", source),
        ["adapters::cri", "app::bootstrap"]
    );
}

#[test]
fn an_adapter_may_not_use_another_adapter_or_app() {
    let source = "use crate::adapters::cgroupfs::detect_version;\n\
                  use crate::{adapters::{cri::X, systemd::{self, Y}}, domain::Z};\n\
                  use super::fake::FakeClock;\n\
                  use self::proxy::Manager;\n\
                  use crate::app::compose::production_deps;\n\
                  use crate::adapters::HttpSource;\n";
    assert_eq!(
        reached("adapters/systemd/mod.rs", source),
        [
            "adapters::cgroupfs",
            "adapters::cri",
            "adapters::fake",
            "app::compose",
            "adapters::HttpSource"
        ]
    );
    // Its own modules, by any path, are fine.
    assert!(reached(
        "adapters/systemd/proxy.rs",
        "use super::Props; use crate::adapters::systemd::mod_x; use self::inner::Y;"
    )
    .is_empty());
    // A single-file adapter reaching a folder adapter.
    assert_eq!(
        reached("adapters/static_pods.rs", "use crate::adapters::cri::X;"),
        ["adapters::cri"]
    );
}

#[test]
fn app_code_may_not_use_adapters_outside_the_composition_root() {
    let source = "use crate::adapters::static_pods::file::FileSource;\n\
                  use crate::ports::runtime::RuntimeService;\n\
                  fn f() { let c = crate::adapters::cri::CriRuntime::connect(e); }\n";
    assert_eq!(
        reached("app/bootstrap.rs", source),
        ["adapters::static_pods", "adapters::cri"]
    );
    assert_eq!(
        reached(
            "app/planner/gather.rs",
            "use super::super::super::adapters::cgroupfs as cg;"
        ),
        ["adapters::cgroupfs"]
    );
    assert!(reached("app/compose.rs", source).is_empty());
    assert!(reached("app/compose/runtime.rs", source).is_empty());
    assert_eq!(
        reached(
            "main.rs",
            "use rkubelet::app::cli; use rkubelet::adapters::cri::CriRuntime;"
        ),
        ["adapters::cri"]
    );
}

#[test]
fn test_code_may_use_the_fakes_and_nothing_else() {
    let source = "use crate::ports::clock::Clock;\n\
                  #[cfg(test)]\n\
                  mod tests {\n\
                      use super::*;\n\
                      use crate::adapters::fake::FakeClock;\n\
                      fn t() { crate::adapters::fake::FakeHost::new(); }\n\
                      use crate::adapters::cri::CriRuntime;\n\
                  }\n\
                  fn g() { crate::adapters::fake::FakeClock::new(0); }\n";
    let found = violations("app/pods/mod.rs", source, false);
    let lines: Vec<(usize, &str)> = found.iter().map(|v| (v.line, v.reaches.as_str())).collect();
    assert_eq!(lines, [(7, "adapters::cri"), (9, "adapters::fake")]);
    // A whole file that its parent declares under #[cfg(test)].
    assert!(violations(
        "app/pods/tests.rs",
        "use crate::adapters::fake::FakeClock;",
        true
    )
    .is_empty());
    assert_eq!(
        violations("app/pods/tests.rs", "use crate::adapters::cri::X;", true).len(),
        1
    );
    let parent = "#[cfg(test)]\nmod tests;\npub mod sync;\n#[cfg(all(test, unix))] mod more;";
    let (tokens, _) = lex(parent);
    let children = scan(&tokens, &["app".into(), "pods".into()], false, false).children;
    let flags: Vec<(String, bool)> = children
        .into_iter()
        .map(|(p, t)| (p.join("::"), t))
        .collect();
    assert_eq!(
        flags,
        [
            ("app::pods::tests".to_string(), true),
            ("app::pods::sync".to_string(), false),
            ("app::pods::more".to_string(), true)
        ]
    );
}

#[test]
fn app_code_does_no_file_or_mount_io_outside_the_composition_root_and_tests() {
    let source = "use std::fs;\n\
                  use std::os::unix::fs::PermissionsExt;\n\
                  async fn f() { tokio::fs::read(p).await; }\n\
                  fn g() { nix::mount::umount2(p, f); let nixed = 1; }\n\
                  // std::fs::write(p, x)\n\
                  const S: &str = \"tokio::fs\";\n\
                  use crate::ports::pod_files::PodFiles;\n\
                  #[cfg(test)]\n\
                  mod tests {\n\
                      fn t() { std::fs::write(p, x); }\n\
                  }\n";
    let found: Vec<(usize, String)> = app_io("app/pods/sync.rs", source, false)
        .into_iter()
        .map(|v| (v.line, v.reaches))
        .collect();
    assert_eq!(
        found,
        [
            (1, "std::fs".to_string()),
            (2, "std::os::unix::fs".to_string()),
            (3, "tokio::fs".to_string()),
            (4, "nix".to_string())
        ]
    );
    assert!(app_io("app/compose.rs", source, false).is_empty());
    assert!(app_io("app/pods/tests.rs", source, true).is_empty());
    assert!(app_io("adapters/system/host.rs", source, false).is_empty());
}

#[test]
fn comments_and_strings_are_not_code() {
    let source = "// use crate::adapters::cri::CriRuntime;\n\
                  /* crate::adapters::cri /* nested */ crate::adapters::cri */\n\
                  const A: &str = \"crate::adapters::cri\";\n\
                  const B: &str = r#\"crate::adapters::cri \"quoted\"\"#;\n\
                  const C: char = '\"'; const D: &str = \"\\\"crate::adapters::cri\";\n\
                  fn f<'a>(x: &'a str) { crate::adapters::cri::X; }\n";
    let found = violations("app/server.rs", source, false);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].line, 6);
    assert!(impurities(
        "domain/x.rs",
        "const S: &str = \"std::fs\"; // tokio::spawn"
    )
    .is_empty());
    assert_eq!(
        impurities("domain/x.rs", "fn f() { std::fs::read(p); }").len(),
        1
    );
}

#[test]
fn the_purity_checker_catches_what_it_must() {
    assert!(mentions("use tokio::sync::watch;", "tokio"));
    assert!(mentions("    let f = std::fs::read(p);", "std::fs"));
    assert!(mentions("use tracing::warn;", "tracing"));
    assert!(!mentions("let tokio_like = 1;", "tokio"));
    assert!(!mentions("use crate::tokio::x;", "tokio"));
}

#[test]
fn known_violations_must_still_occur_and_nothing_else_may() {
    let v = |file: &str, reaches: &str| Violation {
        file: file.into(),
        line: 1,
        rule: "r",
        reaches: reaches.into(),
        path: String::new(),
    };
    let found = [
        v("src/app/a.rs", "adapters::cri"),
        v("src/app/b.rs", "adapters::cri"),
    ];
    let known = [
        ("src/app/a.rs", "adapters::cri"),
        ("src/app/c.rs", "adapters::cri"),
    ];
    let (new, stale) = reconcile(&found, &known);
    assert_eq!(new, [&found[1]]);
    assert_eq!(stale, [("src/app/c.rs", "adapters::cri")]);
}
