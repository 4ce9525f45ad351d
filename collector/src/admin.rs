//! The admin socket's client side: one bounded, read-only debug request to a node, through the
//! running collector (`hardshift logs`, `hardshift gather`).

use hardshift_proto::v1::admin_client::AdminClient;
use hardshift_proto::v1::debug_request::Kind;
use hardshift_proto::v1::{AdminDebugRequest, DebugRequest, DebugResponse};
use std::path::Path;

/// Ask `node`, through the collector listening on `socket`; Err: why not, in a line.
pub async fn ask(socket: &Path, node: &str, kind: Kind) -> Result<DebugResponse, String> {
    let ch = hardshift_proto::unix_channel(socket, std::time::Duration::from_secs(3))
        .await
        .map_err(|e| format!("{e} (is `hardshift collector` running for this bundle?)"))?;
    AdminClient::new(ch)
        .debug(AdminDebugRequest {
            node: node.to_string(),
            request: Some(DebugRequest { id: 0, kind: Some(kind) }),
        })
        .await
        .map(|r| r.into_inner())
        .map_err(|s| s.message().to_string())
}
