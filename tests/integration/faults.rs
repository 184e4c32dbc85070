//! Faults and bad input (issue 17), against the real peers: rkubelet killed while it
//! starts pods, containerd killed under it, the API server gone for minutes, full disks,
//! slow and failing CRI calls, manifests at the limits. Each test counts what must not
//! happen (duplicates, restarts, leaks) and asserts each count is zero; the counts are
//! printed as `COUNT name: value` lines for `docs/reliability.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::adapters::system::FileCertStore;
use rkubelet::domain::kuberuntime::runtime::{
    ContainerEntry, ContainerFilter, ContainerState, SandboxEntry, SandboxFilter, SandboxState,
};
use rkubelet::ports::cert_store::CertStore;
use rkubelet::ports::error::Chain;
use rkubelet::ports::runtime::RuntimeService;

use crate::common::cluster::Cluster;
use crate::common::faults::{children, CriCounts, CriFaults, CriProxy, Proc, SmallDisk};
use crate::common::http_get;
use crate::common::node::{
    container, eventually, leftovers, pod, pod_with_scratch, Leftovers, Node, NODE, POLL,
};

const UID_LABEL: &str = "io.kubernetes.pod.uid";
const NAME_LABEL: &str = "io.kubernetes.pod.name";

fn count(name: &str, value: impl std::fmt::Display) {
    println!("COUNT {name}: {value}");
}

/// A pod with one long-running container and an emptyDir volume (so it has a volume
/// folder under the root dir).
fn steady_pod(name: &str, image: &str) -> String {
    pod_with_scratch(name, image, "echo up; exec sleep 3600")
}

fn name_of_container() -> &'static str {
    "main"
}

async fn all_sandboxes(rt: &CriRuntime) -> Vec<SandboxEntry> {
    rt.list_pod_sandboxes(&SandboxFilter::default())
        .await
        .expect("ListPodSandbox")
}

async fn all_containers(rt: &CriRuntime) -> Vec<ContainerEntry> {
    rt.list_containers(&ContainerFilter::default())
        .await
        .expect("ListContainers")
}

/// Pod names (`<name>-n1`) with their running `main` container, from one listing.
async fn running_by_pod(rt: &CriRuntime) -> BTreeMap<String, ContainerEntry> {
    all_containers(rt)
        .await
        .into_iter()
        .filter(|c| c.status.state == ContainerState::Running)
        .filter_map(|c| Some((c.labels.get(NAME_LABEL)?.clone(), c)))
        .collect()
}

/// What the runtime and the node's folders hold, checked against "each pod exactly once
/// and nothing without its pod". Returns the problems found (empty when none).
struct Census {
    /// Pod name to its ready sandboxes.
    ready_sandboxes: BTreeMap<String, usize>,
    not_ready_sandboxes: usize,
    /// Pod name to its live (created or running) containers.
    live_containers: BTreeMap<String, usize>,
    /// Uids of the pods in the runtime.
    uids: BTreeSet<String>,
}

async fn census(rt: &CriRuntime) -> Census {
    let mut c = Census {
        ready_sandboxes: BTreeMap::new(),
        not_ready_sandboxes: 0,
        live_containers: BTreeMap::new(),
        uids: BTreeSet::new(),
    };
    for s in all_sandboxes(rt).await {
        if let Some(uid) = s.labels.get(UID_LABEL) {
            c.uids.insert(uid.clone());
        }
        if s.status.state == SandboxState::Ready {
            *c.ready_sandboxes.entry(s.name.clone()).or_default() += 1;
        } else {
            c.not_ready_sandboxes += 1;
        }
    }
    for k in all_containers(rt).await {
        if k.status.state != ContainerState::Exited {
            let name = k.labels.get(NAME_LABEL).cloned().unwrap_or_default();
            *c.live_containers.entry(name).or_default() += 1;
        }
    }
    c
}

/// Uids with a folder, log folder or cgroup but no sandbox in the runtime.
fn orphans(left: &Leftovers, uids: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, list) in [
        ("pod folder", &left.pod_dirs),
        ("log folder", &left.log_dirs),
        ("pod cgroup", &left.cgroups),
    ] {
        for uid in list {
            if !uids.contains(uid) {
                out.push(format!("{kind} of {uid}"));
            }
        }
    }
    out
}

/// Fault 1: rkubelet killed with SIGKILL in the middle of starting 30 static pods, then
/// started again: every pod runs exactly once (one ready sandbox, one live container),
/// no container that ran before the kill is restarted, and no pod folder, log folder or
/// cgroup is left without its pod; once the manifests go, nothing is left at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn kill9_while_starting_30_pods_runs_each_once() {
    const PODS: usize = 30;
    let mut node = Node::start("f1kill");
    for i in 0..PODS {
        node.write(
            &format!("p{i:02}.yaml"),
            &steady_pod(&format!("p{i:02}"), &node.busybox),
        );
    }
    node.kubelet();
    // Kill once a few pods run and most are still to come.
    let sandboxes_at_kill = eventually!(
        60,
        "the first pods running",
        async {
            let running = running_by_pod(&node.rt).await.len();
            (running >= 4).then_some(all_sandboxes(&node.rt).await.len())
        }
        .await
    );
    node.kill9();
    // What ran at the kill: none of it may be restarted.
    let before = running_by_pod(&node.rt).await;
    println!(
        "FIGURE at SIGKILL: {sandboxes_at_kill} sandboxes, {} containers running of {PODS}",
        before.len()
    );
    assert!(before.len() < PODS, "the kill came too late: all pods ran");
    node.kubelet();
    let after = eventually!(
        90,
        "all 30 pods running after the restart",
        Some(running_by_pod(&node.rt).await).filter(|r| r.len() == PODS)
    );
    // Stable for a few relists: nothing more created, nothing restarted.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let c = census(&node.rt).await;
    let duplicated_sandboxes: Vec<_> = c.ready_sandboxes.iter().filter(|(_, n)| **n != 1).collect();
    let duplicated_containers: Vec<_> =
        c.live_containers.iter().filter(|(_, n)| **n != 1).collect();
    let restarted: Vec<&String> = before
        .iter()
        .filter(|(pod, c)| {
            after
                .get(*pod)
                .is_none_or(|a| a.status.id != c.status.id || a.status.attempt != 0)
        })
        .map(|(pod, _)| pod)
        .collect();
    // A container created but not started at the kill has a second instance (restart
    // count 1, as upstream counts it); none has more.
    let recreated = running_by_pod(&node.rt)
        .await
        .values()
        .filter(|c| c.status.attempt > 0)
        .count();
    let created_twice = running_by_pod(&node.rt)
        .await
        .values()
        .filter(|c| c.status.attempt > 1)
        .count();
    println!(
        "FIGURE fault1: {recreated} containers created but not started at the kill, created again"
    );
    count(
        "fault1 pods with other than one ready sandbox",
        duplicated_sandboxes.len(),
    );
    count(
        "fault1 pods with other than one live container",
        duplicated_containers.len(),
    );
    count(
        "fault1 containers restarted that ran before the kill",
        restarted.len(),
    );
    count("fault1 sandboxes not ready", c.not_ready_sandboxes);
    assert_eq!(c.ready_sandboxes.len(), PODS, "{:?}", c.ready_sandboxes);
    assert!(duplicated_sandboxes.is_empty(), "{duplicated_sandboxes:?}");
    let detail: Vec<String> = all_containers(&node.rt)
        .await
        .into_iter()
        .filter(|k| {
            duplicated_containers
                .iter()
                .any(|(p, _)| k.labels.get(NAME_LABEL) == Some(*p))
        })
        .map(|k| {
            format!(
                "{:?} {} {:?} attempt {}",
                k.labels.get(NAME_LABEL),
                k.status.id,
                k.status.state,
                k.status.attempt
            )
        })
        .collect();
    assert!(
        duplicated_containers.is_empty(),
        "{duplicated_containers:?}: {detail:#?}"
    );
    assert!(restarted.is_empty(), "restarted: {restarted:?}");
    count("fault1 containers created more than twice", created_twice);
    assert_eq!(created_twice, 0);
    assert_eq!(c.not_ready_sandboxes, 0);
    let left = leftovers(&node);
    let orphaned = orphans(&left, &c.uids);
    count(
        "fault1 folders or cgroups without their pod",
        orphaned.len(),
    );
    assert!(orphaned.is_empty(), "{orphaned:?}");
    assert_eq!(left.pod_dirs.len(), PODS, "{:?}", left.pod_dirs);
    assert_eq!(left.cgroups.len(), PODS, "{:?}", left.cgroups);

    // Then every manifest goes: nothing may remain.
    for i in 0..PODS {
        node.remove(&format!("p{i:02}.yaml"));
    }
    let deadline = Instant::now() + crate::common::patience(90);
    loop {
        let sandboxes = all_sandboxes(&node.rt).await.len();
        let containers = all_containers(&node.rt).await.len();
        let left = leftovers(&node);
        if sandboxes + containers == 0
            && left.pod_dirs.is_empty()
            && left.log_dirs.is_empty()
            && left.cgroups.is_empty()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for every pod, folder and cgroup removed; left: {sandboxes} \
             sandboxes, {containers} containers, folders {:?}, log folders {:?}, cgroups {:?}",
            left.pod_dirs,
            left.log_dirs,
            left.cgroups
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A removal that failed is retried 2 s later; each retry says why in the log.
    let log = node.log_text();
    let retried = log
        .lines()
        .filter(|l| l.contains("\"pod terminated\"") && l.contains("removed=false"))
        .count();
    println!("FIGURE fault1: pod removals retried: {retried}");
    if retried > 0 {
        println!("{}", crate::common::node::distinct_problems(&log));
    }
    node.finish();
}

/// The container processes of one pod's `main` container (by its cgroup in the pids
/// hierarchy).
fn container_pids(cgroup_root: &str, uid: &str, container_id: &str) -> Vec<i32> {
    let base = Path::new("/sys/fs/cgroup/pids").join(cgroup_root.trim_start_matches('/'));
    for qos in ["kubepods/besteffort", "kubepods/burstable", "kubepods"] {
        let procs = base
            .join(qos)
            .join(format!("pod{uid}"))
            .join(container_id)
            .join("cgroup.procs");
        if let Ok(text) = std::fs::read_to_string(&procs) {
            return text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        }
    }
    Vec::new()
}

/// Each manifest at the limits decoded in this process: its name, size, outcome and time.
/// One manifest at the limits, decoded in this process.
pub struct LimitDecode {
    pub name: String,
    pub size: usize,
    pub outcome: String,
    pub took: Duration,
    /// The process's peak resident memory while decoding, above its resident memory
    /// before (KiB): meaningful only when nothing else runs in the process (the bench).
    #[allow(dead_code)] // the bench `faults` prints it
    pub peak_above_kib: Option<u64>,
}

pub fn decode_limit_manifests() -> Vec<LimitDecode> {
    use rkubelet::domain::pod::static_pod::{decode_static_pods, PodSourceKind};
    let this = Proc(std::process::id() as i32);
    limit_manifests("busybox:1")
        .into_iter()
        .map(|(name, text)| {
            let before = this.rss_kib();
            // Writing 5 resets the peak (VmHWM) to the present resident size.
            let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
            let started = Instant::now();
            let result = decode_static_pods(
                &name,
                text.as_bytes(),
                NODE,
                PodSourceKind::File,
                "2024-01-01T00:00:00Z",
            );
            let took = started.elapsed();
            let peak = this.peak_rss_kib();
            let outcome = match &result {
                Ok(pods) => format!("decoded: {} pod(s)", pods.len()),
                Err(e) => {
                    let text = e.to_string();
                    format!("refused: {}", text.chars().take(160).collect::<String>())
                }
            };
            drop(result);
            LimitDecode {
                size: text.len(),
                name,
                outcome,
                took,
                peak_above_kib: before
                    .zip(peak)
                    .filter(|_| reset)
                    .map(|(b, p)| p.saturating_sub(b)),
            }
        })
        .collect()
}

/// Fault 6 (decoder half): manifests at the limits are refused or decoded in bounded
/// time; nothing panics or overflows the stack.
#[test]
fn manifests_at_the_limits_are_refused_or_decoded_in_bounded_time() {
    for d in decode_limit_manifests() {
        println!(
            "FIGURE limit manifest {} ({} bytes): {} in {:.0} ms",
            d.name,
            d.size,
            d.outcome,
            d.took.as_secs_f64() * 1e3
        );
        // A hang detector, not a goal: a debug build on a loaded 2-core machine took
        // 27 s for the 100,000-variable pod (the bench `faults` prints the release figure).
        assert!(
            d.took < Duration::from_secs(90),
            "{} took {:?}",
            d.name,
            d.took
        );
    }
}

/// A klog log's records: a line opening with a severity letter and the date, and the
/// lines of a value spanning lines (klog's `<` block: tab-indented, closed by ` >`).
fn log_records(log: &str) -> Vec<String> {
    let mut records: Vec<String> = Vec::new();
    for line in log.lines() {
        let continues = line.starts_with('\t') || line == " >";
        match records.last_mut() {
            Some(last) if continues => {
                last.push('\n');
                last.push_str(line);
            }
            _ => records.push(line.to_owned()),
        }
    }
    records
}

/// Fault 6 (the node's half): the manifests at the limits dropped into a running node's
/// manifest folder beside a steady pod: each refused one is named in the log, the node
/// keeps answering, its memory stays bounded, and the steady pod is untouched (same
/// container, never restarted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn manifests_at_the_limits_leave_a_running_node_and_its_pods_alone() {
    let mut node = Node::start("f6live");
    node.write("steady.yaml", &steady_pod("steady", &node.busybox));
    node.kubelet();
    let before = node
        .wait_running("steady-n1", name_of_container(), 60)
        .await;
    let proc = node.daemon.as_ref().expect("rkubelet running").proc();
    let cases = limit_manifests(&node.busybox);
    for (file, text) in &cases {
        node.write(file, text);
    }
    // While the folder is read (the 100,000-variable pod alone takes seconds to decode
    // in a debug build), the node keeps answering at once.
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let asked = Instant::now();
        assert_eq!(
            http_get(node.port(), "/healthz").map(|(code, _)| code),
            Some(200)
        );
        slowest = slowest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "FIGURE fault6 live: slowest /healthz while the limit manifests were read: {:.0} ms",
        slowest.as_secs_f64() * 1e3
    );
    assert!(
        slowest < Duration::from_secs(1),
        "/healthz took {slowest:?}"
    );
    // The refused ones, each named once the folder is read.
    let refused = [
        "big.yaml",
        "deep-flow.yaml",
        "deep-block.yaml",
        "deep.json",
        "bomb.yaml",
    ];
    eventually!(180, "every refused manifest named in the log", {
        let log = node.log_text();
        let records = log_records(&log);
        refused
            .iter()
            .all(|f| {
                records
                    .iter()
                    // klog's severity letter: a warning or an error.
                    .any(|r| r.contains(f) && (r.starts_with('W') || r.starts_with('E')))
            })
            .then_some(())
    });
    // Two more reads of the folder (every second), the node answering throughout. Its
    // speed is the goal above; here it starts the limit pods' containers, and on CI's
    // loaded two cores one answer took over 5 s (2026-11-29), so each may take 30 s.
    for _ in 0..3 {
        assert_eq!(
            crate::common::http_get_within(node.port(), "/healthz", Duration::from_secs(30))
                .map(|(code, _)| code),
            Some(200)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let after = node
        .wait_running("steady-n1", name_of_container(), 10)
        .await;
    let peak_mib = proc.peak_rss_kib().unwrap_or(u64::MAX) / 1024;
    println!("FIGURE fault6 live: rkubelet's peak resident memory with the limit manifests: {peak_mib} MiB");
    count(
        "fault6 steady pod containers restarted by the limit manifests",
        usize::from(after.status.id != before.status.id || after.status.attempt != 0),
    );
    assert_eq!(after.status.id, before.status.id);
    assert_eq!(after.status.attempt, 0);
    // Decoding a 10 MiB manifest costs memory for a moment; a bomb expanded would cost
    // gigabytes.
    assert!(peak_mib < 1024, "peak resident memory {peak_mib} MiB");
    assert!(!node.log_text().contains("panicked"));
    for (file, _) in &cases {
        node.remove(file);
    }
    node.remove("steady.yaml");
    node.finish();
}

/// The manifests at the limits: (file name, text).
fn limit_manifests(image: &str) -> Vec<(String, String)> {
    let mut cases = Vec::new();
    // Just over the 10 MiB limit: refused by size.
    let mut big = steady_pod("big", image);
    big.push_str("# ");
    big.push_str(&"x".repeat(10 * 1024 * 1024));
    big.push('\n');
    cases.push(("big.yaml".to_string(), big));
    // Just under it: a comment-padded manifest is a pod like any other.
    let mut under = steady_pod("under", image);
    under.push_str("# ");
    under.push_str(&"x".repeat(10 * 1024 * 1024 - under.len() - 8));
    under.push('\n');
    cases.push(("under.yaml".to_string(), under));
    // 1,000 containers whose image is absent and never pulled.
    let containers: Vec<String> = (0..1000)
        .map(|i| {
            format!(
                "  - name: c{i}\n    image: absent.invalid/none:{i}\n    imagePullPolicy: Never\n"
            )
        })
        .collect();
    cases.push((
        "thousand.yaml".to_string(),
        pod("thousand", "", &[], &containers),
    ));
    // 100,000 environment variables in one container.
    let mut env = String::from("    env:\n");
    for i in 0..100_000 {
        env.push_str(&format!("    - name: E{i}\n      value: v{i}\n"));
    }
    let many = container("main", image, "exec sleep 3600")
        .replace("    command:", &format!("{env}    command:"));
    cases.push(("env.yaml".to_string(), pod("env", "", &[], &[many])));
    // Deep nesting, in block and in flow style, and in JSON.
    let depth = 100_000;
    let mut deep =
        String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: deep\n  annotations:\n    a: ");
    deep.push_str(&"[".repeat(depth));
    deep.push_str(&"]".repeat(depth));
    deep.push('\n');
    cases.push(("deep-flow.yaml".to_string(), deep));
    // Block nesting just under the parser's depth limit (decoded without overflowing a
    // 2 MiB thread stack) and far over it (refused).
    for (file, levels) in [("deep-block-250.yaml", 250), ("deep-block.yaml", 1_500)] {
        let mut block = String::from(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: deepblock\n  annotations:\n",
        );
        for level in 0..levels {
            block.push_str(&" ".repeat(4 + level));
            block.push_str("k:\n");
        }
        cases.push((file.to_string(), block));
    }
    let json = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"deepjson\"}},\"spec\":{}{}}}",
        "{\"a\":".repeat(depth),
        "}".repeat(depth)
    );
    cases.push(("deep.json".to_string(), json));
    // An alias bomb (the "billion laughs").
    let mut bomb = String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  annotations:\n    a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for i in 1..10 {
        let prev = i - 1;
        bomb.push_str(&format!(
            "    a{i}: &a{i} [*a{prev},*a{prev},*a{prev},*a{prev},*a{prev},*a{prev},*a{prev},*a{prev},*a{prev}]\n"
        ));
    }
    bomb.push_str("spec:\n  containers:\n  - name: main\n    image: busybox\n");
    cases.push(("bomb.yaml".to_string(), bomb));
    cases
}

/// The node's `Ready` condition (status, message), if the Node is there.
fn node_ready(cluster: &Cluster) -> Option<(String, String)> {
    let node = cluster.get_json(&["node", NODE])?;
    let ready = node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?
        .clone();
    Some((
        ready["status"].as_str()?.to_string(),
        ready["message"].as_str().unwrap_or_default().to_string(),
    ))
}

/// Fault 2: containerd killed with SIGKILL and started again under a connected rkubelet
/// running 30 pods, five of whose containers die while containerd is away: the node
/// reports the runtime down, then up; rkubelet reconnects by itself (within 5 s of
/// containerd's return is the goal, which the bench `faults` judges); the 25 surviving
/// containers are adopted (same id, restart count 0), the 5 dead ones recreated once; no
/// sandbox or container duplicated. A survivor whose task containerd itself gave up at its
/// return (its log's "cleaning up after shim disconnected") is counted apart, recreated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd), root and containerd: run by scripts/test.sh"]
async fn containerd_killed_and_restarted_under_30_pods() {
    containerd_restart("f2").await;
}

/// What fault 2 measured.
#[allow(dead_code)] // the bench `faults` prints them
pub(crate) struct RestartFigures {
    /// containerd killed to the node's `Ready` False.
    pub not_ready: Duration,
    /// containerd answering again to rkubelet's first good relist (goal < 5 s).
    pub reconnect: Duration,
    /// containerd answering again to all 30 pods running and to `Ready` True.
    pub pods_running: Duration,
    pub ready: Duration,
    pub adopted: usize,
    pub recreated: usize,
    /// Survivors whose task containerd itself gave up at its return (then recreated).
    pub lost: usize,
    pub duplicated: usize,
}

/// Fault 2 (see the test above), on peers named after `name`; asserts what must hold and
/// returns the figures.
pub(crate) async fn containerd_restart(name: &str) -> RestartFigures {
    const PODS: usize = 30;
    const DYING: usize = 5;
    let cluster = Cluster::start(name);
    let mut node = Node::start(&format!("{name}ctrd"));
    for i in 0..PODS {
        node.write(
            &format!("p{i:02}.yaml"),
            &steady_pod(&format!("p{i:02}"), &node.busybox),
        );
    }
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    node.kubelet_with(&[&format!("--kubeconfig={}", kubeconfig.display())]);
    let before = eventually!(
        90,
        "30 pods running",
        Some(running_by_pod(&node.rt).await).filter(|r| r.len() == PODS)
    );
    eventually!(
        30,
        "Ready",
        node_ready(&cluster).filter(|(s, _)| s == "True")
    );
    let cgroup_root = node.ctrd.var("RKUBELET_CGROUP_ROOT");

    node.ctrd.kill9_daemon();
    let killed_at = Instant::now();
    // Five containers die while containerd is away (their shims see it).
    let dying: Vec<String> = before.keys().take(DYING).cloned().collect();
    for pod in &dying {
        let c = &before[pod];
        let uid = c.labels.get(UID_LABEL).cloned().unwrap_or_default();
        let pids = container_pids(&cgroup_root, &uid, &c.status.id);
        assert!(!pids.is_empty(), "no process found for {pod}");
        for pid in pids {
            Proc(pid).signal(nix::sys::signal::Signal::SIGKILL);
        }
    }
    let (_, message) = eventually!(
        60,
        "Ready False while containerd is down",
        node_ready(&cluster).filter(|(s, _)| s == "False")
    );
    let not_ready = killed_at.elapsed();
    println!(
        "FIGURE fault2: containerd killed to Ready False: {:.1} s ({message})",
        not_ready.as_secs_f64()
    );
    assert_eq!(message, "container runtime is down");
    let log_mark = node.log_text().len();

    let mut script = node.ctrd.spawn_start();
    // containerd's return: its socket answers a CRI call again.
    let probe = CriRuntime::connect(&node.endpoint, Duration::from_secs(2)).expect("CRI client");
    let back = eventually!(60, "containerd answering again", {
        probe.version().await.ok().map(|_| Instant::now())
    });
    let reconnected = loop {
        if node.log_text()[log_mark..].contains("PLEG relist succeeded again") {
            break Instant::now();
        }
        assert!(
            back.elapsed() < crate::common::patience(30),
            "rkubelet did not reconnect; log:\n{}",
            &node.log_text()[log_mark..]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let reconnect = reconnected.saturating_duration_since(back);
    println!(
        "FIGURE fault2: containerd answering to rkubelet's first good relist: {:.2} s (goal < 5 s)",
        reconnect.as_secs_f64()
    );
    assert!(
        script.wait().is_ok_and(|s| s.success()),
        "containerd-up.sh failed"
    );
    assert!(
        node.daemon.as_ref().is_some_and(|d| d.proc().alive()),
        "rkubelet restarted or died"
    );

    let after = eventually!(
        60,
        "30 pods running again",
        Some(running_by_pod(&node.rt).await).filter(|r| r.len() == PODS)
    );
    let pods_running = back.elapsed();
    let ready_again = eventually!(
        60,
        "Ready True again",
        node_ready(&cluster).filter(|(s, _)| s == "True")
    );
    let ready = back.elapsed();
    println!("FIGURE fault2: Ready again: {ready_again:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut adopted = 0;
    let mut recreated = 0;
    let mut lost = 0;
    let mut wrong = Vec::new();
    // containerd, back, gives up a task whose shim does not answer within its load
    // timeout (5 s): it kills the container and says so. That is the runtime's loss, not
    // rkubelet's; upstream restarts such a container too. (Once in CI, the machine
    // overloaded, a survivor came back as attempt 1, its cause not recorded.)
    let containerd_log =
        std::fs::read_to_string(node.ctrd.base.join("containerd.log")).unwrap_or_default();
    let lost_by_containerd = |c: &ContainerEntry| {
        [&c.status.id, &c.sandbox_id].iter().any(|id| {
            containerd_log.lines().any(|l| {
                l.contains("cleaning up after shim disconnected") && l.contains(id.as_str())
            })
        })
    };
    for (pod, c) in &before {
        let now = &after[pod];
        if !dying.contains(pod) && now.status.id != c.status.id && lost_by_containerd(c) {
            lost += 1;
            println!("FIGURE fault2: {pod}: its container lost by containerd at its return, created again");
        } else if dying.contains(pod) {
            if now.status.id != c.status.id && now.status.attempt == 1 {
                recreated += 1;
            } else {
                wrong.push(format!(
                    "{pod}: died, now {} attempt {}",
                    now.status.id, now.status.attempt
                ));
            }
        } else if now.status.id == c.status.id && now.status.attempt == 0 {
            adopted += 1;
        } else {
            wrong.push(format!(
                "{pod}: survived, now {} attempt {}",
                now.status.id, now.status.attempt
            ));
        }
    }
    let c = census(&node.rt).await;
    let duplicated = c.ready_sandboxes.values().filter(|n| **n != 1).count()
        + c.live_containers.values().filter(|n| **n != 1).count();
    count("fault2 containers adopted", adopted);
    count("fault2 containers recreated", recreated);
    println!("FIGURE fault2: containers containerd lost at its return: {lost}");
    count("fault2 pods handled otherwise", wrong.len());
    count("fault2 sandboxes or containers duplicated", duplicated);
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!((adopted + lost, recreated), (PODS - DYING, DYING));
    assert_eq!(
        duplicated, 0,
        "{:?} {:?}",
        c.ready_sandboxes, c.live_containers
    );
    assert_eq!(c.ready_sandboxes.len(), PODS);
    node.finish();
    RestartFigures {
        not_ready,
        reconnect,
        pods_running,
        ready,
        adopted,
        recreated,
        lost,
        duplicated,
    }
}

/// Whether the log's last word on relists is a failure (a success after failures logs
/// "succeeded again").
fn relists_failing(log: &str) -> bool {
    log.rfind("PLEG relist failed") > log.rfind("PLEG relist succeeded again")
}

/// `GET /healthz`: its status code.
fn healthz_code(node: &Node) -> Option<u16> {
    http_get(node.port(), "/healthz").map(|(code, _)| code)
}

/// How long fault 5 keeps the list calls hanging.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)] // `UntilUnhealthy` is the bench's
pub(crate) enum Stall {
    /// This long, shorter than upstream's 3-minute PLEG threshold: `/healthz` stays ok.
    For(Duration),
    /// Until `/healthz` fails (the PLEG threshold), at most 4 minutes.
    UntilUnhealthy,
}

/// What fault 5 measured.
#[allow(dead_code)] // the bench `faults` prints them
pub(crate) struct CriFaultFigures {
    /// Start to 10 pods running through failing and slow calls.
    pub pods_running: Duration,
    /// Calls relayed, failed, held.
    pub calls: (u64, u64, u64),
    /// List calls hanging to `/healthz` 500, when the stall lasted that long.
    pub unhealthy_after: Option<Duration>,
    /// The runtime answering again to the add and removal made during the stall done.
    pub caught_up: Duration,
    /// Sandboxes or containers present more than once at the end.
    pub duplicated: usize,
}

/// Fault 5: slow and failing CRI calls through a proxy. First a tenth of all calls fail
/// and a tenth are held past the 2 s request timeout while 10 pods start: every pod
/// still runs, exactly once, and no worker is left behind. Then the list calls hang
/// (`stall`): every relist times out; `/healthz` stays ok below upstream's 3-minute PLEG
/// threshold and fails past it (`[-]pleg failed`); a pod added and one removed meanwhile
/// are handled once the runtime answers again, and `/healthz` is ok again.
pub(crate) async fn slow_and_failing_cri(name: &str, stall: Stall) -> CriFaultFigures {
    const PODS: usize = 10;
    let mut node = Node::start(name);
    let socket = PathBuf::from(format!("/tmp/rkproxy-{}-{name}.sock", std::process::id()));
    let proxy = CriProxy::start(&socket, &node.ctrd.socket(), 17);
    proxy.set(CriFaults {
        fail_share: 0.1,
        delay_share: 0.1,
        delay: Duration::from_secs(3),
        methods: Vec::new(),
        ..CriFaults::default()
    });
    for i in 0..PODS {
        node.write(
            &format!("p{i:02}.yaml"),
            &steady_pod(&format!("p{i:02}"), &node.busybox),
        );
    }
    node.endpoint = proxy.endpoint();
    node.kubelet_with(&["--runtime-request-timeout=2s"]);
    let started = Instant::now();
    // A liveness bound, not a speed goal (the figure is printed): the same code took 69 s
    // alone and 160 s beside other tests on this 2-core VM, and over 180 s once in CI.
    eventually!(
        300,
        "10 pods running through failing and slow CRI calls",
        Some(running_by_pod(&node.rt).await).filter(|r| r.len() == PODS)
    );
    let pods_running = started.elapsed();
    let counts = proxy.counts();
    let calls = (
        CriCounts::total(&counts.calls),
        CriCounts::total(&counts.failed),
        CriCounts::total(&counts.delayed),
    );
    println!(
        "FIGURE fault5: 10 pods running after {:.1} s; CRI calls {}, failed {}, held 3 s {}",
        pods_running.as_secs_f64(),
        calls.0,
        calls.1,
        calls.2
    );
    assert!(calls.1 > 0 && calls.2 > 0, "no fault injected: {counts:?}");
    let log = node.log_text();
    assert!(log.contains("retrying"), "no retry logged");
    assert!(log.contains("timed out after 2000 ms"), "no timeout logged");
    // Settled: calls held past their timeout may still have created something; the GC
    // and the syncs leave one of each.
    proxy.clear();
    eventually!(
        60,
        "each pod exactly once",
        async {
            let c = census(&node.rt).await;
            (c.ready_sandboxes.len() == PODS
                && c.ready_sandboxes.values().all(|n| *n == 1)
                && c.live_containers.values().all(|n| *n == 1)
                && c.live_containers.len() == PODS)
                .then_some(())
        }
        .await
    );
    let created_again = running_by_pod(&node.rt)
        .await
        .values()
        .filter(|c| c.status.attempt > 0)
        .count();
    println!("FIGURE fault5: {created_again} containers created a second time after a held call");
    count("fault5 pods not running once after failing calls", 0);

    // The list calls hang: every relist times out. A streak of failed relists logs its
    // first failure only (then one a minute): wait for the faults' streak to end, so the
    // stall starts a new one (CI of 2026-11-25: a relist failed just before the stall).
    eventually!(
        30,
        "a relist succeeding once the faults are cleared",
        (!relists_failing(&node.log_text())).then_some(())
    );
    assert_eq!(healthz_code(&node), Some(200));
    let log_mark = node.log_text().len();
    proxy.set(CriFaults {
        fail_share: 0.0,
        delay_share: 1.0,
        delay: Duration::from_secs(30),
        methods: vec!["ListPodSandbox".into(), "ListContainers".into()],
        ..CriFaults::default()
    });
    let stalled = Instant::now();
    node.write("late.yaml", &steady_pod("late", &node.busybox));
    node.remove("p00.yaml");
    let unhealthy_after = match stall {
        Stall::For(length) => {
            while stalled.elapsed() < length {
                assert_eq!(
                    healthz_code(&node),
                    Some(200),
                    "unhealthy {:?} into the stall, before upstream's threshold",
                    stalled.elapsed()
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            None
        }
        Stall::UntilUnhealthy => {
            let unhealthy = eventually!(
                240,
                "/healthz failing once the PLEG stalled 3 minutes",
                (healthz_code(&node) == Some(500)).then(|| stalled.elapsed())
            );
            println!(
                "FIGURE fault5: relists hanging to /healthz 500: {:.0} s (upstream's threshold: 180 s)",
                unhealthy.as_secs_f64()
            );
            assert!(unhealthy >= Duration::from_secs(170), "{unhealthy:?}");
            let body = http_get(node.port(), "/healthz")
                .map(|(_, b)| b)
                .unwrap_or_default();
            assert!(body.contains("[-]pleg failed"), "{body}");
            assert!(node.log_text().contains("pleg was last seen active"));
            Some(unhealthy)
        }
    };
    assert!(
        node.log_text()[log_mark..].contains("PLEG relist failed"),
        "the stalled relist not logged"
    );
    assert!(
        node.daemon.as_ref().is_some_and(|d| d.proc().alive()),
        "rkubelet died in the stall"
    );

    proxy.clear();
    let cleared = Instant::now();
    eventually!(
        60,
        "/healthz ok again",
        (healthz_code(&node) == Some(200)).then_some(())
    );
    eventually!(
        90,
        "the pod added during the stall running, the removed one gone",
        async {
            let running = running_by_pod(&node.rt).await;
            (running.contains_key(&format!("late-{NODE}"))
                && !running.contains_key(&format!("p00-{NODE}"))
                && census(&node.rt).await.ready_sandboxes.len() == PODS)
                .then_some(())
        }
        .await
    );
    let caught_up = cleared.elapsed();
    println!(
        "FIGURE fault5: runtime answering again to the pending add and removal done: {:.1} s",
        caught_up.as_secs_f64()
    );
    let c = census(&node.rt).await;
    let duplicated = c.ready_sandboxes.values().filter(|n| **n != 1).count()
        + c.live_containers.values().filter(|n| **n != 1).count();
    count("fault5 sandboxes or containers duplicated", duplicated);
    assert_eq!(duplicated, 0);
    drop(proxy);
    node.finish();
    CriFaultFigures {
        pods_running,
        calls,
        unhealthy_after,
        caught_up,
        duplicated,
    }
}

/// Fault 5, short form: the list calls hang for 30 s (below the PLEG threshold, so
/// `/healthz` stays ok); the bench `faults` runs the stall past upstream's 3 minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn slow_and_failing_cri_calls_are_retried_and_no_worker_is_stuck() {
    let figures = slow_and_failing_cri("f5cri", Stall::For(Duration::from_secs(30))).await;
    assert!(
        figures.caught_up < Duration::from_secs(30),
        "{:?}",
        figures.caught_up
    );
}

/// A pod whose container writes a log line every 0.2 s.
fn chatty_pod(name: &str, image: &str) -> String {
    pod(
        name,
        "",
        &[],
        &[container(
            "main",
            image,
            "while true; do echo chatter; sleep 0.2; done",
        )],
    )
}

/// Fault 4: a full disk under `--root-dir` and under the pod log folder (a 1 MiB tmpfs
/// each). A running pod is untouched (its container keeps running and logging what it
/// can); a new pod fails with a clear error naming the folder and ENOSPC, retried; no
/// panic, `/healthz` ok; a pod removed meanwhile is removed whole. When space returns
/// the new pod runs and the removed one left nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn a_full_disk_is_reported_and_work_resumes() {
    let mut node = Node::start("f4disk");
    let base = PathBuf::from(format!("/tmp/rkdisk-{}", std::process::id()));
    let root_disk = SmallDisk::mount(&base.join("root"), "1m");
    let log_disk = SmallDisk::mount(&base.join("logs"), "1m");
    node.root = root_disk.path.clone();
    node.logs = log_disk.path.clone();
    node.write("steady.yaml", &steady_pod("steady", &node.busybox));
    node.write("chatty.yaml", &chatty_pod("chatty", &node.busybox));
    node.kubelet();
    let steady = node
        .wait_running(&format!("steady-{NODE}"), "main", 60)
        .await;
    let chatty = node
        .wait_running(&format!("chatty-{NODE}"), "main", 60)
        .await;
    // The state rkubelet keeps under the root dir (its client certificate, rotated by the
    // same store in connected mode): a pair written before the disk fills.
    let pki = root_disk.path.join("pki");
    let store = FileCertStore::new(&pki);
    store
        .store("kubelet-client-1.pem", b"first pair")
        .expect("a pair stored while there is space");
    let filled = root_disk.fill() + log_disk.fill();
    println!("FIGURE fault4: {filled} bytes of filler; both disks full");
    // One inode back, no block: the new pair's file opens, its write fails.
    let _ = std::fs::remove_file(root_disk.path.join(".filler.d/0"));
    let refused = store
        .store("kubelet-client-2.pem", &vec![b'x'; 256 * 1024])
        .expect_err("a pair stored on a full disk");
    let refused = Chain(&refused).to_string();
    println!("FIGURE fault4: state file on the full disk: {refused}");
    assert!(refused.contains("No space left on device"), "{refused}");
    assert_eq!(
        store
            .current()
            .expect("the current pair readable")
            .as_deref(),
        Some(&b"first pair"[..]),
        "the state file changed"
    );
    let debris: Vec<String> = children(&pki)
        .into_iter()
        .filter(|n| n.contains("tmp") || n.contains("-2"))
        .collect();
    count(
        "fault4 state files corrupted or left half-written",
        debris.len(),
    );
    assert!(debris.is_empty(), "{debris:?}");
    let mark = node.log_text().len();
    node.write("late.yaml", &steady_pod("late", &node.busybox));
    node.remove("chatty.yaml");
    let error = eventually!(
        60,
        "the new pod's failure logged",
        node.log_text()[mark..]
            .lines()
            .find(|l| l.contains("No space left on device"))
            .map(str::to_string)
    );
    println!("FIGURE fault4: {error}");
    assert!(error.contains("cannot create"), "{error}");
    eventually!(
        60,
        "the removed pod gone on the full disk",
        node.sandboxes(&format!("chatty-{NODE}"))
            .await
            .is_empty()
            .then_some(())
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(node
        .running(&format!("late-{NODE}"), "main")
        .await
        .is_none());
    let now = node
        .running(&format!("steady-{NODE}"), "main")
        .await
        .expect("the running pod still runs");
    assert_eq!(
        (now.status.id.as_str(), now.status.attempt),
        (steady.status.id.as_str(), 0)
    );
    assert_eq!(healthz_code(&node), Some(200));
    let log = node.log_text();
    count("fault4 panics", log.matches("panicked").count());
    assert!(!log.contains("panicked"), "{log}");
    assert!(node.daemon.as_ref().is_some_and(|d| d.proc().alive()));

    root_disk.free();
    log_disk.free();
    let freed = Instant::now();
    node.wait_running(&format!("late-{NODE}"), "main", 60).await;
    println!(
        "FIGURE fault4: space back to the new pod running: {:.1} s",
        freed.elapsed().as_secs_f64()
    );
    assert!(node.log_line("up").is_some(), "the new pod logs again");
    let left = leftovers(&node);
    let c = census(&node.rt).await;
    let orphaned = orphans(&left, &c.uids);
    count(
        "fault4 folders or cgroups without their pod",
        orphaned.len(),
    );
    assert!(orphaned.is_empty(), "{orphaned:?}");
    assert_eq!(c.ready_sandboxes.len(), 2);
    let _ = chatty;
    node.finish();
    drop(root_disk);
    drop(log_disk);
    let _ = std::fs::remove_dir(&base);
}

/// Seconds since the Unix epoch of an audit event's `stageTimestamp`.
fn audit_secs(event: &serde_json::Value) -> f64 {
    event["stageTimestamp"]
        .as_str()
        .and_then(rkubelet::domain::units::time::parse_rfc3339)
        .map_or(0.0, |n| n as f64 / 1e9)
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Whether the node wrote `resource` (`leases`, or `nodes/status`) successfully after
/// `since` (audit log).
fn node_wrote_after(cluster: &Cluster, resource: &str, subresource: &str, since: f64) -> bool {
    let user = format!("system:node:{NODE}");
    cluster.audit_events().iter().any(|e| {
        e["user"]["username"] == user.as_str()
            && matches!(e["verb"].as_str(), Some("update" | "patch"))
            && e["objectRef"]["resource"] == resource
            && e["objectRef"]["subresource"].as_str().unwrap_or("") == subresource
            && e["responseStatus"]["code"].as_i64() == Some(200)
            && audit_secs(e) >= since
    })
}

/// What fault 3 measured.
#[allow(dead_code)] // the bench `faults` prints them
pub(crate) struct OutageFigures {
    /// Connection attempts on the API server's port during the outage, and during its
    /// second half (the back-offs grown: the steady rate).
    pub attempts: u64,
    pub attempts_second_half: u64,
    /// rkubelet's log lines during the outage.
    pub log_lines: usize,
    /// The API server ready again to the Lease renewed, and to the node status patched.
    pub lease: Duration,
    pub status: Duration,
    /// Static and API pod containers restarted across the outage.
    pub restarted: usize,
    /// The API server ready again to a pod deleted in the API during the outage (through
    /// a second API server) gone from the runtime and the API.
    pub deleted_in_outage_gone: Duration,
    /// The API server ready again to a pod created then running, and to a pod deleted
    /// then gone from the runtime (the pod source's watch resumed).
    pub new_pod_running: Duration,
    pub deleted_pod_gone: Duration,
}

/// Fault 3: the API server stopped for `outage` under a connected rkubelet with three
/// static pods and two API pods. Meanwhile a listener on the API server's port counts the
/// node's connection attempts (each finds the server gone): they stay bounded by the
/// back-off, as do the log lines. Nothing is restarted (the API pods run on from what
/// the node knew); an API pod deleted meanwhile (through a second API server on the same
/// etcd, as when the node alone is cut off) goes after the return; the Lease is renewed
/// within 15 s, the node status is patched, and the pod source follows the API again: a
/// new pod runs, a deleted one goes.
pub(crate) async fn api_server_outage(name: &str, outage: Duration) -> OutageFigures {
    const STATIC_PODS: usize = 3;
    const API_PODS: usize = 3;
    const DELETED_IN_OUTAGE: &str = "a2";
    const PODS: usize = STATIC_PODS + API_PODS;
    let cluster = Cluster::start(name);
    let mut node = Node::start(&format!("{name}api"));
    for i in 0..STATIC_PODS {
        node.write(
            &format!("s{i}.yaml"),
            &steady_pod(&format!("s{i}"), &node.busybox),
        );
    }
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    // Upstream sends an unchanged status every nodeStatusReportFrequency (5 min); a
    // shorter outage would see none after the return, so the period is made shorter
    // than the outage.
    let config = node.root.join("../kubelet-config.yaml");
    let report_every = (outage / 2).as_secs().clamp(10, 300);
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnodeStatusReportFrequency: {report_every}s\n"
        ),
    )
    .expect("config written");
    node.kubelet_with(&[
        &format!("--kubeconfig={}", kubeconfig.display()),
        &format!("--config={}", config.display()),
    ]);
    for i in 0..API_PODS {
        cluster.apply(&api_steady_pod(&format!("a{i}"), &node.busybox));
    }
    let before = eventually!(
        90,
        "the static and API pods running",
        Some(running_by_pod(&node.rt).await).filter(|r| r.len() == PODS)
    );
    eventually!(
        30,
        "Ready",
        node_ready(&cluster).filter(|(s, _)| s == "True")
    );
    let port: u16 = cluster.var("APORT").parse().expect("APORT");
    // The controller manager goes too: its clients would knock on the port as well, and
    // only the node's attempts are counted.
    cluster.stop_component("controller-manager");
    cluster.stop_component("apiserver");
    let log_mark = node.log_text().len();
    // The port is free again: count who knocks.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("the API server's port");
    let counter = tokio::spawn(count_attempts(listener, outage));
    tokio::time::sleep(outage / 2).await;
    let during = running_by_pod(&node.rt).await;
    // A pod deleted in the API while the node cannot see the API server.
    tokio::task::block_in_place(|| {
        let door = cluster.open_side_door();
        let deleted =
            cluster.side_door_kubectl(door, &["delete", "pod", DELETED_IN_OUTAGE, "--wait=false"]);
        assert!(deleted.status.success(), "{deleted:?}");
        cluster.stop_component("side-door");
    });
    let (attempts, attempts_second_half) = counter.await.expect("the attempt counter");
    let minutes = outage.as_secs_f64() / 60.0;
    let outage_log: Vec<String> = node.log_text()[log_mark..]
        .lines()
        .map(str::to_string)
        .collect();
    let steady_per_minute = attempts_second_half as f64 / (minutes / 2.0);
    println!(
        "FIGURE fault3: {:.0} s outage: {attempts} connection attempts ({:.1} a minute; {steady_per_minute:.1} a minute in its second half), {} log lines",
        outage.as_secs_f64(),
        attempts as f64 / minutes,
        outage_log.len()
    );
    // The Lease (its retries back off to 7 s), the status (every 10 s), the pod source's
    // and the mirror pods' watches (back-off doubling from 1 s) keep trying. Each loop's
    // first retries come fast (seen: 19 in the first 30 s), so the bound is on the rate
    // once the back-offs have grown.
    assert!(attempts > 0, "nothing tried to reach the API server");
    assert!(
        steady_per_minute <= 30.0,
        "{attempts_second_half} attempts in the second half of {minutes} minutes"
    );
    assert!(
        outage_log.len() as f64 <= 10.0 + 4.0 * minutes,
        "{}",
        outage_log.join("\n")
    );

    let since = unix_now();
    cluster.start_component("apiserver");
    let back = Instant::now();
    cluster.start_component("controller-manager");
    eventually!(
        30,
        "the Lease renewed",
        node_wrote_after(&cluster, "leases", "", since).then_some(())
    );
    let lease = back.elapsed();
    eventually!(
        60,
        "the node status patched",
        node_wrote_after(&cluster, "nodes", "status", since).then_some(())
    );
    let status = back.elapsed();
    println!(
        "FIGURE fault3: API server ready again to Lease renewed {:.1} s, to node status patched {:.1} s",
        lease.as_secs_f64(),
        status.as_secs_f64()
    );
    assert!(lease <= Duration::from_secs(15), "{lease:?}");
    // The status loop's period (10 s) after its report became due.
    assert!(status <= Duration::from_secs(25), "{status:?}");
    eventually!(
        30,
        "Ready",
        node_ready(&cluster).filter(|(s, _)| s == "True")
    );
    let after = running_by_pod(&node.rt).await;
    let restarted = before
        .iter()
        .filter(|(pod, _)| *pod != DELETED_IN_OUTAGE)
        .filter(|(pod, c)| {
            [&during, &after].iter().any(|m| {
                m.get(*pod)
                    .is_none_or(|n| n.status.id != c.status.id || n.status.attempt != 0)
            })
        })
        .count();
    count("fault3 static and API pod containers restarted", restarted);
    assert_eq!(restarted, 0);
    // The pod deleted meanwhile goes: its containers stopped, then its API object
    // removed once rkubelet reports them gone.
    eventually!(
        60,
        "the pod deleted in the outage gone from the runtime and the API",
        (!running_by_pod(&node.rt)
            .await
            .contains_key(DELETED_IN_OUTAGE)
            && cluster.get_json(&["pod", DELETED_IN_OUTAGE]).is_none())
        .then_some(())
    );
    let deleted_in_outage_gone = back.elapsed();
    // The pod source follows the API again.
    cluster.apply(&api_steady_pod("late", &node.busybox));
    eventually!(
        60,
        "the pod created after the outage running",
        running_by_pod(&node.rt)
            .await
            .contains_key("late")
            .then_some(())
    );
    let new_pod_running = back.elapsed();
    let deleted = cluster.kubectl(&["delete", "pod", "a0", "--wait=false"]);
    assert!(deleted.status.success());
    eventually!(
        60,
        "the pod deleted after the outage gone from the runtime",
        (!running_by_pod(&node.rt).await.contains_key("a0")).then_some(())
    );
    let deleted_pod_gone = back.elapsed();
    println!(
        "FIGURE fault3: API server ready again to the pod deleted in the outage gone {:.1} s, to a new pod running {:.1} s, to a pod deleted then gone {:.1} s",
        deleted_in_outage_gone.as_secs_f64(),
        new_pod_running.as_secs_f64(),
        deleted_pod_gone.as_secs_f64()
    );
    assert!(
        node.daemon.as_ref().is_some_and(|d| d.proc().alive()),
        "rkubelet died in the outage"
    );
    node.finish();
    OutageFigures {
        attempts,
        attempts_second_half,
        log_lines: outage_log.len(),
        lease,
        status,
        restarted,
        deleted_in_outage_gone,
        new_pod_running,
        deleted_pod_gone,
    }
}

/// Accepts connections on the API server's port for `outage`: how many came, in all and
/// in the second half (once the back-offs have grown).
async fn count_attempts(listener: tokio::net::TcpListener, outage: Duration) -> (u64, u64) {
    let started = Instant::now();
    let mut attempts = 0u64;
    let mut attempts_second_half = 0u64;
    while let Some(left) = outage.checked_sub(started.elapsed()) {
        if let Ok(Ok((stream, peer))) = tokio::time::timeout(left, listener.accept()).await {
            attempts += 1;
            if started.elapsed() > outage / 2 {
                attempts_second_half += 1;
            }
            if std::env::var("RKUBELET_FAULT_DEBUG").is_ok() {
                eprintln!("ACCEPT {:.3} {peer}", started.elapsed().as_secs_f64());
            }
            drop(stream);
        }
    }
    (attempts, attempts_second_half)
}

/// `steady_pod` from the API server, bound to the node.
fn api_steady_pod(name: &str, image: &str) -> String {
    steady_pod(name, image).replace(
        "spec:\n",
        &format!("spec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n"),
    )
}

/// Fault 3, short form: a 60 s outage; the bench `faults` runs the 5 minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd), root and containerd: run by scripts/test.sh"]
async fn an_api_server_outage_restarts_nothing_and_the_lease_resumes() {
    let outage = std::env::var("RKUBELET_FAULT_OUTAGE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let figures = api_server_outage("f3", Duration::from_secs(outage)).await;
    assert_eq!(figures.restarted, 0);
}

/// (A thread of its own: the domain's unit tests spawn none.)
/// Found by the fault tests (issue 17): 1,500 levels of block nesting overflowed a
/// 2 MiB stack inside the YAML parser; now the parser's depth budget refuses it.
#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    use rkubelet::domain::pod::static_pod::{decode_static_pods, PodSourceKind};
    let mut text =
        String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: deep\n  annotations:\n");
    for level in 0..1_500 {
        text.push_str(&" ".repeat(4 + level));
        text.push_str("k:\n");
    }
    let refused = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            decode_static_pods(
                "/m/deep.yaml",
                text.as_bytes(),
                "n",
                PodSourceKind::File,
                "2024-01-01T00:00:00Z",
            )
        })
        .expect("thread")
        .join()
        .expect("no stack overflow");
    let error = refused.expect_err("refused").to_string();
    assert!(
        error.contains("/m/deep.yaml") && error.contains("Depth"),
        "{error}"
    );
}
