//! The release's own renders over a copy of the example (whose release names what they need), and
//! `hardshift render` run with the programs built by hand (`HARDSHIFT_OCP_BIN`) in place of the
//! images (tests/fixtures/podman-ocp-bin).

use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// The example's release without what the renders need beyond the tags every bundle needs: the
/// cluster-policy-controller image and the Kubernetes version on the hyperkube tag.
pub fn strip_render_inputs(dir: &Path) {
    let p = dir.join("release/image-references");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    let tags = v["spec"]["tags"].as_array_mut().unwrap();
    tags.retain(|t| t["name"] != "cluster-policy-controller");
    for t in tags.iter_mut().filter(|t| t["name"] == "hyperkube") {
        t["annotations"].as_object_mut().unwrap().remove("io.openshift.build.versions");
    }
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// `hardshift render --dir DIR` with the release's programs from `bin` (`HARDSHIFT_OCP_BIN`).
pub fn render_with_release_programs(dir: &Path, bin: &str) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_hardshift"))
        .args(["render", "--dir", dir.to_str().unwrap()])
        .env("PODMAN", root.join("tests/fixtures/podman-ocp-bin"))
        .env("HARDSHIFT_OCP_BIN", bin)
        .env("HARDSHIFT_OCP_MANIFESTS", root.join("../shared/openshift-4.18/crds"))
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap()
}

/// `hardshift mco --dir DIR`, then its render.sh with the release's machine-config-operator and
/// -controller from `bin` (`HARDSHIFT_OCP_BIN`) in place of the images; panics with the log if
/// either fails.
pub fn mco_render_with_release_programs(dir: &Path, bin: &str) {
    let out = super::hardshift(&["mco", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", super::text(&out.stderr));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(dir.join("mco/render.sh"))
        .env("PODMAN", root.join("tests/fixtures/podman-ocp-bin"))
        .env("HARDSHIFT_OCP_BIN", bin)
        .env("HARDSHIFT_OCP_MANIFESTS", root.join("../shared/openshift-4.18/crds"))
        .output()
        .unwrap();
    let log = format!("{}{}", super::text(&out.stdout), super::text(&out.stderr));
    assert!(out.status.success(), "render.sh with the release's programs failed:\n{log}");
}
