//! Issue the planned PKI, reusing what an existing bundle already holds.
//!
//! A running cluster must never be re-keyed by accident: an existing CA is reused as is (or the
//! run fails with a reason), and a leaf is re-issued only when it no longer says what its spec
//! asks (a new SAN, an expired certificate), keeping its key when it can.

use super::inspect::{self, Facts};
use super::keys::{self, KeyPem, KeySource};
use super::plan::{CertSpec, Kind};
use crate::cluster::KeyAlgorithm;
use rayon::prelude::*;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType, SerialNumber,
};
use std::collections::BTreeMap;
use time::{Duration, OffsetDateTime};

/// Certificates issued for the past hour too, so a node whose clock lags a little still accepts them.
const BACKDATE: Duration = Duration::hours(1);
/// Leaves that expire within this are re-issued on the next run.
const RENEW_BEFORE: Duration = Duration::days(30);

/// What an existing bundle holds for one entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Material {
    pub key_pem: Option<KeyPem>,
    pub cert_pem: Option<String>,
}

/// Existing material by entry id (`pki/etcd-ca`).
pub type Existing = BTreeMap<String, Material>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Reused,
    /// Re-issued, with the reason.
    Reissued(String),
}

#[derive(Debug, Clone)]
pub struct Issued {
    pub spec: CertSpec,
    pub key_pem: KeyPem,
    /// The certificate, or for `KeyOnly` the public key.
    pub cert_pem: String,
    pub outcome: Outcome,
}

#[derive(Debug, Clone)]
pub struct Pki {
    pub entries: Vec<Issued>,
}

impl Pki {
    pub fn get(&self, id: &str) -> &Issued {
        // Compared in place, not formatted: a thousand nodes each look up their agent's entry.
        let is = |e: &&Issued| {
            let (dir, name) = (e.spec.dir, e.spec.name.as_str());
            id.len() == dir.len() + 1 + name.len() && id.starts_with(dir) && id.as_bytes()[dir.len()] == b'/' && id.ends_with(name)
        };
        self.entries.iter().find(is).unwrap_or_else(|| panic!("no PKI entry {id}"))
    }
}

/// The CAs this issue made anew (not reused): what `hardshift mco` and the renders would have to
/// be given, where they must be given the bundle's own.
pub fn missing_cas(issued: &Pki) -> Vec<String> {
    issued
        .entries
        .iter()
        .filter(|e| e.spec.is_ca() && e.outcome != Outcome::Reused)
        .map(|e| e.spec.id())
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("{id}: {reason}\n    hint: {hint}")]
    Refused { id: String, reason: String, hint: String },
    #[error("{id}: {0}", id = .1)]
    Key(keys::KeyError, String),
    #[error("{0}: cannot build the certificate: {1}")]
    Build(String, String),
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Replace every CA (and so re-issue everything). Only when asked.
    pub rotate_ca: bool,
}

/// What to do with one entry, decided before any key is generated.
enum Plan {
    Reuse,
    /// New certificate; `new_key` false keeps the existing key.
    Issue {
        new_key: bool,
        outcome: Outcome,
    },
}

pub fn issue(specs: &[CertSpec], existing: &Existing, now: OffsetDateTime, keys: &dyn KeySource, opts: Options) -> Result<Pki, PkiError> {
    issue_staged(specs, existing, now, keys, opts, &|_| false, |_| ()).map(|(pki, ())| pki)
}

/// `issue` in two stages. The entries `first` selects, and every CA above them, are made first
/// and handed to `early` as a `Pki` of those entries alone; `early` runs beside the making of the
/// rest. A fresh bundle's worker and master configs need 7 of its 27 RSA keys: they are built and
/// written while the keys only the bootstrap uses are still being generated.
pub fn issue_staged<R: Send>(
    specs: &[CertSpec],
    existing: &Existing,
    now: OffsetDateTime,
    keys: &dyn KeySource,
    opts: Options,
    first: &(dyn Fn(&CertSpec) -> bool + Sync),
    early: impl FnOnce(&Pki) -> R + Send,
) -> Result<(Pki, R), PkiError> {
    let decisions = decide_all(specs, existing, now, opts)?;
    let index: BTreeMap<String, usize> = specs.iter().enumerate().map(|(i, s)| (s.id(), i)).collect();
    let mut in_first = vec![false; specs.len()];
    for i in (0..specs.len()).filter(|&i| first(&specs[i])) {
        let mut at = Some(i);
        while let Some(k) = at.filter(|&k| !in_first[k]) {
            in_first[k] = true;
            at = specs[k].issuer_id().and_then(|id| index.get(&id).copied());
        }
    }
    let (one, two): (Vec<usize>, Vec<usize>) = (0..specs.len()).partition(|&i| in_first[i]);
    let run = Run {
        specs,
        existing,
        decisions: &decisions,
        index: &index,
        now,
        keys,
    };
    let mut slots: Vec<Option<Issued>> = vec![None; specs.len()];
    run.make(&one, &mut slots)?;
    let partial = Pki {
        entries: one.iter().filter_map(|&i| slots[i].clone()).collect(),
    };
    let (r, rest) = rayon::join(|| early(&partial), || run.make(&two, &mut slots));
    rest?;
    let pki = Pki {
        entries: slots.into_iter().map(|s| s.expect("every entry made")).collect(),
    };
    Ok((pki, r))
}

/// What to do with each entry. A CA's fate decides its children's, so the CAs go first, in plan
/// order (issuers before what they sign); then every other entry, in parallel: at a thousand
/// nodes each existing certificate is parsed and its signature and key checked. The first
/// problem in plan order is reported, whatever order the checks ran in.
fn decide_all(specs: &[CertSpec], existing: &Existing, now: OffsetDateTime, opts: Options) -> Result<Vec<Plan>, PkiError> {
    let none = Material::default();
    let have = |spec: &CertSpec| existing.get(&spec.id()).unwrap_or(&none);
    let mut decisions: Vec<Option<Result<Plan, PkiError>>> = specs.iter().map(|_| None).collect();
    let mut reissued_ca: BTreeMap<String, bool> = BTreeMap::new();
    let parent_changed =
        |spec: &CertSpec, reissued: &BTreeMap<String, bool>| spec.issuer_id().is_some_and(|i| reissued.get(&i).copied().unwrap_or(false));
    for (i, spec) in specs.iter().enumerate().filter(|(_, s)| s.is_ca()) {
        let d = decide(spec, have(spec), existing, now, opts, parent_changed(spec, &reissued_ca));
        reissued_ca.insert(spec.id(), !matches!(d, Ok(Plan::Reuse)));
        decisions[i] = Some(d);
    }
    let others: Vec<(usize, Result<Plan, PkiError>)> = specs
        .par_iter()
        .enumerate()
        .filter(|(_, s)| !s.is_ca())
        .map(|(i, spec)| (i, decide(spec, have(spec), existing, now, opts, parent_changed(spec, &reissued_ca))))
        .collect();
    for (i, d) in others {
        decisions[i] = Some(d);
    }
    decisions.into_iter().map(|d| d.expect("every entry decided")).collect()
}

/// One issuing run's inputs, shared by its stages.
struct Run<'a> {
    specs: &'a [CertSpec],
    existing: &'a Existing,
    decisions: &'a [Plan],
    index: &'a BTreeMap<String, usize>,
    now: OffsetDateTime,
    keys: &'a dyn KeySource,
}

impl Run<'_> {
    /// Make the entries `idx` (plan order; their issuers made before) into `slots`.
    fn make(&self, idx: &[usize], slots: &mut [Option<Issued>]) -> Result<(), PkiError> {
        let none = Material::default();
        let have = |i: usize| self.existing.get(&self.specs[i].id()).unwrap_or(&none);
        // Every new key at once: independent, and the slow part with RSA. One task per key: an
        // RSA key takes from 20 ms to 300 ms, so halves of the list would finish far apart.
        let need: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| matches!(self.decisions[i], Plan::Issue { new_key: true, .. }))
            .collect();
        let new_keys: BTreeMap<usize, KeyPem> = need
            .par_iter()
            .with_max_len(1)
            .map(|&i| {
                let spec = &self.specs[i];
                self.keys
                    .generate(spec.key)
                    .map(|k| (i, k))
                    .map_err(|e| PkiError::Key(e, spec.id()))
            })
            .collect::<Result<_, _>>()?;
        let key = |i: usize| new_keys.get(&i);
        // The CAs in plan order (a CA may sign a CA), then every other entry in parallel, each
        // issuing CA loaded once.
        for &i in idx.iter().filter(|&&i| self.specs[i].is_ca()) {
            let spec = &self.specs[i];
            let issuer = match spec.issuer_id() {
                None => None,
                Some(id) => Some(load_issuer(self.made(&id, slots), &id)?),
            };
            slots[i] = Some(settle(
                spec,
                &self.decisions[i],
                key(i),
                have(i),
                issuer.as_ref(),
                self.now,
                self.keys,
            )?);
        }
        let leaves: Vec<usize> = idx.iter().copied().filter(|&i| !self.specs[i].is_ca()).collect();
        // Only the CAs that sign something this run are loaded.
        let wanted: std::collections::BTreeSet<String> = leaves
            .iter()
            .filter(|&&i| matches!(self.decisions[i], Plan::Issue { .. }) && self.specs[i].kind != Kind::KeyOnly)
            .filter_map(|&i| self.specs[i].issuer_id())
            .collect();
        let issuers: BTreeMap<String, Issuer<'static, KeyPair>> = wanted
            .into_iter()
            .map(|id| load_issuer(self.made(&id, slots), &id).map(|iss| (id, iss)))
            .collect::<Result<_, _>>()?;
        let made: Vec<Result<Issued, PkiError>> = leaves
            .par_iter()
            .map(|&i| {
                let spec = &self.specs[i];
                let issuer = spec.issuer_id().and_then(|id| issuers.get(&id));
                settle(spec, &self.decisions[i], key(i), have(i), issuer, self.now, self.keys)
            })
            .collect();
        for (i, r) in leaves.into_iter().zip(made) {
            slots[i] = Some(r?);
        }
        Ok(())
    }

    fn made<'s>(&self, id: &str, slots: &'s [Option<Issued>]) -> Option<&'s Issued> {
        self.index.get(id).and_then(|&j| slots[j].as_ref())
    }
}

/// A CA, loaded to sign: its key and the subject of its certificate.
fn load_issuer(ca: Option<&Issued>, id: &str) -> Result<Issuer<'static, KeyPair>, PkiError> {
    let ca = ca.unwrap_or_else(|| panic!("{id} is planned before what it signs"));
    let key = keys::load(&ca.key_pem).map_err(|e| PkiError::Key(e, ca.spec.id()))?;
    let der = inspect::der_of(&ca.cert_pem).map_err(|e| PkiError::Build(ca.spec.id(), e.to_string()))?;
    Issuer::from_ca_cert_der(&der.into(), key).map_err(|e| PkiError::Build(ca.spec.id(), e.to_string()))
}

/// One entry as the run leaves it: reused, or issued with its new or kept key.
fn settle(
    spec: &CertSpec,
    plan: &Plan,
    new_key: Option<&KeyPem>,
    have: &Material,
    issuer: Option<&Issuer<'_, KeyPair>>,
    now: OffsetDateTime,
    keys: &dyn KeySource,
) -> Result<Issued, PkiError> {
    let (key_pem, outcome) = match plan {
        Plan::Reuse => (have.key_pem.clone().unwrap_or_default(), Outcome::Reused),
        Plan::Issue { outcome, .. } => (
            new_key.cloned().or_else(|| have.key_pem.clone()).unwrap_or_default(),
            outcome.clone(),
        ),
    };
    let cert_pem = match (spec.kind, plan) {
        // A bare key's public half is derived, never stored as state.
        (Kind::KeyOnly, _) => keys::public_pem(&key_pem).map_err(|e| PkiError::Key(e, spec.id()))?,
        (_, Plan::Reuse) => have.cert_pem.clone().unwrap_or_default(),
        (_, Plan::Issue { .. }) => sign(spec, &key_pem, issuer, now, keys)?,
    };
    Ok(Issued {
        spec: spec.clone(),
        key_pem,
        cert_pem,
        outcome,
    })
}

fn refuse(spec: &CertSpec, reason: impl Into<String>) -> PkiError {
    PkiError::Refused {
        id: spec.id(),
        reason: reason.into(),
        hint: "a running cluster must not be re-keyed by accident: restore the file from a backup, or pass --rotate-ca to replace every CA and certificate".into(),
    }
}

fn decide(
    spec: &CertSpec,
    have: &Material,
    existing: &Existing,
    now: OffsetDateTime,
    opts: Options,
    parent_changed: bool,
) -> Result<Plan, PkiError> {
    let new = |outcome| Ok(Plan::Issue { new_key: true, outcome });
    let is_ca = spec.is_ca();
    if is_ca && opts.rotate_ca {
        let outcome = if have.cert_pem.is_some() {
            Outcome::Reissued("--rotate-ca".into())
        } else {
            Outcome::Created
        };
        return new(outcome);
    }
    let key_alg = have.key_pem.as_deref().map(keys::algorithm_of);
    match (&have.key_pem, &have.cert_pem, spec.kind) {
        (None, None, _) => new(Outcome::Created),
        (Some(_), _, Kind::KeyOnly) => match key_alg.flatten() {
            Some(_) => Ok(Plan::Reuse),
            None => Err(refuse(spec, "the existing key does not parse")),
        },
        (None, Some(_), _) if is_ca => Err(refuse(spec, "the CA certificate exists but its key is missing")),
        (None, _, _) => new(Outcome::Reissued("its key was missing".into())),
        (Some(_), None, _) if is_ca => Err(refuse(spec, "the CA key exists but its certificate is missing")),
        (Some(_), None, _) => Ok(Plan::Issue {
            new_key: false,
            outcome: Outcome::Reissued("its certificate was missing".into()),
        }),
        (Some(key), Some(cert), _) => {
            let facts = inspect::facts(cert).map_err(|e| refuse(spec, e.to_string()))?;
            let pairs = inspect::spki_of_key(key).map(|k| k == facts.spki).unwrap_or(false);
            if !pairs {
                return if is_ca {
                    Err(refuse(spec, "the key does not belong to the certificate"))
                } else {
                    new(Outcome::Reissued("its key did not match its certificate".into()))
                };
            }
            if is_ca {
                return decide_ca(spec, cert, &facts, existing, now, key_alg.flatten(), parent_changed);
            }
            let why = leaf_problem(spec, cert, &facts, existing, now, parent_changed);
            match why {
                None => Ok(Plan::Reuse),
                Some(reason) if key_alg.flatten() == Some(spec.key) => Ok(Plan::Issue {
                    new_key: false,
                    outcome: Outcome::Reissued(reason),
                }),
                Some(reason) => new(Outcome::Reissued(format!("{reason}; new {} key", spec.key.as_str()))),
            }
        }
    }
}

fn decide_ca(
    spec: &CertSpec,
    cert: &str,
    facts: &Facts,
    existing: &Existing,
    now: OffsetDateTime,
    alg: Option<KeyAlgorithm>,
    parent_changed: bool,
) -> Result<Plan, PkiError> {
    if parent_changed {
        return Err(refuse(spec, "its issuer is being replaced, which would orphan this CA"));
    }
    if facts.not_after <= now.unix_timestamp() {
        return Err(refuse(spec, "the CA has expired"));
    }
    // A CA made with another key algorithm is kept: the choice applies to new keys only.
    let _ = alg;
    if let Some(reason) = inspect::mismatch(spec, facts) {
        return Err(refuse(
            spec,
            format!("the existing CA differs from what hardshift would create: {reason}"),
        ));
    }
    let issuer_pem = match spec.issuer_id() {
        None => Some(cert.to_string()),
        Some(i) => existing.get(&i).and_then(|m| m.cert_pem.clone()),
    };
    match issuer_pem.map(|p| inspect::signed_by(cert, &p)) {
        Some(Ok(())) => Ok(Plan::Reuse),
        Some(Err(e)) => Err(refuse(spec, format!("not signed by its issuer: {e}"))),
        None => Err(refuse(spec, "its issuer's certificate is missing")),
    }
}

fn leaf_problem(
    spec: &CertSpec,
    cert: &str,
    facts: &Facts,
    existing: &Existing,
    now: OffsetDateTime,
    parent_changed: bool,
) -> Option<String> {
    if parent_changed {
        return Some("its CA was replaced".into());
    }
    if let Some(reason) = inspect::mismatch(spec, facts) {
        return Some(reason);
    }
    if facts.not_after <= (now + RENEW_BEFORE).unix_timestamp() {
        return Some("it expires within 30 days".into());
    }
    let issuer = spec.issuer_id().and_then(|i| existing.get(&i)).and_then(|m| m.cert_pem.as_deref());
    match issuer.map(|p| inspect::signed_by(cert, p)) {
        Some(Ok(())) => None,
        Some(Err(e)) => Some(format!("not signed by its CA ({e})")),
        None => Some("its CA certificate is missing".into()),
    }
}

fn sign(
    spec: &CertSpec,
    key_pem: &str,
    issuer: Option<&Issuer<'_, KeyPair>>,
    now: OffsetDateTime,
    keys: &dyn KeySource,
) -> Result<String, PkiError> {
    let err = |e: rcgen::Error| PkiError::Build(spec.id(), e.to_string());
    let key = keys::load(key_pem).map_err(|e| PkiError::Key(e, spec.id()))?;
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    for o in &spec.orgs {
        dn.push(DnType::OrganizationName, o.as_str());
    }
    dn.push(DnType::CommonName, spec.cn.as_str());
    p.distinguished_name = dn;
    p.not_before = now - BACKDATE;
    p.not_after = now + Duration::days(i64::from(spec.days));
    p.serial_number = Some(SerialNumber::from_slice(&keys.serial()));
    p.use_authority_key_identifier_extension = spec.issuer.is_some();
    let rsa = spec.key != KeyAlgorithm::EcdsaP256;
    match spec.kind {
        Kind::Ca { path_len } => {
            p.is_ca = IsCa::Ca(path_len.map_or(BasicConstraints::Unconstrained, BasicConstraints::Constrained));
            p.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
        }
        Kind::Leaf { server, client } => {
            p.is_ca = IsCa::ExplicitNoCa;
            p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            if rsa {
                p.key_usages.push(KeyUsagePurpose::KeyEncipherment);
            }
            if server {
                p.extended_key_usages.push(ExtendedKeyUsagePurpose::ServerAuth);
            }
            if client {
                p.extended_key_usages.push(ExtendedKeyUsagePurpose::ClientAuth);
            }
        }
        Kind::KeyOnly => unreachable!("key-only entries have no certificate"),
    }
    for d in &spec.dns {
        p.subject_alt_names.push(SanType::DnsName(d.as_str().try_into().map_err(err)?));
    }
    for ip in &spec.ips {
        p.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    let cert = match issuer {
        None => p.self_signed(&key).map_err(err)?,
        Some(issuer) => p.signed_by(&key, issuer).map_err(err)?,
    };
    Ok(cert.pem())
}

/// CAs the live bundle recorded (their files are listed in its SHA256SUMS) but whose files are
/// gone now. Minting them anew would re-key a running cluster, so the caller refuses unless the
/// user asked for `--rotate-ca`. A CA the bundle never had (new in this version's plan) is not
/// listed, and is simply created.
pub fn vanished_cas(specs: &[CertSpec], existing: &Existing, recorded: &std::collections::BTreeSet<String>) -> Vec<String> {
    specs
        .iter()
        .filter(|s| s.is_ca() && !existing.contains_key(&s.id()))
        .filter(|s| recorded.contains(&format!("{}.crt", s.id())) || recorded.contains(&format!("{}.key", s.id())))
        .map(CertSpec::id)
        .collect()
}
