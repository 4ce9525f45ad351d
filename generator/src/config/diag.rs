//! Input errors a person can act on: file, line and column, field path, what was expected.

use super::yaml::{Doc, Pos};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The input file's name as the user knows it (e.g. `install-config.yaml`).
    pub file: String,
    /// Field path in the file, e.g. `networking.machineNetwork[0].cidr`; empty for the whole file.
    pub path: String,
    pub pos: Option<Pos>,
    pub message: String,
    /// How to fix it.
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(p) = self.pos {
            write!(f, ":{}:{}", p.line, p.col)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\n    hint: {h}")?;
        }
        Ok(())
    }
}

/// Every problem found in the inputs of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputError {
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.diagnostics.len();
        writeln!(f, "{n} problem{} in the inputs:", if n == 1 { "" } else { "s" })?;
        for d in &self.diagnostics {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InputError {}

/// Collects diagnostics for one file, resolving positions from its parsed document.
pub struct Reporter<'a> {
    pub file: &'a str,
    pub doc: &'a Doc,
    pub out: &'a mut Vec<Diagnostic>,
}

impl Reporter<'_> {
    pub fn error(&mut self, path: &str, message: impl Into<String>, hint: impl Into<Option<String>>) {
        self.out.push(Diagnostic {
            file: self.file.to_string(),
            path: path.to_string(),
            pos: self.doc.pos(path),
            message: message.into(),
            hint: hint.into(),
        });
    }
}
