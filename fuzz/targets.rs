//! Fuzz targets for the parsers that take outside input (issue 17), on stable Rust:
//! proptest generates inputs, either arbitrary bytes or a seed (a valid input) put through
//! a few structured mutations (bytes flipped, ranges cut or repeated, tokens of the
//! format's dictionary inserted), and each target checks that its parser answers with a
//! value or a typed error whose message says something, without panicking. A failing
//! input is shrunk by proptest and printed; it then becomes a regression test
//! (`regressions` in tests/integration/fuzz.rs).
//!
//! Shared by the short runs in the tests (tests/integration/fuzz.rs) and the long runs
//! in the bench `fuzz` (benches/fuzz.rs).

use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use rkubelet::domain::config::flags::{
    flag_value, parse_colon_multimap, parse_feature_gates, parse_taints, FLAGS,
};
use rkubelet::domain::config::layers::{file_layer, FileRole};
use rkubelet::domain::config::{resolve, ConfigInputs, FileInput, NodeFacts};
use rkubelet::domain::kubelet_api::auth::{anonymous_user, forbidden_message, request_attributes};
use rkubelet::domain::kubelet_api::logs::{decode_segment, parse_log_options, query_pairs};
use rkubelet::domain::kubelet_api::routes::{route, run_command, Port};
use rkubelet::domain::kuberuntime::image_reference::parse_normalized;
use rkubelet::domain::node::machine::MachineInfo;
use rkubelet::domain::pod::static_pod::{decode_static_pods, PodSourceKind};
use rkubelet::domain::units::cpuset::CpuSet;
use rkubelet::domain::units::duration::GoDuration;
use rkubelet::domain::units::quantity::Quantity;
use rkubelet::domain::units::time::parse_rfc3339;

/// One parser under fuzzing.
pub struct Target {
    pub name: &'static str,
    /// Valid inputs the mutations start from.
    pub seeds: &'static [&'static str],
    /// Tokens of the input's format, inserted by the mutations.
    pub dictionary: &'static [&'static str],
    /// Runs the parser on one input; `Err` is a property broken (a panic is one too).
    pub check: fn(&[u8]) -> Result<(), String>,
}

/// Every target.
pub fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "static pod manifest",
            seeds: MANIFEST_SEEDS,
            dictionary: MANIFEST_TOKENS,
            check: check_manifest,
        },
        Target {
            name: "KubeletConfiguration file (YAML, JSON, TOML)",
            seeds: CONFIG_SEEDS,
            dictionary: CONFIG_TOKENS,
            check: check_config_file,
        },
        Target {
            name: "command line flags",
            seeds: FLAG_SEEDS,
            dictionary: FLAG_TOKENS,
            check: check_flags,
        },
        Target {
            name: "flag values and units (quantity, cpuset, duration, taints, feature gates, time, image reference)",
            seeds: VALUE_SEEDS,
            dictionary: VALUE_TOKENS,
            check: check_values,
        },
        Target {
            name: "kubelet API request targets (10250 paths and queries)",
            seeds: REQUEST_SEEDS,
            dictionary: REQUEST_TOKENS,
            check: check_request_target,
        },
    ]
}

/// A typed error's message must say something.
fn said(error: &dyn std::error::Error) -> Result<(), String> {
    if error.to_string().trim().is_empty() {
        Err(format!("an error without a message: {error:?}"))
    } else {
        Ok(())
    }
}

fn check_manifest(input: &[u8]) -> Result<(), String> {
    match decode_static_pods(
        "fuzz.yaml",
        input,
        "n1",
        PodSourceKind::File,
        "2024-01-01T00:00:00Z",
    ) {
        Ok(pods) => pods.iter().try_for_each(|p| {
            // A decoded pod is one the node can name and key.
            if p.metadata.name.is_empty() || p.metadata.uid.is_empty() {
                Err(format!("a pod without a name or uid: {:?}", p.metadata))
            } else {
                Ok(())
            }
        }),
        Err(e) => said(&e),
    }
}

fn node_facts() -> NodeFacts {
    NodeFacts {
        hostname: "n1".into(),
        machine: MachineInfo {
            num_cores: 2,
            online_cpus: CpuSet::new([0, 1]),
            memory_capacity_bytes: 8 << 30,
            root_fs_capacity_bytes: 100 << 30,
            pid_max: 4_194_304,
            boot_id: "boot".into(),
            machine_id: "machine".into(),
            system_uuid: String::new(),
            hugepages: Vec::new(),
            apparmor_enabled: false,
        },
    }
}

fn check_config_file(input: &[u8]) -> Result<(), String> {
    // The first byte picks the file's format by its extension, as the app does.
    let (ext, rest) = match input.split_first() {
        Some((b, rest)) => (["yaml", "json", "toml", "conf"][usize::from(*b % 4)], rest),
        None => ("yaml", input),
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return Ok(()); // the app reads the file as UTF-8 first, with its own error
    };
    let path = Path::new("/etc/kubernetes").join(format!("kubelet.{ext}"));
    if let Err(problems) = file_layer(&path, text, FileRole::Main) {
        problems.iter().try_for_each(|p| said(p))?;
    }
    let mut inputs = ConfigInputs::from_flags(Vec::new());
    inputs.main_file = Some(FileInput {
        path,
        text: Ok(text.to_string()),
    });
    match resolve(&inputs, &node_facts()) {
        Ok(_) => Ok(()),
        Err(problems) => problems.iter().try_for_each(|p| said(p)),
    }
}

fn check_flags(input: &[u8]) -> Result<(), String> {
    // One argument a line.
    let text = String::from_utf8_lossy(input);
    let args = std::iter::once("rkubelet").chain(text.lines());
    let Ok(flags) = rkubelet::app::cli::parse(args) else {
        return Ok(()); // clap's own error, with its message and usage
    };
    match resolve(&ConfigInputs::from_flags(flags), &node_facts()) {
        Ok(_) => Ok(()),
        Err(problems) => problems.iter().try_for_each(|p| said(p)),
    }
}

fn check_values(input: &[u8]) -> Result<(), String> {
    let (which, rest) = input.split_first().map_or((0, input), |(b, r)| (*b, r));
    let text = String::from_utf8_lossy(rest);
    let text = text.as_ref();
    match which % 8 {
        0 => Quantity::parse(text).map(drop).or_else(|e| said(&e)),
        1 => CpuSet::parse(text).map(drop).or_else(|e| said(&e)),
        2 => GoDuration::parse(text).map(drop).or_else(|e| said(&e)),
        3 => parse_taints(text).map(drop).or_else(|e| nonempty(&e)),
        4 => parse_feature_gates(text)
            .map(drop)
            .or_else(|e| nonempty(&e)),
        5 => parse_colon_multimap(text)
            .map(drop)
            .or_else(|e| nonempty(&e)),
        6 => {
            let _ = parse_rfc3339(text);
            // An API pod's image name, read before any pull.
            parse_normalized(text).map(drop).or_else(|e| said(&e))
        }
        _ => {
            // Every flag's value parser.
            let spec = &FLAGS[usize::from(which / 8) % FLAGS.len()];
            flag_value(spec, text).map(drop).or_else(|e| said(&e))
        }
    }
}

/// A request target on the kubelet API (`path?query`): routed on every port, authorized,
/// its segments decoded (never to a slash: an encoded slash names no pod, container or
/// file) and its log options parsed, with upstream's 400s for what they refuse.
fn check_request_target(input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    let (path, query) = text.split_once('?').unwrap_or((text.as_ref(), ""));
    for port in [
        Port::Secure { debugging: true },
        Port::Secure { debugging: false },
        Port::ReadOnly,
    ] {
        let _ = route(path, port);
    }
    let attributes = request_attributes(anonymous_user(), "GET", path, "n1");
    nonempty(&forbidden_message(&attributes))?;
    for segment in path.split('/') {
        if decode_segment(segment).is_some_and(|s| s.contains('/')) {
            return Err(format!("segment {segment:?} decoded to a slash"));
        }
    }
    let _ = query_pairs(query);
    let _ = run_command(query);
    match parse_log_options(query, 1_700_000_000_000_000_000) {
        Ok(_) => Ok(()),
        Err(e) if (400..500).contains(&e.status) => nonempty(&e.message),
        Err(e) => Err(format!(
            "a refused query answered {}: {}",
            e.status, e.message
        )),
    }
}

fn nonempty(message: &str) -> Result<(), String> {
    if message.trim().is_empty() {
        Err("an empty error message".into())
    } else {
        Ok(())
    }
}

/// One structured mutation of an input.
#[derive(Debug, Clone)]
enum Mutation {
    /// Set the byte at (position mod length).
    Byte(usize, u8),
    /// Insert the dictionary's token (index mod size) at the position.
    Token(usize, usize),
    /// Cut `len` bytes at the position.
    Cut(usize, usize),
    /// Repeat the `len` bytes at the position `times` times.
    Repeat(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Byte(p, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(p, t)| Mutation::Token(p, t)),
        (any::<usize>(), 1usize..32).prop_map(|(p, l)| Mutation::Cut(p, l)),
        (any::<usize>(), 1usize..64, 1usize..64).prop_map(|(p, l, t)| Mutation::Repeat(p, l, t)),
    ]
}

fn apply(seed: &[u8], mutations: &[Mutation], dictionary: &[&str]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for m in mutations {
        let at = |p: usize, len: usize| if len == 0 { 0 } else { p % (len + 1) };
        match *m {
            Mutation::Byte(p, b) => {
                if !out.is_empty() {
                    let i = p % out.len();
                    out[i] = b;
                }
            }
            Mutation::Token(p, t) => {
                if !dictionary.is_empty() {
                    let token = dictionary[t % dictionary.len()].as_bytes();
                    let i = at(p, out.len());
                    out.splice(i..i, token.iter().copied());
                }
            }
            Mutation::Cut(p, l) => {
                let i = at(p, out.len());
                let end = (i + l).min(out.len());
                out.drain(i..end);
            }
            Mutation::Repeat(p, l, times) => {
                let i = at(p, out.len());
                let end = (i + l).min(out.len());
                let piece = out[i..end].to_vec();
                for _ in 0..times {
                    out.splice(end..end, piece.iter().copied());
                }
            }
        }
    }
    out
}

/// The inputs of a target: a seed mutated one to eight times (most), the seed as it is,
/// or arbitrary bytes.
fn inputs(target: &Target) -> BoxedStrategy<Vec<u8>> {
    let seeds: Vec<&'static str> = target.seeds.to_vec();
    let dictionary: Vec<&'static str> = target.dictionary.to_vec();
    let mutated = (
        proptest::sample::select(seeds.clone()),
        proptest::collection::vec(mutation(), 1..8),
    )
        .prop_map(move |(seed, ms)| apply(seed.as_bytes(), &ms, &dictionary));
    prop_oneof![
        8 => mutated,
        1 => proptest::sample::select(seeds).prop_map(|s| s.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..512),
    ]
    .boxed()
}

/// What a run of one target did.
#[derive(Debug)]
pub struct Report {
    pub target: &'static str,
    pub executions: u32,
    pub took: Duration,
    pub slowest: Duration,
    /// The shrunk failing input and what broke, if any.
    pub failure: Option<String>,
}

/// Runs `target` on `cases` inputs from `seed`.
pub fn run(target: &Target, cases: u32, seed: u64) -> Report {
    let config = Config {
        cases,
        failure_persistence: None,
        // Shrinking a failure may take many runs; a bound keeps a run's time bounded.
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed));
    let mut runner = TestRunner::new_with_rng(config, rng);
    let check = target.check;
    let slowest = std::cell::Cell::new(Duration::ZERO);
    let executions = std::cell::Cell::new(0u32);
    let started = Instant::now();
    let result = runner.run(&inputs(target), |input| {
        let began = Instant::now();
        let outcome = check(&input);
        slowest.set(slowest.get().max(began.elapsed()));
        executions.set(executions.get() + 1);
        outcome.map_err(TestCaseError::fail)
    });
    Report {
        target: target.name,
        executions: executions.get(),
        took: started.elapsed(),
        slowest: slowest.get(),
        failure: result.err().map(|e| format!("{e}")),
    }
}

fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(seed.wrapping_add(i as u64)).to_le_bytes());
    }
    bytes
}

const MANIFEST_SEEDS: &[&str] = &[
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: kube-system\n  labels:\n    app: web\nspec:\n  containers:\n  - name: main\n    image: busybox:1.36\n    command: [\"sh\", \"-c\", \"sleep 3600\"]\n    resources:\n      limits:\n        cpu: 500m\n        memory: 64Mi\n    ports:\n    - containerPort: 80\n      protocol: TCP\n    env:\n    - name: A\n      value: b\n    volumeMounts:\n    - name: scratch\n      mountPath: /scratch\n  volumes:\n  - name: scratch\n    emptyDir:\n      sizeLimit: 1Gi\n",
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"j\"},\"spec\":{\"initContainers\":[{\"name\":\"i\",\"image\":\"busybox\"}],\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"securityContext\":{\"runAsUser\":1000,\"capabilities\":{\"drop\":[\"ALL\"]}}}],\"hostNetwork\":true,\"terminationGracePeriodSeconds\":5}}",
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: nginx\n    livenessProbe:\n      httpGet:\n        path: /\n        port: 80\n      periodSeconds: 3\n  tolerations:\n  - key: k\n    operator: Exists\n    effect: NoSchedule\n  dnsPolicy: ClusterFirst\n  dnsConfig:\n    nameservers: [1.1.1.1]\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\nspec:\n  containers:\n  - name: c\n    image: nginx\n",
];

const MANIFEST_TOKENS: &[&str] = &[
    ": ",
    "\n",
    "\n  ",
    "\n    ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "&a ",
    "*a",
    "<<: *a",
    "!!binary ",
    "!!str ",
    "? ",
    "|\n",
    ">-\n",
    "\"",
    "'",
    "~",
    "null",
    "true",
    "---\n",
    "...\n",
    "#",
    "\t",
    "kind: PodList\nitems:\n",
    "containers:",
    "initContainers:",
    "image: ",
    "name: ",
    "resources:",
    "limits:",
    "requests:",
    "cpu: ",
    "memory: ",
    "hugepages-2Mi: ",
    "1e400",
    "-1",
    "0",
    "9223372036854775808",
    "18446744073709551616",
    "0.000000001",
    "1Ei",
    "1.5Ki",
    "env:",
    "valueFrom:",
    "securityContext:",
    "runAsUser: ",
    "sysctls:",
    "seccompProfile:",
    "volumes:",
    "hostPath:",
    "path: ",
    "emptyDir: {}",
    "sizeLimit: ",
    "ports:",
    "containerPort: ",
    "hostPort: ",
    "terminationGracePeriodSeconds: ",
    "uid: ",
    "namespace: ",
    "annotations:",
    "labels:",
    "é",
    "\u{0}",
    "\u{feff}",
    "\\u0000",
    "\u{202e}",
];

const CONFIG_SEEDS: &[&str] = &[
    "\u{0}apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\nmaxPods: 50\nevictionHard:\n  memory.available: 100Mi\n  nodefs.available: 10%\nsystemReserved:\n  cpu: 100m\n  memory: 256Mi\nreservedSystemCPUs: \"0\"\nfeatureGates:\n  GracefulNodeShutdown: true\nstaticPodPath: /etc/kubernetes/manifests\nsyncFrequency: 1m\nfileCheckFrequency: 20s\nregisterWithTaints:\n- key: k\n  value: v\n  effect: NoSchedule\ncontainerLogMaxSize: 10Mi\n",
    "\u{1}{\"apiVersion\":\"kubelet.config.k8s.io/v1beta1\",\"kind\":\"KubeletConfiguration\",\"port\":10250,\"readOnlyPort\":0,\"cpuManagerPolicy\":\"static\",\"kubeReserved\":{\"cpu\":\"1\"},\"evictionSoft\":{\"memory.available\":\"1Gi\"},\"evictionSoftGracePeriod\":{\"memory.available\":\"30s\"},\"shutdownGracePeriod\":\"30s\",\"tlsCipherSuites\":[\"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\"]}",
    "\u{2}apiVersion = \"kubelet.config.k8s.io/v1beta1\"\nkind = \"KubeletConfiguration\"\nmaxPods = 20\nimageGCHighThresholdPercent = 85\n[evictionHard]\n\"memory.available\" = \"200Mi\"\n",
];

const CONFIG_TOKENS: &[&str] = &[
    ": ",
    "\n",
    "\n  ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\"",
    "=",
    "[x]\n",
    "&a ",
    "*a",
    "~",
    "null",
    "true",
    "maxPods: ",
    "podPidsLimit: ",
    "cgroupDriver: ",
    "cgroupsPerQOS: ",
    "evictionHard:",
    "memory.available",
    "<",
    "%",
    "-5%",
    "101%",
    "nodefs.inodesFree",
    "systemReserved:",
    "kubeReserved:",
    "enforceNodeAllocatable: [pods]",
    "cpuManagerPolicy: ",
    "static",
    "reservedSystemCPUs: ",
    "0-",
    "1-0",
    "featureGates:",
    "NoSuchGate: true",
    "syncFrequency: ",
    "1h2m3s",
    "-1s",
    "9999999999h",
    "1.5µs",
    "address: ",
    "::1",
    "port: ",
    "65536",
    "clusterDNS: [",
    "staticPodURLHeader:",
    "registerWithTaints:",
    "effect: ",
    "NoExecute",
    "tlsMinVersion: ",
    "VersionTLS13",
    "logging:",
    "format: json",
    "shutdownGracePeriodByPodPriority:",
    "memorySwap:",
    "kind: ",
    "apiVersion: ",
    "é",
    "\u{0}",
];

const FLAG_SEEDS: &[&str] = &[
    "--hostname-override=n1\n--pod-manifest-path=/etc/kubernetes/manifests\n--max-pods=30\n--eviction-hard=memory.available<100Mi,nodefs.available<10%\n--system-reserved=cpu=100m,memory=256Mi\n--node-labels=a=b,node-role.kubernetes.io/worker=\n--register-with-taints=k=v:NoSchedule\n--feature-gates=GracefulNodeShutdown=true\n",
    "--cgroup-driver=systemd\n--cpu-manager-policy=static\n--reserved-cpus=0\n--kube-reserved=cpu=1\n--runtime-request-timeout=2m\n--node-ip=10.0.0.1\n--v=4\n--tls-cipher-suites=TLS_AES_128_GCM_SHA256\n--allowed-unsafe-sysctls=net.core.*\n--cluster-dns=10.96.0.10\n--healthz-port=10248\n",
    "--root-dir\n/var/lib/kubelet\n--sync-frequency\n1m\n--node-status-update-frequency=10s\n--image-gc-high-threshold=85\n--image-gc-low-threshold=80\n--container-log-max-size=10Mi\n--enforce-node-allocatable=pods,system-reserved\n--system-reserved-cgroup=/system.slice\n",
];

const FLAG_TOKENS: &[&str] = &[
    "\n",
    "=",
    ",",
    "--",
    "-",
    "--eviction-hard=",
    "--eviction-soft=",
    "memory.available<",
    "%",
    "--system-reserved=",
    "cpu=",
    "memory=",
    "--reserved-cpus=",
    "0-",
    "--node-labels=",
    "kubernetes.io/",
    "--register-with-taints=",
    ":NoSchedule",
    ":Bogus",
    "--feature-gates=",
    "=true",
    "=maybe",
    "--kube-reserved=",
    "--max-pods=",
    "-1",
    "99999999999999999999",
    "--cpu-manager-policy=",
    "--node-ip=",
    "::",
    "--cgroup-driver=",
    "--runtime-request-timeout=",
    "h",
    "ms",
    "--v=",
    "--tls-cipher-suites=",
    "--allowed-unsafe-sysctls=",
    "--config=",
    "--help",
    "--version",
    "--pod-max-pids=",
    "--address=",
    "--port=",
    "--oom-score-adj=",
    "--eviction-pressure-transition-period=",
    "--qos-reserved=",
    "memory=50%",
    "é",
    "\u{0}",
];

const VALUE_SEEDS: &[&str] = &[
    "\u{0}1.5Gi",
    "\u{8}250m",
    "\u{1}0-3,8,10-11",
    "\u{2}1h2m3.5s",
    "\u{3}key=value:NoSchedule,other:NoExecute",
    "\u{4}A=true,B=false",
    "\u{5}a:b,c:d",
    "\u{6}2024-01-01T00:00:00.123456789+01:00",
    "\u{6}registry.example.com:5000/team/app_x/web-1:v1.2@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "\u{7}memory.available<100Mi",
    "\u{f}cpu=1,memory=2Gi",
    "\u{17}10.0.0.1",
    "\u{1f}true",
];

const VALUE_TOKENS: &[&str] = &[
    "0",
    "1",
    "-",
    "+",
    ".",
    "e",
    "E",
    "i",
    "Ki",
    "Mi",
    "Gi",
    "Ti",
    "Pi",
    "Ei",
    "m",
    "u",
    "n",
    "k",
    "M",
    "G",
    "999999999999999999999",
    "1e18",
    "e-9",
    ",",
    "-",
    "=",
    "@sha256:",
    "/",
    "__",
    ":",
    "<",
    "%",
    "h",
    "ms",
    "µs",
    "ns",
    "s",
    "T",
    "Z",
    "+25:00",
    "NoSchedule",
    "true",
    " ",
    "é",
    "\u{0}",
];

const REQUEST_SEEDS: &[&str] = &[
    "/containerLogs/default/web/app?tailLines=10&timestamps=true",
    "/containerLogs/ns/pod/c?sinceTime=2024-01-01T00:00:00Z&limitBytes=100&previous=true&follow=true",
    "/containerLogs/ns/pod/c?sinceSeconds=30",
    "/exec/default/web/app?command=ls&command=-l&output=1&error=1",
    "/attach/default/web/app?output=1",
    "/portForward/default/web?port=80",
    "/run/default/web/app?cmd=ls%20-l",
    "/stats/summary",
    "/metrics/cadvisor",
    "/pods",
    "/logs/",
];

const REQUEST_TOKENS: &[&str] = &[
    "%2F",
    "%2f",
    "%2e%2e",
    "..",
    "/",
    "//",
    "?",
    "&",
    "=",
    "%",
    "%zz",
    "+",
    "%00",
    "tailLines=",
    "limitBytes=",
    "sinceSeconds=",
    "sinceTime=",
    "previous=",
    "follow=",
    "timestamps=",
    "-1",
    "0",
    "99999999999999999999",
    "9223372036854775807",
    "true",
    "maybe",
    "/containerLogs/",
    "/exec/",
    "/portForward/",
    "/metrics",
    "/stats/",
    "/debug/pprof/",
];
