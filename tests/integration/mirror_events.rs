//! Mirror pods and pod events (issue 12, must-show 5 and 7) against a real private control
//! plane (kube-apiserver v1.26.1 with the Node authorizer and NodeRestriction, etcd) and a
//! private containerd, with static pods: what `kubectl get` shows.

use std::time::Instant;

use crate::common::api_pods::eventually;
use crate::common::cluster::Cluster;
use crate::common::node::{container, pod, Node, NODE};
use serde_json::Value;

fn start(cluster: &Cluster, node: &mut Node) {
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    node.kubelet_with(&[&format!("--kubeconfig={}", kubeconfig.display())]);
}

/// The events about pod `name` in `default`.
fn events_of(cluster: &Cluster, name: &str) -> Vec<Value> {
    cluster
        .get_json(&["events", "-n", "default"])
        .and_then(|list| list["items"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .collect()
}

fn has(events: &[Value], reason: &str, message: &str) -> bool {
    events.iter().any(|e| {
        e["reason"] == reason && e["message"].as_str().is_some_and(|m| m.contains(message))
    })
}

/// 5: the static pod's mirror appears with its owner reference to the Node; deleted with
/// kubectl it comes back within seconds (the static pod untouched); the manifest removed,
/// the mirror goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd), containerd and root: run by scripts/test.sh"]
async fn a_static_pods_mirror_appears_comes_back_and_goes() {
    let cluster = Cluster::start("mirror");
    let mut node = Node::start("mirror");
    let web = pod(
        "web",
        "",
        &[],
        &[container("main", &node.busybox, "sleep 100000")],
    );
    node.write("web.yaml", &web);
    start(&cluster, &mut node);
    let name = format!("web-{NODE}");
    let running = node.wait_running(&name, "main", 60).await;

    let node_uid = eventually(30, "the Node registered", || {
        cluster.get_json(&["node", NODE])?["metadata"]["uid"]
            .as_str()
            .map(str::to_owned)
    });
    let mirror = eventually(30, "the mirror pod in the API", || {
        cluster.get_json(&["pod", &name, "-n", "default"])
    });
    let annotations = &mirror["metadata"]["annotations"];
    println!("mirror annotations: {annotations}");
    assert_eq!(
        annotations["kubernetes.io/config.mirror"], annotations["kubernetes.io/config.hash"],
        "{mirror}"
    );
    assert_eq!(annotations["kubernetes.io/config.source"], "file");
    assert!(annotations["kubernetes.io/config.seen"].is_string());
    assert_eq!(mirror["spec"]["nodeName"], NODE);
    let owner = &mirror["metadata"]["ownerReferences"][0];
    assert_eq!(owner["apiVersion"], "v1", "{owner}");
    assert_eq!(owner["kind"], "Node");
    assert_eq!(owner["name"], NODE);
    assert_eq!(owner["uid"], node_uid.as_str());
    assert_eq!(owner["controller"], true);
    let listed = cluster.kubectl(&["get", "pods", "-A"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    println!("{listed}");
    assert!(listed.contains(&name), "{listed}");

    // kubectl delete of the mirror: a new one (another uid) within seconds.
    let old_uid = mirror["metadata"]["uid"].clone();
    let deleted_at = Instant::now();
    let out = cluster.kubectl(&["delete", "pod", &name, "-n", "default", "--wait=false"]);
    assert!(out.status.success(), "{out:?}");
    eventually(15, "the mirror back with a new uid", || {
        let back = cluster.get_json(&["pod", &name, "-n", "default"])?;
        (back["metadata"]["uid"] != old_uid && back["metadata"]["deletionTimestamp"].is_null())
            .then_some(())
    });
    let took = deleted_at.elapsed().as_secs_f64();
    println!("FIGURE mirror pod back after kubectl delete: {took:.2} s (goal: within seconds)");
    assert!(took < 10.0, "{took} s");
    // The static pod itself was not touched.
    let after = node.wait_running(&name, "main", 5).await;
    assert_eq!(
        after.status.id, running.status.id,
        "the static pod's container restarted"
    );

    // The manifest removed: the mirror goes.
    node.remove("web.yaml");
    eventually(30, "the mirror removed", || {
        cluster
            .get_json(&["pod", &name, "-n", "default"])
            .is_none()
            .then_some(())
    });
    node.finish();
}

/// 7: the events of a static pod that starts (Pulled, Created, Started), one whose image
/// cannot be pulled (Pulling, Failed, BackOff), one with `imagePullPolicy: Never` and no
/// image (ErrImageNeverPull), a crash loop (BackOff written as a count increment of one
/// event, not new events), and Killing when the manifest is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd), containerd and root: run by scripts/test.sh"]
async fn pod_events_are_written_and_a_crash_loop_counts_up() {
    let cluster = Cluster::start("podevents");
    let mut node = Node::start("podevents");
    let busybox = node.busybox.clone();
    node.write(
        "ok.yaml",
        &pod(
            "ok",
            "",
            &[],
            &[container("main", &busybox, "sleep 100000")],
        ),
    );
    node.write(
        "crash.yaml",
        &pod("crash", "", &[], &[container("main", &busybox, "exit 1")]),
    );
    node.write(
        "nopull.yaml",
        &pod(
            "nopull",
            "",
            &[],
            &["  - name: main\n    image: 127.0.0.1:1/absent:1\n".to_string()],
        ),
    );
    node.write(
        "never.yaml",
        &pod(
            "never",
            "",
            &[],
            &[
                "  - name: main\n    image: absent.invalid/none:1\n    imagePullPolicy: Never\n"
                    .to_string(),
            ],
        ),
    );
    start(&cluster, &mut node);
    let ok = format!("ok-{NODE}");
    let crash = format!("crash-{NODE}");

    let events = eventually(60, "the events of a pod that starts", || {
        let events = events_of(&cluster, &ok);
        (has(&events, "Pulled", "already present on machine")
            && has(&events, "Created", "Created container main")
            && has(&events, "Started", "Started container main"))
        .then_some(events)
    });
    let started = events
        .iter()
        .find(|e| e["reason"] == "Started")
        .cloned()
        .unwrap_or_default();
    println!("{started}");
    assert_eq!(started["involvedObject"]["kind"], "Pod");
    assert_eq!(started["involvedObject"]["apiVersion"], "v1");
    assert_eq!(
        started["involvedObject"]["fieldPath"],
        "spec.containers{main}"
    );
    assert_eq!(started["source"]["component"], "kubelet");
    assert_eq!(started["source"]["host"], NODE);
    assert_eq!(started["type"], "Normal");

    let nopull = format!("nopull-{NODE}");
    eventually(60, "the events of an image that cannot be pulled", || {
        let events = events_of(&cluster, &nopull);
        (has(&events, "Pulling", "Pulling image \"127.0.0.1:1/absent:1\"")
            && has(
                &events,
                "Failed",
                "Failed to pull image \"127.0.0.1:1/absent:1\"",
            )
            && has(&events, "Failed", "Error: ErrImagePull"))
        .then_some(())
    });
    let never = format!("never-{NODE}");
    eventually(30, "ErrImageNeverPull", || {
        let events = events_of(&cluster, &never);
        (has(
            &events,
            "ErrImageNeverPull",
            "Container image \"absent.invalid/none:1\" is not present with pull policy of Never",
        ) && has(&events, "Failed", "Error: ErrImageNeverPull"))
        .then_some(())
    });

    // The crash loop: BackOff, then repeats counted on the same objects.
    let crash_events = eventually(60, "BackOff counted up", || {
        let events = events_of(&cluster, &crash);
        let backoff = events.iter().find(|e| e["reason"] == "BackOff")?;
        let started = events.iter().find(|e| e["reason"] == "Started")?;
        (backoff["count"].as_i64()? >= 2 && started["count"].as_i64()? >= 2).then_some(events)
    });
    let objects = crash_events.len();
    let total: i64 = crash_events
        .iter()
        .map(|e| e["count"].as_i64().unwrap_or(1))
        .sum();
    for e in &crash_events {
        println!("{} x{}: {}", e["reason"], e["count"], e["message"]);
    }
    println!("FIGURE crash loop: {total} events recorded as {objects} Event objects");
    let backoff = crash_events
        .iter()
        .find(|e| e["reason"] == "BackOff")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        backoff["message"],
        format!(
            "Back-off restarting failed container main in pod {crash}_default({})",
            backoff["involvedObject"]["uid"]
                .as_str()
                .unwrap_or_default()
        )
    );
    assert_eq!(backoff["type"], "Warning");
    // Messages name the spec's image, not the image id a restart runs.
    assert!(
        has(
            &crash_events,
            "Pulled",
            &format!("Container image \"{busybox}\" already present")
        ),
        "{crash_events:?}"
    );
    // Pulled, Created, Started, BackOff, and the sandbox's MissingClusterDNS (no
    // --cluster-dns here, as upstream records it): one object each, repeats are counts.
    assert!(objects <= 5, "{crash_events:?}");
    assert!(total > i64::try_from(objects).unwrap_or(0));

    // Removal: Killing.
    node.remove("ok.yaml");
    eventually(30, "Killing on removal", || {
        has(
            &events_of(&cluster, &ok),
            "Killing",
            "Stopping container main",
        )
        .then_some(())
    });
    node.finish();
}
