//! Errors keep their causes as `source()`s and say only their own part in `Display`;
//! [`Chain`] prints the whole story on one line, for logs and messages.

use std::error::Error;
use std::fmt;

/// An error and every cause below it: `outer: cause: root cause`.
pub struct Chain<'a>(pub &'a (dyn Error + 'a));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
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
}
