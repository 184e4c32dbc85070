//! The binary end to end: flags, files, bad input, the daemon on the simulated runtime.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;

use common::{http_get, start_daemon, Daemon, BIN};

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("NOTIFY_SOCKET")
        .output()
        .expect("rkubelet runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            found.push(entry.path());
            found.extend(tree(&entry.path()));
        }
    }
    found.sort();
    found
}

#[test]
fn help_lists_the_flags_and_version_prints_it() {
    let help = run(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--config",
        "--kubeconfig",
        "--reserved-cpus",
        "--eviction-hard",
        "--healthz-port",
        "--cgroup-driver",
        "--runonce",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}");
    }
    let version = run(&["--version"]);
    assert!(version.status.success());
    // Upstream's line: the release whose kubelet rkubelet implements.
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        "Kubernetes v1.26.1\n"
    );
}

/// Each bad input exits non-zero, names the flag or field and the value, and creates
/// nothing: not the lock file, not the root directory.
#[test]
fn bad_input_is_refused_clearly_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let misspelt = dir.path().join("misspelt.yaml");
    std::fs::write(
        &misspelt,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nreservedCpus: \"0\"\n",
    )
    .expect("write");
    let not_yaml = dir.path().join("broken.yaml");
    std::fs::write(&not_yaml, "kind: [unclosed\n  : :\n").expect("write");
    let missing = dir.path().join("absent.yaml");
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let online = online.trim().to_string();

    let misspelt_arg = format!("--config={}", misspelt.display());
    let not_yaml_arg = format!("--config={}", not_yaml.display());
    let missing_arg = format!("--config={}", missing.display());
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["--reserved-cpus=0-99"], vec!["0-99", online.as_str()]),
        (vec!["--reserved-cpus=abc"], vec!["reserved-cpus", "abc"]),
        (
            vec!["--eviction-hard=memory.available<abc"],
            vec!["memory.available", "abc"],
        ),
        (vec!["--eviction-hard=foo.bar<1Gi"], vec!["foo.bar"]),
        (
            vec!["--eviction-soft=memory.available<1Gi"],
            vec!["memory.available", "grace period"],
        ),
        (
            vec!["--cgroup-driver=nonsense"],
            vec!["cgroupDriver (--cgroup-driver)", "nonsense"],
        ),
        (
            vec!["--kube-reserved=memory=100Ti"],
            vec!["memory", "100Ti"],
        ),
        (
            vec!["--oom-score-adj=5000"],
            vec!["oomScoreAdj (--oom-score-adj)", "5000"],
        ),
        (
            vec![misspelt_arg.as_str()],
            vec!["reservedCpus", "reservedSystemCPUs", "misspelt.yaml"],
        ),
        (vec![not_yaml_arg.as_str()], vec!["broken.yaml"]),
        (vec![missing_arg.as_str()], vec!["absent.yaml"]),
        (vec!["--max-pods=many"], vec!["--max-pods", "many"]),
        (vec!["stray-positional"], vec!["stray-positional"]),
    ];
    for (args, wanted) in cases {
        let root = dir.path().join("root");
        let lock = dir.path().join("lock/kubelet.lock");
        let mut all = vec![
            "--container-runtime-endpoint=fake://".to_string(),
            format!("--root-dir={}", root.display()),
            format!("--lock-file={}", lock.display()),
            "--healthz-port=0".to_string(),
        ];
        all.extend(args.iter().map(ToString::to_string));
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let before = tree(dir.path());
        let output = run(&refs);
        let text = stderr(&output);
        assert!(
            !output.status.success(),
            "{args:?} should fail; stderr: {text}"
        );
        for want in wanted {
            assert!(
                text.contains(want),
                "{args:?}: {want:?} missing from: {text}"
            );
        }
        assert_eq!(tree(dir.path()), before, "{args:?} changed the file system");
    }
}

#[test]
fn several_problems_are_reported_together() {
    let output = run(&[
        "--container-runtime-endpoint=fake://",
        "--oom-score-adj=5000",
        "--cgroup-driver=nonsense",
        "--max-pods=-1",
    ]);
    assert!(!output.status.success());
    let text = stderr(&output);
    for want in ["oomScoreAdj", "cgroupDriver", "maxPods"] {
        assert!(text.contains(want), "{want} missing from {text}");
    }
}

/// A simulated node whose kubelet API lets anyone read `/configz` (the healthz port
/// serves `/healthz` only).
fn start_fake(extra: &[String], as_nobody: bool) -> Daemon {
    let mut args = vec![
        "--container-runtime-endpoint=fake://".to_string(),
        "--anonymous-auth=true".to_string(),
        "--authorization-mode=AlwaysAllow".to_string(),
    ];
    args.extend(extra.iter().cloned());
    start_daemon(&args, as_nobody)
}

fn assert_serves_and_stops(mut daemon: Daemon, expect_simulation_warning: bool) {
    let (status, body) = http_get(daemon.port, "/healthz").expect("healthz answers");
    assert_eq!((status, body.as_str()), (200, "ok"));
    assert_eq!(
        http_get(daemon.port, "/configz").map(|(status, _)| status),
        Some(404),
        "the healthz port serves /healthz only"
    );
    let (status, body) = crate::common::api_get(&daemon, "/configz").expect("configz answers");
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).expect("configz is JSON");
    let config = &json["kubeletconfig"];
    assert_eq!(config["kind"], "KubeletConfiguration");
    assert_eq!(config["containerRuntimeEndpoint"], "fake://");
    assert_eq!(config["healthzPort"], daemon.port);
    assert_eq!(config["readOnlyPort"], 0);
    assert_eq!(config["authentication"]["anonymous"]["enabled"], true);
    assert_eq!(config["authorization"]["mode"], "AlwaysAllow");
    if expect_simulation_warning {
        assert!(
            daemon.log_text().contains("SIMULATED NODE"),
            "no simulation warning"
        );
    }
    let status = daemon.terminate();
    assert!(status.success(), "exit status {status:?}");
}

#[test]
fn serves_healthz_and_configz_on_the_simulated_runtime_and_exits_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = start_fake(
        &[format!("--root-dir={}", dir.path().join("root").display())],
        false,
    );
    assert_serves_and_stops(daemon, true);
}

#[test]
fn runs_as_a_non_root_user() {
    // As root, setpriv drops to nobody; otherwise the test already runs unprivileged.
    let is_root = nix::unistd::geteuid().is_root();
    assert!(
        !is_root || Command::new("setpriv").arg("--version").output().is_ok(),
        "setpriv (util-linux) does not run: as root, this test needs it to run rkubelet as nobody"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    // nobody must be able to create its root dir inside the tempdir.
    #[allow(clippy::permissions_set_readonly_false)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
    }
    // The self-signed serving pair goes where nobody may write (an unwritable --cert-dir
    // fails the start, as upstream's).
    let daemon = start_fake(
        &[
            format!("--root-dir={}", root.display()),
            format!("--cert-dir={}", dir.path().join("pki").display()),
        ],
        is_root,
    );
    assert_serves_and_stops(daemon, true);
}

#[test]
fn precedence_flag_over_drop_in_over_file_with_defaults_for_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("config.yaml");
    std::fs::write(
        &file,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\nclusterDomain: file.local\nhealthzBindAddress: 127.0.0.1\nfeatureGates:\n  CustomCPUCFSQuotaPeriod: true\n",
    )
    .expect("write");
    let drop_ins = dir.path().join("conf.d");
    std::fs::create_dir(&drop_ins).expect("mkdir");
    std::fs::write(
        drop_ins.join("10-pods.conf"),
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 60\nclusterDomain: dropin.local\n",
    )
    .expect("write");
    std::fs::write(
        drop_ins.join("20-more.conf"),
        "apiVersion = \"kubelet.config.k8s.io/v1beta1\"\nkind = \"KubeletConfiguration\"\nmaxPods = 70\n",
    )
    .expect("write");
    std::fs::write(drop_ins.join("ignored.yaml"), "not: a drop-in\n").expect("write");
    let mut daemon = start_fake(
        &[
            format!("--config={}", file.display()),
            format!("--config-dir={}", drop_ins.display()),
            format!("--root-dir={}", dir.path().join("root").display()),
            "--cluster-domain=flag.local".into(),
        ],
        false,
    );
    let (_, body) = crate::common::api_get(&daemon, "/configz").expect("configz answers");
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let config = &json["kubeletconfig"];
    assert_eq!(config["clusterDomain"], "flag.local", "flag beats drop-in");
    assert_eq!(
        config["maxPods"], 70,
        "later drop-in beats earlier drop-in and file"
    );
    assert_eq!(
        config["featureGates"]["CustomCPUCFSQuotaPeriod"], true,
        "file value kept"
    );
    assert_eq!(config["oomScoreAdj"], -999, "default fills the rest");
    assert_eq!(config["cgroupDriver"], "cgroupfs", "default fills the rest");
    let _ = daemon.child.kill();
}

#[test]
fn runonce_exits_after_one_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = run(&[
        "--container-runtime-endpoint=fake://",
        "--runonce",
        &format!("--root-dir={}", dir.path().join("root").display()),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn exits_cleanly_when_another_process_opens_the_lock_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lock = dir.path().join("kubelet.lock");
    let mut daemon = start_fake(
        &[
            format!("--root-dir={}", dir.path().join("root").display()),
            format!("--lock-file={}", lock.display()),
            "--exit-on-lock-contention".into(),
        ],
        false,
    );
    assert!(lock.exists(), "the lock file is created");
    let _other = std::fs::File::open(&lock).expect("another process opens the lock file");
    let status = daemon.child.wait().expect("exits");
    assert!(status.success(), "exit status {status:?}");
}

/// Issue 35's contained demo: on `fake://` a pod says it is simulated in its status (the
/// `rkubelet.io/Simulated` condition, in `/pods`) and in its events' messages.
#[test]
fn a_pod_on_the_simulated_runtime_says_so_in_its_status_and_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = crate::common::web_manifest(dir.path());
    let mut daemon = start_fake(
        &[
            format!("--root-dir={}", dir.path().join("root").display()),
            format!("--pod-manifest-path={}", manifests.display()),
            "--hostname-override=node1".to_string(),
            crate::common::read_only_port_flag(),
        ],
        false,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let simulated = loop {
        let pods = crate::common::pods_get(&daemon)
            .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok());
        let condition = pods.as_ref().and_then(|p| {
            p["items"][0]["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "rkubelet.io/Simulated")
                .cloned()
        });
        // Both: the condition is in every status, the Started event after the start.
        let started = daemon.log_text().contains("\"Started container app");
        if let (Some(condition), true) = (condition, started) {
            break condition;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no simulated condition in /pods, or no Started event: {pods:?}\n{}",
            daemon.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(simulated["status"], "True", "{simulated}");
    assert_eq!(simulated["reason"], "SimulatedRuntime", "{simulated}");
    let log = daemon.log_text();
    let started = log
        .lines()
        .find(|l| l.contains("\"Started container app (simulated runtime: nothing ran)\""))
        .unwrap_or_else(|| panic!("no simulated Started event:\n{log}"));
    assert!(started.contains("event=\"Started\""), "{started}");
    assert!(
        log.lines()
            .filter(|l| l.contains(" event=\""))
            .all(|l| l.contains("(simulated runtime: nothing ran)")),
        "{log}"
    );
    assert!(daemon.terminate().success());
}
