//! A bundle `create` wrote, read back: its cluster loaded again from the inputs with the options
//! `create` recorded (the one way every command after `create` loads it; no new keys are made),
//! and the bundle's own secrets, which what leaves the workstation is scrubbed of.

use crate::cluster::Cluster;
use crate::pipeline::{self, Error};
use std::path::{Path, PathBuf};

/// What a command's flags may say over `create`'s record: the release image and its references.
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub release_image: Option<String>,
    pub release_refs: Option<PathBuf>,
}

/// The cluster of the bundle in `dir` as `create` made it: its inputs, with the options it
/// recorded unless `given` names them.
pub fn cluster(dir: &Path, given: &Given) -> Result<Cluster, Error> {
    let rec = pipeline::recorded(dir);
    let refs = given.release_refs.clone().or_else(|| rec.release_refs.clone());
    pipeline::inputs::cluster(dir, refs.as_deref(), &rec.overrides(given.release_image.clone()))
}

/// The bundle's nodes as (hostname, role); empty when its inputs are not in `dir` (a collector's
/// store copied elsewhere, say).
pub fn nodes(dir: &Path) -> Vec<(String, String)> {
    cluster(dir, &Given::default())
        .map(|c| c.nodes.iter().map(|n| (n.hostname.clone(), n.role.as_str().to_string())).collect())
        .unwrap_or_default()
}

/// The bundle's own secrets, for scrubbing by value what leaves the workstation: the kubeadmin
/// password, and each pull-secret credential (as given, decoded, and its password alone).
pub fn secrets(dir: &Path) -> Vec<String> {
    let password = crate::fsio::read_current(dir, crate::kubeadmin::PASSWORD_FILE);
    let pull_secret = cluster(dir, &Given::default()).map(|c| c.pull_secret).ok();
    secrets_of(password.as_deref(), pull_secret.as_deref())
}

/// `secrets`, from the password file's bytes and the pull secret's JSON. Values under 6
/// characters are left out: scrubbing them would blank common words.
pub fn secrets_of(password: Option<&[u8]>, pull_secret: Option<&str>) -> Vec<String> {
    use base64::Engine;
    let mut out = Vec::new();
    if let Some(pw) = password {
        out.push(String::from_utf8_lossy(pw).trim().to_string());
    }
    let ps: serde_json::Value = pull_secret.and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
    for (_, reg) in ps["auths"].as_object().into_iter().flatten() {
        let Some(auth) = reg["auth"].as_str() else { continue };
        out.push(auth.to_string());
        if let Ok(plain) = base64::engine::general_purpose::STANDARD.decode(auth) {
            let plain = String::from_utf8_lossy(&plain).to_string();
            if let Some((_, pass)) = plain.split_once(':') {
                out.push(pass.to_string());
            }
            out.push(plain);
        }
    }
    out.retain(|s| s.len() >= 6);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_the_password_and_each_credential_whole_decoded_and_alone() {
        // "user:s3cret-pass" in base64.
        let ps = r#"{"auths":{"r.example":{"auth":"dXNlcjpzM2NyZXQtcGFzcw=="},"short":{"auth":"eDp5"}}}"#;
        let got = secrets_of(Some(b"kubeadmin-pw\n"), Some(ps));
        assert_eq!(
            got,
            ["kubeadmin-pw", "dXNlcjpzM2NyZXQtcGFzcw==", "s3cret-pass", "user:s3cret-pass"],
            "{got:?}"
        );
        assert!(secrets_of(None, Some("not json")).is_empty());
    }

    #[test]
    fn a_directory_without_inputs_has_no_nodes_and_names_what_is_missing() {
        let d = tempfile::tempdir().unwrap();
        assert!(nodes(d.path()).is_empty());
        let e = cluster(d.path(), &Given::default()).unwrap_err();
        assert!(matches!(&e, Error::Input(m) if m.contains("install-config.yaml")), "{e:?}");
    }
}
