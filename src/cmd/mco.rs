//! `hardshift mco`: write DIR/mco/, the machine-config-operator's inputs and render.sh.

use crate::Failure;
use hardshift_generator::pki::{self, keys::SystemKeys, Outcome};
use hardshift_generator::{fsio, mco};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::ClusterArgs,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let cluster = a.cluster.load()?;
    let dir = &a.cluster.dir;
    // The MCO's bootstrap stops at the first tag it lacks: name them all before it runs.
    let missing = hardshift_generator::release::missing_for_mco(&cluster.release);
    if !missing.is_empty() {
        return Err(Failure::input(format!(
            "{} problem{} in the release's image references:\n  {}\n    hint: use the release's own image-references (`hardshift release pull`, or `oc adm release extract --file=image-references`)",
            missing.len(),
            if missing.len() == 1 { "" } else { "s" },
            missing.join("\n  ")
        )));
    }
    let _lock = fsio::lock(dir, "mco").map_err(Failure::other)?;
    // The CAs the rendered nodes will trust must be the bundle's: use the live PKI, never new keys.
    let specs = pki::plan(&cluster);
    let existing = fsio::read_existing(dir, &specs);
    let issued = pki::issue(
        &specs,
        &existing,
        time::OffsetDateTime::now_utc(),
        &SystemKeys,
        pki::Options::default(),
    )
    .map_err(Failure::input)?;
    let stale: Vec<String> = issued
        .entries
        .iter()
        .filter(|e| e.spec.is_ca() && e.outcome != Outcome::Reused)
        .map(|e| e.spec.id())
        .collect();
    if !stale.is_empty() {
        return Err(Failure::input(format!(
            "{}: the bundle has no {} yet; the MCO must be given the bundle's own CAs\n    hint: run `hardshift create --dir {} --self-contained-nodes` first, then `hardshift mco`",
            dir.display(),
            stale.join(", "),
            dir.display()
        )));
    }
    let files = mco::inputs(&cluster, &issued);
    write_dir(dir, &files).map_err(Failure::other)?;
    println!(
        "wrote {} files to {}: the machine-config-operator's inputs for {} (release {})",
        files.len(),
        dir.join(mco::DIR).display(),
        cluster.domain(),
        cluster.release.version.as_deref().unwrap_or("unknown")
    );
    println!(
        "next: {}/mco/render.sh (podman and the release's machine-config-operator image), then `hardshift create --dir {}` merges every master and worker into the rendered configs",
        dir.display(),
        dir.display()
    );
    Ok(0)
}

/// Replace DIR/mco/ as a whole (a new directory renamed into place), keeping what render.sh
/// already rendered there.
fn write_dir(dir: &Path, files: &[mco::McoFile]) -> std::io::Result<()> {
    let target = dir.join(mco::DIR);
    let tmp = dir.join(format!(".{}.new-{}", mco::DIR, std::process::id()));
    let old = dir.join(format!(".{}.old-{}", mco::DIR, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for (path, mode, bytes) in files {
        let rel = path.strip_prefix(&format!("{}/", mco::DIR)).unwrap_or(path);
        let p = tmp.join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent"))?;
        // Secrets are 0600 from their creation, not after a chmod.
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(*mode).open(&p)?;
        std::io::Write::write_all(&mut f, bytes)?;
        f.sync_all()?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode))?;
    }
    if target.join("rendered").is_dir() {
        std::fs::rename(target.join("rendered"), tmp.join("rendered"))?;
    }
    if target.exists() {
        std::fs::rename(&target, &old)?;
    }
    std::fs::rename(&tmp, &target)?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}
