//! The agent on the in-memory API server, runtime and clock: tokio's paused time moves
//! only when every task waits, so minutes pass in milliseconds and nothing sleeps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::adapters::fake::runtime::FakeRuntime;
use crate::adapters::fake::{
    FakeApiServer, FakeCertStore, FakeClock, FakeConnector, FakeHostFacts, FakePki,
    FakeRuntimeStatus,
};
use crate::domain::node_status::labels::{LABEL_ARCH, LABEL_HOSTNAME};
use crate::domain::node_status::model::{ConditionStatus, NodeObject};
use crate::domain::units::quantity::Quantity;
use crate::ports::api::KubeconfigSummary;
use crate::ports::cert_store::CertStore;

const NODE: &str = "n1";

struct World {
    server: FakeApiServer,
    connector: FakeConnector,
    runtime: FakeRuntimeStatus,
    store: FakeCertStore,
    deps: NodeAgentDeps,
    settings: NodeAgentSettings,
}

fn kubeconfig() -> PathBuf {
    PathBuf::from("/etc/kubernetes/kubelet.conf")
}

fn world() -> World {
    let server = FakeApiServer::new();
    let connector = FakeConnector::new(server.clone());
    connector.set_kubeconfig(&kubeconfig(), KubeconfigSummary::default());
    let runtime = FakeRuntimeStatus::new();
    let store = FakeCertStore::new();
    let deps = NodeAgentDeps {
        connector: Arc::new(connector.clone()),
        runtime: Arc::new(FakeRuntime::new()),
        runtime_status: Arc::new(runtime.clone()),
        host_facts: Arc::new(FakeHostFacts::default()),
        clock: Arc::new(FakeClock::new(1_795_232_011_000_000_000)),
        pki: Arc::new(FakePki::new()),
        cert_store: Arc::new(store.clone()),
        serving_cert_store: Arc::new(FakeCertStore::new()),
    };
    let registration = Registration {
        node_name: NODE.into(),
        hostname: NODE.into(),
        os: "linux".into(),
        arch: "amd64".into(),
        schedulable: true,
        controller_attach_detach: true,
        ..Registration::default()
    };
    let mut settings = NodeAgentSettings::new(registration, kubeconfig());
    for (k, v) in [("cpu", "2"), ("memory", "4Gi"), ("pods", "110")] {
        let q = Quantity::parse(v).expect("quantity");
        settings.capacity.insert(k.into(), q);
        settings.allocatable.insert(k.into(), q);
    }
    settings.machine.boot_id = "boot".into();
    World {
        server,
        connector,
        runtime,
        store,
        deps,
        settings,
    }
}

/// Let the agent run for `d` of (paused) time.
async fn run_for(d: Duration) {
    tokio::time::sleep(d).await;
}

fn ready(node: &NodeObject) -> (ConditionStatus, String, String) {
    node.status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status, c.reason.clone(), c.message.clone()))
        .unwrap_or((ConditionStatus::Unknown, String::new(), String::new()))
}

fn reasons(server: &FakeApiServer) -> Vec<String> {
    let mut events = server.events();
    events.sort_by_key(|e| e.metadata.name.clone());
    events.into_iter().map(|e| e.reason).collect()
}

#[tokio::test(start_paused = true)]
async fn a_fresh_node_registers_ready_with_its_events_and_heartbeats() {
    let w = world();
    let mut agent = run_node_agent(w.settings.clone(), w.deps.clone());
    run_for(Duration::from_millis(100)).await;
    let node = w.server.node(NODE).expect("registered");
    assert_eq!(ready(&node).0, ConditionStatus::True);
    assert_eq!(node.metadata.labels[LABEL_HOSTNAME], NODE);
    assert_eq!(node.status.daemon_endpoints.kubelet_endpoint.port, 10250);
    assert_eq!(node.status.addresses[0].address, "10.0.0.5");
    assert_eq!(
        node.status.node_info.container_runtime_version,
        "rkubelet-fake://0.1.0"
    );
    assert_eq!(w.server.count("create node"), 1);
    let lease = w.server.lease("kube-node-lease", NODE).expect("lease");
    assert_eq!(lease.spec.lease_duration_seconds, Some(40));
    assert_eq!(lease.metadata.owner_references[0].uid, node.metadata.uid);
    let mut got = reasons(&w.server);
    got.sort();
    assert_eq!(
        got,
        [
            "NodeHasNoDiskPressure",
            "NodeHasSufficientMemory",
            "NodeHasSufficientPID",
            "Starting"
        ]
    );

    // Three idle minutes: a lease update and a Node read every 10 s (as upstream's
    // `tryUpdateNodeStatus`), no status patch (nothing changed and five minutes have not
    // passed).
    let leases_before = w.server.count("update lease");
    run_for(Duration::from_secs(180)).await;
    let leases = w.server.count("update lease") - leases_before;
    assert!(
        (17..=19).contains(&leases),
        "{leases} lease updates in 3 min"
    );
    assert_eq!(w.server.count("patch status node"), 0);
    let gets = w.server.count("get node");
    assert!((17..=19).contains(&gets), "{gets} node reads in 3 min");
    // At five minutes the status is reported anyway.
    run_for(Duration::from_secs(125)).await;
    assert_eq!(w.server.count("patch status node"), 1);
    agent.stop();
}

#[tokio::test(start_paused = true)]
async fn a_restart_adopts_the_node_and_reconciles_its_labels() {
    let w = world();
    let mut existing = crate::domain::node_status::labels::initial_node(&w.settings.registration);
    existing
        .metadata
        .labels
        .insert(LABEL_ARCH.into(), "arm64".into());
    existing
        .metadata
        .labels
        .insert("admin/label".into(), "kept".into());
    w.server.put_node(existing);
    let uid = w.server.node(NODE).expect("there").metadata.uid;
    let mut agent = run_node_agent(w.settings.clone(), w.deps.clone());
    run_for(Duration::from_millis(500)).await;
    let node = w.server.node(NODE).expect("adopted");
    assert_eq!(node.metadata.uid, uid);
    assert_eq!(node.metadata.labels[LABEL_ARCH], "amd64");
    assert_eq!(node.metadata.labels["admin/label"], "kept");
    // The adopted node's status is sent at once (the old one is stale).
    assert_eq!(ready(&node).0, ConditionStatus::True);
    assert_eq!(w.server.count("patch node"), 1);
    assert_eq!(w.server.count("patch status node"), 1);
    agent.stop();
}

#[tokio::test(start_paused = true)]
async fn readiness_follows_the_runtime_with_events() {
    let w = world();
    let mut agent = run_node_agent(w.settings.clone(), w.deps.clone());
    run_for(Duration::from_secs(1)).await;
    w.runtime.set_up(false);
    let stopped = tokio::time::Instant::now();
    let mut went_down = None;
    for _ in 0..60 {
        run_for(Duration::from_secs(1)).await;
        let node = w.server.node(NODE).expect("node");
        if ready(&node).0 == ConditionStatus::False {
            went_down = Some(stopped.elapsed());
            assert_eq!(ready(&node).1, "KubeletNotReady");
            assert_eq!(ready(&node).2, "container runtime is down");
            break;
        }
    }
    let went_down = went_down.expect("not ready");
    assert!(went_down <= Duration::from_secs(30), "{went_down:?}");
    w.runtime.set_up(true);
    let started = tokio::time::Instant::now();
    let mut came_back = None;
    for _ in 0..60 {
        run_for(Duration::from_secs(1)).await;
        if ready(&w.server.node(NODE).expect("node")).0 == ConditionStatus::True {
            came_back = Some(started.elapsed());
            break;
        }
    }
    assert!(came_back.expect("ready again") <= Duration::from_secs(30));
    let got = reasons(&w.server);
    assert!(got.contains(&"NodeNotReady".to_string()), "{got:?}");
    assert!(got.contains(&"NodeReady".to_string()), "{got:?}");
    agent.stop();
}

/// Issue 30: the node controller marks a silent node `Unknown`; the status loop compares
/// with the Node the API server holds, so the next period (10 s) corrects it, not the
/// report frequency (5 min).
#[tokio::test(start_paused = true)]
async fn a_condition_marked_unknown_by_someone_else_is_corrected_at_the_next_period() {
    let w = world();
    let mut agent = run_node_agent(w.settings.clone(), w.deps.clone());
    run_for(Duration::from_secs(15)).await;
    let patches = w.server.count("patch status node");
    let mut node = w.server.node(NODE).expect("registered");
    for c in &mut node.status.conditions {
        c.status = ConditionStatus::Unknown;
        c.reason = "NodeStatusUnknown".into();
        c.message = "Kubelet stopped posting node status.".into();
    }
    w.server.put_node(node);
    let marked = tokio::time::Instant::now();
    let mut corrected = None;
    for _ in 0..40 {
        run_for(Duration::from_millis(500)).await;
        let node = w.server.node(NODE).expect("node");
        if node
            .status
            .conditions
            .iter()
            .all(|c| c.status != ConditionStatus::Unknown)
        {
            corrected = Some(marked.elapsed());
            break;
        }
    }
    let corrected = corrected.expect("corrected within 20 s");
    assert!(corrected <= Duration::from_secs(11), "{corrected:?}");
    assert_eq!(
        ready(&w.server.node(NODE).expect("node")),
        (
            ConditionStatus::True,
            "KubeletReady".to_string(),
            "kubelet is posting ready status".to_string()
        )
    );
    assert_eq!(w.server.count("patch status node"), patches + 1);
    assert!(reasons(&w.server).contains(&"NodeReady".to_string()));
    agent.stop();
}

#[tokio::test(start_paused = true)]
async fn an_api_server_down_at_start_delays_registration_quietly() {
    let w = world();
    w.server.set_down(true);
    let mut agent = run_node_agent(w.settings.clone(), w.deps.clone());
    run_for(Duration::from_secs(120)).await;
    assert!(w.server.node(NODE).is_none());
    // Back-off to 7 s: about 20 attempts in two minutes, not hundreds.
    let attempts = w.server.count("create node");
    assert!((10..=30).contains(&attempts), "{attempts} attempts");
    w.server.set_down(false);
    run_for(Duration::from_secs(8)).await;
    assert!(w.server.node(NODE).is_some());
    agent.stop();
}

#[tokio::test(start_paused = true)]
async fn an_outage_backs_off_and_the_lease_resumes_within_seconds() {
    let w = world();
    let mut agent = run_node_agent(w.settings.clone(), w.deps.clone());
    run_for(Duration::from_secs(15)).await;
    w.server.set_down(true);
    let before = w.server.journal().len();
    run_for(Duration::from_secs(120)).await;
    let during = w.server.journal().len() - before;
    // Lease retries every 7 s at most, status every 10 s: well under 60 calls in 2 min.
    assert!(during <= 60, "{during} calls during the outage");
    w.server.set_down(false);
    let back = tokio::time::Instant::now();
    let renewed_before = w
        .server
        .lease("kube-node-lease", NODE)
        .expect("lease")
        .metadata
        .resource_version;
    let mut resumed = None;
    for _ in 0..30 {
        run_for(Duration::from_millis(500)).await;
        let now = w
            .server
            .lease("kube-node-lease", NODE)
            .expect("lease")
            .metadata
            .resource_version;
        if now != renewed_before {
            resumed = Some(back.elapsed());
            break;
        }
    }
    assert!(resumed.expect("renewed") <= Duration::from_secs(8));
    agent.stop();
}

#[tokio::test(start_paused = true)]
async fn a_lease_conflict_is_read_again() {
    let w = world();
    let mut agent = run_node_agent(w.settings.clone(), w.deps.clone());
    run_for(Duration::from_secs(1)).await;
    w.server.conflict_next_lease_update();
    let gets = w.server.count("get lease");
    run_for(Duration::from_secs(10)).await;
    assert_eq!(w.server.count("get lease"), gets + 1);
    let updates_after_conflict = w.server.count("update lease");
    run_for(Duration::from_secs(10)).await;
    assert_eq!(w.server.count("update lease"), updates_after_conflict + 1);
    agent.stop();
}

/// A certificate for `system:node:n1`, as the signer would issue it.
/// A certificate valid through 2026 (the fake PKI's form).
fn issued_certificate(request_pem: &[u8]) -> Vec<u8> {
    assert!(
        String::from_utf8_lossy(request_pem).contains("CN=system:node:"),
        "a node's request"
    );
    // 2026-01-01T00:00:00Z to 2027-01-01T00:00:00Z.
    FakePki::certificate(1_767_225_600, 1_798_761_600)
}

#[tokio::test(start_paused = true)]
async fn tls_bootstrap_asks_for_a_node_certificate_and_writes_the_kubeconfig() {
    let mut w = world();
    let bootstrap = PathBuf::from("/etc/kubernetes/bootstrap-kubelet.conf");
    w.connector.set_kubeconfig(
        &bootstrap,
        KubeconfigSummary {
            server: "https://10.0.0.1:6443".into(),
            ca_data: Some(b"CA".to_vec()),
            has_token: true,
            ..KubeconfigSummary::default()
        },
    );
    w.settings.bootstrap_kubeconfig = Some(bootstrap.clone());
    let mut agent = run_node_agent(w.settings.clone(), w.deps.clone());
    run_for(Duration::from_millis(300)).await;
    let csrs = w.server.csrs();
    let (name, csr) = csrs.iter().next().expect("a CSR");
    assert!(name.starts_with("node-csr-"), "{name}");
    assert_eq!(
        csr.request.signer_name,
        "kubernetes.io/kube-apiserver-client-kubelet"
    );
    assert_eq!(
        csr.request.usages,
        ["digital signature", "key encipherment", "client auth"]
    );
    // The pending key is kept while waiting (a restart asks with it again).
    assert!(w.store.pending_key().expect("read").is_some());
    assert!(w.server.node(NODE).is_none());
    w.server
        .issue(name, &issued_certificate(&csr.request.request_pem));
    run_for(Duration::from_millis(500)).await;
    assert_eq!(w.store.pair_names().len(), 1);
    assert!(w.store.pair_names()[0].starts_with("kubelet-client-2026-11-21-"));
    assert!(w.store.pending_key().expect("read").is_none());
    let written = w
        .store
        .file(Path::new("/etc/kubernetes/kubelet.conf"))
        .expect("kubeconfig");
    assert!(
        written.contains("server: \"https://10.0.0.1:6443\""),
        "{written}"
    );
    assert!(
        written.contains("certificate-authority-data: \"Q0E=\""),
        "{written}"
    );
    assert!(written.contains("client-certificate: \"/fake/pki/kubelet-client-current.pem\""));
    assert_eq!(w.connector.connections(), [bootstrap, kubeconfig()]);
    assert!(w.server.node(NODE).is_some());
    agent.stop();
}

/// A serving certificate's approval can outlast the client certificate (2-minute ones in
/// the rotation test): the wait goes on, on the same request, with the rotated clients.
#[tokio::test(start_paused = true)]
async fn a_certificate_wait_goes_on_with_the_clients_of_a_rotation() {
    // Two fakes holding the same request: before the rotation it stays pending, after it
    // is issued, so only the rotated clients can bring the certificate.
    let before = FakeApiServer::new();
    let after = FakeApiServer::new();
    let request = crate::ports::api::CsrRequest {
        name: None,
        request_pem: b"REQUEST".to_vec(),
        signer_name: "kubernetes.io/kubelet-serving".into(),
        usages: vec!["server auth".into()],
        expiration_seconds: None,
    };
    let csr = before.clients().certificates.create_csr(&request).await;
    let csr = csr.unwrap_or_else(|e| panic!("{e}"));
    let same = after.clients().certificates.create_csr(&request).await;
    assert_eq!(same.ok().as_ref(), Some(&csr));
    let (rotated, clients) = tokio::sync::watch::channel(before.clients());
    let waited = csr.clone();
    let waiting = tokio::spawn(async move {
        tls::wait_with_current_clients(clients, &waited, Duration::from_secs(900)).await
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    after.issue(&csr.name, b"SERVING");
    rotated.send_replace(after.clients());
    let certificate = waiting
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    assert_eq!(certificate, Ok(b"SERVING".to_vec()));
    assert!(before.count("get csr") > 1, "{:?}", before.journal());
}

/// kubeadm's control-plane node: the kubeconfig embeds the node's certificate and key,
/// and `--cert-dir` is empty. As upstream's certificate manager, the pair is stored there
/// (kubeadm's `kubelet-finalize` then points the kubeconfig at it) and rotated at once;
/// the new clients use the issued pair.
#[tokio::test(start_paused = true)]
async fn rotation_takes_the_kubeconfigs_embedded_certificate_and_renews_it_at_once() {
    let mut w = world();
    let embedded = FakePki::certificate(1_767_225_600, 1_798_761_600);
    w.connector.set_kubeconfig(
        &kubeconfig(),
        KubeconfigSummary {
            server: "https://10.0.0.1:6443".into(),
            client_certificate: Some(embedded.clone()),
            client_key: Some(b"KEY\n".to_vec()),
            ..KubeconfigSummary::default()
        },
    );
    w.settings.rotate_certificates = true;
    // The API server is a static pod of this very node: not up yet.
    w.server.set_down(true);
    let mut agent = run_node_agent(w.settings.clone(), w.deps.clone());
    run_for(Duration::from_millis(300)).await;
    // The kubeconfig's pair, first in --cert-dir.
    assert_eq!(w.store.pair_names().len(), 1, "{:?}", w.store.pair_names());
    let seeded = w.store.current().expect("read").expect("a current pair");
    assert!(seeded.starts_with(&embedded) && seeded.ends_with(b"KEY\n"));
    // Renewed as soon as the API server answers, not at 70-90 % of a year.
    run_for(Duration::from_secs(20)).await;
    assert!(w.server.csrs().is_empty());
    w.server.set_down(false);
    run_for(Duration::from_secs(60)).await;
    let csrs = w.server.csrs();
    let (name, csr) = csrs.iter().next().expect("a CSR at once");
    assert_eq!(
        csr.request.signer_name,
        "kubernetes.io/kube-apiserver-client-kubelet"
    );
    w.server
        .issue(name, &issued_certificate(&csr.request.request_pem));
    run_for(Duration::from_secs(3)).await;
    // The issued pair is the current one (stored in the same fake second, under the
    // seeded pair's name, as upstream's file store names pairs by the second).
    let current = w.store.current().expect("read").expect("a current pair");
    assert!(
        current.starts_with(&issued_certificate(&csr.request.request_pem)),
        "{}",
        String::from_utf8_lossy(&current)
    );
    assert_eq!(
        w.connector.connections().last(),
        Some(&PathBuf::from("/fake/pki/kubelet-client-current.pem")),
        "the new clients use the issued pair"
    );
    agent.stop();
}
