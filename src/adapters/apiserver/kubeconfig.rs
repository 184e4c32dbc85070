//! Reading a kubeconfig: a summary without connecting (for TLS bootstrap's "is the current
//! certificate still usable" and for clear errors), and kube's client configuration.

use std::path::{Path, PathBuf};

use base64::Engine;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};
use secrecy::ExposeSecret;

use crate::ports::api::{ConnectError, KubeconfigSummary};
use crate::ports::error::Chain;

fn problem(path: &Path, text: impl Into<String>) -> ConnectError {
    ConnectError::Kubeconfig {
        path: path.to_path_buf(),
        problem: text.into(),
        source: None,
    }
}

fn read(path: &Path) -> Result<Kubeconfig, ConnectError> {
    // Read the file ourselves first: kube's message for a missing file is vaguer, and
    // kube-client 5 panics on a UTF-16 byte-order mark followed by an odd number of bytes
    // (it decodes two bytes at a time without checking); the fuzz bench found it.
    let bytes = std::fs::read(path).map_err(|e| ConnectError::Kubeconfig {
        path: path.to_path_buf(),
        problem: format!("cannot read it: {e}"),
        source: Some(Box::new(e)),
    })?;
    if let [0xFF, 0xFE, rest @ ..] | [0xFE, 0xFF, rest @ ..] = bytes.as_slice() {
        if rest.len() % 2 == 1 {
            return Err(ConnectError::Kubeconfig {
                path: path.to_path_buf(),
                problem: "not a valid kubeconfig: invalid UTF-16 (an odd number of bytes after its byte-order mark)".into(),
                source: None,
            });
        }
    }
    Kubeconfig::read_from(path).map_err(|e| ConnectError::Kubeconfig {
        path: path.to_path_buf(),
        problem: format!("not a valid kubeconfig: {}", Chain(&e)),
        source: Some(Box::new(e)),
    })
}

/// A file or base64 data, as kubeconfigs give certificates.
fn file_or_data(
    path: &Path,
    what: &str,
    file: Option<&String>,
    data: Option<&String>,
) -> Result<Option<Vec<u8>>, ConnectError> {
    if let Some(data) = data.filter(|d| !d.is_empty()) {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| ConnectError::Kubeconfig {
                path: path.to_path_buf(),
                problem: format!("{what} data is not base64: {e}"),
                source: Some(Box::new(e)),
            });
    }
    let Some(file) = file.filter(|f| !f.is_empty()) else {
        return Ok(None);
    };
    let file = PathBuf::from(file);
    std::fs::read(&file)
        .map(Some)
        .map_err(|e| ConnectError::Kubeconfig {
            path: path.to_path_buf(),
            problem: format!("{what} file {}: {e}", file.display()),
            source: Some(Box::new(e)),
        })
}

/// What the kubeconfig's current context says.
pub fn inspect(path: &Path) -> Result<KubeconfigSummary, ConnectError> {
    let config = read(path)?;
    let context_name = config
        .current_context
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| problem(path, "no current-context"))?;
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| problem(path, format!("context {context_name:?} not found")))?;
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| problem(path, format!("cluster {:?} not found", context.cluster)))?;
    let server = cluster
        .server
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| problem(path, format!("cluster {:?} has no server", context.cluster)))?;
    let user = context.user.as_deref().and_then(|u| {
        config
            .auth_infos
            .iter()
            .find(|a| a.name == u)
            .and_then(|a| a.auth_info.clone())
    });
    let client_certificate = match &user {
        Some(u) => file_or_data(
            path,
            "client certificate",
            u.client_certificate.as_ref(),
            u.client_certificate_data.as_ref(),
        )?,
        None => None,
    };
    let client_key = match &user {
        Some(u) => file_or_data(
            path,
            "client key",
            u.client_key.as_ref(),
            u.client_key_data
                .as_ref()
                .map(|d| d.expose_secret().to_owned())
                .as_ref(),
        )?,
        None => None,
    };
    let ca_data = file_or_data(
        path,
        "certificate authority",
        None,
        cluster.certificate_authority_data.as_ref(),
    )?;
    Ok(KubeconfigSummary {
        server,
        ca_file: cluster
            .certificate_authority
            .clone()
            .filter(|c| !c.is_empty())
            .map(PathBuf::from),
        ca_data,
        insecure: cluster.insecure_skip_tls_verify.unwrap_or(false),
        client_certificate,
        client_key,
        has_token: user
            .as_ref()
            .is_some_and(|u| u.token.is_some() || u.token_file.is_some()),
    })
}

/// kube's client configuration for the kubeconfig's current context.
pub async fn client_config(path: &Path) -> Result<Config, ConnectError> {
    let config = read(path)?;
    Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| ConnectError::Kubeconfig {
            path: path.to_path_buf(),
            problem: Chain(&e).to_string(),
            source: Some(Box::new(e)),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("written");
        path
    }

    const VALID: &str = "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:6443', certificate-authority-data: 'Q0E='}
users:
- name: u
  user: {client-certificate: cert.pem, client-key: cert.pem}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
";

    #[test]
    fn a_summary_with_relative_files_resolved() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "cert.pem", "PEM");
        let path = write(dir.path(), "kubeconfig", VALID);
        let summary = inspect(&path).expect("summary");
        assert_eq!(summary.server, "https://127.0.0.1:6443");
        assert_eq!(summary.ca_data.as_deref(), Some(&b"CA"[..]));
        assert_eq!(summary.client_certificate.as_deref(), Some(&b"PEM"[..]));
        assert!(!summary.has_token);
    }

    #[test]
    fn bad_kubeconfigs_name_the_file_and_the_problem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("absent");
        let err = inspect(&missing).expect_err("missing");
        assert!(
            err.to_string().starts_with(&format!(
                "kubeconfig {}: cannot read it: No such file",
                missing.display()
            )),
            "{err}"
        );
        let odd_utf16 = dir.path().join("utf16");
        std::fs::write(&odd_utf16, [0xFF, 0xFE, b'a']).expect("written");
        let err = inspect(&odd_utf16).expect_err("odd UTF-16");
        assert!(err.to_string().contains("invalid UTF-16"), "{err}");
        let not_yaml = write(dir.path(), "junk", "{{{ not: [yaml");
        let err = inspect(&not_yaml).expect_err("junk");
        assert!(err.to_string().contains("not a valid kubeconfig"), "{err}");
        let no_cert = write(dir.path(), "nocert", VALID);
        let err = inspect(&no_cert).expect_err("no cert file");
        assert!(
            err.to_string().contains("client certificate file")
                && err.to_string().contains("cert.pem"),
            "{err}"
        );
        let no_context = write(
            dir.path(),
            "noctx",
            &VALID.replace("current-context: ctx", "current-context: other"),
        );
        assert!(inspect(&no_context)
            .expect_err("no context")
            .to_string()
            .contains("context \"other\" not found"));
    }
}
