//! The collector's API side (and `hardshift watch`): watch Nodes, CSRs, ClusterOperators,
//! ClusterVersion and the control-plane pods with the bundle's admin kubeconfig, and store each
//! object's projection and every change beside the agents' reports. `/readyz` is asked every
//! few seconds, so "the API answers" is known even while nothing changes.

use crate::{api, store::Store};
use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{watcher, WatchStreamExt};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// What the watchers tell the one task that writes the store.
enum Seen {
    Object {
        kind: &'static str,
        ns: String,
        name: String,
        view: Option<serde_json::Value>,
    },
    /// A relist finished: every stored object of (kind, namespace) not in the set is gone.
    Listed {
        kind: &'static str,
        ns: Option<String>,
        names: BTreeSet<(String, String)>,
    },
    /// The API answered (`/readyz` said ok).
    Answered,
    /// The API did not answer, or a watch broke: why, in a line.
    Lost(String),
}

fn resource(kind: &str) -> ApiResource {
    use k8s_openapi::api::{certificates::v1::CertificateSigningRequest, core::v1};
    match kind {
        "Node" => ApiResource::erase::<v1::Node>(&()),
        "Pod" => ApiResource::erase::<v1::Pod>(&()),
        "CertificateSigningRequest" => ApiResource::erase::<CertificateSigningRequest>(&()),
        // The config.openshift.io kinds exist once bootkube has applied their CRDs.
        other => ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("config.openshift.io", "v1", other),
            &format!("{}s", other.to_lowercase()),
        ),
    }
}

/// What keeps a client from being made: the kubeconfig (the user's to fix), or the client itself.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Kubeconfig(String),
    #[error("{0}")]
    Client(String),
}

/// A client of the API with the kubeconfig at `path` (the bundle's admin's, say).
pub async fn client(path: &Path) -> Result<kube::Client, ClientError> {
    let bad = |e: &dyn std::fmt::Display| ClientError::Kubeconfig(format!("{}: {e}", path.display()));
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| bad(&e))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| bad(&e))?;
    kube::Client::try_from(cfg).map_err(|e| ClientError::Client(e.to_string()))
}

/// One watcher: every event of one kind (in one namespace) to the writer, until the writer is gone.
async fn watch_one(client: kube::Client, kind: &'static str, ns: Option<&'static str>, tx: tokio::sync::mpsc::Sender<Seen>) {
    let ar = resource(kind);
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client, ns, &ar),
        None => Api::all_with(client, &ar),
    };
    let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut listing: BTreeSet<(String, String)> = BTreeSet::new();
    while let Some(ev) = stream.next().await {
        let msg = match ev {
            Err(e) => Seen::Lost(format!("watch {kind}: {e}")),
            Ok(watcher::Event::Init) => {
                listing.clear();
                continue;
            }
            Ok(watcher::Event::InitDone) => Seen::Listed {
                kind,
                ns: ns.map(String::from),
                names: std::mem::take(&mut listing),
            },
            Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                let (n, name) = (
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default(),
                );
                listing.insert((n.clone(), name.clone()));
                let json = serde_json::to_value(&o).unwrap_or_default();
                Seen::Object {
                    kind,
                    ns: n,
                    name,
                    view: Some(api::project(kind, &json)),
                }
            }
            Ok(watcher::Event::Delete(o)) => Seen::Object {
                kind,
                ns: o.metadata.namespace.clone().unwrap_or_default(),
                name: o.metadata.name.clone().unwrap_or_default(),
                view: None,
            },
        };
        if tx.send(msg).await.is_err() {
            return;
        }
    }
}

/// `/readyz` every 5 s: the API's own word on whether it serves.
async fn readyz(client: kube::Client, tx: tokio::sync::mpsc::Sender<Seen>) {
    loop {
        let req = http::Request::get("/readyz").body(Vec::new()).expect("request");
        let seen = match tokio::time::timeout(Duration::from_secs(5), client.request_text(req)).await {
            Err(_) => Seen::Lost("GET /readyz: no answer within 5 s".to_string()),
            Ok(Err(e)) => Seen::Lost(format!("GET /readyz: {e}")),
            Ok(Ok(body)) if body.trim() == "ok" => Seen::Answered,
            Ok(Ok(body)) => Seen::Lost(format!("GET /readyz: {}", body.trim())),
        };
        if tx.send(seen).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// Watch until `stop` resolves; every observation goes to `store`. Errors are stored and
/// printed when they change (at most once a minute for the same one), never fatal: the API
/// comes and goes during an install.
pub async fn run_api_watch(client: kube::Client, mut store: Store, stop: impl std::future::Future<Output = ()>) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Seen>(1024);
    let mut tasks = tokio::task::JoinSet::new();
    for (kind, namespaces) in api::KINDS {
        if namespaces.is_empty() {
            tasks.spawn(watch_one(client.clone(), kind, None, tx.clone()));
        }
        for ns in namespaces.iter() {
            tasks.spawn(watch_one(client.clone(), kind, Some(ns), tx.clone()));
        }
    }
    tasks.spawn(readyz(client, tx));
    let mut last_error: Option<(String, std::time::Instant)> = None;
    tokio::pin!(stop);
    loop {
        let msg = tokio::select! {
            m = rx.recv() => match m { Some(m) => m, None => break },
            _ = &mut stop => break,
        };
        let now = crate::now_ms();
        let r = store.batch(|s| match &msg {
            Seen::Object { kind, ns, name, view } => {
                if let Some(c) = s.observe(kind, ns, name, view.as_ref(), now)? {
                    let id = if ns.is_empty() { name.clone() } else { format!("{ns}/{name}") };
                    tracing::info!("api: {kind} {id}: {c}");
                }
                s.api_contact(Ok(()), now)
            }
            Seen::Listed { kind, ns, names } => {
                for o in s.api_objects()? {
                    let in_scope = o.kind == *kind && ns.as_ref().is_none_or(|n| *n == o.namespace);
                    if in_scope && !names.contains(&(o.namespace.clone(), o.name.clone())) {
                        s.observe(kind, &o.namespace, &o.name, None, now)?;
                    }
                }
                s.api_contact(Ok(()), now)
            }
            Seen::Answered => s.api_contact(Ok(()), now),
            Seen::Lost(e) => s.api_contact(Err(e.as_str()), now),
        });
        if let Err(e) = r {
            tracing::error!("api: store: {e}");
        }
        if let Seen::Lost(e) = &msg {
            let repeat = last_error
                .as_ref()
                .is_some_and(|(l, at)| l == e && at.elapsed() < Duration::from_secs(60));
            if !repeat {
                tracing::warn!("api: {e}");
                last_error = Some((e.clone(), std::time::Instant::now()));
            }
        }
    }
    tasks.abort_all();
}
