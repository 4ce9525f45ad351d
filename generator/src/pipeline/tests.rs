//! The build's decisions, without a filesystem: the inputs are the example's (compiled in), the
//! live bundle is made in memory from an earlier build, the keys are P-256 (fast), the password
//! source is injected.

use super::error::Error;
use super::inputs::Inputs;
use super::live::Live;
use super::make::{make, Env, Made, Stage};
use super::request::Request;
use crate::bundle;
use crate::cluster::KeyAlgorithm;
use crate::fsio::{self, Action, Found};
use crate::pki::{keys::SystemKeys, Kind, Material, Outcome};
use std::path::PathBuf;

fn inputs() -> Inputs {
    let cluster = crate::testing::example_cluster(None);
    Inputs {
        plan: crate::pki::plan(&cluster),
        cluster,
        extras: Default::default(),
        agent: None,
        renders: None,
    }
}

fn request() -> Request {
    Request {
        dir: PathBuf::from("/bundle"),
        key_algorithm: Some(KeyAlgorithm::EcdsaP256),
        crypto_fips: Some(false),
        ..Default::default()
    }
}

fn new_password() -> Result<String, Error> {
    Ok("aaaaa-bbbbb-ccccc-ddddd".into())
}

fn no_new_password() -> Result<String, Error> {
    Err(Error::other("a new password was asked for"))
}

fn build(req: &Request, live: &Live, password: &(dyn Fn() -> Result<String, Error> + Sync)) -> Result<Made<()>, Error> {
    let env = Env {
        now: time::OffsetDateTime::now_utc(),
        keys: &SystemKeys,
        new_password: password,
    };
    make(req, inputs(), live, &env, None)
}

/// The live bundle an earlier build leaves, as `Live::read` would find it.
fn live_of(made: &Made<()>) -> Live {
    Live {
        generation: Some("gen-0".into()),
        existing: made
            .pki
            .entries
            .iter()
            .map(|e| {
                let m = Material {
                    key_pem: Some(e.key_pem.clone()),
                    cert_pem: (e.spec.kind != Kind::KeyOnly).then(|| e.cert_pem.clone()),
                };
                (e.spec.id(), m)
            })
            .collect(),
        recorded: made.bundle.files.keys().cloned().collect(),
        password: made.extras.kubeadmin.as_ref().map(|k| k.password.clone().into_bytes()),
        previous: Some(PathBuf::from("/bundle/.hardshift/previous")),
        previous_cas: Default::default(),
    }
}

fn outcomes(made: &Made<()>) -> Vec<(String, Outcome)> {
    made.pki.entries.iter().map(|e| (e.spec.id(), e.outcome.clone())).collect()
}

#[test]
fn a_fresh_bundle_makes_every_entry_and_a_password() {
    let made = build(&request(), &Live::default(), &new_password).unwrap();
    assert!(outcomes(&made).iter().all(|(_, o)| *o == Outcome::Created));
    assert!(made.new_password);
    assert_eq!(made.extras.kubeadmin.as_ref().unwrap().password, "aaaaa-bbbbb-ccccc-ddddd");
    assert!(made.bundle.files.contains_key(crate::kubeadmin::PASSWORD_FILE));
    assert_eq!(made.nodes.len(), made.cluster.nodes.len());
}

#[test]
fn over_the_live_bundle_every_key_and_the_password_are_reused_byte_for_byte() {
    let first = build(&request(), &Live::default(), &new_password).unwrap();
    let again = build(&request(), &live_of(&first), &no_new_password).unwrap();
    let changed: Vec<_> = outcomes(&again).into_iter().filter(|(_, o)| *o != Outcome::Reused).collect();
    assert!(changed.is_empty(), "{changed:?}");
    assert!(!again.new_password);
    // The same inputs over the same live bundle give the same bytes: a re-run is a no-op.
    assert_eq!(bundle::sums(&again.bundle), bundle::sums(&first.bundle));
}

#[test]
fn a_leaf_whose_key_does_not_match_its_certificate_is_reissued_alone() {
    let first = build(&request(), &Live::default(), &new_password).unwrap();
    let mut live = live_of(&first);
    let leaf = first
        .pki
        .entries
        .iter()
        .find(|e| !e.spec.is_ca() && e.spec.kind != Kind::KeyOnly)
        .unwrap();
    let other = first
        .pki
        .entries
        .iter()
        .find(|e| !e.spec.is_ca() && e.spec.id() != leaf.spec.id())
        .unwrap();
    live.existing.get_mut(&leaf.spec.id()).unwrap().key_pem = Some(other.key_pem.clone());
    let again = build(&request(), &live, &no_new_password).unwrap();
    let changed: Vec<_> = outcomes(&again).into_iter().filter(|(_, o)| *o != Outcome::Reused).collect();
    assert_eq!(
        changed,
        [(leaf.spec.id(), Outcome::Reissued("its key did not match its certificate".into()))]
    );
}

#[test]
fn a_ca_whose_files_vanished_is_refused_unless_rotating() {
    let first = build(&request(), &Live::default(), &new_password).unwrap();
    let mut live = live_of(&first);
    let ca = first.pki.entries.iter().find(|e| e.spec.is_ca()).unwrap().spec.id();
    live.existing.remove(&ca);
    let Err(Error::Input(m)) = build(&request(), &live, &no_new_password) else {
        panic!("a vanished CA must be refused")
    };
    assert!(m.contains(&ca) && m.contains("nothing was written"), "{m}");
    assert!(m.contains("no earlier generation holding them is kept"), "{m}");
    // The generation kept before holds it: the hint names it.
    live.previous_cas.insert(ca.clone());
    let Err(Error::Input(m)) = build(&request(), &live, &no_new_password) else {
        panic!("a vanished CA must be refused")
    };
    assert!(m.contains("/bundle/.hardshift/previous, holds them"), "{m}");
    // Asked for: every CA is new, and so every certificate (a key-only entry, the service
    // account key, has no issuer and is kept).
    let rotated = build(
        &Request {
            rotate_ca: true,
            ..request()
        },
        &live,
        &no_new_password,
    )
    .unwrap();
    let kept: Vec<_> = rotated
        .pki
        .entries
        .iter()
        .filter(|e| e.spec.kind != Kind::KeyOnly && e.outcome == Outcome::Reused)
        .map(|e| e.spec.id())
        .collect();
    assert!(kept.is_empty(), "{kept:?}");
}

#[test]
fn a_password_file_that_is_not_a_password_is_refused() {
    let first = build(&request(), &Live::default(), &new_password).unwrap();
    let mut live = live_of(&first);
    live.password = Some(b"\xff\xfe".to_vec());
    assert!(matches!(build(&request(), &live, &no_new_password), Err(Error::Input(m)) if m.contains("not UTF-8")));
    live.password = Some(b"short".to_vec());
    assert!(matches!(build(&request(), &live, &no_new_password), Err(Error::Input(_))));
}

/// A stage that keeps what it was given.
#[derive(Default)]
struct Kept(Vec<(String, bundle::File)>, Vec<PathBuf>);

impl Stage for Kept {
    fn put(&mut self, files: Vec<(String, bundle::File)>) -> Result<(), Error> {
        self.0.extend(files);
        Ok(())
    }
    fn keep(&mut self, dest: PathBuf, _: &[u8], _: u32) -> Result<(), Error> {
        self.1.push(dest);
        Ok(())
    }
}

#[test]
fn what_is_staged_early_is_what_the_bundle_holds() {
    let env = Env {
        now: time::OffsetDateTime::now_utc(),
        keys: &SystemKeys,
        new_password: &new_password,
    };
    let made = make(&request(), inputs(), &Live::default(), &env, Some(Kept::default())).unwrap();
    let staged = made.staged.as_ref().unwrap();
    let configs = staged
        .0
        .iter()
        .filter(|(p, _)| crate::layout::node_of_ignition(p).is_some())
        .count();
    assert_eq!(
        configs,
        made.cluster
            .nodes
            .iter()
            .filter(|n| n.role != crate::cluster::Role::Bootstrap)
            .count()
    );
    for (path, f) in &staged.0 {
        let Some(in_bundle) = made.bundle.files.get(path) else {
            panic!("{path} staged, not in the bundle")
        };
        // The lab names the bootstrap's config, not known yet when staged: written again at the end.
        if !path.starts_with("lab/") {
            assert!(in_bundle.contents.eq_bytes(&f.contents.to_vec()), "{path} differs");
            assert_eq!(in_bundle.mode, f.mode, "{path}");
        }
    }
}

#[test]
fn a_damaged_live_copy_of_the_same_bundle_is_repaired_and_an_intact_one_left_alone() {
    let mut b = bundle::Bundle::default();
    b.add("pki/a.key", 0o600, "KEY");
    b.add("ignition/m.ign", 0o600, "{}");
    b.add("lab/dhcpd.conf", 0o644, "conf");
    let disk: std::collections::BTreeMap<&str, (u32, &[u8])> = [
        ("pki/a.key", (0o644, &b"KEY"[..])),
        ("ignition/m.ign", (0o600, &b"{\"x\":1}"[..])),
        ("extra", (0o644, &b""[..])),
    ]
    .into();
    let found: Vec<Found> = disk
        .keys()
        .map(|k| Found {
            rel: k.to_string(),
            regular: true,
        })
        .collect();
    let look = |rel: &str| disk.get(rel).map(|(m, c)| (*m, c.to_vec()));
    let damage = || fsio::damage_in(&b, &found, look);
    assert_eq!(
        fsio::action(Some("gen-1"), "gen-1", damage),
        Action::Repair(vec![
            "extra is not part of the bundle".into(),
            "ignition/m.ign was edited".into(),
            "lab/dhcpd.conf is missing".into(),
            "pki/a.key has mode 644, should be 600".into(),
        ])
    );
    // A repaired generation is the same bundle.
    assert!(matches!(fsio::action(Some("gen-1-r5"), "gen-1", damage), Action::Repair(_)));
    assert_eq!(fsio::action(Some("gen-1"), "gen-1", Vec::new), Action::Unchanged);
    // Another bundle is live (or none): a new generation, and the live one is not even read.
    assert_eq!(fsio::action(Some("gen-0"), "gen-1", || panic!("not read")), Action::New);
    assert_eq!(fsio::action(None, "gen-1", || panic!("not read")), Action::New);
}

#[test]
fn the_releases_renders_are_taken_only_while_the_bundle_gives_them_the_same_layout() {
    let first = build(&request(), &Live::default(), &new_password).unwrap();
    let live = live_of(&first);
    let layout = crate::pipeline::render::layout_hashes(&crate::render::layout(&first.cluster, &first.pki).unwrap());
    let env = Env {
        now: time::OffsetDateTime::now_utc(),
        keys: &SystemKeys,
        new_password: &no_new_password,
    };
    let with = |renders| Inputs { renders, ..inputs() };
    assert!(make(&request(), with(Some(layout.clone())), &live, &env, None::<()>).is_ok());
    // Rendered from another PKI: refused, naming what differs.
    let mut stale = layout.clone();
    stale.insert("tls/root-ca.crt".into(), "0".repeat(64));
    let Err(Error::Input(m)) = make(&request(), with(Some(stale)), &live, &env, None::<()>) else {
        panic!("stale renders must be refused")
    };
    assert!(m.contains("tls/root-ca.crt") && m.contains("hardshift render --dir /bundle"), "{m}");
    // Over a fresh PKI (every key new), the renders of the first bundle are stale too.
    let fresh = Env {
        new_password: &new_password,
        ..env
    };
    let Err(Error::Input(m)) = make(&request(), with(Some(layout)), &Live::default(), &fresh, None::<()>) else {
        panic!("renders of another bundle must be refused")
    };
    assert!(m.contains("tls/"), "{m}");
}
