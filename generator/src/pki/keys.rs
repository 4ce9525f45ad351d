//! Key material: the one injected source of randomness in generation.
//!
//! Keys come from AWS-LC (aws-lc-rs, `hardshift-crypto`'s module): constant-time RSA key
//! generation with FIPS 186-5's bounds on p, q and d, its FIPS module in a `fips` build. rcgen
//! signs through the same library. Private keys live in `KeyPem`, wiped from memory when dropped.

use crate::cluster::KeyAlgorithm;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use base64::Engine;
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, PKCS_RSA_SHA256};
use zeroize::Zeroizing;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("generating a {0} key: {1}")]
    Generate(&'static str, String),
    #[error("reading a private key: {0}")]
    Parse(String),
}

/// A private key, PKCS#8 PEM: wiped from memory when dropped, never printed by `Debug`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeyPem(Zeroizing<String>);

impl KeyPem {
    pub fn new(pem: String) -> KeyPem {
        KeyPem(Zeroizing::new(pem))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for KeyPem {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for KeyPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyPem(<private key>)")
    }
}

/// Where new keys and serial numbers come from.
pub trait KeySource: Sync {
    /// A new private key, PKCS#8 PEM.
    fn generate(&self, alg: KeyAlgorithm) -> Result<KeyPem, KeyError>;
    /// 16 random bytes for a certificate serial number.
    fn serial(&self) -> [u8; 16];
}

/// AWS-LC's key generation and the operating system's randomness (AWS-LC seeds from it too).
pub struct SystemKeys;

impl KeySource for SystemKeys {
    fn generate(&self, alg: KeyAlgorithm) -> Result<KeyPem, KeyError> {
        let fail = |e: aws_lc_rs::error::Unspecified| KeyError::Generate(alg.as_str(), e.to_string());
        let der = match alg {
            KeyAlgorithm::EcdsaP256 => {
                let kp = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).map_err(fail)?;
                Zeroizing::new(kp.to_pkcs8v1().map_err(fail)?.as_ref().to_vec())
            }
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa4096 => {
                let size = match alg {
                    KeyAlgorithm::Rsa2048 => aws_lc_rs::rsa::KeySize::Rsa2048,
                    _ => aws_lc_rs::rsa::KeySize::Rsa4096,
                };
                let kp = aws_lc_rs::rsa::KeyPair::generate(size).map_err(fail)?;
                Zeroizing::new(kp.as_der().map_err(fail)?.as_ref().to_vec())
            }
        };
        Ok(private_key_pem(&der))
    }

    fn serial(&self) -> [u8; 16] {
        let mut s = [0u8; 16];
        aws_lc_rs::rand::fill(&mut s).expect("AWS-LC's random source");
        // Positive and without a leading zero octet, so the DER INTEGER is exactly 16 bytes.
        s[0] = (s[0] & 0x7f) | 0x40;
        s
    }
}

/// PKCS#8 DER as PEM, written into one buffer sized up front: no reallocation leaves a copy of
/// the key behind in freed memory.
pub fn private_key_pem(der: &[u8]) -> KeyPem {
    const BEGIN: &str = "-----BEGIN PRIVATE KEY-----\n";
    const END: &str = "-----END PRIVATE KEY-----\n";
    let lines = der.len().div_ceil(48);
    let mut out = String::with_capacity(BEGIN.len() + END.len() + lines * 65);
    out.push_str(BEGIN);
    for chunk in der.chunks(48) {
        base64::engine::general_purpose::STANDARD.encode_string(chunk, &mut out);
        out.push('\n');
    }
    out.push_str(END);
    KeyPem::new(out)
}

/// Load a PKCS#8 PEM key for signing, with the algorithm its type implies.
pub fn load(pem: &str) -> Result<KeyPair, KeyError> {
    let kp = KeyPair::from_pem(pem).map_err(|e| KeyError::Parse(e.to_string()))?;
    if kp.is_compatible(&PKCS_RSA_SHA256) && kp.algorithm() != &PKCS_RSA_SHA256 {
        // from_pem picks an RSA algorithm; pin SHA-256 like openssl and the installer.
        return KeyPair::from_pkcs8_pem_and_sign_algo(pem, &PKCS_RSA_SHA256).map_err(|e| KeyError::Parse(e.to_string()));
    }
    Ok(kp)
}

/// Which of our algorithms a loaded key is.
pub fn algorithm_of(pem: &str) -> Option<KeyAlgorithm> {
    let kp = KeyPair::from_pem(pem).ok()?;
    if kp.algorithm() == &PKCS_ECDSA_P256_SHA256 {
        return Some(KeyAlgorithm::EcdsaP256);
    }
    if !kp.is_compatible(&PKCS_RSA_SHA256) {
        return None;
    }
    let der = Zeroizing::new(kp.serialize_der());
    match aws_lc_rs::rsa::KeyPair::from_pkcs8(&der).ok()?.public_modulus_len() * 8 {
        2048 => Some(KeyAlgorithm::Rsa2048),
        4096 => Some(KeyAlgorithm::Rsa4096),
        _ => None,
    }
}

/// The PEM public key (`.pub` file, SubjectPublicKeyInfo) for a private key.
pub fn public_pem(pem: &str) -> Result<String, KeyError> {
    Ok(load(pem)?.public_key_pem())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_algorithm_makes_a_key_that_loads_back_as_itself() {
        for alg in [KeyAlgorithm::EcdsaP256, KeyAlgorithm::Rsa2048] {
            let pem = SystemKeys.generate(alg).unwrap();
            assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n") && pem.ends_with("-----END PRIVATE KEY-----\n"));
            assert!(
                pem.lines().all(|l| l.len() <= 64),
                "PEM lines of 64: {}",
                pem.lines().map(str::len).max().unwrap()
            );
            assert_eq!(algorithm_of(&pem), Some(alg));
            assert!(public_pem(&pem).unwrap().starts_with("-----BEGIN PUBLIC KEY-----"));
            assert_eq!(format!("{pem:?}"), "KeyPem(<private key>)", "Debug never shows a key");
        }
    }

    #[test]
    fn two_keys_differ() {
        let (a, b) = (
            SystemKeys.generate(KeyAlgorithm::Rsa2048).unwrap(),
            SystemKeys.generate(KeyAlgorithm::Rsa2048).unwrap(),
        );
        assert_ne!(a, b);
    }
}
