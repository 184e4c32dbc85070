//! The static CPU manager (issue 36, part 3) against containerd and this kernel's
//! cgroups, on this 2-CPU machine with `--cpu-manager-policy=static --reserved-cpus=0`:
//! CPU 1 is the only one a container can have alone.
//!
//! Ported from upstream v1.26's `test/e2e_node/cpu_manager_test.go` (what fits two CPUs:
//! "should run a Guaranteed pod with one exclusive CPU", a non-Guaranteed pod on the
//! shared pool, the shared pool back whole once the exclusive pod is gone) and
//! `podresources_test.go` (the exclusive CPU in `List`, the allocatable CPUs in
//! `GetAllocatableResources`), with the `cpu_manager_state` checkpoint kept over an
//! rkubelet restart and a second exclusive request refused at admission.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rkubelet::adapters::device_plugins::wire::podresources as pr;
use serde_json::Value;

use crate::common::node::{container, pod, walk_dirs, Node};

// Static pods are named `<name>-<node>`.
const G: &str = "cpu-g-n1";
const G2: &str = "cpu-g2-n1";
const B: &str = "cpu-b-n1";

const FLAGS: [&str; 3] = [
    "--cpu-manager-policy=static",
    "--reserved-cpus=0",
    // Upstream's default is 10 s; 1 s keeps the test short.
    "--cpu-manager-reconcile-period=1s",
];

fn guaranteed(name: &str, image: &str) -> String {
    let app = container("app", image, "sleep 3600").replace(
        "    command:",
        "    resources:\n      limits: {cpu: \"1\", memory: 64Mi}\n    command:",
    );
    pod(name, "", &[], &[app])
}

fn burstable(name: &str, image: &str) -> String {
    let app = container("app", image, "sleep 3600").replace(
        "    command:",
        "    resources:\n      requests: {memory: 16Mi}\n    command:",
    );
    pod(name, "", &[], &[app])
}

/// `Cpus_allowed_list` of the container's own process, read through it.
async fn allowed_cpus(node: &Node, pod: &str) -> String {
    let (out, code) = node
        .exec_sh(pod, "app", "grep Cpus_allowed_list /proc/self/status")
        .await;
    assert_eq!(code, 0, "{pod}: {out:?}");
    out.split(':').nth(1).unwrap_or_default().trim().to_owned()
}

/// The container's `cpuset.cpus` in the cpuset hierarchy (its folder is its id).
fn cgroup_cpus(node: &Node, id: &str) -> String {
    let base = Path::new("/sys/fs/cgroup/cpuset");
    let root = node.ctrd.var("RKUBELET_CGROUP_ROOT");
    let root = base.join(root.trim_start_matches('/'));
    let mut found: Option<PathBuf> = None;
    walk_dirs(&root, 8, &mut |dir| {
        if dir.file_name().is_some_and(|n| n == id) {
            found = Some(dir.to_path_buf());
        }
    });
    let dir = found.unwrap_or_else(|| panic!("no cpuset cgroup for {id} under {}", root.display()));
    std::fs::read_to_string(dir.join("cpuset.cpus"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .trim()
        .to_owned()
}

/// Both views of the container's CPUs: (`Cpus_allowed_list`, `cpuset.cpus`).
async fn cpus_of(node: &Node, pod: &str) -> (String, String) {
    let id = node.wait_running(pod, "app", 90).await.status.id;
    (allowed_cpus(node, pod).await, cgroup_cpus(node, &id))
}

/// Polls until the container runs on `want` in both views (the reconcile loop's period).
async fn eventually_on(node: &Node, pod: &str, want: &str) {
    let deadline = Instant::now() + crate::common::patience(30);
    loop {
        let now = cpus_of(node, pod).await;
        if now.0 == want && now.1 == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{pod} runs on {now:?}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn state_file(node: &Node) -> Value {
    let text = std::fs::read_to_string(node.root.join("cpu_manager_state"))
        .unwrap_or_else(|e| panic!("cpu_manager_state: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn uid(node: &Node, pod: &str) -> String {
    node.pod_json(pod)
        .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("{pod} not in /pods: {}", node.pods_body()))
}

/// Refused at admission as upstream's CPU manager refuses it.
async fn refused(node: &Node, pod: &str) {
    let deadline = Instant::now() + crate::common::patience(30);
    let status = loop {
        if let Some(p) = node.pod_json(pod) {
            if p["status"]["phase"] == "Failed" {
                break p["status"].clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{pod} not refused: {}",
            node.pods_body()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(status["reason"], "UnexpectedAdmissionError", "{status}");
    assert_eq!(
        status["message"],
        "Pod was rejected: Allocate failed due to not enough cpus available to satisfy request, which is unexpected",
        "{status}"
    );
    assert!(
        node.containers(pod).await.is_empty(),
        "a refused pod gets no container"
    );
}

/// `List`: each pod's `app` container's CPU ids, by pod name.
async fn listed_cpus(node: &Node) -> Vec<(String, Vec<i64>)> {
    let mut client =
        crate::common::pod_resources::client(node.root.join("pod-resources/kubelet.sock")).await;
    let list = client
        .list(pr::ListPodResourcesRequest {})
        .await
        .expect("List")
        .into_inner();
    let mut out: Vec<_> = list
        .pod_resources
        .into_iter()
        .map(|p| {
            let cpus = p
                .containers
                .into_iter()
                .find(|c| c.name == "app")
                .map(|c| c.cpu_ids)
                .unwrap_or_default();
            (p.name, cpus)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd, a cgroup v1 cpuset hierarchy and 2 CPUs: run by scripts/test.sh"]
async fn static_policy_pins_a_guaranteed_container_to_cpu_1_and_keeps_it_over_a_restart() {
    let started = Instant::now();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    assert_eq!(
        online.trim(),
        "0-1",
        "this test is written for a 2-CPU machine"
    );
    let mut node = Node::start("cpumgr");
    node.kubelet_with(&FLAGS);
    let image = node.busybox.clone();

    // A Guaranteed one-CPU container runs on CPU 1 alone (upstream: "should run a
    // Guaranteed pod with one exclusive CPU").
    node.write("g.yaml", &guaranteed("cpu-g", &image));
    let g = cpus_of(&node, G).await;
    eprintln!("cpu-g: Cpus_allowed_list {:?}, cpuset.cpus {:?}", g.0, g.1);
    assert_eq!(g, ("1".to_owned(), "1".to_owned()));
    // A Burstable one runs on the shared pool: every CPU but the exclusive one.
    node.write("b.yaml", &burstable("cpu-b", &image));
    eventually_on(&node, B, "0").await;
    let b = cpus_of(&node, B).await;
    eprintln!("cpu-b: Cpus_allowed_list {:?}, cpuset.cpus {:?}", b.0, b.1);

    // The checkpoint, in upstream's layout.
    let g_uid = uid(&node, G);
    let state = state_file(&node);
    eprintln!("cpu_manager_state: {state}");
    assert_eq!(state["policyName"], "static", "{state}");
    assert_eq!(state["defaultCpuSet"], "0", "{state}");
    assert_eq!(state["entries"][&g_uid]["app"], "1", "{state}");
    assert!(state["checksum"].as_u64().is_some_and(|c| c > 0), "{state}");

    // The pod resources API: the exclusive CPU in `List`, CPU 1 allocatable.
    let listed = listed_cpus(&node).await;
    eprintln!("List: {listed:?}");
    assert_eq!(
        listed,
        vec![(B.to_owned(), Vec::new()), (G.to_owned(), vec![1])]
    );
    let mut client =
        crate::common::pod_resources::client(node.root.join("pod-resources/kubelet.sock")).await;
    let allocatable = client
        .get_allocatable_resources(pr::AllocatableResourcesRequest {})
        .await
        .expect("GetAllocatableResources")
        .into_inner();
    eprintln!("GetAllocatableResources cpu_ids: {:?}", allocatable.cpu_ids);
    assert_eq!(allocatable.cpu_ids, vec![1]);

    // A second exclusive CPU is not there: refused at admission.
    node.write("g2.yaml", &guaranteed("cpu-g2", &image));
    refused(&node, G2).await;

    // rkubelet restarts: the state file keeps the assignment, the container stays on
    // CPU 1, the second pod is refused again.
    let g_id = node.wait_running(G, "app", 10).await.status.id;
    node.kill9();
    node.kubelet_with(&FLAGS);
    refused(&node, G2).await;
    assert_eq!(state_file(&node)["entries"][&g_uid]["app"], "1");
    let g = cpus_of(&node, G).await;
    eprintln!("after the restart, cpu-g: {g:?}");
    assert_eq!(g, ("1".to_owned(), "1".to_owned()));
    assert_eq!(
        node.wait_running(G, "app", 10).await.status.id,
        g_id,
        "not restarted"
    );
    eventually_on(&node, B, "0").await;

    // The Guaranteed pod goes: the shared pool is 0-1 again and the Burstable container
    // is updated to it (upstream's reconcile loop).
    node.remove("g2.yaml");
    node.remove("g.yaml");
    eventually_on(&node, B, "0-1").await;
    let b = cpus_of(&node, B).await;
    eprintln!("after cpu-g ended, cpu-b: {b:?}");
    let state = state_file(&node);
    eprintln!("cpu_manager_state: {state}");
    assert_eq!(state["defaultCpuSet"], "0-1", "{state}");
    assert!(
        state["entries"].as_object().is_none_or(|e| e.is_empty()),
        "{state}"
    );
    assert!(
        node.log_text()
            .contains("ReconcileState: updated the container's cpuset"),
        "the update went through UpdateContainerResources"
    );

    // A Guaranteed pod that completes (restartPolicy Never) is no longer active: its CPU
    // goes back to the shared pool without the pod being removed, as upstream's active
    // pods leave finished ones out.
    let done = guaranteed("cpu-done", &image)
        .replace("sleep 3600", "true")
        .replace("spec:\n", "spec:\n  restartPolicy: Never\n");
    node.write("done.yaml", &done);
    let done_uid = {
        let deadline = Instant::now() + crate::common::patience(60);
        loop {
            let pod = node.pod_json("cpu-done-n1");
            if let Some(pod) = pod.filter(|p| p["status"]["phase"] == "Succeeded") {
                break pod["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
            }
            assert!(Instant::now() < deadline, "cpu-done did not complete");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    let deadline = Instant::now() + crate::common::patience(30);
    loop {
        let state = state_file(&node);
        if state["defaultCpuSet"] == "0-1" && state["entries"].get(&done_uid).is_none() {
            eprintln!("after cpu-done completed: {state}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the completed pod's CPU was not given back: {state}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eventually_on(&node, B, "0-1").await;
    node.remove("done.yaml");

    node.remove("b.yaml");
    let deadline = Instant::now() + crate::common::patience(60);
    while !node.containers(B).await.is_empty() {
        assert!(Instant::now() < deadline, "cpu-b did not go");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    node.finish();
    eprintln!("cpu manager test: {:.1} s", started.elapsed().as_secs_f64());
}
