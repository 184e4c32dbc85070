//! The cgroupfs driver against this machine's real cgroup v1 hierarchies: the
//! values the kernel ends up holding, a real process seen in a pod cgroup,
//! EBUSY while it lives, and removal from every hierarchy. Needs root and cgroup v1
//! (fails saying so otherwise); runs under a unique root removed on exit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::common;

use common::cgroups::rmdir_tree;
use rkubelet::adapters::cgroupfs::CgroupfsManager;
use rkubelet::domain::cgroup::{
    kubepods_name, pod_cgroup_name, pod_resource_config, qos_cgroup_name, CgroupName,
    CgroupSettings, ResourceConfig,
};
use rkubelet::domain::pod::{Container, ObjectMeta, Pod, PodSpec, QosClass, ResourceRequirements};
use rkubelet::domain::units::quantity::Quantity;
use rkubelet::ports::cgroup::{CgroupError, CgroupManager};

const MOUNT_ROOT: &str = "/sys/fs/cgroup";

/// Panics, saying what is missing, unless this process may write this machine's cgroup
/// v1 hierarchies.
fn require_root_and_cgroup_v1() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "peer missing: writing the kernel's cgroups needs root; run as root, as scripts/test.sh does"
    );
    assert!(
        Path::new(MOUNT_ROOT).join("cpu").is_dir(),
        "peer missing: no cgroup v1 cpu hierarchy at {MOUNT_ROOT}/cpu; this test needs a \
         cgroup v1 (or hybrid) host"
    );
}

/// Removes the test root from every hierarchy and kills the test process,
/// whatever happened in the test.
struct Cleanup {
    mounts: Vec<PathBuf>,
    root: String,
    child: Option<Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for mount in &self.mounts {
            rmdir_tree(&mount.join(&self.root));
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .trim()
        .to_owned()
}

fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// The issue's Burstable pod: cpu request 250m, limit 500m, memory limit 128Mi.
fn issue_pod() -> Pod {
    let resources = ResourceRequirements {
        requests: [("cpu".to_owned(), q("250m"))].into(),
        limits: [
            ("cpu".to_owned(), q("500m")),
            ("memory".to_owned(), q("128Mi")),
        ]
        .into(),
    };
    Pod {
        metadata: ObjectMeta {
            name: "p".into(),
            namespace: "default".into(),
            uid: "0b7a1c2e-5f3d-4e2a-9c1b-123456789abc".into(),
            ..ObjectMeta::default()
        },
        spec: PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: "i".into(),
                resources,
                ..Container::default()
            }],
            ..PodSpec::default()
        },
    }
}

#[tokio::test]
#[ignore = "needs root and cgroup v1: run by scripts/test.sh"]
async fn real_v1_pod_cgroup_lifecycle() {
    require_root_and_cgroup_v1();
    let m = CgroupfsManager::detect(Path::new(MOUNT_ROOT)).unwrap_or_else(|e| panic!("{e}"));
    assert!(!m.is_unified());
    let root = format!("rkubelet-test-{}-lifecycle", std::process::id());
    let mut cleanup = Cleanup {
        mounts: m.mounts().iter().map(|p| p.to_path_buf()).collect(),
        root: root.clone(),
        child: None,
    };

    let kubepods = kubepods_name(&format!("/{root}")).unwrap_or_else(|e| panic!("{e}"));
    let burstable = qos_cgroup_name(&kubepods, QosClass::Burstable);
    let pod = issue_pod();
    let pod_cg = pod_cgroup_name(&kubepods, &pod);
    assert_eq!(
        pod_cg.to_cgroupfs(),
        format!("/{root}/kubepods/burstable/pod0b7a1c2e-5f3d-4e2a-9c1b-123456789abc")
    );
    let settings = CgroupSettings {
        pod_pids_limit: 1024,
        ..CgroupSettings::default()
    };
    let config = pod_resource_config(&pod, &settings);

    let unlimited = ResourceConfig {
        memory_limit: Some(-1),
        pids_limit: Some(-1),
        ..ResourceConfig::default()
    };
    m.create(&kubepods, &unlimited)
        .await
        .unwrap_or_else(|e| panic!("kubepods: {e}"));
    let qos = ResourceConfig {
        cpu_shares: Some(256),
        ..ResourceConfig::default()
    };
    m.create(&burstable, &qos)
        .await
        .unwrap_or_else(|e| panic!("burstable: {e}"));
    m.create(&pod_cg, &config)
        .await
        .unwrap_or_else(|e| panic!("pod: {e}"));
    assert_eq!(m.exists(&pod_cg).await.ok(), Some(true));

    let path = |ctrl: &str| {
        m.path_of(ctrl, &pod_cg)
            .unwrap_or_else(|| panic!("no {ctrl}"))
    };
    assert_eq!(read(&path("cpu").join("cpu.shares")), "256");
    assert_eq!(read(&path("cpu").join("cpu.cfs_quota_us")), "50000");
    assert_eq!(read(&path("cpu").join("cpu.cfs_period_us")), "100000");
    assert_eq!(
        read(&path("memory").join("memory.limit_in_bytes")),
        "134217728"
    );
    assert_eq!(read(&path("pids").join("pids.max")), "1024");
    assert_eq!(
        read(
            &m.path_of("pids", &kubepods)
                .unwrap_or_default()
                .join("pids.max")
        ),
        "max"
    );
    // The cgroup exists in every hierarchy, the named and unified ones included.
    for mount in m.mounts() {
        let dir = mount.join(pod_cg.to_cgroupfs().trim_start_matches('/'));
        assert!(dir.is_dir(), "{}", dir.display());
    }
    assert_eq!(
        m.children(&burstable).await.ok(),
        Some(vec![pod_cg.clone()])
    );

    // A real process joins (cpuset only accepts it because cpus/mems were seeded).
    let child = Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap_or_else(|e| panic!("spawn sleep: {e}"));
    let pid = child.id();
    cleanup.child = Some(child);
    for ctrl in ["cpuset", "pids", "memory", "cpu"] {
        let procs = path(ctrl).join("cgroup.procs");
        std::fs::write(&procs, pid.to_string())
            .unwrap_or_else(|e| panic!("attach to {}: {e}", procs.display()));
    }
    assert_eq!(m.pids(&pod_cg).await.ok(), Some(vec![pid]));
    assert_eq!(m.pids(&kubepods).await.ok(), Some(vec![pid]));

    // Busy: the error names the cgroup, the caller retries later.
    match m.destroy(&pod_cg).await {
        Err(CgroupError::Io {
            op: "rmdir",
            path,
            source,
        }) => {
            let path = path.display().to_string();
            assert!(path.ends_with(&pod_cg.to_cgroupfs()), "{path}");
            assert!(source.to_string().contains("busy"), "{source}");
        }
        other => panic!("destroy of a busy cgroup: {other:?}"),
    }

    // Update lands in the kernel.
    let update = ResourceConfig {
        cpu_quota: Some(-1),
        memory_limit: Some(256 << 20),
        pids_limit: Some(-1),
        ..ResourceConfig::default()
    };
    m.update(&pod_cg, &update)
        .await
        .unwrap_or_else(|e| panic!("update: {e}"));
    assert_eq!(read(&path("cpu").join("cpu.cfs_quota_us")), "-1");
    assert_eq!(
        read(&path("memory").join("memory.limit_in_bytes")),
        "268435456"
    );
    assert_eq!(read(&path("pids").join("pids.max")), "max");

    if let Some(mut child) = cleanup.child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_eq!(m.pids(&pod_cg).await.ok(), Some(vec![]));
    m.destroy(&pod_cg)
        .await
        .unwrap_or_else(|e| panic!("destroy: {e}"));
    assert_eq!(m.exists(&pod_cg).await.ok(), Some(false));
    for mount in m.mounts() {
        let dir = mount.join(pod_cg.to_cgroupfs().trim_start_matches('/'));
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
    assert_eq!(m.destroy(&pod_cg).await.ok(), Some(()));
    m.destroy(&CgroupName::from_cgroupfs(&format!("/{root}")))
        .await
        .unwrap_or_else(|e| panic!("destroy test root: {e}"));
    for mount in m.mounts() {
        assert!(!mount.join(&root).exists(), "{}", mount.display());
    }
    drop(cleanup);
}

/// The memory threshold notifier on the kernel's `cgroup.event_control`: a usage rising
/// past the threshold is reported, and so is a usage already past it when it is set (the
/// kernel itself fires on crossings only).
#[tokio::test]
#[ignore = "needs root and cgroup v1: run by scripts/test.sh"]
async fn memory_thresholds_report_crossings_and_a_usage_already_past() {
    use rkubelet::adapters::procfs::{CgroupLayout, MemcgThresholdNotifier};
    use rkubelet::domain::cgroup::CgroupDriver;
    use rkubelet::ports::node_stats::MemoryThresholdNotifier;
    use std::time::Duration;

    require_root_and_cgroup_v1();
    let memory = Path::new(MOUNT_ROOT).join("memory");
    let root = format!("rk-notify-{}", std::process::id());
    let dir = memory.join(&root);
    std::fs::create_dir(&dir).expect("memory cgroup made");
    let mut cleanup = Cleanup {
        mounts: vec![memory.clone()],
        root: root.clone(),
        child: None,
    };
    let layout = CgroupLayout::V1 {
        memory: Some(memory),
        pids: None,
        cpuacct: None,
        cpu: None,
        blkio: None,
    };
    let notifier = MemcgThresholdNotifier::new(Some(&layout), CgroupDriver::Cgroupfs);
    let name = CgroupName::new(&CgroupName::root(), &[root.as_str()]).expect("a cgroup name");
    let threshold = 4 << 20;
    let mut rising = notifier.arm(&name, threshold).await.expect("armed");

    // A shell in the cgroup builds an 8 MB string and waits, in its `read` builtin so that
    // no child of its outlives the kill (a `sleep` kept the cgroup busy and the test's
    // output open for a minute).
    let procs = dir.join("cgroup.procs");
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {} && x=$(head -c 8000000 /dev/zero | tr '\\0' a) && echo built && read _",
            procs.display()
        ))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh runs");
    cleanup.child = Some(child);
    tokio::time::timeout(Duration::from_secs(20), rising.crossed())
        .await
        .expect("the usage rising past 4 MiB is reported")
        .expect("a crossing, not an error");

    // Once the string is built the usage stays past the threshold: one set now reports
    // at once.
    let mut built = String::new();
    if let Some(out) = cleanup.child.as_mut().and_then(|c| c.stdout.as_mut()) {
        use std::io::BufRead;
        let _ = std::io::BufReader::new(out).read_line(&mut built);
    }
    assert_eq!(built.trim(), "built");
    let usage: u64 = read(&dir.join("memory.usage_in_bytes"))
        .trim()
        .parse()
        .expect("a usage");
    assert!(usage >= threshold, "usage {usage}");
    let mut past = notifier.arm(&name, threshold).await.expect("armed again");
    tokio::time::timeout(Duration::from_secs(5), past.crossed())
        .await
        .expect("a usage already past the threshold is reported when it is set")
        .expect("a crossing, not an error");
    drop((rising, past));
}
