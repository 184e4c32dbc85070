//! Image pull credentials from a pod's `imagePullSecrets` (upstream's
//! `credentialprovider`: `MakeDockerKeyring`, `BasicDockerKeyring.Lookup`, `URLsMatch`):
//! `kubernetes.io/dockerconfigjson` Secrets (`.dockerconfigjson`, `{"auths": {...}}`) and
//! `kubernetes.io/dockercfg` Secrets (`.dockercfg`, the entries at the top level), each
//! entry keyed by a registry location that may carry `*` globs per host label, a port and
//! a path prefix. The credentials of every matching key (the most specific first) are
//! tried in turn; with none, the pull is anonymous.

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;

use crate::domain::kuberuntime::image_reference::parse_normalized;
use crate::domain::pod::Pod;
use crate::domain::volumes::{Fetched, PodObjects, SecretData};

/// The CRI's `AuthConfig` for one pull.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthConfig {
    pub username: String,
    pub password: String,
    pub auth: String,
    pub server_address: String,
    pub identity_token: String,
    pub registry_token: String,
}

pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
pub const DOCKER_CFG_KEY: &str = ".dockercfg";
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
pub const DOCKER_CFG_TYPE: &str = "kubernetes.io/dockercfg";
/// Docker Hub's key in old configs (upstream's `defaultRegistryHost`).
const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Entry {
    username: String,
    password: String,
    auth: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ConfigJson {
    auths: BTreeMap<String, Entry>,
}

/// Upstream's `DockerConfigEntry.UnmarshalJSON`: `auth` (base64 of `user:password`)
/// wins over `username`/`password`; an undecodable entry is skipped.
fn credentials(entry: &Entry) -> Option<AuthConfig> {
    let (username, password) = if entry.auth.is_empty() {
        (entry.username.clone(), entry.password.clone())
    } else {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(entry.auth.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (user, pass) = text.split_once(':')?;
        (user.to_owned(), pass.trim_matches('\0').to_owned())
    };
    Some(AuthConfig {
        username,
        password,
        ..AuthConfig::default()
    })
}

/// The key upstream's `Add` files an entry under: host plus path, without a scheme and
/// without a leading `/v1/` or `/v2/`.
fn key_of(location: &str) -> String {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let path = if path.starts_with("/v2/") || path.starts_with("/v1/") {
        &path[3..]
    } else {
        path
    };
    if path.is_empty() || path == "/" {
        host.to_owned()
    } else {
        format!("{host}{path}")
    }
}

/// Registry keys and their credentials, from the pod's pull secrets in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    creds: BTreeMap<String, Vec<AuthConfig>>,
}

impl Keyring {
    /// From Secrets of the two docker types; others, and undecodable ones, are skipped as
    /// upstream's `MakeDockerKeyring` does.
    pub fn from_secrets(secrets: &[SecretData]) -> Keyring {
        let mut keyring = Keyring::default();
        for secret in secrets {
            let entries: BTreeMap<String, Entry> = if let Some(json) = secret
                .data
                .get(DOCKER_CONFIG_JSON_KEY)
                .filter(|_| secret.kind == DOCKER_CONFIG_JSON_TYPE)
            {
                match serde_json::from_slice::<ConfigJson>(json) {
                    Ok(config) => config.auths,
                    Err(_) => continue,
                }
            } else if let Some(cfg) = secret
                .data
                .get(DOCKER_CFG_KEY)
                .filter(|_| secret.kind == DOCKER_CFG_TYPE)
            {
                match serde_json::from_slice(cfg) {
                    Ok(entries) => entries,
                    Err(_) => continue,
                }
            } else {
                continue;
            };
            for (location, entry) in &entries {
                if let Some(auth) = credentials(entry) {
                    keyring
                        .creds
                        .entry(key_of(location))
                        .or_default()
                        .push(auth);
                }
            }
        }
        keyring
    }

    /// The credentials to try for `image`, the most specific key first (upstream sorts
    /// its keys in reverse order); empty: pull anonymously.
    pub fn lookup(&self, image: &str) -> Vec<AuthConfig> {
        let repo = repo_to_pull(image);
        let mut out: Vec<AuthConfig> = self
            .creds
            .iter()
            .rev()
            .filter(|(key, _)| urls_match(key, &repo))
            .flat_map(|(_, creds)| creds.iter().cloned())
            .collect();
        if out.is_empty() && is_default_registry_match(&repo) {
            out = self
                .creds
                .get(DEFAULT_REGISTRY_HOST)
                .cloned()
                .unwrap_or_default();
        }
        out
    }
}

/// The keyring of `pod`'s `imagePullSecrets` as fetched (the service account's were
/// added to the pod by admission), and the names of those that could not be read
/// (upstream pulls on without them, with a warning).
pub fn pod_keyring(pod: &Pod, objects: &PodObjects) -> (Keyring, Vec<String>) {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for reference in &pod.spec.image_pull_secrets {
        match objects.secrets.get(&reference.name) {
            Some(Fetched::Found(secret)) => found.push(secret.clone()),
            _ => missing.push(reference.name.clone()),
        }
    }
    (Keyring::from_secrets(&found), missing)
}

/// The repository an image is pulled from (upstream's `ParseImageName`): its
/// normalized name without tag or digest; an image that is no reference (never pulled:
/// `InvalidImageName`) stays as written.
pub fn repo_to_pull(image: &str) -> String {
    parse_normalized(image).map_or_else(|_| image.to_owned(), |r| r.name)
}

fn is_default_registry_match(repo: &str) -> bool {
    let first = repo.split('/').next().unwrap_or_default();
    if first.is_empty() {
        return false;
    }
    !repo.contains('/')
        || first == "docker.io"
        || first == "index.docker.io"
        || !first.contains(['.', ':'])
}

fn split_host(location: &str) -> (&str, &str) {
    match location.find('/') {
        Some(i) => (&location[..i], &location[i..]),
        None => (location, ""),
    }
}

fn split_port(host: &str) -> (&str, &str) {
    match host.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (h, p),
        _ => (host, ""),
    }
}

/// Go's `filepath.Match` for one host label: `*` any run, `?` one character (no
/// separators occur inside a label).
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_match(&pattern[1..], text) || (!text.is_empty() && glob_match(pattern, &text[1..]))
        }
        (Some(b'?'), Some(_)) => glob_match(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => glob_match(&pattern[1..], &text[1..]),
        _ => false,
    }
}

/// Upstream's `URLsMatchStr`: same port, same number of host labels each matching its
/// glob, and the key's path a prefix of the image's.
pub fn urls_match(key: &str, repo: &str) -> bool {
    let (key_host, key_path) = split_host(key);
    let (repo_host, repo_path) = split_host(repo);
    let (key_host, key_port) = split_port(key_host);
    let (repo_host, repo_port) = split_port(repo_host);
    if key_port != repo_port || !repo_path.starts_with(key_path) {
        return false;
    }
    let key_labels: Vec<&str> = key_host.split('.').collect();
    let repo_labels: Vec<&str> = repo_host.split('.').collect();
    key_labels.len() == repo_labels.len()
        && key_labels
            .iter()
            .zip(&repo_labels)
            .all(|(k, r)| glob_match(k.as_bytes(), r.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn secret(kind: &str, key: &str, json: &str) -> SecretData {
        SecretData {
            data: BTreeMap::from([(key.to_owned(), json.as_bytes().to_vec())]),
            kind: kind.into(),
        }
    }

    fn user(auths: &[AuthConfig]) -> Vec<&str> {
        auths.iter().map(|a| a.username.as_str()).collect()
    }

    #[test]
    fn both_secret_formats_are_read_and_matched_to_the_images_registry() {
        // "auth" is base64("alice:s3cret").
        let json = secret(
            DOCKER_CONFIG_JSON_TYPE,
            DOCKER_CONFIG_JSON_KEY,
            r#"{"auths": {
                "registry.example.com": {"auth": "YWxpY2U6czNjcmV0"},
                "https://registry.example.com/v2/team": {"username": "team", "password": "t"},
                "*.corp.io:5000": {"username": "glob", "password": "g"},
                "https://index.docker.io/v1/": {"username": "hub", "password": "h"}
            }}"#,
        );
        let cfg = secret(
            DOCKER_CFG_TYPE,
            DOCKER_CFG_KEY,
            r#"{"quay.io": {"username": "old", "password": "o", "email": "a@b"}}"#,
        );
        let ignored = secret(
            "Opaque",
            DOCKER_CONFIG_JSON_KEY,
            r#"{"auths": {"x.io": {"username": "no"}}}"#,
        );
        let broken = secret(DOCKER_CFG_TYPE, DOCKER_CFG_KEY, "not json");
        let keyring = Keyring::from_secrets(&[json, cfg, ignored, broken]);

        let alice = keyring.lookup("registry.example.com/app:1");
        assert_eq!(alice[0].username, "alice");
        assert_eq!(alice[0].password, "s3cret");
        // A path-specific key comes first, then the host's.
        assert_eq!(
            user(&keyring.lookup(&format!("registry.example.com/team/app@{DIGEST}"))),
            ["team", "alice"]
        );
        assert_eq!(user(&keyring.lookup("build.corp.io:5000/x")), ["glob"]);
        assert!(
            keyring.lookup("build.corp.io/x").is_empty(),
            "the port must match"
        );
        assert!(
            keyring.lookup("a.build.corp.io:5000/x").is_empty(),
            "one label per glob"
        );
        assert_eq!(user(&keyring.lookup("quay.io/org/img")), ["old"]);
        // Docker Hub images (bare or docker.io) get the index.docker.io entry.
        assert_eq!(user(&keyring.lookup("busybox")), ["hub"]);
        assert_eq!(user(&keyring.lookup("docker.io/me/tool:2")), ["hub"]);
        assert!(keyring.lookup("x.io/y").is_empty());
        assert!(keyring.lookup("ghcr.io/o/i").is_empty());
    }

    #[test]
    fn images_name_their_repository_as_upstream_parses_them() {
        assert_eq!(repo_to_pull("busybox"), "docker.io/library/busybox");
        assert_eq!(repo_to_pull("me/tool:2"), "docker.io/me/tool");
        assert_eq!(
            repo_to_pull(&format!("localhost:5000/a/b@{}", DIGEST)),
            "localhost:5000/a/b"
        );
        assert!(urls_match("docker.io", "docker.io/library/busybox"));
        assert!(glob_match(b"reg?", b"reg1"));
        assert!(!glob_match(b"reg?", b"reg"));
    }
}
