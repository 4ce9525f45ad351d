//! `fips: true` in install-config.yaml is never ignored. Without AWS-LC's FIPS module `create`
//! refuses it (exit 2, at the line of `fips`, nothing written); with it (`--features fips`, as
//! `hack/test.sh` runs this file a second time) every node boots into FIPS mode, the installer's
//! MachineConfigs carry `fips: true` to the MCO, the keys come from the FIPS module, and the agent
//! and the collector run their TLS on it.

mod common;

use common::*;
use hardshift_generator::{assets, cluster::Role, config, pki};
use serde_json::Value;

fn fips_inputs() -> tempfile::TempDir {
    let d = example_copy();
    edit(
        d.path(),
        "install-config.yaml",
        "platform:\n  none: {}\n",
        "platform:\n  none: {}\nfips: true\n",
    );
    d
}

/// What `fips: true` puts in the bundle, checked on the generator's own output (any build: the
/// module is the CLI's check, the refusal test below).
#[test]
fn a_fips_bundle_boots_every_node_in_fips_mode_and_tells_the_mco() {
    let d = fips_inputs();
    let sources = config::read_sources(d.path(), None).unwrap();
    let overrides = config::Overrides {
        key_algorithm: Some(hardshift_generator::cluster::KeyAlgorithm::EcdsaP256),
        crypto_fips: Some(true),
        ..Default::default()
    };
    let cluster = config::build(&sources, &overrides).unwrap();
    assert!(cluster.fips);
    let pki = pki::issue(
        &pki::plan(&cluster),
        &Default::default(),
        time::OffsetDateTime::now_utc(),
        &pki::keys::SystemKeys,
        Default::default(),
    )
    .unwrap();
    // Without an MCO base, each node (the bootstrap too) asks Ignition for the kernel argument.
    let nodes = assets::ignitions(&cluster, &pki, &Default::default());
    assert_eq!(nodes.len(), 6);
    for n in &nodes {
        let cfg: Value = serde_json::from_slice(&n.body.to_vec()).unwrap();
        assert_eq!(cfg["ignition"]["version"], "3.3.0", "{}: kernelArguments need spec 3.3", n.hostname);
        assert_eq!(
            cfg["kernelArguments"]["shouldExist"],
            serde_json::json!(["fips=1"]),
            "{}",
            n.hostname
        );
        if n.role != Role::Bootstrap {
            // The agent refuses to start on a module that is not FIPS.
            let agent = cfg["storage"]["files"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["path"] == "/etc/hardshift/agent.toml");
            assert!(agent.is_none() || agent_toml_has_fips(agent.unwrap()), "{}", n.hostname);
        }
    }
    // The installer's 99-<role>-fips MachineConfigs: bootkube applies them once the CVO has
    // installed the MachineConfig CRD, and the MCO's render reads them.
    let boot = nodes.iter().find(|n| n.role == Role::Bootstrap).unwrap();
    let boot: Value = serde_json::from_slice(&boot.body.to_vec()).unwrap();
    let staged = boot["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["path"] == "/opt/openshift/manifests-after-cvo/99-machineconfig-fips.yaml");
    assert!(staged, "the bootstrap carries the MachineConfigs for after the CVO");
    let late = assets::manifests::after_cvo(&cluster);
    // Beside the 99-<role>-ssh ones (tests/ignition.rs).
    let mcs: Vec<&Value> = late
        .iter()
        .flat_map(|(_, o)| o)
        .filter(|m| m["metadata"]["name"].as_str().unwrap().ends_with("-fips"))
        .collect();
    let names: Vec<&str> = mcs.iter().map(|m| m["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["99-master-fips", "99-worker-fips"]);
    // Judged by the release's own MachineConfig CRD.
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/openshift-4.18/crds");
    let crds = hardshift_generator::crd::CrdSet::load_dir(&shared).unwrap();
    for m in &mcs {
        let r = crds.check(m);
        assert!(r.crd_file.is_some() && r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(m["spec"]["fips"], true);
        let role = m["metadata"]["labels"]["machineconfiguration.openshift.io/role"].as_str().unwrap();
        assert_eq!(m["metadata"]["name"], format!("99-{role}-fips"));
    }
    let mco: Vec<String> = hardshift_generator::mco::inputs(&cluster, &pki)
        .unwrap()
        .into_iter()
        .map(|f| f.0)
        .collect();
    for role in ["master", "worker"] {
        let want = format!("mco/manifests/99_openshift-machineconfig_99-{role}-fips.yaml");
        assert!(mco.contains(&want), "{want} in {mco:?}");
    }

    // And without fips: none of it.
    let mut plain = cluster.clone();
    plain.fips = false;
    for n in assets::ignitions(&plain, &pki, &Default::default()) {
        let cfg: Value = serde_json::from_slice(&n.body.to_vec()).unwrap();
        assert_eq!(cfg["ignition"]["version"], "3.2.0");
        assert!(cfg.get("kernelArguments").is_none());
    }
    let fips_mcs = assets::manifests::after_cvo(&plain)
        .iter()
        .flat_map(|(_, o)| o)
        .filter(|m| m["spec"].get("fips").is_some())
        .count();
    assert_eq!(fips_mcs, 0);
}

fn agent_toml_has_fips(file: &Value) -> bool {
    let c: hardshift_generator::ignition::Contents = serde_json::from_value(file["contents"].clone()).unwrap();
    let text = String::from_utf8(hardshift_generator::ignition::decode(&c).unwrap()).unwrap();
    text.lines().any(|l| l.trim() == "fips = true")
}

/// The CLI: without the FIPS module, refused at the line of `fips` with nothing written; with it,
/// a bundle whose keys came from the module, which verify reports and the collector serves.
#[test]
fn create_refuses_fips_without_the_module_and_honours_it_with_it() {
    let d = fips_inputs();
    let dir = d.path().to_str().unwrap();
    agent_bin();
    let out = hardshift(&["create", "--dir", dir, "--self-contained-nodes"]);
    let err = text(&out.stderr);
    if !hardshift_crypto::FIPS_BUILD {
        assert_eq!(out.status.code(), Some(2), "{err}");
        let line = std::fs::read_to_string(d.path().join("install-config.yaml"))
            .unwrap()
            .lines()
            .position(|l| l == "fips: true")
            .unwrap()
            + 1;
        assert!(err.contains(&format!("install-config.yaml:{line}:")), "{err}");
        assert!(
            err.contains("FIPS-validated") && err.contains("--features fips") && err.contains("fips: false"),
            "{err}"
        );
        for gone in ["pki", "ignition", "manifests", ".hardshift/create.json"] {
            assert!(!d.path().join(gone).exists(), "{gone} written by a refused run");
        }
        return;
    }
    assert!(out.status.success(), "{err}");
    // The agent embedded is the FIPS one; its config says so.
    let rec: Value = serde_json::from_slice(&std::fs::read(d.path().join(".hardshift/create.json")).unwrap()).unwrap();
    assert_eq!(rec["crypto_fips"], true, "{rec}");
    assert_eq!(rec["fips"], true);
    let v = hardshift(&["verify", "--dir", dir]);
    let vout = text(&v.stdout);
    let crypto = vout.lines().find(|l| l.starts_with("crypto")).unwrap_or_else(|| panic!("{vout}"));
    assert!(
        crypto.contains("ok") && crypto.contains("AWS-LC FIPS module (FIPS mode)"),
        "{crypto}"
    );
    assert!(v.status.success(), "{vout}\n{}", text(&v.stderr));
}

/// An agent for master-0 of bundle `dir`, with `fips = true` as a fips bundle's config says.
fn fips_agent(dir: &std::path::Path, port: u16) -> (Kill, std::path::PathBuf) {
    let cfg = dir.join("agent-fips.toml");
    let mut c = agent_config(port, "master-0", &dir.join("agent-pki"), "master-0");
    c.role = "master".into();
    c.fips = true;
    c.interval_ms = 100;
    c.state_dir = dir.join("agent-state");
    write_agent_config(&cfg, &c);
    let log = dir.join("agent-fips.log");
    let child = std::process::Command::new(agent_bin())
        .args(["--config", cfg.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (Kill(child), log)
}

/// An agent told `fips = true` runs its TLS on the FIPS module or not at all: without the module
/// it refuses to start (exit 2); with it, it reports to the bundle's collector (FIPS too) over mTLS.
#[test]
fn an_agent_told_fips_runs_only_on_the_fips_module() {
    let d = if hardshift_crypto::FIPS_BUILD {
        fips_inputs()
    } else {
        example_copy()
    };
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let port = free_port();
    if hardshift_crypto::FIPS_BUILD {
        let _c = collector(d.path(), port);
        let (_a, _log) = fips_agent(d.path(), port);
        wait_for("a report over FIPS TLS", 180, || !stored(d.path(), "master-0").is_empty());
        return;
    }
    let (mut a, log) = fips_agent(d.path(), port);
    let status = a.0.wait().unwrap();
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("fips = true, but this build has no FIPS-validated crypto module"),
        "{err}"
    );
}
