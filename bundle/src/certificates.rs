//! The bundle's certificates as a reader sees them: each one's file, CN and expiry (for
//! /metrics), and the bundle's identity (the cluster ID its root CA names).

use crate::fsio;
use crate::layout::{AGENT_PKI, PKI};
use sha2::{Digest, Sha256};
use std::path::Path;
use x509_parser::prelude::{FromDer, X509Certificate};

/// A certificate of the bundle: its file, CN and notAfter (unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cert {
    pub file: String,
    pub cn: String,
    pub not_after_s: i64,
}

/// Every certificate of pki/ and agent-pki/, by file name (ones that do not parse are `verify`'s
/// business, not a reader's).
pub fn certificates(dir: &Path) -> Vec<Cert> {
    let Some(cur) = fsio::current(dir) else { return vec![] };
    let mut out = Vec::new();
    for sub in [PKI, AGENT_PKI] {
        let Ok(entries) = std::fs::read_dir(cur.join(sub)) else { continue };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".crt"))
            .collect();
        names.sort();
        for n in names {
            let rel = format!("{sub}/{n}");
            if let Some((cn, not_after_s)) = fsio::read_current(dir, &rel).and_then(|pem| cn_and_expiry(&pem)) {
                out.push(Cert {
                    file: rel,
                    cn,
                    not_after_s,
                });
            }
        }
    }
    out
}

/// The first certificate of a PEM file: its CN (empty if none) and notAfter.
fn cn_and_expiry(pem: &[u8]) -> Option<(String, i64)> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    let (_, cert) = X509Certificate::from_der(&p.contents).ok()?;
    let cn = cert
        .subject()
        .iter_common_name()
        .find_map(|a| a.as_str().ok().map(String::from))
        .unwrap_or_default();
    Some((cn, cert.validity().not_after.timestamp()))
}

/// The cluster ID a root CA names: its SHA-256 shaped as a version-4 UUID. The same CA gives
/// the same ID, so the ClusterVersion `create` writes and /metrics name the install alike.
pub fn cluster_id_of_root_ca(root_ca_pem: &str) -> String {
    let d: [u8; 32] = Sha256::digest(root_ca_pem.as_bytes()).into();
    let h: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-{}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        ["8", "9", "a", "b"][(d[8] & 3) as usize],
        &h[17..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_id_is_a_version_4_uuid_of_the_ca() {
        let id = cluster_id_of_root_ca("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n");
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!("89ab".contains(&id[19..20]), "{id}");
        assert_eq!(
            id,
            cluster_id_of_root_ca("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
        );
        assert!(certificates(Path::new("/nonexistent")).is_empty());
    }
}
