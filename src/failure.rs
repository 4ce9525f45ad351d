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

impl From<hardshift_generator::pipeline::Error> for Failure {
    fn from(e: hardshift_generator::pipeline::Error) -> Self {
        use hardshift_generator::pipeline::Error;
        match e {
            Error::Input(m) => Failure::input(m),
            Error::Other(m) => Failure::other(m),
        }
    }
}

impl From<hardshift_generator::release_pull::Error> for Failure {
    fn from(e: hardshift_generator::release_pull::Error) -> Self {
        use hardshift_generator::release_pull::Error;
        match e {
            Error::Input(m) => Failure::input(m),
            Error::Other(m) => Failure::other(m),
        }
    }
}
