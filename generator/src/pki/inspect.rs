//! Reading certificates back: what an existing certificate holds, whether it still says what its
//! spec asks, and whether its issuer signed it. Shared by re-runs of `create` and by `verify`.

use super::plan::{CertSpec, Kind};
use std::collections::BTreeSet;
use std::net::IpAddr;
use x509_parser::prelude::*;

/// The facts of one certificate that a spec constrains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub cn: String,
    pub orgs: Vec<String>,
    pub issuer_dn: Vec<u8>,
    pub subject_dn: Vec<u8>,
    pub is_ca: bool,
    pub path_len: Option<u32>,
    pub server_auth: bool,
    pub client_auth: bool,
    pub dns: BTreeSet<String>,
    pub ips: BTreeSet<IpAddr>,
    pub not_before: i64,
    pub not_after: i64,
    pub spki: Vec<u8>,
    pub serial_hex: String,
}

/// Why a certificate (or its key) does not read, or was not signed as claimed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertError {
    #[error("not a PEM certificate: {0}")]
    NotPem(String),
    #[error("certificate does not parse: {0}")]
    NotX509(String),
    #[error("issued by {issuer:?}, not by {expected:?}")]
    OtherIssuer { issuer: String, expected: String },
    #[error("signature does not verify with the issuer's key")]
    BadSignature,
    #[error("the private key does not load: {0}")]
    Key(String),
}

pub fn der_of(pem: &str) -> Result<Vec<u8>, CertError> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| CertError::NotPem(e.to_string()))?;
    Ok(p.contents)
}

fn x509(der: &[u8]) -> Result<X509Certificate<'_>, CertError> {
    X509Certificate::from_der(der)
        .map(|(_, c)| c)
        .map_err(|e| CertError::NotX509(e.to_string()))
}

pub fn facts(pem: &str) -> Result<Facts, CertError> {
    let der = der_of(pem)?;
    let cert = x509(&der)?;
    let subject = cert.subject();
    let cn: Option<String> = subject.iter_common_name().find_map(|a| a.as_str().ok().map(String::from));
    let orgs: Vec<String> = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok().map(String::from))
        .collect();
    let (mut is_ca, mut path_len) = (false, None);
    if let Ok(Some(bc)) = cert.basic_constraints() {
        is_ca = bc.value.ca;
        path_len = bc.value.path_len_constraint;
    }
    let (mut server_auth, mut client_auth) = (false, false);
    if let Ok(Some(eku)) = cert.extended_key_usage() {
        server_auth = eku.value.server_auth;
        client_auth = eku.value.client_auth;
    }
    let (mut dns, mut ips) = (BTreeSet::new(), BTreeSet::new());
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => {
                    dns.insert(d.to_string());
                }
                GeneralName::IPAddress(b) => {
                    if let Some(ip) = ip_from_bytes(b) {
                        ips.insert(ip);
                    }
                }
                _ => {}
            }
        }
    }
    Ok(Facts {
        cn: cn.unwrap_or_default(),
        orgs,
        issuer_dn: cert.issuer().as_raw().to_vec(),
        subject_dn: subject.as_raw().to_vec(),
        is_ca,
        path_len,
        server_auth,
        client_auth,
        dns,
        ips,
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
        spki: cert.public_key().raw.to_vec(),
        serial_hex: cert.raw_serial_as_string(),
    })
}

fn ip_from_bytes(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

/// Why a certificate no longer matches its spec, or None if it does.
pub fn mismatch(spec: &CertSpec, f: &Facts) -> Option<String> {
    if f.cn != spec.cn {
        return Some(format!("subject CN is {:?}, should be {:?}", f.cn, spec.cn));
    }
    if f.orgs != spec.orgs {
        return Some(format!("subject O is {:?}, should be {:?}", f.orgs, spec.orgs));
    }
    match spec.kind {
        Kind::Ca { path_len } => {
            if !f.is_ca || f.path_len != path_len.map(u32::from) {
                return Some("basic constraints differ (CA flag or path length)".into());
            }
        }
        Kind::Leaf { server, client } => {
            if f.is_ca {
                return Some("is a CA, should be a leaf".into());
            }
            if f.server_auth != server || f.client_auth != client {
                return Some(format!(
                    "extended key usage is {}, should be {}",
                    usage_words(f.server_auth, f.client_auth),
                    usage_words(server, client)
                ));
            }
        }
        Kind::KeyOnly => {}
    }
    let want_dns: BTreeSet<String> = spec.dns.iter().cloned().collect();
    let want_ips: BTreeSet<IpAddr> = spec.ips.iter().copied().collect();
    if f.dns != want_dns || f.ips != want_ips {
        let added: Vec<String> = want_dns
            .difference(&f.dns)
            .cloned()
            .chain(want_ips.difference(&f.ips).map(|i| i.to_string()))
            .collect();
        let removed: Vec<String> = f
            .dns
            .difference(&want_dns)
            .cloned()
            .chain(f.ips.difference(&want_ips).map(|i| i.to_string()))
            .collect();
        return Some(format!(
            "SANs changed (added: [{}], removed: [{}])",
            added.join(", "),
            removed.join(", ")
        ));
    }
    None
}

pub fn usage_words(server: bool, client: bool) -> &'static str {
    match (server, client) {
        (true, true) => "serverAuth+clientAuth",
        (true, false) => "serverAuth",
        (false, true) => "clientAuth",
        (false, false) => "none",
    }
}

/// Did `issuer_pem`'s key sign `cert_pem`, with matching names?
pub fn signed_by(cert_pem: &str, issuer_pem: &str) -> Result<(), CertError> {
    let der = der_of(cert_pem)?;
    let ider = der_of(issuer_pem)?;
    let (cert, issuer) = (x509(&der)?, x509(&ider)?);
    if cert.issuer().as_raw() != issuer.subject().as_raw() {
        return Err(CertError::OtherIssuer {
            issuer: cert.issuer().to_string(),
            expected: issuer.subject().to_string(),
        });
    }
    cert.verify_signature(Some(issuer.public_key()))
        .map_err(|_| CertError::BadSignature)
}

/// The SubjectPublicKeyInfo DER of a private key, to pair keys with certificates.
pub fn spki_of_key(key_pem: &str) -> Result<Vec<u8>, CertError> {
    let kp = super::keys::load(key_pem).map_err(|e| CertError::Key(e.to_string()))?;
    Ok(rcgen::PublicKeyData::subject_public_key_info(&kp))
}
