//! The baseline of the pod benches: the CRI calls a kubelet makes to start a pod
//! (RunPodSandbox + CreateContainer + StartContainer), made directly with rkubelet's CRI
//! client and nothing else.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::kuberuntime::hosts::{etc_hosts_file, HostsFile};
use rkubelet::domain::kuberuntime::requests::{
    container_config, pod_dir, sandbox_config, ContainerConfig, RequestContext, SandboxConfig,
};
use rkubelet::domain::kuberuntime::runtime::SandboxFilter;
use rkubelet::domain::kuberuntime::termination::message_mount;
use rkubelet::domain::pod::api::decode_api_pod;
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
        let bare = self.clone();
        timed_at_once(&self.cri, n, move |i| {
            let bare = bare.clone();
            async move { bare.run_kept(1000 + i).await }
        })
        .await
    }

    /// Stops and removes every sandbox (with its containers) of the pod called `pod`.
    pub async fn remove_pod(&self, pod: &str) -> Result<(), String> {
        remove_pod(&self.cri, pod).await
    }
}

/// `n` pods started at once by `start` (given 0..n, returning the pod's name): the time
/// until all are started; the pods are removed again.
async fn timed_at_once<F, Fut>(cri: &CriRuntime, n: usize, start: F) -> Result<Duration, String>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<String, String>> + Send + 'static,
{
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        set.spawn(start(i));
    }
    let mut names = Vec::new();
    while let Some(done) = set.join_next().await {
        names.push(done.map_err(|e| format!("bare run task: {e}"))??);
    }
    let elapsed = t.elapsed();
    for name in names {
        remove_pod(cri, &name).await?;
    }
    Ok(elapsed)
}

/// Stops and removes every sandbox (with its containers) of the pod called `pod`.
async fn remove_pod(cri: &CriRuntime, pod: &str) -> Result<(), String> {
    let filter = SandboxFilter {
        labels: [(POD_NAME_LABEL.to_string(), pod.to_string())].into(),
        ..Default::default()
    };
    let fail = |e: rkubelet::ports::runtime::RuntimeError| format!("removing {pod}: {e}");
    for sb in cri.list_pod_sandboxes(&filter).await.map_err(fail)? {
        cri.stop_pod_sandbox(&sb.status.id).await.map_err(fail)?;
        cri.remove_pod_sandbox(&sb.status.id).await.map_err(fail)?;
    }
    Ok(())
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

/// The requests rkubelet itself sends for a pod, issued bare: what the runtime alone takes
/// for a pod as a kubelet starts it, with upstream's security context on the sandbox, the
/// pod's DNS, the managed `/etc/hosts` and the termination-message file mounted (both
/// written first, as the kubelet does), and the `PodSandboxStatus` call that gives the
/// hosts file its IP. The requests come from the domain functions rkubelet's sync uses.
#[allow(dead_code)] // the API pods' and claims' benches alone compare with it
#[derive(Clone)]
pub struct BareKubeletCri {
    pub cri: CriRuntime,
    pub busybox: String,
    pub requests: RequestContext,
}

#[allow(dead_code)]
impl BareKubeletCri {
    /// One pod's requests, timed, then the pod removed again.
    pub async fn run(&self, i: usize) -> Result<Duration, String> {
        let t = Instant::now();
        let name = self.run_kept(i).await?;
        let elapsed = t.elapsed();
        remove_pod(&self.cri, &name).await?;
        Ok(elapsed)
    }

    /// `n` pods' calls at once: the time until all containers are started; the pods are
    /// removed again.
    pub async fn concurrent(&self, n: usize) -> Result<Duration, String> {
        let bare = self.clone();
        timed_at_once(&self.cri, n, move |i| {
            let bare = bare.clone();
            async move { bare.run_kept(i).await }
        })
        .await
    }

    async fn run_kept(&self, i: usize) -> Result<String, String> {
        let (name, uid) = (
            format!("bare-kubelet{i}"),
            format!("bench-bare-kubelet-{i}"),
        );
        let value = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {
                "automountServiceAccountToken": false,
                "terminationGracePeriodSeconds": 0,
                "containers": [{
                    "name": "app",
                    "image": self.busybox,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "3600"],
                }],
            },
        });
        let pod = decode_api_pod(&value)
            .map_err(|e| format!("the bare pod: {e:?}"))?
            .pod;
        let ctx = &self.requests;
        let sandbox = sandbox_config(ctx, &pod, 0, "");
        for dir in [
            PathBuf::from(&sandbox.log_directory),
            pod_dir(ctx, &pod.metadata.uid),
        ] {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let fail = |e: rkubelet::ports::runtime::RuntimeError| format!("bare CRI run: {e}");
        let sb = self.cri.run_pod_sandbox(&sandbox).await.map_err(fail)?;
        let ip = self.cri.pod_sandbox_status(&sb).await.map_err(fail)?.ip;
        if let Some(file) = HostsFile::of(ctx, &pod, &ip, &sandbox.hostname) {
            let path = etc_hosts_file(ctx, &pod.metadata.uid);
            std::fs::write(&path, file.content(""))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let container = pod
            .spec
            .containers
            .first()
            .ok_or("the bare pod's container")?;
        if let Some(mount) = message_mount(ctx, &pod, container, 0) {
            let path = Path::new(&mount.host_path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            std::fs::write(path, "").map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let config = container_config(ctx, &pod, container, 0, 0)
            .map_err(|e| format!("the bare container's request: {e}"))?;
        let ctr = self
            .cri
            .create_container(&sb, &config, &sandbox)
            .await
            .map_err(fail)?;
        self.cri.start_container(&ctr).await.map_err(fail)?;
        Ok(name)
    }
}
