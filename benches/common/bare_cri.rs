//! The baseline of the pod benches: the CRI calls a kubelet makes to start a pod
//! (RunPodSandbox + CreateContainer + StartContainer), made directly with rkubelet's CRI
//! client and nothing else.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::requests::{ContainerConfig, SandboxConfig};
use rkubelet::domain::kuberuntime::runtime::SandboxFilter;
use rkubelet::ports::runtime::RuntimeService;

pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";

/// Bare CRI runs on one containerd.
#[derive(Clone)]
pub struct BareCri {
    pub cri: CriRuntime,
    pub busybox: String,
    /// The pod log root (`RKUBELET_POD_LOG_ROOT`).
    pub logs: PathBuf,
}

impl BareCri {
    /// One pod's calls, timed, then the pod removed again.
    pub async fn run(&self, i: usize) -> Result<Duration, String> {
        let t = Instant::now();
        let name = self.run_kept(i).await?;
        let elapsed = t.elapsed();
        self.remove_pod(&name).await?;
        Ok(elapsed)
    }

    /// One pod's calls, the pod kept; returns its name.
    pub async fn run_kept(&self, i: usize) -> Result<String, String> {
        bare_pod(&self.cri, &self.busybox, &self.logs, i).await
    }

    /// `n` pods' calls at once (as a kubelet with one worker per pod issues them): the
    /// time until all containers are started; the pods are removed again.
    pub async fn concurrent(&self, n: usize) -> Result<Duration, String> {
        let t = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for i in 0..n {
            let bare = self.clone();
            set.spawn(async move { bare.run_kept(1000 + i).await });
        }
        let mut names = Vec::new();
        while let Some(done) = set.join_next().await {
            names.push(done.map_err(|e| format!("bare run task: {e}"))??);
        }
        let elapsed = t.elapsed();
        for name in names {
            self.remove_pod(&name).await?;
        }
        Ok(elapsed)
    }

    /// Stops and removes every sandbox (with its containers) of the pod called `pod`.
    pub async fn remove_pod(&self, pod: &str) -> Result<(), String> {
        let filter = SandboxFilter {
            labels: [(POD_NAME_LABEL.to_string(), pod.to_string())].into(),
            ..Default::default()
        };
        let fail = |e: rkubelet::ports::runtime::RuntimeError| format!("removing {pod}: {e}");
        for sb in self.cri.list_pod_sandboxes(&filter).await.map_err(fail)? {
            self.cri
                .stop_pod_sandbox(&sb.status.id)
                .await
                .map_err(fail)?;
            self.cri
                .remove_pod_sandbox(&sb.status.id)
                .await
                .map_err(fail)?;
        }
        Ok(())
    }
}

/// RunPodSandbox + CreateContainer + StartContainer for pod `bare<i>`; returns its name.
async fn bare_pod(
    cri: &CriRuntime,
    busybox: &str,
    logs: &Path,
    i: usize,
) -> Result<String, String> {
    let uid = format!("bench-bare-{i}");
    let name = format!("bare{i}");
    let log_dir = logs.join(format!("default_{name}_{uid}"));
    std::fs::create_dir_all(&log_dir).map_err(|e| format!("log dir: {e}"))?;
    let sandbox = SandboxConfig {
        name: name.clone(),
        uid: uid.clone(),
        namespace: "default".into(),
        hostname: name.clone(),
        log_directory: log_dir.display().to_string(),
        labels: [
            ("io.kubernetes.pod.uid".to_string(), uid.clone()),
            (POD_NAME_LABEL.to_string(), name.clone()),
        ]
        .into(),
        ..Default::default()
    };
    let container = ContainerConfig {
        name: "main".into(),
        image: busybox.to_string(),
        command: vec!["sleep".into(), "3600".into()],
        log_path: "main/0.log".into(),
        ..Default::default()
    };
    let fail = |e: rkubelet::ports::runtime::RuntimeError| format!("bare CRI run: {e}");
    let sb = cri.run_pod_sandbox(&sandbox).await.map_err(fail)?;
    let ctr = cri
        .create_container(&sb, &container, &sandbox)
        .await
        .map_err(fail)?;
    cri.start_container(&ctr).await.map_err(fail)?;
    Ok(name)
}
