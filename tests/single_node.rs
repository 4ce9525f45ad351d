//! Single-node OpenShift, bootstrap-in-place (issue 40): the installer's inputs accepted and
//! checked as it checks them (and what it leaves unchecked), one config for the one node with the
//! master's inside, the lab pointing at the node, and the on-node step run for real: etcd's data
//! carried into the master's config and read back by a real etcd.

mod common;

use common::*;
use hardshift_generator::ignition::{decode, Config};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const DISK: &str = "/dev/disk/by-id/wwn-0x64cd98f04fde100024684cf3034da5c2";
const MASTER_BASE: &str = "/opt/openshift/hardshift/master-base.ign";
const INSTALL_TO_DISK: &str = "/usr/local/bin/hardshift-install-to-disk.sh";
const POST_REBOOT: &str = "/usr/local/bin/hardshift-post-reboot.sh";

fn files_of(cfg: &Config) -> BTreeMap<String, Vec<u8>> {
    cfg.storage
        .files
        .iter()
        .map(|f| (f.path.clone(), decode(f.contents.as_ref().unwrap()).unwrap()))
        .collect()
}

fn units_of(cfg: &Config) -> Vec<String> {
    cfg.systemd.units.iter().map(|u| u.name.clone()).collect()
}

fn yaml_docs(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .split("\n---\n")
        .filter_map(|d| hardshift_generator::config::yaml::parse(d).ok())
        .map(|d| d.value)
        .collect()
}

/// Every object of the node's bootkube manifests.
fn applied(files: &BTreeMap<String, Vec<u8>>) -> Vec<Value> {
    files
        .iter()
        .filter(|(p, _)| p.starts_with("/opt/openshift/manifests/"))
        .flat_map(|(_, b)| yaml_docs(b))
        .collect()
}

fn the_single_node_bundle(dir: &Path, node: &str, node_ip: &str) {
    let out = create(dir, &[]);
    let stdout = text(&out.stdout);
    println!("{stdout}");
    // One config: the node's; no bootstrap host.
    let ign: Vec<String> = std::fs::read_dir(dir.join("ignition"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(ign, [format!("{node}.ign")], "{ign:?}");
    let path = dir.join(format!("ignition/{node}.ign"));
    let (ok, msg) = run("ignition-validate", &[path.to_str().unwrap()]);
    assert!(ok, "ignition-validate {}: {msg}", path.display());
    let live: Config = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let files = files_of(&live);
    let units = units_of(&live);
    for u in [
        "bootkube.service",
        "kubelet.service",
        "hardshift-install-to-disk.service",
        "hardshift-agent.service",
    ] {
        assert!(units.iter().any(|x| x == u), "live system lacks {u}: {units:?}");
    }
    // The installer's topology for one master and no workers.
    let infra: Value = serde_json::from_slice(&files["/opt/openshift/infrastructure-status.json"]).unwrap();
    assert_eq!(infra["status"]["controlPlaneTopology"], "SingleReplica");
    assert_eq!(infra["status"]["infrastructureTopology"], "SingleReplica");
    let ingress: Value = serde_json::from_slice(&files["/opt/openshift/ingress-status.json"]).unwrap();
    assert_eq!(ingress["status"]["defaultPlacement"], "ControlPlane");
    let objs = applied(&files);
    let find = |kind: &str, name: &str| {
        objs.iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    assert_eq!(find("Scheduler", "cluster")["spec"]["mastersSchedulable"], true);
    // cluster-etcd-operator's bootstrap-in-place endpoints: the node's own member, no bootstrap annotation.
    let ep = find("ConfigMap", "etcd-endpoints");
    assert!(ep["metadata"]["annotations"].is_null(), "{ep}");
    assert_eq!(ep["data"].as_object().unwrap().values().next().unwrap(), node_ip);
    // cluster-bootstrap and the etcd render key off install-config's bootstrapInPlace.
    let cc = find("ConfigMap", "cluster-config-v1");
    let ic = cc["data"]["install-config"].as_str().unwrap();
    assert!(ic.contains("bootstrapInPlace") && ic.contains(DISK), "{ic}");
    // The bootstrap etcd is the node's member, under the installer's name.
    let etcd_pod = String::from_utf8_lossy(&files["/etc/kubernetes/manifests/etcd-bootstrap.yaml"]).to_string();
    assert!(
        etcd_pod.contains(&format!("--name=etcd-{node}")) && etcd_pod.contains(&format!("https://{node_ip}:2380")),
        "{etcd_pod}"
    );

    // install-to-disk: the installer's coreos-installer arguments, the disk as one word, real bash.
    let itd = String::from_utf8_lossy(&files[INSTALL_TO_DISK]).to_string();
    assert!(
        itd.contains(&format!("DISK={DISK}\n")) && itd.contains("coreos-installer install -n -i /opt/openshift/master.ign \"$DISK\""),
        "{itd}"
    );
    for carried in [
        "--carry /etc/kubernetes/manifests/kube-apiserver-bootstrap.yaml=/etc/kubernetes/manifests/kube-apiserver-pod.yaml",
        "--carry /opt/openshift/hardshift/etcd-pod.yaml=/etc/kubernetes/manifests/etcd-pod.yaml",
        "--carry /var/lib/etcd=/var/lib/etcd",
        "--carry /etc/kubernetes/bootstrap-secrets=/etc/kubernetes/bootstrap-secrets",
        "--carry /usr/local/bin/hardshift-agent=/usr/local/bin/hardshift-agent",
    ] {
        assert!(itd.contains(carried), "install-to-disk does not carry {carried}:\n{itd}");
    }
    let t = tempfile::tempdir().unwrap();
    for (name, p) in [("install-to-disk", INSTALL_TO_DISK), ("bootkube", "/usr/local/bin/bootkube.sh")] {
        let f = t.path().join(name);
        std::fs::write(&f, &files[p]).unwrap();
        let (ok, msg) = run("bash", &["-n", f.to_str().unwrap()]);
        assert!(ok, "{name}: {msg}");
    }

    // The master it becomes: a valid config of its own, with the post-reboot step, the agent's
    // config (the same identity, reporting as a master) and no second copy of the agent.
    let base = t.path().join("master-base.ign");
    std::fs::write(&base, &files[MASTER_BASE]).unwrap();
    let (ok, msg) = run("ignition-validate", &[base.to_str().unwrap()]);
    assert!(ok, "master base: {msg}");
    let master: Config = serde_json::from_slice(&files[MASTER_BASE]).unwrap();
    let mfiles = files_of(&master);
    assert!(units_of(&master).contains(&"hardshift-post-reboot.service".to_string()));
    assert!(
        !mfiles.contains_key("/usr/local/bin/hardshift-agent"),
        "the agent is carried, not copied twice"
    );
    assert!(
        mfiles.contains_key("/etc/kubernetes/kubeconfig"),
        "the kubelet's bootstrap kubeconfig"
    );
    let post = t.path().join("post-reboot");
    std::fs::write(&post, &mfiles[POST_REBOOT]).unwrap();
    let (ok, msg) = run("bash", &["-n", post.to_str().unwrap()]);
    assert!(ok, "post-reboot: {msg}");
    the_post_reboot_step_approves_by_the_rules(&String::from_utf8_lossy(&mfiles[POST_REBOOT]), node, node_ip);
    let agent_live = String::from_utf8_lossy(&files["/etc/hardshift/agent.toml"]).to_string();
    let agent_master = String::from_utf8_lossy(&mfiles["/etc/hardshift/agent.toml"]).to_string();
    for a in [&agent_live, &agent_master] {
        assert!(
            a.contains(&format!("node = \"{node}\"")) && a.contains("role = \"master\"") && a.contains("in_place_progress"),
            "{a}"
        );
    }
    assert!(agent_live.contains("bootkube_progress") && !agent_master.contains("bootkube_progress"));
    assert_eq!(
        files["/etc/hardshift/agent.crt"], mfiles["/etc/hardshift/agent.crt"],
        "one identity in both stages"
    );

    // The lab: api, api-int and *.apps at the node; PXE boots the live system with the config.
    let dns = std::fs::read_to_string(
        std::fs::read_dir(dir.join("lab/dnsmasq"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with("-dns.conf"))
            .unwrap(),
    )
    .unwrap();
    for name in ["api", "api-int"] {
        assert!(
            dns.lines()
                .any(|l| l.contains(&format!("/{name}.")) && l.ends_with(&format!("/{node_ip}"))),
            "{name}:\n{dns}"
        );
    }
    assert!(
        dns.lines().any(|l| l.contains("/apps.") && l.ends_with(&format!("/{node_ip}"))),
        "*.apps:\n{dns}"
    );
    let ipxe = std::fs::read_to_string(dir.join("lab/pxe/boot.ipxe")).unwrap();
    assert!(
        ipxe.contains("ignition.config.url=") && !ipxe.contains("coreos.inst.install_dev"),
        "{ipxe}"
    );
    // The install script refuses to install the live system's config to a disk.
    let installer = dir.join("lab/scripts/coreos-installer.sh");
    let out = std::process::Command::new("bash").arg(&installer).arg(node).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("iso ignition embed"), "{}", text(&out.stderr));
    let readme = std::fs::read_to_string(dir.join("lab/README.md")).unwrap();
    assert!(readme.contains("bootstrap-in-place") && readme.contains(DISK), "{readme}");

    // verify rebuilds it.
    let v = hardshift(&["verify", "--dir", dir.to_str().unwrap()]);
    assert!(v.status.success(), "verify: {}\n{}", text(&v.stdout), text(&v.stderr));
}

/// A CSR object as the API lists it, its request made by openssl.
/// (signer, username, groups, usages): what the API records of who asked, and for what.
type Asker<'a> = (&'a str, &'a str, &'a [&'a str], &'a [&'a str]);

fn csr_item(t: &Path, name: &str, (signer, user, groups, usages): Asker, subj: &str, san: Option<&str>) -> Value {
    use base64::Engine;
    let key = t.join(format!("{name}.key"));
    let mut args = vec![
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        key.to_str().unwrap(),
        "-subj",
        subj,
    ];
    let ext;
    if let Some(s) = san {
        ext = format!("subjectAltName={s}");
        args.extend(["-addext", &ext]);
    }
    let out = std::process::Command::new("openssl").args(&args).output().unwrap();
    assert!(out.status.success(), "openssl req: {}", text(&out.stderr));
    serde_json::json!({"metadata": {"name": name}, "spec": {"signerName": signer, "username": user,
        "groups": groups, "usages": usages,
        "request": base64::engine::general_purpose::STANDARD.encode(&out.stdout)}, "status": {}})
}

/// The post-reboot step approves what `hardshift-agent approve-csrs` decides for this node
/// alone, by `approve-csrs`'s rules: the node's client CSR from the bundle's bootstrap identity
/// (the installed kubelet's) and its serving CSR naming its own address; not the probe's
/// kube-apiserver-client CSR for O=system:masters from the node-bootstrapper (which the
/// machine-config server hands anyone), another node's, nor a serving CSR for a foreign address.
fn the_post_reboot_step_approves_by_the_rules(post: &str, node: &str, node_ip: &str) {
    let line = post
        .lines()
        .find(|l| l.contains("approve-csrs --node"))
        .unwrap_or_else(|| panic!("the post-reboot step does not ask hardshift-agent approve-csrs:\n{post}"));
    assert!(
        line.contains(&format!("--ip {node_ip} ")) && line.contains("--dns \"$NODE\""),
        "{line}"
    );
    assert!(post.contains(&format!("\nNODE={node}\n")), "{post}");
    assert!(!post.contains("node-bootstrapper|"), "no approval by username alone:\n{post}");
    let fqdn = line
        .split_whitespace()
        .skip_while(|w| *w != "--dns")
        .nth(3)
        .expect("the node's FQDN")
        .to_string();
    let t = tempfile::tempdir().unwrap();
    let tp = t.path();
    let client = "kubernetes.io/kube-apiserver-client-kubelet";
    let serving = "kubernetes.io/kubelet-serving";
    let sa = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
    let sa_groups = [
        "system:serviceaccounts",
        "system:serviceaccounts:openshift-machine-config-operator",
        "system:authenticated",
    ];
    let node_groups = ["system:nodes", "system:authenticated"];
    let cs = ["digital signature", "client auth"];
    let ss = ["digital signature", "key encipherment", "server auth"];
    let own = format!("/O=system:nodes/CN=system:node:{node}");
    let masters = format!("/O=system:masters/CN=system:node:{node}");
    const BOOT: &str = "system:bootstrapper";
    let boot_groups = ["system:authenticated"];
    let apiserver_client = "kubernetes.io/kube-apiserver-client";
    let node_user = format!("system:node:{node}");
    let own_sans = format!("DNS:{node},DNS:{fqdn},IP:{node_ip}");
    let foreign_sans = format!("DNS:{node},IP:203.0.113.9");
    let items = vec![
        csr_item(tp, "own-client", (client, BOOT, &boot_groups, &cs), &own, None),
        csr_item(tp, "probe-masters", (apiserver_client, sa, &sa_groups, &cs), &masters, None),
        csr_item(tp, "masters-as-kubelet", (client, sa, &sa_groups, &cs), &masters, None),
        csr_item(
            tp,
            "other-node",
            (client, BOOT, &boot_groups, &cs),
            "/O=system:nodes/CN=system:node:intruder",
            None,
        ),
        csr_item(tp, "own-serving", (serving, &node_user, &node_groups, &ss), &own, Some(&own_sans)),
        csr_item(
            tp,
            "foreign-ip",
            (serving, &node_user, &node_groups, &ss),
            &own,
            Some(&foreign_sans),
        ),
    ];
    let csrs = tp.join("csrs.json");
    let nodes = tp.join("nodes.json");
    std::fs::write(
        &csrs,
        serde_json::json!({"kind": "CertificateSigningRequestList", "items": items}).to_string(),
    )
    .unwrap();
    std::fs::write(&nodes, serde_json::json!({"kind": "NodeList", "items": []}).to_string()).unwrap();
    let out = std::process::Command::new(agent_bin())
        .args(["approve-csrs", "--node", node, "--ip", node_ip, "--dns", node, "--dns", &fqdn])
        .args(["--csrs", csrs.to_str().unwrap(), "--nodes", nodes.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let approved: Vec<&str> = stdout.lines().collect();
    assert_eq!(approved, ["own-client", "own-serving"], "{stderr}");
    for (name, why) in [
        ("probe-masters", "not a kubelet's"),
        ("masters-as-kubelet", "O must be exactly system:nodes"),
        ("other-node", "intruder is not a node of this cluster's inventory"),
        ("foreign-ip", "IP 203.0.113.9 is not"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&format!("refused {name}: ")) && l.contains(why)),
            "{name} should be refused for {why:?}:\n{stderr}"
        );
    }
}

#[test]
fn the_example_as_a_single_node_is_one_config_with_its_master_inside() {
    let d = single_node(example_copy());
    the_single_node_bundle(d.path(), "master-0", "192.168.126.101");
}

#[test]
fn a_second_lab_as_a_single_node() {
    let d = single_node(second_lab());
    the_single_node_bundle(d.path(), "cp-0", "10.20.30.101");
}

/// Each wrong combination: exit 2, the file, line and field named, nothing written.
#[test]
fn wrong_single_node_inputs_are_refused_where_they_are() {
    let cases: &[(&str, &str, &str, &str, &str, &str)] = &[
        // (file, from, to, expected in stderr, the file it is named in, the field)
        (
            "install-config.yaml",
            "  replicas: 1\n",
            "  replicas: 3\n",
            "requires a single control-plane replica",
            "install-config.yaml",
            "controlPlane.replicas",
        ),
        (
            "install-config.yaml",
            "  replicas: 0\n",
            "  replicas: 2\n",
            "has no workers",
            "install-config.yaml",
            "compute[0].replicas",
        ),
        (
            "install-config.yaml",
            DISK,
            "/dev/sda --append-karg rd.break",
            "contains ' '",
            "install-config.yaml",
            "bootstrapInPlace.installationDisk",
        ),
        (
            "install-config.yaml",
            DISK,
            "sda",
            "is not a device path",
            "install-config.yaml",
            "bootstrapInPlace.installationDisk",
        ),
        (
            "install-config.yaml",
            &format!("  installationDisk: {DISK}\n"),
            "  {}\n",
            "needs its installation disk",
            "agent-config.yaml",
            "hosts[0]",
        ),
    ];
    for (file, from, to, want, named_in, field) in cases {
        let d = single_node(example_copy());
        edit(d.path(), file, from, to);
        if *to == "  {}\n" {
            // `bootstrapInPlace: {}` with nothing under it.
            edit(d.path(), file, "bootstrapInPlace:\n  {}\n", "bootstrapInPlace: {}\n");
        }
        let out = hardshift(&["create", "--dir", d.path().to_str().unwrap(), "--self-contained-nodes"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {from:?} → {to:?}\n{err}");
        assert!(
            err.contains(want) && err.contains(field),
            "{file}: wanted {want:?} at {field}:\n{err}"
        );
        assert!(err.contains(&format!("{named_in}:")), "no {named_in}:line:col in\n{err}");
        assert!(
            !d.path().join("ignition").exists() && !d.path().join("pki").exists(),
            "something was written"
        );
    }
    // A bootstrap host beside bootstrapInPlace.
    let d = single_node(example_copy());
    let ac = d.path().join("agent-config.yaml");
    let full = std::fs::read_to_string(Path::new(EXAMPLE).join("agent-config.yaml")).unwrap();
    let hosts = full.split_once("\nhosts:\n").unwrap().1;
    let boot = hosts
        .split("\n- ")
        .map(|h| h.trim_start_matches("- "))
        .find(|h| h.contains("role: bootstrap"))
        .unwrap();
    let mine = std::fs::read_to_string(&ac).unwrap();
    std::fs::write(&ac, format!("{}- {boot}\n", mine)).unwrap();
    let out = hardshift(&["create", "--dir", d.path().to_str().unwrap(), "--self-contained-nodes"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("hosts[1].role") && err.contains("bootstraps itself"), "{err}");
    // The disk in agent-config's rootDeviceHints instead: accepted, and used.
    let d = single_node(example_copy());
    edit(d.path(), "install-config.yaml", &format!("  installationDisk: {DISK}\n"), "");
    edit(d.path(), "install-config.yaml", "bootstrapInPlace:\n", "bootstrapInPlace: {}\n");
    edit(
        d.path(),
        "agent-config.yaml",
        "  interfaces:\n",
        "  rootDeviceHints:\n    deviceName: /dev/nvme0n1\n  interfaces:\n",
    );
    create(d.path(), &[]);
    let files = node_files(d.path(), "master-0");
    assert!(String::from_utf8_lossy(&files[INSTALL_TO_DISK]).contains("DISK=/dev/nvme0n1\n"));
}

/// The on-node step for real: a real etcd's data, carried by the agent into the master's config,
/// validated by the real ignition-validate, then written out as Ignition would and read back by a
/// real etcd: the key written before the carry is there.
#[test]
fn etcds_data_survives_the_carry_into_the_masters_config() {
    let d = single_node(example_copy());
    create(d.path(), &[]);
    let files = node_files(d.path(), "master-0");
    let t = tempfile::tempdir().unwrap();
    let base = t.path().join("master-base.ign");
    std::fs::write(&base, &files[MASTER_BASE]).unwrap();
    // A real etcd writes a key, then stops (stop-etcd).
    let data = t.path().join("etcd");
    let port = free_port();
    let peer = free_port();
    let spawn = |dir: &Path| {
        Kill(
            std::process::Command::new("etcd")
                .args([
                    "--data-dir",
                    dir.to_str().unwrap(),
                    "--listen-client-urls",
                    &format!("http://127.0.0.1:{port}"),
                    "--advertise-client-urls",
                    &format!("http://127.0.0.1:{port}"),
                    "--listen-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                    "--initial-cluster",
                    &format!("default=http://127.0.0.1:{peer}"),
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("etcd"),
        )
    };
    let ep = format!("127.0.0.1:{port}");
    let etcdctl = |args: &[&str]| {
        let mut a = vec!["--endpoints", &ep];
        a.extend_from_slice(args);
        run("etcdctl", &a)
    };
    {
        let _etcd = spawn(&data);
        wait_for("etcd answers", 30, || etcdctl(&["endpoint", "health"]).0);
        assert!(etcdctl(&["put", "/hardshift/sno", "carried"]).0);
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = t.path().join("master.ign");
    let agent = agent_bin();
    let r = std::process::Command::new(&agent)
        .args([
            "in-place-config",
            "--base",
            base.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ])
        .arg("--carry")
        .arg(format!("{}=/var/lib/etcd", data.display()))
        .arg("--carry")
        .arg(format!("{}=/usr/local/bin/hardshift-agent", agent.display()))
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", text(&r.stderr));
    println!("{}", text(&r.stdout));
    let (ok, msg) = run("ignition-validate", &[out.to_str().unwrap()]);
    assert!(ok, "the made master config: {msg}");
    // Written out as Ignition writes files: each under a fresh root, with its mode.
    let cfg: Config = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let root = t.path().join("root");
    for f in &cfg.storage.files {
        if !f.path.starts_with("/var/lib/etcd/") && f.path != "/usr/local/bin/hardshift-agent" {
            continue;
        }
        let p = root.join(f.path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, decode(f.contents.as_ref().unwrap()).unwrap()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(f.mode.unwrap_or(0o644))).unwrap();
    }
    assert_eq!(
        std::fs::read(root.join("usr/local/bin/hardshift-agent")).unwrap(),
        std::fs::read(&agent).unwrap()
    );
    let _etcd = spawn(&root.join("var/lib/etcd"));
    wait_for("the carried etcd answers", 30, || etcdctl(&["endpoint", "health"]).0);
    let (ok, got) = etcdctl(&["get", "/hardshift/sno", "--print-value-only"]);
    assert!(ok && got.trim() == "carried", "{got}");
}

/// The generated install-to-disk step itself, run by real bash on a machine without the disk: it
/// stops at once (before etcd is touched), names the machine's own disks, and the real agent
/// reports that record as the failing bootstrap-in-place component the collector's HS090 reads.
#[test]
fn a_missing_installation_disk_stops_the_step_first_and_is_reported() {
    let d = single_node(example_copy());
    edit(
        d.path(),
        "install-config.yaml",
        DISK,
        "/dev/disk/by-id/wwn-0xhardshift-no-such-disk",
    );
    create(d.path(), &[]);
    let files = node_files(d.path(), "master-0");
    let t = tempfile::tempdir().unwrap();
    let progress = t.path().join("in-place.json");
    let assets = t.path().join("opt-openshift");
    // The same script with its state in the temp dir.
    let script: String = String::from_utf8_lossy(&files[INSTALL_TO_DISK])
        .lines()
        .map(|l| match l {
            l if l.starts_with("PROGRESS=") => format!("PROGRESS={}", progress.display()),
            l if l.starts_with("ASSETS=") => format!("ASSETS={}", assets.display()),
            l => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!script.contains("/var/lib/hardshift/in-place.json"));
    let path = t.path().join("install-to-disk.sh");
    std::fs::write(&path, script).unwrap();
    let out = std::process::Command::new("bash").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let rec: Value = serde_json::from_slice(&std::fs::read(&progress).unwrap()).unwrap();
    assert_eq!(rec["stage"], "installation-disk");
    assert_eq!(rec["result"], "failed");
    let err = rec["lastError"].as_str().unwrap();
    assert!(
        err.contains("no-such-disk not found") && err.contains("this machine's disks"),
        "{err}"
    );
    assert!(
        !assets.join(".bootkube.done").exists() && !text(&out.stdout).contains("stop-etcd"),
        "it went on"
    );
    // The agent's view of it.
    let mut cfg = probe_config("master-0");
    cfg.in_place_progress = Some(progress.clone());
    let cfg_path = t.path().join("agent.toml");
    write_agent_config(&cfg_path, &cfg);
    let (ok, out) = run(
        agent_bin().to_str().unwrap(),
        &["--config", cfg_path.to_str().unwrap(), "status", "--json"],
    );
    assert!(ok, "{out}");
    let v: Value = serde_json::from_str(out.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    let c = v["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "bootstrap-in-place")
        .unwrap()
        .clone();
    assert_eq!(c["state"], "installation-disk: failed", "{c}");
    assert_eq!(c["details"]["stage"], "installation-disk");
    assert!(c["reason"].as_str().unwrap().contains("not found"), "{c}");
}
