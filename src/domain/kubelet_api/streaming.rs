//! The options of `/exec`, `/attach` and `/portForward` requests, read as upstream's
//! kubelet reads them before it looks the pod up (`remotecommand.NewOptions`,
//! `portforward.NewV4Options`): a request that asks for no stream, or names a bad port,
//! is answered 400 with upstream's text.

use super::logs::query_pairs;
use crate::domain::units::go_quote;

/// Upstream's `api.ExecCommandParam`, `ExecStdinParam`, `ExecStdoutParam`,
/// `ExecStderrParam`, `ExecTTYParam` and `PortHeader`.
const COMMAND: &str = "command";
const STDIN: &str = "input";
const STDOUT: &str = "output";
const STDERR: &str = "error";
const TTY: &str = "tty";
const PORT: &str = "port";

/// Why a streaming request is answered 400; its text is upstream's body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamRequestError {
    /// `remotecommand.NewOptions`' refusal.
    #[error("you must specify at least 1 of stdin, stdout, stderr")]
    NoStream,
    #[error("query parameter \"port\" is required")]
    PortRequired,
    #[error("query parameter \"port\" cannot be empty")]
    PortEmpty,
    #[error("unable to parse {} as a port: {source}", go_quote(.value))]
    BadPort { value: String, source: PortSyntax },
    #[error("port {} must be > 0", go_quote(.value))]
    PortZero { value: String },
}

/// Go's `strconv.ParseUint(text, 10, 16)` errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortSyntax {
    #[error("strconv.ParseUint: parsing {}: invalid syntax", go_quote(.0))]
    Invalid(String),
    #[error("strconv.ParseUint: parsing {}: value out of range", go_quote(.0))]
    OutOfRange(String),
}

/// The streams an exec or attach asks for, and an exec's command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamOptions {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    /// Never with `tty`: upstream drops stderr then.
    pub stderr: bool,
    pub tty: bool,
}

/// The query's pairs as Go's `url.ParseQuery` keeps them: a pair that does not decode is
/// skipped, the others stay.
fn pairs(query: &str) -> Vec<(String, String)> {
    query_pairs(query).unwrap_or_else(|| {
        query
            .split('&')
            .filter_map(|pair| query_pairs(pair).and_then(|p| p.into_iter().next()))
            .collect()
    })
}

/// Go's `FormValue`: the first value of `key`, or empty.
fn first<'a>(pairs: &'a [(String, String)], key: &str) -> &'a str {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map_or("", |(_, v)| v.as_str())
}

/// An exec's or attach's options from its query; `Err` is the 400's body.
pub fn stream_options(query: &str) -> Result<StreamOptions, StreamRequestError> {
    let pairs = pairs(query);
    let on = |key: &str| first(&pairs, key) == "1";
    let tty = on(TTY);
    let options = StreamOptions {
        command: pairs
            .iter()
            .filter(|(k, _)| k == COMMAND)
            .map(|(_, v)| v.clone())
            .collect(),
        stdin: on(STDIN),
        stdout: on(STDOUT),
        stderr: on(STDERR) && !tty,
        tty,
    };
    if !options.stdin && !options.stdout && !options.stderr {
        return Err(StreamRequestError::NoStream);
    }
    Ok(options)
}

/// Go's `strconv.ParseUint(text, 10, 16)`.
fn parse_port(text: &str) -> Result<u16, PortSyntax> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PortSyntax::Invalid(text.to_owned()));
    }
    text.parse::<u16>()
        .map_err(|_| PortSyntax::OutOfRange(text.to_owned()))
}

/// Whether the request asks for a WebSocket (upstream's `wsstream.IsWebSocketRequest`):
/// `Upgrade: websocket` and an `upgrade` token in `Connection`.
pub fn is_websocket(upgrade: Option<&str>, connection: Option<&str>) -> bool {
    upgrade.is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
        && connection.is_some_and(|c| {
            c.to_ascii_lowercase()
                .split(',')
                .any(|token| token.trim_start().trim_end_matches([' ', '\t']) == "upgrade")
        })
}

/// A port-forward's ports: from the query for a WebSocket request (each `port` value a
/// comma-separated list), none for SPDY (its streams name them); `Err` is the 400's body.
pub fn port_forward_ports(query: &str, websocket: bool) -> Result<Vec<u16>, StreamRequestError> {
    if !websocket {
        return Ok(Vec::new());
    }
    let values: Vec<String> = pairs(query)
        .into_iter()
        .filter(|(k, _)| k == PORT)
        .map(|(_, v)| v)
        .collect();
    if values.is_empty() {
        return Err(StreamRequestError::PortRequired);
    }
    let mut ports = Vec::new();
    for value in &values {
        if value.is_empty() {
            return Err(StreamRequestError::PortEmpty);
        }
        for part in value.split(',') {
            let port = parse_port(part).map_err(|source| StreamRequestError::BadPort {
                value: value.clone(),
                source,
            })?;
            if port < 1 {
                return Err(StreamRequestError::PortZero {
                    value: value.clone(),
                });
            }
            ports.push(port);
        }
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_without_streams_is_refused_in_upstreams_words() {
        for query in [
            "",
            "command=ls",
            "command=ls&input=0&output=0",
            // Only "1" is true, as upstream reads it.
            "command=ls&output=true",
            "command=ls&stdout=1&stdin=1",
            // stderr with a TTY is dropped, leaving nothing.
            "command=ls&error=1&tty=1",
        ] {
            assert_eq!(
                stream_options(query).map_err(|e| e.to_string()),
                Err("you must specify at least 1 of stdin, stdout, stderr".to_owned()),
                "{query:?}"
            );
        }
    }

    #[test]
    fn exec_options_as_upstream() {
        assert_eq!(
            stream_options("command=sh&command=-c&command=echo%20hi&output=1&error=1"),
            Ok(StreamOptions {
                command: vec!["sh".into(), "-c".into(), "echo hi".into()],
                stdout: true,
                stderr: true,
                ..StreamOptions::default()
            })
        );
        assert_eq!(
            stream_options("input=1&tty=1&error=1"),
            Ok(StreamOptions {
                stdin: true,
                tty: true,
                ..StreamOptions::default()
            })
        );
        // The first value counts; an undecodable pair is skipped, the rest kept.
        assert_eq!(
            stream_options("output=0&output=1&bad=%zz&input=1").map(|o| (o.stdin, o.stdout)),
            Ok((true, false))
        );
    }

    #[test]
    fn port_forward_ports_as_upstream() {
        assert_eq!(port_forward_ports("", false), Ok(vec![]), "SPDY");
        assert_eq!(port_forward_ports("port=abc", false), Ok(vec![]), "SPDY");
        assert_eq!(
            port_forward_ports("port=80,8080&port=443", true),
            Ok(vec![80, 8080, 443])
        );
        for (query, want) in [
            ("", r#"query parameter "port" is required"#),
            ("other=1", r#"query parameter "port" is required"#),
            ("port=", r#"query parameter "port" cannot be empty"#),
            (
                "port=80,abc",
                r#"unable to parse "80,abc" as a port: strconv.ParseUint: parsing "abc": invalid syntax"#,
            ),
            (
                "port=80,",
                r#"unable to parse "80," as a port: strconv.ParseUint: parsing "": invalid syntax"#,
            ),
            (
                "port=70000",
                r#"unable to parse "70000" as a port: strconv.ParseUint: parsing "70000": value out of range"#,
            ),
            (
                "port=-1",
                r#"unable to parse "-1" as a port: strconv.ParseUint: parsing "-1": invalid syntax"#,
            ),
            ("port=0", r#"port "0" must be > 0"#),
        ] {
            assert_eq!(
                port_forward_ports(query, true).map_err(|e| e.to_string()),
                Err(want.to_owned()),
                "{query:?}"
            );
        }
    }

    #[test]
    fn websocket_requests_as_upstream() {
        assert!(is_websocket(Some("websocket"), Some("Upgrade")));
        assert!(is_websocket(Some("WebSocket"), Some("keep-alive, Upgrade")));
        assert!(!is_websocket(Some("SPDY/3.1"), Some("Upgrade")));
        assert!(!is_websocket(Some("websocket"), Some("keep-alive")));
        assert!(!is_websocket(None, Some("Upgrade")));
    }
}
