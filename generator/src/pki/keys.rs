//! Key material: the one injected source of randomness in generation.
//!
//! ring signs but cannot generate RSA keys, so RSA keys come from `hardshift-rsakey` (the `rsa`
//! crate's key, from primes found faster) and are handed
//! to rcgen/ring as PKCS#8; ECDSA keys come from ring directly. One crypto provider (ring) signs.

use crate::cluster::KeyAlgorithm;
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, PKCS_RSA_SHA256};
use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("generating a {0} key: {1}")]
    Generate(&'static str, String),
    #[error("reading a private key: {0}")]
    Parse(String),
}

/// Where new keys and serial numbers come from.
pub trait KeySource: Sync {
    /// A new private key, PKCS#8 PEM.
    fn generate(&self, alg: KeyAlgorithm) -> Result<String, KeyError>;
    /// 16 random bytes for a certificate serial number.
    fn serial(&self) -> [u8; 16];
}

/// The operating system's randomness.
pub struct SystemKeys;

impl KeySource for SystemKeys {
    fn generate(&self, alg: KeyAlgorithm) -> Result<String, KeyError> {
        let bits = match alg {
            KeyAlgorithm::EcdsaP256 => {
                let kp = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| KeyError::Generate("ecdsa-p256", e.to_string()))?;
                return Ok(kp.serialize_pem());
            }
            KeyAlgorithm::Rsa2048 => 2048,
            KeyAlgorithm::Rsa4096 => 4096,
        };
        let key = hardshift_rsakey::generate(bits).map_err(|e| KeyError::Generate(alg.as_str(), e))?;
        let pem = key
            .to_pkcs8_pem(rsa::pkcs8::LineEnding::LF)
            .map_err(|e| KeyError::Generate(alg.as_str(), e.to_string()))?;
        Ok(pem.to_string())
    }

    fn serial(&self) -> [u8; 16] {
        let mut s = [0u8; 16];
        getrandom::fill(&mut s).expect("the OS random source");
        // Positive and without a leading zero octet, so the DER INTEGER is exactly 16 bytes.
        s[0] = (s[0] & 0x7f) | 0x40;
        s
    }
}

/// Load a PKCS#8 PEM key for signing, with the algorithm its type implies.
pub fn load(pem: &str) -> Result<KeyPair, KeyError> {
    let kp = KeyPair::from_pem(pem).map_err(|e| KeyError::Parse(e.to_string()))?;
    if kp.is_compatible(&PKCS_RSA_SHA256) {
        // from_pem picks an RSA algorithm; pin SHA-256 like openssl and the installer.
        return KeyPair::from_pkcs8_pem_and_sign_algo(pem, &PKCS_RSA_SHA256).map_err(|e| KeyError::Parse(e.to_string()));
    }
    Ok(kp)
}

/// Which of our algorithms a loaded key is.
pub fn algorithm_of(pem: &str) -> Option<KeyAlgorithm> {
    use rsa::pkcs8::DecodePrivateKey;
    use rsa::traits::PublicKeyParts;
    if let Ok(k) = rsa::PrivateKey::from_pkcs8_pem(pem) {
        return match k.size() * 8 {
            2048 => Some(KeyAlgorithm::Rsa2048),
            4096 => Some(KeyAlgorithm::Rsa4096),
            _ => None,
        };
    }
    let kp = KeyPair::from_pem(pem).ok()?;
    (kp.algorithm() == &PKCS_ECDSA_P256_SHA256).then_some(KeyAlgorithm::EcdsaP256)
}

/// The PEM public key (`.pub` file) for a private key.
pub fn public_pem(pem: &str) -> Result<String, KeyError> {
    use rsa::pkcs8::DecodePrivateKey;
    if let Ok(k) = rsa::PrivateKey::from_pkcs8_pem(pem) {
        return k
            .to_public_key()
            .to_public_key_pem(rsa::pkcs8::LineEnding::LF)
            .map_err(|e| KeyError::Parse(e.to_string()));
    }
    Ok(load(pem)?.public_key_pem())
}
