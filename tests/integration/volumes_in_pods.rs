//! Volumes and environment of API pods as the workload sees them (issue 13), against a
//! real private control plane (kube-apiserver, etcd, and the controller manager, which
//! creates the `default` service accounts and publishes `kube-root-ca.crt`), a private
//! containerd and rkubelet: what a container reads, through the CRI's `ExecSync`, and
//! what `kubectl get pod -o json` shows. Missing peers fail the tests.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::api_pods::{eventually, phase, pod, start};
use crate::common::cluster::{Cluster, ClusterOptions};
use crate::common::node::{Node, NODE, POLL};
use serde_json::Value;

/// `sh -c script` in container `container` of pod `pod`: (stdout, exit code).
async fn exec(node: &Node, pod: &str, container: &str, script: &str) -> (String, i32) {
    node.exec_sh(pod, container, script).await
}

/// What `script` prints in the container, asserting it succeeded.
async fn read(node: &Node, pod: &str, script: &str) -> String {
    let (out, code) = exec(node, pod, "app", script).await;
    assert_eq!(code, 0, "{script}: {out}");
    out
}

/// The default service account and the CA ConfigMap the controller manager makes.
fn wait_for_controller_objects(cluster: &Cluster) {
    for args in [
        ["serviceaccount", "default"],
        ["configmap", "kube-root-ca.crt"],
    ] {
        eventually(
            60,
            &format!("{args:?} made by the controller manager"),
            || cluster.get_json(&args),
        );
    }
}

fn kubectl_ok(cluster: &Cluster, args: &[&str]) -> String {
    let out = cluster.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The mountinfo line of `path` inside the container.
async fn mount_line(node: &Node, pod: &str, path: &str) -> String {
    read(
        node,
        pod,
        &format!("awk '$5 == \"{path}\"' /proc/self/mountinfo"),
    )
    .await
}

fn workload(image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: app-config}}
data: {{greeting: hello, colour: blue, 1st: skipped}}
---
apiVersion: v1
kind: Secret
metadata: {{name: app-secret}}
stringData: {{password: hunter2}}
---
apiVersion: v1
kind: Service
metadata: {{name: my-db}}
spec:
  ports: [{{name: sql, port: 5432, protocol: TCP}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: workload
  labels: {{app: w, tier: back}}
spec:
  nodeName: {NODE}
  terminationGracePeriodSeconds: 1
  hostAliases: [{{ip: 10.1.2.3, hostnames: [foo.local, bar.local]}}]
  containers:
  - name: app
    image: {image}
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    resources: {{limits: {{cpu: 500m, memory: 64Mi}}}}
    env:
    - {{name: POD_NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
    - {{name: POD_NS, valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}}}
    - {{name: NODE_NAME, valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}}}
    - {{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
    - {{name: CPU_LIMIT, valueFrom: {{resourceFieldRef: {{resource: limits.cpu, divisor: 1m}}}}}}
    - {{name: MEM_LIMIT, valueFrom: {{resourceFieldRef: {{resource: limits.memory, divisor: 1Mi}}}}}}
    - {{name: PASSWORD, valueFrom: {{secretKeyRef: {{name: app-secret, key: password}}}}}}
    - {{name: GREETING_TWICE, value: "$(CFG_greeting)-$(CFG_greeting)"}}
    envFrom:
    - {{prefix: CFG_, configMapRef: {{name: app-config}}}}
    - {{configMapRef: {{name: app-config}}}}
    volumeMounts:
    - {{name: cfg, mountPath: /etc/cfg}}
    - {{name: cfg, mountPath: /etc/pinned/greeting, subPath: greeting}}
    - {{name: sec, mountPath: /etc/sec}}
    - {{name: info, mountPath: /etc/info}}
    - {{name: mem, mountPath: /mem}}
  volumes:
  - {{name: cfg, configMap: {{name: app-config, items: [{{key: greeting, path: greeting, mode: 0640}}]}}}}
  - {{name: sec, secret: {{secretName: app-secret, defaultMode: 0400}}}}
  - name: info
    downwardAPI:
      items:
      - {{path: name, fieldRef: {{fieldPath: metadata.name}}}}
      - {{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}
      - {{path: cpu, resourceFieldRef: {{containerName: app, resource: limits.cpu, divisor: 1m}}}}
  - {{name: mem, emptyDir: {{medium: Memory, sizeLimit: 16Mi}}}}
"#
    )
}

/// A pod whose container runs as the user and groups `security` (a pod security
/// context's fields) sets, with the workload's secret at `/etc/sec` (`0440`) and a
/// projected token and ConfigMap key at `/etc/proj` (`0400`).
fn owned_files(image: &str, name: &str, security: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeName: {NODE}
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  securityContext: {{{security}}}
  containers:
  - name: app
    image: {image}
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    volumeMounts:
    - {{name: sec, mountPath: /etc/sec}}
    - {{name: proj, mountPath: /etc/proj}}
  volumes:
  - {{name: sec, secret: {{secretName: app-secret, defaultMode: 0440}}}}
  - name: proj
    projected:
      defaultMode: 0400
      sources:
      - serviceAccountToken: {{path: token, expirationSeconds: 3600}}
      - configMap: {{name: app-config, items: [{{key: greeting, path: greeting}}]}}
"#
    )
}

/// Must-shows 1, 2, 3, 4, 6 (memory emptyDir) and 7 (hostAliases) in one pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd, control plane (kube-apiserver, etcd, controller-manager): run by scripts/test.sh"]
async fn a_workload_sees_its_token_config_secret_downward_api_and_env() {
    let sync_secs = 5;
    let (cluster, mut node) = start(
        "volpods-work",
        ClusterOptions::default(),
        &[&format!("--sync-frequency={sync_secs}s")],
    );
    wait_for_controller_objects(&cluster);
    cluster.apply(&workload(&node.busybox));
    cluster.apply(&owned_files(
        &node.busybox,
        "owned",
        "fsGroup: 1001, runAsUser: 1000",
    ));
    cluster.apply(&owned_files(&node.busybox, "user-owned", "runAsUser: 1000"));
    let running = eventually(60, "pod workload Running", || {
        let p = pod(&cluster, "workload")?;
        (p["status"]["phase"] == "Running").then_some(p)
    });
    let started = Instant::now();

    // 1: the kube-api-access volume admission added.
    let sa = "/var/run/secrets/kubernetes.io/serviceaccount";
    let token = read(&node, "workload", &format!("cat {sa}/token")).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let review = dir.path().join("review.json");
    std::fs::write(
        &review,
        serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}})
        .to_string(),
    )
    .expect("review");
    let reviewed: Value = serde_json::from_str(&kubectl_ok(
        &cluster,
        &["create", "-f", &review.display().to_string(), "-o", "json"],
    ))
    .expect("json");
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    assert_eq!(
        reviewed["status"]["user"]["username"],
        "system:serviceaccount:default:default"
    );
    let ca = read(&node, "workload", &format!("cat {sa}/ca.crt")).await;
    let cluster_ca = std::fs::read_to_string(cluster.ca_cert()).expect("cluster CA");
    assert_eq!(ca.trim(), cluster_ca.trim());
    assert_eq!(
        read(&node, "workload", &format!("cat {sa}/namespace")).await,
        "default"
    );

    // 2: the configMap file with its mode; the subPath mount.
    assert_eq!(
        read(
            &node,
            "workload",
            "cat /etc/cfg/greeting; stat -L -c %a /etc/cfg/greeting"
        )
        .await,
        "hello640\n"
    );
    assert_eq!(
        read(&node, "workload", "cat /etc/pinned/greeting").await,
        "hello"
    );
    // 3: the secret on tmpfs with its defaultMode.
    assert_eq!(
        read(
            &node,
            "workload",
            "cat /etc/sec/password; stat -L -c %a /etc/sec/password"
        )
        .await,
        "hunter2400\n"
    );
    let sec = mount_line(&node, "workload", "/etc/sec").await;
    assert!(sec.contains(" - tmpfs "), "{sec}");
    // 4: downward API files and env.
    assert_eq!(
        read(&node, "workload", "cat /etc/info/name").await,
        "workload"
    );
    assert_eq!(
        read(&node, "workload", "cat /etc/info/labels").await,
        "app=\"w\"\ntier=\"back\""
    );
    assert_eq!(read(&node, "workload", "cat /etc/info/cpu").await, "500");
    let env = read(&node, "workload", "env").await;
    let var = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    };
    let pod_ip = running["status"]["podIP"].as_str().unwrap_or_default();
    for (name, want) in [
        ("POD_NAME", "workload"),
        ("POD_NS", "default"),
        ("NODE_NAME", NODE),
        ("POD_IP", pod_ip),
        ("CPU_LIMIT", "500"),
        ("MEM_LIMIT", "64"),
        ("PASSWORD", "hunter2"),
        ("CFG_greeting", "hello"),
        ("CFG_colour", "blue"),
        ("GREETING_TWICE", "hello-hello"),
    ] {
        assert_eq!(var(name).as_deref(), Some(want), "{name} in:\n{env}");
    }
    // A key that is no variable name is left out, with upstream's warning on the pod.
    assert_eq!(var("greeting").as_deref(), Some("hello"), "{env}");
    assert_eq!(var("CFG_1st").as_deref(), Some("skipped"), "{env}");
    assert!(!env.lines().any(|l| l.starts_with("1st=")), "{env}");
    let skipped = "Keys [1st] from the EnvFrom configMap default/app-config were skipped since they are considered invalid environment variable names.";
    eventually(
        30,
        "InvalidEnvironmentVariableNames event of pod workload",
        || {
            let events = cluster.get_json(&[
                "events",
                "--field-selector",
                "involvedObject.name=workload,reason=InvalidEnvironmentVariableNames",
            ])?;
            events["items"]
                .as_array()?
                .iter()
                .any(|e| e["message"] == skipped && e["type"] == "Warning")
                .then_some(())
        },
    );
    let kubernetes_ip = kubectl_ok(
        &cluster,
        &[
            "get",
            "svc",
            "kubernetes",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    let db_ip = kubectl_ok(
        &cluster,
        &["get", "svc", "my-db", "-o", "jsonpath={.spec.clusterIP}"],
    );
    assert_eq!(var("KUBERNETES_SERVICE_HOST"), Some(kubernetes_ip), "{env}");
    assert_eq!(var("KUBERNETES_SERVICE_PORT").as_deref(), Some("443"));
    assert_eq!(var("MY_DB_SERVICE_HOST"), Some(db_ip.clone()), "{env}");
    assert_eq!(var("MY_DB_SERVICE_PORT_SQL").as_deref(), Some("5432"));
    assert_eq!(
        var("MY_DB_PORT_5432_TCP"),
        Some(format!("tcp://{db_ip}:5432"))
    );
    // 6: the memory emptyDir is a tmpfs of 16 MiB.
    let mem = mount_line(&node, "workload", "/mem").await;
    assert!(
        mem.contains(" - tmpfs ") && mem.contains("size=16384k"),
        "{mem}"
    );
    let df = read(&node, "workload", "df -k /mem | tail -1").await;
    assert!(df.split_whitespace().nth(1) == Some("16384"), "{df}");
    // 7: hostAliases in the managed /etc/hosts, with the pod's own name and IP.
    let hosts = read(&node, "workload", "cat /etc/hosts").await;
    assert!(
        hosts.contains("# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"),
        "{hosts}"
    );
    assert!(hosts.contains(&format!("{pod_ip}\tworkload")), "{hosts}");

    // Issue 32: a non-root container reads its secret and projected files through its
    // fsGroup, as upstream's e2e checks them (secrets_volume.go and projected_secret.go,
    // "as non-root with defaultMode and fsGroup set"; service_accounts.go, "should set
    // ownership and permission when RunAsUser or FsGroup is present").
    for (pod, path, want) in [
        ("owned", "/etc/sec", "drwxr-sr-x 0 1001"),
        ("owned", "/etc/sec/password", "-r--r----- 0 1001"),
        ("owned", "/etc/proj/token", "-rw-r----- 1000 1001"),
        ("owned", "/etc/proj/greeting", "-r--r----- 0 1001"),
        ("user-owned", "/etc/proj/token", "-rw------- 1000 0"),
        ("user-owned", "/etc/proj/greeting", "-r-------- 0 0"),
    ] {
        assert_eq!(
            read(&node, pod, &format!("stat -L -c '%A %u %g' {path}")).await,
            format!("{want}\n"),
            "{pod}: {path}"
        );
    }
    assert_eq!(
        read(&node, "owned", "id -u; cat /etc/sec/password").await,
        "1000\nhunter2"
    );
    assert_eq!(
        read(&node, "owned", "cat /etc/proj/greeting").await,
        "hello"
    );
    for pod in ["owned", "user-owned"] {
        let token = read(&node, pod, "cat /etc/proj/token").await;
        assert_eq!(token.split('.').count(), 3, "{pod}'s token: {token}");
    }
    let (out, code) = exec(&node, "user-owned", "app", "cat /etc/proj/greeting").await;
    assert_ne!(
        code, 0,
        "without an fsGroup the 0400 file is root's alone: {out}"
    );

    // 2: an update reaches the volume within syncFrequency (plus the read), the subPath
    // mount keeps the old content.
    let _ = started;
    let edited = Instant::now();
    let patch = r#"{"data":{"greeting":"bonjour"}}"#;
    kubectl_ok(&cluster, &["patch", "configmap", "app-config", "-p", patch]);
    loop {
        let (now, _) = exec(&node, "workload", "app", "cat /etc/cfg/greeting").await;
        if now == "bonjour" {
            break;
        }
        assert!(
            edited.elapsed() < Duration::from_secs(sync_secs * 3 + 5),
            "update not seen after {:?}: {now}",
            edited.elapsed()
        );
        tokio::time::sleep(POLL).await;
    }
    println!(
        "FIGURE ConfigMap patch seen in the container's volume after {:.1} s (syncFrequency {sync_secs} s)",
        edited.elapsed().as_secs_f64()
    );
    assert_eq!(
        read(&node, "workload", "cat /etc/pinned/greeting").await,
        "hello"
    );
    assert_eq!(
        read(&node, "workload", "stat -L -c %a /etc/cfg/greeting").await,
        "640\n"
    );

    // The ConfigMap deleted under the running pod: its volume keeps the last contents
    // and the failed refresh is the pod's FailedMount event, as upstream's.
    kubectl_ok(&cluster, &["delete", "configmap", "app-config"]);
    let gone = "MountVolume.SetUp failed for volume \"cfg\" : configmap \"app-config\" not found";
    eventually(
        sync_secs * 3 + 30,
        "FailedMount event of the running pod",
        || {
            let events = cluster.get_json(&[
                "events",
                "--field-selector",
                "involvedObject.name=workload,reason=FailedMount",
            ])?;
            events["items"]
                .as_array()?
                .iter()
                .any(|e| e["message"] == gone)
                .then_some(())
        },
    );
    assert_eq!(
        read(&node, "workload", "cat /etc/cfg/greeting").await,
        "bonjour"
    );
    node.finish();
}

/// Must-shows 5, 6 (hostPath), 7 (termination message) and 9.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd, control plane (kube-apiserver, etcd, controller-manager): run by scripts/test.sh"]
async fn missing_objects_hold_pods_and_deleted_pods_leave_nothing() {
    let (cluster, mut node) = start(
        "volpods-life",
        ClusterOptions::default(),
        &["--sync-frequency=5s"],
    );
    wait_for_controller_objects(&cluster);
    let image = node.busybox.clone();
    let pod_yaml = |name: &str, script: &str, extra_container: &str, spec: &str| {
        let script = serde_json::to_string(script).expect("json");
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n{spec}  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n{extra_container}"
        )
    };
    // 5: a missing ConfigMap holds the container; creating it starts the pod.
    cluster.apply(&pod_yaml(
        "waiting",
        "sleep 3600",
        "    env: [{name: LATE, valueFrom: {configMapKeyRef: {name: late, key: k}}}]\n",
        "",
    ));
    let held = eventually(40, "CreateContainerConfigError", || {
        let p = pod(&cluster, "waiting")?;
        let w = &p["status"]["containerStatuses"][0]["state"]["waiting"];
        (w["reason"] == "CreateContainerConfigError").then_some(w.clone())
    });
    assert_eq!(held["message"], "configmap \"late\" not found", "{held}");
    let table = kubectl_ok(&cluster, &["get", "pod", "waiting"]);
    assert!(table.contains("CreateContainerConfigError"), "{table}");
    cluster.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late}\ndata: {k: v}\n");
    eventually(40, "pod waiting Running once its ConfigMap exists", || {
        (phase(&cluster, "waiting") == "Running").then_some(())
    });
    assert_eq!(read(&node, "waiting", "echo $LATE").await, "v\n");

    // 6: a hostPath of type File that is missing: FailedMount in upstream's words.
    cluster.apply(&pod_yaml(
        "nofile",
        "sleep 3600",
        "    volumeMounts: [{name: h, mountPath: /h}]\n",
        "  volumes: [{name: h, hostPath: {path: /nonexistent-rkubelet-file, type: File}}]\n",
    ));
    let message = "MountVolume.SetUp failed for volume \"h\" : hostPath type check failed: /nonexistent-rkubelet-file is not a file";
    eventually(40, "FailedMount event of pod nofile", || {
        let events = cluster.get_json(&[
            "events",
            "--field-selector",
            "involvedObject.name=nofile,reason=FailedMount",
        ])?;
        events["items"]
            .as_array()?
            .iter()
            .any(|e| e["message"] == message)
            .then_some(())
    });
    assert_eq!(phase(&cluster, "nofile"), "Pending");

    // 7: the termination message a container writes shows in its terminated state.
    cluster.apply(&pod_yaml(
        "farewell",
        "echo -n 'gone fishing' > /dev/termination-log; exit 3",
        "",
        "  restartPolicy: Never\n",
    ));
    let done = eventually(40, "pod farewell Failed", || {
        let p = pod(&cluster, "farewell")?;
        (p["status"]["phase"] == "Failed").then_some(p)
    });
    let terminated = &done["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["message"], "gone fishing", "{terminated}");
    assert_eq!(terminated["exitCode"], 3);
    // FallbackToLogsOnError: the log's tail when the file is empty and the exit failed.
    cluster.apply(&pod_yaml(
        "fallback",
        "echo last words; exit 2",
        "    terminationMessagePolicy: FallbackToLogsOnError\n",
        "  restartPolicy: Never\n",
    ));
    let done = eventually(40, "pod fallback Failed", || {
        let p = pod(&cluster, "fallback")?;
        (p["status"]["phase"] == "Failed").then_some(p)
    });
    let terminated = &done["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["message"], "last words\n", "{terminated}");

    // 9: deleted pods leave no folder and no tmpfs, also when rkubelet was SIGKILLed.
    let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: v}\n";
    cluster.apply(secret);
    let volumes = "    volumeMounts: [{name: s, mountPath: /s}, {name: m, mountPath: /m}]\n";
    let spec =
        "  volumes: [{name: s, secret: {secretName: s}}, {name: m, emptyDir: {medium: Memory}}]\n";
    for name in ["tidy", "killed"] {
        cluster.apply(&pod_yaml(name, "sleep 3600", volumes, spec));
    }
    let mut uids = Vec::new();
    for name in ["tidy", "killed"] {
        let p = eventually(60, "pod Running", || {
            let p = pod(&cluster, name)?;
            (p["status"]["phase"] == "Running").then_some(p)
        });
        uids.push(p["metadata"]["uid"].as_str().unwrap_or_default().to_owned());
    }
    let mounts_of = |uid: &str| {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(uid))
            .count()
    };
    assert!(mounts_of(&uids[0]) >= 3, "tmpfs mounts of pod tidy");
    kubectl_ok(&cluster, &["delete", "pod", "tidy", "--wait=false"]);
    eventually(30, "pod tidy gone from the API", || {
        pod(&cluster, "tidy").is_none().then_some(())
    });
    let tidy_dir = node.root.join("pods").join(&uids[0]);
    eventually(20, "pod tidy's folder and mounts gone", || {
        (!tidy_dir.exists() && mounts_of(&uids[0]) == 0).then_some(())
    });
    node.kill9();
    kubectl_ok(
        &cluster,
        &["delete", "pod", "killed", "--force", "--grace-period=0"],
    );
    // A folder of a pod that never reached the runtime (killed between its volume set-up
    // and its sandbox) is an orphan too.
    let stray = node
        .root
        .join("pods/0000-stray/volumes/kubernetes.io~empty-dir/x");
    std::fs::create_dir_all(&stray).expect("stray folder");
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    node.kubelet_with(&[
        &format!("--kubeconfig={}", kubeconfig.display()),
        "--sync-frequency=5s",
    ]);
    let killed_dir = node.root.join("pods").join(&uids[1]);
    eventually(
        40,
        "pod killed's folder and mounts gone after the restart",
        || (!killed_dir.exists() && mounts_of(&uids[1]) == 0).then_some(()),
    );
    eventually(20, "the stray folder gone", || {
        (!node.root.join("pods/0000-stray").exists()).then_some(())
    });
    assert_eq!(
        phase(&cluster, "waiting"),
        "Running",
        "a running pod's folder stays"
    );
    assert!(dir_of_running(&cluster, &node, "waiting"));
    node.finish();
}

fn dir_of_running(cluster: &Cluster, node: &Node, name: &str) -> bool {
    let uid = pod(cluster, name)
        .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_owned))
        .unwrap_or_default();
    Path::new(&node.root).join("pods").join(uid).exists()
}

/// The CRI messages of the pull, as the wire carries them (`runtime.v1`; only the fields
/// read here).
mod cri_wire {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PullImageRequest {
        #[prost(message, optional, tag = "1")]
        pub image: Option<ImageSpec>,
        #[prost(message, optional, tag = "2")]
        pub auth: Option<AuthConfig>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ImageSpec {
        #[prost(string, tag = "1")]
        pub image: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AuthConfig {
        #[prost(string, tag = "1")]
        pub username: String,
        #[prost(string, tag = "2")]
        pub password: String,
    }
}

/// Must-show 8 at the CRI boundary itself: a pod's `imagePullSecrets` (a
/// `kubernetes.io/dockerconfigjson` Secret with two registries) reach `PullImage` on the
/// wire as the `AuthConfig` of the image's registry. A CRI proxy between rkubelet and
/// containerd keeps the `PullImage` calls and answers them as a runtime that cannot reach
/// the registry (none is reachable here); the pod then waits in `ErrImagePull`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd, control plane (kube-apiserver, etcd): run by scripts/test.sh"]
async fn pull_secrets_reach_pull_image_on_the_wire_as_the_registrys_auth_config() {
    use crate::common::faults::{CriFaults, CriProxy};
    use base64::Engine;
    use prost::Message;

    let cluster = Cluster::start_with("volpods-pull", ClusterOptions::default());
    let mut node = Node::start("volpods-pull");
    let socket = std::path::PathBuf::from(format!(
        "/tmp/rkproxy-{}-volpods-pull.sock",
        std::process::id()
    ));
    let proxy = CriProxy::start(&socket, &node.ctrd.socket(), 5);
    proxy.set(CriFaults {
        capture: vec!["PullImage".into()],
        ..CriFaults::default()
    });
    node.endpoint = proxy.endpoint();
    let kubeconfig = cluster.node_kubeconfig(NODE, 30);
    node.kubelet_with(&[&format!("--kubeconfig={}", kubeconfig.display())]);
    eventually(30, "node registered", || cluster.get_json(&["node", NODE]));

    let config = serde_json::json!({"auths": {
        "other.example": {"username": "nobody", "password": "wrong"},
        "registry.rkubelet.test": {"username": "puller", "password": "s3cret"}
    }});
    let encoded = base64::engine::general_purpose::STANDARD.encode(config.to_string());
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: regcred\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {encoded}\n"
    ));
    let image = "registry.rkubelet.test/private/app:1";
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: private\nspec:\n  nodeName: {NODE}\n  automountServiceAccountToken: false\n  imagePullSecrets:\n  - name: regcred\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: Always\n"
    ));
    // The API server's node authorizer learns that the node may read the secret only
    // after the pod is bound: a first sync before that pulls without it, with upstream's
    // "Unable to retrieve some image pull secrets" warning, and the retry carries it.
    let request = eventually(
        90,
        "a PullImage call with an AuthConfig through the proxy",
        || {
            proxy
                .captured("PullImage")
                .iter()
                .filter_map(|call| cri_wire::PullImageRequest::decode(call.as_slice()).ok())
                .find(|request| request.auth.is_some())
        },
    );
    assert_eq!(
        request.image.map(|i| i.image).as_deref(),
        Some(image),
        "the image asked for"
    );
    let auth = request.auth.expect("an AuthConfig with the pull");
    assert_eq!(
        (auth.username.as_str(), auth.password.as_str()),
        ("puller", "s3cret"),
        "the credential of the image's registry, not the other one"
    );
    eventually(60, "the pod waiting on its image", || {
        let p = pod(&cluster, "private")?;
        let reason = p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"].clone();
        matches!(reason.as_str(), Some("ErrImagePull" | "ImagePullBackOff")).then_some(())
    });
    node.finish();
    drop(proxy);
}
