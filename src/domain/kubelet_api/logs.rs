//! Container logs as `kubectl logs` asks for them: the options of the query
//! (`v1.PodLogOptions`, checked as upstream's `ValidatePodLogOptions`), the CRI log
//! format (`<RFC3339Nano> <stdout|stderr> <P|F> <content>`) decoded, and upstream's
//! `logWriter`: since-time filter, timestamp prefixes, byte limit.

use crate::domain::units::time::{parse_rfc3339, rfc3339_nanos};

/// `kubectl logs`' options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    /// Only the last N lines; `None`: all.
    pub tail_lines: Option<u64>,
    /// Stop after this many bytes.
    pub limit_bytes: Option<u64>,
    /// Only lines at or after this instant (Unix nanoseconds).
    pub since_nanos: Option<i64>,
}

/// Why a query is refused, with upstream's status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    pub status: u16,
    pub message: String,
}

/// A path segment, percent-decoded; `None` when malformed or when it decodes to a
/// slash (an encoded slash never names a pod or container).
pub fn decode_segment(text: &str) -> Option<String> {
    percent_decode(text, false).filter(|s| !s.contains('/'))
}

fn percent_decode(text: &str, plus_is_space: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A URL query as decoded pairs; `None` when an escape is malformed.
pub fn query_pairs(query: &str) -> Option<Vec<(String, String)>> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(k, true)?, percent_decode(v, true)?))
        })
        .collect()
}

fn bool_param(value: &str) -> Option<bool> {
    match value {
        "" | "true" | "1" | "t" | "T" | "TRUE" | "True" => Some(true),
        "false" | "0" | "f" | "F" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// The options of a `/containerLogs` query; `now_nanos` turns `sinceSeconds` into an
/// instant.
pub fn parse_log_options(query: &str, now_nanos: i64) -> Result<LogOptions, QueryError> {
    let undecodable = || QueryError {
        status: 400,
        message: r#"{"message": "Unable to decode query."}"#.into(),
    };
    let invalid = || QueryError {
        status: 422,
        message: r#"{"message": "Invalid request."}"#.into(),
    };
    let mut options = LogOptions::default();
    let mut since_seconds: Option<i64> = None;
    let mut since_time: Option<i64> = None;
    for (key, value) in query_pairs(query).ok_or_else(undecodable)? {
        match key.as_str() {
            "follow" => options.follow = bool_param(&value).ok_or_else(undecodable)?,
            "previous" => options.previous = bool_param(&value).ok_or_else(undecodable)?,
            "timestamps" => options.timestamps = bool_param(&value).ok_or_else(undecodable)?,
            "tailLines" => {
                let n: i64 = value.parse().map_err(|_| undecodable())?;
                options.tail_lines = Some(u64::try_from(n).map_err(|_| invalid())?);
            }
            "limitBytes" => {
                let n: i64 = value.parse().map_err(|_| undecodable())?;
                if n < 1 {
                    return Err(invalid());
                }
                options.limit_bytes = u64::try_from(n).ok();
            }
            "sinceSeconds" => {
                let n: i64 = value.parse().map_err(|_| undecodable())?;
                if n < 1 {
                    return Err(invalid());
                }
                since_seconds = Some(n);
            }
            "sinceTime" => since_time = Some(parse_rfc3339(&value).ok_or_else(undecodable)?),
            // Upstream decodes the whole PodLogOptions; other fields change nothing here.
            _ => {}
        }
    }
    options.since_nanos = match (since_seconds, since_time) {
        (Some(_), Some(_)) => return Err(invalid()),
        (Some(s), None) => Some(now_nanos.saturating_sub(s.saturating_mul(1_000_000_000))),
        (None, t) => t,
    };
    Ok(options)
}

/// Which stream a line was written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One decoded line of a CRI log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogMessage<'a> {
    pub timestamp_nanos: i64,
    pub stream: Stream,
    /// A partial line (`P`): the content continues in the next message.
    pub partial: bool,
    /// The content, with its newline for full lines.
    pub content: Vec<u8>,
    pub raw_timestamp: &'a str,
}

/// Decodes one line of a CRI log file (without its trailing newline); `None` for a
/// line not in that format (upstream logs and skips those).
pub fn parse_cri_line(line: &[u8]) -> Option<LogMessage<'_>> {
    let mut parts = line.splitn(4, |b| *b == b' ');
    let timestamp = std::str::from_utf8(parts.next()?).ok()?;
    let timestamp_nanos = parse_rfc3339(timestamp)?;
    let stream = match parts.next()? {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    let tags = parts.next()?;
    let partial = match tags.split(|b| *b == b':').next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    let mut content = parts.next().unwrap_or_default().to_vec();
    if !partial {
        content.push(b'\n');
    }
    Some(LogMessage {
        timestamp_nanos,
        stream,
        partial,
        content,
        raw_timestamp: timestamp,
    })
}

/// Where the last `lines` lines of `data` start, counting from its end (upstream's
/// `FindTailLineStartIndex`, a trailing newline ending the last line); `None` when `data`
/// holds fewer lines, so the caller reads further back.
pub fn tail_start(data: &[u8], lines: u64) -> Option<usize> {
    if lines == 0 {
        return Some(data.len());
    }
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    scan_newlines_back(body, lines).ok()
}

/// Scans `block` backwards for the `needed`-th newline: the index just after it, or how
/// many newlines the block holds (the caller reads the block before and needs that many
/// fewer). Reading a file block by block keeps a huge `tailLines` cheap in memory.
pub fn scan_newlines_back(block: &[u8], needed: u64) -> Result<usize, u64> {
    let mut seen = 0u64;
    for (i, b) in block.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == needed {
                return Ok(i + 1);
            }
        }
    }
    Err(seen)
}

/// Upstream's `logWriter`: what each decoded message becomes in the answer.
#[derive(Debug, Clone)]
pub struct LogWriter {
    since_nanos: Option<i64>,
    timestamps: bool,
    remaining: Option<u64>,
    /// The previous message was partial: this one continues its line, without prefix.
    continues: bool,
}

impl LogWriter {
    pub fn new(options: &LogOptions) -> Self {
        LogWriter {
            since_nanos: options.since_nanos,
            timestamps: options.timestamps,
            remaining: options.limit_bytes,
            continues: false,
        }
    }

    /// The bytes to send for `message` (possibly none), appended to `out`; `false` once
    /// the byte limit is reached and nothing more may be sent.
    pub fn write(&mut self, message: &LogMessage<'_>, out: &mut Vec<u8>) -> bool {
        let add_prefix = !self.continues;
        self.continues = message.partial;
        if self
            .since_nanos
            .is_some_and(|s| message.timestamp_nanos < s)
        {
            return true;
        }
        let mut line = Vec::with_capacity(message.content.len() + 32);
        if self.timestamps && add_prefix {
            line.extend_from_slice(rfc3339_nanos(message.timestamp_nanos).as_bytes());
            line.push(b' ');
        }
        line.extend_from_slice(&message.content);
        match &mut self.remaining {
            None => {
                out.extend_from_slice(&line);
                true
            }
            Some(remaining) => {
                let take = usize::try_from(*remaining)
                    .unwrap_or(usize::MAX)
                    .min(line.len());
                out.extend_from_slice(&line[..take]);
                *remaining -= take as u64;
                *remaining > 0
            }
        }
    }

    /// Whether the byte limit is spent.
    pub fn done(&self) -> bool {
        self.remaining == Some(0)
    }
}

/// The file name of a container's log for a restart count (`<n>.log`), and the restart
/// count of a file name; other names (rotated `<n>.log.<time>`, stray files) are none.
pub fn restart_of_log_file(name: &str) -> Option<u32> {
    name.strip_suffix(".log")?.parse().ok()
}

/// Which instance's log a request reads, among the restart counts whose live log is on
/// disk, as upstream picks the container: the newest instance; with `previous`, the last
/// terminated one, which is the newest itself while the container waits to restart
/// (crash-loop back-off), else the one before the newest. `live` holds the instances the
/// runtime has created or running: a status that still says "waiting" once the newest
/// instance is live is older than the runtime, and the newest is then not the previous.
pub fn instance_to_read(
    restarts: &[u32],
    live: &[u32],
    previous: bool,
    waiting: bool,
) -> Option<u32> {
    let mut sorted = restarts.to_vec();
    sorted.sort_unstable();
    let newest = sorted.last().copied()?;
    let waiting = waiting && !live.contains(&newest);
    match (previous, waiting) {
        (true, false) => sorted.iter().rev().nth(1).copied(),
        _ => Some(newest),
    }
}

/// Whether a followed log's instance is known to run from the pod's status alone: the
/// status shows the container running as that instance (`running_restart` is the running
/// container's restart count). Otherwise the runtime is asked, since the status lags it by
/// a relist: a container started a moment ago still reads as waiting.
pub fn status_shows_instance_running(running_restart: Option<u32>, instance: u32) -> bool {
    running_restart == Some(instance)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_log_is_the_last_terminated_instances() {
        // Running instance 3, instance 2 dead and kept.
        assert_eq!(instance_to_read(&[3, 2], &[3], false, false), Some(3));
        assert_eq!(instance_to_read(&[2, 3], &[3], true, false), Some(2));
        // In back-off after instance 3 died (2's log removed with it): 3 is the previous.
        assert_eq!(instance_to_read(&[3], &[], true, true), Some(3));
        assert_eq!(instance_to_read(&[3], &[], false, true), Some(3));
        // Ran once and ended: no previous instance.
        assert_eq!(instance_to_read(&[0], &[], true, false), None);
        assert_eq!(instance_to_read(&[], &[], false, false), None);
    }

    #[test]
    fn a_waiting_status_older_than_the_runtimes_new_instance_reads_the_one_before() {
        // The status still says back-off, but instance 4 is already created (its log is
        // still empty): the previous instance is 3, the current one 4.
        assert_eq!(instance_to_read(&[3, 4], &[4], true, true), Some(3));
        assert_eq!(instance_to_read(&[3, 4], &[4], false, true), Some(4));
    }

    #[test]
    fn a_followed_instance_runs_by_the_status_only_when_it_is_the_running_one() {
        assert!(status_shows_instance_running(Some(2), 2));
        // Restarted since: the old instance is asked of the runtime.
        assert!(!status_shows_instance_running(Some(3), 2));
        // Waiting (just created, or stopped): asked of the runtime.
        assert!(!status_shows_instance_running(None, 0));
    }

    #[test]
    fn options_parse_as_kubectl_sends_them() {
        let now = 1_000 * 1_000_000_000;
        let o = parse_log_options(
            "follow=true&tailLines=10&timestamps=true&sinceSeconds=5",
            now,
        )
        .unwrap_or_default();
        assert!(o.follow && o.timestamps);
        assert_eq!(o.tail_lines, Some(10));
        assert_eq!(o.since_nanos, Some(995 * 1_000_000_000));
        let o = parse_log_options("sinceTime=2026-01-01T00%3A00%3A00Z&previous=true", now)
            .unwrap_or_default();
        assert!(o.previous);
        assert!(o.since_nanos.is_some());
    }

    #[test]
    fn bad_options_are_refused_as_upstream() {
        for (query, status) in [
            ("limitBytes=-1", 422),
            ("limitBytes=0", 422),
            ("tailLines=-5", 422),
            ("sinceSeconds=0", 422),
            ("sinceSeconds=3&sinceTime=2026-01-01T00:00:00Z", 422),
            ("tailLines=99999999999999999999999", 400),
            ("follow=maybe", 400),
            ("tailLines=%zz", 400),
        ] {
            assert_eq!(
                parse_log_options(query, 0).map_err(|e| e.status),
                Err(status),
                "{query}"
            );
        }
        assert_eq!(
            parse_log_options("tailLines=9223372036854775807", 0).map(|o| o.tail_lines),
            Ok(Some(i64::MAX as u64))
        );
    }

    #[test]
    fn cri_lines_decode() {
        let m = parse_cri_line(b"2016-10-06T00:17:09.669794202Z stdout F log content 1")
            .unwrap_or_else(|| panic!("parses"));
        assert_eq!(m.stream, Stream::Stdout);
        assert!(!m.partial);
        assert_eq!(m.content, b"log content 1\n");
        let m = parse_cri_line(b"2016-10-06T00:17:09.669794203Z stderr P part")
            .unwrap_or_else(|| panic!("parses"));
        assert!(m.partial);
        assert_eq!(m.content, b"part");
        let m = parse_cri_line(b"2016-10-06T00:17:09.669794203Z stdout F")
            .unwrap_or_else(|| panic!("parses"));
        assert_eq!(m.content, b"\n");
        assert!(parse_cri_line(b"garbage").is_none());
        assert!(parse_cri_line(b"2016-10-06T00:17:09Z stdin F x").is_none());
    }

    #[test]
    fn tail_counts_lines_from_the_end() {
        let data = b"a\nb\nc\n";
        assert_eq!(tail_start(data, 1), Some(4));
        assert_eq!(tail_start(data, 2), Some(2));
        assert_eq!(tail_start(data, 3), None);
        assert_eq!(tail_start(data, 0), Some(6));
        assert_eq!(tail_start(b"a\nb", 1), Some(2));
    }

    #[test]
    fn the_writer_filters_prefixes_and_limits() {
        let opts = LogOptions {
            timestamps: true,
            limit_bytes: Some(40),
            since_nanos: parse_rfc3339("2016-10-06T00:17:10Z"),
            ..LogOptions::default()
        };
        let mut w = LogWriter::new(&opts);
        let mut out = Vec::new();
        let old = parse_cri_line(b"2016-10-06T00:17:09Z stdout F old").unwrap_or_else(|| panic!());
        assert!(w.write(&old, &mut out));
        assert!(out.is_empty());
        let p = parse_cri_line(b"2016-10-06T00:17:10.5Z stdout P ab").unwrap_or_else(|| panic!());
        let f = parse_cri_line(b"2016-10-06T00:17:10.6Z stdout F cd").unwrap_or_else(|| panic!());
        assert!(w.write(&p, &mut out));
        assert!(w.write(&f, &mut out));
        assert_eq!(out, b"2016-10-06T00:17:10.5Z abcd\n");
        let long = parse_cri_line(b"2016-10-06T00:17:11Z stdout F 0123456789abcdef")
            .unwrap_or_else(|| panic!());
        assert!(!w.write(&long, &mut out));
        assert_eq!(out.len(), 40);
        assert!(w.done());
    }

    #[test]
    fn path_segments_decode_without_slashes() {
        assert_eq!(decode_segment("a%2Db+c"), Some("a-b+c".into()));
        assert_eq!(decode_segment("a%2Fb"), None);
        assert_eq!(decode_segment("..%2F..%2Fetc"), None);
        assert_eq!(decode_segment("%zz"), None);
    }

    #[test]
    fn log_file_names() {
        assert_eq!(restart_of_log_file("3.log"), Some(3));
        assert_eq!(restart_of_log_file("3.log.20260101-000000"), None);
        assert_eq!(restart_of_log_file("../x.log"), None);
    }
}
