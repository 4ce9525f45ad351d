//! A real containerd serving the CRI (the API CRI-O serves on RHCOS), with its own root, state and
//! socket, and images built here from static C programs (no registry, no internet).

use super::Kill;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The sandbox image containerd runs for every pod; built from tests/fixtures/cri/pause.c.
pub const PAUSE: &str = "registry.k8s.io/pause:3.6";

pub fn sh(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Compile tests/fixtures/cri/NAME.c into a static binary in `work`.
pub fn fixture_binary(work: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/cri/{name}.c"));
    let out = work.join(name);
    sh(Command::new("gcc").args(["-static", "-O2", "-o"]).arg(&out).arg(src));
    out
}

fn blob(oci: &Path, bytes: &[u8]) -> (String, usize) {
    let digest = format!("sha256:{:x}", Sha256::digest(bytes));
    let dir = oci.join("blobs/sha256");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(&digest[7..]), bytes).unwrap();
    (digest, bytes.len())
}

/// An OCI image archive holding static binaries at the root, named `name` for containerd.
pub fn image(work: &Path, name: &str, bins: &[(&str, &Path)]) -> PathBuf {
    let tag = name.replace(['/', ':', '.'], "-");
    let root = work.join(format!("{tag}-rootfs"));
    std::fs::create_dir_all(&root).unwrap();
    for (n, p) in bins {
        std::fs::copy(p, root.join(n)).unwrap();
    }
    let layer = work.join(format!("{tag}-layer.tar"));
    sh(Command::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "-C"])
        .arg(&root)
        .arg("-cf")
        .arg(&layer)
        .arg("."));
    let oci = work.join(format!("{tag}-oci"));
    let (ld, ls) = blob(&oci, &std::fs::read(&layer).unwrap());
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": [format!("/{}", bins[0].0)]},
        "rootfs": {"type": "layers", "diff_ids": [ld]},
    });
    let (cd, cs) = blob(&oci, config.to_string().as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": ls}],
    });
    let (md, ms) = blob(&oci, manifest.to_string().as_bytes());
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms,
            "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name}}],
    });
    std::fs::write(oci.join("index.json"), index.to_string()).unwrap();
    std::fs::write(oci.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let archive = work.join(format!("{tag}.tar"));
    sh(Command::new("tar").arg("-C").arg(&oci).arg("-cf").arg(&archive).arg("."));
    archive
}

/// containerd with its own root, state and socket; on drop its sandboxes are stopped, it and its
/// shims are killed, and its mounts are undone, so nothing outlives the test.
pub struct Containerd {
    pub dir: PathBuf,
    pub sock: PathBuf,
    proc: Option<Kill>,
}

impl Containerd {
    pub fn start(dir: &Path) -> Containerd {
        Self::start_in(dir, None)
    }

    /// Start it inside network namespace `netns` (host-network pods then share that namespace,
    /// as they share the node's on a real host). `nsenter`, not `ip netns exec`: runc needs the
    /// machine's /sys with its cgroup mounts.
    pub fn start_in(dir: &Path, netns: Option<&str>) -> Containerd {
        let sock = dir.join("containerd.sock");
        let config = format!(
            r#"version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{d}/ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d}/cni"
"#,
            d = dir.display(),
            sock = sock.display()
        );
        std::fs::create_dir_all(dir.join("cni")).unwrap();
        std::fs::write(dir.join("config.toml"), config).unwrap();
        let log = std::fs::File::create(dir.join("containerd.log")).unwrap();
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net=/run/netns/{ns}")).args(["--", "containerd"]);
                c
            }
            None => Command::new("containerd"),
        };
        let proc = Kill(
            cmd.arg("--config")
                .arg(dir.join("config.toml"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("containerd (hack/setup.sh installs it)"),
        );
        let start = Instant::now();
        while !sock.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "containerd did not start: {}",
                std::fs::read_to_string(dir.join("containerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Containerd {
            dir: dir.to_path_buf(),
            sock,
            proc: Some(proc),
        }
    }

    pub fn ctr(&self, args: &[&str]) {
        sh(Command::new("ctr")
            .arg("--address")
            .arg(&self.sock)
            .args(["-n", "k8s.io"])
            .args(args));
    }

    /// Build the pause image from its fixture and import it: every pod sandbox needs it.
    pub fn import_pause(&self, work: &Path) {
        let pause = fixture_binary(work, "pause");
        let img = image(work, PAUSE, &[("pause", &pause)]);
        self.ctr(&["images", "import", "--no-unpack=false", img.to_str().unwrap()]);
    }

    /// A CNI config for the bridge plugin (containernetworking-plugins): the runtime's network
    /// turns ready, as it does on a node once the network operator writes its own.
    pub fn add_cni(&self, subnet: &str) {
        let conf = serde_json::json!({
            "cniVersion": "0.4.0", "name": "hardshift-test",
            "plugins": [
                {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]],
                          "dataDir": self.dir.join("cni-ipam").to_string_lossy()}},
                {"type": "loopback"}
            ]
        });
        std::fs::write(self.dir.join("cni/10-hardshift-test.conflist"), conf.to_string()).unwrap();
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if let Ok(rt) = tokio::runtime::Runtime::new() {
            rt.block_on(async {
                use hardshift_proto::cri::{ListPodSandboxRequest, RemovePodSandboxRequest, StopPodSandboxRequest};
                if let Ok(mut c) = hardshift_proto::cri_client(&self.sock, Duration::from_secs(2)).await {
                    let pods = c.list_pod_sandbox(ListPodSandboxRequest { filter: None }).await;
                    for p in pods.map(|r| r.into_inner().items).unwrap_or_default() {
                        let _ = c
                            .stop_pod_sandbox(StopPodSandboxRequest {
                                pod_sandbox_id: p.id.clone(),
                            })
                            .await;
                        let _ = c.remove_pod_sandbox(RemovePodSandboxRequest { pod_sandbox_id: p.id }).await;
                    }
                }
            });
        }
        self.proc = None;
        // Shims carry our socket path on their command line.
        let _ = Command::new("pkill").arg("-9").arg("-f").arg(self.dir.to_str().unwrap()).status();
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let mut ours: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(1))
            .filter(|m| m.starts_with(self.dir.to_str().unwrap()))
            .collect();
        ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in ours {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}
