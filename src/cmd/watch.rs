//! `hardshift watch`: the collector's API side alone (hardshift_collector::watch), into the
//! bundle's store, until SIGINT or SIGTERM.

use crate::failure::Failure;
use hardshift_collector::{store::Store, watch};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    store: super::StoreArgs,
    /// The kubeconfig to watch with. Default: DIR/auth/kubeconfig
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let path = a
        .kubeconfig
        .clone()
        .unwrap_or_else(|| a.store.dir.join(hardshift_bundle::layout::ADMIN_KUBECONFIG));
    let db = super::db_path(&a.store.dir, a.store.db.clone());
    if let Some(p) = db.parent() {
        hardshift_bundle::fsio::make_dir_all(p, 0o700).map_err(|e| Failure::other(format!("{}: {e}", p.display())))?;
    }
    let store = Store::open(&db).map_err(|e| Failure::other(format!("{}: {e}", db.display())))?;
    let rt = tokio::runtime::Runtime::new().map_err(Failure::other)?;
    rt.block_on(async {
        let client = super::kube_client(&path).await?;
        tracing::info!("watching the API through {} (into {})", path.display(), db.display());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| Failure::other(format!("SIGTERM handler: {e}")))?;
        watch::run_api_watch(client, store, async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        })
        .await;
        Ok(0)
    })
}
