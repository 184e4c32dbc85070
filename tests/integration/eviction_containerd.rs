//! Node-pressure eviction, admission under pressure, local storage limits and image GC
//! against a private containerd and the kernel's cgroups (v1 memory notifications where
//! the hierarchy has them).
//!
//! The machine is shared with other work whose memory comes and goes by hundreds of
//! megabytes a second, so the memory test does not lean on the node-wide
//! `memory.available`: `--system-reserved` leaves the pods 1Gi (the `kubepods` limit),
//! and the hard threshold of 800Mi is far below what the node has free, while the
//! `allocatableMemory.available` copy upstream derives from it (1Gi − the pods' working
//! set) is met as soon as the test's own pods use more than 224Mi: only the pods decide.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rkubelet::adapters::cri::CriRuntime;
use rkubelet::adapters::system::SystemClock;
use rkubelet::app::eviction::image_gc::ImageGc;
use rkubelet::app::pods::PodStatusStore;
use rkubelet::domain::eviction::image_gc::ImageGcPolicy;
use rkubelet::domain::eviction::signals::FsStats;
use rkubelet::ports::node_stats::RuntimeStats;
use serde_json::Value;

use crate::common::cluster::Cluster;
use crate::common::node::{api_pod, container, eventually, pod, Node, NODE, POLL};

const MI: u64 = 1 << 20;

fn mem_total_bytes() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("read /proc/meminfo");
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .expect("MemTotal in /proc/meminfo")
}

fn phase(p: &Value) -> (&str, &str, &str) {
    (
        p["status"]["phase"].as_str().unwrap_or_default(),
        p["status"]["reason"].as_str().unwrap_or_default(),
        p["status"]["message"].as_str().unwrap_or_default(),
    )
}

/// The status of `pod` once `ready` holds for it.
async fn wait_status(node: &Node, pod: &str, secs: u64, ready: impl Fn(&Value) -> bool) -> Value {
    eventually!(
        secs,
        format!("pod {pod}'s status; /pods: {}", node.pods_body()),
        node.pod_json(pod).filter(|p| ready(p))
    )
}

fn running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
}

fn evicted(p: &Value) -> bool {
    p["status"]["phase"] == "Failed" && p["status"]["reason"] == "Evicted"
}

/// Must-shows 1 and 5, with pods from a real API server: a BestEffort pod that allocates
/// past its (zero) request is evicted with upstream's message and the DisruptionTarget
/// condition, written to the API; the Guaranteed pod beside it keeps running; a static
/// pod ranked before it (lower priority, also over its request) is protected, as
/// upstream's `IsCriticalPod`; MemoryPressure turns True and, after the (shortened)
/// transition period, False; while it holds, a new BestEffort pod is refused and a
/// Burstable one admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd, a control plane and cgroup memory: run by scripts/test.sh"]
async fn a_pod_over_its_request_is_evicted_under_memory_pressure_and_best_effort_is_refused() {
    let cluster = Cluster::start("evict-mem");
    let mut node = Node::start("evict-mem");
    let reserved_mi = mem_total_bytes() / MI - 1024;
    node.kubelet_connected(
        &cluster,
        &[
            &format!("--system-reserved=memory={reserved_mi}Mi"),
            "--eviction-hard=memory.available<800Mi",
            "--eviction-pressure-transition-period=15s",
            "--housekeeping-interval=2s",
        ],
    );
    let bb = node.busybox.clone();
    // 60 MB held by a static pod at a lower priority than the API's pods: ranked first
    // under pressure, and left alone.
    node.write(
        "pinned.yaml",
        &pod(
            "pinned",
            "  priority: -10\n",
            &[],
            &[container(
                "pinned",
                &bb,
                "x=$(head -c 60000000 /dev/zero | tr '\\0' a); echo pinned-allocated; while true; do sleep 60; done",
            )],
        ),
    );
    eventually!(
        60,
        "the static pod's allocation",
        node.log_line("pinned-allocated")
    );
    cluster.apply(&api_pod(
            "steady",
            "",
            &[],
            &[container("steady", &bb, "sleep 3600")
                + "    resources:\n      requests: {cpu: 10m, memory: 32Mi}\n      limits: {cpu: 10m, memory: 32Mi}\n"],
        ));
    node.wait_running("steady", "steady", 60).await;

    // Must-show 6: page cache is not used memory. A pod reads a 400 MB file once, in whole
    // megabytes (busybox `cat` was seen to leave the pages active, i.e. working set, for
    // the kernel as for upstream). The file is written here with O_DIRECT, so its pages
    // are first cached by the pod's read and charged to the pod: its cgroup's usage passes the 224Mi, its working set does not, and
    // nothing is evicted.
    let data = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "count=400", "oflag=direct"])
        .arg(format!("of={}", data.path().join("big").display()))
        .output()
        .expect("dd runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reader = container(
        "reader",
        &bb,
        "dd if=/data/big of=/dev/null bs=1M; echo read-done; while true; do sleep 60; done",
    ) + "    volumeMounts:\n    - {name: data, mountPath: /data}\n";
    let volume = format!(
        "  volumes:\n  - name: data\n    hostPath: {{path: {}}}\n",
        data.path().display()
    );
    cluster.apply(&api_pod("reader", &volume, &[], &[reader]));
    eventually!(
        60,
        "the reader's read-done line",
        node.log_line("read-done")
    );
    let uid = node.pod_json("reader").expect("reader listed")["metadata"]["uid"]
        .as_str()
        .map(str::to_owned)
        .expect("uid");
    let pod_cgroup = std::path::PathBuf::from("/sys/fs/cgroup/memory")
        .join(
            node.ctrd
                .var("RKUBELET_CGROUP_ROOT")
                .trim_start_matches('/'),
        )
        .join(format!(
            "kubepods/besteffort/pod{uid}/memory.usage_in_bytes"
        ));
    let usage: u64 = std::fs::read_to_string(&pod_cgroup)
        .expect("the reader's cgroup usage")
        .trim()
        .parse()
        .expect("a number");
    assert!(
        usage > 300 * MI,
        "the read is charged to the reader: {usage}"
    );
    // Three housekeeping cycles (and any kernel notification) later: no eviction.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        !node.log_text().contains("Evicting pod"),
        "page cache counted as used"
    );
    assert!(running(&node.pod_json("reader").expect("reader listed")));
    // 300 MB held in a shell variable: past the 224Mi the pods may use. (The shell must
    // not exec its last command: the variable would go with it.)
    cluster.apply(&api_pod(
        "hog",
        "",
        &[],
        &[container(
            "hog",
            &bb,
            "sleep 1; x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo allocated; while true; do sleep 60; done",
        )],
    ));
    let started = Instant::now();
    let hog = wait_status(&node, "hog", 90, evicted).await;
    let evicted_after = started.elapsed();
    let (_, _, message) = phase(&hog);
    assert!(
        message.starts_with("The node was low on resource: memory. Threshold quantity: "),
        "{message}"
    );
    assert!(
        message.contains("Container hog was using ")
            && message.contains(", request is 0, has larger consumption of memory. "),
        "{message}"
    );
    let conditions = hog["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "DisruptionTarget" && c["status"] == "True"),
        "{hog}"
    );
    eprintln!("hog evicted {evicted_after:?} after it was created");
    // What the API server shows is what /pods showed.
    let in_api = eventually!(30, "the eviction written to the API", {
        cluster
            .get_json(&["pod", "hog"])
            .filter(|p| p["status"]["reason"] == "Evicted")
    });
    assert_eq!(phase(&in_api), phase(&hog), "{in_api}");
    let event = eventually!(30, "the Evicted event in the API", {
        cluster
            .get_json(&[
                "events",
                "--field-selector",
                "involvedObject.name=hog,reason=Evicted",
            ])
            .and_then(|list| list["items"].as_array()?.first().cloned())
    });
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(event["message"], phase(&hog).2, "{event}");
    // Upstream's annotations on the event: what was starved, and who used it.
    let annotations = &event["metadata"]["annotations"];
    assert_eq!(annotations["starved_resource"], "memory", "{event}");
    assert_eq!(annotations["offending_containers"], "hog", "{event}");
    assert!(
        annotations["offending_containers_usage"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{event}"
    );
    let log = node.log_text();
    assert!(log.contains("Evicting pod"), "no Evicted event in the log");
    assert!(
        log.contains("node condition changed")
            && log.contains("condition=\"MemoryPressure\" status=\"True\""),
        "MemoryPressure True not logged"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("cannot evict a critical pod") && l.contains("pinned-n1")),
        "the static pod ranked first is protected, and said so"
    );
    let pinned = node.pod_json("pinned-n1").expect("pinned listed");
    assert!(running(&pinned), "{pinned}");

    // Within the transition period: BestEffort refused, Burstable admitted.
    cluster.apply(&api_pod(
        "late-be",
        "",
        &[],
        &[container("late", &bb, "sleep 3600")],
    ));
    cluster.apply(&api_pod(
        "late-bu",
        "",
        &[],
        &[container("late", &bb, "sleep 3600")
            + "    resources:\n      requests: {memory: 16Mi}\n"],
    ));
    let refused = wait_status(&node, "late-be", 30, evicted).await;
    assert_eq!(
        phase(&refused).2,
        "Pod was rejected: The node had condition: [MemoryPressure]. "
    );
    let event = eventually!(30, "the refusal's event in the API", {
        cluster
            .get_json(&["events", "--field-selector", "involvedObject.name=late-be"])
            .and_then(|list| list["items"].as_array()?.first().cloned())
    });
    assert_eq!(
        (&event["type"], &event["reason"], &event["message"]),
        (
            &Value::from("Warning"),
            &Value::from("Evicted"),
            &Value::from("The node had condition: [MemoryPressure]. ")
        ),
        "{event}"
    );
    assert!(
        node.containers("late-be").await.is_empty(),
        "a refused pod gets no container"
    );
    node.wait_running("late-bu", "late", 60).await;

    // The condition clears once the transition period has passed without pressure.
    eventually!(60, "MemoryPressure False in the log", {
        node.log_text()
            .contains("condition=\"MemoryPressure\" status=\"False\"")
            .then_some(())
    });
    // The Node's status went the same way, with upstream's node events.
    for reason in ["NodeHasInsufficientMemory", "NodeHasSufficientMemory"] {
        eventually!(30, format!("the node event {reason}"), {
            cluster
                .get_json(&[
                    "events",
                    "--field-selector",
                    &format!("involvedObject.kind=Node,reason={reason}"),
                ])
                .filter(|list| list["items"].as_array().is_some_and(|i| !i.is_empty()))
        });
    }
    eventually!(30, "MemoryPressure False in the Node's status", {
        cluster.get_json(&["node", NODE]).filter(|n| {
            n["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "MemoryPressure" && c["status"] == "False")
            })
        })
    });
    // The Guaranteed pod and the reader kept running all along.
    let reader = node.pod_json("reader").expect("reader listed");
    assert!(running(&reader), "{reader}");
    let steady = node.pod_json("steady").expect("steady listed");
    assert!(running(&steady), "{steady}");
    assert_eq!(
        node.containers("steady").await.len(),
        1,
        "steady never restarted"
    );
    node.finish();
}

/// Free bytes of the filesystem holding `path`, as an unprivileged user sees them.
fn available_bytes(path: &std::path::Path) -> u64 {
    let st = nix::sys::statvfs::statvfs(path).expect("statvfs");
    st.blocks_available() * st.fragment_size()
}

/// Must-show 2: `--root-dir` on a small filesystem (a 160 MiB tmpfs that also holds
/// containerd's images and writable layers, so it is the image filesystem too), a pod
/// writing to an emptyDir drives `nodefs.available` below its threshold: the dead
/// container of a finished pod and the unused images go first, then the writing pod is
/// evicted (reclaim cannot free what it wrote), and `DiskPressure` is True. The writer
/// comes from the API server (a static pod would be protected, as upstream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd and a control plane: run by scripts/test.sh"]
async fn disk_pressure_on_a_small_root_dir_reclaims_containers_and_images_then_evicts_the_writer() {
    let cluster = Cluster::start("evict-disk");
    let mut node = Node::start_on_small_disk("evict-disk", 160);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env/build-images.sh");
    let out = std::process::Command::new(script)
        .arg("--gc-images")
        .arg(node.ctrd.socket())
        .output()
        .expect("build-images.sh runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let free_mib = available_bytes(&node.ctrd.base) / MI;
    // Met once the pods use about 40 MiB more of the disk; the writer writes 64 MiB.
    let threshold_mib = free_mib
        .checked_sub(40)
        .expect("a tmpfs of 160 MiB has 40 MiB free");
    node.kubelet_connected(
        &cluster,
        &[
            &format!("--eviction-hard=nodefs.available<{threshold_mib}Mi"),
            "--housekeeping-interval=1s",
        ],
    );
    let bb = node.busybox.clone();
    node.write(
        "done.yaml",
        &pod(
            "done",
            "  restartPolicy: Never\n",
            &[],
            &[container("done", &bb, "true")],
        ),
    );
    let runtime = CriRuntime::connect(&node.endpoint, Duration::from_secs(30)).expect("CRI");
    let done_exited = || async {
        let c = node.containers("done-n1").await;
        c.iter()
            .any(|c| {
                c.status.state == rkubelet::domain::kuberuntime::runtime::ContainerState::Exited
            })
            .then_some(())
    };
    eventually!(60, "the done pod's container exited", done_exited().await);
    // The line it logs first is what the eviction message counts as the container's use
    // (upstream counts its writable layer and logs, not the emptyDir): without it the
    // use may be zero, and zero is no larger than the request.
    let writer = container(
        "writer",
        &bb,
        "echo filling /scratch; sleep 2; dd if=/dev/zero of=/scratch/fill bs=1M count=64; sleep 3600",
    ) + "    volumeMounts:\n    - {name: scratch, mountPath: /scratch}\n";
    cluster.apply(&api_pod(
        "writer",
        "  volumes:\n  - name: scratch\n    emptyDir: {}\n",
        &[],
        &[writer],
    ));
    let evicted_writer = wait_status(&node, "writer", 90, evicted).await;
    let (_, reason, message) = phase(&evicted_writer);
    assert_eq!(reason, "Evicted");
    assert!(
        message
            .starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: "),
        "{message}"
    );
    assert!(message.contains("Container writer was using"), "{message}");

    // Reclaim came first: the finished pod's dead container and the unused images are
    // gone from the runtime, and the log says so before the eviction.
    assert!(node.containers("done-n1").await.is_empty());
    let images = runtime.list_images().await.expect("ListImages");
    for gc in [
        "registry.rkubelet.test/gc-a:1",
        "registry.rkubelet.test/gc-b:1",
    ] {
        assert!(
            !images.iter().any(|i| i.names.iter().any(|n| n == gc)),
            "{gc} still present: {images:?}"
        );
    }
    // The finished pod is not started again once its dead container is gone (a
    // terminal phase is final): a few relists later it still ran once.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let done = node.pod_json("done-n1").expect("done listed");
    assert_eq!(phase(&done).0, "Succeeded", "{done}");
    let starts = node
        .log_text()
        .lines()
        .filter(|l| l.contains("started container") && l.contains("containerName=\"done\""))
        .count();
    assert_eq!(starts, 1, "the finished pod was started again");
    let log = node.log_text();
    let at = |text: &str| {
        log.find(text)
            .unwrap_or_else(|| panic!("no {text:?} in the log:\n{log}"))
    };
    let removed = at("eviction manager: removed dead containers");
    let images_removed = at("removing image to free bytes");
    let must_evict = at("Eviction manager: must evict pod(s) to reclaim");
    assert!(removed < must_evict && images_removed < must_evict);
    assert!(
        log.lines().any(|l| l.contains("node condition changed")
            && l.contains("DiskPressure")
            && l.contains("True")),
        "no DiskPressure True in the log"
    );
    // And in the Node's status, with upstream's reason, for the scheduler to see.
    eventually!(30, "DiskPressure True in the Node's status", {
        cluster.get_json(&["node", NODE]).filter(|n| {
            n["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter().any(|c| {
                    c["type"] == "DiskPressure"
                        && c["status"] == "True"
                        && c["reason"] == "KubeletHasDiskPressure"
                })
            })
        })
    });
    node.finish();
}

/// Must-show 3: an emptyDir with `sizeLimit: 10Mi` written past it: the pod is evicted
/// with upstream's message (no threshold needed: local storage isolation is on); the
/// pod within its limit keeps running. Both from the API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, containerd and a control plane: run by scripts/test.sh"]
async fn an_empty_dir_over_its_size_limit_gets_its_pod_evicted() {
    let cluster = Cluster::start("evict-edir");
    let mut node = Node::start("evict-edir");
    node.kubelet_connected(&cluster, &["--housekeeping-interval=1s"]);
    let bb = node.busybox.clone();
    let spec = "  volumes:\n  - name: scratch\n    emptyDir: {sizeLimit: 10Mi}\n";
    let writer = container(
        "writer",
        &bb,
        "sleep 1; dd if=/dev/zero of=/scratch/fill bs=1M count=20; sleep 3600",
    ) + "    volumeMounts:\n    - {name: scratch, mountPath: /scratch}\n";
    cluster.apply(&api_pod("writer", spec, &[], &[writer]));
    let within = container(
        "within",
        &bb,
        "dd if=/dev/zero of=/scratch/fill bs=1M count=2; sleep 3600",
    ) + "    volumeMounts:\n    - {name: scratch, mountPath: /scratch}\n";
    cluster.apply(&api_pod("within", spec, &[], &[within]));
    let writer = wait_status(&node, "writer", 60, evicted).await;
    assert_eq!(
        phase(&writer).2,
        "Usage of EmptyDir volume \"scratch\" exceeds the limit \"10Mi\". "
    );
    // The pod within its limit runs (it may start after the writer's eviction) and keeps
    // running through the next housekeeping rounds (every second here).
    wait_status(&node, "within", 60, running).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let within = node.pod_json("within").expect("within listed");
    assert!(running(&within), "{within}");
    node.finish();
}

/// The filesystem holding `path` as statfs measures it.
fn fs_stats(path: &std::path::Path) -> FsStats {
    let st = nix::sys::statvfs::statvfs(path).expect("statvfs");
    FsStats {
        capacity_bytes: st.blocks() * st.fragment_size(),
        available_bytes: st.blocks_available() * st.fragment_size(),
        inodes: Some(st.files()),
        inodes_free: Some(st.files_free()),
    }
}

fn used_bytes(fs: &FsStats) -> u64 {
    fs.capacity_bytes - fs.available_bytes.min(fs.capacity_bytes)
}

/// Writes `bytes` of zeros (tmpfs keeps them all) into `file`.
fn fill(file: &std::path::Path, bytes: u64) {
    let f = std::fs::File::create(file).expect("filler file");
    let chunk = vec![0u8; 1 << 20];
    let mut w = std::io::BufWriter::new(f);
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        std::io::Write::write_all(&mut w, &chunk[..n]).expect("filled");
        left -= n as u64;
    }
    std::io::Write::flush(&mut w).expect("flushed");
}

/// Must-show 4: with images imported above the high threshold of a real image filesystem
/// (containerd on a 200 MiB tmpfs of its own, two images of 8 MiB each, and a file that
/// takes the filesystem over the threshold), unused images go least recently used first
/// until the low threshold; images in use (the running pod's, the sandbox image) stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and containerd: run by scripts/test.sh"]
async fn image_gc_removes_the_least_recently_used_unused_image_and_keeps_images_in_use() {
    let mut node = Node::start_on_small_disk("evict-imggc", 200);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test-env/build-images.sh");
    let out = std::process::Command::new(script)
        .arg("--gc-big-images")
        .arg(node.ctrd.socket())
        .output()
        .expect("build-images.sh runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    node.kubelet();
    let bb = node.busybox.clone();
    node.write(
        "user.yaml",
        &pod("user", "", &[], &[container("app", &bb, "sleep 3600")]),
    );
    node.wait_running("user-n1", "app", 60).await;

    let runtime =
        Arc::new(CriRuntime::connect(&node.endpoint, Duration::from_secs(30)).expect("CRI"));
    let images = runtime.list_images().await.expect("ListImages");
    let id_of = |name: &str| {
        images
            .iter()
            .find(|i| i.names.iter().any(|n| n == name))
            .map(|i| (i.id.clone(), i.size_bytes))
            .unwrap_or_else(|| panic!("{name} not present: {images:?}"))
    };
    let (gc_a, _) = id_of("registry.rkubelet.test/gc-big-a:1");
    let (gc_b, size_b) = id_of("registry.rkubelet.test/gc-big-b:1");
    let image_fs = node.ctrd.base.clone();
    let start = fs_stats(&image_fs);
    let capacity = start.capacity_bytes;
    let percent = |p: u64| capacity * p / 100;
    let used_percent = used_bytes(&start) * 100 / capacity;
    // Thresholds just above today's use: a filler file takes the filesystem over the high
    // one later, with 2-2.5 % of the capacity (4-5 MiB) to free down to the low one, less
    // than one 8 MiB image.
    assert!(
        size_b > percent(3),
        "an 8 MiB image is more than 3 % of the filesystem: {size_b} of {capacity}"
    );
    let low = used_percent + 2;
    let policy = ImageGcPolicy {
        high_threshold_percent: i32::try_from(low + 1).expect("a percentage"),
        low_threshold_percent: i32::try_from(low).expect("a percentage"),
        min_age_nanos: 0,
    };
    let gc = ImageGc::new(
        runtime.clone(),
        PodStatusStore::new(),
        Arc::new(SystemClock::new()),
        policy,
        rkubelet::domain::config::options::DEFAULT_POD_SANDBOX_IMAGE.to_owned(),
    );
    // Below the high threshold: nothing goes, but every image is now known (old).
    assert_eq!(
        gc.collect(&fs_stats(&image_fs)).await.expect("collection"),
        0
    );
    // gc-big-a used: a pod whose container is created from it (no shell: it cannot run).
    node.write(
        "gc-a.yaml",
        &pod(
            "gc-a",
            "  restartPolicy: Never\n",
            &[],
            &["  - name: a\n    image: registry.rkubelet.test/gc-big-a:1\n    imagePullPolicy: Never\n".to_string()],
        ),
    );
    eventually!(60, "gc-a's container created", {
        let c = node.containers("gc-a-n1").await;
        (!c.is_empty()).then_some(())
    });
    assert_eq!(
        gc.collect(&fs_stats(&image_fs)).await.expect("collection"),
        0
    );
    node.remove("gc-a.yaml");
    eventually!(60, "gc-a's container removed", {
        node.containers("gc-a-n1").await.is_empty().then_some(())
    });
    tokio::time::sleep(POLL).await;
    // Over the high threshold for real: used up to (high + 1) % plus half a percent.
    let filler = image_fs.join("filler");
    let now_used = used_bytes(&fs_stats(&image_fs));
    let target = percent(low + 2) + percent(1) / 2;
    fill(&filler, target.saturating_sub(now_used));
    let over = fs_stats(&image_fs);
    assert!(
        used_bytes(&over) * 100 / capacity > low + 1,
        "the filler took the filesystem over the high threshold: {over:?}"
    );
    let freed = gc.collect(&over).await.expect("collection frees enough");
    assert_eq!(freed, size_b, "gc-big-b (never used) goes first, and alone");
    let left: Vec<String> = runtime
        .list_images()
        .await
        .expect("ListImages")
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert!(!left.contains(&gc_b), "gc-big-b removed: {left:?}");
    assert!(
        left.contains(&gc_a),
        "gc-big-a (used more recently) kept: {left:?}"
    );
    let busybox = id_of(&node.busybox).0;
    assert!(left.contains(&busybox), "the running pod's image kept");
    assert_eq!(left.len(), 3, "pause, busybox and gc-big-a left: {left:?}");
    // Nearly full: every unused image goes, the ones in use stay, and not freeing enough
    // is an error.
    let now = fs_stats(&image_fs);
    fill(
        &image_fs.join("filler-2"),
        now.available_bytes.saturating_sub(percent(2)),
    );
    assert!(
        gc.collect(&fs_stats(&image_fs)).await.is_err(),
        "not enough to free is an error"
    );
    let left: Vec<String> = runtime
        .list_images()
        .await
        .expect("ListImages")
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert!(
        !left.contains(&gc_a) && left.contains(&busybox) && left.len() == 2,
        "{left:?}"
    );
    for f in ["filler", "filler-2"] {
        std::fs::remove_file(image_fs.join(f)).expect("filler removed");
    }
    node.finish();
}
