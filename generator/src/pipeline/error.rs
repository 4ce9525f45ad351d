//! Why a run of the pipeline stopped.

/// Why a build stopped: the user's input (exit 2), or something else (exit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    Input(String),
    Other(String),
}

impl Error {
    pub fn input(m: impl std::fmt::Display) -> Error {
        Error::Input(m.to_string())
    }
    pub fn other(m: impl std::fmt::Display) -> Error {
        Error::Other(m.to_string())
    }
    pub fn message(&self) -> &str {
        match self {
            Error::Input(m) | Error::Other(m) => m,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}
