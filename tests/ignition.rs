//! The per-node Ignition configs: valid for real `ignition-validate`, holding exactly what the
//! generator meant to place, and encoding every lesson of field-notes §2 that a regression breaks.

mod common;

use common::*;
use hardshift_generator::assets::{self, parts, Extras};
use hardshift_generator::cluster::Role;
use hardshift_generator::ignition::{self, Config};
use hardshift_generator::{config, fsio, pki};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const NODES: [&str; 6] = ["bootstrap", "master-0", "master-1", "master-2", "worker-0", "worker-1"];
const MCO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mco");

fn load(dir: &Path, node: &str) -> Config {
    let bytes = std::fs::read(dir.join(format!("ignition/{node}.ign"))).unwrap();
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{node}.ign: {e}"))
}

/// path → (mode, decoded contents)
fn files(cfg: &Config) -> BTreeMap<String, (u32, Vec<u8>)> {
    cfg.storage
        .files
        .iter()
        .map(|f| {
            (
                f.path.clone(),
                (
                    f.mode.unwrap_or(0o644),
                    ignition::decode(f.contents.as_ref().unwrap()).unwrap_or_default(),
                ),
            )
        })
        .collect()
}

fn file_text(cfg: &Config, path: &str) -> String {
    let f = files(cfg);
    String::from_utf8(f.get(path).unwrap_or_else(|| panic!("no {path}")).1.clone()).unwrap()
}

fn unit(cfg: &Config, name: &str) -> String {
    cfg.systemd
        .units
        .iter()
        .find(|u| u.name == name)
        .and_then(|u| u.contents.clone())
        .unwrap_or_else(|| panic!("no unit {name}"))
}

fn yaml(text: &str) -> Value {
    config::yaml::parse(text).unwrap().value
}

fn docs(text: &str) -> Vec<Value> {
    text.split("\n---\n").map(yaml).collect()
}

/// Parse strictly: the YAML must deserialize into a Pod and serialize back to the same value.
fn pod(text: &str) -> Pod {
    let v = yaml(text);
    let p: Pod = serde_json::from_value(v.clone()).expect("a Pod");
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        v,
        "fields lost in a round trip through k8s-openapi Pod"
    );
    p
}

fn validate_all(dir: &Path) {
    for n in NODES {
        let p = dir.join(format!("ignition/{n}.ign"));
        let (ok, out) = run("ignition-validate", &[p.to_str().unwrap()]);
        assert!(ok, "{n}.ign: {out}");
        let cfg = load(dir, n);
        assert_eq!(cfg.ignition.version, "3.2.0");
        assert!(!cfg.ignition.other.contains_key("config"), "{n}: no pointer configs");
        for f in &cfg.storage.files {
            assert_eq!(
                f.user.as_ref().map(|u| u.name.as_str()),
                f.group.as_ref().map(|g| g.name.as_str()),
                "{}",
                f.path
            );
        }
    }
}

#[test]
fn every_node_config_validates_with_and_without_an_mco_base() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    validate_all(d.path());
    let bases = format!("master={MCO}/master.ign,worker={MCO}/worker-machineconfig.json");
    let out = create(d.path(), &["--mco-base", &bases]);
    assert!(
        text(&out.stdout).contains("merged into the MCO master base (36 files, 23 units; 0 replaced, 3 kept from the base"),
        "{}",
        text(&out.stdout)
    );
    validate_all(d.path());
}

/// A base's inline files are re-encoded once (gzip and base64 where that saves a tenth): every
/// node still gets each base file byte for byte, the configs stay valid, and they shrink.
#[test]
fn a_large_base_is_compacted_and_every_base_file_kept() {
    let d = example_copy();
    let large = format!("{MCO}/master-large.ign");
    create(
        d.path(),
        &[
            "--key-algorithm",
            "ecdsa-p256",
            "--no-agent",
            "--mco-base",
            &format!("master={large},worker={large}"),
        ],
    );
    validate_all(d.path());
    let text = std::fs::read_to_string(&large).unwrap();
    let base = ignition::parse_base(&text).unwrap();
    for n in ["master-0", "worker-1"] {
        let cfg = load(d.path(), n);
        let got = files(&cfg);
        let node_files = node_paths(&cfg, &base);
        for bf in base.storage.files.iter().filter(|f| !node_files.contains(&f.path)) {
            assert_eq!(
                got[&bf.path].1,
                ignition::decode(bf.contents.as_ref().unwrap()).unwrap(),
                "{n}: {}",
                bf.path
            );
        }
        let padding = cfg
            .storage
            .files
            .iter()
            .find(|f| f.path == "/etc/hardshift-fixture/padding.txt")
            .unwrap();
        assert_eq!(padding.contents.as_ref().unwrap().compression.as_deref(), Some("gzip"), "{n}");
        let size = std::fs::metadata(d.path().join(format!("ignition/{n}.ign"))).unwrap().len() as usize;
        assert!(size < text.len() / 2, "{n}: {size} bytes, the base alone is {}", text.len());
    }
}

/// The paths a node's own files took over from the base.
fn node_paths(cfg: &Config, base: &Config) -> Vec<String> {
    cfg.storage
        .files
        .iter()
        .filter(|f| {
            f.user.as_ref().is_some_and(|u| u.name == "root") && base.storage.files.iter().any(|b| b.path == f.path && b.user.is_none())
        })
        .map(|f| f.path.clone())
        .collect()
}

#[test]
fn without_mirrors_and_with_proxy_and_trust_bundle() {
    // No mirrors: no registries.conf and no ImageDigestMirrorSet.
    let d = example_copy();
    let ic = d.path().join("install-config.yaml");
    let s = std::fs::read_to_string(&ic).unwrap();
    let cut = s.find("imageDigestSources:").unwrap();
    std::fs::write(&ic, &s[..cut]).unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    validate_all(d.path());
    let boot = load(d.path(), "bootstrap");
    assert!(!files(&boot).contains_key("/etc/containers/registries.conf"));
    assert!(!files(&boot).contains_key("/opt/openshift/manifests/09-image-digest-mirror-set.yaml"));

    // Proxy and an additional trust bundle: Proxy CR, user-ca-bundle, anchors, node environment.
    let ca = std::fs::read_to_string(d.path().join("agent-pki/agent-ca.crt")).unwrap();
    let indented: String = ca.lines().map(|l| format!("  {l}\n")).collect();
    let extra = format!(
        "proxy:\n  httpProxy: http://proxy.example.com:3128\n  httpsProxy: http://proxy.example.com:3128\n  noProxy: .example.com,192.168.126.0/24\nadditionalTrustBundle: |\n{indented}"
    );
    std::fs::write(&ic, format!("{}{extra}", &s[..cut])).unwrap();
    create(d.path(), &[]);
    validate_all(d.path());
    for n in NODES {
        let cfg = load(d.path(), n);
        assert_eq!(
            file_text(&cfg, "/etc/pki/ca-trust/source/anchors/hardshift-additional-trust-bundle.crt"),
            format!("{}\n", ca.trim_end()),
            "{n}"
        );
        assert!(
            file_text(&cfg, "/etc/hardshift/proxy.env").contains("HTTPS_PROXY=http://proxy.example.com:3128"),
            "{n}"
        );
        let kubelet = cfg.systemd.units.iter().find(|u| u.name == "kubelet.service").unwrap();
        assert!(
            kubelet.dropins.iter().any(|x| x
                .contents
                .as_deref()
                .unwrap_or("")
                .contains("EnvironmentFile=/etc/hardshift/proxy.env")),
            "{n}"
        );
    }
    let boot = load(d.path(), "bootstrap");
    let proxy = docs(&file_text(&boot, "/opt/openshift/manifests/04-proxy.yaml"));
    assert_eq!(proxy[0]["metadata"]["name"], "user-ca-bundle");
    assert_eq!(proxy[1]["kind"], "Proxy");
    assert_eq!(proxy[1]["spec"]["httpsProxy"], "http://proxy.example.com:3128");
    assert_eq!(proxy[1]["spec"]["trustedCA"]["name"], "user-ca-bundle");
}

/// Rebuild what the generator means to place from the bundle on disk, and compare with the
/// decoded configs: every file, its mode, owner and bytes; base files kept unless replaced.
#[test]
fn decoded_files_are_exactly_what_the_generator_placed() {
    let d = example_copy();
    let bases = format!("master={MCO}/master.ign");
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--mco-base", &bases]);
    let sources = config::read_sources(d.path(), None).unwrap();
    let cluster = config::build(&sources, &Default::default()).unwrap();
    let specs = pki::plan(&cluster);
    let existing = fsio::read_existing(d.path(), &specs);
    let issued = pki::issue(
        &specs,
        &existing,
        time::OffsetDateTime::now_utc(),
        &pki::keys::SystemKeys,
        Default::default(),
    )
    .unwrap();
    assert!(issued.entries.iter().all(|e| e.outcome == pki::Outcome::Reused));
    let mut crds = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(d.path().join("crds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for p in names {
        crds.push(assets::Crd {
            file: p.file_name().unwrap().to_string_lossy().to_string(),
            contents: std::fs::read(&p).unwrap(),
        });
    }
    let base = ignition::parse_base(&std::fs::read_to_string(format!("{MCO}/master.ign")).unwrap()).unwrap();
    let agent_bin = std::fs::read(Path::new(env!("CARGO_BIN_EXE_hardshift")).with_file_name("hardshift-agent")).unwrap();
    let extras = Extras {
        crds,
        bases: BTreeMap::from([(Role::Master, base.clone())]),
        machine_configs: BTreeMap::new(),
        agent: Some(assets::agent::Binary::new(agent_bin)),
        kubeadmin: Some(hardshift_generator::kubeadmin::Kubeadmin::new(
            std::fs::read_to_string(d.path().join("auth/kubeadmin-password"))
                .unwrap()
                .trim()
                .to_string(),
            &cluster.domain(),
        )),
        renders: None,
    };
    let shared = parts::Shared::new(&cluster, &issued, &extras);
    for n in &cluster.nodes {
        let cfg = load(d.path(), &n.hostname);
        let got = files(&cfg);
        let meant = parts::node_config(&shared, n);
        for f in &meant.files {
            // A rendered base keeps its own file over hardshift's (the daemon compares them).
            if n.role == Role::Master && !f.replaces_base && base.storage.files.iter().any(|b| b.path == f.path) {
                continue;
            }
            let (mode, bytes) = got.get(&f.path).unwrap_or_else(|| panic!("{}: {} missing", n.hostname, f.path));
            assert_eq!(*mode, f.mode, "{}: {} mode", n.hostname, f.path);
            assert_eq!(bytes.as_slice(), &f.contents[..], "{}: {} contents", n.hostname, f.path);
        }
        let placed = cfg.storage.files.iter().find(|f| f.path == "/etc/hostname").unwrap();
        assert_eq!(placed.user.as_ref().unwrap().name, "root");
        assert_eq!(got["/etc/hostname"].1, format!("{}\n", n.hostname).as_bytes());
        // Nothing but the meant files and (for masters) the base's.
        let mut allowed: Vec<&str> = meant.files.iter().map(|f| f.path.as_str()).collect();
        if n.role == Role::Master {
            allowed.extend(base.storage.files.iter().map(|f| f.path.as_str()));
            for bf in &base.storage.files {
                if !meant.files.iter().any(|m| m.path == bf.path && m.replaces_base) {
                    assert_eq!(
                        got[&bf.path].1,
                        ignition::decode(bf.contents.as_ref().unwrap()).unwrap(),
                        "{}: base file {} changed",
                        n.hostname,
                        bf.path
                    );
                }
            }
            // The base's kubelet is kept (it bootstraps with /etc/kubernetes/kubeconfig).
            assert!(unit(&cfg, "kubelet.service").contains("--bootstrap-kubeconfig=/etc/kubernetes/kubeconfig"));
            // The base's units, plus hardshift-agent.service.
            assert_eq!(cfg.systemd.units.len(), base.systemd.units.len() + 1);
        }
        for p in got.keys() {
            assert!(allowed.contains(&p.as_str()), "{}: unexpected file {p}", n.hostname);
        }
        // Private keys and secrets hardshift places are 0600 (a rendered base's files keep the
        // base's modes: the daemon compares them).
        for (p, (mode, _)) in &got {
            if n.role == Role::Master && base.storage.files.iter().any(|b| &b.path == p) {
                continue;
            }
            if p.ends_with(".key") || p.ends_with("config.json") || p.ends_with("kubeconfig") || p.contains("system-connections") {
                assert_eq!(*mode, 0o600, "{}: {p}", n.hostname);
            }
        }
    }
    // Deterministic: the same inputs give byte-identical configs.
    let again = assets::ignitions(&cluster, &issued, &extras);
    for n in &again {
        assert_eq!(
            n.body.to_vec(),
            std::fs::read(d.path().join(format!("ignition/{}.ign", n.hostname))).unwrap(),
            "{}",
            n.hostname
        );
    }
}

#[test]
fn field_notes_lessons() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let refs: Value = serde_json::from_str(&std::fs::read_to_string(d.path().join("release/image-references")).unwrap()).unwrap();
    let tag = |t: &str| {
        refs["spec"]["tags"].as_array().unwrap().iter().find(|x| x["name"] == t).unwrap()["from"]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let release_image = "quay.io/openshift-release-dev/ocp-release@sha256:453e99a5fd32a7611c440556bb35e504166f6284728e5b4953cac73f87a250f6";
    let boot = load(d.path(), "bootstrap");
    let bf = files(&boot);

    // Bootstrap kubelet runs static pods only, from its config file; mirror pulls are slow.
    let kubelet = unit(&boot, "kubelet.service");
    assert!(kubelet.contains("--config=/etc/kubernetes/kubelet.conf"), "{kubelet}");
    assert!(
        !kubelet.contains("--kubeconfig") && !kubelet.contains("--bootstrap-kubeconfig"),
        "{kubelet}"
    );
    let kc = yaml(&file_text(&boot, "/etc/kubernetes/kubelet.conf"));
    assert_eq!(kc["staticPodPath"], "/etc/kubernetes/manifests");
    assert_eq!(kc["runtimeRequestTimeout"], "10m");
    assert_eq!(kc["serializeImagePulls"], false);
    assert_eq!(kc["readOnlyPort"], 0);
    assert_eq!(kc["authentication"]["anonymous"]["enabled"], false);

    // Masters and workers: a KubeletConfiguration (field-notes §8), and only flags the kubelet
    // has not deprecated on the command line.
    for n in &NODES[1..] {
        let cfg = load(d.path(), n);
        let kc = yaml(&file_text(&cfg, "/etc/kubernetes/kubelet.conf"));
        assert_eq!(kc["kind"], "KubeletConfiguration", "{n}");
        assert_eq!(kc["authentication"]["anonymous"]["enabled"], false, "{n}");
        assert_eq!(kc["authentication"]["webhook"]["enabled"], true, "{n}");
        assert_eq!(
            kc["authentication"]["x509"]["clientCAFile"], "/etc/kubernetes/kubelet-ca.crt",
            "{n}"
        );
        assert_eq!(kc["authorization"]["mode"], "Webhook", "{n}");
        assert_eq!(kc["serverTLSBootstrap"], true, "{n}");
        assert_eq!(kc["rotateCertificates"], true, "{n}");
        assert_eq!(kc["readOnlyPort"], 0, "{n}");
        assert_eq!(kc["cgroupDriver"], "systemd", "{n}");
        assert_eq!(kc["clusterDNS"][0], "172.30.0.10", "{n}");
        assert_eq!(kc["registerWithTaints"].is_array(), n.starts_with("master"), "{n}");
        let u = unit(&cfg, "kubelet.service");
        let flags: Vec<&str> = u
            .split_whitespace()
            .filter(|w| w.starts_with("--"))
            .map(|w| w.split('=').next().unwrap())
            .collect();
        assert_eq!(
            flags,
            [
                "--config",
                "--bootstrap-kubeconfig",
                "--kubeconfig",
                "--node-ip",
                "--hostname-override",
                "--node-labels",
                "--v"
            ],
            "{n}: {u}"
        );
    }

    // Serving certificates carry their chain (leaf, then the intermediate that signed it).
    let etcd = String::from_utf8(bf["/etc/kubernetes/bootstrap-secrets/etcd-server.crt"].1.clone()).unwrap();
    assert_eq!(etcd.matches("BEGIN CERTIFICATE").count(), 2, "{etcd}");
    let ca = String::from_utf8(bf["/etc/kubernetes/bootstrap-secrets/etcd-ca.crt"].1.clone()).unwrap();
    assert!(etcd.ends_with(&ca), "the intermediate follows the leaf");
    // The API server's, from the self-signed serving signers, stand alone.
    let api = String::from_utf8(bf["/etc/kubernetes/bootstrap-secrets/kube-apiserver-lb-server.crt"].1.clone()).unwrap();
    assert_eq!(api.matches("BEGIN CERTIFICATE").count(), 1, "{api}");
    let client = String::from_utf8(bf["/etc/kubernetes/bootstrap-secrets/admin.crt"].1.clone()).unwrap();
    assert_eq!(client.matches("BEGIN CERTIFICATE").count(), 1, "client certificates stay alone");

    // CRI-O uses the release's pause image, on every node.
    for n in NODES {
        let pause = file_text(&load(d.path(), n), "/etc/crio/crio.conf.d/00-pause.conf");
        assert!(pause.contains(&format!("pause_image = \"{}\"", tag("pod"))), "{n}: {pause}");
    }

    // Static pods parse as Pods; images from the release.
    let etcd = pod(&file_text(&boot, "/etc/kubernetes/manifests/etcd-bootstrap.yaml"));
    let c = &etcd.spec.as_ref().unwrap().containers[0];
    assert_eq!(c.image.as_deref(), Some(tag("etcd").as_str()));
    assert!(c
        .command
        .as_ref()
        .unwrap()
        .contains(&"--initial-cluster=etcd-bootstrap=https://192.168.126.100:2380".to_string()));
    for name in [
        "kube-apiserver-bootstrap",
        "kube-controller-manager-bootstrap",
        "kube-scheduler-bootstrap",
    ] {
        let p = pod(&file_text(&boot, &format!("/etc/kubernetes/manifests/{name}.yaml")));
        assert_eq!(
            p.spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some(tag("hyperkube").as_str()),
            "{name}"
        );
        assert_eq!(p.spec.as_ref().unwrap().host_network, Some(true));
    }
    let kas = pod(&file_text(&boot, "/etc/kubernetes/manifests/kube-apiserver-bootstrap.yaml"));
    let kas_cmd = kas.spec.unwrap().containers[0].command.clone().unwrap();
    assert!(kas_cmd.contains(&"--service-cluster-ip-range=172.30.0.0/16".to_string()));
    // Every certificate a static pod names is on the node.
    for f in kas_cmd
        .iter()
        .filter_map(|a| a.split_once('=').map(|x| x.1))
        .flat_map(|v| v.split(','))
        .filter_map(|p| p.strip_prefix("/etc/kubernetes/secrets/"))
    {
        assert!(
            bf.contains_key(&format!("/etc/kubernetes/bootstrap-secrets/{f}")),
            "kube-apiserver needs {f}"
        );
    }

    // CVO: the release image, --listen=, CLUSTER_PROFILE, privileged; staged until bootkube places it.
    assert!(
        !bf.contains_key("/etc/kubernetes/manifests/cvo-bootstrap.yaml"),
        "CVO must not start before the CRDs"
    );
    let cvo = pod(&file_text(&boot, "/opt/openshift/cvo/cvo-bootstrap.yaml"));
    let cc = &cvo.spec.as_ref().unwrap().containers[0];
    assert_eq!(cc.image.as_deref(), Some(release_image));
    assert!(cc.args.as_ref().unwrap().contains(&"--listen=".to_string()));
    let env: BTreeMap<_, _> = cc
        .env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    assert_eq!(env["CLUSTER_PROFILE"], "self-managed-high-availability");
    assert_eq!(cc.security_context.as_ref().unwrap().privileged, Some(true));

    // bootkube: /usr/local/bin, 0755; CRDs, then manifests, then the status patch, then the CVO.
    let (mode, script) = &bf["/usr/local/bin/bootkube.sh"];
    assert_eq!(*mode, 0o755);
    let script = String::from_utf8(script.clone()).unwrap();
    let pos = |s: &str| script.find(s).unwrap_or_else(|| panic!("bootkube lacks {s}"));
    assert!(pos("apply_dir crds") < pos("apply_dir manifests"));
    assert!(pos("apply_dir manifests") < pos("--subresource=status"));
    assert!(pos("--subresource=status") < pos("cp \"/opt/openshift/cvo/cvo-bootstrap.yaml\""));
    assert!(script.contains("/var/lib/hardshift/bootkube.json"));
    assert!(unit(&boot, "bootkube.service").contains("ExecStart=/usr/local/bin/bootkube.sh"));
    let (ok, out) = run("bash", &["-n", "-c", &script]);
    assert!(ok, "bootkube.sh does not parse: {out}");
    let crds: Vec<&String> = bf.keys().filter(|p| p.starts_with("/opt/openshift/crds/")).collect();
    assert_eq!(crds.len(), 11);

    // Infrastructure status (patched: a subresource) and both Network CRs.
    let status: Value = serde_json::from_str(&file_text(&boot, "/opt/openshift/infrastructure-status.json")).unwrap();
    assert_eq!(status["status"]["controlPlaneTopology"], "HighlyAvailable");
    assert_eq!(status["status"]["infrastructureTopology"], "HighlyAvailable");
    assert_eq!(status["status"]["apiServerURL"], "https://api.ocp4.example.com:6443");
    assert_eq!(status["status"]["apiServerInternalURI"], "https://api-int.ocp4.example.com:6443");
    assert_eq!(status["status"]["platformStatus"]["type"], "None");
    assert!(status["status"]["infrastructureName"].as_str().unwrap().starts_with("ocp4-"));
    let m = |f: &str| docs(&file_text(&boot, &format!("/opt/openshift/manifests/{f}")));
    assert_eq!(m("03-network-config.yaml")[0]["apiVersion"], "config.openshift.io/v1");
    assert_eq!(m("03-network-operator.yaml")[0]["apiVersion"], "operator.openshift.io/v1");
    assert_eq!(m("03-network-config.yaml")[0]["spec"]["clusterNetwork"][0]["hostPrefix"], 23);

    // cluster-config-v1 holds the install-config, without the pull secret.
    let cm = &m("06-cluster-config-v1.yaml")[0];
    assert_eq!(cm["metadata"]["namespace"], "kube-system");
    let ic = yaml(cm["data"]["install-config"].as_str().unwrap());
    let mut original = yaml(&std::fs::read_to_string(d.path().join("install-config.yaml")).unwrap());
    original.as_object_mut().unwrap().remove("pullSecret");
    assert_eq!(ic, original);

    // etcd-endpoints points at the bootstrap etcd.
    let ep = &m("07-etcd-endpoints.yaml")[0];
    assert_eq!(
        ep["metadata"]["annotations"]["alpha.installer.openshift.io/etcd-bootstrap"],
        "192.168.126.100"
    );
    // ClusterVersion without desiredUpdate; a FeatureGate.
    let cv = &m("05-clusterversion.yaml")[0];
    assert!(cv["spec"].get("desiredUpdate").is_none());
    assert_eq!(cv["spec"]["channel"], "stable-4.18");
    assert_eq!(m("04-featuregate.yaml")[0]["kind"], "FeatureGate");

    // No kube-proxy: OVN-Kubernetes serves services, and the nodes reach the API before it runs
    // through apiserver-url.env, as the installer's do.
    for n in ["master-0", "master-1", "master-2", "worker-0", "worker-1"] {
        let cfg = load(d.path(), n);
        assert!(!files(&cfg).contains_key("/etc/kubernetes/manifests/kube-proxy.yaml"), "{n}");
        assert!(file_text(&cfg, "/etc/kubernetes/apiserver-url.env").contains("KUBERNETES_SERVICE_HOST=api-int.ocp4.example.com"));
        assert!(file_text(&cfg, "/etc/kubernetes/kubeconfig").contains("https://api-int.ocp4.example.com:6443"));
    }
    let rbac = m("01-rbac.yaml");
    assert!(!rbac.iter().any(|b| b["roleRef"]["name"] == "system:node-proxier"));
    assert!(rbac
        .iter()
        .any(|b| b["roleRef"]["name"] == "system:node-bootstrapper" && b["subjects"][0]["name"] == "system:bootstrapper"));

    // Static network: a keyfile bound to the MAC.
    let key = file_text(
        &load(d.path(), "master-1"),
        "/etc/NetworkManager/system-connections/enp1s0.nmconnection",
    );
    assert!(
        key.contains("address1=192.168.126.102/24,192.168.126.1") && key.contains("mac-address=52:54:00:00:00:66"),
        "{key}"
    );

    // Air gap: registries.conf by digest, and the IDMS.
    let reg = file_text(&load(d.path(), "worker-0"), "/etc/containers/registries.conf");
    let conf: toml::Table = reg.parse().unwrap_or_else(|e| panic!("registries.conf is not TOML: {e}\n{reg}"));
    let first = &conf["registry"].as_array().unwrap()[0];
    assert_eq!(
        first["location"].as_str(),
        Some("quay.io/openshift-release-dev/ocp-release"),
        "{reg}"
    );
    assert_eq!(first["prefix"].as_str(), Some(""), "{reg}");
    assert_eq!(first["mirror-by-digest-only"].as_bool(), Some(true), "{reg}");
    assert_eq!(
        first["mirror"].as_array().unwrap()[0]["location"].as_str(),
        Some("registry.ocp4.example.com:5000/ocp4/openshift4"),
        "{reg}"
    );
    let idms = &m("09-image-digest-mirror-set.yaml")[0];
    assert_eq!(
        idms["spec"]["imageDigestMirrors"][0]["source"],
        "quay.io/openshift-release-dev/ocp-release"
    );
    // The pull secret is on every node for the kubelet, and never in a world-readable file.
    assert_eq!(bf["/var/lib/kubelet/config.json"].0, 0o600);
    assert_eq!(bf["/opt/openshift/manifests/08-pull-secret.yaml"].0, 0o600);
}

#[test]
fn a_release_without_a_needed_image_is_an_input_error() {
    let d = example_copy();
    edit(
        d.path(),
        "release/image-references",
        "\"name\": \"pod\"",
        "\"name\": \"pod-renamed\"",
    );
    let out = hardshift(&["create", "--dir", d.path().to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("release/image-references: the release has no \"pod\" image"), "{err}");
    assert!(!d.path().join(".hardshift").exists());

    let d = example_copy();
    let bad = d.path().join("bad.ign");
    std::fs::write(
        &bad,
        r#"{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://api-int:22623/config/master"}]}}}"#,
    )
    .unwrap();
    let out = hardshift(&[
        "create",
        "--dir",
        d.path().to_str().unwrap(),
        "--mco-base",
        &format!("master={}", bad.display()),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("pointer config"), "{}", text(&out.stderr));
    assert!(!d.path().join(".hardshift").exists());
}

#[test]
fn every_manifest_parses_into_its_type_and_every_cr_has_a_crd() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    fn strict<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) {
        let t: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"));
        let mut back = serde_json::to_value(&t).unwrap();
        back["apiVersion"] = v["apiVersion"].clone();
        back["kind"] = v["kind"].clone();
        assert_eq!(&back, v, "fields lost in a round trip");
    }
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let boot = load(d.path(), "bootstrap");
    let all = files(&boot);
    // Kinds the CRDs in crds/ declare, by group.
    let mut declared = Vec::new();
    for (p, (_, bytes)) in all.iter().filter(|(p, _)| p.starts_with("/opt/openshift/crds/")) {
        let crd = yaml(std::str::from_utf8(bytes).unwrap());
        assert_eq!(crd["kind"], "CustomResourceDefinition", "{p}");
        declared.push((
            crd["spec"]["group"].as_str().unwrap().to_string(),
            crd["spec"]["names"]["kind"].as_str().unwrap().to_string(),
        ));
    }
    let mut count = 0;
    for (p, (_, bytes)) in all.iter().filter(|(p, _)| p.starts_with("/opt/openshift/manifests/")) {
        for doc in docs(std::str::from_utf8(bytes).unwrap()) {
            count += 1;
            let kind = doc["kind"].as_str().unwrap_or_else(|| panic!("{p}: no kind"));
            assert!(doc["metadata"]["name"].is_string(), "{p}: no name");
            match (doc["apiVersion"].as_str().unwrap(), kind) {
                ("v1", "Namespace") => strict::<Namespace>(&doc),
                ("v1", "ConfigMap") => strict::<ConfigMap>(&doc),
                ("v1", "Secret") => strict::<Secret>(&doc),
                ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => strict::<ClusterRoleBinding>(&doc),
                (api, kind) => {
                    let group = api.split('/').next().unwrap();
                    assert!(
                        declared.contains(&(group.to_string(), kind.to_string())),
                        "{p}: no CRD declares {api} {kind}"
                    );
                }
            }
        }
    }
    assert!(count >= 20, "{count} objects");
}

#[test]
fn a_single_master_cluster_reports_single_replica_control_plane() {
    let d = example_copy();
    edit(d.path(), "install-config.yaml", "  replicas: 3", "  replicas: 1");
    edit(d.path(), "install-config.yaml", "  replicas: 2", "  replicas: 4");
    edit(
        d.path(),
        "agent-config.yaml",
        "- hostname: master-1\n  role: master",
        "- hostname: master-1\n  role: worker",
    );
    edit(
        d.path(),
        "agent-config.yaml",
        "- hostname: master-2\n  role: master",
        "- hostname: master-2\n  role: worker",
    );
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let boot = load(d.path(), "bootstrap");
    let status: Value = serde_json::from_str(&file_text(&boot, "/opt/openshift/infrastructure-status.json")).unwrap();
    assert_eq!(status["status"]["controlPlaneTopology"], "SingleReplica");
    assert_eq!(status["status"]["infrastructureTopology"], "HighlyAvailable");
}

/// A cluster with no compute nodes can finish: the masters are schedulable (the Scheduler config
/// the installer writes when compute replicas are 0), and their own kubelet registers without the
/// NoSchedule taint; with workers, the masters keep it.
#[test]
fn with_no_workers_the_masters_are_schedulable() {
    let scheduler = |d: &Path| -> Value {
        let boot = load(d, "bootstrap");
        docs(&file_text(&boot, "/opt/openshift/manifests/04-scheduler.yaml"))[0].clone()
    };
    let tainted = |d: &Path| file_text(&load(d, "master-0"), "/etc/kubernetes/kubelet.conf").contains("NoSchedule");
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert_eq!(scheduler(d.path())["spec"]["mastersSchedulable"], false);
    assert!(tainted(d.path()));
    let d = example_copy();
    edit(d.path(), "install-config.yaml", "  replicas: 2", "  replicas: 0");
    let text = std::fs::read_to_string(d.path().join("agent-config.yaml")).unwrap();
    let start = text.find("- hostname: worker-0").expect("the example's first worker");
    let kept: String = text[..start].to_string();
    std::fs::write(d.path().join("agent-config.yaml"), kept).unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let s = scheduler(d.path());
    assert_eq!(
        (s["kind"].as_str(), s["spec"]["mastersSchedulable"].as_bool()),
        (Some("Scheduler"), Some(true))
    );
    assert!(!tainted(d.path()));
}

#[test]
fn the_node_agent_is_on_every_node_with_its_own_identity() {
    agent_bin();
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let agent = std::fs::read(Path::new(env!("CARGO_BIN_EXE_hardshift")).with_file_name("hardshift-agent")).unwrap();
    for n in NODES {
        let cfg = load(d.path(), n);
        let f = files(&cfg);
        let (mode, bin) = &f["/usr/local/bin/hardshift-agent"];
        assert_eq!((*mode, bin.len()), (0o755, agent.len()), "{n}");
        assert!(bin == &agent, "{n}: the binary must be the agent, byte for byte");
        assert_eq!(f["/etc/hardshift/agent.key"].0, 0o600);
        let conf = file_text(&cfg, "/etc/hardshift/agent.toml");
        assert!(
            conf.contains(&format!("node = \"{n}\"")) && conf.contains("collector = \"192.168.126.1:9443\""),
            "{conf}"
        );
        let unit_text = unit(&cfg, "hardshift-agent.service");
        assert!(
            unit_text.contains("Restart=always") && unit_text.contains("After=network-online.target"),
            "{unit_text}"
        );
        assert_eq!(
            cfg.systemd
                .units
                .iter()
                .find(|u| u.name == "hardshift-agent.service")
                .unwrap()
                .enabled,
            Some(true)
        );
        // Its certificate names this node and chains to the agent CA placed beside it.
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("ca.crt"), &f["/etc/hardshift/agent-ca.crt"].1).unwrap();
        std::fs::write(t.path().join("me.crt"), &f["/etc/hardshift/agent.crt"].1).unwrap();
        let (ok, out) = run(
            "openssl",
            &[
                "verify",
                "-purpose",
                "sslclient",
                "-CAfile",
                t.path().join("ca.crt").to_str().unwrap(),
                t.path().join("me.crt").to_str().unwrap(),
            ],
        );
        assert!(ok, "{n}: {out}");
        let (_, subj) = run(
            "openssl",
            &["x509", "-noout", "-subject", "-in", t.path().join("me.crt").to_str().unwrap()],
        );
        assert!(subj.trim().ends_with(&format!("CN = {n}")), "{n}: {subj}");
    }
    // The agent config is one the agent itself accepts.
    let t = tempfile::tempdir().unwrap();
    let conf = t.path().join("agent.toml");
    std::fs::write(&conf, file_text(&load(d.path(), "worker-0"), "/etc/hardshift/agent.toml")).unwrap();
    let (ok, out) = run(
        Path::new(env!("CARGO_BIN_EXE_hardshift"))
            .with_file_name("hardshift-agent")
            .to_str()
            .unwrap(),
        &["--config", conf.to_str().unwrap(), "status"],
    );
    assert!(ok && out.contains("node worker-0 (worker)"), "{out}");
    // A master's agent watches the etcd the operator will roll out there: until its certificates
    // exist, that is reported as a phase (warning), not a failure.
    std::fs::write(&conf, file_text(&load(d.path(), "master-0"), "/etc/hardshift/agent.toml")).unwrap();
    let (ok, out) = run(
        Path::new(env!("CARGO_BIN_EXE_hardshift"))
            .with_file_name("hardshift-agent")
            .to_str()
            .unwrap(),
        &["--config", conf.to_str().unwrap(), "status", "--json"],
    );
    assert!(ok, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    let etcd = v["components"].as_array().unwrap().iter().find(|c| c["name"] == "etcd").unwrap();
    assert_eq!(
        (etcd["health"].as_str(), etcd["state"].as_str()),
        (Some("warning"), Some("no certificates yet")),
        "{etcd}"
    );
    assert!(
        etcd["reason"]
            .as_str()
            .unwrap()
            .contains("/etc/kubernetes/static-pod-resources/etcd-certs/"),
        "{etcd}"
    );
    assert!(std::fs::read_to_string(&conf)
        .unwrap()
        .contains("etcd-all-certs/etcd-peer-master-0.crt"));

    create(d.path(), &["--no-agent"]);
    assert!(!files(&load(d.path(), "worker-0")).contains_key("/usr/local/bin/hardshift-agent"));
}

#[test]
fn with_agent_url_the_agent_is_fetched_and_pinned_by_its_hash() {
    let d = example_copy();
    let url = "http://192.168.126.1:8080/hardshift-agent";
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--agent-url", url]);
    let served = std::fs::read(d.path().join("http/hardshift-agent")).unwrap();
    let agent = std::fs::read(Path::new(env!("CARGO_BIN_EXE_hardshift")).with_file_name("hardshift-agent")).unwrap();
    assert!(served == agent, "the served file is the agent");
    let (_, sum) = run("sha512sum", &[d.path().join("http/hardshift-agent").to_str().unwrap()]);
    let hex = sum.split_whitespace().next().unwrap().to_string();
    for n in NODES {
        let p = d.path().join(format!("ignition/{n}.ign"));
        let (ok, out) = run("ignition-validate", &[p.to_str().unwrap()]);
        assert!(ok, "{n}: {out}");
        let cfg = load(d.path(), n);
        let f = cfg
            .storage
            .files
            .iter()
            .find(|f| f.path == "/usr/local/bin/hardshift-agent")
            .unwrap();
        let c = f.contents.as_ref().unwrap();
        assert_eq!(c.source.as_deref(), Some(url));
        assert_eq!(c.other["verification"]["hash"], format!("sha512-{hex}"));
        assert!(
            std::fs::metadata(&p).unwrap().len() < 1_000_000,
            "{n}: the config no longer carries the binary"
        );
    }
}

/// A fresh bundle's masters and workers are built from the first stage of the PKI alone, while
/// the bootstrap's keys are still being made: their configs must be exactly what the whole PKI
/// makes, and the first stage must hold far less than the whole.
#[test]
fn staged_pki_builds_masters_and_workers_exactly_as_the_whole_does() {
    let d = example_copy();
    let sources = config::read_sources(d.path(), None).unwrap();
    let overrides = config::Overrides {
        key_algorithm: Some(hardshift_generator::cluster::KeyAlgorithm::EcdsaP256),
        ..Default::default()
    };
    let cluster = config::build(&sources, &overrides).unwrap();
    let specs = pki::plan(&cluster);
    let extras = Extras {
        agent: Some(assets::agent::Binary::remote(
            b"\x7fELF agent".to_vec(),
            "http://192.168.126.1:8080/hardshift-agent",
        )),
        ..Default::default()
    };
    let first = parts::pki_read_by(&cluster, &[Role::Master, Role::Worker]);
    let (whole, (ids, early)) = pki::issue_staged(
        &specs,
        &Default::default(),
        time::OffsetDateTime::now_utc(),
        &pki::keys::SystemKeys,
        Default::default(),
        &first,
        |partial| {
            let ids: std::collections::BTreeSet<String> = partial.entries.iter().map(|e| e.spec.id()).collect();
            (
                ids,
                assets::ignitions_of(&cluster, partial, &extras, &|n| n.role != Role::Bootstrap),
            )
        },
    )
    .unwrap();
    for id in [
        "pki/root-ca",
        "pki/kubernetes-ca",
        "pki/kubelet-bootstrap",
        "agent-pki/agent-ca",
        "agent-pki/agent-worker-0",
    ] {
        assert!(ids.contains(id), "{id} not in the first stage: {ids:?}");
    }
    for id in [
        "pki/etcd-ca",
        "pki/etcd-server",
        "pki/service-account",
        "pki/admin",
        "pki/kube-apiserver-service-network-server",
    ] {
        assert!(!ids.contains(id), "{id} is only the bootstrap's, yet in the first stage");
    }
    let rsa_first = specs.iter().filter(|s| s.dir == "pki" && ids.contains(&s.id())).count();
    let rsa_all = specs.iter().filter(|s| s.dir == "pki").count();
    assert!(
        rsa_first * 3 < rsa_all,
        "{rsa_first} of {rsa_all} OpenShift entries in the first stage"
    );
    assert_eq!(whole.entries.len(), specs.len());
    let all = assets::ignitions(&cluster, &whole, &extras);
    assert_eq!(early.len(), all.len() - 1);
    for n in &early {
        let w = all.iter().find(|w| w.hostname == n.hostname).unwrap();
        assert!(n.body == w.body, "{}: the staged config differs from the whole PKI's", n.hostname);
        assert_eq!(n.sha256, w.sha256);
    }
}

/// A real rendered base is Ignition 3.4.0 (the MCO's spec), which Debian's ignition-validate
/// (2.14) refuses as unknown: what `create` emits from such a base is validated by an
/// ignition-validate that knows 3.4 (Ignition v2.17 or later, built by hand:
/// `HARDSHIFT_IGNITION_BIN`). The configs keep the base's version; every node's config passes,
/// and a broken one (a relative path) fails, so the check can fail.
#[test]
#[ignore = "needs HARDSHIFT_IGNITION_BIN: an ignition-validate that knows spec 3.4.0 (Ignition v2.17+)"]
fn configs_merged_into_a_3_4_base_validate_with_an_ignition_that_knows_3_4() {
    let bin = std::env::var_os("HARDSHIFT_IGNITION_BIN").expect("HARDSHIFT_IGNITION_BIN (see hack/tiers)");
    let validate = Path::new(&bin).join("ignition-validate");
    let d = example_copy();
    let mut mc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{MCO}/worker-machineconfig.json")).unwrap()).unwrap();
    mc["spec"]["config"]["ignition"]["version"] = "3.4.0".into();
    let base = d.path().join("rendered-3.4.json");
    std::fs::write(&base, serde_json::to_vec(&mc).unwrap()).unwrap();
    let b = base.to_str().unwrap();
    create(
        d.path(),
        &["--key-algorithm", "ecdsa-p256", "--mco-base", &format!("master={b},worker={b}")],
    );
    let run_validate = |p: &Path| {
        let out = std::process::Command::new(&validate).arg(p).output().expect("ignition-validate");
        (out.status.success(), format!("{}{}", text(&out.stdout), text(&out.stderr)))
    };
    for n in NODES {
        let p = d.path().join(format!("ignition/{n}.ign"));
        let cfg = load(d.path(), n);
        let want = if n == "bootstrap" { "3.2.0" } else { "3.4.0" };
        assert_eq!(cfg.ignition.version, want, "{n}");
        let (ok, out) = run_validate(&p);
        assert!(ok, "{n}.ign: {out}");
    }
    // Debian's 2.14 refuses the same file: why this tier exists.
    let (ok, _) = run("ignition-validate", &[d.path().join("ignition/worker-0.ign").to_str().unwrap()]);
    assert!(!ok, "Debian's ignition-validate now knows 3.4.0: validate in CI instead");
    let mut broken: serde_json::Value = serde_json::from_slice(&std::fs::read(d.path().join("ignition/worker-0.ign")).unwrap()).unwrap();
    broken["storage"]["files"][0]["path"] = "relative/path".into();
    let bad = d.path().join("broken.ign");
    std::fs::write(&bad, serde_json::to_vec(&broken).unwrap()).unwrap();
    let (ok, out) = run_validate(&bad);
    assert!(!ok && out.contains("path not absolute"), "{out}");
}

/// What the machine-config operator needs from the installer (machine-config-operator
/// release-4.18): the root CA in `kube-system/root-ca` (its sync stops without it), the server's
/// certificate in `machine-config-server-tls` and at /etc/ssl/mcs on the bootstrap, and the SSH
/// key in `99-<role>-ssh` MachineConfigs (the daemon manages `core`'s keys from the rendered
/// config). No kube-proxy, no `/etc/kubernetes/ca.crt`: the kubelet trusts the MCS's
/// `kubelet-ca.crt`; with an MCO base, the MCO's crio.conf sets the pause image.
#[test]
fn what_the_machine_config_operator_takes_from_the_installer_is_in_the_bundle() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let boot = load(d.path(), "bootstrap");
    let bf = files(&boot);
    let root_ca = std::fs::read_to_string(pki(d.path(), "root-ca.crt")).unwrap();

    // The server's certificate: the root CA's, for api-int, a server's only.
    let cert = file_text(&boot, "/etc/ssl/mcs/tls.crt");
    assert_eq!(bf["/etc/ssl/mcs/tls.key"].0, 0o600);
    let crt = d.path().join("mcs.crt");
    std::fs::write(&crt, &cert).unwrap();
    let out = std::process::Command::new("openssl")
        .args(["verify", "-purpose", "sslserver", "-CAfile"])
        .arg(pki(d.path(), "root-ca.crt"))
        .arg(&crt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stdout) + &text(&out.stderr));
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-ext", "subjectAltName", "-in"])
        .arg(&crt)
        .output()
        .unwrap();
    let facts = text(&out.stdout);
    assert!(
        facts.contains("CN=system:machine-config-server") || facts.contains("CN = system:machine-config-server"),
        "{facts}"
    );
    assert!(facts.contains("DNS:api-int.ocp4.example.com"), "{facts}");

    let seeds = docs(&file_text(&boot, "/opt/openshift/manifests/10-operator-seeds.yaml"));
    let find = |kind: &str, ns: &str, name: &str| {
        seeds
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["namespace"] == ns && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {ns}/{name} is not among the seeds"))
            .clone()
    };
    let tls = find("Secret", "openshift-machine-config-operator", "machine-config-server-tls");
    assert_eq!(tls["type"], "kubernetes.io/tls");
    let b64 = |v: &Value| {
        use base64::Engine;
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap()).unwrap()
    };
    assert_eq!(b64(&tls["data"]["tls.crt"]), cert);
    assert_eq!(b64(&tls["data"]["tls.key"]), file_text(&boot, "/etc/ssl/mcs/tls.key"));
    assert_eq!(find("ConfigMap", "kube-system", "root-ca")["data"]["ca.crt"], root_ca.as_str());

    // The SSH key in both pools' MachineConfigs, applied once the CVO has the MachineConfig CRD.
    let ic = yaml(&std::fs::read_to_string(d.path().join("install-config.yaml")).unwrap());
    let key = ic["sshKey"].as_str().unwrap().trim();
    let ssh = docs(&file_text(&boot, "/opt/openshift/manifests-after-cvo/99-machineconfig-ssh.yaml"));
    for (mc, role) in ssh.iter().zip(["master", "worker"]) {
        assert_eq!(mc["metadata"]["name"], format!("99-{role}-ssh"));
        assert_eq!(mc["metadata"]["labels"]["machineconfiguration.openshift.io/role"], role);
        let user = &mc["spec"]["config"]["passwd"]["users"][0];
        assert_eq!(
            (user["name"].as_str(), user["sshAuthorizedKeys"][0].as_str()),
            (Some("core"), Some(key))
        );
    }
    assert_eq!(ssh.len(), 2);
    // The MCO's bootstrap renders them too.
    let out = hardshift(&["mco", "--dir", d.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(d
        .path()
        .join("mco/manifests/99_openshift-machineconfig_99-master-ssh.yaml")
        .exists());

    // The kubelet's client CA is the one the MCS serves; no second copy.
    for n in ["master-0", "worker-0"] {
        let cfg = load(d.path(), n);
        let f = files(&cfg);
        assert!(!f.contains_key("/etc/kubernetes/ca.crt"), "{n}");
        assert!(f.contains_key("/etc/kubernetes/kubelet-ca.crt"), "{n}");
        assert!(
            f.contains_key("/etc/crio/crio.conf.d/00-pause.conf"),
            "{n}: without a base, hardshift sets the pause image"
        );
        let kubelet = yaml(&file_text(&cfg, "/etc/kubernetes/kubelet.conf"));
        assert_eq!(kubelet["authentication"]["x509"]["clientCAFile"], "/etc/kubernetes/kubelet-ca.crt");
    }
    let bases = format!("master={MCO}/master.ign,worker={MCO}/worker-machineconfig.json");
    create(d.path(), &["--mco-base", &bases]);
    for n in ["master-0", "worker-0"] {
        assert!(
            !files(&load(d.path(), n)).contains_key("/etc/crio/crio.conf.d/00-pause.conf"),
            "{n}: the base's crio.conf sets it"
        );
    }
    assert!(files(&load(d.path(), "bootstrap")).contains_key("/etc/crio/crio.conf.d/00-pause.conf"));
}
