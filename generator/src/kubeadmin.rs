//! The `kubeadmin` console login: a password made once per cluster (kept 0600 in
//! `auth/kubeadmin-password` and reused on re-runs) and its bcrypt hash in the
//! `kube-system/kubeadmin` Secret that the authentication operator reads.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const PASSWORD_FILE: &str = crate::layout::KUBEADMIN_PASSWORD;
/// The installer's cost (Go's bcrypt.DefaultCost).
const COST: u32 = 10;
const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// `xxxxx-xxxxx-xxxxx-xxxxx` (23 characters, the installer's shape) from 20 random bytes; the
/// alphabet leaves out look-alikes (0/O, 1/l/I). Rejection sampling keeps it uniform.
pub fn password(mut random: impl FnMut() -> u8) -> String {
    let limit = 256 - 256 % ALPHABET.len();
    let mut chars = Vec::with_capacity(20);
    while chars.len() < 20 {
        let b = random() as usize;
        if b < limit {
            chars.push(ALPHABET[b % ALPHABET.len()]);
        }
    }
    chars
        .chunks(5)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("-")
}

/// A password as read back from the bundle, or why it cannot be used.
pub fn check(text: &str) -> Result<String, crate::config::Broken> {
    let p = text.trim_end_matches('\n');
    if p.len() < 8 || p.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(crate::config::Broken(format!(
            "{PASSWORD_FILE}: expected one line of at least 8 characters"
        )));
    }
    Ok(p.to_string())
}

/// The console login: the password and its bcrypt hash, made together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubeadmin {
    pub password: String,
    pub hash: String,
}

impl Kubeadmin {
    /// `domain`: the cluster's (`name.baseDomain`). The hash needs nothing of the PKI, so its
    /// ~100 ms of bcrypt run beside the key generation.
    pub fn new(password: String, domain: &str) -> Kubeadmin {
        let hash = hash(&password, domain);
        Kubeadmin { password, hash }
    }
}

/// bcrypt with a salt derived from the cluster's domain and the password: the same inputs give
/// the same bytes, so a re-run changes nothing; the password is random per bundle, so two
/// clusters do not share a salt.
pub fn hash(password: &str, domain: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"hardshift kubeadmin salt\0");
    h.update(domain.as_bytes());
    h.update(b"\0");
    h.update(password.as_bytes());
    let salt: [u8; 16] = h.finalize()[..16].try_into().expect("16 bytes");
    bcrypt::hash_with_salt(password, COST, salt)
        .expect("bcrypt of a short password")
        .format_for_version(bcrypt::Version::TwoA)
}

pub fn secret(k: &Kubeadmin) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("kubeadmin".into()),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([("kubeadmin".to_string(), ByteString(k.hash.clone().into_bytes()))])),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_have_the_installers_shape_and_use_every_byte_fairly() {
        let mut n = 0u8;
        let p = password(|| {
            n = n.wrapping_add(37);
            n
        });
        assert_eq!(p.len(), 23, "{p}");
        assert_eq!(p.split('-').map(str::len).collect::<Vec<_>>(), [5, 5, 5, 5], "{p}");
        assert!(p.chars().all(|c| c == '-' || ALPHABET.contains(&(c as u8))));
        // Bytes at or above the last whole multiple of the alphabet are skipped, not folded.
        let mut bytes = vec![255u8, 254, 253].into_iter().chain(std::iter::repeat(0));
        assert!(password(|| bytes.next().unwrap()).starts_with("aaaaa"));
    }

    #[test]
    fn a_bad_password_file_is_refused() {
        assert!(check("short\n").is_err());
        assert!(check("two words here\n").is_err());
        assert_eq!(check("abcde-fghij-kmnop-qrstu\n").unwrap(), "abcde-fghij-kmnop-qrstu");
    }
}
