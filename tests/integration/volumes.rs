//! Volumes from API objects against a real kube-apiserver v1.26.1 (the private control
//! plane with its controller manager, which publishes `kube-root-ca.crt` and makes the
//! `default` service accounts): the kube-rs adapter reads ConfigMaps and Secrets (and a
//! node identity is refused objects no pod of it references: the Node authorizer), a
//! TokenRequest bound to a pod gives a token the API server accepts (TokenReview), and the
//! volume manager sets up a pod's `kube-api-access-*` projected volume (on tmpfs) and a
//! configMap volume from the real objects, then sees an update of the ConfigMap.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::cluster::Cluster;
use rkubelet::adapters::apiserver::KubeConnector;
use rkubelet::adapters::system::{SystemClock, SystemPodFiles};
use rkubelet::app::pods::volume_manager::VolumeManager;
use rkubelet::domain::kuberuntime::requests::RequestContext;
use rkubelet::domain::pod::Pod;
use rkubelet::ports::api::{ApiConnector, TokenRequest};

fn apply(cluster: &Cluster, dir: &Path, name: &str, yaml: &str) {
    let file = dir.join(name);
    std::fs::write(&file, yaml).expect("manifest written");
    let out = cluster.kubectl(&["apply", "-f", &file.display().to_string()]);
    assert!(
        out.status.success(),
        "kubectl apply {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn requests(root: &Path) -> RequestContext {
    RequestContext::under_root(root)
}

/// Waits for an object the controller manager makes.
fn wait_for(cluster: &Cluster, args: &[&str]) -> serde_json::Value {
    let deadline = Instant::now() + crate::common::patience(60);
    loop {
        if let Some(v) = cluster.get_json(args) {
            return v;
        }
        assert!(Instant::now() < deadline, "{args:?} never appeared");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd, controller-manager) and root: run by scripts/test.sh"]
async fn config_maps_secrets_and_tokens_from_the_real_api_server_become_volume_files() {
    let cluster = Cluster::start("volumes");
    let work = tempfile::tempdir().expect("temp dir");
    apply(
        &cluster,
        work.path(),
        "objects.yaml",
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: default}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: app-secret, namespace: default}
stringData: {password: hunter2}
---
apiVersion: v1
kind: Pod
metadata: {name: vol-pod, namespace: default}
spec:
  nodeName: nowhere
  containers: [{name: c, image: busybox}]
  volumes:
  - {name: cfg, configMap: {name: app-config, items: [{key: greeting, path: greeting, mode: 0400}]}}
"#,
    );
    // Admission added the kube-api-access volume; the controller manager the CA and account.
    let pod_json = cluster
        .get_json(&["pod", "vol-pod", "-n", "default"])
        .expect("pod");
    let pod: Pod = serde_json::from_value(pod_json).expect("pod decodes");
    assert!(
        pod.spec
            .volumes
            .iter()
            .any(|v| v.name.starts_with("kube-api-access-")),
        "{:?}",
        pod.spec.volumes
    );
    wait_for(
        &cluster,
        &["configmap", "kube-root-ca.crt", "-n", "default"],
    );
    wait_for(&cluster, &["serviceaccount", "default", "-n", "default"]);

    let clients = KubeConnector::default()
        .connect(&cluster.admin_kubeconfig())
        .await
        .expect("admin clients");
    let objects = clients.objects.clone();

    // The adapter: found, absent, decoded.
    let cm = objects
        .get_config_map("default", "app-config")
        .await
        .expect("get configmap")
        .expect("exists");
    assert_eq!(cm.data["greeting"], "hello");
    assert!(objects
        .get_config_map("default", "nope")
        .await
        .expect("404 is not an error")
        .is_none());
    let secret = objects
        .get_secret("default", "app-secret")
        .await
        .expect("get secret")
        .expect("exists");
    assert_eq!(secret.data["password"], b"hunter2");

    // A node identity may read only what its pods reference (Node authorizer).
    let node_clients = KubeConnector::default()
        .connect(&cluster.node_kubeconfig("vn1", 30))
        .await
        .expect("node clients");
    let refused = node_clients
        .objects
        .get_config_map("default", "app-config")
        .await;
    assert!(
        refused
            .as_ref()
            .err()
            .is_some_and(|e| e.to_string().contains("forbidden")),
        "{refused:?}"
    );

    // TokenRequest bound to the pod; the API server accepts the token (TokenReview).
    let issued = objects
        .request_token(&TokenRequest {
            namespace: "default".into(),
            service_account: "default".into(),
            audiences: Vec::new(),
            expiration_seconds: 3600,
            pod_name: pod.metadata.name.clone(),
            pod_uid: pod.metadata.uid.clone(),
        })
        .await
        .expect("token issued");
    assert!(issued.expires_unix > 0);
    let review = format!(
        "{{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{{\"token\":\"{}\"}}}}",
        issued.token
    );
    let review_file = work.path().join("review.json");
    std::fs::write(&review_file, review).expect("review written");
    let out = cluster.kubectl(&[
        "create",
        "-f",
        &review_file.display().to_string(),
        "-o",
        "json",
    ]);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        answer["status"]["user"]["username"],
        "system:serviceaccount:default:default",
        "{answer} {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The volume manager: both volumes set up under the pod's folder.
    let root = work.path().join("kubelet");
    let ctx = requests(&root);
    let vm = VolumeManager::standalone(Arc::new(SystemClock::new()), Arc::new(SystemPodFiles))
        .with_api(objects.clone())
        .with_cache_ttl(Duration::ZERO);
    let started = Instant::now();
    let inputs = vm.inputs(&pod).await;
    let failed = vm.set_up(&ctx, &pod, &inputs).await;
    let setup = started.elapsed();
    println!("volume setup (kube-api-access + configMap, real API server): {setup:?}");
    assert!(failed.is_empty(), "{failed:?}");
    let volumes = root.join("pods").join(&pod.metadata.uid).join("volumes");
    let access = pod
        .spec
        .volumes
        .iter()
        .find(|v| v.name.starts_with("kube-api-access-"))
        .map(|v| volumes.join("kubernetes.io~projected").join(&v.name))
        .expect("access volume");
    let token = std::fs::read_to_string(access.join("token")).expect("token file");
    assert!(token.split('.').count() == 3, "a JWT: {token}");
    let ca = std::fs::read_to_string(access.join("ca.crt")).expect("ca.crt");
    let cluster_ca = std::fs::read_to_string(cluster.ca_cert()).expect("cluster CA");
    assert_eq!(ca.trim(), cluster_ca.trim());
    assert_eq!(
        std::fs::read_to_string(access.join("namespace"))
            .ok()
            .as_deref(),
        Some("default")
    );
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    assert!(
        mountinfo
            .lines()
            .any(|l| l.contains(&access.display().to_string()) && l.contains(" tmpfs ")),
        "the projected volume is on tmpfs"
    );
    let greeting = volumes.join("kubernetes.io~configmap/cfg/greeting");
    assert_eq!(
        std::fs::read_to_string(&greeting).ok().as_deref(),
        Some("hello")
    );
    {
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(&greeting).map(|m| m.mode() & 0o777).ok();
        assert_eq!(mode, Some(0o400));
    }

    // An update reaches the file on the next setup (cache TTL 0 here).
    let out = cluster.kubectl(&[
        "patch",
        "configmap",
        "app-config",
        "-n",
        "default",
        "-p",
        r#"{"data":{"greeting":"bonjour"}}"#,
    ]);
    assert!(out.status.success());
    let inputs = vm.inputs(&pod).await;
    assert!(vm.set_up(&ctx, &pod, &inputs).await.is_empty());
    assert_eq!(
        std::fs::read_to_string(&greeting).ok().as_deref(),
        Some("bonjour")
    );

    // Teardown leaves no mount behind.
    let pod_dir = root.join("pods").join(&pod.metadata.uid);
    let removed = rkubelet::ports::pod_files::PodFiles::remove_pod_dir(&SystemPodFiles, &pod_dir);
    assert!(removed.is_ok(), "{removed:?}");
    assert!(!pod_dir.exists(), "pod folder removed");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    assert!(!mountinfo.contains(&pod_dir.display().to_string()));
}
