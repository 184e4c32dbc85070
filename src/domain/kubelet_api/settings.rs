//! The kubelet API server's settings, from the configuration: where it listens, its TLS,
//! who may call it and whether the debugging handlers (logs, exec, attach, port-forward,
//! run) are on.

use std::path::PathBuf;
use std::time::Duration;

use crate::domain::config::model::KubeletConfiguration;

/// The lowest TLS version the server accepts. rustls speaks only 1.2 and 1.3, so the older
/// versions upstream accepts are raised to 1.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMinVersion {
    Tls12,
    Tls13,
}

/// How requests are authorized (`authorization.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationMode {
    AlwaysAllow,
    /// SubjectAccessReview, answers cached for these times.
    Webhook {
        authorized_ttl: Duration,
        unauthorized_ttl: Duration,
    },
}

/// What the server on `address:port` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    pub address: String,
    pub port: u16,
    /// `readOnlyPort`, when not 0.
    pub read_only_port: Option<u16>,
    /// `tlsCertFile` and `tlsPrivateKeyFile`; without them a self-signed pair in
    /// `--cert-dir`.
    pub tls_files: Option<(PathBuf, PathBuf)>,
    pub cert_dir: PathBuf,
    /// `serverTLSBootstrap` without `tlsCertFile`: the serving certificate comes from a
    /// `kubernetes.io/kubelet-serving` request, `kubelet-server-current.pem` in
    /// `--cert-dir`; none is served until one is issued.
    pub server_tls_bootstrap: bool,
    pub tls_min_version: TlsMinVersion,
    /// Upstream's (Go's) names, each one rustls has; empty: rustls' defaults.
    pub tls_cipher_suites: Vec<String>,
    /// `authentication.x509.clientCAFile`.
    pub client_ca_file: Option<PathBuf>,
    /// `authentication.webhook.enabled`: bearer tokens through TokenReview, answers cached
    /// for `cacheTTL`.
    pub token_review_ttl: Option<Duration>,
    pub anonymous: bool,
    pub authorization: AuthorizationMode,
    pub enable_debugging_handlers: bool,
}

/// The cipher suites of Go's `crypto/tls` that rustls implements (TLS 1.2 ECDHE with
/// AEAD ciphers, and the TLS 1.3 suites), in upstream's spelling.
pub const SUPPORTED_CIPHER_SUITES: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// Go's cipher suites rustls does not implement (CBC, RC4, 3DES, static RSA): refused with
/// a message naming the field, rather than silently dropped.
const UNSUPPORTED_BY_RUSTLS: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// The server's settings; each problem in upstream's words where it has them.
pub fn server_settings(
    c: &KubeletConfiguration,
    cert_dir: &std::path::Path,
) -> Result<ServerSettings, Vec<String>> {
    let mut problems = Vec::new();
    let tls_min_version = match c.tls_min_version.as_deref().unwrap_or("") {
        "" | "VersionTLS10" | "VersionTLS11" | "VersionTLS12" => TlsMinVersion::Tls12,
        "VersionTLS13" => TlsMinVersion::Tls13,
        other => {
            problems.push(format!(
                "invalid configuration: tlsMinVersion (--tls-min-version) {other:?}: unknown tls version; allowed: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13"
            ));
            TlsMinVersion::Tls12
        }
    };
    let suites = c.tls_cipher_suites.clone().unwrap_or_default();
    for suite in &suites {
        if UNSUPPORTED_BY_RUSTLS.contains(&suite.as_str()) {
            problems.push(format!("invalid configuration: tlsCipherSuites (--tls-cipher-suites) {suite}: insecure cipher suite not implemented by rkubelet; allowed: {}", SUPPORTED_CIPHER_SUITES.join(", ")));
        } else if !SUPPORTED_CIPHER_SUITES.contains(&suite.as_str()) {
            problems.push(format!("invalid configuration: tlsCipherSuites (--tls-cipher-suites) Cipher suite {suite} not supported or doesn't exist"));
        }
    }
    if tls_min_version == TlsMinVersion::Tls13 && !suites.is_empty() {
        problems.push("invalid configuration: tlsCipherSuites (--tls-cipher-suites) cannot be set when tlsMinVersion is VersionTLS13: TLS 1.3 cipher suites are not configurable".into());
    }
    let tls_files = match (
        c.tls_cert_file.is_empty(),
        c.tls_private_key_file.is_empty(),
    ) {
        (true, true) => None,
        (false, false) => Some((
            PathBuf::from(&c.tls_cert_file),
            PathBuf::from(&c.tls_private_key_file),
        )),
        _ => {
            problems.push("invalid configuration: tlsCertFile (--tls-cert-file) and tlsPrivateKeyFile (--tls-private-key-file) must be given together".into());
            None
        }
    };
    let ttl = |d: &crate::domain::units::duration::GoDuration| d.to_std().unwrap_or_default();
    let authorization = if c.authorization.mode == "AlwaysAllow" {
        AuthorizationMode::AlwaysAllow
    } else {
        AuthorizationMode::Webhook {
            authorized_ttl: ttl(&c.authorization.webhook.cache_authorized_ttl),
            unauthorized_ttl: ttl(&c.authorization.webhook.cache_unauthorized_ttl),
        }
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(ServerSettings {
        address: c.address.clone(),
        port: u16::try_from(c.port).unwrap_or(10250),
        read_only_port: u16::try_from(c.read_only_port).ok().filter(|p| *p != 0),
        server_tls_bootstrap: c.server_tls_bootstrap.unwrap_or(false) && tls_files.is_none(),
        tls_files,
        cert_dir: cert_dir.to_path_buf(),
        tls_min_version,
        tls_cipher_suites: suites,
        client_ca_file: (!c.authentication.x509.client_ca_file.is_empty())
            .then(|| PathBuf::from(&c.authentication.x509.client_ca_file)),
        token_review_ttl: c
            .authentication
            .webhook
            .enabled
            .then(|| ttl(&c.authentication.webhook.cache_ttl)),
        anonymous: c.authentication.anonymous.enabled,
        authorization,
        enable_debugging_handlers: c.enable_debugging_handlers.unwrap_or(true),
    })
}

/// The hosts of the self-signed serving certificate upstream makes when no files are
/// given: the hostname, and `localhost` and its addresses.
pub fn self_signed_hosts(hostname: &str) -> Vec<String> {
    let mut hosts = vec![hostname.to_owned()];
    for extra in ["localhost", "127.0.0.1", "::1"] {
        if !hosts.iter().any(|h| h == extra) {
            hosts.push(extra.into());
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> KubeletConfiguration {
        KubeletConfiguration::default()
    }

    #[test]
    fn secure_defaults() {
        let s = server_settings(&config(), std::path::Path::new("/pki"))
            .unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(s.port, 10250);
        assert_eq!(s.read_only_port, None);
        assert!(!s.anonymous);
        assert!(matches!(s.authorization, AuthorizationMode::Webhook { .. }));
        assert_eq!(s.token_review_ttl, Some(Duration::from_secs(120)));
        assert!(s.enable_debugging_handlers);
        assert_eq!(s.tls_files, None);
        assert_eq!(s.tls_min_version, TlsMinVersion::Tls12);
        assert!(!s.server_tls_bootstrap);
    }

    #[test]
    fn server_tls_bootstrap_unless_files_are_given() {
        let mut c = config();
        c.server_tls_bootstrap = Some(true);
        let s =
            server_settings(&c, std::path::Path::new("/pki")).unwrap_or_else(|p| panic!("{p:?}"));
        assert!(s.server_tls_bootstrap);
        c.tls_cert_file = "/a.crt".into();
        c.tls_private_key_file = "/a.key".into();
        let s =
            server_settings(&c, std::path::Path::new("/pki")).unwrap_or_else(|p| panic!("{p:?}"));
        assert!(!s.server_tls_bootstrap);
    }

    #[test]
    fn bad_tls_settings_name_the_field() {
        let mut c = config();
        c.tls_min_version = Some("VersionTLS99".into());
        c.tls_cipher_suites = Some(vec!["TLS_RSA_WITH_RC4_128_SHA".into(), "NOPE".into()]);
        c.tls_cert_file = "/a.crt".into();
        let problems = server_settings(&c, std::path::Path::new("/pki"))
            .err()
            .unwrap_or_default();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("tlsMinVersion"));
        assert!(problems[2].contains("Cipher suite NOPE not supported or doesn't exist"));
    }

    #[test]
    fn read_only_port_and_debugging_handlers() {
        let mut c = config();
        c.read_only_port = 10255;
        c.enable_debugging_handlers = Some(false);
        c.authorization.mode = "AlwaysAllow".into();
        let s =
            server_settings(&c, std::path::Path::new("/pki")).unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(s.read_only_port, Some(10255));
        assert!(!s.enable_debugging_handlers);
        assert_eq!(s.authorization, AuthorizationMode::AlwaysAllow);
    }
}
