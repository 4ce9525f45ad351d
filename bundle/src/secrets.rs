//! The bundle's own secrets, for scrubbing by value what leaves the workstation (`gather`, logs,
//! JSON output): the kubeadmin password, and each pull-secret credential (as given, decoded, and
//! its password alone). Read from the bundle (`auth/`), never from the inputs.

use crate::layout::{KUBEADMIN_PASSWORD, PULL_SECRET};
use std::path::Path;

/// The secrets of the bundle in `dir` (none when it has none: a store copied elsewhere).
pub fn secrets(dir: &Path) -> Vec<String> {
    let password = crate::fsio::read_current(dir, KUBEADMIN_PASSWORD);
    let pull_secret = crate::fsio::read_current(dir, PULL_SECRET);
    secrets_of(password.as_deref(), pull_secret.as_deref().map(String::from_utf8_lossy).as_deref())
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
        assert!(secrets(Path::new("/nonexistent")).is_empty());
    }
}
