//! The agent's CRI probe against a real containerd serving the CRI (the API CRI-O serves on RHCOS):
//! Version; Status with NetworkReady false before a CNI config exists and true after; a running
//! host-network pod; a failed container with its exit code and reason; its log read back through
//! the CRI's log path.

mod common;

use common::containerd::*;
use common::*;
use hardshift_proto::cri::{
    ContainerConfig, ContainerMetadata, CreateContainerRequest, ImageSpec, LinuxPodSandboxConfig, LinuxSandboxSecurityContext,
    NamespaceMode, NamespaceOption, PodSandboxConfig, PodSandboxMetadata, RunPodSandboxRequest, StartContainerRequest,
};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const TOOLS: &str = "quay.example.com/hardshift/test-tools:1";

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
    for n in ["pause", "fail"] {
        fixture_binary(w, n);
    }
    let pause_img = image(w, PAUSE, &[("pause", &w.join("pause"))]);
    let tools_img = image(w, TOOLS, &[("pause", &w.join("pause")), ("fail", &w.join("fail"))]);

    let ctd = Containerd::start(&w.join("containerd"));
    ctd.ctr(&["images", "import", "--no-unpack=false", pause_img.to_str().unwrap()]);
    ctd.ctr(&["images", "import", tools_img.to_str().unwrap()]);

    let cfg = w.join("agent.toml");
    let mut c = probe_config("worker-0");
    c.units = vec![];
    c.cri_socket = ctd.sock.clone();
    c.kubelet_cert = w.join("absent.pem");
    write_agent_config(&cfg, &c);

    // No CNI config yet: the runtime is ready, the network is not (an RHCOS node before OVN).
    let s = agent_status(&agent, &cfg);
    let c = cri(&s);
    assert!(c["details"]["runtime"].as_str().unwrap().starts_with("containerd "), "{c}");
    assert_eq!(c["details"]["apiVersion"], "v1", "{c}");
    assert_eq!(c["details"]["RuntimeReady"], "true", "{c}");
    assert!(c["details"]["NetworkReady"].as_str().unwrap().starts_with("false"), "{c}");
    assert_eq!(c["health"], "warning", "{c}");
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
    assert_eq!(c["health"], "warning", "{c}");
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
