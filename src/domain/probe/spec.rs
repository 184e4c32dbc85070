//! A container's probes (`livenessProbe`, `readinessProbe`, `startupProbe`) and
//! lifecycle hooks (`postStart`, `preStop`) as the v1 API has them, with upstream's
//! defaults (`SetDefaults_Probe`, `SetDefaults_HTTPGetAction`), the enum check of the
//! decoder (`httpGet.scheme`) and upstream's validation, in its words.
//!
//! What the kubelet does with them is the rest of `domain::probe`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::domain::pod::validate::{
    invalid, port_name_errors, quoted, required, supported_list, PodError,
};
use crate::domain::pod::Container;

/// Upstream's `SetDefaults_Probe`: a probe gives up after 1 s, runs every 10 s, and
/// turns after 1 success or 3 failures in a row.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 1;
pub const DEFAULT_PERIOD_SECONDS: i32 = 10;
pub const DEFAULT_SUCCESS_THRESHOLD: i32 = 1;
pub const DEFAULT_FAILURE_THRESHOLD: i32 = 3;

const HTTP_SCHEMES: [&str; 2] = ["HTTP", "HTTPS"];
const PORT_RANGE_ERR: &str = "must be between 1 and 65535, inclusive";
const NONNEGATIVE_ERR: &str = "must be greater than or equal to 0";
const HEADER_NAME_ERR: &str = "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')";

/// Validates one handler given its path.
type HandlerCheck<'a> = Box<dyn Fn(&str, &mut Vec<PodError>) + 'a>;
/// The decoder's enum check: object, path, key, allowed values.
pub(in crate::domain) type EnumCheck<'a> =
    dyn FnMut(&mut serde_json::Map<String, serde_json::Value>, &str, &str, &[&str]) + 'a;

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// A port given by number or by the name of one of the container's ports
/// (`intstr.IntOrString`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i32),
    String(String),
}

impl Default for IntOrString {
    fn default() -> Self {
        IntOrString::Int(0)
    }
}

impl fmt::Display for IntOrString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrString::Int(n) => write!(f, "{n}"),
            IntOrString::String(s) => f.write_str(s),
        }
    }
}

/// `exec`: a command run in the container; exit status 0 is healthy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExecAction {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UriScheme {
    #[default]
    #[serde(rename = "HTTP")]
    Http,
    #[serde(rename = "HTTPS")]
    Https,
}

impl UriScheme {
    /// The URL scheme (`http`, `https`).
    pub fn url_scheme(self) -> &'static str {
        match self {
            UriScheme::Http => "http",
            UriScheme::Https => "https",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpHeader {
    pub name: String,
    pub value: String,
}

/// `httpGet`: a GET whose status in 200..400 is healthy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpGetAction {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    pub port: IntOrString,
    /// Empty: the pod IP.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// `None` until defaulted (`HTTP`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<UriScheme>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
}

impl HttpGetAction {
    pub fn scheme(&self) -> UriScheme {
        self.scheme.unwrap_or_default()
    }
}

/// `tcpSocket`: a TCP connection that opens is healthy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpSocketAction {
    pub port: IntOrString,
    /// Empty: the pod IP.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
}

/// `grpc`: `grpc.health.v1.Health/Check` answering `SERVING` is healthy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcAction {
    pub port: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
}

/// `sleep` (a lifecycle hook only, from upstream v1.29): wait this long.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SleepAction {
    pub seconds: i64,
}

/// What a probe runs: exactly one of these is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProbeHandler {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpSocketAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcAction>,
}

/// `v1.Probe`. Zero values mean "the default" until [`apply_probe_defaults`] fills them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Probe {
    #[serde(flatten)]
    pub handler: ProbeHandler,
    #[serde(skip_serializing_if = "is_zero")]
    pub initial_delay_seconds: i32,
    #[serde(skip_serializing_if = "is_zero")]
    pub timeout_seconds: i32,
    #[serde(skip_serializing_if = "is_zero")]
    pub period_seconds: i32,
    #[serde(skip_serializing_if = "is_zero")]
    pub success_threshold: i32,
    #[serde(skip_serializing_if = "is_zero")]
    pub failure_threshold: i32,
    /// The grace period of a kill this probe causes (liveness and startup only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
}

/// A lifecycle hook: exactly one of these is set. `tcpSocket` decodes (the API keeps
/// it for compatibility) but upstream's kubelet cannot run it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LifecycleHandler {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpSocketAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sleep: Option<SleepAction>,
}

/// `v1.Lifecycle`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Lifecycle {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_start: Option<LifecycleHandler>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_stop: Option<LifecycleHandler>,
}

/// Upstream's `SetDefaults_Probe` and, for its `httpGet`, `SetDefaults_HTTPGetAction`.
pub fn apply_probe_defaults(probe: &mut Probe) {
    let defaults = [
        (&mut probe.timeout_seconds, DEFAULT_TIMEOUT_SECONDS),
        (&mut probe.period_seconds, DEFAULT_PERIOD_SECONDS),
        (&mut probe.success_threshold, DEFAULT_SUCCESS_THRESHOLD),
        (&mut probe.failure_threshold, DEFAULT_FAILURE_THRESHOLD),
    ];
    for (field, default) in defaults {
        if *field == 0 {
            *field = default;
        }
    }
    if let Some(http) = &mut probe.handler.http_get {
        apply_http_get_defaults(http);
    }
}

fn apply_http_get_defaults(http: &mut HttpGetAction) {
    if http.path.is_empty() {
        http.path = "/".to_owned();
    }
    if http.scheme.is_none() {
        http.scheme = Some(UriScheme::Http);
    }
}

/// The defaults of every probe and hook of `container`.
pub fn apply_container_defaults(container: &mut Container) {
    for probe in [
        &mut container.liveness_probe,
        &mut container.readiness_probe,
        &mut container.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        apply_probe_defaults(probe);
    }
    if let Some(lifecycle) = &mut container.lifecycle {
        for hook in [&mut lifecycle.post_start, &mut lifecycle.pre_stop]
            .into_iter()
            .flatten()
        {
            if let Some(http) = &mut hook.http_get {
                apply_http_get_defaults(http);
            }
        }
    }
}

/// The decoder's check of the enum fields of one container's probes and hooks (the
/// `scheme` of each `httpGet`): a bad value is reported with its path and the allowed
/// values, an empty one removed so the default applies.
pub(in crate::domain) fn check_enum_fields(
    container: &mut serde_json::Map<String, serde_json::Value>,
    path: &str,
    check: &mut EnumCheck<'_>,
) {
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(http) = container
            .get_mut(probe)
            .and_then(|p| p.get_mut("httpGet"))
            .and_then(|h| h.as_object_mut())
        {
            check(
                http,
                &format!("{path}.{probe}.httpGet"),
                "scheme",
                &HTTP_SCHEMES,
            );
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(http) = container
            .get_mut("lifecycle")
            .and_then(|l| l.get_mut(hook))
            .and_then(|h| h.get_mut("httpGet"))
            .and_then(|h| h.as_object_mut())
        {
            check(
                http,
                &format!("{path}.lifecycle.{hook}.httpGet"),
                "scheme",
                &HTTP_SCHEMES,
            );
        }
    }
}

/// Upstream's validation of a container's probes and hooks: forbidden on init
/// containers, else each probe and hook checked (`validateProbe`, `validateLifecycle`,
/// the liveness and startup `successThreshold` of 1, no grace period on readiness).
/// `grace` is the pod's `terminationGracePeriodSeconds`, which bounds a `sleep` hook.
pub(in crate::domain) fn validate_container(
    c: &Container,
    path: &str,
    init: bool,
    grace: i64,
    errors: &mut Vec<PodError>,
) {
    if init {
        let fields = [
            ("lifecycle", c.lifecycle.is_some()),
            ("livenessProbe", c.liveness_probe.is_some()),
            ("readinessProbe", c.readiness_probe.is_some()),
            ("startupProbe", c.startup_probe.is_some()),
        ];
        for (field, set) in fields {
            if set {
                errors.push(PodError::Forbidden {
                    field: format!("{path}.{field}"),
                    detail: "may not be set for init containers".into(),
                });
            }
        }
        return;
    }
    if let Some(lifecycle) = &c.lifecycle {
        for (hook, handler) in [
            ("postStart", &lifecycle.post_start),
            ("preStop", &lifecycle.pre_stop),
        ] {
            if let Some(handler) = handler {
                validate_lifecycle_handler(
                    handler,
                    &format!("{path}.lifecycle.{hook}"),
                    grace,
                    errors,
                );
            }
        }
    }
    for (field, probe) in [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ] {
        let Some(probe) = probe else { continue };
        let p = format!("{path}.{field}");
        validate_probe(probe, &p, errors);
        if field != "readinessProbe" && probe.success_threshold != 1 {
            errors.push(invalid(
                format!("{p}.successThreshold"),
                probe.success_threshold.to_string(),
                "must be 1",
            ));
        }
        if let (Some(grace), "readinessProbe") = (probe.termination_grace_period_seconds, field) {
            errors.push(invalid(
                format!("{p}.terminationGracePeriodSeconds"),
                grace.to_string(),
                "must not be set for readinessProbes",
            ));
        }
    }
}

/// The checks of the handlers probes and lifecycle hooks share (exec, httpGet,
/// tcpSocket), for those that are set.
fn shared_handler_checks<'a>(
    exec: &'a Option<ExecAction>,
    http_get: &'a Option<HttpGetAction>,
    tcp_socket: &'a Option<TcpSocketAction>,
) -> Vec<(&'static str, HandlerCheck<'a>)> {
    let mut handlers: Vec<(&'static str, HandlerCheck<'a>)> = Vec::new();
    if let Some(exec) = exec {
        handlers.push(("exec", Box::new(move |p, e| validate_exec(exec, p, e))));
    }
    if let Some(http) = http_get {
        handlers.push((
            "httpGet",
            Box::new(move |p, e| validate_http_get(http, p, e)),
        ));
    }
    if let Some(tcp) = tcp_socket {
        handlers.push((
            "tcpSocket",
            Box::new(move |p, e| validate_port(&tcp.port, &format!("{p}.port"), e)),
        ));
    }
    handlers
}

fn validate_probe(probe: &Probe, path: &str, errors: &mut Vec<PodError>) {
    let h = &probe.handler;
    let mut handlers = shared_handler_checks(&h.exec, &h.http_get, &h.tcp_socket);
    if let Some(grpc) = &h.grpc {
        handlers.push((
            "grpc",
            Box::new(move |p, e| {
                validate_port(&IntOrString::Int(grpc.port), &format!("{p}.port"), e)
            }),
        ));
    }
    validate_handlers(handlers, path, errors);
    for (field, value) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        if value < 0 {
            errors.push(invalid(
                format!("{path}.{field}"),
                value.to_string(),
                NONNEGATIVE_ERR,
            ));
        }
    }
    if let Some(grace) = probe.termination_grace_period_seconds {
        if grace <= 0 {
            errors.push(invalid(
                format!("{path}.terminationGracePeriodSeconds"),
                grace.to_string(),
                "must be greater than 0",
            ));
        }
    }
}

fn validate_lifecycle_handler(
    h: &LifecycleHandler,
    path: &str,
    grace: i64,
    errors: &mut Vec<PodError>,
) {
    let mut handlers = shared_handler_checks(&h.exec, &h.http_get, &h.tcp_socket);
    if let Some(sleep) = &h.sleep {
        handlers.push((
            "sleep",
            Box::new(move |p, e| {
                // Upstream v1.29's `validateSleepAction`.
                if sleep.seconds <= 0 || sleep.seconds > grace {
                    e.push(invalid(
                        p.to_owned(),
                        sleep.seconds.to_string(),
                        format!("must be greater than 0 and less than terminationGracePeriodSeconds ({grace})"),
                    ));
                }
            }),
        ));
    }
    validate_handlers(handlers, path, errors);
}

/// Upstream's `validateHandler`: exactly one handler; each further one is forbidden.
#[allow(clippy::type_complexity)]
fn validate_handlers(
    handlers: Vec<(&str, HandlerCheck<'_>)>,
    path: &str,
    errors: &mut Vec<PodError>,
) {
    if handlers.is_empty() {
        errors.push(required(path.to_owned(), "must specify a handler type"));
    }
    for (i, (name, validate)) in handlers.iter().enumerate() {
        let p = format!("{path}.{name}");
        if i == 0 {
            validate(&p, errors);
        } else {
            errors.push(PodError::Forbidden {
                field: p,
                detail: "may not specify more than 1 handler type".into(),
            });
        }
    }
}

fn validate_exec(exec: &ExecAction, path: &str, errors: &mut Vec<PodError>) {
    if exec.command.is_empty() {
        errors.push(required(format!("{path}.command"), ""));
    }
}

fn validate_http_get(http: &HttpGetAction, path: &str, errors: &mut Vec<PodError>) {
    if http.path.is_empty() {
        errors.push(required(format!("{path}.path"), ""));
    }
    validate_port(&http.port, &format!("{path}.port"), errors);
    if http.scheme.is_none() {
        errors.push(PodError::Unsupported {
            field: format!("{path}.scheme"),
            value: quoted(""),
            supported: supported_list(&HTTP_SCHEMES),
        });
    }
    for header in &http.http_headers {
        let valid = !header.name.is_empty()
            && header
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !valid {
            errors.push(invalid(
                format!("{path}.httpHeaders"),
                quoted(&header.name),
                HEADER_NAME_ERR,
            ));
        }
    }
}

/// Upstream's `ValidatePortNumOrName`.
fn validate_port(port: &IntOrString, path: &str, errors: &mut Vec<PodError>) {
    match port {
        IntOrString::Int(n) => {
            if !(1..=65535).contains(n) {
                errors.push(invalid(path.to_owned(), n.to_string(), PORT_RANGE_ERR));
            }
        }
        IntOrString::String(name) => {
            for msg in port_name_errors(name) {
                errors.push(invalid(path.to_owned(), quoted(name), msg));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::{pod_from_value, validate_pod, Pod};

    fn decode(container: serde_json::Value) -> Result<Pod, Vec<String>> {
        let value = serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [container]}
        });
        pod_from_value(&value)
            .map(|mut pod| {
                crate::domain::pod::apply_api_defaults(&mut pod);
                pod
            })
            .map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    fn problems(container: serde_json::Value) -> Vec<String> {
        match decode(container) {
            Ok(pod) => validate_pod(&pod).iter().map(ToString::to_string).collect(),
            Err(errors) => errors,
        }
    }

    #[test]
    fn probes_and_hooks_decode_with_upstreams_defaults() {
        let pod = decode(serde_json::json!({
            "name": "c", "image": "busybox",
            "ports": [{"name": "http", "containerPort": 8080}],
            "livenessProbe": {"httpGet": {"port": "http"}},
            "readinessProbe": {"exec": {"command": ["cat", "/ready"]}, "periodSeconds": 2},
            "startupProbe": {"tcpSocket": {"port": 8080}, "failureThreshold": 30,
                             "terminationGracePeriodSeconds": 5},
            "lifecycle": {"postStart": {"httpGet": {"port": 80, "scheme": ""}},
                          "preStop": {"sleep": {"seconds": 3}}}
        }))
        .expect("decodes");
        let c = &pod.spec.containers[0];
        let liveness = c.liveness_probe.as_ref().expect("liveness");
        let http = liveness.handler.http_get.as_ref().expect("httpGet");
        assert_eq!(http.port, IntOrString::String("http".into()));
        assert_eq!((http.path.as_str(), http.scheme()), ("/", UriScheme::Http));
        assert_eq!(
            (
                liveness.timeout_seconds,
                liveness.period_seconds,
                liveness.success_threshold,
                liveness.failure_threshold
            ),
            (1, 10, 1, 3)
        );
        let readiness = c.readiness_probe.as_ref().expect("readiness");
        assert_eq!(readiness.period_seconds, 2);
        let startup = c.startup_probe.as_ref().expect("startup");
        assert_eq!(startup.failure_threshold, 30);
        assert_eq!(startup.termination_grace_period_seconds, Some(5));
        let lifecycle = c.lifecycle.as_ref().expect("lifecycle");
        let post_start = lifecycle
            .post_start
            .as_ref()
            .and_then(|h| h.http_get.as_ref());
        assert_eq!(post_start.map(HttpGetAction::scheme), Some(UriScheme::Http));
        assert_eq!(
            lifecycle.pre_stop.as_ref().and_then(|h| h.sleep.clone()),
            Some(SleepAction { seconds: 3 })
        );
        assert!(validate_pod(&pod).is_empty(), "{:?}", validate_pod(&pod));
    }

    #[test]
    fn a_bad_scheme_is_named_with_its_path() {
        assert_eq!(
            problems(serde_json::json!({
                "name": "c", "image": "busybox",
                "readinessProbe": {"httpGet": {"port": 80, "scheme": "FTP"}}
            })),
            vec!["spec.containers[0].readinessProbe.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\""]
        );
    }

    // The messages of upstream's validateProbe, validateHandler and validateContainers.
    #[test]
    fn probe_validation_in_upstreams_words() {
        let cases: Vec<(serde_json::Value, Vec<&str>)> = vec![
            (
                serde_json::json!({"livenessProbe": {"periodSeconds": 5}}),
                vec!["spec.containers[0].livenessProbe: Required value: must specify a handler type"],
            ),
            (
                serde_json::json!({"livenessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}}),
                vec!["spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"],
            ),
            (
                serde_json::json!({"livenessProbe": {"exec": {}, "successThreshold": 2, "initialDelaySeconds": -1}}),
                vec![
                    "spec.containers[0].livenessProbe.exec.command: Required value",
                    "spec.containers[0].livenessProbe.initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
                    "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
                ],
            ),
            (
                serde_json::json!({"readinessProbe": {"tcpSocket": {"port": 70000}, "terminationGracePeriodSeconds": 3}}),
                vec![
                    "spec.containers[0].readinessProbe.tcpSocket.port: Invalid value: 70000: must be between 1 and 65535, inclusive",
                    "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 3: must not be set for readinessProbes",
                ],
            ),
            (
                serde_json::json!({"startupProbe": {"grpc": {"port": 9000}, "terminationGracePeriodSeconds": 0}}),
                vec!["spec.containers[0].startupProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0"],
            ),
            (
                serde_json::json!({"livenessProbe": {"httpGet": {"port": "web_port", "httpHeaders": [{"name": "X Bad", "value": "v"}]}}}),
                vec![
                    "spec.containers[0].livenessProbe.httpGet.port: Invalid value: \"web_port\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                    "spec.containers[0].livenessProbe.httpGet.httpHeaders: Invalid value: \"X Bad\": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
                ],
            ),
            (
                serde_json::json!({"lifecycle": {"preStop": {"sleep": {"seconds": 31}}, "postStart": {}}}),
                vec![
                    "spec.containers[0].lifecycle.postStart: Required value: must specify a handler type",
                    "spec.containers[0].lifecycle.preStop.sleep: Invalid value: 31: must be greater than 0 and less than terminationGracePeriodSeconds (30)",
                ],
            ),
        ];
        for (extra, want) in cases {
            let mut container = serde_json::json!({"name": "c", "image": "busybox"});
            if let (Some(c), Some(extra)) = (container.as_object_mut(), extra.as_object()) {
                c.extend(extra.clone());
            }
            assert_eq!(problems(container), want, "case {extra}");
        }
    }

    #[test]
    fn init_containers_may_not_have_probes_or_hooks() {
        let value = serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "initContainers": [{"name": "i", "image": "busybox",
                    "readinessProbe": {"exec": {"command": ["true"]}},
                    "lifecycle": {"preStop": {"exec": {"command": ["true"]}}}}],
                "containers": [{"name": "c", "image": "busybox"}]
            }
        });
        let pod = pod_from_value(&value).expect("decodes");
        let got: Vec<String> = validate_pod(&pod).iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            vec![
                "spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers",
                "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers",
            ]
        );
    }

    #[test]
    fn a_probe_serializes_as_the_api_writes_it() {
        let probe = Probe {
            handler: ProbeHandler {
                http_get: Some(HttpGetAction {
                    path: "/healthz".into(),
                    port: IntOrString::Int(8080),
                    scheme: Some(UriScheme::Https),
                    ..HttpGetAction::default()
                }),
                ..ProbeHandler::default()
            },
            period_seconds: 5,
            ..Probe::default()
        };
        let json = serde_json::to_value(&probe).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTPS"}, "periodSeconds": 5})
        );
    }
}
