//! Log lines as the upstream kubelet writes them: klog's text header with its structured
//! pairs (`I1128 14:50:03.277164   20452 server.go:412] "Kubelet version"
//! kubeletVersion="v1.26.1"`), or the JSON of upstream's `--logging-format=json`
//! (`{"ts":1795877399476.1462,"caller":"app/server.go:412","msg":"Kubelet version","v":0,
//! "kubeletVersion":"v1.26.1"}`); and `--vmodule`, the verbosity per source file.

use crate::domain::units::go_quote;
use crate::domain::units::time::klog_timestamp;

/// klog's severity: the header's first letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    fn letter(self) -> char {
        match self {
            Severity::Info => 'I',
            Severity::Warning => 'W',
            Severity::Error => 'E',
        }
    }
}

/// A pair's value: text (quoted in text, a string in JSON) or a number or boolean
/// (written as is in both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogValue {
    Text(String),
    Plain(String),
}

/// One log line's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord<'a> {
    pub severity: Severity,
    /// The `-v` level it is logged at (0 for warnings and errors).
    pub verbosity: u32,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub unix_nanos: i64,
    /// klog's "thread id": the process id.
    pub pid: u32,
    /// The source file as the compiler names it (`src/app/pods/sync.rs`).
    pub file: &'a str,
    pub line: u32,
    pub message: &'a str,
    pub pairs: &'a [(String, LogValue)],
}

/// The key upstream uses for a pair rkubelet's code names otherwise (Rust's field names
/// are snake case; upstream's keys are `err`, `podUID`, `containerName`, `containerID`, `podSandboxID`).
pub fn upstream_key(key: &str) -> &str {
    match key {
        "error" => "err",
        "uid" | "pod_uid" => "podUID",
        "container" => "containerName",
        "container_id" => "containerID",
        "sandbox" => "podSandboxID",
        other => other,
    }
}

fn base_name(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// The caller as upstream's JSON writes it (zap's short caller): the folder and the file.
fn short_caller(file: &str, line: u32) -> String {
    let mut parts = file.rsplit('/');
    let name = parts.next().unwrap_or(file);
    match parts.next() {
        Some(dir) => format!("{dir}/{name}:{line}"),
        None => format!("{name}:{line}"),
    }
}

/// klog's text form of a pair's value: text quoted as Go's `%q`, or, when it spans
/// lines, klog's `<` block with each line indented by a tab.
fn text_value(value: &LogValue) -> String {
    match value {
        LogValue::Plain(raw) => raw.clone(),
        LogValue::Text(text) if text.contains('\n') => {
            let mut out = String::from("<\n");
            for line in text.trim_end_matches('\n').split('\n') {
                out.push('\t');
                out.push_str(line);
                out.push('\n');
            }
            out.push_str(" >");
            out
        }
        LogValue::Text(text) => go_quote(text),
    }
}

/// The line in klog's text format (without the newline).
pub fn klog_text(record: &LogRecord<'_>) -> String {
    let mut out = format!(
        "{}{} {:>7} {}:{}] {}",
        record.severity.letter(),
        klog_timestamp(record.unix_nanos),
        record.pid,
        base_name(record.file),
        record.line,
        go_quote(record.message)
    );
    for (key, value) in record.pairs {
        out.push(' ');
        out.push_str(key);
        out.push('=');
        match value {
            // klog writes a struct (not a string) as Go's `%+v`, unquoted.
            LogValue::Text(text) if pleg_event(key, text).is_some() => out.push_str(text),
            value => out.push_str(&text_value(value)),
        }
    }
    out
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// The line in upstream's JSON format (without the newline): `ts` in milliseconds,
/// `caller`, `msg`, `v` (not for errors), then the pairs in order.
pub fn json_line(record: &LogRecord<'_>) -> String {
    // Go's shortest float text for milliseconds with a fraction; Rust's `{}` writes the
    // same shortest form.
    #[allow(clippy::cast_precision_loss)] // a timestamp's milliseconds fit an f64's 53 bits
    let millis = record.unix_nanos as f64 / 1e6;
    let mut out = format!(
        "{{\"ts\":{millis},\"caller\":{},\"msg\":{}",
        json_string(&short_caller(record.file, record.line)),
        json_string(record.message)
    );
    if record.severity != Severity::Error {
        out.push_str(&format!(",\"v\":{}", record.verbosity));
    }
    for (key, value) in record.pairs {
        out.push(',');
        out.push_str(&json_string(key));
        out.push(':');
        match value {
            LogValue::Plain(raw) => out.push_str(raw),
            LogValue::Text(text) => match (object_ref(key, text), object_refs(key, text)) {
                (Some(pod), _) => out.push_str(&json_object_ref(pod)),
                (None, Some(pods)) => {
                    let objects: Vec<String> = pods.into_iter().map(json_object_ref).collect();
                    out.push_str(&format!("[{}]", objects.join(",")));
                }
                (None, None) => match pleg_event(key, text) {
                    Some(event) => out.push_str(&event),
                    None => out.push_str(&json_string(text)),
                },
            },
        }
    }
    out.push('}');
    out
}

/// A pod as upstream's JSON writes `klog.KObj(pod)`: an object of its name and namespace,
/// where the text form is `namespace/name`.
fn object_ref<'t>(key: &str, text: &'t str) -> Option<(&'t str, &'t str)> {
    if key != "pod" {
        return None;
    }
    namespaced_name(text)
}

/// Pods as upstream's JSON writes `klog.KObjSlice(pods)`: a list of their objects, where
/// the text form is `[namespace/name ...]`.
fn object_refs<'t>(key: &str, text: &'t str) -> Option<Vec<(&'t str, &'t str)>> {
    if key != "pods" {
        return None;
    }
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    inner.split_whitespace().map(namespaced_name).collect()
}

/// A PLEG event (`&{ID:<uid> Type:<type> Data:<id>}`, Go's `%+v` of upstream's
/// `*PodLifecycleEvent`) as upstream's JSON writes the struct: its three fields.
fn pleg_event(key: &str, text: &str) -> Option<String> {
    if key != "event" {
        return None;
    }
    let inner = text.strip_prefix("&{")?.strip_suffix('}')?;
    let mut fields = inner.split(' ');
    let mut field = |name: &str| fields.next()?.strip_prefix(name);
    let (id, kind, data) = (field("ID:")?, field("Type:")?, field("Data:")?);
    Some(format!(
        "{{\"ID\":{},\"Type\":{},\"Data\":{}}}",
        json_string(id),
        json_string(kind),
        json_string(data)
    ))
}

fn namespaced_name(text: &str) -> Option<(&str, &str)> {
    text.split_once('/')
        .filter(|(namespace, name)| !namespace.is_empty() && !name.contains('/'))
}

fn json_object_ref((namespace, name): (&str, &str)) -> String {
    format!(
        "{{\"name\":{},\"namespace\":{}}}",
        json_string(name),
        json_string(namespace)
    )
}

/// One `--vmodule` setting: source files matching `pattern` log at `verbosity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VModuleRule {
    /// A glob (`*`, `?`) over the file's name without `.rs`; with a `/`, over its path.
    pub pattern: String,
    pub verbosity: u32,
}

/// Reads `--vmodule` (`pattern=N,...`) as upstream's flag does.
///
/// # Errors
/// Upstream's message for the first setting that does not parse.
pub fn parse_vmodule(text: &str) -> Result<Vec<VModuleRule>, String> {
    let mut rules = Vec::new();
    for setting in text.split(',').filter(|s| !s.is_empty()) {
        let parts: Vec<&str> = setting.split('=').collect();
        let [pattern, level] = parts.as_slice() else {
            return Err(format!("{setting:?} does not have the pattern=N format"));
        };
        if pattern.is_empty() || level.is_empty() {
            return Err(format!("{setting:?} does not have the pattern=N format"));
        }
        let verbosity =
            parse_verbosity(level).map_err(|e| format!("parsing verbosity in {setting:?}: {e}"))?;
        rules.push(VModuleRule {
            pattern: (*pattern).to_owned(),
            verbosity,
        });
    }
    Ok(rules)
}

/// Go's `strconv.ParseUint(text, 10, 31)`.
fn parse_verbosity(text: &str) -> Result<u32, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseUint: parsing {}: invalid syntax",
            go_quote(text)
        ));
    }
    text.parse::<u32>()
        .ok()
        .filter(|v| *v <= i32::MAX.unsigned_abs())
        .ok_or_else(|| {
            format!(
                "strconv.ParseUint: parsing {}: value out of range",
                go_quote(text)
            )
        })
}

/// The name a `--vmodule` pattern is matched against: the file's name without `.rs`
/// (a `mod.rs` is its folder's name).
pub fn module_name(file: &str) -> &str {
    let mut parts = file.rsplit('/');
    let name = parts.next().unwrap_or(file);
    let stem = name.strip_suffix(".rs").unwrap_or(name);
    if stem == "mod" {
        parts.next().unwrap_or(stem)
    } else {
        stem
    }
}

/// Go's `filepath.Match` for `*` and `?` (no character classes).
fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_match(&pattern[1..], name)
                || (!name.is_empty() && name[0] != b'/' && glob_match(pattern, &name[1..]))
        }
        (Some(b'?'), Some(c)) if *c != b'/' => glob_match(&pattern[1..], &name[1..]),
        (Some(p), Some(c)) if p == c => glob_match(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// The verbosity of `file`: the first rule matching it (klog's order), else `default`.
pub fn verbosity_for(rules: &[VModuleRule], file: &str, default: u32) -> u32 {
    let path = file.strip_suffix(".rs").unwrap_or(file);
    let name = module_name(file);
    rules
        .iter()
        .find(|r| {
            let target = if r.pattern.contains('/') { path } else { name };
            glob_match(r.pattern.as_bytes(), target.as_bytes())
        })
        .map_or(default, |r| r.verbosity)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, LogValue)]) -> Vec<(String, LogValue)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    fn text(s: &str) -> LogValue {
        LogValue::Text(s.into())
    }

    /// Lines the upstream kubelet v1.26.1 wrote (2026-11-28, `--v=4`, text and JSON),
    /// and rkubelet's form of the same record: identical but for the caller's file.
    #[test]
    fn lines_match_upstreams_own_output() {
        // 14:50:03.277164 UTC on 2026-11-28.
        let at = 1_795_877_403_277_164_000;
        let kv = pairs(&[("kubeletVersion", text("v1.26.1"))]);
        let record = LogRecord {
            severity: Severity::Info,
            verbosity: 0,
            unix_nanos: at,
            pid: 20452,
            file: "k8s.io/kubernetes/cmd/kubelet/app/server.go",
            line: 412,
            message: "Kubelet version",
            pairs: &kv,
        };
        assert_eq!(
            klog_text(&record),
            "I1128 14:50:03.277164   20452 server.go:412] \"Kubelet version\" kubeletVersion=\"v1.26.1\""
        );
        assert_eq!(
            json_line(&LogRecord {
                unix_nanos: 1_795_877_399_476_146_200,
                ..record.clone()
            }),
            "{\"ts\":1795877399476.1462,\"caller\":\"app/server.go:412\",\"msg\":\"Kubelet version\",\"v\":0,\"kubeletVersion\":\"v1.26.1\"}"
        );
        let err = pairs(&[(upstream_key("error"), text("rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing dial unix /tmp/kljson/none.sock: connect: no such file or directory\""))]);
        let failed = LogRecord {
            severity: Severity::Error,
            verbosity: 0,
            unix_nanos: 1_795_877_403_493_584_000,
            pid: 20452,
            file: "remote/remote_runtime.go",
            line: 145,
            message: "Version from runtime service failed",
            pairs: &err,
        };
        assert_eq!(
            klog_text(&failed),
            "E1128 14:50:03.493584   20452 remote_runtime.go:145] \"Version from runtime service failed\" err=\"rpc error: code = Unavailable desc = connection error: desc = \\\"transport: Error while dialing dial unix /tmp/kljson/none.sock: connect: no such file or directory\\\"\""
        );
        // Errors carry no `v` in JSON.
        assert!(json_line(&failed).starts_with("{\"ts\":1795877403493.584,\"caller\":\"remote/remote_runtime.go:145\",\"msg\":\"Version from runtime service failed\",\"err\":"));
        let path = pairs(&[
            ("version", text("v1beta1")),
            ("attempt", LogValue::Plain("3".into())),
        ]);
        assert_eq!(
            klog_text(&LogRecord {
                severity: Severity::Warning,
                pairs: &path,
                message: "Creating device plugin registration server",
                file: "src/app/pods/mod.rs",
                line: 66,
                ..record
            }),
            "W1128 14:50:03.277164   20452 mod.rs:66] \"Creating device plugin registration server\" version=\"v1beta1\" attempt=3"
        );
    }

    #[test]
    fn rusts_field_names_become_upstreams_keys() {
        // Upstream v1.26.1's pod worker: `"pod", klog.KObj(pod), "podUID", pod.UID`; the
        // container runtime manager: `"containerName", ..., "containerID", ...`.
        let pairs = vec![
            (
                upstream_key("pod").to_string(),
                text("kube-system/etcd-node1"),
            ),
            (upstream_key("uid").to_string(), text("2c5a7e3c")),
            (upstream_key("container").to_string(), text("etcd")),
            (upstream_key("container_id").to_string(), text("9f1c")),
            (upstream_key("pod_uid").to_string(), text("2c5a7e3c")),
        ];
        let line = klog_text(&LogRecord {
            severity: Severity::Info,
            verbosity: 0,
            unix_nanos: 0,
            pid: 1,
            file: "src/app/pods/sync.rs",
            line: 7,
            message: "Killing container with a grace period",
            pairs: &pairs,
        });
        assert!(
            line.ends_with(
                "] \"Killing container with a grace period\" pod=\"kube-system/etcd-node1\" podUID=\"2c5a7e3c\" containerName=\"etcd\" containerID=\"9f1c\" podUID=\"2c5a7e3c\""
            ),
            "{line}"
        );
    }

    #[test]
    fn a_pod_in_json_is_upstreams_object_reference() {
        let pairs = vec![
            ("pod".to_string(), text("default/web")),
            ("podUID".to_string(), text("5f1c2a9e")),
        ];
        let line = json_line(&LogRecord {
            severity: Severity::Info,
            verbosity: 0,
            unix_nanos: 1_000_000,
            pid: 1,
            file: "src/app/pods/sync.rs",
            line: 7,
            message: "Killing container with a grace period",
            pairs: &pairs,
        });
        assert_eq!(
            line,
            "{\"ts\":1,\"caller\":\"pods/sync.rs:7\",\"msg\":\"Killing container with a grace period\",\"v\":0,\"pod\":{\"name\":\"web\",\"namespace\":\"default\"},\"podUID\":\"5f1c2a9e\"}"
        );
    }

    #[test]
    fn pods_are_klogs_object_slice_quoted_in_text_and_a_list_in_json() {
        // Upstream v1.26's kubelet.go: `"SyncLoop ADD" source="api"
        // pods="[default/nginx-cb8956d5f-c5zh8]"`.
        let pairs = vec![
            ("source".to_string(), text("api")),
            ("pods".to_string(), text("[default/web kube-system/dns]")),
        ];
        let record = LogRecord {
            severity: Severity::Info,
            verbosity: 2,
            unix_nanos: 1_000_000,
            pid: 1,
            file: "src/app/pods/manager.rs",
            line: 9,
            message: "SyncLoop ADD",
            pairs: &pairs,
        };
        assert!(
            klog_text(&record).ends_with(
                "] \"SyncLoop ADD\" source=\"api\" pods=\"[default/web kube-system/dns]\""
            ),
            "{}",
            klog_text(&record)
        );
        assert_eq!(
            json_line(&record),
            "{\"ts\":1,\"caller\":\"pods/manager.rs:9\",\"msg\":\"SyncLoop ADD\",\"v\":2,\"source\":\"api\",\"pods\":[{\"name\":\"web\",\"namespace\":\"default\"},{\"name\":\"dns\",\"namespace\":\"kube-system\"}]}"
        );
    }

    #[test]
    fn a_pleg_event_is_gos_struct_unquoted_in_text_and_an_object_in_json() {
        // Upstream v1.26: `"SyncLoop (PLEG): event for pod" pod="default/web"
        // event=&{ID:5f1c Type:ContainerStarted Data:9ab0}`.
        let pairs = vec![
            ("pod".to_string(), text("default/web")),
            (
                "event".to_string(),
                text("&{ID:5f1c Type:ContainerStarted Data:9ab0}"),
            ),
        ];
        let record = LogRecord {
            severity: Severity::Info,
            verbosity: 2,
            unix_nanos: 1_000_000,
            pid: 1,
            file: "src/app/pods/mod.rs",
            line: 9,
            message: "SyncLoop (PLEG): event for pod",
            pairs: &pairs,
        };
        assert!(klog_text(&record).ends_with(
            "] \"SyncLoop (PLEG): event for pod\" pod=\"default/web\" event=&{ID:5f1c Type:ContainerStarted Data:9ab0}"
        ));
        assert!(json_line(&record).ends_with(
            ",\"event\":{\"ID\":\"5f1c\",\"Type\":\"ContainerStarted\",\"Data\":\"9ab0\"}}"
        ));
    }

    #[test]
    fn a_value_spanning_lines_is_klogs_block() {
        assert_eq!(text_value(&text("a\nb\n")), "<\n\ta\n\tb\n >");
    }

    #[test]
    fn the_date_is_the_calendars() {
        assert_eq!(klog_timestamp(0), "0101 00:00:00.000000");
        // 2024-02-29 23:59:59.999999.
        assert_eq!(
            klog_timestamp(1_709_251_199_999_999_000),
            "0229 23:59:59.999999"
        );
    }

    /// Upstream's `vmoduleConfigurationPFlag.Set` cases.
    #[test]
    fn vmodule_parses_as_upstreams_flag() {
        assert_eq!(
            parse_vmodule("foo=1,bar=2,"),
            Ok(vec![
                VModuleRule {
                    pattern: "foo".into(),
                    verbosity: 1
                },
                VModuleRule {
                    pattern: "bar".into(),
                    verbosity: 2
                },
            ])
        );
        assert_eq!(
            parse_vmodule("gopher*"),
            Err("\"gopher*\" does not have the pattern=N format".into())
        );
        assert_eq!(
            parse_vmodule("=1"),
            Err("\"=1\" does not have the pattern=N format".into())
        );
        assert_eq!(
            parse_vmodule("foo=-1"),
            Err("parsing verbosity in \"foo=-1\": strconv.ParseUint: parsing \"-1\": invalid syntax".into())
        );
        assert_eq!(
            parse_vmodule("invalidint32=2147483648"),
            Err("parsing verbosity in \"invalidint32=2147483648\": strconv.ParseUint: parsing \"2147483648\": value out of range".into())
        );
        assert!(parse_vmodule("validint32=2147483647").is_ok());
    }

    #[test]
    fn vmodule_picks_the_first_matching_file_pattern() {
        let rules = parse_vmodule("sync=4,pro*=5,app/server/*=3").expect("rules");
        assert_eq!(verbosity_for(&rules, "src/app/pods/sync.rs", 0), 4);
        assert_eq!(verbosity_for(&rules, "src/domain/probe/mod.rs", 0), 5);
        assert_eq!(verbosity_for(&rules, "src/app/server/api.rs", 0), 0);
        assert_eq!(verbosity_for(&rules, "src/app/pods/worker.rs", 1), 1);
        let by_path = parse_vmodule("*/server/api=3").expect("rules");
        assert_eq!(verbosity_for(&by_path, "src/app/server/api.rs", 0), 0);
        let by_path = parse_vmodule("src/app/server/api=3").expect("rules");
        assert_eq!(verbosity_for(&by_path, "src/app/server/api.rs", 0), 3);
    }
}
