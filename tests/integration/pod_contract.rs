//! The Pod API's promises (issue 32), checked as upstream's e2e specs check them, against
//! the real v1.26.1 control plane and containerd: readiness gates (`pods.go`, "should
//! support pod readiness gates"), init containers' status (`init_container.go`), the
//! readiness probe run at once when the startup probe succeeds (`container_probe.go`,
//! "should be ready immediately after startupProbe succeeds"), `activeDeadlineSeconds`
//! (`pods.go`), `dnsConfig` (`dns.go`) and the DNS limits' events, RuntimeClass with
//! its overhead (`runtimeclass.go`), `setHostnameAsFQDN`, `subPathExpr` (`expansion.go`).
//! One control plane, node and rkubelet serve every case. Missing peers fail the test.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::api_pods::{events_of, eventually, pod};
use crate::common::cluster::{Cluster, ClusterOptions};
use crate::common::node::NODE;

fn condition(pod: &Value, type_: &str) -> (String, String, String) {
    let found = pod["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(Value::Null);
    let text = |k: &str| found[k].as_str().unwrap_or_default().to_owned();
    (text("status"), text("reason"), text("message"))
}

/// Sets a condition in the pod's status as a controller does (a strategic-merge patch of
/// `pods/status`, merged by type).
fn set_condition(cluster: &Cluster, pod: &str, type_: &str, status: &str) {
    let patch =
        format!(r#"{{"status":{{"conditions":[{{"type":"{type_}","status":"{status}"}}]}}}}"#);
    let out = cluster.kubectl(&[
        "patch",
        "pod",
        pod,
        "--subresource=status",
        "--type=strategic",
        "-p",
        &patch,
    ]);
    assert!(
        out.status.success(),
        "kubectl patch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ready(cluster: &Cluster, name: &str) -> Option<(String, String, String)> {
    pod(cluster, name).map(|p| condition(&p, "Ready"))
}

/// A pod bound to the node whose one container sleeps; `extra_spec` lines go in its spec.
fn sleeper(name: &str, image: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n{extra_spec}  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n"
    )
}

/// Upstream's `expansion.go` pod: container `app` with `env` (YAML list items), an
/// emptyDir `workdir1` mounted by `mounts`, running `command`; `restartPolicy: Never`.
fn expansion_pod(name: &str, image: &str, env: &str, mounts: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{notmysubpath: mypath}}\nspec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  restartPolicy: Never\n  volumes:\n  - {{name: workdir1, emptyDir: {{}}}}\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {command:?}]\n    env:\n{env}    volumeMounts:\n{mounts}"
    )
}

/// The reason and message the pod's one container waits with.
fn waiting(cluster: &Cluster, name: &str) -> Option<(String, String)> {
    let p = pod(cluster, name)?;
    let w = &p["status"]["containerStatuses"][0]["state"]["waiting"];
    let text = |k: &str| w[k].as_str().unwrap_or_default().to_owned();
    w.is_object().then(|| (text("reason"), text("message")))
}

/// Waits for the pod to be ended for its active deadline, as upstream ends it: `Failed`,
/// its reason and message, the event, and no container left running.
async fn ended_by_deadline(
    cluster: &Cluster,
    node: &crate::common::node::Node,
    name: &str,
    secs: u64,
) {
    let p = eventually(
        secs,
        &format!("pod {name} Failed past its deadline"),
        || pod(cluster, name).filter(|p| p["status"]["phase"] == "Failed"),
    );
    let status = &p["status"];
    assert_eq!(status["reason"], "DeadlineExceeded", "{status}");
    assert_eq!(
        status["message"], "Pod was active on the node longer than the specified deadline",
        "{status}"
    );
    eventually(30, &format!("pod {name}'s DeadlineExceeded event"), || {
        events_of(cluster, name)
            .iter()
            .any(|(type_, reason, _)| type_ == "Normal" && reason == "DeadlineExceeded")
            .then_some(())
    });
    assert!(
        node.running(name, "app").await.is_none(),
        "{name}'s container still runs"
    );
}

/// The memory limit of the pod cgroup of `uid` (cgroup v1's memory hierarchy, either
/// driver's naming); `None` when it is not found.
fn pod_memory_limit(uid: &str) -> Option<i64> {
    let cgroupfs = format!("pod{uid}");
    let systemd = format!("pod{}.slice", uid.replace('-', "_"));
    let mut found = None;
    crate::common::node::walk_dirs(Path::new("/sys/fs/cgroup/memory"), 6, &mut |dir| {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if found.is_none() && (name == cgroupfs || name.ends_with(&systemd)) {
            found = std::fs::read_to_string(dir.join("memory.limit_in_bytes"))
                .ok()
                .and_then(|t| t.trim().parse().ok());
        }
    });
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane (kube-apiserver, etcd), containerd and root: run by scripts/test.sh"]
async fn the_pod_api_promises_hold() {
    // The node's resolver: one nameserver, so a pod's own three exceed the limit.
    let resolv = tempfile::tempdir().expect("temp dir");
    let resolv_conf = resolv.path().join("resolv.conf");
    std::fs::write(&resolv_conf, "nameserver 192.0.2.53\n").expect("resolv.conf");
    let (cluster, mut node) = crate::common::api_pods::start(
        "podcontract",
        ClusterOptions::default(),
        &[
            "--cluster-domain=cluster.local",
            &format!("--resolv-conf={}", resolv_conf.display()),
        ],
    );
    let image = node.busybox.clone();
    // RuntimeClasses (upstream's `runtimeclass.go`): one whose handler the private
    // containerd has (scripts/test-env/containerd-up.sh), with an overhead the API
    // server's admission copies into its pods, and one whose handler it lacks.
    cluster.apply(
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: alt}\nhandler: rkubelet-alt\noverhead:\n  podFixed: {cpu: 100m, memory: 16Mi}\n---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: unconfigured}\nhandler: rkubelet-missing\n",
    );
    let limited = |name: &str, extra_spec: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n{extra_spec}  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"hostname; sleep 3600\"]\n    resources: {{limits: {{cpu: 200m, memory: 64Mi}}}}\n"
        )
    };
    cluster.apply(&limited("classy", "  runtimeClassName: alt\n"));
    cluster.apply(&limited("unhandled", "  runtimeClassName: unconfigured\n"));
    cluster.apply(&limited(
        "fqdn",
        "  hostname: web\n  subdomain: db\n  setHostnameAsFQDN: true\n",
    ));
    // A static pod of a class the API server does not know (its admission refuses such
    // API pods): the kubelet's own lookup fails it.
    node.write(
        "absent.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: absent\nspec:\n  runtimeClassName: absent\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n"
        ),
    );
    let gates = ["k8s.io/test-condition1", "k8s.io/test-condition2"];
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gated\nspec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n  readinessGates:\n  - conditionType: {}\n  - conditionType: {}\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n",
        gates[0], gates[1]
    ));
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: initialized\nspec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n  initContainers:\n  - name: init\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"true\"]\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n"
    ));
    // Upstream's startup case, shortened: the startup probe passes about 3 s after the
    // start; readiness's period (60 s) is far longer than the bound checked below.
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: startup\nspec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"echo ok >/tmp/health; sleep 3; echo ok >/tmp/startup; sleep 3600\"]\n    readinessProbe:\n      exec: {{command: [\"cat\", \"/tmp/health\"]}}\n      periodSeconds: 60\n    startupProbe:\n      exec: {{command: [\"cat\", \"/tmp/startup\"]}}\n      periodSeconds: 1\n      failureThreshold: 60\n"
    ));

    // Upstream's `dns.go`, "should support configurable pod DNS nameservers".
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: dns\nspec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  dnsPolicy: None\n  dnsConfig:\n    nameservers: [203.0.113.53]\n    searches: [resolv.conf.local]\n    options:\n    - {{name: ndots, value: \"2\"}}\n    - {{name: edns0}}\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"cat /etc/resolv.conf; sleep 3600\"]\n"
    ));
    // Upstream's `expansion.go`: subPathExpr from the environment; `..` and an absolute
    // path refused; a failing expansion that an update of the pod makes valid.
    let pod_name_env = |value: &str| format!("    - {{name: POD_NAME, value: {value:?}}}\n");
    let sub_path_mount =
        "    - {name: workdir1, mountPath: /logscontainer, subPathExpr: $(POD_NAME)}\n";
    cluster.apply(&expansion_pod(
        "subpath-ok",
        &image,
        &pod_name_env("subpath-ok"),
        &format!("{sub_path_mount}    - {{name: workdir1, mountPath: /testcontainer}}\n"),
        "test -d /testcontainer/subpath-ok",
    ));
    cluster.apply(&expansion_pod(
        "subpath-dots",
        &image,
        &pod_name_env(".."),
        sub_path_mount,
        "true",
    ));
    cluster.apply(&expansion_pod(
        "subpath-absolute",
        &image,
        &pod_name_env("/tmp"),
        sub_path_mount,
        "true",
    ));
    cluster.apply(&expansion_pod(
        "subpath-later",
        &image,
        "    - {name: POD_NAME, value: foo}\n    - name: ANNOTATION\n      valueFrom: {fieldRef: {apiVersion: v1, fieldPath: \"metadata.annotations['mysubpath']\"}}\n",
        "    - {name: workdir1, mountPath: /subpath_mount, subPathExpr: $(ANNOTATION)/$(POD_NAME)}\n    - {name: workdir1, mountPath: /volume_mount}\n",
        "test -d /volume_mount/mypath/foo && sleep 3600",
    ));
    cluster.apply(&sleeper(
        "dns-limits",
        &image,
        "  dnsPolicy: Default\n  dnsConfig:\n    nameservers: [203.0.113.1, 203.0.113.2, 203.0.113.3]\n",
    ));
    cluster.apply(&sleeper("deadline", &image, "  activeDeadlineSeconds: 8\n"));
    cluster.apply(&sleeper("deadline-added", &image, ""));

    // Readiness gates: containers ready, the pod not, until every gate's condition is
    // True; following each change of a condition within upstream's 10 s tolerance.
    let gated = eventually(60, "pod gated Running", || {
        pod(&cluster, "gated").filter(|p| p["status"]["phase"] == "Running")
    });
    eventually(30, "gated: containers ready", || {
        let p = pod(&cluster, "gated")?;
        (condition(&p, "ContainersReady").0 == "True").then_some(())
    });
    let (status, reason, message) = eventually(10, "gated: Ready False", || {
        ready(&cluster, "gated").filter(|r| r.0 == "False")
    });
    assert_eq!(status, "False", "{}", gated["status"]);
    assert_eq!(reason, "ReadinessGatesNotReady");
    assert_eq!(
        message,
        format!(
            "corresponding condition of pod readiness gate \"{}\" does not exist., corresponding condition of pod readiness gate \"{}\" does not exist.",
            gates[0], gates[1]
        )
    );
    set_condition(&cluster, "gated", gates[0], "True");
    let want = format!(
        "corresponding condition of pod readiness gate \"{}\" does not exist.",
        gates[1]
    );
    eventually(10, "gated: only the second gate missing", || {
        ready(&cluster, "gated").filter(|r| r.0 == "False" && r.2 == want)
    });
    set_condition(&cluster, "gated", gates[1], "True");
    eventually(10, "gated: Ready once both gates are True", || {
        ready(&cluster, "gated").filter(|r| r.0 == "True")
    });
    set_condition(&cluster, "gated", gates[0], "False");
    let want = format!(
        "the status of pod readiness gate \"{}\" is not \"True\", but False",
        gates[0]
    );
    eventually(10, "gated: not Ready once a gate is False again", || {
        ready(&cluster, "gated")
            .filter(|r| r.0 == "False" && r.1 == "ReadinessGatesNotReady" && r.2 == want)
    });
    // The controller's conditions stay as it set them.
    let p = pod(&cluster, "gated").expect("pod gated");
    assert_eq!(condition(&p, gates[0]).0, "False");
    assert_eq!(condition(&p, gates[1]).0, "True");

    // Init containers: one that succeeded is ready, the pod Initialized.
    let p = eventually(60, "pod initialized Ready", || {
        pod(&cluster, "initialized").filter(|p| condition(p, "Ready").0 == "True")
    });
    let init = &p["status"]["initContainerStatuses"][0];
    assert_eq!(init["state"]["terminated"]["exitCode"], 0, "{init}");
    assert_eq!(init["state"]["terminated"]["reason"], "Completed", "{init}");
    assert_eq!(init["ready"], true, "{init}");
    assert_eq!(condition(&p, "Initialized").0, "True");

    // Startup: ready moments after the startup probe passed, not a readiness period later.
    let started = eventually(60, "startup: container started", || {
        let p = pod(&cluster, "startup")?;
        (p["status"]["containerStatuses"][0]["started"] == true).then(Instant::now)
    });
    eventually(30, "startup: Ready", || {
        ready(&cluster, "startup").filter(|r| r.0 == "True")
    });
    let ready_in = started.elapsed();
    println!("startup: ready {ready_in:?} after the startup probe passed (upstream's bound: 25 s)");
    assert!(
        ready_in < Duration::from_secs(10),
        "ready {ready_in:?} after the startup probe passed: the readiness probe waited for its period"
    );

    // dnsConfig under dnsPolicy None: the pod's resolv.conf is what it asked for.
    // (Read from the container's log on the node: this node's 10250 API has no client
    // CA for the API server's `kubectl logs`.)
    for line in [
        "nameserver 203.0.113.53",
        "search resolv.conf.local",
        "options ndots:2 edns0",
    ] {
        eventually(60, &format!("pod dns's resolv.conf says {line:?}"), || {
            node.log_line(line)
        });
    }
    let (log, _) = node
        .log_line("nameserver 203.0.113.53")
        .expect("pod dns's log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        text.matches("nameserver").count(),
        1,
        "only the pod's nameserver: {text}"
    );

    // subPathExpr: expanded into the volume; refused with upstream's messages.
    eventually(60, "pod subpath-ok Succeeded", || {
        pod(&cluster, "subpath-ok").filter(|p| p["status"]["phase"] == "Succeeded")
    });
    for (name, message) in [
        (
            "subpath-dots",
            "unable to provision SubPath `..`: must not contain '..'",
        ),
        (
            "subpath-absolute",
            "error SubPath `/tmp` must not be an absolute path",
        ),
        ("subpath-later", "missing value for ANNOTATION"),
    ] {
        let (reason, got) = eventually(60, &format!("pod {name} held"), || {
            waiting(&cluster, name).filter(|w| w.0 == "CreateContainerConfigError")
        });
        assert!(got.contains(message), "{name}: {reason}: {got}");
    }
    let out = cluster.kubectl(&["annotate", "pod", "subpath-later", "mysubpath=mypath"]);
    assert!(out.status.success(), "{out:?}");
    eventually(60, "pod subpath-later Running once annotated", || {
        pod(&cluster, "subpath-later").filter(|p| p["status"]["phase"] == "Running")
    });

    // Upstream's DNS configurer's events: the node's nameserver and the pod's three are
    // one too many; ClusterFirst without `--cluster-dns` falls back to the node's.
    let dns_event = |name: &str, reason: &str| {
        eventually(60, &format!("pod {name}'s {reason} event"), || {
            events_of(&cluster, name)
                .into_iter()
                .find(|(type_, r, _)| type_ == "Warning" && r == reason)
                .map(|(_, _, message)| message)
        })
    };
    assert_eq!(
        dns_event("dns-limits", "DNSConfigForming"),
        "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 192.0.2.53 203.0.113.1 203.0.113.2"
    );
    let missing = dns_event("deadline-added", "MissingClusterDNS");
    assert!(
        missing.starts_with("pod: \"deadline-added_default(")
            && missing.ends_with(")\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy."),
        "{missing}"
    );

    // RuntimeClass: the handler the class names runs the sandbox, the class's overhead
    // (in the spec by admission) sizes the pod's cgroup; a handler the runtime lacks and
    // a class that does not exist fail sandbox creation with upstream's event.
    let classy = eventually(60, "pod classy Running", || {
        pod(&cluster, "classy").filter(|p| p["status"]["phase"] == "Running")
    });
    assert_eq!(
        classy["spec"]["overhead"]["memory"], "16Mi",
        "{}",
        classy["spec"]
    );
    let sandboxes = node.sandboxes("classy").await;
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    assert_eq!(sandboxes[0].runtime_handler, "rkubelet-alt");
    let uid = classy["metadata"]["uid"].as_str().unwrap_or_default();
    let limit = pod_memory_limit(uid).expect("the pod's memory cgroup");
    assert_eq!(
        limit,
        (64 + 16) << 20,
        "the pod cgroup's limit holds the overhead"
    );
    for (name, want) in [
        ("unhandled", "rkubelet-missing"),
        ("absent-n1", "runtimeclass.node.k8s.io \"absent\" not found"),
    ] {
        let (_, _, message) = eventually(60, &format!("{name}'s FailedCreatePodSandBox"), || {
            events_of(&cluster, name)
                .into_iter()
                .find(|(type_, reason, _)| type_ == "Warning" && reason == "FailedCreatePodSandBox")
        });
        assert!(
            message.starts_with("Failed to create pod sandbox: ") && message.contains(want),
            "{name}: {message}"
        );
        assert!(
            node.sandboxes(name).await.is_empty(),
            "{name} got a sandbox"
        );
    }

    // setHostnameAsFQDN: the container's hostname is the pod's FQDN.
    eventually(60, "pod fqdn's hostname", || {
        node.log_line("web.db.default.svc.cluster.local")
    });

    // activeDeadlineSeconds (upstream's `pods.go`, "should be updated" and
    // `activeDeadlineSeconds` cases): killed and Failed once past it, also when it is
    // added to a running pod, also when it passed while rkubelet was down.
    ended_by_deadline(&cluster, &node, "deadline", 30).await;
    eventually(30, "pod deadline-added Running", || {
        pod(&cluster, "deadline-added").filter(|p| p["status"]["phase"] == "Running")
    });
    let out = cluster.kubectl(&[
        "patch",
        "pod",
        "deadline-added",
        "--type=strategic",
        "-p",
        r#"{"spec":{"activeDeadlineSeconds":1}}"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ended_by_deadline(&cluster, &node, "deadline-added", 15).await;

    cluster.apply(&sleeper(
        "deadline-down",
        &image,
        "  activeDeadlineSeconds: 6\n",
    ));
    eventually(30, "pod deadline-down Running", || {
        pod(&cluster, "deadline-down").filter(|p| p["status"]["phase"] == "Running")
    });
    let daemon = node.daemon.take();
    if let Some(mut daemon) = daemon {
        assert!(daemon.terminate_within(Duration::from_secs(15)).is_some());
    }
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(
        node.running("deadline-down", "app").await.is_some(),
        "rkubelet's stop left the pod running, as upstream's"
    );
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    node.kubelet_with(&[&format!("--kubeconfig={}", kubeconfig.display())]);
    ended_by_deadline(&cluster, &node, "deadline-down", 15).await;

    node.remove("absent.yaml");
    let names = [
        "classy",
        "unhandled",
        "fqdn",
        "dns",
        "dns-limits",
        "subpath-ok",
        "subpath-dots",
        "subpath-absolute",
        "subpath-later",
        "gated",
        "initialized",
        "startup",
        "deadline",
        "deadline-added",
        "deadline-down",
    ];
    for name in names {
        let out = cluster.kubectl(&["delete", "pod", name, "--grace-period=1", "--wait=false"]);
        assert!(out.status.success());
    }
    eventually(60, "the pods deleted", || {
        names
            .iter()
            .all(|n| pod(&cluster, n).is_none())
            .then_some(())
    });
    node.finish();
}
