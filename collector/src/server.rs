//! The mTLS gRPC server agents stream to. A node's identity is its client certificate's CN; a
//! stream whose Hello names another node is refused and logged.

use crate::store::Store;
use hardshift_proto::v1::agent_message::Body as In;
use hardshift_proto::v1::agent_server::{Agent, AgentServer};
use hardshift_proto::v1::collector_message::Body as Out;
use hardshift_proto::v1::{Ack, AgentMessage, CollectorMessage};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio_stream::{wrappers::ReceiverStream, Stream};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

pub struct Collector {
    store: Arc<Mutex<Store>>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The CN of the verified client certificate (rustls checked it against the agent CA).
fn peer_cn<T>(req: &Request<T>) -> Option<String> {
    let certs = req.peer_certs()?;
    let (_, cert) = x509_parser::parse_x509_certificate(certs.first()?.as_ref()).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    Some(cn)
}

fn ack(boot_id: &str, highest: u64) -> Result<CollectorMessage, Status> {
    Ok(CollectorMessage {
        body: Some(Out::Ack(Ack {
            boot_id: boot_id.to_string(),
            highest_seq: highest,
            collector_time_ms: now_ms(),
        })),
    })
}

type Outbound = Pin<Box<dyn Stream<Item = Result<CollectorMessage, Status>> + Send>>;

#[tonic::async_trait]
impl Agent for Collector {
    type ConnectStream = Outbound;

    async fn connect(&self, req: Request<Streaming<AgentMessage>>) -> Result<Response<Outbound>, Status> {
        let cn = peer_cn(&req).ok_or_else(|| Status::unauthenticated("no client certificate"))?;
        let mut inbound = req.into_inner();
        let hello = match inbound.message().await? {
            Some(AgentMessage { body: Some(In::Hello(h)) }) => h,
            _ => return Err(Status::invalid_argument("the first message must be Hello")),
        };
        if hello.node != cn {
            eprintln!("collector: refused a stream: certificate {cn:?} claims to be node {:?}", hello.node);
            return Err(Status::permission_denied(format!("certificate {cn:?} may only report as itself")));
        }
        let store = self.store.clone();
        let (node, boot) = (cn.clone(), hello.boot_id.clone());
        let highest = {
            let s = store.lock().map_err(|_| Status::internal("store lock"))?;
            s.hello(&node, &hello.role, &boot, &hello.agent_version, now_ms())
                .map_err(|e| Status::internal(e.to_string()))?;
            s.highest(&node, &boot).map_err(|e| Status::internal(e.to_string()))?
        };
        eprintln!(
            "collector: {node} connected (boot {boot}, agent {}, stored up to {highest})",
            hello.agent_version
        );
        let (tx, rx) = mpsc::channel(64);
        // Tell the agent at once what is already stored, so it resends only the rest.
        let _ = tx.send(ack(&boot, highest)).await;
        tokio::spawn(async move {
            loop {
                let msg = match inbound.message().await {
                    Ok(Some(m)) => m,
                    Ok(None) => break,
                    Err(e) => {
                        eprintln!("collector: {node}: stream ended: {}", e.message());
                        break;
                    }
                };
                let Some(In::Report(report)) = msg.body else { continue };
                let (s, n, b) = (store.clone(), node.clone(), boot.clone());
                let stored = tokio::task::spawn_blocking(move || {
                    let s = s.lock().map_err(|_| "store lock".to_string())?;
                    s.insert(&n, &b, &report, now_ms()).map_err(|e| e.to_string())?;
                    s.highest(&n, &b).map_err(|e| e.to_string())
                })
                .await;
                match stored {
                    Ok(Ok(h)) => {
                        if tx.send(ack(&boot, h)).await.is_err() {
                            break;
                        }
                    }
                    Ok(Err(e)) => {
                        eprintln!("collector: {node}: not stored: {e}");
                        break;
                    }
                    Err(e) => {
                        eprintln!("collector: {node}: {e}");
                        break;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// TLS material, PEM.
pub struct Tls {
    pub cert: String,
    pub key: String,
    pub client_ca: String,
}

/// Serve until `shutdown` resolves. Clients must present a certificate from `client_ca`.
pub async fn serve(addr: SocketAddr, tls: Tls, store: Store, shutdown: impl std::future::Future<Output = ()>) -> Result<(), String> {
    let cfg = ServerTlsConfig::new()
        .identity(Identity::from_pem(tls.cert, tls.key))
        .client_ca_root(Certificate::from_pem(tls.client_ca));
    Server::builder()
        .tls_config(cfg)
        .map_err(|e| e.to_string())?
        .add_service(AgentServer::new(Collector {
            store: Arc::new(Mutex::new(store)),
        }))
        .serve_with_shutdown(addr, shutdown)
        .await
        .map_err(|e| format!("{e}: {:?}", std::error::Error::source(&e)))
}
