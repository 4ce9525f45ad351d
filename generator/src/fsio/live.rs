//! The live generation, read: the key and certificate files a previous run left (what the PKI
//! reuses), every file (for `verify`).

use super::current;
use crate::bundle::Bundle;
use crate::pki::{keys::KeyPem, CertSpec, Existing, Kind, Material};
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What the previous run left for each planned entry.
pub fn read_existing(dir: &Path, specs: &[CertSpec]) -> Existing {
    let Some(cur) = current(dir) else { return Existing::new() };
    let read = |p: PathBuf| fs::read_to_string(p).ok();
    specs
        .iter()
        .filter_map(|s| {
            let stem = cur.join(s.id());
            let m = Material {
                key_pem: read(stem.with_extension("key")).map(KeyPem::new),
                cert_pem: match s.kind {
                    Kind::KeyOnly => None,
                    _ => read(stem.with_extension("crt")),
                },
            };
            (m.key_pem.is_some() || m.cert_pem.is_some()).then(|| (s.id(), m))
        })
        .collect()
}

/// Every file of the live bundle, for `verify`.
pub fn read_bundle(dir: &Path) -> io::Result<Bundle> {
    let cur = current(dir).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no bundle in {} (run `hardshift create` first)", dir.display()),
        )
    })?;
    let mut b = Bundle::default();
    let mut stack = vec![cur.clone()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&cur).map_err(io::Error::other)?.to_string_lossy().to_string();
                let mode = e.metadata()?.permissions().mode() & 0o7777;
                b.add(rel, mode, fs::read(&p)?);
            }
        }
    }
    Ok(b)
}
