//! The live bundle, read once into one type: what a build keeps (keys, certificates, the
//! kubeadmin password) and what it judges by (the files the last run recorded, the generation
//! kept before it).

use crate::pki::{CertSpec, Existing};
use crate::{fsio, kubeadmin, layout};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Clone)]
pub struct Live {
    /// The live generation's directory name, if a bundle was written before.
    pub generation: Option<String>,
    /// What the live generation holds for each planned PKI entry.
    pub existing: Existing,
    /// The paths the live SHA256SUMS names: what the last run wrote.
    pub recorded: BTreeSet<String>,
    /// `auth/kubeadmin-password`, as it is on disk.
    pub password: Option<Vec<u8>>,
    /// The generation before the last change (`DIR/.hardshift/previous`), and the ids of the
    /// planned CAs whose keys it still holds.
    pub previous: Option<PathBuf>,
    pub previous_cas: BTreeSet<String>,
}

impl Live {
    /// Read DIR's live bundle for the entries `specs` plans (nothing, for a fresh directory).
    pub fn read(dir: &Path, specs: &[CertSpec]) -> Live {
        let Some(cur) = fsio::current(dir) else { return Live::default() };
        let sums = std::fs::read(cur.join(layout::SUMS)).unwrap_or_default();
        let recorded = String::from_utf8_lossy(&sums)
            .lines()
            .filter_map(|l| l.split_once("  ").map(|(_, p)| p.to_string()))
            .collect();
        let previous = dir.join(layout::STATE_DIR).join("previous");
        let previous_cas = specs
            .iter()
            .filter(|s| s.is_ca() && previous.join(format!("{}.key", s.id())).is_file())
            .map(|s| s.id())
            .collect();
        Live {
            generation: cur.file_name().map(|n| n.to_string_lossy().to_string()),
            existing: fsio::read_existing(dir, specs),
            recorded,
            password: std::fs::read(cur.join(kubeadmin::PASSWORD_FILE)).ok(),
            previous: Some(previous),
            previous_cas,
        }
    }
}
