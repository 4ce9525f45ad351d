//! How a command fails: a message and its exit code. Below every command, so each names it
//! without reaching back up to `main`.

/// Failures carry their exit code: 2 for input and usage errors, 1 for everything else.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn input(message: impl std::fmt::Display) -> Self {
        Self {
            code: 2,
            message: message.to_string(),
        }
    }
    pub fn other(message: impl std::fmt::Display) -> Self {
        Self {
            code: 1,
            message: message.to_string(),
        }
    }
}

/// `s` fit for a terminal: every control character but newline and tab written as an escape
/// (`\u{1b}`), and the bidirectional overrides too. What a failure says can hold a program's
/// output (a render's podman run, a registry's answer): its ESC and BEL must not drive the
/// admin's terminal.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}');
        if (c.is_control() && c != '\n' && c != '\t') || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl From<hardshift_generator::pipeline::Error> for Failure {
    fn from(e: hardshift_generator::pipeline::Error) -> Self {
        use hardshift_generator::pipeline::Error;
        match e {
            Error::Input(m) => Failure::input(m),
            other => Failure::other(other),
        }
    }
}

/// A bundle whose inventory is missing, newer or broken: the user's to fix (each says how).
impl From<hardshift_bundle::inventory::Error> for Failure {
    fn from(e: hardshift_bundle::inventory::Error) -> Self {
        Failure::input(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_and_bells_are_shown_not_obeyed() {
        let s = super::printable("podman: \u{1b}[2J\u{7}failed\r\n\thint: \u{202e}x");
        assert_eq!(s, "podman: \\u{1b}[2J\\u{7}failed\\r\n\thint: \\u{202e}x");
    }
}
