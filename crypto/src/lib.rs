//! The one crypto provider of every hardshift program.
//!
//! TLS (rustls), certificates (rcgen) and keys all go through AWS-LC, by aws-lc-rs: with two
//! providers in one process rustls refuses to pick one at start-up, and a security review has one
//! library to ask about. Built with the `fips` feature the library is AWS-LC's FIPS module, and
//! every program that needs FIPS checks that the module came up in FIPS mode before using it.

use std::sync::Arc;

pub use rustls::crypto::CryptoProvider;
pub use zeroize::{Zeroize, Zeroizing};

/// Whether this build carries AWS-LC's FIPS module.
pub const FIPS_BUILD: bool = cfg!(feature = "fips");

/// For `--version`: the package version, then the crypto module on a line of its own.
#[macro_export]
macro_rules! long_version {
    () => {
        if $crate::FIPS_BUILD {
            concat!(env!("CARGO_PKG_VERSION"), "\ncrypto: AWS-LC FIPS module (the `fips` feature)")
        } else {
            concat!(env!("CARGO_PKG_VERSION"), "\ncrypto: AWS-LC (not FIPS)")
        }
    };
}

/// The marker an agent binary built with the FIPS module carries: `create` reads it to embed,
/// for `fips: true`, only an agent that is itself FIPS (without running the binary).
pub const FIPS_MARKER: &[u8] = b"hardshift-crypto-module=aws-lc-fips;";
/// The marker of an agent binary built without it.
pub const PLAIN_MARKER: &[u8] = b"hardshift-crypto-module=aws-lc;";

#[cfg(feature = "fips")]
static MODULE_MARKER: [u8; 36] = *b"hardshift-crypto-module=aws-lc-fips;";
#[cfg(not(feature = "fips"))]
static MODULE_MARKER: [u8; 31] = *b"hardshift-crypto-module=aws-lc;";

/// What the process's crypto is, for `--version`, `verify` and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Module {
    /// Built with AWS-LC's FIPS module.
    pub fips_build: bool,
    /// AWS-LC's FIPS module, in FIPS mode (its power-on self tests passed).
    pub fips: bool,
}

impl Module {
    pub fn name(self) -> &'static str {
        match (self.fips_build, self.fips) {
            (true, true) => "AWS-LC FIPS module (FIPS mode)",
            (true, false) => "AWS-LC FIPS module (NOT in FIPS mode)",
            (false, _) => "AWS-LC (not FIPS)",
        }
    }
}

impl std::fmt::Display for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FipsError {
    #[error(
        "this build has no FIPS-validated crypto module (it was built without the `fips` feature)\n    \
         hint: build it with `cargo build --release --features fips` (needs cmake and Go), or set fips: false"
    )]
    NotBuilt,
    #[error("AWS-LC's FIPS module did not enter FIPS mode: {0}")]
    SelfTest(String),
}

/// The module this process runs.
pub fn module() -> Module {
    // Read the marker, so the linker keeps it in every binary that asks which module it runs.
    std::hint::black_box(&MODULE_MARKER);
    Module {
        fips_build: FIPS_BUILD,
        fips: fips_mode().is_ok(),
    }
}

/// Ok when the process's crypto is AWS-LC's FIPS module in FIPS mode.
pub fn fips_mode() -> Result<(), FipsError> {
    if !FIPS_BUILD {
        return Err(FipsError::NotBuilt);
    }
    aws_lc_rs::try_fips_mode().map_err(|e| FipsError::SelfTest(e.to_string()))
}

/// The rustls provider every TLS client and server uses: AWS-LC's, restricted to FIPS-approved
/// algorithms in a FIPS build.
pub fn provider() -> Arc<CryptoProvider> {
    #[cfg(feature = "fips")]
    let p = rustls::crypto::default_fips_provider();
    #[cfg(not(feature = "fips"))]
    let p = rustls::crypto::aws_lc_rs::default_provider();
    Arc::new(p)
}

/// Install `provider()` as the process default, for the libraries that build their own TLS
/// configs (tonic, kube). Idempotent; call it first thing in `main`.
pub fn install() {
    let _ = CryptoProvider::install_default(Arc::unwrap_or_clone(provider()));
}

/// Which module an agent binary was built with, from its marker; None for a binary without one
/// (not an agent of this version).
pub fn module_of_binary(bytes: &[u8]) -> Option<Module> {
    let has = |m: &[u8]| bytes.windows(m.len()).any(|w| w == m);
    // A binary's mode shows only when it runs: a FIPS build's module enters FIPS mode unless its
    // self tests fail, and then the binary refuses to run.
    if has(FIPS_MARKER) {
        Some(Module {
            fips_build: true,
            fips: true,
        })
    } else if has(PLAIN_MARKER) {
        Some(Module {
            fips_build: false,
            fips: false,
        })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_names_this_build() {
        assert_eq!(
            module_of_binary(&MODULE_MARKER),
            Some(Module {
                fips_build: FIPS_BUILD,
                fips: FIPS_BUILD
            })
        );
        assert_eq!(module_of_binary(b"no marker here"), None);
        assert_eq!(module().fips, FIPS_BUILD, "{}", module());
    }

    #[test]
    fn the_provider_is_fips_exactly_in_a_fips_build() {
        assert_eq!(provider().fips(), FIPS_BUILD);
    }
}
