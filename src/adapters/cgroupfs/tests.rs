//! The cgroupfs driver against file-tree fixtures shaped like v1 and v2
//! hierarchies. Plain directories do not grow interface files, so each fixture
//! pre-creates what the driver reads; the real kernel is exercised by
//! `tests/cgroupfs_real.rs`.

use super::*;
use crate::domain::cgroup::{kubepods_name, shares_to_weight};

fn name(path: &str) -> CgroupName {
    CgroupName::from_cgroupfs(path)
}

fn put(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{}: {e}", parent.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn get(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_owned()
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

const V1_MOUNTS: &[(&str, &str, &str)] = &[
    ("cpu,cpuacct", "cgroup", "rw,cpu,cpuacct"),
    ("cpuset", "cgroup", "rw,cpuset"),
    ("memory", "cgroup", "rw,memory"),
    ("pids", "cgroup", "rw,pids"),
    ("systemd", "cgroup", "rw,xattr,name=systemd"),
    ("unified", "cgroup2", "rw,nsdelegate"),
];

/// A hybrid v1 tree like this machine's, minus any controller in `skip`.
fn v1_fixture(root: &Path, skip: &[&str]) -> CgroupfsManager {
    let mut mountinfo = format!("31 23 0:28 / {} rw - tmpfs tmpfs rw\n", root.display());
    for (i, (dir, fstype, opts)) in V1_MOUNTS.iter().enumerate() {
        if skip.contains(dir) {
            continue;
        }
        let mount = root.join(dir);
        std::fs::create_dir_all(&mount).unwrap_or_else(|e| panic!("{e}"));
        mountinfo.push_str(&format!(
            "{} 31 0:{} / {} rw,relatime - {fstype} {fstype} {opts}\n",
            40 + i,
            40 + i,
            mount.display()
        ));
    }
    put(&root.join("cpuset/cpuset.cpus"), "0-1\n");
    put(&root.join("cpuset/cpuset.mems"), "0\n");
    CgroupfsManager::from_mounts(&mountinfo, root).unwrap_or_else(|e| panic!("{e}"))
}

fn issue_config() -> ResourceConfig {
    ResourceConfig {
        cpu_shares: Some(256),
        cpu_quota: Some(50_000),
        cpu_period: Some(100_000),
        memory_limit: Some(134_217_728),
        pids_limit: Some(-1),
    }
}

#[tokio::test]
async fn v1_create_writes_every_hierarchy() {
    let dir = tempdir();
    let root = dir.path();
    let m = v1_fixture(root, &[]);
    assert!(!m.is_unified());
    assert_eq!(m.mounts().len(), 6);
    let pod = name("/kubepods/burstable/pod1");
    m.create(&pod, &issue_config())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cpu = root.join("cpu,cpuacct/kubepods/burstable/pod1");
    assert_eq!(get(&cpu.join("cpu.shares")), "256");
    assert_eq!(get(&cpu.join("cpu.cfs_period_us")), "100000");
    assert_eq!(get(&cpu.join("cpu.cfs_quota_us")), "50000");
    let mem = root.join("memory/kubepods/burstable/pod1");
    assert_eq!(get(&mem.join("memory.limit_in_bytes")), "134217728");
    assert_eq!(
        get(&root.join("pids/kubepods/burstable/pod1/pids.max")),
        "max"
    );
    // Every level of the new cpuset path got the parent's cpus and mems.
    for level in ["kubepods", "kubepods/burstable", "kubepods/burstable/pod1"] {
        let d = root.join("cpuset").join(level);
        assert_eq!(get(&d.join("cpuset.cpus")), "0-1", "{level}");
        assert_eq!(get(&d.join("cpuset.mems")), "0", "{level}");
    }
    for mount in ["systemd", "unified"] {
        assert!(
            root.join(mount).join("kubepods/burstable/pod1").is_dir(),
            "{mount}"
        );
    }
    assert_eq!(m.exists(&pod).await.ok(), Some(true));
    assert_eq!(
        m.exists(&name("/kubepods/besteffort")).await.ok(),
        Some(false)
    );
    assert_eq!(m.driver_name(&pod), "/kubepods/burstable/pod1");
    assert_eq!(m.driver(), CgroupDriver::Cgroupfs);
    assert_eq!(
        m.path_of("cpuacct", &pod),
        Some(root.join("cpu,cpuacct/kubepods/burstable/pod1"))
    );
    assert_eq!(
        m.children(&name("/kubepods/burstable")).await.ok(),
        Some(vec![pod.clone()])
    );
    assert_eq!(m.children(&name("/nowhere")).await.ok(), Some(vec![]));

    // Update: memory unlimited is -1 on v1 (`max` is EINVAL there); pids a number.
    let update = ResourceConfig {
        memory_limit: Some(-1),
        pids_limit: Some(100),
        cpu_quota: Some(-1),
        ..ResourceConfig::default()
    };
    m.update(&pod, &update)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(get(&mem.join("memory.limit_in_bytes")), "-1");
    assert_eq!(
        get(&root.join("pids/kubepods/burstable/pod1/pids.max")),
        "100"
    );
    assert_eq!(get(&cpu.join("cpu.cfs_quota_us")), "-1");
    assert_eq!(get(&cpu.join("cpu.shares")), "256");
    assert!(
        matches!(m.update(&name("/kubepods/gone"), &update).await, Err(CgroupError::NotFound(ref got)) if *got == "/kubepods/gone")
    );
}

#[tokio::test]
async fn v1_pids_are_read_recursively() {
    let dir = tempdir();
    let root = dir.path();
    let m = v1_fixture(root, &[]);
    let pod = name("/kubepods/pod7");
    m.create(&pod, &ResourceConfig::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    put(&root.join("pids/kubepods/pod7/cgroup.procs"), "12\n");
    put(
        &root.join("pids/kubepods/pod7/ctr/cgroup.procs"),
        "13\n12\n",
    );
    assert_eq!(m.pids(&pod).await.ok(), Some(vec![12, 13]));
    assert_eq!(m.pids(&name("/kubepods/none")).await.ok(), Some(vec![]));
    put(&root.join("pids/kubepods/pod7/cgroup.procs"), "x\n");
    assert!(matches!(
        m.pids(&pod).await,
        Err(CgroupError::Unexpected { op: "parse", .. })
    ));
}

/// Each process listed at or below the cgroup gets SIGKILL; one gone already is no error.
#[tokio::test]
async fn kill_processes_kills_what_the_cgroup_holds() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempdir();
    let root = dir.path();
    let m = v1_fixture(root, &[]);
    let pod = name("/kubepods/pod8");
    m.create(&pod, &ResourceConfig::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut left = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap_or_else(|e| panic!("sleep: {e}"));
    let mut gone = std::process::Command::new("true")
        .spawn()
        .unwrap_or_else(|e| panic!("true: {e}"));
    let _ = gone.wait();
    put(
        &root.join("pids/kubepods/pod8/ctr/cgroup.procs"),
        &format!("{}\n{}\n", left.id(), gone.id()),
    );
    assert_eq!(m.kill_processes(&pod).await.ok(), Some(2));
    let status = left.wait().unwrap_or_else(|e| panic!("wait: {e}"));
    assert_eq!(status.signal(), Some(9));
}

#[tokio::test]
async fn v1_missing_controller_is_refused() {
    let dir = tempdir();
    let m = v1_fixture(dir.path(), &["pids"]);
    let r = ResourceConfig {
        pids_limit: Some(10),
        ..ResourceConfig::default()
    };
    assert!(matches!(
        m.create(&name("/kubepods"), &r).await,
        Err(CgroupError::MissingController { controller, .. }) if controller == "pids"
    ));
}

#[tokio::test]
async fn destroy_removes_leftovers_deepest_first_in_every_hierarchy() {
    let dir = tempdir();
    let root = dir.path();
    let m = v1_fixture(root, &[]);
    for (mount, _, _) in V1_MOUNTS {
        std::fs::create_dir_all(root.join(mount).join("kubepods/pod9/ctr-a/x"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join(mount).join("kubepods/pod9/ctr-b"))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let pod = name("/kubepods/pod9");
    assert_eq!(m.destroy(&pod).await.ok(), Some(()));
    for (mount, _, _) in V1_MOUNTS {
        assert!(!root.join(mount).join("kubepods/pod9").exists(), "{mount}");
        assert!(root.join(mount).join("kubepods").is_dir(), "{mount}");
    }
    // Absent is fine.
    assert_eq!(m.destroy(&pod).await.ok(), Some(()));
    // A failing rmdir names the path (here ENOTEMPTY; EBUSY on a real cgroup).
    put(&root.join("memory/kubepods/pod8/stray"), "");
    let err = m.destroy(&name("/kubepods/pod8")).await;
    match err {
        Err(CgroupError::Io { op, path, .. }) => {
            assert_eq!(op, "rmdir");
            assert_eq!(path, root.join("memory/kubepods/pod8"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        m.destroy(&CgroupName::root()).await,
        Err(CgroupError::InvalidName(_))
    ));
}

/// A v2 tree: the root offers everything, kubepods and burstable exist already
/// (a plain mkdir would not create their interface files).
fn v2_fixture(root: &Path, kubepods_controllers: &str) -> CgroupfsManager {
    put(
        &root.join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids rdma\n",
    );
    put(&root.join("cgroup.subtree_control"), "");
    put(
        &root.join("kubepods/cgroup.controllers"),
        kubepods_controllers,
    );
    put(
        &root.join("kubepods/cgroup.subtree_control"),
        "cpu memory pids\n",
    );
    put(
        &root.join("kubepods/burstable/cgroup.controllers"),
        "cpu memory pids\n",
    );
    put(&root.join("kubepods/burstable/cgroup.subtree_control"), "");
    let mountinfo = format!(
        "30 23 0:26 / {} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
        root.display()
    );
    CgroupfsManager::from_mounts(&mountinfo, root).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn v2_create_enables_controllers_and_writes_v2_files() {
    let dir = tempdir();
    let root = dir.path();
    let m = v2_fixture(root, "cpu memory pids\n");
    assert!(m.is_unified());
    let kubepods = kubepods_name("/").unwrap_or_default();
    let pod = name("/kubepods/burstable/pod1");
    m.create(&pod, &issue_config())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Root: every offered controller the kubelet uses, in one write.
    assert_eq!(
        get(&root.join("cgroup.subtree_control")),
        "+cpuset +cpu +io +memory +hugetlb +pids"
    );
    // Already enabled: left alone.
    assert_eq!(
        get(&root.join("kubepods/cgroup.subtree_control")),
        "cpu memory pids"
    );
    assert_eq!(
        get(&root.join("kubepods/burstable/cgroup.subtree_control")),
        "+cpu +memory +pids"
    );
    let d = root.join("kubepods/burstable/pod1");
    assert_eq!(
        get(&d.join("cpu.weight")),
        shares_to_weight(256, WeightCurve::Quadratic).to_string()
    );
    assert_eq!(get(&d.join("cpu.weight")), "35");
    assert_eq!(get(&d.join("cpu.max")), "50000 100000");
    assert_eq!(get(&d.join("memory.max")), "134217728");
    assert_eq!(get(&d.join("pids.max")), "max");
    assert_eq!(m.exists(&pod).await.ok(), Some(true));
    assert_eq!(
        m.children(&kubepods).await.ok(),
        Some(vec![name("/kubepods/burstable")])
    );

    let linear = m.clone().with_weight_curve(WeightCurve::Linear);
    let update = ResourceConfig {
        cpu_shares: Some(256),
        cpu_quota: Some(-1),
        cpu_period: Some(100_000),
        memory_limit: Some(-1),
        pids_limit: Some(50),
    };
    linear
        .update(&pod, &update)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(get(&d.join("cpu.weight")), "10");
    assert_eq!(get(&d.join("cpu.max")), "max 100000");
    assert_eq!(get(&d.join("memory.max")), "max");
    assert_eq!(get(&d.join("pids.max")), "50");
    let quota_only = ResourceConfig {
        cpu_quota: Some(20_000),
        ..ResourceConfig::default()
    };
    m.update(&pod, &quota_only)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(get(&d.join("cpu.max")), "20000");

    put(&d.join("cgroup.procs"), "77\n");
    assert_eq!(m.pids(&pod).await.ok(), Some(vec![77]));
}

#[tokio::test]
async fn v2_missing_controller_names_the_file() {
    let dir = tempdir();
    let root = dir.path();
    let m = v2_fixture(root, "cpu memory\n");
    let err = m
        .create(&name("/kubepods/burstable/pod1"), &issue_config())
        .await;
    match err {
        Err(CgroupError::MissingController { controller, reason }) => {
            assert_eq!(controller, "pids");
            assert!(reason.contains("kubepods/cgroup.controllers"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn nothing_mounted_is_an_error() {
    let err = CgroupfsManager::from_mounts("", Path::new("/sys/fs/cgroup"));
    assert!(matches!(
        err,
        Err(CgroupError::Unexpected { op: "detect", .. })
    ));
}
