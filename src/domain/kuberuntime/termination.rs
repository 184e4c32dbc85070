//! The termination message (upstream's `getTerminationMessage` and
//! `readLastStringFromContainerLogs`): each container instance gets a file
//! `<pod-dir>/containers/<name>/<attempt>` mounted at its `terminationMessagePath`; once
//! the instance exited, what it wrote there (at most 4096 bytes) becomes the message of
//! its terminated state. With `terminationMessagePolicy: FallbackToLogsOnError`, an
//! instance that failed and wrote nothing gets the tail of its log instead (the last 80
//! lines, at most 2048 bytes).

use std::path::PathBuf;

use super::requests::{pod_dir, Mount, RequestContext};
use crate::domain::kubelet_api::logs::parse_cri_line;
use crate::domain::pod::{Container, Pod};

/// Upstream's `MaxContainerTerminationMessageLength`.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Upstream's `MaxContainerTerminationMessageLogLength` and `...LogLines`.
pub const MAX_LOG_BYTES: usize = 2048;
pub const MAX_LOG_LINES: usize = 80;

pub const FALLBACK_TO_LOGS_ON_ERROR: &str = "FallbackToLogsOnError";

/// `<pod-dir>/containers/<name>/<attempt>`: the instance's termination message file.
pub fn message_file(ctx: &RequestContext, pod_uid: &str, container: &str, attempt: u32) -> PathBuf {
    pod_dir(ctx, pod_uid)
        .join("containers")
        .join(container)
        .join(attempt.to_string())
}

/// The mount of the instance's message file, when the container has a
/// `terminationMessagePath`.
pub fn message_mount(
    ctx: &RequestContext,
    pod: &Pod,
    container: &Container,
    attempt: u32,
) -> Option<Mount> {
    if container.termination_message_path.is_empty() {
        return None;
    }
    Some(Mount {
        container_path: container.termination_message_path.clone(),
        host_path: message_file(ctx, &pod.metadata.uid, &container.name, attempt)
            .display()
            .to_string(),
        readonly: false,
        ..Default::default()
    })
}

/// What the kubelet read of the message file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageFile {
    /// Its first bytes (at most [`MAX_MESSAGE_BYTES`]).
    Read(Vec<u8>),
    Missing,
    /// It could not be read: the error's text.
    Failed {
        path: String,
        error: String,
    },
}

/// What to do for an exited instance's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// This text (possibly empty).
    Text(String),
    /// Read the tail of its log.
    FromLogs,
}

/// Upstream's decision: the file's content, or the log's tail when the policy falls back
/// on an error (exit code not 0, the container ran) and the file gave nothing.
pub fn termination_message(
    container: &Container,
    exit_code: i32,
    reason: &str,
    file: &MessageFile,
) -> Message {
    let fallback = container.termination_message_policy == FALLBACK_TO_LOGS_ON_ERROR
        && exit_code != 0
        && reason != "ContainerCannotRun";
    if container.termination_message_path.is_empty() {
        return if fallback {
            Message::FromLogs
        } else {
            Message::Text(String::new())
        };
    }
    match file {
        MessageFile::Read(data) if !data.is_empty() || !fallback => {
            let end = data.len().min(MAX_MESSAGE_BYTES);
            Message::Text(String::from_utf8_lossy(&data[..end]).into_owned())
        }
        MessageFile::Failed { path, error } => {
            Message::Text(format!("Error on reading termination log {path}: {error}"))
        }
        _ if fallback => Message::FromLogs,
        _ => Message::Text(String::new()),
    }
}

/// The last [`MAX_LOG_LINES`] lines of a CRI log file's content, at most
/// [`MAX_LOG_BYTES`] (the newest bytes), as upstream's `ReadLogs` with a tail and limit.
pub fn log_tail(log: &[u8]) -> String {
    let mut content = Vec::new();
    let lines: Vec<&[u8]> = log
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut full_lines = 0;
    let mut picked = Vec::new();
    for line in lines.iter().rev() {
        let Some(message) = parse_cri_line(line) else {
            continue;
        };
        if !message.partial {
            full_lines += 1;
            if full_lines > MAX_LOG_LINES {
                break;
            }
        }
        picked.push(message.content);
    }
    for part in picked.into_iter().rev() {
        content.extend(part);
    }
    let start = content.len().saturating_sub(MAX_LOG_BYTES);
    String::from_utf8_lossy(&content[start..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(policy: &str) -> Container {
        Container {
            name: "c".into(),
            termination_message_policy: policy.into(),
            ..Container::default()
        }
    }

    #[test]
    fn the_file_or_the_logs_as_upstream_decides() {
        let file = MessageFile::Read(b"bye".to_vec());
        let c = container("File");
        assert_eq!(
            termination_message(&c, 1, "Error", &file),
            Message::Text("bye".into())
        );
        let empty = MessageFile::Read(Vec::new());
        assert_eq!(
            termination_message(&c, 1, "Error", &empty),
            Message::Text(String::new())
        );
        let c = container(FALLBACK_TO_LOGS_ON_ERROR);
        assert_eq!(
            termination_message(&c, 1, "Error", &empty),
            Message::FromLogs
        );
        assert_eq!(
            termination_message(&c, 1, "Error", &MessageFile::Missing),
            Message::FromLogs
        );
        assert_eq!(
            termination_message(&c, 0, "Completed", &empty),
            Message::Text(String::new())
        );
        assert_eq!(
            termination_message(&c, 1, "Error", &file),
            Message::Text("bye".into())
        );
        assert_eq!(
            termination_message(&c, 128, "ContainerCannotRun", &empty),
            Message::Text(String::new())
        );
        let big = MessageFile::Read(vec![b'x'; 5000]);
        let Message::Text(text) = termination_message(&c, 0, "", &big) else {
            panic!("text")
        };
        assert_eq!(text.len(), MAX_MESSAGE_BYTES);
    }

    #[test]
    fn the_log_tail_keeps_80_lines_and_2048_bytes() {
        let mut log = Vec::new();
        for i in 0..100 {
            log.extend(format!("2026-01-01T00:00:00.000000000Z stdout F line {i}\n").bytes());
        }
        let tail = log_tail(&log);
        assert!(
            tail.starts_with("line 20\n") || tail.len() == MAX_LOG_BYTES,
            "{tail}"
        );
        assert!(tail.ends_with("line 99\n"));
        let short = b"2026-01-01T00:00:00Z stderr P last \n2026-01-01T00:00:00Z stderr F words\n";
        assert_eq!(log_tail(short), "last words\n");
    }
}
