//! The build's decisions, as pure functions of the request, the inputs and the live bundle:
//! refuse to re-key, keep or make the kubeadmin password, refuse nodes the network cannot run,
//! refuse an agent `fips: true` cannot run. (Reuse and re-issue are the PKI's: `pki::issue`.)

use super::error::Error;
use super::live::Live;
use super::request::Request;
use crate::assets::Extras;
use crate::cluster::{Cluster, Role};
use crate::kubeadmin;
use crate::pki::{self, CertSpec};

/// A CA the live bundle had, whose files are gone (`rm -rf pki/`): never mint it anew silently.
pub fn refuse_rekey(req: &Request, specs: &[CertSpec], live: &Live) -> Result<(), Error> {
    if req.rotate_ca {
        return Ok(());
    }
    let gone = pki::vanished_cas(specs, &live.existing, &live.recorded);
    if gone.is_empty() {
        return Ok(());
    }
    // Name the earlier generation only if there is one, and it still holds those CAs.
    let from = match &live.previous {
        Some(p) if gone.iter().all(|id| live.previous_cas.contains(id)) => {
            format!("the generation before the last change, in {}, holds them", p.display())
        }
        _ => "no earlier generation holding them is kept: use your backup of the bundle".to_string(),
    };
    Err(Error::input(format!(
        "{}: the live bundle had {} but their files are gone; new CAs would re-key a running cluster, so nothing was written\n    hint: restore them ({from}), or pass --rotate-ca if the cluster does not run yet",
        req.dir.display(),
        gone.join(", "),
    )))
}

/// The bundle's kubeadmin password, or a new one (true) when there is none yet. A password file
/// that is not one is refused: the console login must not change under the user.
pub fn password(live: &Live, new: &dyn Fn() -> Result<String, Error>) -> Result<(String, bool), Error> {
    match &live.password {
        Some(bytes) => {
            let text = std::str::from_utf8(bytes).map_err(|_| Error::input(format!("{}: not UTF-8", kubeadmin::PASSWORD_FILE)))?;
            kubeadmin::check(text).map(|p| (p, false)).map_err(Error::input)
        }
        None => Ok((new()?, true)),
    }
}

/// A new kubeadmin password from the system's randomness.
pub fn random_password() -> Result<String, Error> {
    let mut buf = [0u8; 64];
    let mut i = buf.len();
    let mut err = None;
    let p = kubeadmin::password(|| {
        if i == buf.len() {
            if let Err(e) = getrandom::fill(&mut buf) {
                err = Some(e);
            }
            i = 0;
        }
        i += 1;
        buf[i - 1]
    });
    match err {
        Some(e) => Err(Error::other(format!("no randomness for the kubeadmin password: {e}"))),
        None => Ok(p),
    }
}

/// OVN-Kubernetes needs the MCO's OS configuration on every master and worker (configure-ovs.sh,
/// br-ex, openvswitch): without it the network never comes up. Refuse, unless told.
pub fn check_bases(req: &Request, cluster: &Cluster, extras: &Extras) -> Result<(), Error> {
    if req.self_contained_nodes || cluster.network_type != "OVNKubernetes" {
        return Ok(());
    }
    let missing: Vec<&str> = [Role::Master, Role::Worker]
        .into_iter()
        .filter(|r| cluster.nodes.iter().any(|n| n.role == *r) && !extras.bases.contains_key(r))
        .map(|r| r.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::input(format!(
        "no MCO-rendered base for the {} nodes: with networkType OVNKubernetes they need the machine-config-operator's OS configuration (br-ex, Open vSwitch, CRI-O and kubelet config), which hardshift does not write itself\n    hint: `hardshift mco --dir {d}` writes the MCO's inputs and {d}/mco/render.sh; after render.sh, `create` merges every node into {d}/mco/rendered/. Or pass --mco-base master=FILE,worker=FILE, or --self-contained-nodes to go on with hardshift's kubelet alone (needed once to make the PKI that `hardshift mco` uses)",
        missing.join(" and "),
        d = req.dir.display()
    )))
}

/// `fips: true` embeds only an agent whose TLS runs on the FIPS module: it refuses to start
/// otherwise, and a node whose agent never starts reports nothing.
pub fn fips_agent(path: &std::path::Path, bytes: &[u8]) -> Result<(), Error> {
    match hardshift_crypto::module_of_binary(bytes) {
        Some(m) if m.fips => Ok(()),
        found => Err(Error::input(format!(
            "{}: fips: true embeds only an agent built with AWS-LC's FIPS module; this one is {}\n    hint: build it with `cargo build --release -p hardshift-agent --features fips` (needs cmake and Go), or pass --no-agent",
            path.display(),
            match found {
                Some(m) => format!("built with {m}"),
                None => "not a hardshift-agent of this version (it names no crypto module)".into(),
            }
        ))),
    }
}

/// The release's renders are taken only while this bundle would give them the same layout (its
/// PKI, kubeconfigs and config CRs): a rendered node that trusts other CAs, or carries another
/// install-config, would not join this cluster.
pub fn renders_fresh(
    req: &Request,
    cluster: &Cluster,
    pki: &pki::Pki,
    recorded: &std::collections::BTreeMap<String, String>,
) -> Result<(), Error> {
    let now = crate::render::layout(cluster, pki).map_err(Error::other)?;
    let now = super::render::layout_hashes(&now);
    let changed: Vec<&String> = now
        .iter()
        .filter(|(p, h)| recorded.get(*p) != Some(*h))
        .map(|(p, _)| p)
        .chain(recorded.keys().filter(|p| !now.contains_key(*p)))
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = changed.iter().take(5).map(|s| s.as_str()).collect();
    Err(Error::input(format!(
        "{}/{}: the renders were made from another bundle than this one ({}{} differ now): their masters and workers would trust other CAs or carry another configuration\n    hint: run `hardshift render --dir {}` again, or remove {}/{} to build without them",
        req.dir.display(),
        crate::layout::RENDER,
        shown.join(", "),
        if changed.len() > 5 { format!(" and {} more", changed.len() - 5) } else { String::new() },
        req.dir.display(),
        req.dir.display(),
        crate::layout::RENDER,
    )))
}
