//! hardshift-generator: pure functions from validated inputs to an install bundle.
//!
//! `config::read_sources` and `fsio` are the only I/O; everything between is a pure function of
//! the inputs, an injected `now` and an injected key source.

pub use hardshift_bundle::layout;

pub mod assets;
pub mod body;
pub mod bundle;
pub mod cluster;
pub mod config;
pub mod crd;
pub mod created;
pub mod fsio;
pub mod ignition;
pub mod kubeadmin;
pub mod kubeconfig;
pub mod lab;
pub mod mco;
pub mod object;
pub mod pipeline;
pub mod pki;
pub mod release;
pub mod release_pull;
pub mod reload;
pub mod render;
pub mod scripts;
pub mod shell;
#[cfg(test)]
pub(crate) mod testing;
pub mod verify;
pub mod yamlout;
