//! The release straight from a real registry: Debian's docker-registry with TLS (a test CA given
//! as additionalTrustBundle) and htpasswd auth, holding a synthetic release built with umoci
//! (about 900 manifests over several layers, one whiteout, an image-references ImageStream of
//! 200 tags) and its component images, pushed with skopeo. Through install-config's mirrors.

mod common;

use common::*;
use sha2::Digest;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const USER: &str = "mirror";
const PASS: &str = "s3cret-pass";
const SOURCE_RELEASE: &str = "quay.io/openshift-release-dev/ocp-release";
const SOURCE_ART: &str = "quay.io/openshift-release-dev/ocp-v4.0-art-dev";

fn sh(cmd: &str) -> String {
    let out = Command::new("bash").args(["-c", cmd]).output().unwrap();
    assert!(out.status.success(), "{cmd}:\n{}{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

struct Registry {
    _proc: Kill,
    port: u16,
    storage: PathBuf,
    certs: PathBuf,
}

/// A CA, a server certificate for 127.0.0.1 signed by it, an htpasswd file, and the registry.
/// A CA and a server certificate for 127.0.0.1 signed by it, and an htpasswd file, in W/certs.
fn make_certs(w: &Path) -> PathBuf {
    let certs = w.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let c = certs.display();
    sh(&format!(
        "cd {c} && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -subj /CN=test-mirror-ca -days 2 2>/dev/null \
         && openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null \
         && printf 'subjectAltName=IP:127.0.0.1\\n' > ext && openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile ext 2>/dev/null \
         && htpasswd -Bbn {USER} {PASS} > htpasswd"
    ));
    certs
}

/// skopeo (and `lab`) read a directory holding only the CA certificate.
fn ca_dir(w: &Path, certs: &Path) -> PathBuf {
    let d = w.join("skopeo-certs");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(certs.join("ca.crt"), d.join("ca.crt")).unwrap();
    d
}

fn registry(w: &Path) -> Registry {
    let certs = make_certs(w);
    let c = certs.display();
    let port = free_port();
    let storage = w.join("storage");
    let cfg = w.join("registry.yml");
    std::fs::write(
        &cfg,
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {c}/server.crt\n    key: {c}/server.key\nauth:\n  htpasswd:\n    realm: test\n    path: {c}/htpasswd\n",
            storage.display()
        ),
    )
    .unwrap();
    let p = Kill(
        Command::new("docker-registry")
            .args(["serve", cfg.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(w.join("registry.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the registry", 90, || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    Registry {
        _proc: p,
        port,
        storage,
        certs: ca_dir(w, &certs),
    }
}

/// A registry that serves whatever the test lays out under W/lies/<repo>/{manifests,blobs}/
/// (tests/fixtures/lying-registry.py): no checks, no authentication.
fn lying_registry(w: &Path) -> Registry {
    lying_registry_with(w, None)
}

/// `lying_registry` with a plain-HTTP token server on `token_port`.
fn lying_registry_with(w: &Path, token_port: Option<u16>) -> Registry {
    let certs = make_certs(w);
    let port = free_port();
    let root = w.join("lies");
    std::fs::create_dir_all(&root).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lying-registry.py");
    let p = Kill(
        Command::new("python3")
            .arg(script)
            .args([
                &port.to_string(),
                certs.join("server.crt").to_str().unwrap(),
                certs.join("server.key").to_str().unwrap(),
            ])
            .arg(&root)
            .args(token_port.map(|p| p.to_string()))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(w.join("lying-registry.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the lying registry", 90, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Registry {
        _proc: p,
        port,
        storage: root,
        certs: ca_dir(w, &certs),
    }
}

/// Lay out a release manifest listing `layers` (digest, bytes served for it) at the mirror's
/// path; the release's pinned reference.
fn lie(reg: &Registry, layers: &[(&str, &[u8])]) -> String {
    lie_sized(reg, &layers.iter().map(|(d, b)| (*d, *b, b.len())).collect::<Vec<_>>())
}

/// `lie` with the size each layer's descriptor declares.
fn lie_sized(reg: &Registry, layers: &[(&str, &[u8], usize)]) -> String {
    let repo = reg.storage.join("ocp4/openshift4");
    std::fs::create_dir_all(repo.join("manifests")).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    let ls: Vec<serde_json::Value> = layers
        .iter()
        .map(|(d, _, size)| serde_json::json!({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": size}))
        .collect();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": format!("sha256:{}", "0".repeat(64)), "size": 2},
        "layers": ls}))
    .unwrap();
    let digest = format!("sha256:{:x}", sha2::Sha256::digest(&manifest));
    std::fs::write(repo.join("manifests").join(&digest), &manifest).unwrap();
    for (d, b, _) in layers {
        std::fs::write(repo.join("blobs").join(d.replace('/', "%2F")), b).unwrap();
    }
    format!("{SOURCE_RELEASE}@{digest}")
}

/// A registry cannot make `release pull` write or read outside DIR: every digest a manifest
/// names is parsed strictly (`sha256:` and 64 hex digits) before any path is formed from it.
#[test]
fn a_lying_registry_cannot_make_release_pull_touch_paths_outside_the_cache() {
    let w = tempfile::tempdir().unwrap();
    let reg = lying_registry(w.path());
    let d = example_copy();
    let dir = d.path();
    let ds = dir.to_str().unwrap();
    lab(&reg, dir, PASS, true);
    let outside = w.path().join("escaped");
    // A traversal: relative to DIR/release/cache/blobs it lands in W/escaped.
    let depth = dir.join("release/cache/blobs").components().count();
    let traversal = format!("sha256:{}{}", "../".repeat(depth + 2), outside.display());
    // Every case is tried, and every way it went wrong reported together.
    let mut wrong = Vec::new();
    for (digest, served, must_not_show) in [
        ("sha256:/etc/passwd", b"x".as_slice(), Some("root:x:0:0")),
        (traversal.as_str(), b"registry bytes".as_slice(), None),
        ("sha256:ABCDEF", b"x".as_slice(), None),
        ("sha512:00", b"x".as_slice(), None),
    ] {
        let image = lie(&reg, &[(digest, served)]);
        let (code, out) = run_hs(&["release", "pull", "--dir", ds, "--release-image", &image]);
        let log = std::fs::read_to_string(w.path().join("lying-registry.log")).unwrap_or_default();
        if code != 1 || !out.contains("digest") || !out.contains("layer 0") {
            wrong.push(format!("{digest}: exit {code}, not a refusal of the layer's digest: {out}"));
        }
        if must_not_show.is_some_and(|secret| out.contains(secret)) {
            wrong.push(format!("{digest}: a local file was read as a layer: {out}"));
        }
        if dir.join("release/crds").exists() {
            wrong.push(format!("{digest}: something was extracted"));
        }
        // The digest never became a request path, nor a file outside DIR.
        if log
            .lines()
            .any(|l| l.contains("/blobs/") || l.contains("\"GET //") || l.contains(".."))
        {
            wrong.push(format!("{digest}: the registry was asked for a blob path made from it:\n{log}"));
        }
        let escaped: Vec<_> = std::fs::read_dir(w.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("escaped"))
            .collect();
        if !escaped.is_empty() {
            wrong.push(format!("{digest}: a file was written outside DIR: {escaped:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// Push an OCI layout image to the registry; its manifest digest.
fn push(reg: &Registry, layout: &str, to: &str) -> String {
    let digest_file = format!("{layout}.digest");
    sh(&format!(
        "skopeo copy -q --dest-creds {USER}:{PASS} --dest-cert-dir {} --digestfile {digest_file} oci:{layout} docker://127.0.0.1:{}/{to}",
        reg.certs.display(),
        reg.port
    ));
    std::fs::read_to_string(digest_file).unwrap().trim().to_string()
}

/// `n` small component images; their digests.
fn components(reg: &Registry, w: &Path, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let d = w.join(format!("comp{i}"));
            std::fs::create_dir_all(d.join("rootfs")).unwrap();
            std::fs::write(d.join("rootfs/component"), format!("component {i}\n")).unwrap();
            let l = d.join("oci");
            sh(&format!(
                "umoci init --layout {l} && umoci new --image {l}:c && umoci insert --image {l}:c {} /component",
                d.join("rootfs/component").display(),
                l = l.display()
            ));
            push(reg, &format!("{}:c", l.display()), &format!("ocp4/openshift4:component-{i}"))
        })
        .collect()
}

/// The release image: ~900 manifests in three layers, the bootstrap CRDs, image-references
/// (200 tags over the component digests; `missing` adds one tag whose image was never pushed),
/// and a whited-out stale file. Its manifest digest.
fn release_image(reg: &Registry, w: &Path, digests: &[String], missing: Option<&str>) -> String {
    let d = w.join("release-build");
    let _ = std::fs::remove_dir_all(&d);
    let m = d.join("release-manifests");
    std::fs::create_dir_all(&m).unwrap();
    let mut tags = vec![];
    let required = ["cluster-version-operator", "etcd", "hyperkube", "pod", "kube-proxy"];
    for i in 0..200 {
        let name = required.get(i).map(|s| s.to_string()).unwrap_or_else(|| format!("component-{i}"));
        let digest = &digests[i % digests.len()];
        tags.push(serde_json::json!({"name": name, "from": {"kind": "DockerImage", "name": format!("{SOURCE_ART}@{digest}")}}));
    }
    if let Some(m) = missing {
        tags.push(serde_json::json!({"name": "never-mirrored", "from": {"kind": "DockerImage", "name": format!("{SOURCE_ART}@{m}")}}));
    }
    let is = serde_json::json!({"kind": "ImageStream", "apiVersion": "image.openshift.io/v1",
        "metadata": {"name": "4.18.0", "annotations": {"release.openshift.io/from-image-stream": "ocp/4.18-art"}},
        "spec": {"tags": tags}});
    // Layer 1: a first image-references (replaced later), a stale file (whited out later), half the manifests.
    std::fs::write(m.join("image-references"), "{\"kind\": \"ImageStream\", \"spec\": {\"tags\": []}}").unwrap();
    std::fs::write(m.join("0000_99_stale.yaml"), "kind: ConfigMap\n").unwrap();
    for i in 0..450 {
        std::fs::write(
            m.join(format!("0000_50_operator-{i:03}_deployment.yaml")),
            format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: operator-{i}\n  namespace: openshift-operator-{i}\nspec:\n  replicas: 1\n{}", "  # padding\n".repeat(40)),
        )
        .unwrap();
    }
    let l = d.join("oci");
    let layout = l.display().to_string();
    sh(&format!(
        "umoci init --layout {layout} && umoci new --image {layout}:r && umoci insert --image {layout}:r {} /release-manifests",
        m.display()
    ));
    // Layer 2: the rest of the manifests, the CRDs and the real image-references.
    let _ = std::fs::remove_dir_all(&m);
    std::fs::create_dir_all(&m).unwrap();
    for i in 450..900 {
        std::fs::write(
            m.join(format!("0000_60_operator-{i:03}_service.yaml")),
            format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: s{i}\n"),
        )
        .unwrap();
    }
    for f in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ocp4/crds"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(f.path(), m.join(f.file_name())).unwrap();
    }
    std::fs::write(m.join("image-references"), serde_json::to_string_pretty(&is).unwrap()).unwrap();
    sh(&format!("umoci insert --image {layout}:r {} /release-manifests", m.display()));
    // Layer 3: the whiteout.
    sh(&format!(
        "umoci insert --image {layout}:r --whiteout /release-manifests/0000_99_stale.yaml"
    ));
    sh(&format!(
        "umoci config --image {layout}:r --config.label io.openshift.release=4.18.0"
    ));
    push(reg, &format!("{layout}:r"), "ocp4/openshift4:4.18.0-x86_64")
}

/// The example lab pointed at this registry: its mirrors, its credentials, its CA.
fn lab(reg: &Registry, dir: &Path, password: &str, trust: bool) {
    let ic = dir.join("install-config.yaml");
    let text = std::fs::read_to_string(&ic).unwrap();
    let mirror = format!("127.0.0.1:{}/ocp4/openshift4", reg.port);
    let text = text.replace("registry.ocp4.example.com:5000/ocp4/openshift4", &mirror);
    let auth = base64_encode(&format!("{USER}:{password}"));
    let start = text.find("pullSecret:").unwrap();
    let end = start + text[start..].find('\n').unwrap();
    let mut text = format!(
        "{}pullSecret: '{{\"auths\":{{\"127.0.0.1:{}\":{{\"auth\":\"{auth}\"}}}}}}'{}",
        &text[..start],
        reg.port,
        &text[end..]
    );
    // A bundle appended by an earlier call goes first (it is always the last key).
    if let Some(s) = text.find("additionalTrustBundle: |") {
        text.truncate(s);
    }
    if trust {
        let ca = std::fs::read_to_string(reg.certs.join("ca.crt")).unwrap();
        let indented: String = ca.lines().map(|l| format!("  {l}\n")).collect();
        text.push_str(&format!("additionalTrustBundle: |\n{indented}"));
    }
    std::fs::write(&ic, text).unwrap();
    // The release comes from the registry: no references file, no CRDs of the user's.
    let _ = std::fs::remove_file(dir.join("release/image-references"));
    let _ = std::fs::remove_dir_all(dir.join("crds"));
}

fn base64_encode(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn run_hs(args: &[&str]) -> (i32, String) {
    let out = hardshift(args);
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

#[test]
fn the_release_comes_from_the_mirror_and_stays_in_the_cache() {
    let w = tempfile::tempdir().unwrap();
    let reg = registry(w.path());
    let digests = components(&reg, w.path(), 10);
    let never = "sha256:00000000000000000000000000000000000000000000000000000000000000aa";
    let rel = release_image(&reg, w.path(), &digests, Some(never));
    let image = format!("{SOURCE_RELEASE}@{rel}");
    let d = example_copy();
    let dir = d.path();
    let ds = dir.to_str().unwrap();

    // Wrong credentials: the registry's own refusal, and nothing cached.
    lab(&reg, dir, "wrong-password", true);
    let (code, out) = run_hs(&["release", "pull", "--dir", ds, "--release-image", &image]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("credentials refused (HTTP 401)") && out.contains("UNAUTHORIZED"),
        "{out}"
    );
    assert!(
        !out.contains("wrong-password") && !out.contains(&base64_encode(&format!("{USER}:wrong-password"))),
        "{out}"
    );
    // An unknown CA: said as a TLS problem, with the fix.
    lab(&reg, dir, PASS, false);
    let (code, out) = run_hs(&["release", "pull", "--dir", ds, "--release-image", &image]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("TLS") && out.contains("additionalTrustBundle"), "{out}");

    // The good pull: through the mirror, every layer checked, the whiteout honoured.
    lab(&reg, dir, PASS, true);
    let t = std::time::Instant::now();
    let (code, out) = run_hs(&["release", "pull", "--dir", ds, "--release-image", &image]);
    eprintln!("timing: release pull (900 manifests, 3 layers): {:.2} s", t.elapsed().as_secs_f64());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("from 127.0.0.1:{}/ocp4/openshift4@{rel}", reg.port)), "{out}");
    // Not a terminal: the progress is plain lines, a layer each, and no escape sequences.
    assert!(out.contains(": 3 layers") && out.contains("layer 3/3 sha256:"), "{out}");
    assert!(out.contains("bytes, fetched") && !out.contains('\x1b'), "{out}");
    let root = dir
        .join("release/cache")
        .join(rel.trim_start_matches("sha256:"))
        .join("release-manifests");
    let n = std::fs::read_dir(&root).unwrap().count();
    assert!(n > 900, "{n} files");
    assert!(!root.join("0000_99_stale.yaml").exists(), "the whiteout removes the stale manifest");
    let refs = std::fs::read_to_string(dir.join("release/image-references")).unwrap();
    assert!(
        refs.contains("\"4.18.0\"") && refs.contains("never-mirrored"),
        "the later layer's references"
    );
    let crds = std::fs::read_dir(dir.join("release/crds")).unwrap().count();
    let example = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ocp4/crds"))
        .unwrap()
        .count();
    assert_eq!(
        crds, example,
        "the release's config.openshift.io CRDs, and none of its 900 other manifests"
    );

    // release show: each tag through the mirror.
    let (code, out) = run_hs(&["release", "show", "--dir", ds, "--release-image", &image]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("version: 4.18.0") && out.contains("etcd  "), "{out}");
    assert!(
        out.contains(&format!("127.0.0.1:{}/ocp4/openshift4@{}", reg.port, digests[1])),
        "{out}"
    );

    // The same as JSON, for scripts: every tag with where it is pulled from.
    let (code, out) = run_hs(&["release", "show", "--dir", ds, "--release-image", &image, "-o", "json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["version"], "4.18.0", "{v}");
    let etcd = v["images"].as_array().unwrap().iter().find(|i| i["tag"] == "etcd").expect("etcd");
    assert!(
        etcd["pull_from"].as_str().unwrap().starts_with(&format!("127.0.0.1:{}/", reg.port)),
        "{etcd}"
    );

    // mirror-check names the one image never mirrored, with the registry's words, and exits 1.
    let t = std::time::Instant::now();
    let (code, out) = run_hs(&["mirror-check", "--dir", ds, "--release-image", &image]);
    eprintln!("timing: mirror-check: {:.2} s", t.elapsed().as_secs_f64());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("NOT PULLABLE never-mirrored"), "{out}");
    assert!(out.contains("missing:") && out.contains("MANIFEST_UNKNOWN"), "{out}");
    assert!(out.contains("11 of 12 images pullable"), "{out}");
    assert!(
        out.contains("images checked") && out.contains("  pullable ") && !out.contains('\x1b'),
        "{out}"
    );
    // On a terminal (a real pty, through util-linux's script): a bar, drawn and cleared with
    // escape sequences; the answer is the same.
    let cmd = format!(
        "{} mirror-check --dir {ds} --release-image {image}",
        env!("CARGO_BIN_EXE_hardshift")
    );
    let tty = Command::new("script")
        .args(["-qefc", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .output()
        .unwrap();
    let tty = text(&tty.stdout);
    assert!(tty.contains("\x1b[") && tty.contains("11 of 12 images pullable"), "{tty:?}");
    let (code, out) = run_hs(&["mirror-check", "--dir", ds, "--release-image", &image, "-o", "json"]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!((v["pullable"].as_u64(), v["total"].as_u64()), (Some(11), Some(12)), "{v}");
    let bad: Vec<&serde_json::Value> = v["images"].as_array().unwrap().iter().filter(|i| i["pullable"] == false).collect();
    assert_eq!(bad.len(), 1, "{v}");
    assert_eq!(bad[0]["tag"], "never-mirrored", "{v}");
    assert!(bad[0]["errors"][0]["error"].as_str().unwrap().contains("MANIFEST_UNKNOWN"), "{v}");

    // create uses what was pulled (references and CRDs); offline by default, it checks the
    // mirror only when asked.
    let args = [
        "create",
        "--dir",
        ds,
        "--release-image",
        &image,
        "--key-algorithm",
        "ecdsa-p256",
        "--no-agent",
        "--self-contained-nodes",
    ];
    let (code, out) = run_hs(&args);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("mirror-check: not run") && !out.contains("NOT PULLABLE"), "{out}");
    let (code, out) = run_hs(&[&args[..], &["--mirror-check"]].concat());
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("NOT PULLABLE never-mirrored") && out.contains("WARNING: the mirror lacks"),
        "{out}"
    );

    // The registry gone: the cache serves, and says so.
    drop(reg);
    std::thread::sleep(Duration::from_millis(200));
    let (code, out) = run_hs(&["release", "pull", "--dir", ds, "--release-image", &image]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("from cache"), "{out}");
}

#[test]
fn a_layer_whose_bytes_do_not_match_its_digest_is_refused() {
    let w = tempfile::tempdir().unwrap();
    let reg = registry(w.path());
    let digests = components(&reg, w.path(), 10);
    let rel = release_image(&reg, w.path(), &digests, None);
    let image = format!("{SOURCE_RELEASE}@{rel}");
    // Change one layer's bytes in the registry's storage: it still serves them under the old digest.
    let manifest: serde_json::Value = serde_json::from_str(&sh(&format!(
        "skopeo inspect --raw --creds {USER}:{PASS} --cert-dir {} docker://127.0.0.1:{}/ocp4/openshift4@{rel}",
        reg.certs.display(),
        reg.port
    )))
    .unwrap();
    let layer = manifest["layers"][1]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    let data = reg
        .storage
        .join(format!("docker/registry/v2/blobs/sha256/{}/{layer}/data", &layer[..2]));
    let mut bytes = std::fs::read(&data).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&data, bytes).unwrap();
    let d = example_copy();
    let dir = d.path();
    lab(&reg, dir, PASS, true);
    let (code, out) = run_hs(&["release", "pull", "--dir", dir.to_str().unwrap(), "--release-image", &image]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("refused") && out.contains(&layer), "{out}");
    assert!(!dir.join("release/image-references").exists());
    let blobs = dir.join("release/cache/blobs");
    assert!(!blobs.join(&layer).exists(), "the bad layer is not kept");
    // References from elsewhere but no CRDs at all: create refuses and says how to get them
    // (before, it wrote a bootkube.sh that waited forever at "crds-established").
    let refs = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ocp4/release/image-references");
    let (code, out) = run_hs(&[
        "create",
        "--dir",
        dir.to_str().unwrap(),
        "--release-refs",
        refs.to_str().unwrap(),
        "--no-agent",
        "--self-contained-nodes",
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no CRDs") && out.contains("hardshift release pull"), "{out}");
    assert!(!dir.join("ignition").exists(), "nothing written");
}

/// For hack/bench-release.sh: the registry (left running, its pid in KEEP/../pid), 200 distinct
/// component images, the release, and the example lab pointed at them, in $HARDSHIFT_BENCH_KEEP.
#[test]
#[ignore = "fixture for hack/bench-release.sh (HARDSHIFT_BENCH_KEEP), not a test"]
fn bench_fixture() {
    let Some(keep) = std::env::var_os("HARDSHIFT_BENCH_KEEP") else {
        return;
    };
    let w = PathBuf::from(keep);
    std::fs::create_dir_all(&w).unwrap();
    let reg = registry(&w);
    let digests = components(&reg, &w, 200);
    let rel = release_image(&reg, &w, &digests, None);
    let d = example_copy();
    let dir = w.join("bundle");
    sh(&format!("cp -a {}/. {}", d.path().display(), dir.display()));
    lab(&reg, &dir, PASS, true);
    std::fs::write(w.join("image"), format!("{SOURCE_RELEASE}@{rel}")).unwrap();
    std::fs::write(w.parent().unwrap().join("pid"), reg._proc.0.id().to_string()).unwrap();
    // Left running for the benchmark, which stops it.
    std::mem::forget(reg);
}

/// The node's view of the registry: the agent HEADs its first images through the mirror with
/// the node's pull secret; a refused password is HS044 at the collector with the registry's
/// words, and goes when the pull secret is fixed.
#[test]
fn a_node_that_cannot_pull_is_named_with_the_registrys_words() {
    let w = tempfile::tempdir().unwrap();
    let reg = registry(w.path());
    let digest = components(&reg, w.path(), 1).remove(0);
    let d = example_copy();
    let dir = d.path();
    let out = create(dir, &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let port = free_port();
    let _c = collector_with(dir, port, &["--no-api-watch"]);
    let secret = w.path().join("config.json");
    let write_secret = |pass: &str| {
        let auth = base64_encode(&format!("{USER}:{pass}"));
        std::fs::write(
            &secret,
            format!("{{\"auths\":{{\"127.0.0.1:{}\":{{\"auth\":\"{auth}\"}}}}}}", reg.port),
        )
        .unwrap();
    };
    write_secret("not-the-password");
    let pki = dir.join("agent-pki");
    let cfg = w.path().join("agent.toml");
    let mut c = agent_config(port, "master-0", &pki, "master-0");
    c.role = "master".into();
    c.interval_ms = 300;
    c.units = vec![];
    c.cri_socket = "".into();
    c.kubelet_cert = "".into();
    c.state_dir = w.path().join("state");
    let mut registry = hardshift_agent_config::RegistryConfig::new(secret.clone(), vec![format!("{SOURCE_ART}@{digest}")]);
    registry.trust = Some(reg.certs.join("ca.crt"));
    registry.every_s = 1;
    registry.mirror = vec![hardshift_agent_config::RegistryMirror {
        source: SOURCE_ART.into(),
        mirrors: vec![format!("127.0.0.1:{}/ocp4/openshift4", reg.port)],
    }];
    c.registry = Some(registry);
    write_agent_config(&cfg, &c);
    let _agent = Kill(
        Command::new(agent_bin())
            .args(["--config", cfg.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(w.path().join("agent.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let findings = || -> Vec<serde_json::Value> {
        let out = hardshift(&["diagnose", "master-0", "--dir", dir.to_str().unwrap(), "-o", "json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    let has = |f: &[serde_json::Value], id: &str| f.iter().any(|x| x["id"] == id);
    wait_for("HS044", 120, || has(&findings(), "HS044"));
    let f = findings();
    let hs = f.iter().find(|x| x["id"] == "HS044").unwrap().to_string();
    assert!(hs.contains("credentials refused (HTTP 401)") && hs.contains("UNAUTHORIZED"), "{hs}");
    assert!(!hs.contains("not-the-password"), "{hs}");
    write_secret(PASS);
    wait_for("HS044 to clear", 120, || {
        let f = findings();
        !f.is_empty() && !has(&f, "HS044")
    });
}

/// A registry whose Bearer challenge names a token server over plain HTTP never gets the pull
/// secret's credentials: they would cross the network in the clear.
#[test]
fn a_token_realm_over_plain_http_gets_no_credentials() {
    let w = tempfile::tempdir().unwrap();
    let token_port = free_port();
    let reg = lying_registry_with(w.path(), Some(token_port));
    let challenge = format!("Bearer realm=\"http://127.0.0.1:{token_port}/token\",service=\"lying\"");
    std::fs::write(reg.storage.join("challenge"), challenge).unwrap();
    wait_for("the token server", 90, || {
        std::net::TcpStream::connect(("127.0.0.1", token_port)).is_ok()
    });
    let d = example_copy();
    let dir = d.path();
    lab(&reg, dir, PASS, true);
    let image = lie(&reg, &[(&format!("sha256:{}", "a".repeat(64)), b"x".as_slice())]);
    let (code, out) = run_hs(&["release", "pull", "--dir", dir.to_str().unwrap(), "--release-image", &image]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("plain HTTP") && out.contains("in the clear"), "{out}");
    let log = std::fs::read_to_string(w.path().join("lying-registry.log")).unwrap_or_default();
    assert!(!log.contains("token-server:"), "the plain-HTTP token server was asked: {log}");
    assert!(
        !out.contains(PASS) && !out.contains(&base64_encode(&format!("{USER}:{PASS}"))),
        "{out}"
    );
}

/// A blob is bounded by the size its manifest declares, and a transfer by a deadline that names
/// what was slow: a registry that sends more than declared, or a byte a second, is refused.
#[test]
fn a_blob_over_its_declared_size_or_too_slow_is_refused() {
    let w = tempfile::tempdir().unwrap();
    let reg = lying_registry(w.path());
    let d = example_copy();
    let dir = d.path();
    let ds = dir.to_str().unwrap();
    lab(&reg, dir, PASS, true);
    // 3 MB whose digest is the declared one, but 10 bytes declared.
    let body = vec![7u8; 3 << 20];
    let digest = format!("sha256:{:x}", sha2::Sha256::digest(&body));
    let image = lie_sized(&reg, &[(&digest, &body, 10)]);
    let (code, out) = run_hs(&["release", "pull", "--dir", ds, "--release-image", &image]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("more than the 10 bytes the manifest declares"), "{out}");
    let cached: u64 = std::fs::read_dir(dir.join("release/cache/blobs"))
        .map(|r| r.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0);
    assert!(cached < 1 << 20, "{cached} bytes kept");
    // The release cache is this user's only, even under umask 000.
    let _ = std::fs::remove_dir_all(dir.join("release/cache"));
    let (ok, out) = run(
        "sh",
        &[
            "-c",
            &format!(
                "umask 000; exec '{}' release pull --dir '{ds}' --release-image '{image}'",
                env!("CARGO_BIN_EXE_hardshift")
            ),
        ],
    );
    assert!(!ok, "{out}");
    for p in ["release/cache", "release/cache/blobs"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{p}");
    }
    // A byte a second: the deadline (2 s here, HARDSHIFT_BLOB_DEADLINE) names the registry.
    std::fs::write(reg.storage.join("slow"), "").unwrap();
    let small = b"a slow layer".to_vec();
    let digest = format!("sha256:{:x}", sha2::Sha256::digest(&small));
    let image = lie_sized(&reg, &[(&digest, &small, small.len())]);
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_hardshift"))
        .args(["release", "pull", "--dir", ds, "--release-image", &image])
        .env("HARDSHIFT_BLOB_DEADLINE", "2")
        .output()
        .unwrap();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("sends too slowly") && all.contains(&format!("127.0.0.1:{}", reg.port)),
        "{all}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(small.len() as u64),
        "refused before the end"
    );
    // A manifest drip-fed a byte a second had no deadline at all (and a timeout was blamed on TLS).
    std::fs::write(reg.storage.join("slow-manifests"), "").unwrap();
    let other = b"another layer".to_vec();
    let digest = format!("sha256:{:x}", sha2::Sha256::digest(&other));
    let image = lie_sized(&reg, &[(&digest, &other, other.len())]);
    let out = Command::new(env!("CARGO_BIN_EXE_hardshift"))
        .args(["release", "pull", "--dir", ds, "--release-image", &image])
        .env("HARDSHIFT_BLOB_DEADLINE", "2")
        .output()
        .unwrap();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("the manifest was not whole") && all.contains("sends too slowly") && !all.contains("TLS"),
        "{all}"
    );
}

/// A layer refused for writing more entries than a release has (an inode bomb) leaves nothing in
/// the cache: before, the 20,000 files it wrote stayed in `release/cache/*.tmp-N`.
#[test]
fn a_refused_layer_leaves_no_temporary_tree_in_the_cache() {
    let w = tempfile::tempdir().unwrap();
    let reg = lying_registry(w.path());
    let d = example_copy();
    let dir = d.path();
    lab(&reg, dir, PASS, true);
    // 20,001 empty files under release-manifests/ (Python's tarfile, gzip).
    let bomb = w.path().join("bomb.tar.gz");
    let script = format!(
        "import io,tarfile\nt=tarfile.open('{}','w:gz')\nfor i in range(20001):\n    ti=tarfile.TarInfo('release-manifests/f%d'%i)\n    t.addfile(ti,io.BytesIO(b''))\nt.close()\n",
        bomb.display()
    );
    let (ok, out) = run("python3", &["-c", &script]);
    assert!(ok, "{out}");
    let bytes = std::fs::read(&bomb).unwrap();
    let digest = format!("sha256:{:x}", sha2::Sha256::digest(&bytes));
    let image = lie(&reg, &[(&digest, &bytes)]);
    let (code, out) = run_hs(&["release", "pull", "--dir", dir.to_str().unwrap(), "--release-image", &image]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("inode bomb"), "{out}");
    let left: Vec<String> = std::fs::read_dir(dir.join("release/cache"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "left in the cache: {left:?}");
}
