//! The kube-rs adapter against a real kube-apiserver v1.26.1 (the private control plane of
//! scripts/test-env/cluster-up.sh): each port call as the node identity, conflicts, the
//! bootstrap token's CSR approved by the controller manager, and the errors of a wrong CA,
//! an unreachable server and an expired certificate.

use std::time::Duration;

use crate::common;
use crate::common::cluster::Cluster;
use rkubelet::adapters::apiserver::{ClientSettings, KubeConnector};
use rkubelet::adapters::pki::RcgenPki;
use rkubelet::domain::node_status::certificate::{
    node_subject, CLIENT_USAGES, SIGNER_KUBELET_CLIENT,
};
use rkubelet::domain::node_status::events::{make_event, node_reference};
use rkubelet::domain::node_status::labels::{initial_node, Registration};
use rkubelet::domain::node_status::lease::renewed_lease;
use rkubelet::domain::node_status::model::EventSource;
use rkubelet::domain::node_status::status::NodeEvent;
use rkubelet::ports::api::{ApiConnector, CallErrorKind, CsrRequest, LeasesError, NodesError};
use rkubelet::ports::pki::Pki;
use serde_json::json;

fn registration(name: &str) -> Registration {
    Registration {
        node_name: name.into(),
        hostname: name.into(),
        os: "linux".into(),
        arch: "amd64".into(),
        schedulable: true,
        controller_attach_detach: true,
        ..Registration::default()
    }
}

fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
async fn each_port_works_as_the_node_identity_and_errors_name_their_cause() {
    let cluster = Cluster::start("adapter");
    let kubeconfig = cluster.node_kubeconfig("a1", 30);
    let connector = KubeConnector::default();
    let clients = connector.connect(&kubeconfig).await.expect("connects");

    // Nodes: create, a second create is AlreadyExists, get, patch status and labels.
    let node = initial_node(&registration("a1"));
    let created = clients.nodes.create_node(&node).await.expect("created");
    assert!(!created.metadata.uid.is_empty());
    assert!(matches!(
        clients.nodes.create_node(&node).await,
        Err(NodesError::AlreadyExists { .. })
    ));
    let patch = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
        "reason": "KubeletReady", "message": "kubelet is posting ready status",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}, {"$patch": "replace"}],
        "capacity": {"cpu": "2", "pods": "110"}}});
    let patched = clients
        .nodes
        .patch_node_status("a1", &patch)
        .await
        .expect("status patched");
    assert_eq!(patched.status.conditions[0].reason, "KubeletReady");
    assert_eq!(patched.status.addresses[0].address, "10.0.0.9");
    let labelled = clients
        .nodes
        .patch_node(
            "a1",
            &json!({"metadata": {"labels": {"node.kubernetes.io/pool": "x"}}}),
        )
        .await
        .expect("labels patched");
    assert_eq!(labelled.metadata.labels["node.kubernetes.io/pool"], "x");
    // Node restriction: creating another node's object is refused.
    let err = clients
        .nodes
        .create_node(&initial_node(&registration("someone-else")))
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, NodesError::Call { source, .. } if source.kind == CallErrorKind::Forbidden),
        "{err}"
    );

    // Leases: create, update, a stale update conflicts.
    let lease = renewed_lease(None, "a1", 40, Some(&created.metadata.uid), now_nanos());
    let stored = clients
        .leases
        .create_lease(&lease)
        .await
        .expect("lease created");
    let renewed = renewed_lease(Some(&stored), "a1", 40, None, now_nanos());
    let updated = clients
        .leases
        .update_lease(&renewed)
        .await
        .expect("renewed");
    assert_ne!(
        updated.metadata.resource_version,
        stored.metadata.resource_version
    );
    assert_eq!(
        updated.metadata.owner_references[0].uid,
        created.metadata.uid
    );
    assert!(matches!(
        clients.leases.update_lease(&renewed).await,
        Err(LeasesError::Conflict { .. })
    ));
    let fetched = clients
        .leases
        .get_lease("kube-node-lease", "a1")
        .await
        .expect("got");
    assert_eq!(fetched.spec.renew_time, updated.spec.renew_time);

    // Events: create, then a repeat's count by patch.
    let source = EventSource {
        component: "kubelet".into(),
        host: "a1".into(),
    };
    let event = make_event(
        &node_reference("a1"),
        &source,
        &NodeEvent::starting(),
        now_nanos(),
    );
    clients
        .events
        .create_event(&event)
        .await
        .expect("event created");
    let bumped = clients
        .events
        .patch_event("default", &event.metadata.name, &json!({"count": 2}))
        .await
        .expect("event patched");
    assert_eq!(bumped.count, 2);

    // A wrong CA: the TLS error names the cause.
    let wrong_ca = cluster.base.join("wrong-ca.kubeconfig");
    let other = Cluster::start("adapter-other");
    let text = std::fs::read_to_string(&kubeconfig).expect("read");
    let other_ca = std::fs::read(other.ca_cert()).expect("ca");
    let ours = std::fs::read(cluster.ca_cert()).expect("ca");
    use base64::Engine;
    let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
    std::fs::write(&wrong_ca, text.replace(&b64(&ours), &b64(&other_ca))).expect("written");
    let bad = connector.connect(&wrong_ca).await.expect("client made");
    let err = bad.nodes.get_node("a1").await.expect_err("untrusted");
    let NodesError::Call { source, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(source.kind, CallErrorKind::Unreachable, "{err}");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");

    // An expired client certificate: 401.
    let expired = cluster.node_kubeconfig("a2", -1);
    let old = connector.connect(&expired).await.expect("client made");
    let err = old.nodes.get_node("a2").await.expect_err("expired");
    assert!(
        matches!(&err, NodesError::Call { source, .. } if source.kind == CallErrorKind::Unauthorized),
        "{err}"
    );

    // Unreachable: nothing listens; the error says so within the timeout.
    let closed = cluster.base.join("closed.kubeconfig");
    let port = common::free_port();
    std::fs::write(
        &closed,
        text.replace(&cluster.server(), &format!("https://127.0.0.1:{port}")),
    )
    .expect("written");
    let fast = KubeConnector::new(ClientSettings {
        call_timeout: Duration::from_secs(2),
        ..ClientSettings::default()
    });
    let gone = fast.connect(&closed).await.expect("client made");
    let err = gone.nodes.get_node("a1").await.expect_err("unreachable");
    assert!(
        matches!(&err, NodesError::Call { source, .. } if source.kind == CallErrorKind::Unreachable),
        "{err}"
    );
    assert!(
        err.to_string()
            .to_lowercase()
            .contains("connection refused"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd) and root: run by scripts/test.sh"]
async fn a_bootstrap_csr_is_approved_and_signed_by_the_controller_manager() {
    let cluster = Cluster::start("adapter-csr");
    let clients = KubeConnector::default()
        .connect(&cluster.bootstrap_kubeconfig())
        .await
        .expect("connects");
    let pki = RcgenPki;
    let key = pki.generate_key().expect("key");
    let request = pki
        .certificate_request(&key, &node_subject("b1"), CLIENT_USAGES)
        .expect("request");
    let csr = CsrRequest {
        name: Some(request.digest_name.clone()),
        request_pem: request.pem.clone(),
        signer_name: SIGNER_KUBELET_CLIENT.into(),
        usages: CLIENT_USAGES.iter().map(|u| u.to_string()).collect(),
        expiration_seconds: None,
    };
    let created = clients
        .certificates
        .create_csr(&csr)
        .await
        .expect("created");
    assert_eq!(created.name, request.digest_name);
    // The same request again (a restart) reuses it.
    let again = clients.certificates.create_csr(&csr).await.expect("reused");
    assert_eq!(again, created);
    let started = std::time::Instant::now();
    let pem = clients
        .certificates
        .wait_for_certificate(&created, Duration::from_secs(60))
        .await
        .expect("issued");
    eprintln!("CSR issued in {:.2} s", started.elapsed().as_secs_f64());
    let validity = pki.validity(&pem).expect("a certificate");
    assert!(validity.not_after > validity.not_before);
    let stored = cluster
        .get_json(&["csr", &request.digest_name])
        .expect("csr");
    assert_eq!(stored["spec"]["signerName"], SIGNER_KUBELET_CLIENT);
    assert_eq!(
        stored["spec"]["usages"],
        json!(["digital signature", "key encipherment", "client auth"])
    );
}
