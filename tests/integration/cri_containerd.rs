//! The CRI adapter against a real, private containerd (one per test, so tests run in
//! parallel). Needs root and containerd; fails, saying which is missing, without them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};
use rkubelet::domain::kuberuntime::runtime::ContainerState;
use rkubelet::ports::runtime::{ImageService, RuntimeError, RuntimeService};

use crate::common;

use common::containerd::Containerd;
use common::{http_get, start_daemon};

#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn pod_lifecycle_through_the_adapter() -> Result<(), RuntimeError> {
    let ctrd = Containerd::start("life");
    let endpoint = ctrd.var("CRI_ENDPOINT");
    let busybox = ctrd.var("BUSYBOX_IMAGE");
    let log_root = PathBuf::from(ctrd.var("RKUBELET_POD_LOG_ROOT"));
    let rt = CriRuntime::connect(&endpoint, Duration::from_secs(60))?;

    let version = rt.version().await?;
    assert_eq!(version.runtime_name, "containerd");
    assert_eq!(version.runtime_api_version, "v1");
    let image = rt.image_status(&busybox).await?;
    assert!(image.is_some_and(|i| !i.id.is_empty()), "busybox present");
    assert_eq!(rt.image_status("docker.io/library/absent:0").await?, None);
    // containerd 1.6 does not implement RuntimeConfig: tolerated as None.
    let _ = rt.cgroup_driver().await?;

    let uid = "0b7f2d1e-cri-test";
    let log_dir = log_root.join(format!("default_hello_{uid}"));
    std::fs::create_dir_all(&log_dir).expect("log dir");
    let sandbox = SandboxConfig {
        name: "hello".into(),
        uid: uid.into(),
        namespace: "default".into(),
        hostname: "hello".into(),
        log_directory: log_dir.display().to_string(),
        labels: [("io.kubernetes.pod.uid".to_string(), uid.to_string())].into(),
        // A pod's cgroup, as the kubelet gives each (runc makes it): containerd reads
        // the pod's stats there.
        cgroup_parent: format!("{}/pod{uid}", ctrd.var("RKUBELET_CGROUP_ROOT")),
        ..Default::default()
    };
    let container = ContainerConfig {
        name: "main".into(),
        image: busybox.clone(),
        command: vec!["sh".into(), "-c".into(), "echo hello; sleep 3600".into()],
        log_path: "main/0.log".into(),
        annotations: [(
            "io.kubernetes.container.hash".to_string(),
            "abc".to_string(),
        )]
        .into(),
        ..Default::default()
    };

    let t = Instant::now();
    let sb = rt.run_pod_sandbox(&sandbox).await?;
    let t_sb = t.elapsed();
    let ctr = rt.create_container(&sb, &container, &sandbox).await?;
    let t_create = t.elapsed() - t_sb;
    rt.start_container(&ctr).await?;
    let total = t.elapsed();
    eprintln!(
        "FIGURE sandbox+create+start: {:.1} ms (sandbox {:.1} ms, create {:.1} ms, start {:.1} ms)",
        total.as_secs_f64() * 1e3,
        t_sb.as_secs_f64() * 1e3,
        t_create.as_secs_f64() * 1e3,
        (total - t_sb - t_create).as_secs_f64() * 1e3
    );

    let status = rt.container_status(&ctr).await?;
    assert_eq!(status.state, ContainerState::Running);
    assert_eq!(status.name, "main");
    assert_eq!(status.hash, 0xabc);
    let sb_status = rt.pod_sandbox_status(&sb).await?;
    assert_eq!(sb_status.id, sb);
    let listed = rt
        .list_pod_sandboxes(&rkubelet::domain::kuberuntime::runtime::SandboxFilter {
            labels: sandbox.labels.clone(),
            ..Default::default()
        })
        .await?;
    assert!(listed.iter().any(|e| e.status.id == sb && e.uid == uid));
    let containers = rt
        .list_containers(&rkubelet::domain::kuberuntime::runtime::ContainerFilter {
            sandbox_id: sb.clone(),
            ..Default::default()
        })
        .await?;
    assert_eq!(containers.len(), 1);

    let log_file = log_dir.join("main/0.log");
    let deadline = Instant::now() + crate::common::patience(10);
    loop {
        let text = std::fs::read_to_string(&log_file).unwrap_or_default();
        if text.contains(" stdout F hello") || text.contains("hello") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no hello in {}: {text:?}",
            log_file.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The pod's own stats, network included, where the runtime has them (containerd
    // 1.6 does on Linux).
    let pods = rkubelet::ports::node_stats::RuntimeStats::pod_sandbox_stats(&rt).await?;
    eprintln!("pod sandbox stats: {pods:?}");
    let ours = pods
        .iter()
        .find(|p| p.sandbox_id == sb)
        .unwrap_or_else(|| panic!("no stats for sandbox {sb}: {pods:?}"));
    assert_eq!(ours.pod_uid, uid);
    let eth0 = ours.network.iter().find(|i| i.name == "eth0");
    assert!(
        eth0.is_some_and(|i| i.rx_bytes > 0 || i.tx_bytes > 0),
        "the pod's eth0: {ours:?}"
    );

    rt.stop_container(&ctr, 2).await?;
    assert_eq!(
        rt.container_status(&ctr).await?.state,
        ContainerState::Exited
    );
    rt.remove_container(&ctr).await?;
    rt.stop_pod_sandbox(&sb).await?;
    rt.remove_pod_sandbox(&sb).await?;
    assert!(matches!(
        rt.container_status(&ctr).await,
        Err(RuntimeError::NotFound(_))
    ));
    assert!(matches!(
        rt.pod_sandbox_status(&sb).await,
        Err(RuntimeError::NotFound(_))
    ));
    // Stop and remove stay idempotent.
    rt.remove_container(&ctr).await?;
    rt.remove_pod_sandbox(&sb).await?;
    Ok(())
}

#[test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
fn daemon_starts_on_containerd() {
    let ctrd = Containerd::start("bin");
    let endpoint = ctrd.var("CRI_ENDPOINT");
    let root = ctrd.base.join("kubelet-root");
    let mut daemon = start_daemon(
        &[
            format!("--container-runtime-endpoint={endpoint}"),
            format!("--root-dir={}", root.display()),
            // The instance's own cgroup root, removed with it; never the machine's /kubepods.
            format!("--cgroup-root={}", ctrd.var("RKUBELET_CGROUP_ROOT")),
        ],
        false,
    );
    let healthz = http_get(daemon.port, "/healthz");
    let status = daemon.terminate();
    let log = daemon.log_text();
    assert_eq!(healthz, Some((200, "ok".to_string())), "log:\n{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("container runtime initialized") && l.contains("containerd")),
        "runtime name containerd not logged:\n{log}"
    );
    assert!(status.success(), "exit status {status:?}");
}
