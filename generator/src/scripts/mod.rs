//! The shell scripts the bundle carries, as files (shellcheck reads them as they are, and
//! bootkube.sh diffs against the installer's template), filled by one fixed rule: `@@NAME@@` is
//! NAME's value. Nothing else in a script is special, so `${x}` and `{` are written as bash reads
//! them. A template's placeholders and the values given must match exactly: a name missing on
//! either side is a bug of this crate, caught by the tests that fill every script.

use std::fmt::Display;

/// bootkube.sh, run once on the bootstrap (`assets::bootkube`).
pub const BOOTKUBE: &str = include_str!("bootkube.sh");
/// `record RESULT [ERROR]`: a step's progress record, shared by bootkube.sh and a single node's
/// scripts (`assets::bootkube::RECORD`).
pub const RECORD: &str = include_str!("record.sh");
/// A single node's live system, after bootkube (`assets::in_place::install_to_disk`).
pub const INSTALL_TO_DISK: &str = include_str!("install-to-disk.sh");
/// A single node's installed system, once (`assets::in_place::post_reboot`).
pub const POST_REBOOT: &str = include_str!("post-reboot.sh");
/// mco/render.sh: the release's MCO renders the nodes' OS configuration (`mco::render_script`).
pub const MCO_RENDER: &str = include_str!("mco-render.sh");
/// lab/scripts/helper-network.sh: the helper's host network (`lab::host_network::script`).
pub const HELPER_NETWORK: &str = include_str!("helper-network.sh");

/// Every template, by file name (for the tests that read them all).
pub const ALL: [(&str, &str); 6] = [
    ("bootkube.sh", BOOTKUBE),
    ("record.sh", RECORD),
    ("install-to-disk.sh", INSTALL_TO_DISK),
    ("post-reboot.sh", POST_REBOOT),
    ("mco-render.sh", MCO_RENDER),
    ("helper-network.sh", HELPER_NETWORK),
];

/// `template` with each `@@NAME@@` replaced by NAME's value in `values` (values are not read
/// again: a value holding `@@` stays as it is).
///
/// # Panics
/// When the template names a placeholder `values` lacks, or `values` holds one the template
/// never names: the templates are this crate's own, so either is a bug, and every script is
/// filled by the tests.
pub fn fill(template: &str, values: &[(&str, &dyn Display)]) -> String {
    match try_fill(template, values) {
        Ok(s) => s,
        Err(e) => panic!("script template: {e}"),
    }
}

/// A template and its values that do not match (a bug in hardshift: `fill` panics on it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
struct Unfilled(String);

/// `fill`, or what does not match.
fn try_fill(template: &str, values: &[(&str, &dyn Display)]) -> Result<String, Unfilled> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut used = vec![false; values.len()];
    let mut rest = template;
    while let Some(at) = rest.find("@@") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after
            .find("@@")
            .ok_or_else(|| Unfilled(format!("an unclosed @@ at {:?}", after.chars().take(20).collect::<String>())))?;
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Unfilled(format!("@@{name}@@ is not a placeholder name")));
        }
        let i = values
            .iter()
            .position(|(n, _)| *n == name)
            .ok_or_else(|| Unfilled(format!("no value for @@{name}@@")))?;
        used[i] = true;
        out.push_str(&values[i].1.to_string());
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    match values.iter().zip(&used).find(|(_, u)| !**u) {
        Some(((name, _), _)) => Err(Unfilled(format!("{name} is given, and the template has no @@{name}@@"))),
        None => Ok(out),
    }
}

/// Placeholder names of a template, in order of first use.
pub fn placeholders(template: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let mut rest = template;
    while let Some(at) = rest.find("@@") {
        let after = &rest[at + 2..];
        let Some(end) = after.find("@@") else { break };
        if !out.contains(&&after[..end]) {
            out.push(&after[..end]);
        }
        rest = &after[end + 2..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_once_and_must_match_both_ways() {
        let t = "A=@@a@@ ${B} {c} @@a@@\n";
        assert_eq!(fill(t, &[("a", &"x@@a@@")]), "A=x@@a@@ ${B} {c} x@@a@@\n");
        assert_eq!(try_fill(t, &[]).unwrap_err().0, "no value for @@a@@");
        assert_eq!(
            try_fill(t, &[("a", &1), ("b", &2)]).unwrap_err().0,
            "b is given, and the template has no @@b@@"
        );
        assert!(try_fill("x @@a", &[]).unwrap_err().0.contains("unclosed"));
        assert!(try_fill("@@a b@@", &[]).unwrap_err().0.contains("not a placeholder name"));
        assert_eq!(placeholders(t), ["a"]);
    }

    /// Every template is a bash script (or the record function) with nothing left of Rust's
    /// format strings: no doubled braces.
    #[test]
    fn the_templates_are_plain_bash() {
        for (name, t) in ALL {
            assert!(!t.contains("{{") && !t.contains("}}"), "{name}: doubled braces");
            assert!(name == "record.sh" || t.starts_with("#!/bin/bash\n"), "{name}");
            assert!(!placeholders(t).is_empty() || name == "record.sh", "{name}");
        }
    }

    /// Every script the bundle carries, filled from the example lab (and a single node's from the
    /// same lab reshaped), passes shellcheck at warning level. SC1010 ("use a semicolon before
    /// done") is left out: `record done` passes the word as an argument, which bash reads so.
    #[test]
    fn every_script_the_bundle_carries_passes_shellcheck() {
        use crate::cluster::{BootstrapInPlace, Role};
        let c = crate::testing::example_cluster(None);
        let mut sno = c.clone();
        sno.bootstrap_in_place = Some(BootstrapInPlace {
            installation_disk: "/dev/disk/by-id/wwn-0x64cd98f04fde100024684cf3034da5c2".into(),
        });
        let master = c.nodes_with_role(Role::Master).next().unwrap().clone();
        let carry = [("/etc/kubernetes/manifests".to_string(), "/etc/kubernetes/manifests".to_string())];
        let scripts = [
            ("bootkube.sh", crate::assets::bootkube::script()),
            (
                "install-to-disk.sh",
                crate::assets::in_place::install_to_disk(&sno, "etcd-pod.yaml", &carry),
            ),
            ("post-reboot.sh", crate::assets::in_place::post_reboot(&sno, &master)),
            ("render.sh", crate::mco::render_script(&c)),
            ("helper-network.sh", crate::lab::host_network::script(&c)),
            ("virt-install.sh", crate::lab::libvirt::virt_install(&c)),
            (
                "coreos-installer.sh",
                crate::lab::libvirt::coreos_installer(&c, &|_| "0".repeat(64), &|_| "/dev/vda".into()),
            ),
        ];
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for (name, text) in &scripts {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            files.push(p);
        }
        let out = std::process::Command::new("shellcheck")
            .args(["-S", "warning", "-e", "SC1010", "-s", "bash"])
            .args(&files)
            .output()
            .expect("shellcheck (Debian's package; hack/setup.sh --tests installs it)");
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
