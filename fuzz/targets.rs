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

use rkubelet::adapters::apiserver::{ClientSettings, KubeConnector};
use rkubelet::adapters::cri::CriRuntime;
use rkubelet::domain::admission::{admit_pod, NodeInfo};
use rkubelet::domain::config::flags::{
    flag_value, parse_colon_multimap, parse_feature_gates, parse_taints, FLAGS,
};
use rkubelet::domain::config::layers::{file_layer, FileRole};
use rkubelet::domain::config::model::Taint;
use rkubelet::domain::config::{resolve, ConfigInputs, FileInput, NodeFacts};
use rkubelet::domain::eviction::{parse_eq_map, parse_lt_map, parse_threshold_config};
use rkubelet::domain::kubelet_api::auth::{anonymous_user, forbidden_message, request_attributes};
use rkubelet::domain::kubelet_api::logs::{decode_segment, parse_log_options, query_pairs};
use rkubelet::domain::kubelet_api::routes::{route, run_command, Port};
use rkubelet::domain::kuberuntime::image_reference::parse_normalized;
use rkubelet::domain::kuberuntime::runtime::{ContainerFilter, SandboxFilter};
use rkubelet::domain::node::machine::MachineInfo;
use rkubelet::domain::pod::api::decode_api_pod;
use rkubelet::domain::pod::static_pod::{decode_static_pods, PodSourceKind};
use rkubelet::domain::units::cpuset::CpuSet;
use rkubelet::domain::units::duration::GoDuration;
use rkubelet::domain::units::quantity::Quantity;
use rkubelet::domain::units::time::parse_rfc3339;
use rkubelet::ports::api::{ApiConnector, ConnectError};
use rkubelet::ports::error::Chain;
use rkubelet::ports::node_stats::RuntimeStats;
use rkubelet::ports::runtime::{ImageService, RuntimeService, StreamRequest};
use rkubelet::ports::runtime_status::RuntimeStatusService;

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
            name: "flag values and units (quantity, cpuset, duration, taints, feature gates, time, image reference, eviction thresholds)",
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
        Target {
            name: "API pods (JSON from the API server: decoded, validated, admitted)",
            seeds: API_POD_SEEDS,
            dictionary: API_POD_TOKENS,
            check: check_api_pod,
        },
        Target {
            name: "kubeconfig files",
            seeds: KUBECONFIG_SEEDS,
            dictionary: KUBECONFIG_TOKENS,
            check: check_kubeconfig,
        },
        Target {
            name: "CRI responses (the CRI adapter's calls answered with the input over gRPC)",
            seeds: CRI_SEEDS,
            dictionary: CRI_TOKENS,
            check: check_cri_response,
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
        7 if which % 16 == 7 => check_eviction_thresholds(text),
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

/// `--eviction-hard`/`--eviction-soft` and their grace periods and minimum reclaims, as
/// upstream's `ParseThresholdConfig` reads them together.
fn check_eviction_thresholds(text: &str) -> Result<(), String> {
    let (hard, rest) = text.split_once(';').unwrap_or((text, ""));
    let mut parts = rest.splitn(3, ';');
    let lt = |s: &str| parse_lt_map(s).map_err(|e| said(&e).err().unwrap_or_default());
    let hard = match lt(hard) {
        Ok(m) => m,
        Err(e) if e.is_empty() => return Ok(()),
        Err(e) => return Err(e),
    };
    let soft = lt(parts.next().unwrap_or_default()).unwrap_or_default();
    let grace = parse_eq_map(parts.next().unwrap_or_default()).unwrap_or_default();
    let reclaim = parse_eq_map(parts.next().unwrap_or_default()).unwrap_or_default();
    for enforced in [vec![], vec!["pods".to_string()]] {
        if let Err(e) = parse_threshold_config(&enforced, &hard, &soft, &grace, &reclaim) {
            said(&e)?;
        }
    }
    Ok(())
}

/// The node the fuzzed API pods are admitted on: labels, allocatable and a `NoExecute`
/// taint for the selectors, affinity, resources and tolerations to meet.
fn admission_node() -> NodeInfo {
    NodeInfo {
        name: "n1".into(),
        labels: [
            ("kubernetes.io/hostname", "n1"),
            ("kubernetes.io/os", "linux"),
            ("zone", "a"),
            ("size", "3"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        allocatable: [
            ("cpu", "2"),
            ("memory", "4Gi"),
            ("pods", "110"),
            ("ephemeral-storage", "10Gi"),
            ("example.com/gpu", "1"),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), Quantity::parse(v).ok()?)))
        .collect(),
        taints: vec![Taint {
            key: "dedicated".into(),
            value: "db".into(),
            effect: "NoExecute".into(),
            time_added: None,
        }],
    }
}

/// An API pod as the watch delivers it: JSON decoded, defaulted and validated (a pod
/// rkubelet cannot run is named with errors that say something, and gets a `Failed`
/// status), then admitted beside a running pod (upstream's predicates: resources,
/// node selector and affinity with its label and field selectors, host ports, taints).
fn check_api_pod(input: &[u8]) -> Result<(), String> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(input) else {
        return Ok(());
    };
    match decode_api_pod(&value) {
        Ok(api) => {
            let node = admission_node();
            let neighbour = decode_api_pod(&serde_json::json!({
                "metadata": {"name": "neighbour", "namespace": "default", "uid": "u0"},
                "spec": {"containers": [{"name": "c", "image": "busybox",
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
            }))
            .map_err(|e| format!("the neighbour pod does not decode: {e:?}"))?;
            match admit_pod(&api.pod, &[neighbour.pod], &node) {
                Ok(()) => Ok(()),
                Err(r) if r.reason.is_empty() => {
                    Err(format!("a rejection without a reason: {r:?}"))
                }
                Err(r) => nonempty(&r.message),
            }
        }
        Err(invalid) => {
            if invalid.errors.is_empty() {
                return Err("an invalid pod without an error".into());
            }
            invalid
                .errors
                .iter()
                .try_for_each(|e| nonempty(&e.to_string()))?;
            nonempty(&invalid.status().message)
        }
    }
}

thread_local! {
    /// A private folder for the kubeconfig target's files, and a runtime for the client.
    static KUBECONFIG_PEER: std::cell::RefCell<Option<(tempfile::TempDir, tokio::runtime::Runtime)>> =
        const { std::cell::RefCell::new(None) };
}

/// A kubeconfig as `--kubeconfig` or `--bootstrap-kubeconfig` names it: inspected (its
/// current context, server, certificate) and made into a client (certificates parsed, no
/// request sent); each gives a client or an error naming the file and the problem.
fn check_kubeconfig(input: &[u8]) -> Result<(), String> {
    KUBECONFIG_PEER.with(|peer| {
        let mut peer = peer.borrow_mut();
        if peer.is_none() {
            let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("tokio runtime: {e}"))?;
            *peer = Some((dir, runtime));
        }
        let Some((dir, runtime)) = peer.as_ref() else {
            return Err("no kubeconfig peer".into());
        };
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, input).map_err(|e| format!("{}: {e}", path.display()))?;
        let connector = KubeConnector::new(ClientSettings::default());
        let named = |e: &ConnectError| {
            let message = Chain(e).to_string();
            if message.contains(&path.display().to_string()) {
                Ok(())
            } else {
                Err(format!("an error that does not name the file: {message}"))
            }
        };
        if let Err(e) = connector.inspect(&path) {
            named(&e)?;
        }
        match runtime.block_on(connector.connect(&path)) {
            Ok(_) => Ok(()),
            Err(e) => named(&e),
        }
    })
}

/// A CRI runtime in this process that answers every call with the fuzzed input as its
/// response message, so the CRI adapter's mapping meets whatever a runtime could send.
struct CriPeer {
    client: CriRuntime,
    answer: std::sync::Arc<std::sync::Mutex<hyper::body::Bytes>>,
    runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

thread_local! {
    static CRI_PEER: std::cell::RefCell<Option<CriPeer>> = const { std::cell::RefCell::new(None) };
}

/// A unary gRPC answer (or one message of a stream) carrying `message`, status OK.
fn grpc_answer(
    message: hyper::body::Bytes,
) -> hyper::Response<
    http_body_util::combinators::BoxBody<hyper::body::Bytes, std::convert::Infallible>,
> {
    use http_body_util::BodyExt;
    let mut framed = Vec::with_capacity(message.len() + 5);
    framed.push(0);
    framed.extend_from_slice(
        &u32::try_from(message.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    framed.extend_from_slice(&message);
    let mut trailers = hyper::HeaderMap::new();
    trailers.insert("grpc-status", hyper::header::HeaderValue::from_static("0"));
    let body = http_body_util::Full::new(hyper::body::Bytes::from(framed))
        .with_trailers(async move { Some(Ok(trailers)) })
        .boxed();
    let mut response = hyper::Response::new(body);
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/grpc"),
    );
    response
}

fn start_cri_peer() -> Result<CriPeer, String> {
    use http_body_util::BodyExt;
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let socket = dir.path().join("cri.sock");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let listener = runtime
        .block_on(async { tokio::net::UnixListener::bind(&socket) })
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    let answer = std::sync::Arc::new(std::sync::Mutex::new(hyper::body::Bytes::new()));
    let served = answer.clone();
    runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let served = served.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let served = served.clone();
                        async move {
                            let _ = req.into_body().collect().await;
                            let message = served.lock().map(|m| m.clone()).unwrap_or_default();
                            Ok::<_, std::convert::Infallible>(grpc_answer(message))
                        }
                    },
                );
                let _ =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
            });
        }
    });
    // The client's channel spawns its worker on the current runtime.
    let _entered = runtime.enter();
    let client = CriRuntime::connect(
        &format!("unix://{}", socket.display()),
        Duration::from_secs(5),
    )
    .map_err(|e| format!("CRI client: {e}"))?;
    Ok(CriPeer {
        client,
        answer,
        runtime,
        _dir: dir,
    })
}

/// A CRI call the adapter maps (picked by the first byte), answered with the rest of the
/// input: it gives a value or a typed error that says something.
fn check_cri_response(input: &[u8]) -> Result<(), String> {
    CRI_PEER.with(|peer| {
        let mut peer = peer.borrow_mut();
        if peer.is_none() {
            *peer = Some(start_cri_peer()?);
        }
        let Some(peer) = peer.as_ref() else {
            return Err("no CRI peer".into());
        };
        // The first byte picks the call; the rest is the message it is answered with.
        let (which, message) = input.split_first().map_or((0, input), |(b, r)| (*b, r));
        if let Ok(mut answer) = peer.answer.lock() {
            *answer = hyper::body::Bytes::copy_from_slice(message);
        }
        let c = &peer.client;
        peer.runtime.block_on(async {
            let outcome = match which % 19 {
                0 => c.version().await.map(drop),
                1 => c.pod_sandbox_status("s").await.map(drop),
                2 => c
                    .list_pod_sandboxes(&SandboxFilter::default())
                    .await
                    .map(drop),
                3 => c.container_status("c").await.map(drop),
                4 => c
                    .list_containers(&ContainerFilter::default())
                    .await
                    .map(drop),
                5 => c
                    .exec_sync("c", &["true".to_string()], Duration::from_secs(1))
                    .await
                    .map(drop),
                6 => c
                    .streaming_url(&StreamRequest::PortForward {
                        sandbox_id: "s".into(),
                        ports: vec![80],
                    })
                    .await
                    .map(drop),
                7 => c.cgroup_driver().await.map(drop),
                8 => c.image_status("busybox").await.map(drop),
                9 => c.pull_image("busybox", None).await.map(drop),
                10 => c.runtime_conditions().await.map(drop),
                11 => RuntimeStatusService::list_images(c).await.map(drop),
                12 => c.image_fs_info().await.map(drop),
                13 => c.container_stats().await.map(drop),
                14 => RuntimeStats::list_images(c).await.map(drop),
                15 => c.images_in_use().await.map(drop),
                16 => c.pod_sandbox_stats().await.map(drop),
                17 => c.reopen_container_log("c").await,
                _ => match c.container_events().await {
                    Ok(mut events) => match events.next().await {
                        Some(Err(e)) => Err(e),
                        _ => Ok(()),
                    },
                    Err(e) => Err(e),
                },
            };
            match outcome {
                Ok(()) => Ok(()),
                Err(e) => said(&e),
            }
        })
    })
}

/// Stops the peers a target started on this thread (the CRI runtime, the kubeconfig
/// folder), so a run leaves nothing behind.
fn stop_peers() {
    CRI_PEER.with(|peer| peer.borrow_mut().take());
    KUBECONFIG_PEER.with(|peer| peer.borrow_mut().take());
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
    stop_peers();
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

const API_POD_SEEDS: &[&str] = &[
    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","uid":"0b1c2d3e-0000-4000-8000-000000000001","creationTimestamp":"2024-01-01T00:00:00Z","labels":{"app":"web"}},"spec":{"nodeName":"n1","nodeSelector":{"zone":"a"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"size","operator":"Gt","values":["2"]},{"key":"zone","operator":"In","values":["a","b"]}]},{"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}]}]}}},"tolerations":[{"key":"dedicated","operator":"Equal","value":"db","effect":"NoExecute","tolerationSeconds":30},{"operator":"Exists"}],"containers":[{"name":"main","image":"busybox:1.36","ports":[{"containerPort":80,"hostPort":8081,"protocol":"TCP"}],"resources":{"requests":{"cpu":"250m","memory":"64Mi","example.com/gpu":"1"},"limits":{"cpu":"500m","memory":"128Mi","example.com/gpu":"1"}},"env":[{"name":"A","value":"b"},{"name":"NODE","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}]}],"initContainers":[{"name":"init","image":"busybox","command":["true"]}],"volumes":[{"name":"cm","configMap":{"name":"settings","items":[{"key":"k","path":"k"}]}}]},"status":{"phase":"Pending"}}"#,
    r#"{"metadata":{"name":"db","namespace":"kube-system","uid":"u2","deletionTimestamp":"2024-01-01T00:00:10Z","deletionGracePeriodSeconds":30,"annotations":{"kubernetes.io/config.mirror":"abc"}},"spec":{"os":{"name":"linux"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"NotIn","values":["c"]},{"key":"gpu","operator":"DoesNotExist"},{"key":"kubernetes.io/hostname","operator":"Exists"}]}]}}},"containers":[{"name":"c","image":"example.com/db@sha256:0000000000000000000000000000000000000000000000000000000000000000","resources":{"requests":{"cpu":"3","ephemeral-storage":"1Gi"}}}]}}"#,
];

const API_POD_TOKENS: &[&str] = &[
    "\"In\"",
    "\"NotIn\"",
    "\"Exists\"",
    "\"DoesNotExist\"",
    "\"Gt\"",
    "\"Lt\"",
    "\"matchFields\"",
    "\"matchExpressions\"",
    "\"metadata.name\"",
    "\"nodeSelectorTerms\"",
    "\"NoExecute\"",
    "\"NoSchedule\"",
    "\"Equal\"",
    "\"tolerationSeconds\"",
    "\"hostPort\"",
    "\"requests\"",
    "\"limits\"",
    "\"cpu\"",
    "\"memory\"",
    "\"pods\"",
    "\"hugepages-2Mi\"",
    "\"1e3\"",
    "\"-1\"",
    "\"0.5Gi\"",
    "\"9223372036854775807\"",
    "\"1Ei\"",
    "\"linux\"",
    "\"windows\"",
    "null",
    "[]",
    "{}",
    "true",
    "0",
    "-1",
    "1e308",
    "\"\"",
    ",",
    ":",
    "{",
    "}",
    "[",
    "]",
    "\"nodeName\"",
    "\"n2\"",
    "\"restartPolicy\"",
    "\"Never\"",
    "\"hostNetwork\"",
];

const KUBECONFIG_SEEDS: &[&str] = &[
    "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJlRENDQVIyZ0F3SUJBZ0lCQURBS0JnZ3Foa2pPUFFRREFqQWpNU0V3SHdZRFZRUUREQmhyTTNNdGMyVnkKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=\ncontexts:\n- name: node\n  context:\n    cluster: local\n    user: node\n    namespace: default\ncurrent-context: node\nusers:\n- name: node\n  user:\n    token: abcdef.0123456789abcdef\n",
    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://[::1]:6443/prefix\n    insecure-skip-tls-verify: true\n    tls-server-name: kubernetes\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user:\n    client-certificate: kubelet-client-current.pem\n    client-key: kubelet-client-current.pem\n",
    "{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"http://localhost:8080\"}}],\"contexts\":[{\"name\":\"x\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}],\"current-context\":\"x\",\"users\":[{\"name\":\"u\",\"user\":{\"username\":\"a\",\"password\":\"b\",\"client-certificate-data\":\"bm90IGEgY2VydA==\",\"client-key-data\":\"\"}}]}",
];

const KUBECONFIG_TOKENS: &[&str] = &[
    "server: ",
    "https://",
    "http://",
    "unix:///",
    ":0",
    ":65536",
    "[::1]",
    "%zz",
    "certificate-authority: ",
    "certificate-authority-data: ",
    "client-certificate-data: ",
    "client-key-data: ",
    "token: ",
    "tokenFile: ",
    "current-context: ",
    "context:",
    "cluster: ",
    "user: ",
    "users:",
    "clusters:",
    "contexts:",
    "name: ",
    "proxy-url: ",
    "socks5://",
    "insecure-skip-tls-verify: true",
    "tls-server-name: ",
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
    "-----BEGIN CERTIFICATE-----\n",
    "-----BEGIN EC PRIVATE KEY-----\n",
    "====",
    "&a ",
    "*a",
    "~",
    "null",
    "[]",
    "{}",
    "\n- ",
    "\n  ",
    "---\n",
    "\t",
    "\u{0}",
];

/// Valid CRI response messages to mutate (protobuf; every call reads the same bytes as
/// its own response type, so field numbers and wire types meet every message). Bytes
/// over 0x7f come from the mutations and the arbitrary inputs (the seeds are text).
const CRI_SEEDS: &[&str] = &[
    // Version: version, runtime_name, runtime_version, runtime_api_version.
    "\x00\n\x060.1.0\x12\ncontainerd\x1a\x07v1.6.20\"\x02v1",
    // A list of one item with metadata, state, created_at, labels, annotations.
    "\n0\n\x02id\x12\x16\n\x04name\x12\x03uid\x1a\x02ns \x01\x18\x01 \x7f*\x08\n\x01a\x12\x03b\x00",
    // Status with an id, a string, a nested message and varints.
    "\n\x1e\n\x03cid\x12\x08\n\x04main\x10\x02\x18\x01 \x01(\x02",
    "",
];

const CRI_TOKENS: &[&str] = &[
    "\x08\x01",
    "\x08\x7f",
    "\x10\x02",
    "\x18\x03",
    " \x04",
    "(\x05",
    "\n\x00",
    "\n\x7f",
    "\x12\x00",
    "\x1a\x00",
    "\"\x00",
    "*\x00",
    "2\x00",
    "\x0a\x05hello",
    "\x0d\x00\x00\x00\x00",
    "\x09\x00\x00\x00\x00\x00\x00\x00\x00",
    "\x0b",
    "\x0c",
    "\x0f",
    "\x07",
];
