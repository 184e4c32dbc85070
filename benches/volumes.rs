//! Volume setup against a private control plane (kube-apiserver v1.26.1 with its
//! controller manager): for 50 pods each with the `kube-api-access-*` volume admission
//! adds and a configMap volume, the time the volume manager takes to set them up (a
//! TokenRequest and two ConfigMap reads, files written atomically, tmpfs mounted): goal
//! under 20 ms a pod (issue 13). Then one ConfigMap change written into all 50 pods'
//! volumes (cache expired). Client-side rate limit off: this measures the work, not
//! `kubeAPIQPS`. Needs root (tmpfs).

#[allow(dead_code)]
#[path = "../tests/common/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../tests/common/env_file.rs"]
mod env_file;
#[allow(dead_code)]
#[path = "../tests/common/patience.rs"]
mod patience;

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{below, fail};
use rkubelet::adapters::apiserver::{ClientSettings, KubeConnector};
use rkubelet::adapters::system::{SystemClock, SystemPodFiles};
use rkubelet::app::pods::volume_manager::VolumeManager;
use rkubelet::domain::kuberuntime::requests::RequestContext;
use rkubelet::domain::pod::Pod;
use rkubelet::ports::api::ApiConnector;

const PODS: usize = 50;

fn requests(root: &Path) -> RequestContext {
    RequestContext::under_root(root)
}

pub fn main() {
    let c = cluster::Cluster::start("benchvol");
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail("volumes", &e.to_string()));
    let mut manifest = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bench-config, namespace: default}\ndata: {key: v1}\n",
    );
    for i in 0..PODS {
        manifest.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: vb-{i}, namespace: default}}\nspec:\n  nodeName: nowhere\n  containers: [{{name: c, image: busybox}}]\n  volumes: [{{name: cfg, configMap: {{name: bench-config}}}}]\n"
        ));
    }
    // The default service account and CA ConfigMap come from the controller manager.
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.get_json(&["serviceaccount", "default"]).is_none()
        || c.get_json(&["configmap", "kube-root-ca.crt"]).is_none()
    {
        if Instant::now() > deadline {
            fail("volumes", "no default service account or kube-root-ca.crt");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let file = dir.path().join("pods.yaml");
    if std::fs::write(&file, manifest).is_err() {
        fail("volumes", "cannot write the manifest");
    }
    let out = c.kubectl(&["apply", "-f", &file.display().to_string()]);
    if !out.status.success() {
        fail("volumes", &String::from_utf8_lossy(&out.stderr));
    }
    let pods: Vec<Pod> = (0..PODS)
        .map(|i| {
            c.get_json(&["pod", &format!("vb-{i}")])
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_else(|| fail("volumes", "pod not readable"))
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail("volumes", &e.to_string()));
    rt.block_on(async {
        let connector = KubeConnector::new(ClientSettings {
            qps: 0.0,
            ..ClientSettings::default()
        });
        let clients = connector
            .connect(&c.admin_kubeconfig())
            .await
            .unwrap_or_else(|e| fail("volumes", &e.to_string()));
        let vm = VolumeManager::standalone(Arc::new(SystemClock::new()), Arc::new(SystemPodFiles))
            .with_api(clients.objects.clone())
            .with_cache_ttl(Duration::ZERO);
        let ctx = requests(&dir.path().join("kubelet"));
        let mut times = Vec::new();
        for pod in &pods {
            let start = Instant::now();
            let inputs = vm.inputs(pod).await;
            let failed = vm.set_up(&ctx, pod, &inputs).await;
            times.push(start.elapsed());
            if !failed.is_empty() {
                fail("volumes", &format!("{failed:?}"));
            }
        }
        times.sort();
        let median = times[times.len() / 2].as_secs_f64() * 1000.0;
        let max = times[times.len() - 1].as_secs_f64() * 1000.0;
        println!(
            "volumes: setup of kube-api-access + configMap, median of {PODS} pods: {median:.1} ms (max {max:.1} ms), {}",
            below(median, 20.0, " ms")
        );
        let out = c.kubectl(&[
            "patch",
            "configmap",
            "bench-config",
            "-p",
            r#"{"data":{"key":"v2"}}"#,
        ]);
        if !out.status.success() {
            fail("volumes", "patch failed");
        }
        let start = Instant::now();
        for pod in &pods {
            let inputs = vm.inputs(pod).await;
            let _ = vm.set_up(&ctx, pod, &inputs).await;
        }
        let all = start.elapsed().as_secs_f64() * 1000.0;
        let updated = pods
            .iter()
            .filter(|p| {
                let f = ctx
                    .root_dir
                    .join("pods")
                    .join(&p.metadata.uid)
                    .join("volumes/kubernetes.io~configmap/cfg/key");
                std::fs::read_to_string(f).ok().as_deref() == Some("v2")
            })
            .count();
        println!(
            "volumes: a ConfigMap change written into {updated}/{PODS} pods' volumes in one pass: {all:.0} ms (after the cache period; upstream: within syncFrequency + TTL)"
        );
        for pod in &pods {
            let pod_dir = ctx.root_dir.join("pods").join(&pod.metadata.uid);
            let _ = rkubelet::ports::pod_files::PodFiles::remove_pod_dir(&SystemPodFiles, &pod_dir);
        }
        if updated != PODS {
            fail("volumes", "not every pod saw the update");
        }
    });
}
