//! Why a probe could not read what it reads.
//!
//! The readers' I/O steps return `anyhow::Result`, each step adding its context (the path,
//! the unit, the endpoint). What a probe hands on is data, not control flow: the judges and
//! the next round read it, a snapshot is cloned into the shared view and tests compare it.
//! So a reader's failure is rendered once, cause chain and all, into an `Unread` at the
//! probe's edge, and the report carries that text as the component's reason.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread(String);

impl Unread {
    /// A failure the probe words itself (no underlying error to chain).
    pub fn new(why: impl fmt::Display) -> Unread {
        Unread(why.to_string())
    }
}

impl fmt::Display for Unread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unread {}

/// The chain, outermost first: "path: No such file or directory (os error 2)".
impl From<anyhow::Error> for Unread {
    fn from(e: anyhow::Error) -> Unread {
        Unread(format!("{e:#}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn the_whole_chain_is_kept() {
        let e = std::fs::read("/nonexistent/x").context("/nonexistent/x").unwrap_err();
        let u = Unread::from(e);
        assert!(u.to_string().starts_with("/nonexistent/x: No such file"), "{u}");
    }
}
