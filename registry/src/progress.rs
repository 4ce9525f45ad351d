//! What long registry work tells whoever watches it: a pull's layers and bytes, a check's images.
//! The CLI draws it (a bar on a terminal, lines otherwise); the agent watches nothing.

/// Called from the task doing the work; cheap (a byte count per chunk).
pub trait Progress: Send + Sync {
    /// A phase of `total` units begins: bytes for a pull's layers, images for a check.
    fn begin(&self, _what: &str, _total: u64, _bytes: bool) {}
    /// `n` more units done.
    fn inc(&self, _n: u64) {}
    /// One item ended (a layer fetched or found kept, an image checked), in a line.
    fn item(&self, _line: &str) {}
    /// The phase is over.
    fn end(&self) {}
}

/// Nobody watching.
pub struct Quiet;
impl Progress for Quiet {}
