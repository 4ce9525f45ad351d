//! The admin socket's client side: one bounded, read-only debug request to a node, through the
//! running collector (`hardshift logs`, `hardshift gather`).

use hardshift_proto::v1::admin_client::AdminClient;
use hardshift_proto::v1::debug_request::Kind;
use hardshift_proto::v1::{AdminDebugRequest, ContainerLogRequest, DebugRequest, DebugResponse, EtcdMembersRequest, JournalRequest};
use std::path::Path;

/// What `logs NODE WHAT` asks of a node: a container's log (`container`), etcd's members
/// (`etcd-members`), else a unit's journal; `lines` newest last.
pub fn kind(what: &str, container: bool, lines: u32) -> Kind {
    if container {
        Kind::ContainerLog(ContainerLogRequest {
            container: what.to_string(),
            lines,
        })
    } else if what == "etcd-members" {
        Kind::EtcdMembers(EtcdMembersRequest {})
    } else {
        Kind::Journal(JournalRequest {
            unit: what.to_string(),
            lines,
        })
    }
}

/// Why a debug request got no answer: the collector is not there, or it (or the agent) said no.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("{0} (is `hardshift collector` running for this bundle?)")]
    NoCollector(#[source] hardshift_proto::ConnectError),
    #[error("{}", .0.message())]
    Refused(tonic::Status),
}

/// Ask `node`, through the collector listening on `socket`.
pub async fn ask(socket: &Path, node: &str, kind: Kind) -> Result<DebugResponse, AskError> {
    let ch = hardshift_proto::unix_channel(socket, std::time::Duration::from_secs(3))
        .await
        .map_err(AskError::NoCollector)?;
    AdminClient::new(ch)
        .debug(AdminDebugRequest {
            node: node.to_string(),
            request: Some(DebugRequest { id: 0, kind: Some(kind) }),
        })
        .await
        .map(|r| r.into_inner())
        .map_err(AskError::Refused)
}
