//! The MCO render built in: `create` refuses an OVNKubernetes cluster without the MCO's OS
//! configuration (naming `hardshift mco`), `hardshift mco` writes the machine-config-operator's
//! inputs from the bundle's own CAs and the cluster's config, and `create` merges every master and
//! worker into DIR/mco/rendered/ once render.sh has left it there.

mod common;

use common::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const MCO_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mco");

fn yaml(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    hardshift_generator::config::yaml::parse(&text).unwrap().value
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// `hardshift verify --against-mcs` on the server at 127.0.0.1:`port` (verified as api-int, the
/// name its certificate holds), with `extra` flags: the exit code and the `mcs` checks.
fn verify_against_mcs(dir: &str, cluster: &str, port: u16, extra: &[&str]) -> (Option<i32>, Vec<Value>) {
    let url = format!("https://api-int.{cluster}:{port}");
    let mut args = vec![
        "verify",
        "--dir",
        dir,
        "--against-mcs",
        &url,
        "--mcs-address",
        "127.0.0.1",
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = hardshift(&args);
    let checks: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    (out.status.code(), checks.into_iter().filter(|c| c["name"] == "mcs").collect())
}

#[test]
fn ovn_without_an_mco_base_is_refused_and_names_hardshift_mco() {
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    let out = hardshift(&["create", "--dir", dir]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no MCO-rendered base for the master and worker nodes"), "{err}");
    assert!(
        err.contains("hardshift mco --dir") && err.contains("--self-contained-nodes"),
        "{err}"
    );
    assert!(
        !d.path().join("pki").exists() && !d.path().join("ignition").exists(),
        "nothing is written"
    );

    // `hardshift mco` before any bundle: it needs the bundle's CAs, and says how to get them.
    let out = hardshift(&["mco", "--dir", dir]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("pki/root-ca") && err.contains("--self-contained-nodes` first"),
        "{err}"
    );
    assert!(!d.path().join("mco").exists());

    // Another network type needs no MCO base from hardshift's point of view.
    edit(
        d.path(),
        "install-config.yaml",
        "networkType: OVNKubernetes",
        "networkType: OpenShiftSDN",
    );
    let out = hardshift(&["create", "--dir", dir, "--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn mco_inputs_carry_the_cluster_and_create_merges_into_the_rendered_configs() {
    let d = example_copy();
    // A proxy and a trust bundle too, beside the example's mirrors.
    let ic = d.path().join("install-config.yaml");
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let trust = std::fs::read_to_string(d.path().join("agent-pki/agent-ca.crt")).unwrap();
    let indented: String = trust.lines().map(|l| format!("  {l}\n")).collect();
    let s = std::fs::read_to_string(&ic).unwrap();
    std::fs::write(
        &ic,
        format!("{s}proxy:\n  httpsProxy: http://proxy.example.com:3128\n  noProxy: .example.com\nadditionalTrustBundle: |\n{indented}"),
    )
    .unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let dir = d.path().to_str().unwrap();
    let out = hardshift(&["mco", "--dir", dir]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("mco/render.sh"), "{}", text(&out.stdout));
    let m = d.path().join("mco");

    // The config CRs the operator reads are the cluster's own.
    let cc = yaml(&m.join("manifests/cluster-config.yaml"));
    assert_eq!(cc["metadata"]["name"], "cluster-config-v1");
    let ic_text = cc["data"]["install-config"].as_str().unwrap();
    assert!(ic_text.contains("10.128.0.0/14") && ic_text.contains("OVNKubernetes"), "{ic_text}");
    assert!(!ic_text.contains("aGFyZHNoaWZ0OmV4YW1wbGU="), "no pull secret in cluster-config");
    let net = yaml(&m.join("manifests/cluster-network-02-config.yml"));
    assert_eq!(net["spec"]["clusterNetwork"][0]["cidr"], "10.128.0.0/14");
    assert_eq!(net["spec"]["clusterNetwork"][0]["hostPrefix"], 23);
    assert_eq!(net["spec"]["serviceNetwork"][0], "172.30.0.0/16");
    assert_eq!(net["spec"]["networkType"], "OVNKubernetes");
    assert_eq!(
        yaml(&m.join("manifests/cluster-dns-02-config.yml"))["spec"]["baseDomain"],
        "ocp4.example.com"
    );
    let infra = yaml(&m.join("manifests/cluster-infrastructure-02-config.yml"));
    assert_eq!(infra["status"]["apiServerInternalURI"], "https://api-int.ocp4.example.com:6443");
    assert_eq!(infra["status"]["platformStatus"]["type"], "None");
    let proxy = yaml(&m.join("manifests/cluster-proxy-01-config.yaml"));
    assert_eq!(proxy["spec"]["httpsProxy"], "http://proxy.example.com:3128");
    assert_eq!(proxy["spec"]["trustedCA"]["name"], "user-ca-bundle");
    let bundle = yaml(&m.join("manifests/user-ca-bundle-config.yaml"));
    assert_eq!(bundle["data"]["ca-bundle.crt"].as_str().unwrap().trim(), trust.trim());
    let idms = yaml(&m.join("manifests/image-digest-mirror-set.yaml"));
    assert_eq!(
        idms["spec"]["imageDigestMirrors"][0]["mirrors"][0],
        "registry.ocp4.example.com:5000/ocp4/openshift4"
    );
    assert!(std::fs::read_to_string(m.join("registries.conf"))
        .unwrap()
        .contains("mirror-by-digest-only = true"));
    assert_eq!(yaml(&m.join("manifests/featuregate.yaml"))["kind"], "FeatureGate");

    // The bundle's own CAs; the pull secret only in 0600 files.
    assert_eq!(
        std::fs::read(m.join("tls/root-ca.crt")).unwrap(),
        std::fs::read(d.path().join("pki/root-ca.crt")).unwrap()
    );
    let kube_ca = std::fs::read_to_string(m.join("tls/kube-apiserver-serving-ca-bundle.crt")).unwrap();
    assert!(kube_ca.contains(std::fs::read_to_string(d.path().join("pki/kubernetes-ca.crt")).unwrap().trim()));
    assert!(kube_ca.contains(
        std::fs::read_to_string(d.path().join("pki/kube-apiserver-lb-signer.crt"))
            .unwrap()
            .trim()
    ));
    for f in ["pull-secret.json", "manifests/openshift-config-secret-pull-secret.yaml"] {
        assert_eq!(mode(&m.join(f)), 0o600, "{f}");
    }
    let refs: Value = serde_json::from_str(&std::fs::read_to_string(m.join("image-references")).unwrap()).unwrap();
    assert_eq!(refs["kind"], "ImageStream");
    let tags = refs["spec"]["tags"].as_array().unwrap();
    let mco_image = tags.iter().find(|t| t["name"] == "machine-config-operator").unwrap()["from"]["name"]
        .as_str()
        .unwrap();

    // render.sh parses, runs the release's machine-config-operator with the inputs' paths.
    let script = m.join("render.sh");
    assert_eq!(mode(&script), 0o755);
    let (ok, out) = run("bash", &["-n", script.to_str().unwrap()]);
    assert!(ok, "{out}");
    let text_sh = std::fs::read_to_string(&script).unwrap();
    assert!(text_sh.contains(&format!("MCO_IMAGE=${{MCO_IMAGE:-'{mco_image}'}}")), "{text_sh}");
    for flag in [
        "--config-file=/assets/manifests/cluster-config.yaml",
        "--network-config-file=/assets/manifests/cluster-network-02-config.yml",
        "--proxy-config-file=/assets/manifests/cluster-proxy-01-config.yaml",
        "--dns-config-file=/assets/manifests/cluster-dns-02-config.yml",
        "--infra-config-file=/assets/manifests/cluster-infrastructure-02-config.yml",
        "--image-references=/assets/image-references",
        "--kube-ca=/assets/tls/kube-apiserver-complete-client-ca-bundle.crt",
        "--manifest-dir=/assets/mcc-input",
    ] {
        assert!(text_sh.contains(flag), "render.sh lacks {flag}");
        let file = flag.split("=/assets/").nth(1).unwrap();
        if !file.starts_with("mcc-input") {
            assert!(m.join(file).exists(), "{flag} names a file hardshift did not write");
        }
    }
    let (ok, out) = run("env", &["PODMAN=/nonexistent/podman", "bash", script.to_str().unwrap()]);
    assert!(!ok && out.contains("not found"), "{out}");

    // What render.sh leaves in rendered/ is where `create` looks, with no flag at all.
    std::fs::create_dir_all(m.join("rendered")).unwrap();
    std::fs::copy(format!("{MCO_FIXTURES}/worker-machineconfig.json"), m.join("rendered/master.yaml")).unwrap();
    std::fs::copy(format!("{MCO_FIXTURES}/worker-machineconfig.json"), m.join("rendered/worker.yaml")).unwrap();
    let out = hardshift(&["create", "--dir", dir, "--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for n in ["master-0", "master-1", "master-2"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(&format!("ignition/{n}.ign")) && l.contains("merged into the MCO master base")),
            "{stdout}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("ignition/worker-0.ign") && l.contains("merged into the MCO worker base")),
        "{stdout}"
    );
    // A second `hardshift mco` keeps what was rendered.
    let out = hardshift(&["mco", "--dir", dir]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(m.join("rendered/master.yaml").exists());
}

#[test]
fn render_sh_runs_both_renders_with_real_podman_and_create_merges_the_result() {
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let out = hardshift(&["mco", "--dir", dir]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // A stand-in for the release's machine-config-operator image: busybox and two scripts that
    // check what render.sh hands them and write what the real ones write.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let env = common::podman::env(w);
    let image = "localhost/hardshift-mco-standin:test";
    let standin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mco-standin");
    let fixture = format!("{MCO_FIXTURES}/worker-machineconfig.json");
    common::podman::standin_image(
        &env,
        w,
        image,
        &standin,
        &["sh", "sed", "mkdir", "echo", "cat"],
        &[(Path::new(&fixture), "fixture.json")],
    );
    let podman = |args: &[&str]| common::podman::run(&env, args);

    // render.sh exactly as generated, with real podman; only the image is the stand-in.
    let script = d.path().join("mco/render.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .env("MCO_IMAGE", image)
        .env("CONFIG_API_IMAGE", image)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let log = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let _ = podman(&["rmi", "-f", image]);
    assert!(out.status.success(), "render.sh failed:\n{log}");
    assert!(log.contains("stand-in cluster-config-api render: version 4.18.0"), "{log}");
    assert!(
        log.contains("stand-in machine-config-operator: rendered bootstrap manifests"),
        "{log}"
    );
    assert!(
        log.contains("stand-in machine-config-controller: rendered master and worker"),
        "{log}"
    );
    for pool in ["master", "worker"] {
        let mc = yaml(&d.path().join(format!("mco/rendered/{pool}.yaml")));
        assert_eq!(mc["metadata"]["name"], format!("rendered-{pool}-standin"));
        // What the bootstrap's machine-config server serves from is kept.
        let served = d.path().join("mco/rendered/mcs-bootstrap");
        assert!(served.join(format!("machine-pools/{pool}.yaml")).is_file());
        assert!(served.join(format!("machine-configs/rendered-{pool}-standin.yaml")).is_file());
    }
    assert!(d
        .path()
        .join("mco/rendered/mcs-bootstrap/controller-config/machine-config-controller.yaml")
        .is_file());
    let leftovers: Vec<_> = std::fs::read_dir(d.path().join("mco"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".render"))
        .collect();
    assert!(leftovers.is_empty(), "render.sh leaves no work directory");

    // The next create, with no flag, merges every master and worker into what was rendered.
    let out = hardshift(&["create", "--dir", dir, "--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("merged into the MCO master base") && stdout.contains("merged into the MCO worker base"),
        "{stdout}"
    );
}

/// The MCO's bootstrap stops at the first image tag it lacks (`findImageOrDie`): `hardshift mco`
/// names every missing one and what needs it, before anything is written; `create` warns.
#[test]
fn a_release_without_the_mcos_images_is_named_before_the_render() {
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    for tag in ["oauth-proxy", "rhel-coreos"] {
        edit(
            d.path(),
            "release/image-references",
            &format!("\"name\": \"{tag}\""),
            &format!("\"name\": \"{tag}-gone\""),
        );
    }
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let err = text(&out.stderr);
    assert!(err.contains("warning: the release has no \"oauth-proxy\" image"), "{err}");
    let out = hardshift(&["mco", "--dir", dir]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("2 problems") && err.contains("\"oauth-proxy\"") && err.contains("osImageURL"),
        "{err}"
    );
    assert!(!d.path().join("mco").exists(), "nothing written");
}

/// Point 9 of "the bundle survives the pivot" (machine-config-operator `pkg/server/server.go`,
/// `pkg/daemon/on_disk_validation.go`): a node merged into a rendered MachineConfig carries what
/// the machine-config server adds to it, and the files the MCO rendered stay byte for byte (the
/// daemon compares them; a difference degrades the node).
#[test]
fn a_rendered_base_gets_what_the_machine_config_server_serves_and_keeps_its_files() {
    let d = example_copy();
    let mc_path = format!("{MCO_FIXTURES}/worker-machineconfig.json");
    let mc: Value = serde_json::from_str(&std::fs::read_to_string(&mc_path).unwrap()).unwrap();
    let base: std::collections::BTreeMap<String, Vec<u8>> = mc["spec"]["config"]["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let c: hardshift_generator::ignition::Contents = serde_json::from_value(f["contents"].clone()).unwrap();
            (
                f["path"].as_str().unwrap().to_string(),
                hardshift_generator::ignition::decode(&c).unwrap(),
            )
        })
        .collect();
    create(
        d.path(),
        &[
            "--key-algorithm",
            "ecdsa-p256",
            "--no-agent",
            "--mco-base",
            &format!("worker={mc_path},master={mc_path}"),
        ],
    );
    for node in ["worker-0", "master-1"] {
        let got = node_files(d.path(), node);
        // The MCO's own files, byte for byte: the three hardshift also writes among them.
        for p in [
            "/etc/containers/registries.conf",
            "/etc/kubernetes/apiserver-url.env",
            "/var/lib/kubelet/config.json",
        ] {
            assert_eq!(got[p], base[p], "{node}: {p} differs from the rendered config");
        }
        for (p, bytes) in &base {
            if p != "/etc/kubernetes/kubelet-ca.crt" {
                assert_eq!(&got[p], bytes, "{node}: {p} differs from the rendered config");
            }
        }
        // What the server adds.
        let ann: Value = serde_json::from_slice(&got["/etc/machine-config-daemon/node-annotations.json"]).unwrap();
        assert_eq!(ann["machineconfiguration.openshift.io/currentConfig"], "rendered-worker-fixture");
        assert_eq!(ann["machineconfiguration.openshift.io/desiredConfig"], "rendered-worker-fixture");
        assert_eq!(ann["machineconfiguration.openshift.io/state"], "Done");
        let enc: Value = serde_json::from_slice(&got["/etc/ignition-machine-config-encapsulated.json"]).unwrap();
        assert_eq!(enc["spec"]["config"], serde_json::json!({"ignition": {"version": "3.4.0"}}));
        assert_eq!(enc["spec"]["osImageURL"], mc["spec"]["osImageURL"]);
        let content: Value = serde_json::from_slice(&got["/etc/mcs-machine-config-content.json"]).unwrap();
        assert_eq!(content, mc);
        // The kubelet's client CA is what the MCO's bootstrap was given (render.sh's --kube-ca).
        let ca = String::from_utf8(got["/etc/kubernetes/kubelet-ca.crt"].clone()).unwrap();
        for signer in ["kubernetes-ca", "kube-apiserver-to-kubelet-signer"] {
            let pem = std::fs::read_to_string(d.path().join(format!("pki/{signer}.crt"))).unwrap();
            assert!(ca.contains(pem.trim()), "{node}: kubelet-ca.crt lacks {signer}");
        }
        // Per-node files the daemon does not own are there too.
        assert_eq!(got["/etc/hostname"], format!("{node}\n").into_bytes());
    }
    // A bare Ignition base (no MachineConfig) gets no server files: there is no name to give.
    let bare = d.path().join("bare.ign");
    std::fs::write(&bare, serde_json::to_vec(&mc["spec"]["config"]).unwrap()).unwrap();
    create(
        d.path(),
        &[
            "--key-algorithm",
            "ecdsa-p256",
            "--no-agent",
            "--mco-base",
            &format!("worker={},master={}", bare.display(), bare.display()),
        ],
    );
    assert!(!node_files(d.path(), "worker-0").contains_key("/etc/machine-config-daemon/node-annotations.json"));
}

/// With OpenShift 4.18's own machine-config-operator, -controller and cluster-config-api render
/// (built by hand into `HARDSHIFT_OCP_BIN`, run by tests/fixtures/podman-ocp-bin in place of the
/// release's images), render.sh runs unchanged to rendered configs, and `create` merges every
/// master and worker into them with what the machine-config server adds.
#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN: OpenShift 4.18's machine-config-operator, machine-config-controller (with its templates as mcc-templates/) and the cluster-config-api render, built by hand"]
fn the_releases_own_mco_renders_the_bundle_and_create_merges_it() {
    let bin = std::env::var("HARDSHIFT_OCP_BIN").expect("HARDSHIFT_OCP_BIN (see hack/tiers)");
    release_mco_judges(&example_copy(), &bin, "ocp4.example.com", "master-0", "worker-1");
}

/// The same judges on a lab with other names and addresses (`common::second_lab`).
#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN: OpenShift 4.18's machine-config-operator, machine-config-controller (with its templates as mcc-templates/) and the cluster-config-api render, built by hand"]
fn the_releases_own_mco_judges_a_lab_with_other_names_and_addresses() {
    let bin = std::env::var("HARDSHIFT_OCP_BIN").expect("HARDSHIFT_OCP_BIN (see hack/tiers)");
    let (name, domain, _) = SECOND_LAB;
    release_mco_judges(&second_lab(), &bin, &format!("{name}.{domain}"), "cp-0", "compute-1");
}

/// The MCO's render with the release's programs over bundle `d` (cluster `cluster`), `create`'s
/// merge checked on `master` and `worker`, then the release's machine-config server serving what
/// every master and worker holds.
fn release_mco_judges(d: &tempfile::TempDir, bin: &str, cluster: &str, master: &str, worker: &str) {
    let dir = d.path().to_str().unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    common::renders::mco_render_with_release_programs(d.path(), bin);
    let refs: Value = serde_json::from_str(&std::fs::read_to_string(d.path().join("release/image-references")).unwrap()).unwrap();
    let os = refs["spec"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "rhel-coreos")
        .unwrap()["from"]["name"]
        .clone();
    let mut names = Vec::new();
    for pool in ["master", "worker"] {
        let mc = yaml(&d.path().join(format!("mco/rendered/{pool}.yaml")));
        let name = mc["metadata"]["name"].as_str().unwrap().to_string();
        assert!(name.starts_with(&format!("rendered-{pool}-")), "{name}");
        assert_eq!(mc["spec"]["osImageURL"], os, "{pool}: the OS image the nodes pivot to");
        assert_eq!(mc["spec"]["config"]["ignition"]["version"], "3.4.0");
        names.push(name);
    }
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("merged into the MCO master base") && stdout.contains("merged into the MCO worker base"),
        "{stdout}"
    );
    for (node, name) in [(master, &names[0]), (worker, &names[1])] {
        let got = node_files(d.path(), node);
        let ann: Value = serde_json::from_slice(&got["/etc/machine-config-daemon/node-annotations.json"]).unwrap();
        assert_eq!(&ann["machineconfiguration.openshift.io/currentConfig"], name.as_str());
        let enc: Value = serde_json::from_slice(&got["/etc/ignition-machine-config-encapsulated.json"]).unwrap();
        assert_eq!(enc["spec"]["osImageURL"], os);
        assert!(got.contains_key("/etc/kubernetes/kubelet-ca.crt") && got.contains_key("/usr/local/bin/configure-ovs.sh"));
    }
    // The 99-<role>-ssh MachineConfigs went into the render: the rendered configs carry the key
    // (the machine-config daemon keeps core's keys from them).
    let ic = yaml(&d.path().join("install-config.yaml"));
    let key = ic["sshKey"].as_str().unwrap().trim();
    for pool in ["master", "worker"] {
        let mc = yaml(&d.path().join(format!("mco/rendered/{pool}.yaml")));
        let users = mc["spec"]["config"]["passwd"]["users"].as_array().cloned().unwrap_or_default();
        let core = users
            .iter()
            .find(|u| u["name"] == "core")
            .unwrap_or_else(|| panic!("{pool}: no core user: {users:?}"));
        assert!(
            core["sshAuthorizedKeys"].as_array().unwrap().iter().any(|k| k == key),
            "{pool}: {core}"
        );
    }

    // The release's machine-config server in bootstrap mode, as the bootstrap runs it (the
    // controller's pools and configs, the kubelet's bootstrap kubeconfig, the bundle's MCS
    // certificate), serves each pool: every master and worker holds what it serves.
    let (port, plain) = (free_port(), free_port());
    let mut server = std::process::Command::new(format!("{bin}/machine-config-server"));
    server
        .arg("bootstrap")
        .arg(format!(
            "--server-basedir={}",
            d.path().join("mco/rendered/mcs-bootstrap").display()
        ))
        .arg(format!(
            "--bootstrap-kubeconfig={}",
            d.path().join("kubeconfigs/kubelet-bootstrap.kubeconfig").display()
        ))
        .arg(format!("--cert={}", pki(d.path(), "machine-config-server.crt").display()))
        .arg(format!("--key={}", pki(d.path(), "machine-config-server.key").display()))
        .arg(format!("--secure-port={port}"))
        .arg(format!("--insecure-port={plain}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(d.path().join("mcs.log")).unwrap());
    let _server = Kill(server.spawn().unwrap());
    wait_for("machine-config-server to listen", 60, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let (_, mcs) = verify_against_mcs(dir, cluster, port, &[]);
    assert_eq!(mcs.len(), 5, "{mcs:?}");
    let log = std::fs::read_to_string(d.path().join("mcs.log")).unwrap_or_default();
    for c in &mcs {
        eprintln!("{}: {}", c["subject"], c["detail"]);
        if c["subject"]
            .as_str()
            .unwrap()
            .starts_with(worker.trim_end_matches(|c: char| c.is_ascii_digit()))
        {
            // The bootstrap's server refuses the worker pool: said, not failed.
            assert_eq!(c["status"], "warn", "{c}\nmachine-config-server:\n{log}");
            assert!(c["detail"].as_str().unwrap().contains("serves only the master pool"), "{c}");
        } else {
            assert_eq!(c["status"], "ok", "{c}\nmachine-config-server:\n{log}");
        }
    }
}

/// `hardshift` under umask 000 (the mode a process gets is its own to set: `sh -c 'umask 000; exec'`).
fn hardshift_umask_000(args: &[&str]) -> std::process::Output {
    std::process::Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_hardshift")])
        .args(args)
        .output()
        .unwrap()
}

/// What under `dir` (no symlink followed: a link's own mode means nothing) others could write.
fn writable_by_others(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.file_type().is_symlink() {
                continue;
            }
            if m.permissions().mode() & 0o022 != 0 {
                out.push(format!(
                    "{} {:o}",
                    p.strip_prefix(dir).unwrap().display(),
                    m.permissions().mode() & 0o7777
                ));
            }
            if m.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn under_umask_000_nothing_create_or_mco_makes_is_writable_by_others() {
    agent_bin();
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    // The user's own files are theirs: only what the tool makes is looked at.
    let mine = writable_by_others(d.path());
    for args in [
        &["create", "--dir", dir, "--key-algorithm", "ecdsa-p256", "--self-contained-nodes"][..],
        &["mco", "--dir", dir][..],
        // Again over a live bundle and DIR/mco (a new generation, DIR/mco replaced).
        &[
            "create",
            "--dir",
            dir,
            "--key-algorithm",
            "ecdsa-p256",
            "--self-contained-nodes",
            "--no-agent",
        ][..],
        &["mco", "--dir", dir][..],
    ] {
        let out = hardshift_umask_000(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let loose: Vec<String> = writable_by_others(d.path()).into_iter().filter(|l| !mine.contains(l)).collect();
        assert!(
            loose.is_empty(),
            "{args:?} under umask 000 made these group- or world-writable:\n{}",
            loose.join("\n")
        );
    }
    assert_eq!(mode(&d.path().join("mco")), 0o755);
    assert!(d.path().join("mco/render.sh").is_file());
}

/// `verify --against-mcs`: a server (real `openssl s_server`, with the bundle's MCS certificate,
/// standing in for the machine-config server) serves the pools' configs; every master and worker
/// holds what it serves byte for byte, and beyond it only its own parts. A byte changed in what
/// is served, or a file on the node that no part places, is named. (The release's own server
/// is the judge in the HARDSHIFT_OCP_BIN tier; this keeps the comparison honest.)
#[test]
fn verify_against_a_machine_config_server_names_every_difference() {
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    let bases = format!("master={MCO_FIXTURES}/master.ign,worker={MCO_FIXTURES}/worker-machineconfig.json");
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent", "--mco-base", &bases]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let served = tempfile::tempdir().unwrap();
    std::fs::create_dir(served.path().join("config")).unwrap();
    std::fs::copy(format!("{MCO_FIXTURES}/master.ign"), served.path().join("config/master")).unwrap();
    // From a rendered MachineConfig the server serves /etc/kubernetes/kubelet-ca.crt as the
    // ControllerConfig's kube CA: what `hardshift mco` gives the MCO as --kube-ca.
    let out = hardshift(&["mco", "--dir", dir]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let kube_ca = std::fs::read(d.path().join("mco/tls/kube-apiserver-complete-client-ca-bundle.crt")).unwrap();
    let worker: Value = serde_json::from_slice(&std::fs::read(format!("{MCO_FIXTURES}/worker-machineconfig.json")).unwrap()).unwrap();
    let mut config = worker["spec"]["config"].clone();
    for f in config["storage"]["files"].as_array_mut().unwrap() {
        if f["path"] == "/etc/kubernetes/kubelet-ca.crt" {
            use base64::Engine;
            f["contents"] =
                serde_json::json!({"source": format!("data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(&kube_ca))});
        }
    }
    std::fs::write(served.path().join("config/worker"), config.to_string()).unwrap();

    let port = free_port();
    let _server = Kill(
        std::process::Command::new("openssl")
            .args(["s_server", "-quiet", "-WWW", "-accept", &port.to_string(), "-cert"])
            .arg(pki(d.path(), "machine-config-server.crt"))
            .arg("-key")
            .arg(pki(d.path(), "machine-config-server.key"))
            .current_dir(served.path())
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("openssl s_server to listen", 120, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    // The certificate names api-int, not the address: verified for the name, connected by address.
    let verify = || verify_against_mcs(dir, "ocp4.example.com", port, &[]);
    let (code, mcs) = verify();
    let names: Vec<&str> = mcs.iter().map(|c| c["subject"].as_str().unwrap()).collect();
    assert_eq!(names, ["master-0", "master-1", "master-2", "worker-0", "worker-1"]);
    for c in &mcs {
        assert_eq!(c["status"], "ok", "{c}");
        let detail = c["detail"].as_str().unwrap();
        assert!(detail.contains("byte for byte") && detail.contains("/etc/hostname"), "{detail}");
    }
    assert_eq!(code, Some(0));
    // Worker nodes also hold what the MCS adds to a rendered MachineConfig: a part places it.
    let w = mcs[3]["detail"].as_str().unwrap();
    assert!(w.contains("/etc/ignition-machine-config-encapsulated.json"), "{w}");

    // A byte changed in what the master pool is served.
    let mut master: Value = serde_json::from_slice(&std::fs::read(served.path().join("config/master")).unwrap()).unwrap();
    let changed = master["storage"]["files"][0]["path"].as_str().unwrap().to_string();
    master["storage"]["files"][0]["contents"]["source"] = "data:,changed".into();
    std::fs::write(served.path().join("config/master"), master.to_string()).unwrap();
    let (code, mcs) = verify();
    assert_eq!(code, Some(1));
    for c in &mcs[..3] {
        assert_eq!(c["status"], "fail", "{c}");
        assert!(
            c["detail"].as_str().unwrap().contains(&format!("{changed}: contents differ")),
            "{c}"
        );
    }
    assert!(mcs[3..].iter().all(|c| c["status"] == "ok"), "{mcs:?}");

    // What the probe served: a user of its own with an SSH key and sudo groups, beside the
    // unchanged files (only files, units and the core user's keys were compared).
    let mut master: Value = serde_json::from_slice(&std::fs::read(format!("{MCO_FIXTURES}/master.ign")).unwrap()).unwrap();
    master["passwd"]["users"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "evil", "sshAuthorizedKeys": ["ssh-ed25519 AAAAevil"], "groups": ["wheel", "sudo"]}));
    master["kernelArguments"] = serde_json::json!({"shouldExist": ["init=/bin/sh"]});
    std::fs::write(served.path().join("config/master"), master.to_string()).unwrap();
    let (code, mcs) = verify();
    assert_eq!(code, Some(1));
    for c in &mcs[..3] {
        let detail = c["detail"].as_str().unwrap();
        assert!(
            c["status"] == "fail"
                && detail.contains("passwd/users evil: served, not on the node")
                && detail.contains("kernelArguments/shouldExist: \"init=/bin/sh\" served"),
            "{c}"
        );
    }

    // An unknown server is refused: the bundle's root CA does not sign another certificate.
    let other_ca = pki(d.path(), "etcd-ca.crt");
    let (code, mcs) = verify_against_mcs(dir, "ocp4.example.com", port, &["--mcs-ca", other_ca.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(
        mcs.iter()
            .all(|c| c["status"] == "fail" && c["detail"].as_str().unwrap().contains("certificate")),
        "{mcs:?}"
    );
}

/// A machine-config server that never finishes its answer (a byte at a time), or redirects to
/// plain http: `verify --against-mcs` gives up at its deadline, whole, and follows no redirect to
/// another scheme or port. The server is Python's own TLS with the bundle's MCS certificate.
#[test]
fn verify_against_mcs_is_bounded_and_stays_on_https() {
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let port = free_port();
    let script = r#"
import socket, ssl, sys, time, threading
cert, key, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(16)
def serve(c):
    try:
        c = ctx.wrap_socket(c, server_side=True)
        req = c.recv(65536).decode("latin-1")
        if "/config/master" in req:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n{")
            while True:
                time.sleep(0.5)
                c.sendall(b" ")
        else:
            c.sendall(("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:%d/config/worker\r\nContent-Length: 0\r\n\r\n" % port).encode())
            time.sleep(1)
    except Exception:
        pass
    finally:
        c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;
    let _server = Kill(
        std::process::Command::new("python3")
            .args(["-c", script])
            .arg(pki(d.path(), "machine-config-server.crt"))
            .arg(pki(d.path(), "machine-config-server.key"))
            .arg(port.to_string())
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("the trickling server to listen", 120, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let (code, mcs) = verify_against_mcs(dir, "ocp4.example.com", port, &["--mcs-timeout", "3s"]);
    assert_eq!(code, Some(1));
    for c in &mcs {
        let detail = c["detail"].as_str().unwrap();
        let why = if c["subject"].as_str().unwrap().starts_with("master") {
            "no whole answer within 3s"
        } else {
            "is refused"
        };
        assert!(c["status"] == "fail" && detail.contains(why), "{why}: {c}");
    }
}
