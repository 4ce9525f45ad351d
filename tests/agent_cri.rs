//! The agent's CRI probe against a real containerd serving the CRI (the API CRI-O serves on RHCOS):
//! Version; Status with NetworkReady false before a CNI config exists and true after; a running
//! host-network pod; a failed container with its exit code and reason; its log read back through
//! the CRI's log path.

mod common;

use common::*;
use hardshift_proto::cri::{
    ContainerConfig, ContainerMetadata, CreateContainerRequest, ImageSpec, LinuxPodSandboxConfig, LinuxSandboxSecurityContext,
    NamespaceMode, NamespaceOption, PodSandboxConfig, PodSandboxMetadata, RemovePodSandboxRequest, RunPodSandboxRequest,
    StartContainerRequest, StopPodSandboxRequest,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PAUSE: &str = "registry.k8s.io/pause:3.6";
const TOOLS: &str = "quay.example.com/hardshift/test-tools:1";

fn sh(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn blob(oci: &Path, bytes: &[u8]) -> (String, usize) {
    let digest = format!("sha256:{:x}", Sha256::digest(bytes));
    let dir = oci.join("blobs/sha256");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(&digest[7..]), bytes).unwrap();
    (digest, bytes.len())
}

/// An OCI image archive holding static binaries at the root, named `name` for containerd.
fn image(work: &Path, name: &str, bins: &[(&str, &Path)]) -> PathBuf {
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
struct Containerd {
    dir: PathBuf,
    sock: PathBuf,
    proc: Option<Kill>,
}

impl Containerd {
    fn start(dir: &Path) -> Containerd {
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
        let proc = Kill(
            Command::new("containerd")
                .arg("--config")
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

    fn ctr(&self, args: &[&str]) {
        sh(Command::new("ctr")
            .arg("--address")
            .arg(&self.sock)
            .args(["-n", "k8s.io"])
            .args(args));
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if let Ok(rt) = tokio::runtime::Runtime::new() {
            rt.block_on(async {
                if let Ok(mut c) = hardshift_proto::cri_client(&self.sock, Duration::from_secs(2)).await {
                    let pods = c
                        .list_pod_sandbox(hardshift_proto::cri::ListPodSandboxRequest { filter: None })
                        .await;
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

fn agent_status(bin: &Path, cfg: &Path) -> Value {
    let (ok, out) = run(bin.to_str().unwrap(), &["--config", cfg.to_str().unwrap(), "status", "--json"]);
    assert!(ok, "{out}");
    serde_json::from_str(out.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("{out}"))).unwrap()
}

fn cri(v: &Value) -> Value {
    v["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "cri")
        .unwrap()
        .clone()
}

fn wait(what: &str, mut f: impl FnMut() -> Option<Value>) -> Value {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn cri_probe_against_a_real_containerd() {
    let agent = agent_bin();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cri");
    for n in ["pause", "fail"] {
        sh(Command::new("gcc")
            .args(["-static", "-O2", "-o"])
            .arg(w.join(n))
            .arg(fixtures.join(format!("{n}.c"))));
    }
    let pause_img = image(w, PAUSE, &[("pause", &w.join("pause"))]);
    let tools_img = image(w, TOOLS, &[("pause", &w.join("pause")), ("fail", &w.join("fail"))]);

    let ctd = Containerd::start(&w.join("containerd"));
    ctd.ctr(&["images", "import", "--no-unpack=false", pause_img.to_str().unwrap()]);
    ctd.ctr(&["images", "import", tools_img.to_str().unwrap()]);

    let cfg = w.join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "collector = \"127.0.0.1:1\"\nnode = \"worker-0\"\nca = \"x\"\ncert = \"x\"\nkey = \"x\"\nunits = []\ncri_socket = \"{}\"\nkubelet_cert = \"{}\"\n",
            ctd.sock.display(),
            w.join("absent.pem").display()
        ),
    )
    .unwrap();

    // No CNI config yet: the runtime is ready, the network is not (an RHCOS node before OVN).
    let s = agent_status(&agent, &cfg);
    let c = cri(&s);
    assert!(c["details"]["runtime"].as_str().unwrap().starts_with("containerd "), "{c}");
    assert_eq!(c["details"]["apiVersion"], "v1", "{c}");
    assert_eq!(c["details"]["RuntimeReady"], "true", "{c}");
    assert!(c["details"]["NetworkReady"].as_str().unwrap().starts_with("false"), "{c}");
    assert_eq!(c["health"], 2, "{c}");
    assert!(c["reason"].as_str().unwrap().contains("NetworkReady=false"), "{c}");
    let kc = s["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "kubelet-cert")
        .unwrap();
    assert_eq!(kc["state"], "bootstrapping", "{kc}");

    // A host-network pod (as every control-plane static pod is) with a running and a failing container.
    let logs = w.join("pod-logs");
    std::fs::create_dir_all(&logs).unwrap();
    let sandbox = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: "etcd-master-0".into(),
            uid: "uid-1".into(),
            namespace: "openshift-etcd".into(),
            attempt: 0,
        }),
        log_directory: logs.to_string_lossy().into(),
        linux: Some(LinuxPodSandboxConfig {
            cgroup_parent: String::new(),
            security_context: Some(LinuxSandboxSecurityContext {
                namespace_options: Some(NamespaceOption {
                    network: NamespaceMode::Node as i32,
                    pid: NamespaceMode::Container as i32,
                    ipc: NamespaceMode::Pod as i32,
                }),
                privileged: false,
            }),
        }),
        ..Default::default()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = hardshift_proto::cri_client(&ctd.sock, Duration::from_secs(5)).await.unwrap();
        let pod = c
            .run_pod_sandbox(RunPodSandboxRequest {
                config: Some(sandbox.clone()),
                runtime_handler: String::new(),
            })
            .await
            .expect("RunPodSandbox")
            .into_inner()
            .pod_sandbox_id;
        for (name, cmd) in [("etcd", "/pause"), ("etcd-ensure-env", "/fail")] {
            let id = c
                .create_container(CreateContainerRequest {
                    pod_sandbox_id: pod.clone(),
                    config: Some(ContainerConfig {
                        metadata: Some(ContainerMetadata {
                            name: name.into(),
                            attempt: 0,
                        }),
                        image: Some(ImageSpec {
                            image: TOOLS.into(),
                            ..Default::default()
                        }),
                        command: vec![cmd.into()],
                        log_path: format!("{name}/0.log"),
                        ..Default::default()
                    }),
                    sandbox_config: Some(sandbox.clone()),
                })
                .await
                .expect("CreateContainer")
                .into_inner()
                .container_id;
            c.start_container(StartContainerRequest { container_id: id })
                .await
                .expect("StartContainer");
        }
    });

    let s = wait("the failed container", || {
        let s = agent_status(&agent, &cfg);
        let done = s["containers"]
            .as_array()?
            .iter()
            .any(|c| c["name"] == "etcd-ensure-env" && c["state"] == "exited");
        done.then_some(s)
    });
    let pods = s["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 1, "{s}");
    assert_eq!(pods[0]["namespace"], "openshift-etcd");
    assert_eq!(pods[0]["ready"], true);
    let by = |n: &str| s["containers"].as_array().unwrap().iter().find(|c| c["name"] == n).unwrap().clone();
    let ok = by("etcd");
    assert_eq!(ok["state"], "running", "{ok}");
    assert_eq!(ok["pod"], "openshift-etcd/etcd-master-0", "{ok}");
    let bad = by("etcd-ensure-env");
    assert_eq!(bad["exitCode"], 3, "{bad}");
    assert_eq!(bad["reason"], "Error", "{bad}");
    let c = cri(&s);
    assert_eq!(c["health"], 2, "{c}");
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("openshift-etcd/etcd-master-0/etcd-ensure-env Error (exit 3"),
        "{c}"
    );
    assert_eq!(c["details"]["running"], "1", "{c}");

    // Its log, found through the CRI's log path, by name and by id prefix.
    let logs = |sel: &str| {
        run(
            agent.to_str().unwrap(),
            &["--config", cfg.to_str().unwrap(), "logs", "--container", sel, "-n", "5"],
        )
    };
    let (ok, out) = logs("openshift-etcd/etcd-master-0/etcd-ensure-env");
    assert!(ok, "{out}");
    assert!(out.contains("stdout F starting"), "{out}");
    assert!(
        out.contains("stderr F fatal: cannot reach https://api-int.ocp4.example.com:6443"),
        "{out}"
    );
    let (ok, out) = logs(&bad["id"].as_str().unwrap()[..12]);
    assert!(ok && out.contains("fatal: cannot reach"), "{out}");
    let (ok, out) = logs("openshift-etcd/etcd-master-0/nope");
    assert!(!ok && out.contains("no container"), "{out}");

    // A CNI config appears (the network operator's job on a real node): NetworkReady turns true
    // without restarting the runtime.
    std::fs::write(
        ctd.dir.join("cni/10-test.conflist"),
        r#"{"cniVersion":"0.4.0","name":"test","plugins":[{"type":"loopback"}]}"#,
    )
    .unwrap();
    let s = wait("NetworkReady=true", || {
        let s = agent_status(&agent, &cfg);
        (cri(&s)["details"]["NetworkReady"] == "true").then_some(s)
    });
    assert!(cri(&s)["reason"].as_str().unwrap().contains("etcd-ensure-env"), "{s}");
}
