//! The logs, written as the upstream kubelet writes them (`domain::log_format`): klog's
//! text header, or upstream's JSON with `--logging-format=json`; at `-v`'s verbosity,
//! `--vmodule`'s per source file. `RUST_LOG` replaces both (a `tracing` filter). A span's
//! fields (the pod of a sync) are pairs of every line logged inside it.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::domain::config::{LogFormat, LoggingSettings};
use crate::domain::log_format::{
    json_line, klog_text, upstream_key, verbosity_for, LogRecord, LogValue, Severity, VModuleRule,
};

/// The `-v` level a `tracing` level is logged at: info at 0 (upstream's `klog.InfoS`),
/// debug at 2, trace at 5.
pub fn verbosity_of(level: &Level) -> u32 {
    match *level {
        Level::ERROR | Level::WARN | Level::INFO => 0,
        Level::DEBUG => 2,
        Level::TRACE => 5,
    }
}

/// Whether a callsite logs at `verbosity` (and `--vmodule`'s rules): rkubelet's own only.
fn enabled(meta: &Metadata<'_>, rules: &[VModuleRule], verbosity: u32) -> bool {
    meta.target().starts_with("rkubelet")
        && verbosity_of(meta.level())
            <= verbosity_for(rules, meta.file().unwrap_or_default(), verbosity)
}

/// A span's or an event's fields as pairs; `message` apart.
#[derive(Default)]
struct Pairs {
    message: Option<String>,
    pairs: Vec<(String, LogValue)>,
}

/// A `Debug` text of a string (`?path`) is quoted already: the pair takes the string.
fn unquoted(text: String) -> String {
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(inner) if !inner.is_empty() || text.len() == 2 => {
            inner.replace("\\\"", "\"").replace("\\\\", "\\")
        }
        _ => text,
    }
}

impl Pairs {
    fn push(&mut self, field: &Field, value: LogValue) {
        self.pairs
            .push((upstream_key(field.name()).to_owned(), value));
    }
}

impl Visit for Pairs {
    // The macros record the format string's text as the first `message`; a `message`
    // pair given too (upstream's eviction line has one) comes after it.
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" && self.message.is_none() {
            self.message = Some(value.to_owned());
        } else {
            self.push(field, LogValue::Text(value.to_owned()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" && self.message.is_none() {
            self.message = Some(text);
        } else {
            self.push(field, LogValue::Text(unquoted(text)));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, LogValue::Plain(value.to_string()));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, LogValue::Plain(value.to_string()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, LogValue::Plain(value.to_string()));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        let plain = if value.is_finite() {
            value.to_string()
        } else {
            format!("\"{value}\"")
        };
        self.push(field, LogValue::Plain(plain));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, LogValue::Text(value.to_string()));
    }
}

/// A span's pairs, kept in its extensions for the lines logged inside it.
struct SpanPairs(Vec<(String, LogValue)>);

/// Records each span's fields (and later `record` calls) as pairs.
struct SpanPairsLayer;

impl<S> Layer<S> for SpanPairsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        // A span has no message: every field is a pair.
        let mut pairs = Pairs {
            message: Some(String::new()),
            ..Pairs::default()
        };
        attrs.record(&mut pairs);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanPairs(pairs.pairs));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut pairs = Pairs {
            message: Some(String::new()),
            ..Pairs::default()
        };
        values.record(&mut pairs);
        if let Some(span) = ctx.span(id) {
            if let Some(stored) = span.extensions_mut().get_mut::<SpanPairs>() {
                stored.0.extend(pairs.pairs);
            }
        }
    }
}

/// Writes each event as one upstream line.
struct UpstreamFormat {
    json: bool,
    pid: u32,
}

impl<S, N> FormatEvent<S, N> for UpstreamFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Pairs::default();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(stored) = span.extensions().get::<SpanPairs>() {
                    fields.pairs.extend(stored.0.iter().cloned());
                }
            }
        }
        event.record(&mut fields);
        // A key the event gives itself replaces its span's (a sync's `pod`, logged again).
        let mut seen = std::collections::BTreeSet::new();
        let mut pairs: Vec<(String, LogValue)> = fields
            .pairs
            .into_iter()
            .rev()
            .filter(|(key, _)| seen.insert(key.clone()))
            .collect();
        pairs.reverse();
        let severity = match *meta.level() {
            Level::ERROR => Severity::Error,
            Level::WARN => Severity::Warning,
            _ => Severity::Info,
        };
        let unix_nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let record = LogRecord {
            severity,
            verbosity: verbosity_of(meta.level()),
            unix_nanos,
            pid: self.pid,
            file: meta.file().unwrap_or_default(),
            line: meta.line().unwrap_or_default(),
            message: fields.message.as_deref().unwrap_or_default(),
            pairs: &pairs,
        };
        let line = if self.json {
            json_line(&record)
        } else {
            klog_text(&record)
        };
        writeln!(writer, "{line}")
    }
}

/// Installs the global subscriber: stderr, upstream's format, `-v` and `--vmodule` (or
/// `RUST_LOG` when set).
pub fn init(logging: &LoggingSettings) {
    let format = UpstreamFormat {
        json: logging.format == LogFormat::Json,
        pid: std::process::id(),
    };
    let lines = tracing_subscriber::fmt::layer()
        .event_format(format)
        .with_writer(std::io::stderr);
    // A filter of metadata alone: each callsite is decided once and cached.
    let (env, by_verbosity) = match EnvFilter::try_from_default_env() {
        Ok(env) => (Some(env), None),
        Err(_) => {
            let rules = logging.vmodule.clone();
            let verbosity = logging.verbosity;
            let filter = FilterFn::new(move |meta| enabled(meta, &rules, verbosity));
            (None, Some(filter))
        }
    };
    let _ = tracing_subscriber::registry()
        .with(env)
        .with(by_verbosity)
        .with(SpanPairsLayer)
        .with(lines)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Lines written to memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut all) = self.0.lock() {
                all.extend_from_slice(buf);
            }
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn capture(json: bool, rules: Vec<VModuleRule>, verbosity: u32, f: impl FnOnce()) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let lines = tracing_subscriber::fmt::layer()
            .event_format(UpstreamFormat { json, pid: 42 })
            .with_writer(move || writer.clone());
        let subscriber = tracing_subscriber::registry()
            .with(FilterFn::new(move |meta| enabled(meta, &rules, verbosity)))
            .with(SpanPairsLayer)
            .with(lines);
        tracing::subscriber::with_default(subscriber, f);
        let bytes = out.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn lines_carry_the_spans_pairs_with_upstreams_keys() {
        let text = capture(false, Vec::new(), 0, || {
            let span = tracing::info_span!("sync_pod", pod = %"default/web", uid = "u1");
            let _entered = span.enter();
            let error = std::io::Error::other("no route");
            tracing::warn!(attempt = 3, path = ?"/var/x", error = %error, "Failed to probe");
            tracing::info!(message = %"low on memory", "Evicting pod");
            tracing::debug!("not at -v=0");
        });
        let line = text.lines().next().unwrap_or_default();
        assert!(line.starts_with('W'), "{text}");
        assert!(line.contains("      42 logging.rs:"), "{text}");
        assert!(
            line.ends_with("] \"Failed to probe\" pod=\"default/web\" podUID=\"u1\" attempt=3 path=\"/var/x\" err=\"no route\""),
            "{text}"
        );
        let eviction = text.lines().nth(1).unwrap_or_default();
        assert!(
            eviction.ends_with(
                "] \"Evicting pod\" pod=\"default/web\" podUID=\"u1\" message=\"low on memory\""
            ),
            "{text}"
        );
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[test]
    fn json_lines_and_vmodule_verbosity() {
        let rules = vec![VModuleRule {
            pattern: "logg*".into(),
            verbosity: 2,
        }];
        let text = capture(true, rules, 0, || {
            tracing::debug!(pods = 2_u64, "at -v=2 through --vmodule");
            tracing::trace!("not at 2");
        });
        let line: serde_json::Value =
            serde_json::from_str(text.lines().next().unwrap_or_default()).expect("JSON");
        assert_eq!(line["msg"], "at -v=2 through --vmodule");
        assert_eq!(line["v"], 2);
        assert_eq!(line["pods"], 2);
        assert!(
            line["caller"]
                .as_str()
                .is_some_and(|c| c.starts_with("app/logging.rs:")),
            "{line}"
        );
        assert_eq!(text.lines().count(), 1, "{text}");
    }
}
