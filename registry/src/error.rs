//! Why a registry operation failed: a kind per failure, with its cause where there is one.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{image}: not found in {registry}: {said}")]
    Missing { image: String, registry: String, said: String },
    #[error("{registry}: credentials refused (HTTP {status}) for {image}: {said}")]
    Auth {
        image: String,
        registry: String,
        status: u16,
        said: String,
    },
    #[error("{registry}: TLS: {detail} (is its CA in additionalTrustBundle?)")]
    Tls { registry: String, detail: String },
    #[error("{registry}: DNS: {detail}")]
    Dns { registry: String, detail: String },
    #[error("{registry}: cannot connect: {detail}")]
    Connect { registry: String, detail: String },
    #[error("{registry}: HTTP {status} for {image}: {said}")]
    Http {
        image: String,
        registry: String,
        status: u16,
        said: String,
    },
    #[error("{image}: the registry sent content whose digest is {got}, not {want}: refused")]
    Digest { image: String, want: String, got: String },
    /// A local file or directory of the pull (the cache, a blob) did not read or write.
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A layer's content was refused or did not extract.
    #[error("layer {digest}: {source}")]
    Layer {
        digest: String,
        #[source]
        source: crate::extract::LayerError,
    },
    /// The pull secret does not read (the message names the registry, never its secret).
    #[error("pull secret: {0}")]
    PullSecret(String),
    /// additionalTrustBundle does not read as PEM certificates.
    #[error("additionalTrustBundle: {0}")]
    TrustBundle(String),
    /// A digest that is not `sha256:` and 64 lowercase hex digits.
    #[error("{0}")]
    BadDigest(String),
    #[error("{0}")]
    Other(String),
}

impl Error {
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl Error {
    /// A short class name for reports: missing, auth, tls, dns, connect, http, digest, other.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Missing { .. } => "missing",
            Error::Auth { .. } => "auth",
            Error::Tls { .. } => "tls",
            Error::Dns { .. } => "dns",
            Error::Connect { .. } => "connect",
            Error::Http { .. } => "http",
            Error::Digest { .. } => "digest",
            Error::Io { .. } => "io",
            Error::Layer { .. } => "layer",
            Error::PullSecret(_) => "pull-secret",
            Error::TrustBundle(_) => "trust-bundle",
            Error::BadDigest(_) => "digest",
            Error::Other(_) => "other",
        }
    }
}
