//! End to end with the cgroupfs driver: rkubelet on a private containerd builds its
//! cgroup tree under the instance's own `--cgroup-root` in the kernel's real cgroup
//! filesystem (v1 hierarchies here), puts each pod's cgroup where its QoS class says,
//! with upstream's values, and removes what it no longer needs, after a SIGKILL too.
//! Needs root and containerd; fails, saying which is missing, without them.

use std::path::PathBuf;
use std::time::Instant;

use crate::common;

use common::node::*;

/// Every cgroup hierarchy mounted under /sys/fs/cgroup.
fn hierarchies() -> Vec<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("mounts");
    let mut found: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2
                && (f[2] == "cgroup" || f[2] == "cgroup2")
                && f[1].starts_with("/sys/fs/cgroup/"))
            .then(|| PathBuf::from(f[1]))
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

fn hierarchy(controller: &str) -> PathBuf {
    hierarchies()
        .into_iter()
        .find(|h| {
            h.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.split(',').any(|c| c == controller))
        })
        .unwrap_or_else(|| panic!("no {controller} hierarchy"))
}

fn read(controller: &str, cgroup: &str, file: &str) -> String {
    let path = hierarchy(controller)
        .join(cgroup.trim_start_matches('/'))
        .join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

fn exists_everywhere(cgroup: &str) -> bool {
    hierarchies()
        .iter()
        .all(|h| h.join(cgroup.trim_start_matches('/')).is_dir())
}

fn exists_anywhere(cgroup: &str) -> bool {
    hierarchies()
        .iter()
        .any(|h| h.join(cgroup.trim_start_matches('/')).is_dir())
}

/// The pod cgroups (`pod<uid>`) under kubepods and its QoS children, in the cpu hierarchy.
fn pod_cgroups(kubepods: &str) -> Vec<String> {
    let mut found = Vec::new();
    for parent in [
        kubepods.to_string(),
        format!("{kubepods}/burstable"),
        format!("{kubepods}/besteffort"),
    ] {
        let dir = hierarchy("cpu").join(parent.trim_start_matches('/'));
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with("pod") && entry.path().is_dir() {
                found.push(format!("{parent}/{name}"));
            }
        }
    }
    found.sort();
    found
}

fn mem_total_bytes() -> i64 {
    let text = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let kib: i64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("MemTotal");
    kib * 1024
}

fn uid_of(node: &Node, pod: &str) -> Option<String> {
    node.pod_json(pod)
        .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_string))
}

fn resources(requests: &str, limits: &str) -> String {
    format!("    resources:\n      requests: {{{requests}}}\n      limits: {{{limits}}}\n")
}

#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn the_qos_tree_pod_cgroups_and_their_removal_with_cgroupfs() {
    let mut node = Node::start("cgtree");
    let root = node.ctrd.var("RKUBELET_CGROUP_ROOT");
    let kubepods = format!("{root}/kubepods");
    let burstable = pod(
        "burst",
        "",
        &[],
        &[container("app", &node.busybox, "sleep 3600")
            + &resources("cpu: 250m", "cpu: 500m, memory: 128Mi")],
    );
    let guaranteed = pod(
        "gold",
        "",
        &[],
        &[container("app", &node.busybox, "sleep 3600")
            + &resources("cpu: 100m, memory: 64Mi", "cpu: 100m, memory: 64Mi")],
    );
    node.write("burst.yaml", &burstable);
    node.write("gold.yaml", &guaranteed);
    node.kubelet_with(&["--cgroup-driver=cgroupfs", "--kube-reserved=memory=1Gi"]);

    // The tree, with node allocatable enforced on kubepods.
    let burst_ctr = node.wait_running("burst-n1", "app", 60).await;
    node.wait_running("gold-n1", "app", 60).await;
    for qos in [
        &kubepods,
        &format!("{kubepods}/burstable"),
        &format!("{kubepods}/besteffort"),
    ] {
        assert!(exists_everywhere(qos), "{qos} missing in some hierarchy");
    }
    assert_eq!(
        read("memory", &kubepods, "memory.limit_in_bytes")
            .parse::<i64>()
            .ok(),
        Some(mem_total_bytes() - (1 << 30)),
        "kubepods memory = capacity - kube-reserved"
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        read("cpu", &kubepods, "cpu.shares"),
        (cpus * 1024).to_string()
    );
    assert_eq!(
        read("cpu", &format!("{kubepods}/besteffort"), "cpu.shares"),
        "2"
    );
    // Burstable shares are the sum of the burstable pods' cpu requests.
    assert_eq!(
        read("cpu", &format!("{kubepods}/burstable"), "cpu.shares"),
        "256"
    );

    // The Burstable pod's cgroup, with upstream's values, holding its containers.
    let burst_uid = eventually!(30, "burst uid in /pods", uid_of(&node, "burst-n1"));
    let burst_cg = format!("{kubepods}/burstable/pod{burst_uid}");
    assert!(exists_everywhere(&burst_cg), "{burst_cg} missing somewhere");
    assert_eq!(read("cpu", &burst_cg, "cpu.shares"), "256");
    assert_eq!(read("cpu", &burst_cg, "cpu.cfs_quota_us"), "50000");
    assert_eq!(read("cpu", &burst_cg, "cpu.cfs_period_us"), "100000");
    assert_eq!(
        read("memory", &burst_cg, "memory.limit_in_bytes"),
        "134217728"
    );
    let ctr_cg = format!("{burst_cg}/{}", burst_ctr.status.id);
    assert!(
        exists_anywhere(&ctr_cg),
        "the container's cgroup {ctr_cg} is not inside its pod's"
    );
    let sandbox = node.sandboxes("burst-n1").await;
    assert_eq!(sandbox.len(), 1);
    assert!(exists_anywhere(&format!(
        "{burst_cg}/{}",
        sandbox[0].status.id
    )));

    // The Guaranteed pod sits directly under kubepods.
    let gold_uid = eventually!(30, "gold uid in /pods", uid_of(&node, "gold-n1"));
    let gold_cg = format!("{kubepods}/pod{gold_uid}");
    assert!(exists_everywhere(&gold_cg), "{gold_cg} missing somewhere");
    assert_eq!(
        read("memory", &gold_cg, "memory.limit_in_bytes"),
        "67108864"
    );
    assert_eq!(read("cpu", &gold_cg, "cpu.cfs_quota_us"), "10000");

    // A process the runtime does not know of in the pod's cgroup (as one a runtime lost
    // track of would be) is killed before the cgroup goes, as upstream's
    // `tryKillingCgroupProcesses`: otherwise the cgroup, and the pod, could never go.
    let mut stray = common::cgroups::StrayProcess::into_cgroups(
        hierarchies()
            .iter()
            .map(|h| h.join(burst_cg.trim_start_matches('/'))),
    );

    // Deleting the pod removes its cgroup from every hierarchy; burstable shares drop.
    node.remove("burst.yaml");
    eventually!(
        60,
        "the burstable pod's cgroup to go",
        (!exists_anywhere(&burst_cg)).then_some(())
    );
    assert_eq!(
        stray.ending_signal(std::time::Duration::ZERO),
        Some(9),
        "the process left in the pod's cgroup was not killed"
    );
    assert!(node
        .log_text()
        .contains("\"killed the processes left in the pod's cgroup\""));
    eventually!(
        30,
        "burstable shares back to the minimum",
        (read("cpu", &format!("{kubepods}/burstable"), "cpu.shares") == "2").then_some(())
    );

    // SIGKILL, the last manifest removed while rkubelet is dead, start again: the pod
    // is terminated and no pod cgroup is left behind.
    node.kill9();
    node.remove("gold.yaml");
    node.kubelet_with(&["--cgroup-driver=cgroupfs", "--kube-reserved=memory=1Gi"]);
    let deadline = Instant::now() + crate::common::patience(60);
    while !pod_cgroups(&kubepods).is_empty() || !node.all_sandboxes().await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind: cgroups {:?}, sandboxes {}",
            pod_cgroups(&kubepods),
            node.all_sandboxes().await.len()
        );
        tokio::time::sleep(POLL).await;
    }
    node.finish();
}

#[tokio::test]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn a_driver_that_differs_from_the_runtimes_or_a_missing_root_refuses_to_start() {
    let node = Node::start("cgrefuse");
    // containerd 1.6 does not report its driver: the configured one is used and said so.
    let args = vec![
        format!("--container-runtime-endpoint={}", node.endpoint),
        format!("--root-dir={}", node.root.display()),
        format!("--pod-logs-dir={}", node.logs.display()),
        "--cgroup-root=/rkubelet-no-such-root".to_string(),
        format!("--healthz-port={}", common::free_port()),
    ];
    let out = std::process::Command::new(common::BIN)
        .args(&args)
        .output()
        .expect("rkubelet runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "invalid configuration: cgroup-root \"/rkubelet-no-such-root\" doesn't exist"
        ),
        "{stderr}"
    );
    // containerd 2.x tells its cgroup driver (RuntimeConfig); 1.6 does not, so the
    // configured one is used.
    let driver_line = if node.ctrd.var("RKUBELET_CONTAINERD_VERSION") == "2.3" {
        "the container runtime uses the same cgroup driver"
    } else {
        "using the configured cgroup driver"
    };
    assert!(stderr.contains(driver_line), "{stderr}");
    assert!(!exists_anywhere("/rkubelet-no-such-root"));
    if node.ctrd.var("RKUBELET_CONTAINERD_VERSION") == "2.3" {
        // The runtime's driver (cgroupfs here) against another configured: refused.
        let mut mismatched = args.clone();
        mismatched.retain(|a| !a.starts_with("--cgroup-root"));
        mismatched.push("--cgroup-driver=systemd".into());
        let out = std::process::Command::new(common::BIN)
            .args(&mismatched)
            .output()
            .expect("rkubelet runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("misconfiguration: kubelet cgroup driver: \"systemd\" is different from the container runtime's cgroup driver: \"cgroupfs\""),
            "{stderr}"
        );
    }
}
