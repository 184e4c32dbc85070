//! kube-rs errors as the ports' [`CallError`]: the kind decides retries, the message names
//! the root cause (a refused connection, an unknown CA, the server's own message).

use std::error::Error as StdError;

use crate::ports::api::{CallError, CallErrorKind, Cause};
use crate::ports::error::Chain;

/// What the API server said, for the ports' specific variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    NotFound,
    AlreadyExists,
    Conflict,
    Other,
}

fn is_timeout(error: &(dyn StdError + 'static)) -> bool {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::TimedOut {
                return true;
            }
        }
        current = e.source();
    }
    false
}

/// Classify a kube error: the server's answer when there was one, the call error otherwise.
pub fn classify(error: kube::Error) -> (Answer, CallError) {
    let (answer, kind, message, source): (Answer, CallErrorKind, String, Cause) = match error {
        // The server's Status is the cause worth keeping (kube's wrapper repeats it in
        // Debug form).
        kube::Error::Api(status) => {
            let (answer, kind, message) = api_status(&status);
            (answer, kind, message, status)
        }
        other => {
            let kind = match &other {
                kube::Error::SerdeError(_) | kube::Error::FromUtf8(_) => CallErrorKind::Decode,
                kube::Error::HyperError(_)
                | kube::Error::Service(_)
                | kube::Error::RustlsTls(_) => {
                    if is_timeout(&other) {
                        CallErrorKind::Timeout
                    } else {
                        CallErrorKind::Unreachable
                    }
                }
                kube::Error::Auth(_) => CallErrorKind::Unauthorized,
                _ => CallErrorKind::Other,
            };
            (
                Answer::Other,
                kind,
                Chain(&other).to_string(),
                Box::new(other),
            )
        }
    };
    (
        answer,
        CallError {
            kind,
            message,
            source: Some(source),
        },
    )
}

fn api_status(status: &kube::core::Status) -> (Answer, CallErrorKind, String) {
    let answer = if status.is_not_found() {
        Answer::NotFound
    } else if status.is_already_exists() {
        Answer::AlreadyExists
    } else if status.is_conflict() {
        Answer::Conflict
    } else {
        Answer::Other
    };
    let kind = match status.code {
        401 => CallErrorKind::Unauthorized,
        403 => CallErrorKind::Forbidden,
        400 | 422 => CallErrorKind::Invalid,
        429 => CallErrorKind::Throttled,
        500..=599 => CallErrorKind::Server,
        _ => CallErrorKind::Other,
    };
    let message = if status.message.is_empty() {
        format!("HTTP {} {}", status.code, status.reason)
    } else {
        status.message.clone()
    };
    (answer, kind, message)
}

/// A call that did not answer within `timeout`.
pub fn timed_out(timeout: std::time::Duration) -> CallError {
    CallError::new(
        CallErrorKind::Timeout,
        format!("no answer within {timeout:?}"),
    )
}

/// An object that could not be converted between the domain's and k8s-openapi's types.
pub fn conversion(error: serde_json::Error) -> CallError {
    CallError {
        kind: CallErrorKind::Decode,
        message: format!("object conversion: {error}"),
        source: Some(Box::new(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_statuses_keep_the_servers_message() {
        let status = kube::core::Status {
            code: 409,
            reason: "Conflict".into(),
            message: "the object has been modified".into(),
            ..Default::default()
        };
        let (answer, error) = classify(kube::Error::Api(Box::new(status)));
        assert_eq!(answer, Answer::Conflict);
        assert_eq!(error.kind, CallErrorKind::Other);
        assert_eq!(error.to_string(), "failed: the object has been modified");
        assert!(error.source.is_some());

        let unauthorized = kube::core::Status {
            code: 401,
            reason: "Unauthorized".into(),
            ..Default::default()
        };
        let (_, error) = classify(kube::Error::Api(Box::new(unauthorized)));
        assert_eq!(error.kind, CallErrorKind::Unauthorized);
        assert_eq!(error.message, "HTTP 401 Unauthorized");
    }

    #[test]
    fn chains_drop_repeats() {
        let inner = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let outer = kube::Error::ReadEvents(inner);
        assert_eq!(
            crate::ports::error::Chain(&outer).to_string(),
            "Error reading events stream: refused"
        );
    }
}
