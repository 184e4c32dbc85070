//! Errors keep their causes as `source()`s and say only their own part in `Display`;
//! [`Chain`] prints the whole story on one line, for logs and messages.

use std::error::Error;
use std::fmt;

/// An error and every cause below it: `outer: cause: root cause`. A cause whose text
/// is already printed is left out (hyper, rustls and kube repeat their inner message in
/// their own). The one printer of error chains.
pub struct Chain<'a>(pub &'a (dyn Error + 'a));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(e) = cause {
            let more = e.to_string();
            if !text.contains(&more) {
                text.push_str(": ");
                text.push_str(&more);
            }
            cause = e.source();
        }
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("create /kubepods")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_cause_is_printed_once_in_order() {
        let e = Outer(std::io::Error::other("device busy"));
        assert_eq!(Chain(&e).to_string(), "create /kubepods: device busy");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect): connection refused")]
    struct Repeating(#[source] std::io::Error);

    #[test]
    fn a_cause_already_printed_is_left_out() {
        let e = Repeating(std::io::Error::other("connection refused"));
        assert_eq!(
            Chain(&e).to_string(),
            "client error (Connect): connection refused"
        );
    }
}
