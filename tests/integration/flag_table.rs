//! The drop-in replacement promise: every upstream flag and field is known, the
//! generated table matches the code, and a kubeadm-made node's command line and a file
//! with every field start rkubelet with one warning naming exactly what is not honoured.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common;

use common::{http_get, start_daemon};
use rkubelet::app::cli;
use rkubelet::domain::config::flags::{FlagKind, State, FLAGS};
use rkubelet::domain::config::states::{self, FIELDS};
use rkubelet::domain::config::{self as config, ConfigInputs, FileInput};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

#[test]
fn the_committed_table_is_the_generated_one() {
    common::assert_generated(
        "docs/flags.md",
        &states::markdown_table(),
        "UPDATE_FLAG_TABLE",
        "UPDATE_FLAG_TABLE=1 cargo test flag_table",
    );
}

fn sample(kind: FlagKind) -> &'static str {
    match kind {
        FlagKind::Str => "x",
        FlagKind::Bool => "true",
        FlagKind::Int => "1",
        FlagKind::Duration => "1s",
        FlagKind::LessThanMap => "memory.available<1Gi",
        FlagKind::EqualsMap => "cpu=1",
        FlagKind::List => "a,b",
        FlagKind::FeatureGates => "A=true",
        FlagKind::Taints => "k=v:NoSchedule",
        FlagKind::ColonMultiMap => "a:b",
        FlagKind::ReservedMemory => "0:memory=1Gi",
    }
}

/// Each flag in the table is one clap knows, and clap knows no other; each parses.
#[test]
fn every_flag_in_the_table_is_parsed_and_the_reverse() {
    let command = cli::command();
    let clap: BTreeSet<&str> = command
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|name| !["help", "version"].contains(name))
        .collect();
    let table: BTreeSet<&str> = FLAGS.iter().map(|f| f.name).collect();
    assert_eq!(clap, table);
    for spec in FLAGS {
        let text = sample(spec.kind);
        let given = cli::parse(["rkubelet".to_string(), format!("--{}={text}", spec.name)])
            .unwrap_or_else(|e| panic!("--{} does not parse: {e}", spec.name));
        assert_eq!(given.len(), 1, "--{}", spec.name);
        assert_eq!((given[0].0.name, given[0].1.as_str()), (spec.name, text));
    }
}

/// The fake machine (2 CPUs, 4 GiB) named `node-a`.
fn sample_node() -> config::NodeFacts {
    config::NodeFacts {
        hostname: "node-a".into(),
        machine: rkubelet::adapters::fake::FakeMachine::sample_info(),
    }
}

fn resolve_flags(args: &[String]) -> Result<config::ResolvedConfig, Vec<String>> {
    let mut argv = vec!["rkubelet".to_string()];
    argv.extend(args.iter().cloned());
    let flags = cli::parse(argv).map_err(|e| vec![e.to_string()])?;
    config::resolve(&ConfigInputs::from_flags(flags), &sample_node())
        .map_err(|problems| problems.iter().map(ToString::to_string).collect())
}

/// Not-implemented flags are still type-checked: a bad value names the flag.
#[test]
fn a_bad_value_of_a_not_implemented_flag_is_an_error_naming_it() {
    for spec in FLAGS.iter().filter(|f| f.state != State::Implemented) {
        let bad = match spec.kind {
            FlagKind::Int => "many",
            FlagKind::Bool => "maybe",
            FlagKind::Duration => "soon",
            _ => continue,
        };
        let problems = resolve_flags(&[format!("--{}={bad}", spec.name)])
            .expect_err(&format!("--{}={bad} is refused", spec.name));
        assert!(
            problems
                .iter()
                .any(|p| p.contains(&format!("--{}", spec.name)) && p.contains(bad)),
            "--{}={bad}: {problems:?}",
            spec.name
        );
    }
    let problems = resolve_flags(&["--hairpin-mode=sideways".into()]).expect_err("refused");
    assert!(
        problems[0].contains("hairpinMode (--hairpin-mode)")
            && problems[0].contains("promiscuous-bridge")
    );
}

#[test]
fn refused_values_stop_start_up_and_safe_values_do_not() {
    for (arg, field) in [
        ("--protect-kernel-defaults=true", "protectKernelDefaults"),
        ("--memory-manager-policy=Static", "memoryManagerPolicy"),
        ("--reserved-memory=0:memory=1Gi", "reservedMemory"),
    ] {
        let problems = resolve_flags(&[arg.into()]).expect_err(arg);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("refused") && p.contains(field)),
            "{arg}: {problems:?}"
        );
    }
    for arg in [
        "--memory-manager-policy=None",
        "--protect-kernel-defaults=false",
        "--seccomp-default=false",
        "--seccomp-default",
        "--pod-max-pids=-1",
        "--pod-max-pids=100",
    ] {
        resolve_flags(&[arg.into()]).unwrap_or_else(|p| panic!("{arg}: {p:?}"));
    }
}

/// A file with every v1beta1 field loads, and exactly the not-implemented ones are listed.
#[test]
fn a_file_with_every_field_loads_and_lists_the_not_implemented_ones() {
    let path = fixture("kubelet-config-all-fields.yaml");
    let text = std::fs::read_to_string(&path).expect("fixture");
    let inputs = ConfigInputs {
        main_file: Some(FileInput {
            path,
            text: Ok(text),
        }),
        ..ConfigInputs::from_flags(Vec::new())
    };
    let resolved = config::resolve(&inputs, &sample_node()).unwrap_or_else(|p| panic!("{p:#?}"));
    let listed: BTreeSet<String> = states::not_implemented_given(&resolved)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(listed, warned_for_the_all_fields_file());
}

/// The not-implemented fields, all given by `kubelet-config-all-fields.yaml`. Upstream
/// refuses both `shutdownGracePeriod` and its by-priority list: the file gives the list,
/// and the two periods at 0s (off), which is what rkubelet does, so unwarned.
fn warned_for_the_all_fields_file() -> BTreeSet<String> {
    FIELDS
        .iter()
        .filter(|f| f.state == State::NotImplemented)
        .map(|f| f.name.to_string())
        .filter(|name| {
            !["shutdownGracePeriod", "shutdownGracePeriodCriticalPods"].contains(&name.as_str())
        })
        .collect()
}

/// The names the single start-up warning lists.
fn warned_names(log: &str) -> Vec<BTreeSet<String>> {
    log.lines()
        .filter_map(|l| l.split_once("accepted but not implemented, running without them: "))
        .map(|(_, items)| {
            items
                .split(", ")
                .filter_map(|item| item.split_once('=').map(|(n, _)| n.to_string()))
                .collect()
        })
        .collect()
}

#[test]
fn the_kubeadm_command_line_runs_with_one_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    // kubeadm's file names the cluster CA for client certificates: one is made here, as
    // a missing one stops the start (as upstream's "unable to load client CA file").
    let ca = dir.path().join("ca.crt");
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=kubernetes", "-keyout"])
        .arg(dir.path().join("ca.key"))
        .arg("-out")
        .arg(&ca)
        .output()
        .expect("openssl runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let kubeadm = std::fs::read_to_string(fixture("kubeadm/config.yaml")).expect("fixture");
    assert!(kubeadm.contains("/etc/kubernetes/pki/ca.crt"));
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        kubeadm.replace("/etc/kubernetes/pki/ca.crt", &ca.display().to_string()),
    )
    .expect("config written");
    let args: Vec<String> = [
        format!(
            "--bootstrap-kubeconfig={}",
            dir.path().join("bootstrap-kubelet.conf").display()
        ),
        format!("--kubeconfig={}", dir.path().join("kubelet.conf").display()),
        format!("--config={}", config.display()),
        "--container-runtime-endpoint=fake://".into(),
        "--pod-infra-container-image=registry.k8s.io/pause:3.10".into(),
        format!("--cert-dir={}", dir.path().join("pki").display()),
        format!(
            "--volume-plugin-dir={}",
            dir.path().join("volume").display()
        ),
        "--make-iptables-util-chains=false".into(),
        "--address=127.0.0.1".into(),
        // kubeadm's 10250, on a free port: a taken API port stops the start, as upstream.
        format!("--port={}", crate::common::free_port()),
        "--read-only-port=0".into(),
        "--healthz-bind-address=127.0.0.1".into(),
        "--hostname-override=kubeadm-node".into(),
        format!("--root-dir={}", root.display()),
    ]
    .into();
    let mut daemon = start_daemon(&args, false);
    let (status, body) = http_get(daemon.port, "/healthz").expect("healthz answers");
    assert_eq!((status, body.as_str()), (200, "ok"));
    let log = daemon.log_text();
    let warnings = warned_names(&log);
    assert_eq!(warnings.len(), 1, "one warning; log:\n{log}");
    // --make-iptables-util-chains=false and --read-only-port=0 ask for what rkubelet does
    // anyway, as do the file's zero shutdown periods (off), empty memorySwap and unbuffered
    // JSON logging; the rest are the kubeadm defaults rkubelet does not act on. The
    // connection flags (--kubeconfig, --bootstrap-kubeconfig, --cert-dir,
    // rotateCertificates) are implemented.
    let expected: BTreeSet<String> = [
        "--volume-plugin-dir",
        "imageMaximumGCAge",
        "streamingConnectionIdleTimeout",
        "volumeStatsAggPeriod",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(warnings[0], expected, "log:\n{log}");
    assert!(
        log.contains(
            "Flag --pod-infra-container-image has been deprecated, will be removed in 1.27"
        ),
        "{log}"
    );
    // Honoured as upstream v1.26 honours it: image GC keeps the image.
    assert!(
        log.contains("--pod-infra-container-image will not be pruned by the image garbage collector in kubelet and should also be set in the remote runtime"),
        "{log}"
    );
    assert!(daemon.terminate().success());
}

#[test]
fn the_binary_loads_every_field_and_warns_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The file's client CA (kubeadm's path) is not on a test machine, and the kubelet
    // API, as upstream's, does not start without it: one of the test's own.
    let ca = dir.path().join("ca.crt");
    let certified = rcgen::generate_simple_self_signed(vec!["kubernetes".to_owned()])
        .expect("a self-signed CA");
    std::fs::write(&ca, certified.cert.pem()).expect("CA written");
    // Nor is the file's serving certificate (/var/lib/kubelet/pki, which only a kubelet
    // run before on this machine would have made): one of the test's own too.
    let serving = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("a self-signed serving certificate");
    let (cert, key) = (
        dir.path().join("kubelet.crt"),
        dir.path().join("kubelet.key"),
    );
    std::fs::write(&cert, serving.cert.pem()).expect("certificate written");
    std::fs::write(&key, serving.signing_key.serialize_pem()).expect("key written");
    let args: Vec<String> = vec![
        format!(
            "--config={}",
            fixture("kubelet-config-all-fields.yaml").display()
        ),
        format!("--root-dir={}", dir.path().join("root").display()),
        format!("--pod-logs-dir={}", dir.path().join("logs").display()),
        format!("--client-ca-file={}", ca.display()),
        format!("--tls-cert-file={}", cert.display()),
        format!("--tls-private-key-file={}", key.display()),
    ];
    let daemon = start_daemon(&args, false);
    let log = daemon.log_text();
    let warnings = warned_names(&log);
    assert_eq!(warnings.len(), 1, "log:\n{log}");
    assert_eq!(warnings[0], warned_for_the_all_fields_file(), "log:\n{log}");
}

/// `--help` groups the flags under one heading per state, each flag under its own.
#[test]
fn help_groups_the_flags_by_state() {
    let output = std::process::Command::new(common::BIN)
        .arg("--help")
        .output()
        .expect("runs");
    let help = String::from_utf8_lossy(&output.stdout);
    let position = |needle: &str| {
        help.find(needle)
            .unwrap_or_else(|| panic!("--help lacks {needle:?}"))
    };
    let starts: Vec<usize> = [State::Implemented, State::NotImplemented, State::Refused]
        .iter()
        .map(|state| position(&format!("\n{}:\n", cli::heading(*state))))
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] < w[1]),
        "headings in state order"
    );
    for spec in FLAGS {
        let own = format!("--{}", spec.name);
        let mut offset = 0;
        let mut at = None;
        for line in help.split_inclusive('\n') {
            let flag = line.trim_start().trim_start_matches("-v, ");
            let boundary = flag[own.len().min(flag.len())..].chars().next();
            if flag.starts_with(&own) && matches!(boundary, Some(' ' | '[' | '\n')) {
                at = Some(offset);
                break;
            }
            offset += line.len();
        }
        let at = at.unwrap_or_else(|| panic!("--help does not list {own}"));
        let section = starts
            .iter()
            .rposition(|s| *s < at)
            .expect("under a heading");
        let state = [State::Implemented, State::NotImplemented, State::Refused][section];
        assert_eq!(
            state, spec.state,
            "--{} is under the wrong heading",
            spec.name
        );
    }
}
