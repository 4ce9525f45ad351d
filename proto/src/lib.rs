//! Wire contracts. `v1`: the versioned `hardshift.agent.v1` stream between node agent and
//! collector (`proto/hardshift/agent/v1/agent.proto`). `cri`: the subset of the Kubernetes CRI
//! (`runtime.v1`) the agent reads from CRI-O (`proto/cri/runtime/v1/api.proto`). `etcd`: the
//! subset of etcd's v3 API the agent reads from its member (`proto/etcd/rpc.proto`).
//! The Rust for each is generated from its .proto and committed (`src/generated/`, kept current by
//! `tests/generated.rs`).

/// The units whose journal a debug request may read: the agent's allow-list, and what
/// `hardshift gather` asks each node for.
pub const DEBUG_UNITS: [&str; 5] = ["kubelet", "crio", "bootkube", "release-image", "hardshift-agent"];

/// Unix milliseconds, the unit of every time on the wire (reports, acks, clock offsets).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub mod vocab;

pub mod v1 {
    include!("generated/hardshift.agent.v1.rs");
}

pub mod cri {
    include!("generated/runtime.v1.rs");
}

/// The subset of etcd's v3 API the agent reads (`proto/etcd/rpc.proto`).
pub mod etcd {
    include!("generated/etcdserverpb.rs");
}

/// A unix socket that did not connect, with the cause (tonic's own error hides the OS error
/// one level down; `Display` names the socket and that cause).
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", socket.display(), source.source().map_or_else(|| source.to_string(), |s| s.to_string()))]
pub struct ConnectError {
    pub socket: std::path::PathBuf,
    #[source]
    pub source: tonic::transport::Error,
}

use std::error::Error as _;

/// A gRPC channel over a unix socket (the CRI runtime's, or the collector's admin socket).
pub async fn unix_channel(socket: &std::path::Path, timeout: std::time::Duration) -> Result<tonic::transport::Channel, ConnectError> {
    let path = socket.to_path_buf();
    // The URI is a placeholder: every connection goes to the socket.
    tonic::transport::Endpoint::from_static("http://unix.invalid")
        .connect_timeout(timeout)
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let p = path.clone();
            async move { Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tokio::net::UnixStream::connect(p).await?)) }
        }))
        .await
        .map_err(|source| ConnectError {
            socket: socket.to_path_buf(),
            source,
        })
}

/// A CRI RuntimeService client on a runtime's unix socket (CRI-O: `/var/run/crio/crio.sock`).
pub async fn cri_client(
    socket: &std::path::Path,
    timeout: std::time::Duration,
) -> Result<cri::runtime_service_client::RuntimeServiceClient<tonic::transport::Channel>, ConnectError> {
    Ok(cri::runtime_service_client::RuntimeServiceClient::new(
        unix_channel(socket, timeout).await?,
    ))
}
