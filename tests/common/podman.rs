//! Real podman for the tests, as root on this kind of machine: no systemd (cgroupfs, file
//! events), vfs storage in a scratch directory, rlimits below the sandbox's own (runc may not
//! raise them); and stand-in images built from busybox and scripts.

use std::path::Path;
use std::process::Command;

/// podman's configuration in `work`, as environment variables.
pub fn env(work: &Path) -> Vec<(String, String)> {
    let conf = work.join("containers.conf");
    std::fs::write(
        &conf,
        "[containers]\ndefault_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
    )
    .unwrap();
    let storage = work.join("storage.conf");
    std::fs::write(
        &storage,
        format!(
            "[storage]\ndriver = \"vfs\"\nrunroot = \"{0}/run\"\ngraphroot = \"{0}/graph\"\n",
            work.display()
        ),
    )
    .unwrap();
    vec![
        ("CONTAINERS_CONF".into(), conf.to_string_lossy().into()),
        ("CONTAINERS_STORAGE_CONF".into(), storage.to_string_lossy().into()),
    ]
}

/// `podman ARGS` with `env`: (success, stdout and stderr).
pub fn run(env: &[(String, String)], args: &[&str]) -> (bool, String) {
    let out = Command::new("podman")
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("podman (hack/setup.sh installs it)");
    (
        out.status.success(),
        format!("{}{}", super::text(&out.stdout), super::text(&out.stderr)),
    )
}

/// Build `image`: busybox with `applets`, the scripts of `programs` in /usr/bin, and `extra`
/// files (source, path in the image), built in `work` with `env`.
pub fn standin_image(env: &[(String, String)], work: &Path, image: &str, programs: &Path, applets: &[&str], extra: &[(&Path, &str)]) {
    let root = work.join("rootfs");
    for sub in ["bin", "usr/bin"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).expect("busybox-static (hack/setup.sh installs it)");
    for applet in applets {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    for e in std::fs::read_dir(programs).unwrap().flatten() {
        std::fs::copy(e.path(), root.join("usr/bin").join(e.file_name())).unwrap();
    }
    for (src, dest) in extra {
        std::fs::copy(src, root.join(dest)).unwrap();
    }
    let (ok, out) = super::run(
        "tar",
        &["-C", root.to_str().unwrap(), "-cf", work.join("layer.tar").to_str().unwrap(), "."],
    );
    assert!(ok, "{out}");
    std::fs::write(
        work.join("Containerfile"),
        "FROM scratch\nADD layer.tar /\nENV PATH=/bin:/usr/bin\nENTRYPOINT [\"/usr/bin/machine-config-operator\"]\n",
    )
    .unwrap();
    let (ok, out) = run(env, &["build", "-q", "-t", image, work.to_str().unwrap()]);
    assert!(ok, "podman build: {out}");
}
