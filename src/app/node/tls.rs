//! The client certificate: TLS bootstrap (upstream's `LoadClientCert`) when the kubeconfig
//! is missing or its certificate unusable, and rotation at 70-90 % of its life. kube-rs
//! reads certificates once, so a rotated certificate means new clients, handed to the loops
//! through a watch channel.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;
use tokio::sync::watch;
use tracing::{info, warn};

use super::failures::FailureLog;
use super::{Agent, NodeAgentDeps, NodeAgentSettings};
use crate::domain::node_status::certificate::{
    bootstrapped_kubeconfig, node_subject, prefixed_pair_file_name, rotation_deadline,
    serving_subject, split_pair, CaSource, NodeSubject, BOOTSTRAP_WAIT, CLIENT_PAIR_PREFIX,
    CLIENT_USAGES, SERVER_PAIR_PREFIX, SERVING_USAGES, SIGNER_KUBELET_CLIENT,
    SIGNER_KUBELET_SERVING,
};
use crate::ports::api::{ApiClients, CertificatesError, ConnectError, CsrRef, CsrRequest};
use crate::ports::cert_store::{CertStore, CertStoreError};
use crate::ports::error::Chain;
use crate::ports::pki::PkiError;

#[derive(Debug, Error)]
pub enum TlsError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Certificates(#[from] CertificatesError),
    #[error(transparent)]
    Store(#[from] CertStoreError),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("bootstrap kubeconfig {}: no certificate authority and not insecure", path.display())]
    NoCa { path: std::path::PathBuf },
}

/// Why the kubeconfig's client certificate cannot be used as it is.
#[derive(Debug, Error)]
pub enum KubeconfigUnusable {
    #[error(transparent)]
    Unreadable(#[from] ConnectError),
    #[error("kubeconfig {} has no client certificate", path.display())]
    NoClientCertificate { path: PathBuf },
    #[error("kubeconfig {}", path.display())]
    Certificate {
        path: PathBuf,
        #[source]
        source: PkiError,
    },
    #[error("the client certificate in {} is expired", path.display())]
    Expired { path: PathBuf },
}

fn now_secs(deps: &NodeAgentDeps) -> i64 {
    deps.clock.now_unix_nanos().div_euclid(1_000_000_000)
}

/// Whether the kubeconfig exists and its client certificate has not expired (upstream's
/// `isClientConfigStillValid`); why not, otherwise.
pub fn kubeconfig_still_valid(
    deps: &NodeAgentDeps,
    kubeconfig: &Path,
) -> Result<(), KubeconfigUnusable> {
    let path = || kubeconfig.to_path_buf();
    let summary = deps.connector.inspect(kubeconfig)?;
    let cert = summary
        .client_certificate
        .ok_or_else(|| KubeconfigUnusable::NoClientCertificate { path: path() })?;
    let validity = deps
        .pki
        .validity(&cert)
        .map_err(|source| KubeconfigUnusable::Certificate {
            path: path(),
            source,
        })?;
    if validity.not_after <= now_secs(deps) {
        return Err(KubeconfigUnusable::Expired { path: path() });
    }
    Ok(())
}

/// The private key to ask with: the current pair's when it is usable, else the pending
/// one of an interrupted bootstrap, else a new one (kept until the certificate arrives).
fn bootstrap_key(deps: &NodeAgentDeps) -> Result<String, TlsError> {
    if let Some(pair) = deps.cert_store.current()? {
        if let (_, Some(key)) = split_pair(&String::from_utf8_lossy(&pair)) {
            if deps.pki.valid_key(&key) {
                return Ok(key);
            }
        }
    }
    if let Some(key) = deps.cert_store.pending_key()? {
        if deps.pki.valid_key(&key) {
            return Ok(key);
        }
    }
    let key = deps.pki.generate_key()?;
    deps.cert_store.save_pending_key(&key)?;
    Ok(key)
}

/// What a certificate request asks for and where its pair goes.
struct Wanted<'a> {
    /// "client" or "serving", for the logs.
    what: &'static str,
    subject: NodeSubject,
    signer: &'static str,
    usages: &'static [&'static str],
    prefix: &'static str,
    store: &'a dyn CertStore,
}

/// Ask for a client certificate with `clients` and store the pair; returns the pair's path.
async fn request_certificate(
    deps: &NodeAgentDeps,
    node_name: &str,
    clients: &watch::Receiver<ApiClients>,
    key: &str,
    named: bool,
    within: Duration,
) -> Result<std::path::PathBuf, TlsError> {
    let wanted = Wanted {
        what: "client",
        subject: node_subject(node_name),
        signer: SIGNER_KUBELET_CLIENT,
        usages: CLIENT_USAGES,
        prefix: CLIENT_PAIR_PREFIX,
        store: deps.cert_store.as_ref(),
    };
    request_pair(deps, &wanted, clients, key, named, within).await
}

/// Ask for the certificate `wanted` describes, signed for `key`, and store the pair.
async fn request_pair(
    deps: &NodeAgentDeps,
    wanted: &Wanted<'_>,
    clients: &watch::Receiver<ApiClients>,
    key: &str,
    named: bool,
    within: Duration,
) -> Result<std::path::PathBuf, TlsError> {
    let request = deps
        .pki
        .certificate_request(key, &wanted.subject, wanted.usages)?;
    let csr = CsrRequest {
        // Bootstrap names the request after its key (a restart finds it again); a renewal
        // lets the server name it, as upstream's certificate manager does.
        name: named.then(|| request.digest_name.clone()),
        request_pem: request.pem,
        signer_name: wanted.signer.into(),
        usages: wanted.usages.iter().map(|u| u.to_string()).collect(),
        expiration_seconds: None,
    };
    let certificates = clients.borrow().certificates.clone();
    let created = certificates.create_csr(&csr).await?;
    info!(csr = %created.name, signer = wanted.signer, "Waiting for {} certificate to be issued", wanted.what);
    let certificate = wait_with_current_clients(clients.clone(), &created, within).await?;
    let mut pair = String::from_utf8_lossy(&certificate).into_owned();
    if !pair.ends_with('\n') {
        pair.push('\n');
    }
    pair.push_str(key);
    let path = wanted.store.store(
        &prefixed_pair_file_name(wanted.prefix, deps.clock.now_unix_nanos()),
        pair.as_bytes(),
    )?;
    info!(csr = %created.name, path = %path.display(), "{} certificate issued", wanted.what);
    Ok(path)
}

/// Wait for `csr` to be signed with the clients of the moment. Approval can take minutes
/// (a person or a controller), during which the client certificate may rotate and the old
/// clients' certificate expire: the wait goes on, on the same request, with the new clients.
pub(super) async fn wait_with_current_clients(
    mut clients: watch::Receiver<ApiClients>,
    csr: &CsrRef,
    within: Duration,
) -> Result<Vec<u8>, CertificatesError> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let certificates = clients.borrow_and_update().certificates.clone();
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        tokio::select! {
            done = certificates.wait_for_certificate(csr, left) => return done,
            // A closed channel (no rotation) disables this branch.
            Ok(()) = clients.changed() => {
                info!(csr = %csr.name, "API clients rebuilt; waiting for the certificate with them");
            }
        }
    }
}

/// TLS bootstrap: a certificate from the bootstrap kubeconfig's identity, then the
/// kubeconfig at `--kubeconfig` pointing at it.
pub async fn bootstrap(
    settings: &NodeAgentSettings,
    deps: &NodeAgentDeps,
    bootstrap_path: &Path,
) -> Result<(), TlsError> {
    let summary = deps.connector.inspect(bootstrap_path)?;
    let ca = match (&summary.ca_file, &summary.ca_data) {
        (Some(file), _) => CaSource::File(file.to_string_lossy().into_owned()),
        (None, Some(data)) => CaSource::Data(base64_encode(data)),
        (None, None) if summary.insecure => CaSource::Insecure,
        (None, None) => {
            return Err(TlsError::NoCa {
                path: bootstrap_path.to_path_buf(),
            })
        }
    };
    let key = bootstrap_key(deps)?;
    // The bootstrap identity does not rotate: a channel whose sender is gone.
    let (_, clients) = watch::channel(deps.connector.connect(bootstrap_path).await?);
    let pair = request_certificate(
        deps,
        &settings.registration.node_name,
        &clients,
        &key,
        true,
        BOOTSTRAP_WAIT,
    )
    .await?;
    deps.cert_store.remove_pending_key()?;
    deps.cert_store.write_kubeconfig(
        &settings.kubeconfig,
        &bootstrapped_kubeconfig(&summary.server, &ca, &pair),
    )?;
    info!(kubeconfig = %settings.kubeconfig.display(), "Wrote the kubeconfig for the bootstrapped client certificate");
    Ok(())
}

fn base64_encode(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// Clients for `--kubeconfig`, after TLS bootstrap when needed; retried with back-off (up to
/// 30 s apart) until it works: a missing or broken kubeconfig is logged with its path and
/// the problem, and the pods run on meanwhile.
pub async fn connected_clients(settings: &NodeAgentSettings, deps: &NodeAgentDeps) -> ApiClients {
    let mut failures = FailureLog::new("connecting to the API server");
    let mut wait = Duration::from_millis(500);
    loop {
        let attempt = async {
            if settings.bootstrap_kubeconfig.is_none() {
                // Say it plainly: the server's answer to an expired certificate is a bare 401.
                if let Err(why @ KubeconfigUnusable::Expired { .. }) =
                    kubeconfig_still_valid(deps, &settings.kubeconfig)
                {
                    warn!(problem = %why, "the API server will refuse this client certificate (no --bootstrap-kubeconfig to renew it)");
                }
            }
            if let Some(bootstrap_path) = &settings.bootstrap_kubeconfig {
                match kubeconfig_still_valid(deps, &settings.kubeconfig) {
                    Ok(()) => info!("Kubeconfig exists and is valid, skipping bootstrap"),
                    Err(why) => {
                        let reason = Chain(&why).to_string();
                        info!(%reason, "Using bootstrap kubeconfig to generate TLS client cert, key and kubeconfig file");
                        bootstrap(settings, deps, bootstrap_path).await?;
                    }
                }
            }
            Ok::<_, TlsError>(deps.connector.connect(&settings.kubeconfig).await?)
        };
        match attempt.await {
            Ok(clients) => {
                failures.succeeded();
                info!(server = %clients.server, "API client ready");
                return clients;
            }
            Err(e) => {
                failures.failed(&e);
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
}

/// A number in `[0, 1)` for the rotation jitter.
fn jitter() -> f64 {
    let bits = RandomState::new().hash_one(0u8);
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// With no pair in `--cert-dir`, the kubeconfig's own client certificate and key (kubeadm
/// embeds them on a control-plane node) become its first pair, as upstream's certificate
/// manager stores its bootstrap certificate; kubeadm's `kubelet-finalize` phase then points
/// the kubeconfig at `kubelet-client-current.pem`. Whether a pair was stored.
fn seed_from_kubeconfig(agent: &Agent) -> Result<bool, TlsError> {
    let deps = &agent.deps;
    if deps.cert_store.current()?.is_some() {
        return Ok(false);
    }
    let summary = deps.connector.inspect(&agent.settings.kubeconfig)?;
    let (Some(certificate), Some(key)) = (summary.client_certificate, summary.client_key) else {
        return Ok(false);
    };
    let mut pair = certificate;
    if !pair.ends_with(b"\n") {
        pair.push(b'\n');
    }
    pair.extend_from_slice(&key);
    let path = deps.cert_store.store(
        &prefixed_pair_file_name(CLIENT_PAIR_PREFIX, deps.clock.now_unix_nanos()),
        &pair,
    )?;
    info!(kubeconfig = %agent.settings.kubeconfig.display(), path = %path.display(), "the kubeconfig's client certificate stored in --cert-dir; rotating it now");
    Ok(true)
}

/// Renew the client certificate at 70-90 % of its life, forever (at once after taking the
/// kubeconfig's, as upstream's forced rotation); each new certificate gives new clients to
/// the loops, made with the pair `--cert-dir` holds.
pub async fn run_rotation(agent: &Agent, clients_tx: watch::Sender<ApiClients>) {
    let deps = &agent.deps;
    let mut failures = FailureLog::new("rotating the client certificate");
    let mut retry = Duration::from_secs(2);
    let mut rotate_now = match seed_from_kubeconfig(agent) {
        Ok(seeded) => seeded,
        Err(e) => {
            warn!(error = %Chain(&e), "cannot store the kubeconfig's client certificate in --cert-dir");
            false
        }
    };
    loop {
        let current = deps.cert_store.current().ok().flatten();
        let Some(validity) = current.and_then(|p| deps.pki.validity(&p).ok()) else {
            warn!("certificate rotation is on, but neither --cert-dir nor the kubeconfig has a client certificate and key; not rotating");
            return;
        };
        // Forced until a renewal succeeds: the API server may not answer yet.
        let deadline = if rotate_now {
            now_secs(deps)
        } else {
            rotation_deadline(validity.not_before, validity.not_after, jitter())
        };
        info!(
            expires = validity.not_after,
            rotation_deadline = deadline,
            "Certificate expiration and rotation deadline (Unix seconds)"
        );
        // Sleep towards the deadline in steps, so a wall-clock jump is noticed.
        loop {
            let left = deadline - now_secs(deps);
            if left <= 0 {
                break;
            }
            let step = u64::try_from(left).unwrap_or(0).min(60);
            tokio::time::sleep(Duration::from_secs(step)).await;
        }
        let node = &agent.settings.registration.node_name;
        let renewed = async {
            let key = deps.pki.generate_key()?;
            let within = Duration::from_secs(600);
            let pair = request_certificate(deps, node, &agent.clients, &key, false, within).await?;
            Ok::<_, TlsError>(
                deps.connector
                    .connect_as(&agent.settings.kubeconfig, &pair)
                    .await?,
            )
        };
        match renewed.await {
            Ok(new_clients) => {
                failures.succeeded();
                retry = Duration::from_secs(2);
                rotate_now = false;
                info!("Rotated the client certificate; API clients rebuilt");
                clients_tx.send_replace(new_clients);
            }
            Err(e) => {
                failures.failed(&e);
                tokio::time::sleep(retry).await;
                // A forced renewal waits mostly for the API server to come up (a static
                // pod of this node): asked again within 30 s of it answering.
                let most = if rotate_now { 30 } else { 300 };
                retry = (retry * 2).min(Duration::from_secs(most));
            }
        }
    }
}

/// Upstream's certificate manager waits this long for a request to be approved and
/// signed before it asks again.
const SERVING_WAIT: Duration = Duration::from_secs(15 * 60);

/// `serverTLSBootstrap`: a serving certificate for the node's addresses from the
/// `kubernetes.io/kubelet-serving` signer, right away when `--cert-dir` holds none that
/// is valid, then again at 70-90 % of each one's life (as the client certificate). The
/// kubelet API picks up `kubelet-server-current.pem` when it changes.
pub async fn run_serving_rotation(agent: &Agent) {
    let deps = &agent.deps;
    let store = deps.serving_cert_store.as_ref();
    let mut failures = FailureLog::new("requesting the serving certificate");
    let mut retry = Duration::from_secs(2);
    loop {
        let current = store.current().ok().flatten();
        let validity = current.and_then(|p| deps.pki.validity(&p).ok());
        let deadline = match validity {
            Some(v) if v.not_after > now_secs(deps) => {
                let deadline = rotation_deadline(v.not_before, v.not_after, jitter());
                info!(
                    expires = v.not_after,
                    rotation_deadline = deadline,
                    "Serving certificate expiration and rotation deadline (Unix seconds)"
                );
                deadline
            }
            _ => now_secs(deps),
        };
        loop {
            let left = deadline - now_secs(deps);
            if left <= 0 {
                break;
            }
            let step = u64::try_from(left).unwrap_or(0).min(60);
            tokio::time::sleep(Duration::from_secs(step)).await;
        }
        let node = &agent.settings.registration.node_name;
        let Some(subject) = serving_subject(node, &agent.status_inputs().addresses) else {
            warn!("the node has no addresses yet: no serving certificate requested");
            tokio::time::sleep(retry).await;
            continue;
        };
        let wanted = Wanted {
            what: "serving",
            subject,
            signer: SIGNER_KUBELET_SERVING,
            usages: SERVING_USAGES,
            prefix: SERVER_PAIR_PREFIX,
            store,
        };
        let renewed = async {
            let key = deps.pki.generate_key()?;
            request_pair(deps, &wanted, &agent.clients, &key, false, SERVING_WAIT).await
        };
        match renewed.await {
            Ok(_) => {
                failures.succeeded();
                retry = Duration::from_secs(2);
            }
            Err(e) => {
                failures.failed(&e);
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(Duration::from_secs(300));
            }
        }
    }
}
