//! `hardshift verify`: checks a written bundle against the cluster it was made for.
//! Sums (`sums`), chains, key/cert pairs, the SANs every node needs, expiry, key file modes and
//! kubeconfigs (`certs`), the embedded agent (`agents`), the renders (`renders`), and the bundle
//! against a fresh build (`regeneration`); `whole` reads the live bundle, rebuilds it and makes
//! every check (these and crd/'s) for the CLI.

mod agents;
mod certs;
pub mod mcs;
mod regeneration;
mod renders;
mod sums;
pub mod whole;

pub use agents::{agents, AgentRef};
pub use regeneration::regeneration;
pub use renders::render_outputs;
pub use sums::sums_file;

use crate::bundle::Bundle;
use crate::cluster::Cluster;
use crate::kubeconfig;
use crate::pki::plan;
use serde::Serialize;
use time::OffsetDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub subject: String,
    pub issuer: String,
    pub expires: String,
    pub status: Status,
    pub detail: String,
}

pub fn verify(c: &Cluster, b: &Bundle, now: OffsetDateTime) -> Vec<Check> {
    let mut out = vec![sums::sums(b)];
    let specs = plan(c);
    for s in &specs {
        out.push(certs::cert(s, &specs, b, now));
    }
    for k in kubeconfig::plan(c) {
        out.push(certs::kubeconfig_check(&k, b));
    }
    out
}

fn check(name: &str, status: Status, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        subject: String::new(),
        issuer: String::new(),
        expires: String::new(),
        status,
        detail: detail.into(),
    }
}

fn text(b: &Bundle, path: &str) -> Option<String> {
    b.files.get(path).and_then(|f| String::from_utf8(f.contents.to_vec()).ok())
}
